//! NodePool limits (`remainingResources`, `filterByRemainingResources`, `subtractMax`):
//! remaining = limit − usage; an instance type whose capacity exceeds what remains is not
//! launched, and each new claim subtracts the largest capacity among its options.

use crate::model::{InstanceType, NodePool};
use crate::resources::Resources;
use crate::solver::arith;
use std::collections::BTreeMap;

/// The `nodes` pseudo-resource of `spec.limits`.
pub(crate) const NODES: &str = "nodes";

/// What a pool may still launch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Remaining {
    left: BTreeMap<String, i64>,
}

impl Remaining {
    /// `limits − usage` in scheduler units (cpu in millicores).
    pub(crate) fn new(pool: &NodePool) -> Self {
        let left = pool
            .limits
            .iter()
            .map(|(k, q)| {
                let limit = if k == crate::resources::CPU {
                    q.milli_value()
                } else {
                    q.value()
                };
                (k.clone(), limit.saturating_sub(arith::get(&pool.usage, k)))
            })
            .collect();
        Remaining { left }
    }

    /// Whether the `nodes` limit leaves no room for another node.
    pub(crate) fn nodes_exhausted(&self) -> bool {
        self.left.get(NODES).is_some_and(|&n| n <= 0)
    }

    /// The limited resources `it` would exceed (empty when it may launch).
    pub(crate) fn exceeded_by(&self, it: &InstanceType) -> Vec<&str> {
        self.exceeded_by_capacity(&it.capacity)
    }

    /// The limited resources a node of this `capacity` would exceed (empty when it fits).
    pub(crate) fn exceeded_by_capacity(&self, capacity: &Resources) -> Vec<&str> {
        self.left
            .iter()
            .filter(|(k, left)| k.as_str() != NODES && arith::get(capacity, k) > **left)
            .map(|(k, _)| k.as_str())
            .collect()
    }

    /// Whether the pool has any limit at all.
    pub(crate) fn is_limited(&self) -> bool {
        !self.left.is_empty()
    }

    /// What a node of type `it` uses of each limited resource, in the order of
    /// [`Remaining::left`] (`nodes` counts one).
    pub(crate) fn charge(&self, it: &InstanceType) -> Vec<i64> {
        self.left
            .keys()
            .map(|k| {
                if k == NODES {
                    1
                } else {
                    arith::get(&it.capacity, k)
                }
            })
            .collect()
    }

    /// What remains of each limited resource, in the order of [`Remaining::charge`].
    pub(crate) fn left(&self) -> Vec<i64> {
        self.left.values().copied().collect()
    }

    /// Accounts for a new claim that may launch as any of `options`: the largest capacity
    /// is subtracted (upstream's `subtractMax`), and one node.
    pub(crate) fn subtract_claim<'a>(
        &mut self,
        options: impl Iterator<Item = &'a InstanceType> + Clone,
    ) {
        for (k, left) in self.left.iter_mut() {
            let used = if k == NODES {
                1
            } else {
                options
                    .clone()
                    .map(|it| arith::get(&it.capacity, k))
                    .max()
                    .unwrap_or(0)
            };
            *left = left.saturating_sub(used);
        }
    }
}
