//! What one solve derives from the snapshot's nodes and NodePools that a later solve over the
//! same nodes and pools can reuse.
//!
//! A disruption pass solves the same cluster dozens of times, each time without a few
//! candidate nodes. Each solve used to build every node's requirements from its labels (twice:
//! for topology and for placement) and every pool's template from its instance types
//! (compatibility, offering tables, option names), then drop them all; that was a third of a
//! pass. Entries are keyed on the node's name or the pool's position and used only while what
//! they were built from is unchanged — a node's labels compared by value, a pool's requirements, labels
//! and instance types (those by pointer: the cache holds a reference to each, so an instance
//! type it compares equal to cannot have been changed in place) — so a stale entry is never
//! read: the cache changes how fast a solve is, never what it decides.

use crate::labels::HOSTNAME;
use crate::model::{InstanceType, Labels, Node, NodePool};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::solver::nodeclaim::{TemplateMemo, compatible_types, template_requirements};
use std::collections::HashMap;
use std::sync::Arc;

/// Derived data of nodes and NodePools kept between solves (see
/// [`crate::solver::solve_cached`]).
///
/// Holds one entry per node name it was asked about and per NodePool of the last snapshot;
/// drop it (or [`SolveCache::clear`] it) when the cluster moves on, as a disruption pass
/// does at its end.
#[derive(Debug, Default)]
pub struct SolveCache {
    nodes: HashMap<String, NodeEntry>,
    /// By position in the snapshot's `node_pools`, which names need not keep unique.
    pools: Vec<PoolEntry>,
    built: usize,
}

#[derive(Debug, Clone)]
struct NodeEntry {
    /// The labels the requirements were built from: the entry is valid only for these.
    labels: Labels,
    reqs: NodeRequirements,
}

/// A node's labels as requirements.
#[derive(Debug, Clone)]
pub(crate) struct NodeRequirements {
    /// `In [value]` for each label.
    pub labels: Arc<Requirements>,
    /// The same plus `hostname In [the node's hostname]`, which a node without a hostname
    /// label gets from its name.
    pub with_hostname: Arc<Requirements>,
}

impl NodeRequirements {
    fn build(node: &Node) -> Self {
        let labels = Requirements::from_labels(node.labels.iter());
        let mut with_hostname = labels.clone();
        if let Ok(r) = Requirement::new(HOSTNAME, Operator::In, [super::existing::hostname(node)]) {
            with_hostname.add(r);
        }
        Self {
            labels: Arc::new(labels),
            with_hostname: Arc::new(with_hostname),
        }
    }
}

/// A NodePool's template inputs and what was derived from them.
#[derive(Debug)]
pub(crate) struct PoolEntry {
    /// What the entry was built from: valid only while the pool has the same.
    requirements: Requirements,
    labels: Labels,
    types: Vec<Arc<InstanceType>>,
    /// [`template_requirements`] of the pool.
    pub reqs: Requirements,
    /// [`compatible_types`] of the pool.
    pub compatible: Vec<u32>,
    /// The template's memo tables.
    pub memo: TemplateMemo,
}

impl PoolEntry {
    fn build(pool: &NodePool) -> Self {
        let reqs = template_requirements(pool);
        let compatible = compatible_types(pool, &reqs);
        Self {
            requirements: pool.requirements.clone(),
            labels: pool.labels.clone(),
            types: pool.instance_types.clone(),
            reqs,
            compatible,
            memo: TemplateMemo::default(),
        }
    }

    fn built_from(&self, pool: &NodePool) -> bool {
        self.types.len() == pool.instance_types.len()
            && self
                .types
                .iter()
                .zip(&pool.instance_types)
                .all(|(a, b)| Arc::ptr_eq(a, b))
            && self.requirements == pool.requirements
            && self.labels == pool.labels
    }
}

impl SolveCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets every entry.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.pools.clear();
    }

    /// Forgets the nodes whose name `keep` refuses (nodes gone from the cluster), so a cache
    /// kept for a long-running cluster does not grow with every node it ever saw.
    pub fn retain_nodes(&mut self, keep: impl Fn(&str) -> bool) {
        self.nodes.retain(|name, _| keep(name));
    }

    /// How many node or pool entries were built rather than found (for tests and profiles).
    pub fn builds(&self) -> usize {
        self.built
    }

    /// The requirements of `node`, built unless an entry for its name has the same labels.
    pub(crate) fn node(&mut self, node: &Node) -> NodeRequirements {
        if let Some(e) = self.nodes.get(&node.name)
            && e.labels == node.labels
        {
            return e.reqs.clone();
        }
        self.built += 1;
        let reqs = NodeRequirements::build(node);
        self.nodes.insert(
            node.name.clone(),
            NodeEntry {
                labels: node.labels.clone(),
                reqs: reqs.clone(),
            },
        );
        reqs
    }

    /// The entries of `pools`, in their order, rebuilding those whose inputs changed.
    pub(crate) fn pools(&mut self, pools: &[NodePool]) -> &[PoolEntry] {
        self.pools.truncate(pools.len());
        for (i, pool) in pools.iter().enumerate() {
            match self.pools.get_mut(i) {
                Some(e) if e.built_from(pool) => {}
                Some(e) => {
                    self.built += 1;
                    *e = PoolEntry::build(pool);
                }
                None => {
                    self.built += 1;
                    self.pools.push(PoolEntry::build(pool));
                }
            }
        }
        &self.pools
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Node::default()
        }
    }

    #[test]
    fn a_node_entry_is_reused_only_while_the_labels_are_the_same() {
        let mut cache = SolveCache::new();
        let a = node("a", &[("zone", "z1")]);
        let first = cache.node(&a);
        assert!(first.labels.get("zone").unwrap().has("z1"));
        // No hostname label: the name stands in for it.
        assert!(first.with_hostname.get(HOSTNAME).unwrap().has("a"));
        let again = cache.node(&a);
        assert!(Arc::ptr_eq(&first.labels, &again.labels));
        assert_eq!(cache.builds(), 1);

        // Same name, new labels: rebuilt, never the stale entry.
        let relabelled = node("a", &[("zone", "z2")]);
        let fresh = cache.node(&relabelled);
        assert_eq!(cache.builds(), 2);
        assert!(!fresh.labels.get("zone").unwrap().has("z1"));
        assert!(fresh.labels.get("zone").unwrap().has("z2"));
        assert_eq!(
            *fresh.labels,
            Requirements::from_labels(relabelled.labels.iter())
        );
    }

    #[test]
    fn a_hostname_label_wins_over_the_name() {
        let mut cache = SolveCache::new();
        let r = cache.node(&node("a", &[(HOSTNAME, "ip-10-0-0-1")]));
        let host = r.with_hostname.get(HOSTNAME).unwrap();
        assert!(host.has("ip-10-0-0-1"));
        assert!(!host.has("a"));
    }

    #[test]
    fn a_pool_entry_is_reused_only_while_its_inputs_are_the_same() {
        let it = |name: &str| {
            Arc::new(InstanceType {
                devices: Vec::new(),
                name: name.into(),
                requirements: Requirements::new(),
                capacity: crate::Resources::default(),
                overhead: crate::model::Overhead::default(),
                offerings: Vec::new(),
            })
        };
        let mut pools = vec![NodePool {
            name: "p".into(),
            instance_types: vec![it("a"), it("b")],
            ..NodePool::default()
        }];
        let mut cache = SolveCache::new();
        cache.pools(&pools);
        assert!(cache.pools(&pools)[0].built_from(&pools[0]));
        assert_eq!(cache.builds(), 1);

        // An equal instance type in a new allocation could have been edited: rebuilt.
        pools[0].instance_types[1] = it("b");
        cache.pools(&pools);
        assert_eq!(cache.builds(), 2);
        // So is a pool whose labels or requirements changed.
        pools[0].labels.insert("team".into(), "a".into());
        let entry = &cache.pools(&pools)[0];
        assert!(
            entry.reqs.get("team").unwrap().has("a"),
            "never the stale entry"
        );
        assert_eq!(cache.builds(), 3);
        // A second pool of the same name has its own entry.
        pools.push(pools[0].clone());
        pools[1].labels.insert("team".into(), "b".into());
        let entries = cache.pools(&pools);
        assert!(entries[0].reqs.get("team").unwrap().has("a"));
        assert!(entries[1].reqs.get("team").unwrap().has("b"));
    }
}
