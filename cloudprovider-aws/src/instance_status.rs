//! EC2 instance status checks as a second interruption source, as Karpenter v1.14's AWS
//! provider has it: once a minute [`InstanceStatusWatcher`] reads DescribeInstanceStatus,
//! and every instance a NodeClaim owns whose instance or system check has been failing for
//! two minutes, or which has a scheduled maintenance event, is handed to the same
//! [`InterruptionSink`] as the queue's messages: failed checks as `instance_status` /
//! `system_status` (the claim is marked for immediate termination and deleted), events as
//! `event_status` (deleted and drained as usual). Each unhealthy status is reported once
//! to the observer while it lasts.
//!
//! The decisions are the pure `karpenter_aws_interruption::instance_status`; this module
//! reads EC2 and acts.

use crate::cache::Clock;
use crate::error::AwsError;
use crate::interruption::{InterruptionSink, NodeClaimInterruption};
use crate::observe::ObserverSlot;
use aws_sdk_ec2::types::{Filter, InstanceStatus, InstanceStatusSummary};
pub use karpenter_aws_interruption::instance_status::{
    InstanceStatusReport, POLL_INTERVAL, QUERIES, StatusCategory, StatusDetail,
    UNHEALTHY_THRESHOLD, UnhealthyInstance, UnhealthySeen, unhealthy,
};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

fn time_of(t: Option<&aws_smithy_types::DateTime>) -> Option<SystemTime> {
    t.and_then(|t| SystemTime::try_from(*t).ok())
}

fn checks(
    category: StatusCategory,
    summary: Option<&InstanceStatusSummary>,
) -> impl Iterator<Item = StatusDetail> + '_ {
    let details = summary
        .map(InstanceStatusSummary::details)
        .unwrap_or_default();
    details.iter().map(move |d| {
        let name = d.name().map(|n| n.as_str()).unwrap_or_default();
        let status = d.status().map(|s| s.as_str()).unwrap_or_default();
        StatusDetail::check(category, name, status, time_of(d.impaired_since()))
    })
}

/// The pure report of one SDK status (an id-less status gets an empty id, which no
/// NodeClaim owns).
pub fn report_of(status: &InstanceStatus) -> InstanceStatusReport {
    let ebs = status
        .attached_ebs_status()
        .map(|s| s.details())
        .unwrap_or_default();
    let ebs = ebs.iter().map(|d| {
        let name = d.name().map(|n| n.as_str()).unwrap_or_default();
        let state = d.status().map(|s| s.as_str()).unwrap_or_default();
        let since = time_of(d.impaired_since());
        StatusDetail::check(StatusCategory::EbsStatus, name, state, since)
    });
    let events = status
        .events()
        .iter()
        .map(|e| StatusDetail::event(e.code().map(|c| c.as_str()).unwrap_or_default()));
    let details = checks(StatusCategory::InstanceStatus, status.instance_status())
        .chain(checks(StatusCategory::SystemStatus, status.system_status()))
        .chain(ebs)
        .chain(events)
        .collect();
    InstanceStatusReport {
        instance_id: status.instance_id().unwrap_or_default().to_owned(),
        details,
    }
}

/// Every status the [`QUERIES`] return (all pages of each), in query order. An instance may
/// appear more than once; [`unhealthy`] keeps its first report.
///
/// # Errors
/// A DescribeInstanceStatus call failed (`UnauthorizedOperation` when the role lacks
/// `ec2:DescribeInstanceStatus`).
pub async fn describe(ec2: &aws_sdk_ec2::Client) -> Result<Vec<InstanceStatusReport>, AwsError> {
    let mut reports = Vec::new();
    for (name, values) in QUERIES {
        let filter = Filter::builder()
            .name(name)
            .set_values(Some(values.iter().map(|v| (*v).to_owned()).collect()))
            .build();
        let mut token: Option<String> = None;
        loop {
            let out = ec2
                .describe_instance_status()
                .filters(filter.clone())
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| AwsError::api("DescribeInstanceStatus", e))?;
            reports.extend(out.instance_statuses().iter().map(report_of));
            match out.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                _ => break,
            }
        }
    }
    Ok(reports)
}

/// What one check did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckStats {
    /// Unhealthy instances EC2 reported (the cluster's or not).
    pub unhealthy: usize,
    /// Interruptions handed to the sink.
    pub delivered: usize,
    /// Unhealthy statuses of the cluster's instances reported to the observer this time
    /// (each once while it lasts).
    pub newly_unhealthy: Vec<(String, StatusCategory)>,
    /// Sink failures (the next check tries again).
    pub failed: Vec<String>,
}

/// Polls EC2's instance status checks and acts on the unhealthy instances the cluster owns.
pub struct InstanceStatusWatcher {
    ec2: aws_sdk_ec2::Client,
    sink: Arc<dyn InterruptionSink>,
    observer: ObserverSlot,
    clock: Arc<dyn Clock>,
    dry_run: bool,
    seen: Mutex<UnhealthySeen>,
}

impl std::fmt::Debug for InstanceStatusWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceStatusWatcher")
            .field("dry_run", &self.dry_run)
            .finish_non_exhaustive()
    }
}

impl InstanceStatusWatcher {
    /// A watcher reading `ec2`, acting through `sink` and reporting to whatever `observer`
    /// holds. With `dry_run` nothing is delivered: unhealthy statuses are only reported.
    pub fn new(
        ec2: aws_sdk_ec2::Client,
        sink: Arc<dyn InterruptionSink>,
        observer: ObserverSlot,
        clock: Arc<dyn Clock>,
        dry_run: bool,
    ) -> Self {
        Self {
            ec2,
            sink,
            observer,
            clock,
            dry_run,
            seen: Mutex::new(UnhealthySeen::default()),
        }
    }

    /// One check: reads the statuses, delivers one interruption per failing category of
    /// every unhealthy instance a NodeClaim owns (the forceful kinds first), and reports the
    /// statuses not reported by the previous check. A status whose delivery failed is not
    /// counted, so it is counted when a later check handles it.
    ///
    /// # Errors
    /// Reading the statuses failed; nothing was delivered or counted.
    pub async fn check_once(&self) -> Result<CheckStats, AwsError> {
        let reports = describe(&self.ec2).await?;
        let instances = unhealthy(reports, self.clock.now());
        let mut stats = CheckStats {
            unhealthy: instances.len(),
            ..CheckStats::default()
        };
        let mut found = Vec::new();
        for instance in &instances {
            for (category, event) in instance.events() {
                let Some(node_claim) = self.sink.node_claim_for(&event.instance_id) else {
                    continue;
                };
                if !self.dry_run {
                    let interruption = NodeClaimInterruption { node_claim, event };
                    if let Err(e) = self.sink.deliver(interruption).await {
                        stats.failed.push(e.to_string());
                        // As upstream: the instance's other categories wait for the next check.
                        break;
                    }
                    stats.delivered += 1;
                }
                found.push((instance.instance_id.clone(), category));
            }
        }
        let new = self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record_poll(found);
        for (instance_id, category) in &new {
            tracing::info!(
                instance_id,
                category = category.as_str(),
                "detected unhealthy instance owned by cluster"
            );
            if let Some(observer) = self.observer.get() {
                observer.instance_status_unhealthy(category.as_str());
            }
        }
        stats.newly_unhealthy = new;
        Ok(stats)
    }

    /// Checks every [`POLL_INTERVAL`] until `shutdown` turns true. Without the
    /// `ec2:DescribeInstanceStatus` permission it logs one error saying so and stops, as
    /// upstream does (the role's policy must be fixed and the controller restarted).
    pub async fn run(self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        loop {
            if *shutdown.borrow() {
                return;
            }
            match self.check_once().await {
                Err(e) if e.code() == Some("UnauthorizedOperation") => {
                    return tracing::error!(error = %e, "ec2:DescribeInstanceStatus is not allowed: instance status health checks are off; add it to the controller's IAM policy and restart the controller");
                }
                Err(e) => tracing::warn!(error = %e, "checking instance statuses failed"),
                Ok(stats) => {
                    for failure in &stats.failed {
                        tracing::warn!(error = failure, "acting on an unhealthy instance failed");
                    }
                }
            }
            tokio::select! {
                () = tokio::time::sleep(POLL_INTERVAL) => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::primitives::DateTime;
    use aws_sdk_ec2::types::{
        EbsStatusDetails, EbsStatusSummary, EventCode, InstanceStatusDetails, InstanceStatusEvent,
        StatusName, StatusType,
    };

    fn summary(status: StatusType, since: Option<i64>) -> InstanceStatusSummary {
        let detail = InstanceStatusDetails::builder()
            .name(StatusName::Reachability)
            .status(status)
            .set_impaired_since(since.map(DateTime::from_secs))
            .build();
        InstanceStatusSummary::builder().details(detail).build()
    }

    #[test]
    fn sdk_statuses_become_reports_of_every_category() {
        let status = InstanceStatus::builder()
            .instance_id("i-1")
            .instance_status(summary(StatusType::Passed, None))
            .system_status(summary(StatusType::Failed, Some(1_000)))
            .attached_ebs_status(
                EbsStatusSummary::builder()
                    .details(
                        EbsStatusDetails::builder()
                            .name(StatusName::Reachability)
                            .status(StatusType::Failed)
                            .build(),
                    )
                    .build(),
            )
            .events(
                InstanceStatusEvent::builder()
                    .code(EventCode::InstanceRetirement)
                    .build(),
            )
            .build();
        let report = report_of(&status);
        assert_eq!(report.instance_id, "i-1");
        let since = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000);
        assert_eq!(
            report.details,
            [
                StatusDetail::check(
                    StatusCategory::InstanceStatus,
                    "reachability",
                    "passed",
                    None
                ),
                StatusDetail::check(
                    StatusCategory::SystemStatus,
                    "reachability",
                    "failed",
                    Some(since)
                ),
                StatusDetail::check(StatusCategory::EbsStatus, "reachability", "failed", None),
                StatusDetail::event("instance-retirement"),
            ]
        );
        let now = since + UNHEALTHY_THRESHOLD;
        let got = unhealthy([report], now);
        let kinds: Vec<_> = got[0].events().into_iter().map(|(_, e)| e.kind).collect();
        use karpenter_aws_interruption::InterruptionKind as K;
        assert_eq!(kinds, [K::SystemStatus, K::EventStatus]);
    }
}
