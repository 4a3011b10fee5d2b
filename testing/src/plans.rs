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
