//! The families the operator records as it carries out termination and repair: evictions
//! (`karpenter_pods_eviction_requests_total`, `karpenter_pods_drained_total`) and repaired
//! NodeClaims (`karpenter_nodeclaims_disrupted_total`,
//! `karpenter_nodeclaims_unhealthy_disrupted_total`), with upstream's label values, and the
//! instance termination time (`karpenter_nodeclaims_instance_termination_duration_seconds`).

use crate::{
    CodeLabels, DisruptedLabels, Metrics, NodePoolLabels, NodePoolZoneLabels, ReasonLabels,
    TerminatedLabels, UnhealthyLabels,
};
use k8s_openapi::api::core::v1::Node;
use karpenter_cloudprovider::NodeClaim;
use karpenter_cloudprovider::v1::labels;
use karpenter_cloudprovider::v1::{ConditionStatus, ConditionType, StatusConditions};
use karpenter_scheduling::model::Millis;
use std::sync::Arc;

/// Upstream's `pretty.ToSnakeCase`: `MemoryPressure` → `memory_pressure`, `ABCDef` →
/// `abc_def`.
pub fn snake_case(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 4);
    for (i, c) in chars.iter().enumerate() {
        let starts_word = c.is_ascii_uppercase()
            && i > 0
            && (chars.get(i + 1).is_some_and(char::is_ascii_lowercase)
                || chars[i - 1].is_ascii_lowercase()
                || chars[i - 1].is_ascii_digit());
        if starts_word {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Upstream's `IsReschedulable` on an API pod: active (not finished, not terminating) or a
/// terminating StatefulSet pod, and owned by neither a DaemonSet nor its Node (a mirror pod).
/// What `karpenter_pods_disruption_initiated_total` counts.
pub fn reschedulable_pod(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    let owned_by = |kind: &str| {
        pod.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == kind)
    };
    let finished = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let active = !finished && !terminating;
    (active || (owned_by("StatefulSet") && terminating))
        && !owned_by("DaemonSet")
        && !owned_by("Node")
}

/// Whether upstream counts the pods a disruption for metric `reason` initiates: its
/// disruption methods (`empty`, `underutilized`, `drifted`, `unhealthy`), expiry and garbage
/// collection do; launch and registration timeouts and interruptions do not.
pub fn counts_disrupted_pods(reason: &str) -> bool {
    matches!(
        reason,
        "empty" | "underutilized" | "drifted" | "unhealthy" | "expired" | "garbage_collected"
    )
}

/// Seconds from `from` to `now` (ms), 0 if `now` is earlier.
fn seconds_since(from: Millis, now: Millis) -> f64 {
    (now - from).max(0) as f64 / 1000.0
}

/// Why a pod is drained from `node`, as upstream labels `karpenter_pods_drained_total`: the
/// reason of its NodeClaim's true `DisruptionReason` condition, `Forceful Termination`
/// without one, empty when the node has no NodeClaim.
fn drain_reason(node: &str, claims: &[Arc<NodeClaim>]) -> String {
    let Some(claim) = claims.iter().find(|c| c.node_name() == node) else {
        return String::new();
    };
    match claim.condition(ConditionType::DisruptionReason.as_str()) {
        Some(c) if c.status == ConditionStatus::True => c.reason.clone(),
        _ => "Forceful Termination".to_owned(),
    }
}

impl Metrics {
    /// Records an eviction request for a pod on `node` that answered `code` (`200` on
    /// success, the HTTP status, or `error`); a successful one counts as a drained pod,
    /// labelled with the reason of `node`'s NodeClaim among `claims`.
    pub fn record_eviction(&self, code: &str, node: &str, claims: &[Arc<NodeClaim>]) {
        self.eviction_requests
            .get_or_create(&CodeLabels { code: code.into() })
            .inc();
        if code == "200" {
            let reason = drain_reason(node, claims);
            self.pods_drained
                .get_or_create(&ReasonLabels { reason })
                .inc();
        }
    }

    /// Records that the provider reports `claim`'s instance gone at `now`: the time since its
    /// termination began (its `InstanceTerminating` condition turned true) in
    /// `karpenter_nodeclaims_instance_termination_duration_seconds`. An instance found gone
    /// by the first delete began and ended now (0 s): upstream marks the condition then and
    /// observes the time since.
    pub fn record_instance_gone(&self, claim: &NodeClaim, now: Millis) {
        let began = claim
            .condition(ConditionType::InstanceTerminating.as_str())
            .filter(|c| c.status == ConditionStatus::True)
            .map_or(now, |c| c.last_transition_time.0.as_millisecond());
        let labels = NodePoolLabels {
            nodepool: claim.node_pool().unwrap_or_default().to_owned(),
        };
        (self.nodeclaims_instance_termination_duration)
            .get_or_create(&labels)
            .observe(seconds_since(began, now));
    }

    /// Records that the Node of `claim`, `node`, lost its termination finalizer at `now`:
    /// `karpenter_nodes_terminated_total` and the node's lifetime since its creation.
    pub fn record_node_terminated(&self, claim: &NodeClaim, node: &Node, now: Millis) {
        let nodepool = claim.node_pool().unwrap_or_default().to_owned();
        let zone = claim.label(labels::ZONE).unwrap_or_default().to_owned();
        let labels = NodePoolZoneLabels {
            nodepool: nodepool.clone(),
            zone,
        };
        self.nodes_terminated.get_or_create(&labels).inc();
        if let Some(created) = &node.metadata.creation_timestamp {
            (self.nodes_lifetime_duration)
                .get_or_create(&NodePoolLabels { nodepool })
                .observe(seconds_since(created.0.as_millisecond(), now));
        }
    }

    /// Records that `claim` lost its termination finalizer at `now`:
    /// `karpenter_nodeclaims_terminated_total` and the time since its deletion began.
    pub fn record_claim_terminated(&self, claim: &NodeClaim, now: Millis) {
        let nodepool = claim.node_pool().unwrap_or_default().to_owned();
        let label = |key: &str| claim.label(key).unwrap_or_default().to_owned();
        let terminated = TerminatedLabels {
            nodepool: nodepool.clone(),
            capacity_type: label(labels::CAPACITY_TYPE),
            zone: label(labels::ZONE),
        };
        self.nodeclaims_terminated.get_or_create(&terminated).inc();
        if let Some(started) = &claim.metadata.deletion_timestamp {
            (self.nodeclaims_termination_duration)
                .get_or_create(&NodePoolLabels { nodepool })
                .observe(seconds_since(started.0.as_millisecond(), now));
        }
    }

    /// Records that `claim` is disrupted with `labels`, and the `pods` reschedulable pods
    /// its disruption initiates (`None` where upstream counts none: launch and registration
    /// timeouts, interruptions).
    pub fn record_disrupted(&self, labels: &DisruptedLabels, pods: Option<usize>) {
        self.nodeclaims_disrupted.get_or_create(labels).inc();
        if let Some(pods) = pods {
            self.pods_disruption_initiated
                .get_or_create(labels)
                .inc_by(pods as u64);
        }
    }

    /// Records that `claim` is deleted by node repair because its node's `condition` is
    /// unhealthy, initiating the disruption of `pods` reschedulable pods. A repair without a
    /// drain bound of its own terminates as the claim's `terminationGracePeriod` says; the
    /// legacy repair drains forcefully.
    pub fn record_repair(&self, claim: &NodeClaim, condition: &str, pods: usize, mode: &str) {
        let mut disrupted = DisruptedLabels::for_claim("unhealthy", claim);
        disrupted.termination_mode = mode.to_owned();
        self.record_disrupted(&disrupted, Some(pods));
        let labels = UnhealthyLabels {
            condition: snake_case(condition),
            nodepool: disrupted.nodepool,
            capacity_type: disrupted.capacity_type,
            image_id: claim
                .status
                .as_ref()
                .map(|s| s.image_id.clone())
                .unwrap_or_default(),
            termination_mode: mode.to_owned(),
        };
        self.nodeclaims_unhealthy_disrupted
            .get_or_create(&labels)
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::lines;
    use karpenter_cluster::provisioner::time;

    #[test]
    fn snake_case_follows_upstream() {
        assert_eq!(snake_case("MemoryPressure"), "memory_pressure");
        assert_eq!(snake_case("Ready"), "ready");
        assert_eq!(snake_case("ABCDef"), "abc_def");
        assert_eq!(snake_case("Disk2Pressure"), "disk2_pressure");
    }

    #[test]
    fn successful_evictions_count_as_drained_pods_with_the_claims_reason() {
        let m = Metrics::new();
        let mut claim = karpenter_testing::api::node_claim("c1");
        claim.status.get_or_insert_with(Default::default).node_name = "n1".into();
        let mut other = karpenter_testing::api::node_claim("c2");
        other.status.get_or_insert_with(Default::default).node_name = "n2".into();
        claim.set_condition(
            ConditionType::DisruptionReason.as_str(),
            ConditionStatus::True,
            "Underutilized",
            "",
            time(0),
        );
        let claims = [Arc::new(claim), Arc::new(other)];
        m.record_eviction("429", "n1", &claims);
        m.record_eviction("200", "n1", &claims);
        m.record_eviction("200", "n2", &claims);
        m.record_eviction("200", "n3", &claims);
        let mut drained = lines(&m, "karpenter_pods_drained_total");
        drained.sort();
        assert_eq!(
            drained,
            [
                r#"karpenter_pods_drained_total{reason=""} 1"#,
                r#"karpenter_pods_drained_total{reason="Forceful Termination"} 1"#,
                r#"karpenter_pods_drained_total{reason="Underutilized"} 1"#,
            ],
            "a refused eviction drains nothing"
        );
        assert_eq!(lines(&m, "karpenter_pods_eviction_requests_total").len(), 2);
    }

    #[test]
    fn instance_termination_is_timed_from_its_condition_to_the_instance_gone() {
        let m = Metrics::new();
        let mut claim = karpenter_testing::api::node_claim("c1");
        m.record_instance_gone(&claim, 9_000);
        assert_eq!(
            lines(
                &m,
                "karpenter_nodeclaims_instance_termination_duration_seconds_sum"
            ),
            [
                r#"karpenter_nodeclaims_instance_termination_duration_seconds_sum{nodepool="default"} 0.0"#
            ],
            "gone at the first delete: no time"
        );
        claim.set_condition(
            ConditionType::InstanceTerminating.as_str(),
            ConditionStatus::True,
            "InstanceTerminating",
            "",
            time(4_000),
        );
        m.record_instance_gone(&claim, 10_500);
        assert_eq!(
            lines(
                &m,
                "karpenter_nodeclaims_instance_termination_duration_seconds_sum"
            ),
            [
                r#"karpenter_nodeclaims_instance_termination_duration_seconds_sum{nodepool="default"} 6.5"#
            ]
        );
        assert_eq!(
            lines(
                &m,
                r#"karpenter_nodeclaims_instance_termination_duration_seconds_bucket{le="8.0""#
            ),
            [
                r#"karpenter_nodeclaims_instance_termination_duration_seconds_bucket{le="8.0",nodepool="default"} 2"#
            ]
        );
        assert_eq!(
            lines(
                &m,
                r#"karpenter_nodeclaims_instance_termination_duration_seconds_bucket{le="4.0""#
            ),
            [
                r#"karpenter_nodeclaims_instance_termination_duration_seconds_bucket{le="4.0",nodepool="default"} 1"#
            ],
            "6.5 s falls between 4 and 8"
        );
    }

    #[test]
    fn terminated_claims_and_nodes_are_counted_and_timed() {
        let m = Metrics::new();
        let mut claim = karpenter_testing::api::node_claim("c1");
        claim.metadata.deletion_timestamp = Some(time(1_000));
        let labels = claim.metadata.labels.get_or_insert_with(Default::default);
        labels.insert(labels::ZONE.into(), "zone-a".into());
        labels.insert(labels::CAPACITY_TYPE.into(), "spot".into());
        let mut node = Node::default();
        node.metadata.creation_timestamp = Some(time(0));
        m.record_node_terminated(&claim, &node, 3_000);
        m.record_claim_terminated(&claim, 4_000);
        assert_eq!(
            lines(&m, "karpenter_nodes_terminated_total"),
            [r#"karpenter_nodes_terminated_total{nodepool="default",zone="zone-a"} 1"#]
        );
        assert_eq!(
            lines(&m, "karpenter_nodes_lifetime_duration_seconds_sum"),
            [r#"karpenter_nodes_lifetime_duration_seconds_sum{nodepool="default"} 3.0"#]
        );
        assert_eq!(
            lines(&m, "karpenter_nodeclaims_terminated_total"),
            [
                r#"karpenter_nodeclaims_terminated_total{nodepool="default",capacity_type="spot",zone="zone-a"} 1"#
            ]
        );
        assert_eq!(
            lines(&m, "karpenter_nodeclaims_termination_duration_seconds_sum"),
            [r#"karpenter_nodeclaims_termination_duration_seconds_sum{nodepool="default"} 3.0"#]
        );
    }

    #[test]
    fn repairs_count_the_unhealthy_condition() {
        let m = Metrics::new();
        let mut claim = karpenter_testing::api::node_claim("c1");
        claim.status.get_or_insert_with(Default::default).image_id = "ami-1".into();
        m.record_repair(&claim, "MemoryPressure", 3, "graceful");
        assert_eq!(
            lines(&m, "karpenter_nodeclaims_unhealthy_disrupted_total"),
            [
                r#"karpenter_nodeclaims_unhealthy_disrupted_total{condition="memory_pressure",nodepool="default",capacity_type="",image_id="ami-1",termination_mode="graceful"} 1"#
            ]
        );
        assert_eq!(
            lines(&m, "karpenter_nodeclaims_disrupted_total"),
            [
                r#"karpenter_nodeclaims_disrupted_total{reason="unhealthy",nodepool="default",capacity_type="",consolidation_policy="",termination_mode="graceful"} 1"#
            ]
        );
        assert_eq!(
            lines(&m, "karpenter_pods_disruption_initiated_total"),
            [
                r#"karpenter_pods_disruption_initiated_total{reason="unhealthy",nodepool="default",capacity_type="",consolidation_policy="",termination_mode="graceful"} 3"#
            ]
        );
    }

    #[test]
    fn disruptions_carry_the_policy_of_a_consolidation_and_the_termination_mode() {
        use karpenter_cloudprovider::duration::Duration;
        use karpenter_cloudprovider::v1::ConsolidationPolicy;
        let m = Metrics::new();
        let mut claim = karpenter_testing::api::node_claim("c1");
        let labels = DisruptedLabels::for_claim("underutilized", &claim)
            .consolidating(ConsolidationPolicy::WhenEmptyOrUnderutilized);
        m.record_disrupted(&labels, Some(2));
        claim.spec.termination_grace_period = Some(Duration::parse("0s").unwrap());
        m.record_disrupted(&DisruptedLabels::for_claim("launch_timeout", &claim), None);
        claim.spec.termination_grace_period = Some(Duration::parse("1h").unwrap());
        m.record_disrupted(&DisruptedLabels::for_claim("drifted", &claim), Some(0));
        let mut disrupted = lines(&m, "karpenter_nodeclaims_disrupted_total");
        disrupted.sort();
        assert_eq!(
            disrupted,
            [
                r#"karpenter_nodeclaims_disrupted_total{reason="drifted",nodepool="default",capacity_type="",consolidation_policy="",termination_mode="eventual"} 1"#,
                r#"karpenter_nodeclaims_disrupted_total{reason="launch_timeout",nodepool="default",capacity_type="",consolidation_policy="",termination_mode="forceful"} 1"#,
                r#"karpenter_nodeclaims_disrupted_total{reason="underutilized",nodepool="default",capacity_type="",consolidation_policy="when_empty_or_underutilized",termination_mode="graceful"} 1"#,
            ]
        );
        let mut pods = lines(&m, "karpenter_pods_disruption_initiated_total");
        pods.sort();
        assert_eq!(
            pods,
            [
                r#"karpenter_pods_disruption_initiated_total{reason="drifted",nodepool="default",capacity_type="",consolidation_policy="",termination_mode="eventual"} 0"#,
                r#"karpenter_pods_disruption_initiated_total{reason="underutilized",nodepool="default",capacity_type="",consolidation_policy="when_empty_or_underutilized",termination_mode="graceful"} 2"#,
            ]
        );
        assert!(counts_disrupted_pods("expired") && !counts_disrupted_pods("launch_timeout"));
    }

    #[test]
    fn reschedulable_pods_are_upstreams() {
        use k8s_openapi::api::core::v1::{Pod, PodStatus};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let owned = |kind: &str| {
            let mut p = Pod::default();
            p.metadata.owner_references = Some(vec![OwnerReference {
                kind: kind.into(),
                ..OwnerReference::default()
            }]);
            p
        };
        assert!(reschedulable_pod(&Pod::default()));
        assert!(reschedulable_pod(&owned("ReplicaSet")));
        assert!(!reschedulable_pod(&owned("DaemonSet")));
        assert!(!reschedulable_pod(&owned("Node")));
        let done = Pod {
            status: Some(PodStatus {
                phase: Some("Succeeded".into()),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        assert!(!reschedulable_pod(&done));
        let mut going = owned("ReplicaSet");
        going.metadata.deletion_timestamp = Some(time(1));
        assert!(!reschedulable_pod(&going));
        let mut stateful = owned("StatefulSet");
        stateful.metadata.deletion_timestamp = Some(time(1));
        assert!(reschedulable_pod(&stateful));
    }
}
