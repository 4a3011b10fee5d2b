//! The families the operator records as it carries out termination and repair: evictions
//! (`karpenter_pods_eviction_requests_total`, `karpenter_pods_drained_total`) and repaired
//! NodeClaims (`karpenter_nodeclaims_disrupted_total`,
//! `karpenter_nodeclaims_unhealthy_disrupted_total`), with upstream's label values.

use crate::{CodeLabels, DisruptedLabels, Metrics, ReasonLabels, UnhealthyLabels};
use karpenter_cloudprovider::NodeClaim;
use karpenter_cloudprovider::v1::{ConditionStatus, ConditionType, StatusConditions};
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
