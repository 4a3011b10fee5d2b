//! The interruption queue: EventBridge delivers EC2 spot interruption warnings, rebalance
//! recommendations, AWS Health scheduled changes and instance state changes to an SQS
//! queue; [`InterruptionPoller`] long-polls it, parses each message ([`parse_message`]),
//! maps the instance to its NodeClaim and hands a [`NodeClaimInterruption`] to the
//! disruption path (an [`InterruptionSink`]). A message is deleted only once every event
//! in it was handled, so a failed action is retried after the visibility timeout;
//! malformed messages are counted and deleted, so a poison message cannot block the queue.

use crate::error::AwsError;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// What happened to an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InterruptionKind {
    /// EC2 will reclaim the spot instance in two minutes.
    SpotInterruption,
    /// EC2 recommends rebalancing away from the spot instance.
    RebalanceRecommendation,
    /// AWS Health scheduled maintenance affecting the instance.
    ScheduledChange,
    /// The instance is stopping or stopped.
    InstanceStopped,
    /// The instance is shutting down or terminated.
    InstanceTerminated,
}

impl InterruptionKind {
    /// Karpenter's name for the kind (metrics label).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SpotInterruption => "spot_interrupted",
            Self::RebalanceRecommendation => "rebalance_recommendation",
            Self::ScheduledChange => "scheduled_change",
            Self::InstanceStopped => "instance_stopped",
            Self::InstanceTerminated => "instance_terminated",
        }
    }

    /// Whether Karpenter replaces the node (cordon, drain, delete the NodeClaim). A
    /// rebalance recommendation is only recorded.
    pub fn triggers_replacement(self) -> bool {
        !matches!(self, Self::RebalanceRecommendation)
    }
}

/// One interruption of one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterruptionEvent {
    /// The EC2 instance id.
    pub instance_id: String,
    /// What happened.
    pub kind: InterruptionKind,
    /// The event's time (EventBridge `time`; receipt time when absent or unparsable).
    pub time: SystemTime,
}

/// An interruption matched to the NodeClaim that owns the instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeClaimInterruption {
    /// NodeClaim name.
    pub node_claim: String,
    /// The event.
    pub event: InterruptionEvent,
}

/// Why a message could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// Not JSON.
    #[error("message body is not JSON: {0}")]
    NotJson(String),
    /// A required field is missing.
    #[error("message lacks {0}")]
    Missing(&'static str),
}

fn parse_time(text: Option<&str>, fallback: SystemTime) -> SystemTime {
    text.and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map_or(fallback, SystemTime::from)
}

/// Parses one EventBridge message body into events (a Health event may name several
/// instances). `Ok(empty)` for well-formed events Karpenter ignores (other sources or
/// detail types, state changes to `pending`/`running`); `Err` for malformed messages.
/// `received` stands in for a missing `time`.
pub fn parse_message(
    body: &str,
    received: SystemTime,
) -> Result<Vec<InterruptionEvent>, MessageError> {
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| MessageError::NotJson(e.to_string()))?;
    let source = v
        .get("source")
        .and_then(|s| s.as_str())
        .ok_or(MessageError::Missing("source"))?;
    let detail_type = v
        .get("detail-type")
        .and_then(|s| s.as_str())
        .ok_or(MessageError::Missing("detail-type"))?;
    let detail = v.get("detail").ok_or(MessageError::Missing("detail"))?;
    let time = parse_time(v.get("time").and_then(|t| t.as_str()), received);
    let instance_id = || {
        detail
            .get("instance-id")
            .and_then(|i| i.as_str())
            .filter(|i| !i.is_empty())
            .map(str::to_string)
            .ok_or(MessageError::Missing("detail.instance-id"))
    };
    let one = |kind| -> Result<Vec<InterruptionEvent>, MessageError> {
        Ok(vec![InterruptionEvent {
            instance_id: instance_id()?,
            kind,
            time,
        }])
    };
    match (source, detail_type) {
        ("aws.ec2", "EC2 Spot Instance Interruption Warning") => {
            one(InterruptionKind::SpotInterruption)
        }
        ("aws.ec2", "EC2 Instance Rebalance Recommendation") => {
            one(InterruptionKind::RebalanceRecommendation)
        }
        ("aws.ec2", "EC2 Instance State-change Notification") => {
            let state = detail
                .get("state")
                .and_then(|s| s.as_str())
                .ok_or(MessageError::Missing("detail.state"))?;
            match state {
                "stopping" | "stopped" => one(InterruptionKind::InstanceStopped),
                "shutting-down" | "terminated" => one(InterruptionKind::InstanceTerminated),
                _ => Ok(Vec::new()),
            }
        }
        ("aws.health", "AWS Health Event") => {
            let service = detail.get("service").and_then(|s| s.as_str());
            let category = detail.get("eventTypeCategory").and_then(|s| s.as_str());
            if service != Some("EC2") || category != Some("scheduledChange") {
                return Ok(Vec::new());
            }
            let entities = detail
                .get("affectedEntities")
                .and_then(|e| e.as_array())
                .ok_or(MessageError::Missing("detail.affectedEntities"))?;
            Ok(entities
                .iter()
                .filter_map(|e| e.get("entityValue").and_then(|v| v.as_str()))
                .filter(|id| id.starts_with("i-"))
                .map(|id| InterruptionEvent {
                    instance_id: id.to_string(),
                    kind: InterruptionKind::ScheduledChange,
                    time,
                })
                .collect())
        }
        _ => Ok(Vec::new()),
    }
}

/// Counters of the poller (exported as metrics by the operator).
#[derive(Debug, Default)]
pub struct InterruptionMetrics {
    /// Messages received.
    pub received: AtomicU64,
    /// Events delivered to the disruption path.
    pub delivered: AtomicU64,
    /// Events for instances no NodeClaim owns.
    pub unmatched: AtomicU64,
    /// Messages that did not parse.
    pub malformed: AtomicU64,
    /// Messages left in the queue because the sink could not act on one of their events.
    pub failed: AtomicU64,
    /// Messages deleted from the queue.
    pub deleted: AtomicU64,
}

/// What one poll did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollStats {
    /// Messages received.
    pub received: u64,
    /// Events delivered.
    pub delivered: u64,
    /// Events for unknown instances.
    pub unmatched: u64,
    /// Malformed messages.
    pub malformed: u64,
    /// Messages kept for a retry because delivering one of their events failed.
    pub failed: u64,
    /// Messages deleted.
    pub deleted: u64,
}

/// Why a sink could not act on an interruption. The message stays in the queue and is
/// received again once its visibility timeout expires, so nothing is lost to a transient
/// API error or a crash between receipt and action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("handling the interruption of NodeClaim {node_claim:?}: {message}")]
pub struct SinkError {
    /// The NodeClaim.
    pub node_claim: String,
    /// What failed.
    pub message: String,
}

/// Where parsed interruptions go: the disruption path of whoever runs the poller.
#[async_trait::async_trait]
pub trait InterruptionSink: Send + Sync {
    /// The NodeClaim that owns `instance_id`, if any.
    fn node_claim_for(&self, instance_id: &str) -> Option<String>;

    /// Acts on one interruption. Only after every event of a message was delivered with
    /// `Ok` is the message deleted.
    async fn deliver(&self, interruption: NodeClaimInterruption) -> Result<(), SinkError>;

    /// Called for every parsed event, matched or not (metrics). The default does nothing.
    fn observe(&self, _event: &InterruptionEvent) {}

    /// Called for every message deleted from the queue (metrics). The default does nothing.
    fn deleted(&self) {}
}

/// A sink that looks NodeClaims up in a map and forwards interruptions over a channel.
/// Delivery fails only once the receiver is gone.
#[derive(Debug, Clone)]
pub struct ChannelSink {
    /// Instance id → NodeClaim name.
    pub owners: std::collections::BTreeMap<String, String>,
    /// Where interruptions go.
    pub tx: tokio::sync::mpsc::UnboundedSender<NodeClaimInterruption>,
}

#[async_trait::async_trait]
impl InterruptionSink for ChannelSink {
    fn node_claim_for(&self, instance_id: &str) -> Option<String> {
        self.owners.get(instance_id).cloned()
    }

    async fn deliver(&self, interruption: NodeClaimInterruption) -> Result<(), SinkError> {
        let node_claim = interruption.node_claim.clone();
        self.tx.send(interruption).map_err(|_| SinkError {
            node_claim,
            message: "the receiver is closed".into(),
        })
    }
}

/// Long-polls the interruption queue.
#[derive(Clone)]
pub struct InterruptionPoller {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    wait_time_seconds: i32,
    sink: Arc<dyn InterruptionSink>,
    metrics: Arc<InterruptionMetrics>,
    clock: Arc<dyn crate::cache::Clock>,
}

impl std::fmt::Debug for InterruptionPoller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterruptionPoller")
            .field("queue_url", &self.queue_url)
            .field("wait_time_seconds", &self.wait_time_seconds)
            .finish_non_exhaustive()
    }
}

impl InterruptionPoller {
    /// A poller for `queue` (a URL, or a name resolved with GetQueueUrl) delivering to
    /// `sink`, with 20-second long polls.
    pub async fn new(
        sqs: aws_sdk_sqs::Client,
        queue: &str,
        sink: Arc<dyn InterruptionSink>,
        clock: Arc<dyn crate::cache::Clock>,
    ) -> Result<Self, AwsError> {
        let queue_url = if queue.starts_with("https://") || queue.starts_with("http://") {
            queue.to_string()
        } else {
            sqs.get_queue_url()
                .queue_name(queue)
                .send()
                .await
                .map_err(|e| AwsError::api("GetQueueUrl", e))?
                .queue_url()
                .ok_or_else(|| AwsError::InvalidResponse {
                    operation: "GetQueueUrl",
                    message: format!("no URL for queue {queue:?}"),
                })?
                .to_string()
        };
        Ok(Self {
            sqs,
            queue_url,
            wait_time_seconds: 20,
            sink,
            metrics: Arc::new(InterruptionMetrics::default()),
            clock,
        })
    }

    /// Sets the long-poll wait (0–20 seconds).
    pub fn with_wait_time(mut self, seconds: i32) -> Self {
        self.wait_time_seconds = seconds.clamp(0, 20);
        self
    }

    /// The queue URL.
    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    /// The cumulative counters.
    pub fn metrics(&self) -> Arc<InterruptionMetrics> {
        self.metrics.clone()
    }

    /// Delivers the events of one message; `false` when any delivery failed (the message
    /// is then kept for a retry).
    async fn deliver_all(&self, events: Vec<InterruptionEvent>, stats: &mut PollStats) -> bool {
        let mut ok = true;
        for event in events {
            self.sink.observe(&event);
            let Some(node_claim) = self.sink.node_claim_for(&event.instance_id) else {
                stats.unmatched += 1;
                continue;
            };
            tracing::info!(
                node_claim,
                instance_id = event.instance_id,
                kind = event.kind.as_str(),
                "interruption"
            );
            match self
                .sink
                .deliver(NodeClaimInterruption { node_claim, event })
                .await
            {
                Ok(()) => stats.delivered += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "interruption not handled; the message is kept for a retry");
                    ok = false;
                }
            }
        }
        ok
    }

    /// Receives up to 10 messages (waiting up to the long-poll time), delivers their
    /// events, and deletes every message that was fully handled or is malformed.
    pub async fn poll_once(&self) -> Result<PollStats, AwsError> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(self.wait_time_seconds)
            .send()
            .await
            .map_err(|e| AwsError::api("ReceiveMessage", e))?;
        let mut stats = PollStats::default();
        for msg in out.messages() {
            stats.received += 1;
            let handled = match parse_message(msg.body().unwrap_or_default(), self.clock.now()) {
                Ok(events) => self.deliver_all(events, &mut stats).await,
                Err(e) => {
                    // A message that cannot be parsed never will be: deleting it keeps a
                    // poison message from blocking the queue.
                    tracing::warn!(error = %e, "malformed interruption message");
                    stats.malformed += 1;
                    true
                }
            };
            if !handled {
                stats.failed += 1;
                continue;
            }
            if let Some(handle) = msg.receipt_handle() {
                self.sqs
                    .delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(handle)
                    .send()
                    .await
                    .map_err(|e| AwsError::api("DeleteMessage", e))?;
                stats.deleted += 1;
                self.sink.deleted();
            }
        }
        let m = &self.metrics;
        m.received.fetch_add(stats.received, Ordering::Relaxed);
        m.delivered.fetch_add(stats.delivered, Ordering::Relaxed);
        m.unmatched.fetch_add(stats.unmatched, Ordering::Relaxed);
        m.malformed.fetch_add(stats.malformed, Ordering::Relaxed);
        m.failed.fetch_add(stats.failed, Ordering::Relaxed);
        m.deleted.fetch_add(stats.deleted, Ordering::Relaxed);
        Ok(stats)
    }

    /// Polls until `shutdown` turns true, logging and backing off one second after errors.
    pub async fn run(self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        loop {
            if *shutdown.borrow() {
                return;
            }
            tokio::select! {
                res = self.poll_once() => {
                    if let Err(e) = res {
                        tracing::warn!(error = %e, "polling the interruption queue failed");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}

/// Real EventBridge message bodies, as AWS documents them, for tests and examples.
pub mod samples {
    /// An EC2 spot instance interruption warning for `instance_id`.
    pub fn spot_interruption(instance_id: &str) -> String {
        format!(
            r#"{{"version":"0","id":"1e5527d7-bb36-4607-3370-4164db56a40e","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":"2026-01-02T20:44:53Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1b:instance/{instance_id}"],"detail":{{"instance-id":"{instance_id}","instance-action":"terminate"}}}}"#
        )
    }

    /// An EC2 instance rebalance recommendation for `instance_id`.
    pub fn rebalance_recommendation(instance_id: &str) -> String {
        format!(
            r#"{{"version":"0","id":"5d5555d5-dd55-5555-5555-5555dd55d55d","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","account":"123456789012","time":"2026-01-02T20:44:53Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1b:instance/{instance_id}"],"detail":{{"instance-id":"{instance_id}"}}}}"#
        )
    }

    /// An EC2 instance state-change notification for `instance_id` entering `state`.
    pub fn state_change(instance_id: &str, state: &str) -> String {
        format!(
            r#"{{"version":"0","id":"7bf73129-1428-4cd3-a780-95db273d1602","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","account":"123456789012","time":"2026-01-02T20:44:53Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1:123456789012:instance/{instance_id}"],"detail":{{"instance-id":"{instance_id}","state":"{state}"}}}}"#
        )
    }

    /// An AWS Health scheduled-change event affecting `instance_id`.
    pub fn scheduled_change(instance_id: &str) -> String {
        format!(
            r#"{{"version":"0","id":"7fb65329-1628-4cf3-a740-95fg457h1402","detail-type":"AWS Health Event","source":"aws.health","account":"123456789012","time":"2026-01-02T20:44:53Z","region":"us-east-1","resources":[],"detail":{{"eventArn":"arn:aws:health:us-east-1::event/EC2/EC2_INSTANCE_RETIREMENT_SCHEDULED/EC2_INSTANCE_RETIREMENT_SCHEDULED_ABC123","service":"EC2","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","eventTypeCategory":"scheduledChange","startTime":"Sat, 05 Jun 2026 15:10:09 GMT","eventDescription":[{{"language":"en_US","latestDescription":"retirement"}}],"affectedEntities":[{{"entityValue":"{instance_id}"}}]}}}}"#
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_event_kind() {
        let now = SystemTime::UNIX_EPOCH;
        let t = parse_time(Some("2026-01-02T20:44:53Z"), now);
        for (body, kind) in [
            (
                samples::spot_interruption("i-1"),
                InterruptionKind::SpotInterruption,
            ),
            (
                samples::rebalance_recommendation("i-1"),
                InterruptionKind::RebalanceRecommendation,
            ),
            (
                samples::scheduled_change("i-1"),
                InterruptionKind::ScheduledChange,
            ),
            (
                samples::state_change("i-1", "stopping"),
                InterruptionKind::InstanceStopped,
            ),
            (
                samples::state_change("i-1", "stopped"),
                InterruptionKind::InstanceStopped,
            ),
            (
                samples::state_change("i-1", "shutting-down"),
                InterruptionKind::InstanceTerminated,
            ),
            (
                samples::state_change("i-1", "terminated"),
                InterruptionKind::InstanceTerminated,
            ),
        ] {
            assert_eq!(
                parse_message(&body, now),
                Ok(vec![InterruptionEvent {
                    instance_id: "i-1".into(),
                    kind,
                    time: t
                }]),
                "{body}"
            );
        }
        assert_ne!(t, now);
        assert!(!InterruptionKind::RebalanceRecommendation.triggers_replacement());
        assert!(InterruptionKind::SpotInterruption.triggers_replacement());
    }

    #[test]
    fn ignores_and_rejects() {
        let now = SystemTime::UNIX_EPOCH;
        assert_eq!(
            parse_message(&samples::state_change("i-1", "running"), now),
            Ok(vec![])
        );
        assert_eq!(
            parse_message(&samples::state_change("i-1", "pending"), now),
            Ok(vec![])
        );
        assert_eq!(
            parse_message(
                r#"{"source":"aws.s3","detail-type":"Object Created","detail":{}}"#,
                now
            ),
            Ok(vec![])
        );
        assert!(matches!(
            parse_message("{not json", now),
            Err(MessageError::NotJson(_))
        ));
        assert_eq!(
            parse_message(r#"{"detail-type":"x","detail":{}}"#, now),
            Err(MessageError::Missing("source"))
        );
        assert_eq!(
            parse_message(
                r#"{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":{}}"#,
                now
            ),
            Err(MessageError::Missing("detail.instance-id"))
        );
        // Missing time falls back to the receipt time.
        let ev = parse_message(
            r#"{"source":"aws.ec2","detail-type":"EC2 Instance Rebalance Recommendation","detail":{"instance-id":"i-9"}}"#,
            now,
        )
        .expect("parses");
        assert_eq!(ev[0].time, now);
    }
}
