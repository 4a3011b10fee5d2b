//! The per-pod metrics, updated from the pods a pass changed rather than from every pod:
//! `karpenter_pods_state`, and `karpenter_pods_bound_duration_seconds` and
//! `karpenter_pods_startup_duration_seconds`: a pod is observed once, when it is seen to
//! turn bound (or running and ready) after having been seen without it, so a restart does
//! not re-record every pod already in the cluster.

use k8s_openapi::api::core::v1::Pod;
use karpenter_cluster::api_objects::pod_key;
use karpenter_cluster::{ClusterState, ObjectKey};
use karpenter_metrics::{Metrics, PodStateLabels};
use karpenter_scheduling::model::{Millis, PodKey};
use kube::runtime::reflector::{ObjectRef, Store};
use std::collections::{BTreeMap, BTreeSet};

/// Pods seen unbound, and seen bound but not yet running and ready.
#[derive(Debug, Default)]
pub struct PodTransitions {
    unbound: BTreeSet<PodKey>,
    starting: BTreeSet<PodKey>,
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
    /// Looks at one changed pod at `now`: records its bound or startup duration if it just
    /// turned bound or running after having been seen without it.
    pub fn observe_one(&mut self, pod: &Pod, now: Millis, metrics: &Metrics) {
        let Some(created) = pod.metadata.creation_timestamp.as_ref() else {
            return;
        };
        let created = created.0.as_millisecond();
        let key = pod_key(pod);
        // A transition time before creation (or missing) says nothing; `now` is the
        // latest the transition can have happened.
        let since = |at: Option<Millis>| {
            let at = at.filter(|t| *t >= created).unwrap_or(now);
            (at - created).max(0) as f64 / 1000.0
        };
        if !is_bound(pod) {
            self.unbound.insert(key.clone());
            self.starting.insert(key);
            return;
        }
        if self.unbound.remove(&key) {
            metrics
                .pods_bound_duration
                .observe(since(condition_time_ms(pod, "PodScheduled")));
        }
        if super::kubelet::pod_running_ready(pod) {
            if self.starting.remove(&key) {
                metrics
                    .pods_startup_duration
                    .observe(since(condition_time_ms(pod, "Ready")));
            }
        } else if pod.metadata.deletion_timestamp.is_none() {
            self.starting.insert(key);
        }
    }

    /// Forgets a pod that is gone.
    pub fn forget(&mut self, key: &PodKey) {
        self.unbound.remove(key);
        self.starting.remove(key);
    }
}

/// The per-pod metrics, kept up to date from the pods each pass changed:
/// `karpenter_pods_state` (one series per pod the index holds) and the bound and startup
/// durations ([`PodTransitions`]).
#[derive(Debug, Default)]
pub struct PodMetrics {
    transitions: PodTransitions,
    series: BTreeMap<PodKey, PodStateLabels>,
}

impl PodMetrics {
    /// Updates the metrics of the pods among `touched` (the keys a feed pass applied or
    /// deleted). After a full feed (`full`), also drops the series of pods the index no
    /// longer holds, which a lost index would otherwise leave behind.
    pub fn record(
        &mut self,
        touched: &[ObjectKey],
        full: bool,
        pods: &Store<Pod>,
        state: &ClusterState,
        now: Millis,
        metrics: &Metrics,
    ) {
        for key in touched {
            let ObjectKey::Pod(key) = key else {
                continue;
            };
            match pods.get(&ObjectRef::new(&key.name).within(&key.namespace)) {
                Some(pod) => self.transitions.observe_one(&pod, now, metrics),
                None => self.transitions.forget(key),
            }
            self.update_series(key, state, now, metrics);
        }
        if full {
            let gone: Vec<PodKey> = self
                .series
                .keys()
                .filter(|k| !state.pods().contains_key(*k))
                .cloned()
                .collect();
            for key in gone {
                self.update_series(&key, state, now, metrics);
            }
        }
    }

    fn update_series(&mut self, key: &PodKey, state: &ClusterState, now: Millis, m: &Metrics) {
        let labels = state.pods().get(key).map(|record| {
            let node = record.pod.node_name.clone().unwrap_or_default();
            let nodepool = state
                .nodes()
                .get(&node)
                .and_then(|n| n.node.node_pool.clone())
                .unwrap_or_default();
            let phase = if record.pod.node_name.is_some() && record.is_ready(now) {
                "Running"
            } else {
                "Pending"
            };
            PodStateLabels {
                name: key.name.clone(),
                namespace: key.namespace.clone(),
                node,
                nodepool,
                phase: phase.into(),
            }
        });
        let old = self.series.remove(key);
        if let Some(old) = &old
            && labels.as_ref() != Some(old)
        {
            m.pods_state.remove(old);
        }
        if let Some(labels) = labels {
            m.pods_state.get_or_create(&labels).set(1);
            self.series.insert(key.clone(), labels);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use std::sync::Arc;

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
        p.observe_one(&pod(None, None, None), 2_000, &m);
        assert_eq!(counts(&m), (0, 0));
        p.observe_one(&pod(Some("n1"), Some(31_000), None), 40_000, &m);
        assert_eq!(counts(&m), (1, 0));
        assert!(
            m.encode()
                .contains("karpenter_pods_bound_duration_seconds_sum 30.0"),
            "bound 30 s after creation: {}",
            m.encode()
        );
        p.observe_one(&pod(Some("n1"), Some(31_000), None), 41_000, &m);
        assert_eq!(counts(&m), (1, 0), "bound is recorded once");
        p.observe_one(&pod(Some("n1"), Some(31_000), Some(61_000)), 70_000, &m);
        assert_eq!(counts(&m), (1, 1));
        p.observe_one(&pod(Some("n1"), Some(31_000), Some(61_000)), 80_000, &m);
        assert_eq!(counts(&m), (1, 1), "startup is recorded once");
    }

    #[test]
    fn pods_already_running_at_start_are_not_recorded() {
        let m = Metrics::new();
        let mut p = PodTransitions::default();
        p.observe_one(&pod(Some("n1"), Some(2_000), Some(3_000)), 900_000, &m);
        assert_eq!(counts(&m), (0, 0));
    }

    #[test]
    fn pod_state_series_follow_the_changed_pods_only() {
        use karpenter_cluster::feed::{ApiObjects, Feed};
        let (stores, mut w) = crate::controller::state::stores();
        let mut state = ClusterState::new();
        let mut feed = Feed::default();
        let m = Metrics::new();
        let mut pm = PodMetrics::default();
        let named = |node: Option<&str>, ready: Option<Millis>, rv: &str| {
            let mut p = Pod::clone(&pod(node, node.map(|_| 31_000), ready));
            p.metadata.name = Some("web".into());
            p.metadata.namespace = Some("default".into());
            p.metadata.resource_version = Some(rv.into());
            p
        };
        let mut step = |p: Option<Pod>, full: bool| {
            match p {
                Some(p) => crate::controller::testing::put(&mut w.pods, p),
                None => w
                    .pods
                    .apply_watcher_event(&kube::runtime::watcher::Event::Delete(named(
                        None, None, "9",
                    ))),
            }
            let pods = stores.pods.state();
            let objects = ApiObjects {
                pods: &pods,
                ..ApiObjects::default()
            };
            let synced = feed.sync(&mut state, &objects, &BTreeMap::new(), 0);
            pm.record(&synced.touched, full, &stores.pods, &state, 90_000, &m);
            m.encode()
                .lines()
                .filter(|l| l.starts_with("karpenter_pods_state{"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        let pending = step(Some(named(None, None, "1")), true);
        assert!(
            matches!(&pending[..], [l] if l.contains(r#"phase="Pending""#)),
            "{pending:?}"
        );
        let running = step(Some(named(Some("n1"), Some(61_000), "2")), false);
        assert!(
            matches!(&running[..], [l] if l.contains(r#"phase="Running""#) && l.contains(r#"node="n1""#)),
            "the old series is replaced, not kept: {running:?}"
        );
        assert_eq!(
            counts(&m),
            (1, 1),
            "seen pending, then bound and ready: both recorded"
        );
        assert!(step(None, false).is_empty(), "a deleted pod's series goes");
    }
}
