//! Node selector requirements as a NodePool, a pod's node affinity or an instance type
//! writes them.

use karpenter_scheduling::requirements::{NodeSelectorRequirement, Operator, Requirements};

/// `key op values` without `minValues`.
pub fn nsr(key: &str, op: Operator, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op,
        values: values.iter().map(|v| v.to_string()).collect(),
        min_values: None,
    }
}

/// The conjunction of `items`.
///
/// # Panics
///
/// When the items are invalid (an operator given the wrong number of values): a test's
/// fixture is wrong, not the code under test.
pub fn reqs(items: &[NodeSelectorRequirement]) -> Requirements {
    Requirements::from_node_selector(items).expect("valid requirements")
}
