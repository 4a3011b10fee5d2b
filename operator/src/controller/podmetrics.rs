//! `karpenter_pods_bound_duration_seconds` and `karpenter_pods_startup_duration_seconds`:
//! a pod is observed once, when it is seen to turn bound (or running and ready) after having
//! been seen without it, so a restart does not re-record every pod already in the cluster.

use crate::metrics::Metrics;
use k8s_openapi::api::core::v1::Pod;
use karpenter_scheduling::model::Millis;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Pods seen unbound, and seen bound but not yet running and ready (by UID).
#[derive(Debug, Default)]
pub struct PodTransitions {
    unbound: BTreeSet<String>,
    starting: BTreeSet<String>,
}

fn condition_time_ms(pod: &Pod, type_: &str) -> Option<Millis> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(Millis::MIN, |t| t.0.as_millisecond())
        })
}

fn is_bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

impl PodTransitions {
    /// Looks at every pod at `now`, records the durations of pods that just turned bound or
    /// running, and forgets pods that are gone.
    pub fn observe(&mut self, pods: &[Arc<Pod>], now: Millis, metrics: &Metrics) {
        let mut live = BTreeSet::new();
        for pod in pods {
            let Some(uid) = pod.metadata.uid.as_deref() else {
                continue;
            };
            let Some(created) = pod.metadata.creation_timestamp.as_ref() else {
                continue;
            };
            let created = created.0.as_millisecond();
            live.insert(uid.to_owned());
            // A transition time before creation (or missing) says nothing; `now` is the
            // latest the transition can have happened.
            let since = |at: Option<Millis>| {
                let at = at.filter(|t| *t >= created).unwrap_or(now);
                (at - created).max(0) as f64 / 1000.0
            };
            if !is_bound(pod) {
                self.unbound.insert(uid.to_owned());
                self.starting.insert(uid.to_owned());
                continue;
            }
            if self.unbound.remove(uid) {
                metrics
                    .pods_bound_duration
                    .observe(since(condition_time_ms(pod, "PodScheduled")));
            }
            if super::kubelet::pod_running_ready(pod) {
                if self.starting.remove(uid) {
                    metrics
                        .pods_startup_duration
                        .observe(since(condition_time_ms(pod, "Ready")));
                }
            } else if pod.metadata.deletion_timestamp.is_none() {
                self.starting.insert(uid.to_owned());
            }
        }
        self.unbound.retain(|u| live.contains(u));
        self.starting.retain(|u| live.contains(u));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn t(ms: Millis) -> Time {
        Time(jiff::Timestamp::from_millisecond(ms).unwrap())
    }

    fn pod(node: Option<&str>, scheduled_at: Option<Millis>, ready_at: Option<Millis>) -> Arc<Pod> {
        let mut conditions = Vec::new();
        if let Some(at) = scheduled_at {
            conditions.push(PodCondition {
                type_: "PodScheduled".into(),
                status: "True".into(),
                last_transition_time: Some(t(at)),
                ..PodCondition::default()
            });
        }
        if let Some(at) = ready_at {
            conditions.push(PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(t(at)),
                ..PodCondition::default()
            });
        }
        Arc::new(Pod {
            metadata: ObjectMeta {
                uid: Some("u1".into()),
                creation_timestamp: Some(t(1_000)),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(str::to_owned),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some(
                    if ready_at.is_some() {
                        "Running"
                    } else {
                        "Pending"
                    }
                    .into(),
                ),
                conditions: Some(conditions),
                ..PodStatus::default()
            }),
        })
    }

    fn counts(m: &Metrics) -> (u64, u64) {
        let text = m.encode();
        let count = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}_count ")))
                .map_or(0, |v| v.trim().parse().unwrap())
        };
        (
            count("karpenter_pods_bound_duration_seconds"),
            count("karpenter_pods_startup_duration_seconds"),
        )
    }

    #[test]
    fn records_each_transition_once() {
        let m = Metrics::new();
        let mut p = PodTransitions::default();
        p.observe(&[pod(None, None, None)], 2_000, &m);
        assert_eq!(counts(&m), (0, 0));
        p.observe(&[pod(Some("n1"), Some(31_000), None)], 40_000, &m);
        assert_eq!(counts(&m), (1, 0));
        assert!(
            m.encode()
                .contains("karpenter_pods_bound_duration_seconds_sum 30.0"),
            "bound 30 s after creation: {}",
            m.encode()
        );
        p.observe(&[pod(Some("n1"), Some(31_000), None)], 41_000, &m);
        assert_eq!(counts(&m), (1, 0), "bound is recorded once");
        p.observe(&[pod(Some("n1"), Some(31_000), Some(61_000))], 70_000, &m);
        assert_eq!(counts(&m), (1, 1));
        p.observe(&[pod(Some("n1"), Some(31_000), Some(61_000))], 80_000, &m);
        assert_eq!(counts(&m), (1, 1), "startup is recorded once");
    }

    #[test]
    fn pods_already_running_at_start_are_not_recorded() {
        let m = Metrics::new();
        let mut p = PodTransitions::default();
        p.observe(&[pod(Some("n1"), Some(2_000), Some(3_000))], 900_000, &m);
        assert_eq!(counts(&m), (0, 0));
    }
}
