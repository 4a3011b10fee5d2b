//! Existing nodes as the scheduler sees them.

use crate::resources::GI;
use karpenter_scheduling::labels::{ARCH, CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, ZONE};
use karpenter_scheduling::model::{Node, NodeState};
use karpenter_scheduling::resources::Resources;

/// A Ready node `name` of the NodePool `default` in `zone`, labelled like a launched
/// on-demand amd64 `large` instance, with `cores` cores, `memory_gib` GiB and 110 pods all
/// allocatable (no overhead) and no pod bound.
pub fn node(name: &str, zone: &str, cores: i64, memory_gib: i64) -> Node {
    let labels = [
        (HOSTNAME, name),
        (ZONE, zone),
        (INSTANCE_TYPE, "large"),
        (CAPACITY_TYPE, "on-demand"),
        (ARCH, "amd64"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let allocatable = Resources {
        cpu_millis: cores * 1000,
        memory: memory_gib * GI,
        pods: 110,
        ..Resources::default()
    };
    Node {
        name: name.into(),
        node_pool: Some("default".into()),
        labels,
        allocatable: allocatable.clone(),
        capacity: allocatable,
        state: NodeState::Ready,
        ..Node::default()
    }
}
