//! The shadow mode's memory (`karpenter controller --dry-run`): which decisions were already
//! reported. An observe-only reconciler repeats its decisions while nothing acts on them
//! (pods stay pending and are planned again, an unchanged cluster gets the same disruption
//! commands), so each is reported once, and the reported amounts follow the latest pass.

use karpenter_disruption::Command;
use karpenter_scheduling::Plan;
use karpenter_scheduling::model::PodKey;
use karpenter_scheduling::plan::NewNodeClaim;
use std::collections::{BTreeMap, BTreeSet};

/// `(reason, decision, nodes)`, lowercase as the metrics label them.
type CommandKey = (String, String, Vec<String>);

/// What was reported, and the amounts last reported per label.
#[derive(Debug, Default)]
pub struct Shadow {
    /// Pod sets of the NodeClaims the previous plan would have created.
    planned: BTreeSet<Vec<PodKey>>,
    /// NodePools a provisioning price was reported for.
    priced_pools: BTreeSet<String>,
    /// The previous disruption pass's commands.
    decided: BTreeSet<CommandKey>,
    /// The commands of the pass in progress.
    this_pass: BTreeSet<CommandKey>,
    /// Savings per reason of the pass in progress.
    savings: BTreeMap<String, f64>,
    /// Reasons a savings amount was reported for.
    saving_reasons: BTreeSet<String>,
}

/// A plan, as the shadow mode reports it.
#[derive(Debug)]
pub struct PlanReport<'a> {
    /// The plan's NodeClaims whose pods the previous plan did not already group so.
    pub new: Vec<&'a NewNodeClaim>,
    /// Price per hour of the plan's NodeClaims per NodePool, with 0 for pools priced
    /// before and absent now.
    pub prices: BTreeMap<String, f64>,
}

impl Shadow {
    /// A plan for the pending pods.
    pub fn planned<'a>(&mut self, plan: &'a Plan) -> PlanReport<'a> {
        let mut now_planned = BTreeSet::new();
        let mut prices: BTreeMap<String, f64> = BTreeMap::new();
        let mut new = Vec::new();
        for claim in &plan.new_node_claims {
            *prices.entry(claim.node_pool.clone()).or_default() += claim.price;
            let mut pods = claim.pods.clone();
            pods.sort();
            if !self.planned.contains(&pods) {
                new.push(claim);
            }
            now_planned.insert(pods);
        }
        self.planned = now_planned;
        PlanReport {
            new,
            prices: self.prices(prices),
        }
    }

    /// No pod is pending: nothing would be provisioned. Returns the prices to report.
    pub fn nothing_pending(&mut self) -> BTreeMap<String, f64> {
        self.planned.clear();
        self.prices(BTreeMap::new())
    }

    fn prices(&mut self, mut prices: BTreeMap<String, f64>) -> BTreeMap<String, f64> {
        for pool in &self.priced_pools {
            prices.entry(pool.clone()).or_insert(0.0);
        }
        self.priced_pools.extend(prices.keys().cloned());
        prices
    }

    /// A command of the disruption pass in progress; true the first time it is decided
    /// (not decided by the previous pass too).
    pub fn decided(&mut self, command: &Command) -> bool {
        let reason = command.reason.as_str().to_lowercase();
        *self.savings.entry(reason.clone()).or_default() += command.savings;
        let key = (
            reason,
            format!("{:?}", command.decision).to_lowercase(),
            command
                .node_names()
                .into_iter()
                .map(str::to_owned)
                .collect(),
        );
        let first = !self.decided.contains(&key);
        self.this_pass.insert(key);
        first
    }

    /// The disruption pass ended: its commands become the ones already reported. Returns
    /// the pass's savings per reason, with 0 for reasons reported before and absent now.
    pub fn pass_done(&mut self) -> BTreeMap<String, f64> {
        self.decided = std::mem::take(&mut self.this_pass);
        let mut savings = std::mem::take(&mut self.savings);
        for reason in &self.saving_reasons {
            savings.entry(reason.clone()).or_insert(0.0);
        }
        self.saving_reasons.extend(savings.keys().cloned());
        savings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_disruption::{CandidateRef, Decision, Reason};

    fn claim(pool: &str, pods: &[&str], price: f64) -> NewNodeClaim {
        NewNodeClaim {
            node_pool: pool.into(),
            requirements: Default::default(),
            instance_type_options: Default::default(),
            pods: pods.iter().map(|p| PodKey::new("default", *p)).collect(),
            requests: Default::default(),
            daemon_overhead: Default::default(),
            price,
        }
    }

    #[test]
    fn a_repeated_plan_is_new_once_and_its_prices_go_to_zero_when_nothing_is_pending() {
        let mut s = Shadow::default();
        let plan = Plan {
            new_node_claims: vec![
                claim("default", &["b", "a"], 0.25),
                claim("gpu", &["c"], 1.5),
            ],
            ..Plan::default()
        };
        let report = s.planned(&plan);
        assert_eq!(report.new.len(), 2);
        assert_eq!(report.prices["gpu"], 1.5);
        // The same pods planned again, listed in another order: nothing new.
        let again = Plan {
            new_node_claims: vec![claim("default", &["a", "b"], 0.25)],
            ..Plan::default()
        };
        let report = s.planned(&again);
        assert!(report.new.is_empty());
        assert_eq!(
            report.prices["gpu"], 0.0,
            "a pool no longer planned reads 0"
        );
        assert_eq!(s.nothing_pending()["default"], 0.0);
        // Pending again after a gap: new again.
        assert_eq!(s.planned(&plan).new.len(), 2);
    }

    #[test]
    fn a_command_is_new_once_while_passes_repeat_it_and_savings_follow_the_last_pass() {
        let mut s = Shadow::default();
        let command = Command {
            reason: Reason::EMPTY,
            decision: Decision::Delete,
            candidates: vec![CandidateRef {
                node: "n1".into(),
                node_claim: "c1".into(),
                node_pool: "default".into(),
                price: 0.4,
                pods: Vec::new(),
            }],
            replacements: Vec::new(),
            savings: 0.4,
            explanation: "empty".into(),
            created_at: 0,
            forceful: false,
            consolidation: None,
            repair: None,
        };
        assert!(s.decided(&command));
        assert_eq!(s.pass_done()["empty"], 0.4);
        for _ in 0..2 {
            assert!(!s.decided(&command), "repeated by the next pass");
            assert_eq!(s.pass_done()["empty"], 0.4);
        }
        assert_eq!(s.pass_done()["empty"], 0.0, "a pass without it");
        assert!(s.decided(&command), "decided again after a gap");
    }
}
