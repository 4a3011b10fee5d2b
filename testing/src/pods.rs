//! Pods and the pieces of a pod spec the scheduler reads (labels, spread, affinity, taints
//! and tolerations), plus DaemonSets.

use crate::resources::res;
use karpenter_scheduling::model::{
    DaemonSet, InclusionPolicy, NodeSelectorTerm, OwnerRef, Pod, PodAffinityTerm,
    TopologySpreadConstraint, WhenUnsatisfiable,
};
use karpenter_scheduling::requirements::NodeSelectorRequirement;
use karpenter_scheduling::selector::LabelSelector;
use karpenter_scheduling::taints::{Taint, TaintEffect, Toleration, TolerationOperator};

/// A pending pod `default/name` (uid `name`) requesting `cpu_millis` millicores and `memory`
/// bytes, with no owner, label or constraint.
pub fn pod(name: &str, cpu_millis: i64, memory: i64) -> Pod {
    Pod {
        namespace: "default".into(),
        name: name.into(),
        uid: name.into(),
        requests: res(cpu_millis, memory),
        ..Pod::default()
    }
}

/// `p` with `labels` added (replacing values of keys it had).
pub fn labeled(mut p: Pod, labels: &[(&str, &str)]) -> Pod {
    p.labels
        .extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    p
}

/// `p` bound to the node `node`.
pub fn bound(mut p: Pod, node: &str) -> Pod {
    p.node_name = Some(node.into());
    p
}

/// A selector matching exactly `labels` (no expressions).
pub fn selector(labels: &[(&str, &str)]) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        match_expressions: vec![],
    })
}

/// A topology spread of at most `skew` over `key` among the pods matching `labels`, with
/// Kubernetes' default policies (node affinity honoured, taints ignored).
pub fn spread(
    key: &str,
    skew: i32,
    labels: &[(&str, &str)],
    when: WhenUnsatisfiable,
) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: skew,
        topology_key: key.into(),
        when_unsatisfiable: when,
        label_selector: selector(labels),
        min_domains: None,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
        match_label_keys: vec![],
    }
}

/// A pod (anti-)affinity term over `key` towards the pods matching `labels`, in the pod's
/// own namespace.
pub fn term(key: &str, labels: &[(&str, &str)]) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: selector(labels),
        topology_key: key.into(),
        ..PodAffinityTerm::default()
    }
}

/// A node affinity term requiring every one of `items`.
pub fn affinity_terms(items: &[NodeSelectorRequirement]) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: items.to_vec(),
        match_fields: vec![],
    }
}

/// The taint `key=value:effect`.
pub fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
    Taint::new(key, value, effect)
}

/// Tolerates `key=value` with any effect.
pub fn toleration(key: &str, value: &str) -> Toleration {
    Toleration {
        key: key.into(),
        operator: TolerationOperator::Equal,
        value: value.into(),
        ..Toleration::default()
    }
}

/// The DaemonSet `kube-system/name` whose pod (owned by it) requests `cpu_millis` and
/// tolerates nothing, so it runs on every untainted node.
pub fn daemon(name: &str, cpu_millis: i64) -> DaemonSet {
    let mut p = pod(name, cpu_millis, 0);
    p.owner = Some(OwnerRef {
        kind: "DaemonSet".into(),
        name: name.into(),
        uid: String::new(),
    });
    DaemonSet {
        namespace: "kube-system".into(),
        name: name.into(),
        pod: p,
    }
}
