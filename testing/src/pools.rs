//! NodePools as the scheduler sees them.

use crate::instance_types::catalogue;
use karpenter_scheduling::model::NodePool;

/// The NodePool `name` over [`catalogue`], with no requirement, taint, limit or weight.
pub fn pool(name: &str) -> NodePool {
    NodePool {
        name: name.into(),
        instance_types: catalogue(),
        ..NodePool::default()
    }
}
