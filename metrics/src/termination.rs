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

    /// Records that `claim` is deleted by node repair because its node's `condition` is
    /// unhealthy.
    pub fn record_repair(&self, claim: &NodeClaim, condition: &str) {
        let disrupted = DisruptedLabels::for_claim("unhealthy", claim);
        self.nodeclaims_disrupted.get_or_create(&disrupted).inc();
        let labels = UnhealthyLabels {
            condition: snake_case(condition),
            nodepool: disrupted.nodepool,
            capacity_type: disrupted.capacity_type,
            image_id: claim
                .status
                .as_ref()
                .map(|s| s.image_id.clone())
                .unwrap_or_default(),
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
        m.record_repair(&claim, "MemoryPressure");
        assert_eq!(
            lines(&m, "karpenter_nodeclaims_unhealthy_disrupted_total"),
            [
                r#"karpenter_nodeclaims_unhealthy_disrupted_total{condition="memory_pressure",nodepool="default",capacity_type="",image_id="ami-1"} 1"#
            ]
        );
        assert_eq!(
            lines(&m, "karpenter_nodeclaims_disrupted_total"),
            [
                r#"karpenter_nodeclaims_disrupted_total{reason="unhealthy",nodepool="default",capacity_type=""} 1"#
            ]
        );
    }
}
