//! Solving a snapshot and reading the plan.

use karpenter_scheduling::requirements::Operator;
use karpenter_scheduling::solver::OptimizerOptions;
use karpenter_scheduling::{Plan, Snapshot, SolveOptions, solve};

/// The plan for `s` with default options (optimiser on, default work budget).
pub fn solve_default(s: &Snapshot) -> Plan {
    solve(s, &SolveOptions::default())
}

/// The plan of Karpenter's greedy pass alone for `s` (default options, optimiser off).
pub fn solve_greedy(s: &Snapshot) -> Plan {
    let options = SolveOptions {
        optimizer: OptimizerOptions {
            enabled: false,
            ..OptimizerOptions::default()
        },
        ..SolveOptions::default()
    };
    solve(s, &options)
}

/// Each new NodeClaim of `plan` as its cheapest instance type and its pods' names, in plan
/// order: what two plans must share to launch the same nodes with the same pods.
pub fn claims_of(plan: &Plan) -> Vec<(String, Vec<String>)> {
    plan.new_node_claims
        .iter()
        .map(|c| {
            let cheapest = c.instance_type_options.first().map(|o| o.name.to_string());
            (
                cheapest.unwrap_or_default(),
                c.pods.iter().map(|k| k.name.clone()).collect(),
            )
        })
        .collect()
}

/// The single value the requirements of the `claim`-th new NodeClaim pin `key` to; `None`
/// when the key is unconstrained or allows several values.
///
/// # Panics
///
/// When the plan has no `claim`-th new NodeClaim.
pub fn pinned(plan: &Plan, claim: usize, key: &str) -> Option<String> {
    let r = plan.new_node_claims[claim].requirements.get(key)?;
    let v: Vec<&str> = r.values().collect();
    (r.operator() == Operator::In && v.len() == 1).then(|| v[0].to_string())
}

/// Why the pod named `pod` could not be placed; `None` when it was placed.
pub fn reason<'a>(plan: &'a Plan, pod: &str) -> Option<&'a str> {
    plan.unschedulable
        .iter()
        .find(|u| u.pod.name == pod)
        .map(|u| u.reason.as_str())
}
