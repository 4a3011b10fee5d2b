//! EC2 instance status checks as interruptions, decided the way Karpenter v1.14's AWS
//! provider decides them (its instance-status controller): which DescribeInstanceStatus
//! results make an instance unhealthy ([`unhealthy`]), which interruption each failing
//! category becomes ([`StatusCategory::kind`], [`UnhealthyInstance::events`]), and which
//! unhealthy statuses are new and so counted once ([`UnhealthySeen`]).
//!
//! Pure: the caller reads the clock and the EC2 API and passes both in.

use crate::{InterruptionEvent, InterruptionKind};
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

/// How long an instance or system status check must have been failing before the instance
/// counts as unhealthy (scheduled events count at once).
pub const UNHEALTHY_THRESHOLD: Duration = Duration::from_secs(120);

/// How often the statuses are read.
pub const POLL_INTERVAL: Duration = Duration::from_secs(60);

/// The scheduled-event codes that make an instance unhealthy.
pub const EVENT_CODES: [&str; 5] = [
    "instance-reboot",
    "system-reboot",
    "system-maintenance",
    "instance-retirement",
    "instance-stop",
];

/// The DescribeInstanceStatus queries, each one filter `(name, values)`. EC2 ANDs the filters
/// of one call, and an instance is unhealthy if any one of these holds, so each is its own
/// call. Attached-EBS failures are not queried: they cannot yet be told apart from volumes
/// that only the pods use.
pub const QUERIES: [(&str, &[&str]); 3] = [
    ("instance-status.status", &["impaired"]),
    ("system-status.status", &["impaired"]),
    ("event.code", &EVENT_CODES),
];

/// The part of DescribeInstanceStatus a detail belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatusCategory {
    /// The instance status check (`InstanceStatus.Details`).
    InstanceStatus,
    /// The system status check (`SystemStatus.Details`).
    SystemStatus,
    /// A scheduled event (`Events`).
    EventStatus,
    /// The attached EBS status check (`AttachedEbsStatus.Details`): read, never acted on.
    EbsStatus,
}

impl StatusCategory {
    /// EC2's name for the category (the `category` label of
    /// `karpenter_interruption_instance_status_unhealthy_total`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InstanceStatus => "InstanceStatus",
            Self::SystemStatus => "SystemStatus",
            Self::EventStatus => "EventStatus",
            Self::EbsStatus => "EBSStatus",
        }
    }

    /// The interruption a failure of this category is handled as; `None` for EBS.
    pub fn kind(self) -> Option<InterruptionKind> {
        match self {
            Self::InstanceStatus => Some(InterruptionKind::InstanceStatus),
            Self::SystemStatus => Some(InterruptionKind::SystemStatus),
            Self::EventStatus => Some(InterruptionKind::EventStatus),
            Self::EbsStatus => None,
        }
    }
}

/// One check or event of one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusDetail {
    /// Where it came from.
    pub category: StatusCategory,
    /// The check's name (`reachability`) or the event's code (`instance-retirement`).
    pub name: String,
    /// Whether the check's status is `failed` (every scheduled event counts as failed).
    pub failed: bool,
    /// When the check started failing (`None`: EC2 did not say, or an event, which is
    /// stamped with the poll time by [`unhealthy`]).
    pub impaired_since: Option<SystemTime>,
}

impl StatusDetail {
    /// A status check detail with EC2's `status` (`passed`, `failed`, `insufficient-data`,
    /// `initializing`).
    pub fn check(
        category: StatusCategory,
        name: &str,
        status: &str,
        impaired_since: Option<SystemTime>,
    ) -> Self {
        Self {
            category,
            name: name.to_owned(),
            failed: status == "failed",
            impaired_since,
        }
    }

    /// A scheduled event with EC2's `code`.
    pub fn event(code: &str) -> Self {
        Self {
            category: StatusCategory::EventStatus,
            name: code.to_owned(),
            failed: true,
            impaired_since: None,
        }
    }
}

/// What DescribeInstanceStatus said about one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceStatusReport {
    /// The EC2 instance id.
    pub instance_id: String,
    /// Its checks and events.
    pub details: Vec<StatusDetail>,
}

/// An instance with at least one failure to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnhealthyInstance {
    /// The EC2 instance id.
    pub instance_id: String,
    /// The categories of its failing details.
    pub categories: BTreeSet<StatusCategory>,
    /// The earliest time among its failing details.
    pub impaired_since: SystemTime,
}

impl UnhealthyInstance {
    /// One interruption per category that has a kind (EBS has none), in category order
    /// (instance, system, event: the forceful kinds first), each dated
    /// [`UnhealthyInstance::impaired_since`].
    pub fn events(&self) -> Vec<(StatusCategory, InterruptionEvent)> {
        self.categories
            .iter()
            .filter_map(|&c| {
                let event = InterruptionEvent {
                    instance_id: self.instance_id.clone(),
                    kind: c.kind()?,
                    time: self.impaired_since,
                };
                Some((c, event))
            })
            .collect()
    }
}

/// Whether `detail` is a failure to act on at `now`: a scheduled event always (it is handled
/// like a scheduled change from EventBridge: the host needs vacating, whenever the event is
/// set for); a failed check once it has failed for [`UNHEALTHY_THRESHOLD`] (a check EC2
/// gives no start time counts as failing long enough; one dated after `now` does not yet).
fn acted_on(detail: &StatusDetail, now: SystemTime) -> bool {
    if !detail.failed {
        return false;
    }
    if detail.category == StatusCategory::EventStatus {
        return true;
    }
    detail.impaired_since.is_none_or(|since| {
        now.duration_since(since)
            .is_ok_and(|d| d >= UNHEALTHY_THRESHOLD)
    })
}

/// The unhealthy instances among `reports` at `now`, in report order. A report for an
/// instance already seen is skipped (the queries overlap, the first answer wins); an instance
/// with no failure to act on is left out.
pub fn unhealthy(
    reports: impl IntoIterator<Item = InstanceStatusReport>,
    now: SystemTime,
) -> Vec<UnhealthyInstance> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for report in reports {
        if !seen.insert(report.instance_id.clone()) {
            continue;
        }
        let failing: Vec<&StatusDetail> =
            report.details.iter().filter(|d| acted_on(d, now)).collect();
        let Some(impaired_since) = failing
            .iter()
            .map(|d| match d.category {
                StatusCategory::EventStatus => now,
                _ => d.impaired_since.unwrap_or(SystemTime::UNIX_EPOCH),
            })
            .min()
        else {
            continue;
        };
        out.push(UnhealthyInstance {
            instance_id: report.instance_id,
            categories: failing.iter().map(|d| d.category).collect(),
            impaired_since,
        });
    }
    out
}

/// The unhealthy statuses (instance, category) counted so far: each is counted once while
/// it lasts, and again if it comes back after a poll without it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnhealthySeen {
    seen: BTreeSet<(String, StatusCategory)>,
}

impl UnhealthySeen {
    /// Records the statuses one poll found on instances the cluster owns, and returns those
    /// the previous poll did not have (to count), in order. Statuses missing from `found`
    /// are forgotten.
    pub fn record_poll(
        &mut self,
        found: impl IntoIterator<Item = (String, StatusCategory)>,
    ) -> Vec<(String, StatusCategory)> {
        let found: BTreeSet<_> = found.into_iter().collect();
        let new = found.difference(&self.seen).cloned().collect();
        self.seen = found;
        new
    }

    /// How many statuses are remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use StatusCategory::*;

    const T0: u64 = 1_700_000_000;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn report(id: &str, details: Vec<StatusDetail>) -> InstanceStatusReport {
        InstanceStatusReport {
            instance_id: id.to_owned(),
            details,
        }
    }

    fn failed(category: StatusCategory, since: u64) -> StatusDetail {
        StatusDetail::check(category, "reachability", "failed", Some(at(since)))
    }

    #[test]
    fn categories_map_to_upstreams_kinds_and_labels() {
        assert_eq!(
            InstanceStatus.kind(),
            Some(InterruptionKind::InstanceStatus)
        );
        assert_eq!(SystemStatus.kind(), Some(InterruptionKind::SystemStatus));
        assert_eq!(EventStatus.kind(), Some(InterruptionKind::EventStatus));
        assert_eq!(EbsStatus.kind(), None);
        let labels: Vec<_> = [InstanceStatus, SystemStatus, EventStatus, EbsStatus]
            .map(StatusCategory::as_str)
            .to_vec();
        assert_eq!(
            labels,
            ["InstanceStatus", "SystemStatus", "EventStatus", "EBSStatus"]
        );
        let kinds = [
            InterruptionKind::InstanceStatus,
            InterruptionKind::SystemStatus,
            InterruptionKind::EventStatus,
        ];
        let names: Vec<_> = kinds.map(InterruptionKind::as_str).to_vec();
        assert_eq!(names, ["instance_status", "system_status", "event_status"]);
        // Failed checks terminate at once; a scheduled event drains as usual.
        let forceful: Vec<_> = kinds.map(InterruptionKind::forceful).to_vec();
        assert_eq!(forceful, [true, true, false]);
        assert!(kinds.iter().all(|k| k.triggers_replacement()));
        assert!(
            kinds
                .iter()
                .all(|k| k.event_reason() == "InstanceUnhealthy")
        );
        assert!(!InterruptionKind::ScheduledChange.forceful());
        assert!(!InterruptionKind::SpotInterruption.forceful());
    }

    #[test]
    fn failed_checks_count_only_after_the_threshold() {
        let now = at(T0);
        let got = unhealthy(
            [
                // failing for exactly the threshold: unhealthy
                report("i-a", vec![failed(SystemStatus, T0 - 120)]),
                // failing for 119 s: not yet
                report("i-b", vec![failed(InstanceStatus, T0 - 119)]),
                // dated in the future (clock skew): not yet
                report("i-c", vec![failed(InstanceStatus, T0 + 30)]),
                // no start time: counts as long enough
                report(
                    "i-d",
                    vec![StatusDetail::check(
                        InstanceStatus,
                        "reachability",
                        "failed",
                        None,
                    )],
                ),
            ],
            now,
        );
        let ids: Vec<_> = got.iter().map(|u| u.instance_id.as_str()).collect();
        assert_eq!(ids, ["i-a", "i-d"]);
        assert_eq!(got[0].impaired_since, at(T0 - 120));
        assert_eq!(got[1].impaired_since, SystemTime::UNIX_EPOCH);
    }

    #[test]
    fn only_failed_statuses_are_unhealthy() {
        let now = at(T0);
        let old = Some(at(T0 - 3600));
        let healthy = ["passed", "insufficient-data", "initializing"].map(|s| {
            report(
                &format!("i-{s}"),
                vec![
                    StatusDetail::check(InstanceStatus, "reachability", s, old),
                    StatusDetail::check(SystemStatus, "reachability", s, old),
                ],
            )
        });
        assert_eq!(unhealthy(healthy, now), []);
    }

    #[test]
    fn scheduled_events_count_at_once_even_when_checks_pass() {
        let now = at(T0);
        let got = unhealthy(
            [report(
                "i-a",
                vec![
                    StatusDetail::check(InstanceStatus, "reachability", "passed", None),
                    StatusDetail::check(SystemStatus, "reachability", "passed", None),
                    StatusDetail::event("instance-retirement"),
                ],
            )],
            now,
        );
        assert_eq!(
            got,
            [UnhealthyInstance {
                instance_id: "i-a".into(),
                categories: [EventStatus].into(),
                impaired_since: now,
            }]
        );
        let events = got[0].events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].0, EventStatus);
        assert_eq!(events[0].1.kind, InterruptionKind::EventStatus);
        assert_eq!(events[0].1.time, now);
    }

    #[test]
    fn every_failing_category_becomes_one_event_from_the_earliest_failure() {
        let now = at(T0);
        let got = unhealthy(
            [report(
                "i-a",
                vec![
                    StatusDetail::event("system-maintenance"),
                    failed(SystemStatus, T0 - 600),
                    failed(SystemStatus, T0 - 300),
                    failed(InstanceStatus, T0 - 200),
                    failed(EbsStatus, T0 - 900),
                ],
            )],
            now,
        );
        assert_eq!(got.len(), 1);
        // The EBS failure is read (and dates the instance) but becomes no interruption.
        assert_eq!(got[0].impaired_since, at(T0 - 900));
        let events: Vec<_> = got[0]
            .events()
            .into_iter()
            .map(|(c, e)| (c, e.kind, e.instance_id, e.time))
            .collect();
        let since = at(T0 - 900);
        assert_eq!(
            events,
            [
                (
                    InstanceStatus,
                    InterruptionKind::InstanceStatus,
                    "i-a".into(),
                    since
                ),
                (
                    SystemStatus,
                    InterruptionKind::SystemStatus,
                    "i-a".into(),
                    since
                ),
                (
                    EventStatus,
                    InterruptionKind::EventStatus,
                    "i-a".into(),
                    since
                ),
            ]
        );
    }

    #[test]
    fn an_ebs_only_failure_is_listed_but_acted_on_never() {
        let got = unhealthy([report("i-a", vec![failed(EbsStatus, T0 - 900)])], at(T0));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].events(), []);
    }

    #[test]
    fn the_first_report_of_an_instance_wins() {
        let now = at(T0);
        let got = unhealthy(
            [
                report("i-a", vec![failed(InstanceStatus, T0 - 600)]),
                report("i-b", vec![StatusDetail::event("instance-stop")]),
                // The event query finds i-a again, with its event: already seen.
                report(
                    "i-a",
                    vec![
                        failed(InstanceStatus, T0 - 600),
                        StatusDetail::event("instance-reboot"),
                    ],
                ),
            ],
            now,
        );
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].instance_id, "i-a");
        assert_eq!(got[0].categories, [InstanceStatus].into());
        assert_eq!(got[1].instance_id, "i-b");
    }

    #[test]
    fn statuses_are_counted_once_while_they_last_and_again_when_they_return() {
        let key = |id: &str, c| (id.to_owned(), c);
        let mut seen = UnhealthySeen::default();
        assert!(seen.is_empty());
        let first = seen.record_poll([key("i-a", SystemStatus), key("i-a", EventStatus)]);
        assert_eq!(first, [key("i-a", SystemStatus), key("i-a", EventStatus)]);
        // Still failing: nothing new; a new category on the same instance is new.
        let second = seen.record_poll([
            key("i-a", SystemStatus),
            key("i-a", EventStatus),
            key("i-a", InstanceStatus),
        ]);
        assert_eq!(second, [key("i-a", InstanceStatus)]);
        assert_eq!(seen.len(), 3);
        // Healthy for one poll, then failing again: counted again.
        assert_eq!(seen.record_poll([key("i-b", SystemStatus)]).len(), 1);
        assert_eq!(seen.len(), 1);
        assert_eq!(
            seen.record_poll([key("i-a", SystemStatus), key("i-b", SystemStatus)]),
            [key("i-a", SystemStatus)]
        );
    }

    #[test]
    fn the_queries_cover_both_checks_and_upstreams_event_codes() {
        let names: Vec<_> = QUERIES.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "instance-status.status",
                "system-status.status",
                "event.code"
            ]
        );
        assert_eq!(QUERIES[0].1, ["impaired"]);
        assert_eq!(QUERIES[2].1.len(), 5);
        assert_eq!(POLL_INTERVAL, Duration::from_secs(60));
    }
}
