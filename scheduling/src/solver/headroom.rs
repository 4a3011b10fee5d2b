//! A compact copy of what each claim still has room for, so the claim scan's first filter
//! reads a few words per claim instead of each claim's heap data.
//!
//! A large batch opens thousands of claims and every pod is offered to them in turn: the
//! first filter ([`Claim::might_fit`]) then dominated the greedy solve, mostly in cache
//! misses on the claims themselves.

use super::nodeclaim::{Claim, Template};
use crate::resources::Resources;
use crate::solver::arith::scalars;

/// One claim's scalar resources, for the scalar case of [`Claim::might_fit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Headroom {
    /// Its pods' requests plus the template's least DaemonSet overhead, per scalar resource
    /// (cpu, memory, ephemeral storage, pods).
    used: [i64; 4],
    /// The largest allocatable among its options, per scalar resource.
    alloc: [i64; 4],
    /// Whether every allocatable is non-negative (a negative one takes nothing).
    open: bool,
    /// Whether neither its requests nor the overhead name an extended resource; otherwise
    /// the claim is asked directly.
    scalar: bool,
}

impl Headroom {
    /// `claim`'s room as it stands; recomputed whenever the claim changes.
    pub(super) fn of(claim: &Claim, t: &Template<'_>) -> Self {
        let requests = scalars(&claim.requests);
        let overhead = scalars(&t.min_overhead);
        Self {
            used: std::array::from_fn(|i| requests[i].saturating_add(overhead[i])),
            alloc: scalars(&claim.bounds.max),
            open: !claim.bounds.max.any_negative(),
            scalar: claim.requests.extended.is_empty() && t.min_overhead.extended.is_empty(),
        }
    }

    /// Exactly [`Claim::might_fit`] for `requests`, or `None` when extended resources are
    /// involved and the claim must be asked.
    pub(super) fn might_fit(&self, requests: &Resources) -> Option<bool> {
        if !self.scalar || !requests.extended.is_empty() {
            return None;
        }
        let asked = scalars(requests);
        // Requests are never negative, so adding them in this order saturates as the
        // claim's own sum does.
        Some(self.open && (0..4).all(|i| asked[i].saturating_add(self.used[i]) <= self.alloc[i]))
    }
}
