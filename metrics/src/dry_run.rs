//! `karpenter_dry_run_*`: what shadow mode (`--dry-run`) would have done, from the reports
//! of [`karpenter_cluster::shadow::Shadow`] (which makes each decision count once).

use crate::{DryRunLabels, Metrics, NodePoolLabels, ReasonLabels};
use karpenter_cluster::shadow::PlanReport;
use karpenter_disruption::Command;
use std::collections::BTreeMap;

impl Metrics {
    /// Counts a `create` decision for every new NodeClaim of `report` and sets each pool's
    /// provisioning price.
    pub fn record_dry_run_plan(&self, report: &PlanReport<'_>) {
        for claim in &report.new {
            self.dry_run_decisions
                .get_or_create(&DryRunLabels {
                    action: "create".into(),
                    reason: "provisioning".into(),
                    nodepool: claim.node_pool.clone(),
                })
                .inc();
        }
        self.record_dry_run_prices(&report.prices);
    }

    /// Sets the provisioning price gauge of every pool in `prices` (dollars per hour).
    pub fn record_dry_run_prices(&self, prices: &BTreeMap<String, f64>) {
        for (pool, dollars) in prices {
            self.dry_run_provisioning_price
                .get_or_create(&NodePoolLabels {
                    nodepool: pool.clone(),
                })
                .set(*dollars);
        }
    }

    /// Counts a disruption `command` would carry out: its decision (`delete`, `replace`) and
    /// reason in lower case, under the pool of its first candidate.
    pub fn record_dry_run_disruption(&self, command: &Command) {
        let nodepool = command
            .candidates
            .first()
            .map(|c| c.node_pool.clone())
            .unwrap_or_default();
        self.dry_run_decisions
            .get_or_create(&DryRunLabels {
                action: format!("{:?}", command.decision).to_lowercase(),
                reason: command.reason.as_str().to_lowercase(),
                nodepool,
            })
            .inc();
    }

    /// Sets the savings gauge of every disruption reason of a finished pass.
    pub fn record_dry_run_savings(&self, savings: BTreeMap<String, f64>) {
        for (reason, dollars) in savings {
            self.dry_run_disruption_savings
                .get_or_create(&ReasonLabels { reason })
                .set(dollars);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_disruption::{CandidateRef, Decision, Reason};
    use karpenter_scheduling::plan::NewNodeClaim;

    fn claim(pool: &str) -> NewNodeClaim {
        NewNodeClaim {
            node_pool: pool.into(),
            requirements: Default::default(),
            instance_type_options: Default::default(),
            pods: Vec::new(),
            requests: Default::default(),
            daemon_overhead: Default::default(),
            price: 0.5,
        }
    }

    #[test]
    fn planned_claims_count_per_pool_and_prices_are_set() {
        let m = Metrics::new();
        let (a, b) = (claim("a"), claim("a"));
        let report = PlanReport {
            new: vec![&a, &b],
            prices: BTreeMap::from([("a".to_owned(), 1.0)]),
        };
        m.record_dry_run_plan(&report);
        m.record_dry_run_prices(&BTreeMap::from([("b".to_owned(), 0.0)]));
        let t = m.encode();
        let created = "karpenter_dry_run_decisions_total{action=\"create\",reason=\"provisioning\",nodepool=\"a\"} 2";
        assert!(t.contains(created), "{t}");
        let price = "karpenter_dry_run_provisioning_price_dollars_per_hour{nodepool=\"a\"} 1.0";
        assert!(t.contains(price), "{t}");
        let zero = "karpenter_dry_run_provisioning_price_dollars_per_hour{nodepool=\"b\"} 0.0";
        assert!(t.contains(zero), "{t}");
    }

    #[test]
    fn disruptions_count_by_decision_reason_and_first_pool_and_savings_are_set() {
        let m = Metrics::new();
        let candidate = |pool: &str| CandidateRef {
            node: "n".into(),
            node_claim: "c".into(),
            node_pool: pool.into(),
            price: 1.0,
            pods: Vec::new(),
        };
        let command = Command {
            reason: Reason::UNDERUTILIZED,
            decision: Decision::Replace,
            candidates: vec![candidate("first"), candidate("second")],
            replacements: Vec::new(),
            savings: 0.25,
            explanation: String::new(),
            created_at: 0,
            forceful: false,
            consolidation: None,
            repair: None,
        };
        m.record_dry_run_disruption(&command);
        m.record_dry_run_savings(BTreeMap::from([("underutilized".to_owned(), 0.25)]));
        let t = m.encode();
        let decided = "karpenter_dry_run_decisions_total{action=\"replace\",reason=\"underutilized\",nodepool=\"first\"} 1";
        assert!(t.contains(decided), "{t}");
        let saved =
            "karpenter_dry_run_disruption_savings_dollars_per_hour{reason=\"underutilized\"} 0.25";
        assert!(t.contains(saved), "{t}");
    }
}
