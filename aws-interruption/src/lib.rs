//! # karpenter-aws-interruption
//!
//! The messages EventBridge delivers to Karpenter's SQS interruption queue — EC2 spot
//! interruption warnings, rebalance recommendations, instance state changes and AWS Health
//! scheduled changes — parsed into [`InterruptionEvent`]s by [`parse_message`].
//!
//! Pure: no AWS SDK, no clock read, no I/O. The SQS poller in `karpenter-cloudprovider-aws`
//! receives the bodies and calls this parser; keeping it apart lets the parser be tested and
//! fuzzed without compiling the SDK. Every input gives `Ok` or a [`MessageError`], never a
//! panic.
//!
//! [`instance_status`] holds the decisions of the other interruption source, EC2's instance
//! status checks (DescribeInstanceStatus), which end in the same [`InterruptionEvent`]s.
#![forbid(unsafe_code)]

pub mod instance_status;

use std::time::SystemTime;

/// What happened to an instance: the one interruption kind of karpenter-rs, also the
/// interruption notice of `karpenter-disruption`'s `NodeInfo` (with feature `serde`, which
/// still reads that crate's former spellings `ScheduledMaintenance`, `InstanceStopping` and
/// `InstanceTerminating`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum InterruptionKind {
    /// EC2 will reclaim the spot instance in two minutes.
    SpotInterruption,
    /// EC2 recommends rebalancing away from the spot instance.
    RebalanceRecommendation,
    /// AWS Health scheduled maintenance affecting the instance.
    #[cfg_attr(feature = "serde", serde(alias = "ScheduledMaintenance"))]
    ScheduledChange,
    /// The instance is stopping or stopped.
    #[cfg_attr(feature = "serde", serde(alias = "InstanceStopping"))]
    InstanceStopped,
    /// The instance is shutting down or terminated.
    #[cfg_attr(feature = "serde", serde(alias = "InstanceTerminating"))]
    InstanceTerminated,
    /// EC2 reclaims the capacity of the interruptible capacity reservation the instance
    /// runs in, in two minutes.
    CapacityReservationInterruption,
    /// EC2's instance status check (the instance's own OS and network) has failed for
    /// at least [`instance_status::UNHEALTHY_THRESHOLD`].
    InstanceStatus,
    /// EC2's system status check (the host underneath) has failed for at least
    /// [`instance_status::UNHEALTHY_THRESHOLD`].
    SystemStatus,
    /// EC2 scheduled a maintenance event (reboot, retirement, stop) for the instance.
    EventStatus,
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
            Self::CapacityReservationInterruption => "capacity_reservation_interrupted",
            Self::InstanceStatus => "instance_status",
            Self::SystemStatus => "system_status",
            Self::EventStatus => "event_status",
        }
    }

    /// The reason of the Kubernetes events Karpenter publishes on the NodeClaim and its Node
    /// for the kind.
    pub fn event_reason(self) -> &'static str {
        match self {
            Self::SpotInterruption => "SpotInterrupted",
            Self::RebalanceRecommendation => "SpotRebalanceRecommendation",
            Self::ScheduledChange
            | Self::InstanceStatus
            | Self::SystemStatus
            | Self::EventStatus => "InstanceUnhealthy",
            Self::InstanceStopped => "InstanceStopping",
            Self::InstanceTerminated => "InstanceTerminating",
            Self::CapacityReservationInterruption => "CapacityReservationInstanceInterrupted",
        }
    }

    /// Whether Karpenter replaces the node (cordon, drain, delete the NodeClaim). A
    /// rebalance recommendation is only recorded.
    pub fn triggers_replacement(self) -> bool {
        !matches!(self, Self::RebalanceRecommendation)
    }

    /// Whether the NodeClaim is marked for immediate termination (its
    /// `karpenter.sh/nodeclaim-termination-timestamp` set to now) before it is deleted, so
    /// the drain does not wait out the grace period: a failed status check means the
    /// instance or its host is already broken. Every other replacing kind drains normally.
    pub fn forceful(self) -> bool {
        matches!(self, Self::InstanceStatus | Self::SystemStatus)
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
    text.and_then(|t| t.parse::<jiff::Timestamp>().ok())
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
        ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning") => {
            one(InterruptionKind::CapacityReservationInterruption)
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

/// Real EventBridge message bodies, as AWS documents them, for tests and examples.
pub mod samples {
    /// An EC2 spot instance interruption warning for `instance_id`.
    pub fn spot_interruption(instance_id: &str) -> String {
        format!(
            r#"{{"version":"0","id":"1e5527d7-bb36-4607-3370-4164db56a40e","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":"2026-01-02T20:44:53Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1b:instance/{instance_id}"],"detail":{{"instance-id":"{instance_id}","instance-action":"terminate"}}}}"#
        )
    }

    /// An EC2 capacity reservation interruption warning for `instance_id` (an interruptible
    /// reservation's capacity is reclaimed).
    pub fn capacity_reservation_interruption(instance_id: &str) -> String {
        format!(
            r#"{{"version":"0","id":"2a3b4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c6d","detail-type":"EC2 Capacity Reservation Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":"2026-01-02T20:44:53Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1:123456789012:instance/{instance_id}"],"detail":{{"instance-id":"{instance_id}","instance-action":"terminate"}}}}"#
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

#[doc(hidden)]
pub mod fuzzing;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_reasons_are_karpenters() {
        let reasons = [
            InterruptionKind::SpotInterruption,
            InterruptionKind::RebalanceRecommendation,
            InterruptionKind::ScheduledChange,
            InterruptionKind::InstanceStopped,
            InterruptionKind::InstanceTerminated,
            InterruptionKind::CapacityReservationInterruption,
        ]
        .map(InterruptionKind::event_reason);
        assert_eq!(
            reasons,
            [
                "SpotInterrupted",
                "SpotRebalanceRecommendation",
                "InstanceUnhealthy",
                "InstanceStopping",
                "InstanceTerminating",
                "CapacityReservationInstanceInterrupted",
            ]
        );
    }

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
            (
                samples::capacity_reservation_interruption("i-1"),
                InterruptionKind::CapacityReservationInterruption,
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
        assert!(InterruptionKind::CapacityReservationInterruption.triggers_replacement());
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
