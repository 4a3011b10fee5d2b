//! operatorpkg's status-condition and termination families
//! (`operator_<kind>_status_condition_*`, `operator_<kind>_termination_*` and the deprecated
//! kind-less `operator_status_condition_*` / `operator_termination_*`), computed from the
//! objects' `status.conditions` and deletion timestamps as operatorpkg's status controller
//! computes them: a gauge series per object and current condition, a transition counted (and
//! the time spent in the previous status observed) whenever an object is seen with a
//! condition status that differs from the one seen before, and the termination time observed
//! when a deleting object is gone.
//!
//! Like upstream, transitions are observed, not logged: two changes of one condition between
//! two observations count as one. The kinds are fed from the index ([`Metrics::record_status`])
//! except EC2NodeClasses, which the AWS side hands in ([`Metrics::record_statuses`]).

use crate::{DynamicLabels, FloatGauge, HistogramFamily, Metrics, NodePoolLabels};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_cloudprovider::v1::{Condition, ConditionStatus, StatusConditions};
use karpenter_cluster::{ClusterState, ObjectKey};
use karpenter_scheduling::model::Millis;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// How often every object's gauges are refreshed even when nothing changed: operatorpkg's
/// status controller requeues each object every 10 s.
pub const REFRESH_PERIOD_MS: Millis = 10_000;

/// The Prometheus client's default buckets, operatorpkg's when a controller sets none.
const DEFAULT_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The node class label Karpenter puts on NodeClaims and Nodes for the AWS provider's
/// EC2NodeClass (`NodeClassLabelKey`): karpenter-rs's only node class.
const NODE_CLASS_LABEL: &str = "karpenter.k8s.aws/ec2nodeclass";

const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";

/// The kinds whose status conditions are exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatusKind {
    /// `karpenter.sh/v1` NodeClaim.
    NodeClaim,
    /// `karpenter.sh/v1` NodePool.
    NodePool,
    /// `v1` Node.
    Node,
    /// `karpenter.k8s.aws/v1` EC2NodeClass.
    Ec2NodeClass,
}

impl StatusKind {
    const ALL: [Self; 4] = [
        Self::NodeClaim,
        Self::NodePool,
        Self::Node,
        Self::Ec2NodeClass,
    ];

    /// The lower-case kind in the family names.
    fn family(self) -> &'static str {
        match self {
            Self::NodeClaim => "nodeclaim",
            Self::NodePool => "nodepool",
            Self::Node => "node",
            Self::Ec2NodeClass => "ec2nodeclass",
        }
    }

    /// `(group, kind)` of the deprecated kind-less families, for the kinds upstream
    /// registers with `EmitDeprecatedMetrics` (not Nodes).
    fn deprecated(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::NodeClaim => Some(("karpenter.sh", "NodeClaim")),
            Self::NodePool => Some(("karpenter.sh", "NodePool")),
            Self::Node => None,
            Self::Ec2NodeClass => Some(("karpenter.k8s.aws", "EC2NodeClass")),
        }
    }

    /// The object labels upstream adds to every series of the kind (`WithLabels`).
    fn label_keys(self) -> &'static [&'static str] {
        match self {
            Self::NodeClaim => &[NODE_CLASS_LABEL, NODEPOOL_LABEL],
            Self::Node => &[NODE_CLASS_LABEL, NODEPOOL_LABEL, "karpenter.sh/initialized"],
            Self::NodePool | Self::Ec2NodeClass => &[],
        }
    }

    /// The transition and termination buckets: Karpenter sets 0.5 s … 8192 s (doubling) on
    /// its own kinds; the AWS provider keeps operatorpkg's default.
    fn histogram(self) -> fn() -> Histogram {
        match self {
            Self::NodeClaim | Self::NodePool | Self::Node => {
                || Histogram::new(exponential_buckets(0.5, 2.0, 15))
            }
            Self::Ec2NodeClass => default_histogram,
        }
    }
}

/// `karpenter.sh/nodepool` → `karpenter_sh_nodepool`, as operatorpkg names label keys.
fn prometheus_label(key: &str) -> String {
    key.replace(['/', '.', '-'], "_")
}

/// One condition as the families read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedCondition {
    /// `type`.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `reason`.
    pub reason: String,
    /// `lastTransitionTime`.
    pub since: Millis,
}

/// What the families read of one object: any kind's metadata and conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectStatus {
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The object's labels.
    pub labels: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp`.
    pub deleting_since: Option<Millis>,
    /// `status.conditions`.
    pub conditions: Vec<ObservedCondition>,
}

fn millis(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Millis {
    t.0.as_millisecond()
}

impl ObjectStatus {
    /// The status of an object with Karpenter-style conditions (NodeClaim, NodePool,
    /// EC2NodeClass).
    pub fn of(meta: &ObjectMeta, conditions: &[Condition]) -> Self {
        Self {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            deleting_since: meta.deletion_timestamp.as_ref().map(millis),
            conditions: conditions
                .iter()
                .map(|c| ObservedCondition {
                    type_: c.type_.clone(),
                    status: match c.status {
                        ConditionStatus::True => "True",
                        ConditionStatus::False => "False",
                        ConditionStatus::Unknown => "Unknown",
                    }
                    .to_owned(),
                    reason: c.reason.clone(),
                    since: millis(&c.last_transition_time),
                })
                .collect(),
        }
    }

    /// The status of a Node (its kubelet's conditions).
    pub fn of_node(node: &Node) -> Self {
        let conditions = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .map(|c| ObservedCondition {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone().unwrap_or_default(),
                since: c.last_transition_time.as_ref().map_or(0, millis),
            })
            .collect();
        Self {
            conditions,
            ..Self::of(&node.metadata, &[])
        }
    }
}

/// One kind's families (or the deprecated kind-less ones).
#[derive(Clone)]
struct KindFamilies {
    count: Family<DynamicLabels, FloatGauge>,
    current: Family<DynamicLabels, FloatGauge>,
    transitions: Family<DynamicLabels, Counter>,
    transition_seconds: HistogramFamily<DynamicLabels>,
    terminating: Family<DynamicLabels, FloatGauge>,
    termination: HistogramFamily<DynamicLabels>,
}

impl KindFamilies {
    fn new(histogram: fn() -> Histogram) -> Self {
        Self {
            count: Family::default(),
            current: Family::default(),
            transitions: Family::default(),
            transition_seconds: Family::new_with_constructor(histogram),
            terminating: Family::default(),
            termination: Family::new_with_constructor(histogram),
        }
    }

    /// Registers the six families under `operator_{prefix}`.
    fn register(&self, r: &mut Registry, prefix: &str) {
        r.register(
            format!("operator_{prefix}status_condition_count"),
            "The number of a condition for a given object, type and status. e.g. Alarm := Available=False > 0",
            self.count.clone(),
        );
        r.register(
            format!("operator_{prefix}status_condition_current_status_seconds"),
            "The current amount of time in seconds that a status condition has been in a specific state. Alarm := P99(Updated=Unknown) > 5 minutes",
            self.current.clone(),
        );
        r.register(
            format!("operator_{prefix}status_condition_transitions"),
            "The count of transitions of a given object, type and status.",
            self.transitions.clone(),
        );
        r.register(
            format!("operator_{prefix}status_condition_transition_seconds"),
            "The amount of time a condition was in a given state before transitioning. e.g. Alarm := P99(Updated=False) > 5 minutes",
            self.transition_seconds.clone(),
        );
        r.register(
            format!("operator_{prefix}termination_current_time_seconds"),
            "The current amount of time in seconds that an object has been in terminating state.",
            self.terminating.clone(),
        );
        r.register(
            format!("operator_{prefix}termination_duration_seconds"),
            "The amount of time taken by an object to terminate completely.",
            self.termination.clone(),
        );
    }
}

fn default_histogram() -> Histogram {
    Histogram::new(DEFAULT_BUCKETS)
}

/// Every kind's families and the deprecated ones, and what was last seen of each object.
#[derive(Clone)]
pub struct StatusFamilies {
    kinds: BTreeMap<StatusKind, KindFamilies>,
    deprecated: KindFamilies,
    seen: Arc<std::sync::Mutex<Seen>>,
}

/// What was last seen of each object, and when every object was last refreshed.
#[derive(Debug, Default)]
struct Seen {
    objects: BTreeMap<(StatusKind, String, String), Observed>,
    refreshed_at: Option<Millis>,
}

/// The last observation of one object and the gauge series written for it.
#[derive(Debug)]
struct Observed {
    status: ObjectStatus,
    gauges: Vec<(bool, DynamicLabels)>,
    terminating: Vec<(bool, DynamicLabels)>,
}

impl StatusFamilies {
    pub(crate) fn register(r: &mut Registry) -> Self {
        let kinds: BTreeMap<StatusKind, KindFamilies> = StatusKind::ALL
            .into_iter()
            .map(|k| (k, KindFamilies::new(k.histogram())))
            .collect();
        for (kind, families) in &kinds {
            families.register(r, &format!("{}_", kind.family()));
        }
        let deprecated = KindFamilies::new(default_histogram);
        deprecated.register(r, "");
        Self {
            kinds,
            deprecated,
            seen: Arc::default(),
        }
    }
}

fn pairs(pairs: &[(&str, &str)]) -> DynamicLabels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

impl Metrics {
    /// Records one observation of `status`, an object of `kind` (operatorpkg's reconcile of
    /// an existing object) at `now`.
    pub fn observe_status(&self, kind: StatusKind, status: &ObjectStatus, now: Millis) {
        let families = &self.status;
        let mut seen = families.seen.lock().unwrap_or_else(|e| e.into_inner());
        let key = (kind, status.namespace.clone(), status.name.clone());
        let previous = seen.objects.remove(&key);
        let family = &families.kinds[&kind];
        let deprecated = kind.deprecated();
        let extra: DynamicLabels = kind
            .label_keys()
            .iter()
            .map(|k| {
                let v = status.labels.get(*k).cloned().unwrap_or_default();
                (prometheus_label(k), v)
            })
            .collect();
        let with_kind = |mut labels: DynamicLabels| {
            if let Some((group, kind)) = deprecated {
                labels.extend(pairs(&[("group", group), ("kind", kind)]));
            }
            labels
        };
        let object = [
            ("namespace", status.namespace.as_str()),
            ("name", status.name.as_str()),
        ];

        // The gauges: one series per current condition; the previous ones that no longer
        // match (status, reason or labels changed, condition gone) are removed.
        let mut gauges = Vec::new();
        for c in &status.conditions {
            let base = pairs(&[
                object[0],
                object[1],
                ("type", &c.type_),
                ("status", &c.status),
                ("reason", &c.reason),
            ]);
            let age = (now - c.since).max(0) as f64 / 1000.0;
            let mut labels = base.clone();
            labels.extend(extra.iter().cloned());
            let mut series = vec![(false, labels)];
            if deprecated.is_some() {
                series.push((true, with_kind(base)));
            }
            for (is_deprecated, labels) in &series {
                let f = if *is_deprecated {
                    &families.deprecated
                } else {
                    family
                };
                f.count.get_or_create(labels).set(1.0);
                f.current.get_or_create(labels).set(age);
            }
            gauges.extend(series);
        }
        let mut terminating = Vec::new();
        if let Some(since) = status.deleting_since {
            let mut labels = pairs(&object);
            labels.extend(extra.iter().cloned());
            terminating.push((false, labels));
            if deprecated.is_some() {
                terminating.push((true, with_kind(pairs(&object))));
            }
            for (is_deprecated, labels) in &terminating {
                let f = if *is_deprecated {
                    &families.deprecated
                } else {
                    family
                };
                f.terminating
                    .get_or_create(labels)
                    .set((now - since).max(0) as f64 / 1000.0);
            }
        }
        if let Some(previous) = &previous {
            remove_stale(families, family, &previous.gauges, &gauges, |f| &f.count);
            remove_stale(families, family, &previous.gauges, &gauges, |f| &f.current);
            remove_stale(families, family, &previous.terminating, &terminating, |f| {
                &f.terminating
            });
        }

        // Transitions: a condition seen for the first time, or with another status.
        let before = previous
            .as_ref()
            .map(|p| &p.status.conditions[..])
            .unwrap_or_default();
        for c in &status.conditions {
            let old = before.iter().find(|o| o.type_ == c.type_);
            if old.is_some_and(|o| o.status == c.status) {
                continue;
            }
            let counted = pairs(&[
                ("type", &c.type_),
                ("status", &c.status),
                ("reason", &c.reason),
            ]);
            let mut labels = counted.clone();
            labels.extend(extra.iter().cloned());
            family.transitions.get_or_create(&labels).inc();
            let drained = c.type_ == "Drained" && c.status == "True";
            if kind == StatusKind::NodeClaim && drained && previous.is_some() {
                // Upstream counts a drained node when its claim's Drained turns true; a
                // claim first seen drained (after a restart) was counted before.
                let nodepool = status
                    .labels
                    .get(NODEPOOL_LABEL)
                    .cloned()
                    .unwrap_or_default();
                self.nodes_drained
                    .get_or_create(&NodePoolLabels { nodepool })
                    .inc();
            }
            if deprecated.is_some() {
                families
                    .deprecated
                    .transitions
                    .get_or_create(&with_kind(counted))
                    .inc();
            }
            let Some(old) = old else {
                continue;
            };
            let seconds = (c.since - old.since) as f64 / 1000.0;
            let timed = pairs(&[("type", &old.type_), ("status", &old.status)]);
            let mut labels = timed.clone();
            labels.extend(extra.iter().cloned());
            family
                .transition_seconds
                .get_or_create(&labels)
                .observe(seconds);
            if deprecated.is_some() {
                (families.deprecated.transition_seconds)
                    .get_or_create(&with_kind(timed))
                    .observe(seconds);
            }
        }
        seen.objects.insert(
            key,
            Observed {
                status: status.clone(),
                gauges,
                terminating,
            },
        );
    }

    /// Records that the object `namespace/name` of `kind` is gone at `now`: its gauge series
    /// are removed and, if it was terminating, its termination time is observed.
    pub fn forget_status(&self, kind: StatusKind, namespace: &str, name: &str, now: Millis) {
        let families = &self.status;
        let mut seen = families.seen.lock().unwrap_or_else(|e| e.into_inner());
        let key = (kind, namespace.to_owned(), name.to_owned());
        let Some(previous) = seen.objects.remove(&key) else {
            return;
        };
        let family = &families.kinds[&kind];
        remove_stale(families, family, &previous.gauges, &[], |f| &f.count);
        remove_stale(families, family, &previous.gauges, &[], |f| &f.current);
        remove_stale(families, family, &previous.terminating, &[], |f| {
            &f.terminating
        });
        let Some(since) = previous.status.deleting_since else {
            return;
        };
        let seconds = (now - since).max(0) as f64 / 1000.0;
        let nodepool = previous.status.labels.get(NODEPOOL_LABEL);
        if let Some(nodepool) = nodepool.filter(|_| kind == StatusKind::Node) {
            // A managed Node is gone once termination removed its finalizer.
            (self.nodes_termination_duration).observe(&[nodepool], seconds);
        }
        let extra: DynamicLabels = kind
            .label_keys()
            .iter()
            .map(|k| {
                let v = previous.status.labels.get(*k).cloned().unwrap_or_default();
                (prometheus_label(k), v)
            })
            .collect();
        family.termination.get_or_create(&extra).observe(seconds);
        if let Some((group, kind)) = kind.deprecated() {
            (families.deprecated.termination)
                .get_or_create(&pairs(&[("group", group), ("kind", kind)]))
                .observe(seconds);
        }
    }

    /// Records the complete set of `kind`'s objects at `now`: each is observed, and the
    /// objects seen before but absent from `objects` are forgotten. The AWS side calls it
    /// with its EC2NodeClasses.
    pub fn record_statuses(
        &self,
        kind: StatusKind,
        objects: impl IntoIterator<Item = ObjectStatus>,
        now: Millis,
    ) {
        let mut present = BTreeSet::new();
        for status in objects {
            self.observe_status(kind, &status, now);
            present.insert((status.namespace, status.name));
        }
        let gone: Vec<(String, String)> = {
            let seen = self.status.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.objects
                .keys()
                .filter(|(k, ns, n)| *k == kind && !present.contains(&(ns.clone(), n.clone())))
                .map(|(_, ns, n)| (ns.clone(), n.clone()))
                .collect()
        };
        for (namespace, name) in gone {
            self.forget_status(kind, &namespace, &name, now);
        }
    }

    /// Keeps the NodeClaim, NodePool and Node families in line with the index: the objects
    /// among `touched` (the keys a feed pass applied or deleted) are observed or forgotten,
    /// and every [`REFRESH_PERIOD_MS`] (or after a full feed, `full`) every object is, so
    /// that the age gauges move and objects the index lost are forgotten. Nodes are read
    /// through `node` (the index keeps neither their condition reasons nor their deletion
    /// timestamps).
    pub fn record_status(
        &self,
        touched: &[ObjectKey],
        full: bool,
        node: impl Fn(&str) -> Option<Arc<Node>>,
        state: &ClusterState,
        now: Millis,
    ) {
        let due = {
            let mut seen = self.status.seen.lock().unwrap_or_else(|e| e.into_inner());
            let due = full
                || seen
                    .refreshed_at
                    .is_none_or(|t| now - t >= REFRESH_PERIOD_MS);
            if due {
                seen.refreshed_at = Some(now);
            }
            due
        };
        let claim = |name: &str| {
            state
                .node_claims()
                .get(name)
                .map(|c| ObjectStatus::of(&c.metadata, c.conditions()))
        };
        let pool = |name: &str| {
            state
                .node_pools()
                .get(name)
                .map(|p| ObjectStatus::of(&p.metadata, p.conditions()))
        };
        let joined = |name: &str| {
            state
                .nodes()
                .get(name)
                .filter(|r| !matches!(r.kubelet, karpenter_cluster::Kubelet::NotJoined))
                .and(node(name))
                .map(|n| ObjectStatus::of_node(&n))
        };
        if due {
            self.record_statuses(
                StatusKind::NodeClaim,
                state.node_claims().keys().filter_map(|n| claim(n)),
                now,
            );
            self.record_statuses(
                StatusKind::NodePool,
                state.node_pools().keys().filter_map(|n| pool(n)),
                now,
            );
            self.record_statuses(
                StatusKind::Node,
                state.nodes().keys().filter_map(|n| joined(n)),
                now,
            );
            return;
        }
        for key in touched {
            let (kind, name, status) = match key {
                ObjectKey::NodeClaim(n) => (StatusKind::NodeClaim, n, claim(n)),
                ObjectKey::NodePool(n) => (StatusKind::NodePool, n, pool(n)),
                ObjectKey::Node(n) => (StatusKind::Node, n, joined(n)),
                _ => continue,
            };
            match status {
                Some(status) => self.observe_status(kind, &status, now),
                None => self.forget_status(kind, "", name, now),
            }
        }
    }
}

/// Removes from `f(kind)` (or `f(deprecated)`) the series of `old` that are not in `new`.
fn remove_stale(
    families: &StatusFamilies,
    family: &KindFamilies,
    old: &[(bool, DynamicLabels)],
    new: &[(bool, DynamicLabels)],
    f: impl Fn(&KindFamilies) -> &Family<DynamicLabels, FloatGauge>,
) {
    for series in old.iter().filter(|s| !new.contains(s)) {
        let target = if series.0 {
            &families.deprecated
        } else {
            family
        };
        f(target).remove(&series.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cluster::Object;
    use karpenter_cluster::provisioner::time;

    use crate::tests::lines;

    fn has(m: &Metrics, line: &str) -> bool {
        m.encode().lines().any(|l| l == line)
    }

    #[test]
    fn nodeclaim_transitions_are_counted_and_timed() {
        let m = Metrics::new();
        let mut state = ClusterState::new();
        let mut claim = karpenter_testing::api::node_claim("c1");
        claim.set_false("Launched", "Pending", "", time(10_000));
        state.apply(Object::NodeClaim(Box::new(claim.clone())));
        let none = |_: &str| None;
        m.record_status(&[], true, none, &state, 15_000);
        assert!(
            has(
                &m,
                r#"operator_nodeclaim_status_condition_count{namespace="",name="c1",type="Launched",status="False",reason="Pending",karpenter_k8s_aws_ec2nodeclass="",karpenter_sh_nodepool="default"} 1.0"#
            ),
            "{}",
            m.encode()
        );
        assert!(has(
            &m,
            r#"operator_nodeclaim_status_condition_current_status_seconds{namespace="",name="c1",type="Launched",status="False",reason="Pending",karpenter_k8s_aws_ec2nodeclass="",karpenter_sh_nodepool="default"} 5.0"#
        ));
        assert!(has(
            &m,
            r#"operator_status_condition_count{namespace="",name="c1",type="Launched",status="False",reason="Pending",group="karpenter.sh",kind="NodeClaim"} 1.0"#
        ));
        // Launched after 30 s: a transition to True, 30 s spent False.
        claim.set_true("Launched", time(40_000));
        state.apply(Object::NodeClaim(Box::new(claim.clone())));
        let touched = [ObjectKey::NodeClaim("c1".into())];
        m.record_status(&touched, false, none, &state, 41_000);
        assert!(has(
            &m,
            r#"operator_nodeclaim_status_condition_transitions_total{type="Launched",status="True",reason="Launched",karpenter_k8s_aws_ec2nodeclass="",karpenter_sh_nodepool="default"} 1"#
        ));
        assert!(has(
            &m,
            r#"operator_nodeclaim_status_condition_transition_seconds_sum{type="Launched",status="False",karpenter_k8s_aws_ec2nodeclass="",karpenter_sh_nodepool="default"} 30.0"#
        ));
        assert!(has(
            &m,
            r#"operator_status_condition_transition_seconds_count{type="Launched",status="False",group="karpenter.sh",kind="NodeClaim"} 1"#
        ));
        let counts = lines(&m, "operator_nodeclaim_status_condition_count{");
        assert!(
            counts.iter().all(|l| !l.contains(r#"reason="Pending""#)),
            "the False series went with the transition: {counts:?}"
        );
        // Seen again unchanged: no second transition.
        m.record_status(&touched, false, none, &state, 42_000);
        assert!(has(
            &m,
            r#"operator_nodeclaim_status_condition_transitions_total{type="Launched",status="True",reason="Launched",karpenter_k8s_aws_ec2nodeclass="",karpenter_sh_nodepool="default"} 1"#
        ));
    }

    #[test]
    fn a_terminated_nodeclaim_observes_its_termination_time() {
        let m = Metrics::new();
        let mut state = ClusterState::new();
        let mut claim = karpenter_testing::api::node_claim("c1");
        claim.metadata.deletion_timestamp = Some(time(100_000));
        state.apply(Object::NodeClaim(Box::new(claim)));
        let none = |_: &str| None;
        m.record_status(&[], true, none, &state, 160_000);
        assert!(has(
            &m,
            r#"operator_nodeclaim_termination_current_time_seconds{namespace="",name="c1",karpenter_k8s_aws_ec2nodeclass="",karpenter_sh_nodepool="default"} 60.0"#
        ));
        state.delete(&ObjectKey::NodeClaim("c1".into()));
        let touched = [ObjectKey::NodeClaim("c1".into())];
        m.record_status(&touched, false, none, &state, 190_000);
        assert!(lines(&m, "operator_nodeclaim_termination_current_time_seconds{").is_empty());
        assert!(has(
            &m,
            r#"operator_nodeclaim_termination_duration_seconds_sum{karpenter_k8s_aws_ec2nodeclass="",karpenter_sh_nodepool="default"} 90.0"#
        ));
        assert!(has(
            &m,
            r#"operator_termination_duration_seconds_sum{group="karpenter.sh",kind="NodeClaim"} 90.0"#
        ));
    }

    #[test]
    fn nodes_and_pools_are_refreshed_and_forgotten() {
        let m = Metrics::new();
        let mut state = ClusterState::new();
        let mut node = karpenter_testing::api::ready(karpenter_testing::api::registering_node(
            "n1",
            "fake://z/n1",
        ));
        node.metadata.labels = Some([("karpenter.sh/initialized".into(), "true".into())].into());
        let cond = &mut node.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
        cond.reason = Some("KubeletReady".into());
        cond.last_transition_time = Some(time(1_000));
        let node = Arc::new(node);
        let record = karpenter_cluster::api_objects::node_record(&node, None).unwrap();
        state.apply(Object::Node(Box::new(record)));
        let pool: karpenter_cloudprovider::v1::NodePool =
            serde_json::from_value(serde_json::json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                "metadata": {"name": "default"},
                "spec": {"template": {"spec": {"requirements": [],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}},
                "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                    "lastTransitionTime": "1970-01-01T00:00:02Z", "message": ""}]}
            }))
            .unwrap();
        state.apply(Object::NodePool(Box::new(pool)));
        let lookup = |n: &str| (n == "n1").then(|| node.clone());
        m.record_status(&[], false, lookup, &state, 11_000);
        let series = r#"{namespace="",name="n1",type="Ready",status="True",reason="KubeletReady",karpenter_k8s_aws_ec2nodeclass="",karpenter_sh_nodepool="",karpenter_sh_initialized="true"}"#;
        assert!(has(
            &m,
            &format!("operator_node_status_condition_current_status_seconds{series} 10.0")
        ));
        assert!(
            lines(&m, "operator_status_condition_count{")
                .iter()
                .all(|l| !l.contains("kind=\"Node\"")),
            "upstream emits no deprecated series for Nodes"
        );
        assert!(has(
            &m,
            r#"operator_nodepool_status_condition_count{namespace="",name="default",type="Ready",status="True",reason="Ready"} 1.0"#
        ));
        // Not due yet: the age gauge stays; due after the period: it moves.
        m.record_status(&[], false, lookup, &state, 15_000);
        assert!(has(
            &m,
            &format!("operator_node_status_condition_current_status_seconds{series} 10.0")
        ));
        m.record_status(&[], false, lookup, &state, 21_000);
        assert!(has(
            &m,
            &format!("operator_node_status_condition_current_status_seconds{series} 20.0")
        ));
        // A pool the index lost is forgotten at the next refresh.
        state.delete(&ObjectKey::NodePool("default".into()));
        m.record_status(&[], true, lookup, &state, 22_000);
        assert!(lines(&m, "operator_nodepool_status_condition_count{").is_empty());
    }

    #[test]
    fn any_kind_can_be_recorded_from_its_conditions() {
        use karpenter_cloudprovider::v1::Condition;
        let m = Metrics::new();
        let meta = ObjectMeta {
            name: Some("default".into()),
            ..ObjectMeta::default()
        };
        let condition = |status, at| Condition {
            type_: "AMIsReady".into(),
            status,
            observed_generation: None,
            last_transition_time: time(at),
            reason: "AMIsReady".into(),
            message: String::new(),
        };
        let first = [condition(ConditionStatus::Unknown, 0)];
        let kind = StatusKind::Ec2NodeClass;
        m.record_statuses(kind, [ObjectStatus::of(&meta, &first)], 1_000);
        let then = [condition(ConditionStatus::True, 3_000)];
        m.record_statuses(kind, [ObjectStatus::of(&meta, &then)], 4_000);
        assert!(has(
            &m,
            r#"operator_ec2nodeclass_status_condition_transitions_total{type="AMIsReady",status="True",reason="AMIsReady"} 1"#
        ));
        assert!(has(
            &m,
            r#"operator_ec2nodeclass_status_condition_transition_seconds_sum{type="AMIsReady",status="Unknown"} 3.0"#
        ));
        assert!(has(
            &m,
            r#"operator_status_condition_count{namespace="",name="default",type="AMIsReady",status="True",reason="AMIsReady",group="karpenter.k8s.aws",kind="EC2NodeClass"} 1.0"#
        ));
        m.record_statuses(kind, [], 5_000);
        assert!(lines(&m, "operator_ec2nodeclass_status_condition_count{").is_empty());
    }

    #[test]
    fn drains_and_node_terminations_feed_karpenters_families() {
        let m = Metrics::new();
        let mut state = ClusterState::new();
        let mut claim = karpenter_testing::api::node_claim("c1");
        claim.metadata.deletion_timestamp = Some(time(0));
        claim.set_condition("Drained", ConditionStatus::Unknown, "Draining", "", time(0));
        state.apply(Object::NodeClaim(Box::new(claim.clone())));
        let mut node = karpenter_testing::api::ready(karpenter_testing::api::registering_node(
            "n1",
            "fake://z/n1",
        ));
        node.metadata.labels = Some([(NODEPOOL_LABEL.into(), "default".into())].into());
        node.metadata.deletion_timestamp = Some(time(5_000));
        let record = karpenter_cluster::api_objects::node_record(&node, None).unwrap();
        state.apply(Object::Node(Box::new(record)));
        let node = Arc::new(node);
        m.record_status(&[], true, |_| Some(node.clone()), &state, 6_000);
        assert!(
            lines(&m, "karpenter_nodes_drained_total").is_empty(),
            "draining"
        );
        claim.set_condition("Drained", ConditionStatus::True, "Drained", "", time(7_000));
        state.apply(Object::NodeClaim(Box::new(claim)));
        let touched = [
            ObjectKey::NodeClaim("c1".into()),
            ObjectKey::Node("n1".into()),
        ];
        m.record_status(&touched, false, |_| Some(node.clone()), &state, 7_000);
        m.record_status(&touched, false, |_| Some(node.clone()), &state, 8_000);
        assert_eq!(
            lines(&m, "karpenter_nodes_drained_total"),
            [r#"karpenter_nodes_drained_total{nodepool="default"} 1"#],
            "counted once"
        );
        let mut seen_drained = karpenter_testing::api::node_claim("c2");
        seen_drained.set_condition("Drained", ConditionStatus::True, "Drained", "", time(0));
        state.apply(Object::NodeClaim(Box::new(seen_drained)));
        let c2 = [ObjectKey::NodeClaim("c2".into())];
        m.record_status(&c2, false, |_| Some(node.clone()), &state, 9_000);
        assert_eq!(
            lines(&m, "karpenter_nodes_drained_total"),
            [r#"karpenter_nodes_drained_total{nodepool="default"} 1"#],
            "a claim first seen drained (a restart) is not counted again"
        );
        state.delete(&ObjectKey::Node("n1".into()));
        m.record_status(&touched, false, |_| None, &state, 65_000);
        assert!(has(
            &m,
            r#"karpenter_nodes_termination_duration_seconds_sum{nodepool="default"} 60.0"#
        ));
    }
}
