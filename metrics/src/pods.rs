//! The per-pod metrics, updated from the pods a feed pass changed rather than from every
//! pod: `karpenter_pods_state`, `karpenter_pods_bound_duration_seconds` and
//! `karpenter_pods_startup_duration_seconds` as [`PodTransitions`] observes them, and the
//! `karpenter_pods_unbound_time_seconds` / `karpenter_pods_unstarted_time_seconds` gauges of
//! the pods still waiting (refreshed on every pass, a cost in proportion to the waiting pods).

use crate::{DraLabels, FloatGauge, Metrics, PodDraLabels, PodLabels, PodStateLabels};
use k8s_openapi::api::core::v1::Pod;
use karpenter_cluster::pod_transitions::PodTransitions;
use karpenter_cluster::{ClusterState, ObjectKey};
use karpenter_scheduling::labels;
use karpenter_scheduling::model::{Millis, PodKey};
use prometheus_client::metrics::family::Family;
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
    /// Pending pods not scheduled yet, with their creation time and whether they have DRA
    /// requirements.
    unbound: BTreeMap<PodKey, (Millis, bool)>,
    /// Pods seen pending that are not ready yet (nor finished), with their creation time.
    unstarted: BTreeMap<PodKey, Millis>,
    /// The series of the provisioning-relative gauges.
    provisioning_unbound: PodSeries<PodDraLabels>,
    provisioning_unstarted: PodSeries<PodLabels>,
    undecided: PodSeries<PodLabels>,
}

/// The series one per-pod gauge has, so a refresh removes the others.
#[derive(Debug)]
struct PodSeries<L>(BTreeMap<PodKey, L>);

impl<L> Default for PodSeries<L> {
    fn default() -> Self {
        Self(BTreeMap::new())
    }
}

impl<L> PodSeries<L>
where
    L: Clone + std::hash::Hash + Eq + prometheus_client::encoding::EncodeLabelSet,
{
    fn replace(&mut self, family: &Family<L, FloatGauge>, now: Vec<(PodKey, L, f64)>) {
        let keep: BTreeMap<PodKey, L> =
            now.iter().map(|(k, l, _)| (k.clone(), l.clone())).collect();
        for (key, labels) in &self.0 {
            if keep.get(key) != Some(labels) {
                family.remove(labels);
            }
        }
        for (_, labels, v) in now {
            family.get_or_create(&labels).set(v);
        }
        self.0 = keep;
    }
}

/// Upstream's `HasDRARequirements`: resource claims on the pod or on one of its containers.
fn has_dra(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(|spec| {
        spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty())
            || spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
                .any(|c| {
                    c.resources
                        .as_ref()
                        .and_then(|r| r.claims.as_ref())
                        .is_some_and(|c| !c.is_empty())
                })
    })
}

/// When the pod's `type_` condition last turned true.
fn condition_time(pod: &Pod, type_: &str) -> Option<Millis> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let c = conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")?;
    Some(c.last_transition_time.as_ref()?.0.as_millisecond())
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
                    let mut scheduling = metrics
                        .pod_scheduling
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    let placed = scheduling.schedulable.get(key).copied();
                    // Upstream times the provisioning durations from the condition's
                    // transition; a pod without one counts to now.
                    let since_placed = |condition: &str| {
                        let at = condition_time(pod, condition).unwrap_or(now);
                        placed.map(|p| (at - p).max(0) as f64 / 1000.0)
                    };
                    if let Some(seconds) = seen.bound_seconds {
                        let dra = DraLabels {
                            dynamic_resources: has_dra(pod).to_string(),
                        };
                        metrics
                            .pods_bound_duration
                            .get_or_create(&dra)
                            .observe(seconds);
                        if let Some(s) = since_placed("PodScheduled") {
                            (metrics.pods_provisioning_bound_duration)
                                .get_or_create(&dra)
                                .observe(s);
                        }
                    }
                    if let Some(seconds) = seen.startup_seconds {
                        metrics.pods_startup_duration.observe(&[], seconds);
                        if let Some(s) = since_placed("Ready") {
                            metrics.pods_provisioning_startup_duration.observe(s);
                        }
                        // Started: nothing more is timed for it.
                        scheduling.forget(key);
                    }
                }
                None => {
                    self.transitions.forget(key);
                    let mut scheduling = metrics
                        .pod_scheduling
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    scheduling.forget(key);
                }
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
            let mut scheduling = metrics
                .pod_scheduling
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let lost: Vec<PodKey> = (scheduling.acks.keys())
                .chain(scheduling.schedulable.keys())
                .filter(|k| !state.pods().contains_key(*k))
                .cloned()
                .collect();
            lost.iter().for_each(|k| scheduling.forget(k));
            drop(scheduling);
            for key in gone {
                self.update_series(&key, None, state, metrics);
                self.update_waiting(&key, None, metrics);
            }
        }
        self.record_provisioning(state, now, metrics);
        let age = |created: &Millis| (now - created).max(0) as f64 / 1000.0;
        for (key, (created, dra)) in &self.unbound {
            (metrics.pods_unbound_time)
                .get_or_create(&PodDraLabels::of(key, *dra))
                .set(age(created));
        }
        for (key, created) in &self.unstarted {
            (metrics.pods_unstarted_time)
                .get_or_create(&PodLabels::of(key))
                .set(age(created));
        }
    }

    /// Acks the provisionable pods (the first pass that sees each), and sets the
    /// provisioning-relative waiting gauges: time since a plan first placed each pod still
    /// unbound or unstarted, and time since the ack of each unbound pod no plan decided.
    fn record_provisioning(&mut self, state: &ClusterState, now: Millis, m: &Metrics) {
        let mut scheduling = m.pod_scheduling.lock().unwrap_or_else(|e| e.into_inner());
        for p in state.provisionable_pods() {
            scheduling.acks.entry(p.pod.key()).or_insert(now);
        }
        let since = |t: Millis| (now - t).max(0) as f64 / 1000.0;
        let placed = |k: &PodKey| Some(since(*scheduling.schedulable.get(k)?));
        let unbound: Vec<(PodKey, PodDraLabels, f64)> = (self.unbound.iter())
            .filter_map(|(k, (_, dra))| Some((k.clone(), PodDraLabels::of(k, *dra), placed(k)?)))
            .collect();
        let unstarted: Vec<(PodKey, PodLabels, f64)> = (self.unstarted.keys())
            .filter_map(|k| Some((k.clone(), PodLabels::of(k), placed(k)?)))
            .collect();
        let undecided: Vec<(PodKey, PodLabels, f64)> = (scheduling.acks.iter())
            .filter(|(k, _)| self.unbound.contains_key(*k) && !scheduling.decided.contains_key(*k))
            .map(|(k, t)| (k.clone(), PodLabels::of(k), since(*t)))
            .collect();
        drop(scheduling);
        self.provisioning_unbound
            .replace(&m.pods_provisioning_unbound_time, unbound);
        self.provisioning_unstarted
            .replace(&m.pods_provisioning_unstarted_time, unstarted);
        self.undecided
            .replace(&m.pods_scheduling_undecided_time, undecided);
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
                let dra = pod.is_some_and(has_dra);
                if let Some((_, was)) = self.unbound.insert(key.clone(), (at, dra))
                    && was != dra
                {
                    m.pods_unbound_time.remove(&PodDraLabels::of(key, was));
                }
            }
            _ => {
                if let Some((_, dra)) = self.unbound.remove(key) {
                    m.pods_unbound_time.remove(&PodDraLabels::of(key, dra));
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

    /// The value of `name`'s series whose labels start with `labels` (`""` for a series
    /// without labels, or the first of a family).
    fn series(text: &str, name: &str, labels: &str) -> Option<String> {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?;
            let value = match rest.strip_prefix('{') {
                Some(ls) if ls.starts_with(labels) => ls.rsplit_once("} ")?.1,
                Some(_) => return None,
                None => rest.strip_prefix(' ')?,
            };
            Some(value.to_owned())
        })
    }

    fn counts(m: &Metrics) -> (u64, u64) {
        let text = m.encode();
        let count = |name: &str| {
            series(&text, &format!("{name}_count"), "").map_or(0, |v| v.trim().parse().unwrap())
        };
        (
            count("karpenter_pods_bound_duration_seconds"),
            count("karpenter_pods_startup_duration_seconds"),
        )
    }

    #[test]
    fn dra_requirements_are_resource_claims_of_the_pod_or_a_container() {
        use k8s_openapi::api::core::v1::{
            Container, PodResourceClaim, PodSpec, ResourceClaim, ResourceRequirements,
        };
        let with = |spec: PodSpec| Pod {
            spec: Some(spec),
            ..Pod::default()
        };
        assert!(!has_dra(&Pod::default()));
        assert!(!has_dra(&with(PodSpec::default())));
        assert!(has_dra(&with(PodSpec {
            resource_claims: Some(vec![PodResourceClaim {
                name: "gpu".into(),
                ..PodResourceClaim::default()
            }]),
            ..PodSpec::default()
        })));
        assert!(has_dra(&with(PodSpec {
            init_containers: Some(vec![Container {
                resources: Some(ResourceRequirements {
                    claims: Some(vec![ResourceClaim {
                        name: "gpu".into(),
                        ..ResourceClaim::default()
                    }]),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }]),
            ..PodSpec::default()
        })));
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
            series(&m.encode(), name, "name=\"web\",namespace=\"default\"")
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

    #[test]
    fn provisioning_timers_run_from_the_ack_and_the_first_placement() {
        use k8s_openapi::api::core::v1::PodCondition;
        use karpenter_cluster::reconciler::Event;
        let mut state = ClusterState::new();
        let mut feed = Feed::default();
        let m = Metrics::new();
        let mut pm = PodMetrics::default();
        let value = |m: &Metrics, name: &str| series(&m.encode(), name, "");
        let mut step = |p: Pod, now: Millis| {
            let pods = vec![Arc::new(p)];
            let objects = ApiObjects {
                pods: &pods,
                ..ApiObjects::default()
            };
            let synced = feed.sync(&mut state, &objects, &BTreeMap::new(), 0);
            let lookup = |_: &PodKey| pods.first().cloned();
            pm.record(&synced.touched, false, lookup, &state, now, &m);
        };
        let mut pending = pod_with_conditions(None, None, None);
        pending.metadata.resource_version = Some("1".into());
        pending.status.as_mut().unwrap().conditions = Some(vec![PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            ..PodCondition::default()
        }]);
        step(pending.clone(), 10_000);
        let undecided = "karpenter_pods_provisioning_scheduling_undecided_time_seconds";
        assert_eq!(
            value(&m, undecided).as_deref(),
            Some("0.0"),
            "acked at 10 s"
        );
        let key = PodKey::new("default", "web");
        let mut plan = karpenter_scheduling::Plan::default();
        plan.existing
            .push(karpenter_scheduling::plan::NodePlacement {
                node: "n1".into(),
                pods: vec![key],
            });
        m.observe(&Event::Planned {
            pods: 1,
            plan: Box::new(plan),
            seconds: 0.1,
            at: 12_000,
        });
        assert_eq!(
            value(
                &m,
                "karpenter_pods_scheduling_decision_duration_seconds_sum"
            )
            .as_deref(),
            Some("2.0")
        );
        pending.metadata.resource_version = Some("2".into());
        step(pending, 15_000);
        assert_eq!(value(&m, undecided), None, "decided");
        assert_eq!(
            value(&m, "karpenter_pods_provisioning_unbound_time_seconds").as_deref(),
            Some("3.0"),
            "placed at 12 s"
        );
        let mut bound = pod_with_conditions(Some("n1"), Some(20_000), None);
        bound.metadata.resource_version = Some("3".into());
        bound.status.as_mut().unwrap().phase = Some("Pending".into());
        step(bound, 21_000);
        assert_eq!(
            value(&m, "karpenter_pods_provisioning_bound_duration_seconds_sum").as_deref(),
            Some("8.0")
        );
        assert_eq!(
            value(&m, "karpenter_pods_provisioning_unbound_time_seconds"),
            None
        );
        assert_eq!(
            value(&m, "karpenter_pods_provisioning_unstarted_time_seconds").as_deref(),
            Some("9.0")
        );
        let mut ready = pod_with_conditions(Some("n1"), Some(20_000), Some(30_000));
        ready.metadata.resource_version = Some("4".into());
        step(ready, 31_000);
        assert_eq!(
            value(
                &m,
                "karpenter_pods_provisioning_startup_duration_seconds_sum"
            )
            .as_deref(),
            Some("18.0")
        );
        assert_eq!(
            value(&m, "karpenter_pods_provisioning_unstarted_time_seconds"),
            None
        );
    }
}
