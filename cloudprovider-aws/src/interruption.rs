//! The interruption queue: EventBridge delivers EC2 spot interruption warnings, rebalance
//! recommendations, AWS Health scheduled changes and instance state changes to an SQS
//! queue; [`InterruptionPoller`] long-polls it, parses each message ([`parse_message`]),
//! maps the instance to its NodeClaim and hands a [`NodeClaimInterruption`] to the
//! disruption path (an [`InterruptionSink`]). A message is deleted only once every event
//! in it was handled, so a failed action is retried after the visibility timeout;
//! malformed messages are counted and deleted, so a poison message cannot block the queue.
//!
//! The message types and the parser live in the pure `karpenter-aws-interruption` crate
//! (re-exported here unchanged), so they are tested and fuzzed without the AWS SDK.

use crate::error::AwsError;
pub use karpenter_aws_interruption::{
    InterruptionEvent, InterruptionKind, MessageError, parse_message, samples,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// An interruption matched to the NodeClaim that owns the instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeClaimInterruption {
    /// NodeClaim name.
    pub node_claim: String,
    /// The event.
    pub event: InterruptionEvent,
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

impl SinkError {
    /// What failed acting on `node_claim`.
    pub fn new(node_claim: &str, error: impl std::fmt::Display) -> Self {
        Self {
            node_claim: node_claim.to_owned(),
            message: error.to_string(),
        }
    }
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

    /// [`InterruptionPoller::new`], retried every 10 seconds until the queue resolves (it
    /// may be created by the same stack as the cluster, after Karpenter starts); `None` once
    /// `shutdown` turns true.
    pub async fn connect(
        sqs: aws_sdk_sqs::Client,
        queue: &str,
        sink: Arc<dyn InterruptionSink>,
        clock: Arc<dyn crate::cache::Clock>,
        shutdown: &tokio::sync::watch::Receiver<bool>,
    ) -> Option<Self> {
        loop {
            match Self::new(sqs.clone(), queue, sink.clone(), clock.clone()).await {
                Ok(p) => return Some(p),
                Err(e) => {
                    tracing::error!(queue, error = %e, "resolving the interruption queue failed; retrying in 10s");
                    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
                    if *shutdown.borrow() {
                        return None;
                    }
                }
            }
        }
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

/// Starts both interruption sources for the leader, each delivering to `sink` until
/// `shutdown` turns true: EC2's instance status checks
/// ([`crate::instance_status::InstanceStatusWatcher`], always; with `dry_run` only
/// counted), and the SQS queue when one is configured (resolved, then long-polled).
pub fn spawn_sources(
    clients: &crate::AwsClients,
    queue: Option<String>,
    sink: Arc<dyn InterruptionSink>,
    dry_run: bool,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let clock: Arc<dyn crate::cache::Clock> = Arc::new(crate::cache::SystemClock);
    let (ec2, observer) = (clients.ec2.clone(), clients.observer.clone());
    let watcher = crate::instance_status::InstanceStatusWatcher::new(
        ec2,
        sink.clone(),
        observer,
        clock.clone(),
        dry_run,
    );
    tokio::spawn(watcher.run(shutdown.clone()));
    let Some(queue) = queue else {
        tracing::info!("no interruption queue configured; spot interruptions are not handled");
        return;
    };
    let sqs = clients.sqs.clone();
    tokio::spawn(async move {
        let connecting = InterruptionPoller::connect(sqs, &queue, sink, clock, &shutdown);
        let Some(poller) = connecting.await else {
            return;
        };
        tracing::info!(queue = poller.queue_url(), "watching interruption queue");
        poller.run(shutdown).await;
    });
}
