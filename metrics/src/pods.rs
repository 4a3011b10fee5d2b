//! The per-pod metrics, updated from the pods a feed pass changed rather than from every
//! pod: `karpenter_pods_state`, `karpenter_pods_bound_duration_seconds` and
//! `karpenter_pods_startup_duration_seconds` as [`PodTransitions`] observes them, and the
//! `karpenter_pods_unbound_time_seconds` / `karpenter_pods_unstarted_time_seconds` gauges of
//! the pods still waiting (refreshed on every pass, a cost in proportion to the waiting pods).

use crate::{Metrics, PodLabels, PodStateLabels};
use k8s_openapi::api::core::v1::Pod;
use karpenter_cluster::pod_transitions::PodTransitions;
use karpenter_cluster::{ClusterState, ObjectKey};
use karpenter_scheduling::labels;
use karpenter_scheduling::model::{Millis, PodKey};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The per-pod metrics, kept up to date from the pods each pass changed:
/// `karpenter_pods_state` (one series per pod the index holds, replaced when its node,
/// pool or phase changes, removed with the pod) and the bound and startup durations, each
/// observed once per pod ([`PodTransitions`]).
#[derive(Debug, Default)]
pub struct PodMetrics {
    transitions: PodTransitions,
    series: BTreeMap<PodKey, PodStateLabels>,
    /// Pending pods not scheduled yet, with their creation time.
    unbound: BTreeMap<PodKey, Millis>,
    /// Pods seen pending that are not ready yet (nor finished), with their creation time.
    unstarted: BTreeMap<PodKey, Millis>,
}

impl PodMetrics {
    /// Updates the metrics of the pods among `touched` (the keys a feed pass applied or
    /// deleted), reading each pod's object through `pod`. After a full feed (`full`), also
    /// drops the series of pods the index no longer holds, which a lost index would
    /// otherwise leave behind.
    pub fn record(
        &mut self,
        touched: &[ObjectKey],
        full: bool,
        pod: impl Fn(&PodKey) -> Option<Arc<Pod>>,
        state: &ClusterState,
        now: Millis,
        metrics: &Metrics,
    ) {
        for key in touched {
            let ObjectKey::Pod(key) = key else {
                continue;
            };
            let object = pod(key);
            match &object {
                Some(pod) => {
                    let seen = self.transitions.observe(pod, now);
                    if let Some(seconds) = seen.bound_seconds {
                        metrics.pods_bound_duration.observe(seconds);
                    }
                    if let Some(seconds) = seen.startup_seconds {
                        metrics.pods_startup_duration.observe(seconds);
                    }
                }
                None => self.transitions.forget(key),
            }
            let mut limits = metrics.pod_limits.lock().unwrap_or_else(|e| e.into_inner());
            match &object {
                Some(pod) => limits.insert(key.clone(), crate::limits::pod_limits(pod)),
                None => limits.remove(key),
            };
            drop(limits);
            self.update_series(key, object.as_deref(), state, metrics);
            self.update_waiting(key, object.as_deref(), metrics);
        }
        if full {
            let gone: Vec<PodKey> = self
                .series
                .keys()
                .filter(|k| !state.pods().contains_key(*k))
                .cloned()
                .collect();
            (metrics.pod_limits.lock().unwrap_or_else(|e| e.into_inner()))
                .retain(|k, _| state.pods().contains_key(k));
            for key in gone {
                self.update_series(&key, None, state, metrics);
                self.update_waiting(&key, None, metrics);
            }
        }
        let age = |created: &Millis| (now - created).max(0) as f64 / 1000.0;
        for (key, created) in &self.unbound {
            (metrics.pods_unbound_time)
                .get_or_create(&PodLabels::of(key))
                .set(age(created));
        }
        for (key, created) in &self.unstarted {
            (metrics.pods_unstarted_time)
                .get_or_create(&PodLabels::of(key))
                .set(age(created));
        }
    }

    /// Upstream's rules for the waiting gauges: a pod is unbound while it is `Pending`
    /// without a true `PodScheduled` condition; it is unstarted from when it is seen
    /// `Pending` until it is Ready or has finished (`Succeeded`, `Failed`). The gauges of a
    /// pod that stops waiting, or is gone, are removed.
    fn update_waiting(&mut self, key: &PodKey, pod: Option<&Pod>, m: &Metrics) {
        let status = pod.and_then(|p| p.status.as_ref());
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or_default();
        let condition = |type_: &str| {
            status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
        };
        let created = pod
            .and_then(|p| p.metadata.creation_timestamp.as_ref())
            .map(|t| t.0.as_millisecond());
        let labels = PodLabels::of(key);
        match created {
            Some(at) if phase == "Pending" && !condition("PodScheduled") => {
                self.unbound.insert(key.clone(), at);
            }
            _ => {
                if self.unbound.remove(key).is_some() {
                    m.pods_unbound_time.remove(&labels);
                }
            }
        }
        let finished = matches!(phase, "Succeeded" | "Failed");
        match created {
            Some(at) if phase == "Pending" => {
                self.unstarted.insert(key.clone(), at);
            }
            Some(_) if self.unstarted.contains_key(key) && !condition("Ready") && !finished => {}
            _ => {
                if self.unstarted.remove(key).is_some() {
                    m.pods_unstarted_time.remove(&labels);
                }
            }
        }
    }

    fn update_series(
        &mut self,
        key: &PodKey,
        pod: Option<&Pod>,
        state: &ClusterState,
        m: &Metrics,
    ) {
        let labels = state.pods().get(key).zip(pod).map(|(record, pod)| {
            let node = record.pod.node_name.clone().unwrap_or_default();
            let node_labels = state.nodes().get(&node).map(|n| &n.node.labels);
            let label = |k: &str| {
                node_labels
                    .and_then(|l| l.get(k))
                    .cloned()
                    .unwrap_or_default()
            };
            let nodepool = label(labels::NODEPOOL);
            PodStateLabels {
                name: key.name.clone(),
                namespace: key.namespace.clone(),
                owner: owner_link(pod),
                scheduled: (!node.is_empty()).to_string(),
                node,
                zone: label(labels::ZONE),
                arch: label(labels::ARCH),
                capacity_type: label(labels::CAPACITY_TYPE),
                instance_type: label(labels::INSTANCE_TYPE),
                phase: pod
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_default(),
                ready: pod_ready(pod).to_string(),
                managed: (!nodepool.is_empty()).to_string(),
                nodepool,
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

/// Upstream's stand-in for the deprecated selfLink of the pod's first owner.
fn owner_link(pod: &Pod) -> String {
    let Some(owner) = pod
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.first())
    else {
        return String::new();
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    format!(
        "/apis/{}/namespaces/{namespace}/{}s/{}",
        owner.api_version,
        owner.kind.to_lowercase(),
        owner.name
    )
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cluster::feed::{ApiObjects, Feed};
    use karpenter_testing::api::pod_with_conditions;

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
        let mut state = ClusterState::new();
        let mut feed = Feed::default();
        let m = Metrics::new();
        let mut pm = PodMetrics::default();
        let mut step = |p: Option<(Option<&str>, Option<Millis>, &str)>, full: bool| {
            let pods: Vec<Arc<Pod>> = p
                .map(|(node, ready, rv)| {
                    let mut p = pod_with_conditions(node, node.map(|_| 31_000), ready);
                    p.metadata.resource_version = Some(rv.into());
                    Arc::new(p)
                })
                .into_iter()
                .collect();
            let objects = ApiObjects {
                pods: &pods,
                ..ApiObjects::default()
            };
            let synced = feed.sync(&mut state, &objects, &BTreeMap::new(), 0);
            let lookup = |_: &PodKey| pods.first().cloned();
            pm.record(&synced.touched, full, lookup, &state, 90_000, &m);
            m.encode()
                .lines()
                .filter(|l| l.starts_with("karpenter_pods_state{"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        let pending = step(Some((None, None, "1")), true);
        assert!(
            matches!(&pending[..], [l] if l.contains(r#"phase="Pending""#)),
            "{pending:?}"
        );
        let running = step(Some((Some("n1"), Some(61_000), "2")), false);
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

    #[test]
    fn waiting_gauges_age_until_the_pod_binds_and_starts() {
        let mut state = ClusterState::new();
        let mut feed = Feed::default();
        let m = Metrics::new();
        let mut pm = PodMetrics::default();
        let gauge = |m: &Metrics, name: &str| {
            let prefix = format!("{name}{{name=\"web\",namespace=\"default\"}} ");
            m.encode()
                .lines()
                .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
        };
        let mut step = |p: Pod, now: Millis, touched: bool| {
            let pods = vec![Arc::new(p)];
            let objects = ApiObjects {
                pods: &pods,
                ..ApiObjects::default()
            };
            let synced = feed.sync(&mut state, &objects, &BTreeMap::new(), 0);
            let keys = if touched { synced.touched } else { Vec::new() };
            let lookup = |_: &PodKey| pods.first().cloned();
            pm.record(&keys, false, lookup, &state, now, &m);
        };
        let mut pending = pod_with_conditions(None, None, None);
        pending.metadata.resource_version = Some("1".into());
        step(pending.clone(), 21_000, true);
        let (unbound, unstarted) = (
            "karpenter_pods_unbound_time_seconds",
            "karpenter_pods_unstarted_time_seconds",
        );
        assert_eq!(
            gauge(&m, unbound).as_deref(),
            Some("20.0"),
            "created at 1 s"
        );
        assert_eq!(gauge(&m, unstarted).as_deref(), Some("20.0"));
        step(pending, 31_000, false);
        assert_eq!(
            gauge(&m, unbound).as_deref(),
            Some("30.0"),
            "a pass ages the gauges of the pods still waiting"
        );
        let mut bound = pod_with_conditions(Some("n1"), Some(40_000), None);
        bound.metadata.resource_version = Some("2".into());
        bound.status.as_mut().unwrap().phase = Some("Pending".into());
        step(bound, 41_000, true);
        assert_eq!(gauge(&m, unbound), None, "bound: no longer unbound");
        assert_eq!(gauge(&m, unstarted).as_deref(), Some("40.0"));
        let mut ready = pod_with_conditions(Some("n1"), Some(40_000), Some(50_000));
        ready.metadata.resource_version = Some("3".into());
        step(ready, 51_000, true);
        assert_eq!(gauge(&m, unstarted), None, "ready: started");
    }
}
