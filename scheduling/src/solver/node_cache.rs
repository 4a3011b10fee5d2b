//! Existing nodes' label requirements, built once and shared by the solves that see the same
//! nodes.
//!
//! Building `In [value]` for every label of every node was a sixth of a disruption pass: a
//! pass solves the same cluster dozens of times, each time without a few candidate nodes,
//! and each solve built every node's requirements twice (once for topology, once for
//! placement) and dropped them again. An entry is keyed on the node's name and is used only
//! while the node's labels are equal to those it was built from, so a stale entry is never
//! read: the cache changes how fast a solve is, never what it decides.

use crate::labels::HOSTNAME;
use crate::model::{Labels, Node};
use crate::requirements::{Operator, Requirement, Requirements};
use std::collections::HashMap;
use std::sync::Arc;

/// Requirements of existing nodes kept between solves (see [`crate::solver::solve_cached`]).
///
/// Holds one entry per node name it was asked about; drop it (or [`NodeCache::clear`] it)
/// when the set of nodes moves on, as a disruption pass does at its end.
#[derive(Debug, Clone, Default)]
pub struct NodeCache {
    entries: HashMap<String, Entry>,
    built: usize,
}

#[derive(Debug, Clone)]
struct Entry {
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

impl NodeCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// How many times requirements were built rather than found (for tests and profiles).
    pub fn builds(&self) -> usize {
        self.built
    }

    /// The requirements of `node`, built unless an entry for its name has the same labels.
    pub(crate) fn get(&mut self, node: &Node) -> NodeRequirements {
        if let Some(e) = self.entries.get(&node.name)
            && e.labels == node.labels
        {
            return e.reqs.clone();
        }
        self.built += 1;
        let reqs = NodeRequirements::build(node);
        self.entries.insert(
            node.name.clone(),
            Entry {
                labels: node.labels.clone(),
                reqs: reqs.clone(),
            },
        );
        reqs
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
    fn an_entry_is_reused_only_while_the_labels_are_the_same() {
        let mut cache = NodeCache::new();
        let a = node("a", &[("zone", "z1")]);
        let first = cache.get(&a);
        assert!(first.labels.get("zone").unwrap().has("z1"));
        // No hostname label: the name stands in for it.
        assert!(first.with_hostname.get(HOSTNAME).unwrap().has("a"));
        let again = cache.get(&a);
        assert!(Arc::ptr_eq(&first.labels, &again.labels));
        assert_eq!(cache.builds(), 1);

        // Same name, new labels: rebuilt, never the stale entry.
        let relabelled = node("a", &[("zone", "z2")]);
        let fresh = cache.get(&relabelled);
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
        let mut cache = NodeCache::new();
        let r = cache.get(&node("a", &[(HOSTNAME, "ip-10-0-0-1")]));
        let host = r.with_hostname.get(HOSTNAME).unwrap();
        assert!(host.has("ip-10-0-0-1"));
        assert!(!host.has("a"));
    }
}
