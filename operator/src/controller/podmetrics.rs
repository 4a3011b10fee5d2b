//! The per-pod metrics, updated from the pods a pass changed rather than from every pod:
//! `karpenter_pods_state`, and `karpenter_pods_bound_duration_seconds` and
//! `karpenter_pods_startup_duration_seconds` as [`PodTransitions`] observes them.

use k8s_openapi::api::core::v1::Pod;
use karpenter_cluster::pod_transitions::PodTransitions;
use karpenter_cluster::{ClusterState, ObjectKey};
use karpenter_metrics::{Metrics, PodStateLabels};
use karpenter_scheduling::model::{Millis, PodKey};
use kube::runtime::reflector::{ObjectRef, Store};
use std::collections::BTreeMap;

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
                Some(pod) => {
                    let seen = self.transitions.observe(&pod, now);
                    if let Some(seconds) = seen.bound_seconds {
                        metrics.pods_bound_duration.observe(seconds);
                    }
                    if let Some(seconds) = seen.startup_seconds {
                        metrics.pods_startup_duration.observe(seconds);
                    }
                }
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
