//! NodePool limits (`remainingResources`, `filterByRemainingResources`, `subtractMax`):
//! remaining = limit − usage; an instance type whose capacity exceeds what remains is not
//! launched, and each new claim subtracts the largest capacity among its options.
//!
//! Counting every claim at its largest option is what makes a limit bind "on paper": a
//! claim priced at a 4-cpu type that may also launch as a 192-cpu one counts 192 cpu. When
//! the greedy pass leaves pods unschedulable for that reason, the solver plans the pool
//! again in another [`LimitMode`], counting each claim at its [`least_charge`], and the
//! optimiser narrows the claims' options at the end so that their largest options fit
//! again: Karpenter's guarantee holds on the final plan.

use crate::model::{InstanceType, NodePool};
use crate::requirements::Requirements;
use crate::resources::Resources;
use crate::solver::MinValuesPolicy;
use crate::solver::arith;
use crate::solver::nodeclaim::{Template, check_min_values};
use std::collections::BTreeMap;

/// How the greedy pass counts a pool's new claims against its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LimitMode {
    /// Each claim counts its largest option as it opens, and only types that fit what
    /// remains are offered (Karpenter's `subtractMax` and `filterByRemainingResources`).
    Largest,
    /// Each claim counts its [`least_charge`], kept up to date as pods join it, and no pod
    /// joins or opens a claim whose least charge would not fit; the optimiser narrows the
    /// options at the end.
    Least,
    /// Only the `nodes` limit is counted: the optimiser must bring the plan within the
    /// others, or the plan is not used.
    Unbounded,
}

/// The `nodes` pseudo-resource of `spec.limits`.
pub(crate) const NODES: &str = "nodes";

/// What a pool may still launch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Remaining {
    left: BTreeMap<String, i64>,
    /// What was left when it was made, for sizing charges (see [`least_charge`]).
    scale: Vec<i64>,
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
            .collect::<BTreeMap<_, _>>();
        let scale = left.values().map(|&l| l.max(1)).collect();
        Remaining { left, scale }
    }

    /// The same with only the `nodes` limit (see [`LimitMode::Unbounded`]).
    pub(crate) fn nodes_only(&self) -> Self {
        let left: BTreeMap<String, i64> = self
            .left
            .iter()
            .filter(|(k, _)| k.as_str() == NODES)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let scale = left.values().map(|&l| l.max(1)).collect();
        Remaining { left, scale }
    }

    /// The limited resources, in the order of [`Remaining::charge`].
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.left.keys().map(String::as_str)
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

    /// Whether a claim charged `charge` (in the order of [`Remaining::charge`]) fits what
    /// remains.
    pub(crate) fn admits(&self, charge: &[i64]) -> bool {
        self.left.values().zip(charge).all(|(left, c)| c <= left)
    }

    /// Counts `charge` (in the order of [`Remaining::charge`]) against what remains; a
    /// negative entry gives room back.
    pub(crate) fn subtract(&mut self, charge: &[i64]) {
        for (left, c) in self.left.values_mut().zip(charge) {
            *left = left.saturating_sub(*c);
        }
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

/// Each instance type's charge against one pool's limits (in the order of
/// [`Remaining::charge`]) and its size as one number: each limited resource as a fraction
/// of what the pool had left when the solve began, summed, which orders types from small to
/// large whatever the resources.
#[derive(Debug, Clone)]
pub(crate) struct Charges {
    stride: usize,
    flat: Vec<i64>,
    size: Vec<f64>,
}

impl Charges {
    /// The charges of `t`'s instance types against `remaining`, sized by what it left.
    pub(crate) fn new(remaining: &Remaining, t: &Template<'_>) -> Self {
        let stride = remaining.left.len();
        let mut flat = Vec::with_capacity(stride * t.its.len());
        let mut size = Vec::with_capacity(t.its.len());
        for it in &t.its {
            let charge = remaining.charge(it);
            size.push(
                charge
                    .iter()
                    .zip(&remaining.scale)
                    .map(|(&c, &scale)| c as f64 / scale as f64)
                    .sum(),
            );
            flat.extend(charge);
        }
        Charges { stride, flat, size }
    }

    /// The charge of instance type `i`.
    pub(crate) fn of(&self, i: u32) -> &[i64] {
        let at = i as usize * self.stride;
        &self.flat[at..at + self.stride]
    }

    /// A charge of nothing.
    pub(crate) fn zero(&self) -> Vec<i64> {
        vec![0; self.stride]
    }

    /// Whether type `i`'s charge is within `cap` in every resource.
    pub(crate) fn within(&self, i: u32, cap: &[i64]) -> bool {
        self.of(i).iter().zip(cap).all(|(c, m)| c <= m)
    }

    /// The element-wise smallest charge of `options` (nothing when there are none).
    pub(crate) fn smallest(&self, options: &[u32]) -> Vec<i64> {
        let mut least: Option<Vec<i64>> = None;
        for &i in options {
            least = Some(match least {
                None => self.of(i).to_vec(),
                Some(l) => l.iter().zip(self.of(i)).map(|(a, c)| *a.min(c)).collect(),
            });
        }
        least.unwrap_or_else(|| self.zero())
    }

    /// The element-wise largest charge of `options` (nothing when there are none).
    pub(crate) fn largest(&self, options: &[u32]) -> Vec<i64> {
        let mut most = self.zero();
        for &i in options {
            for (m, c) in most.iter_mut().zip(self.of(i)) {
                *m = (*m).max(*c);
            }
        }
        most
    }
}

/// A claim's cheapest option (ties: the smaller, then the lower index) under requirements
/// `reqs`, or `None` when it has none.
pub(crate) fn cheapest_option(
    charges: &Charges,
    t: &Template<'_>,
    options: &[u32],
    reqs: &Requirements,
) -> Option<u32> {
    let offers = t.offers(reqs);
    let price = |i: u32| {
        offers[i as usize].map_or(f64::INFINITY, |o| {
            t.its[i as usize].offerings[o as usize].price
        })
    };
    options.iter().copied().min_by(|&a, &b| {
        price(a)
            .total_cmp(&price(b))
            .then(charges.size[a as usize].total_cmp(&charges.size[b as usize]))
            .then(a.cmp(&b))
    })
}

/// The least a claim that may launch as any of `options` (under requirements `reqs`) must
/// count against its pool's limits once its options are narrowed without changing its
/// price: the charge of its `cheapest` option ([`cheapest_option`]) and, when `reqs` carry
/// `minValues`, of the smallest further options the claim needs to keep them, element-wise
/// the largest of those. Every option whose charge is within it may stay.
pub(crate) fn least_charge(
    charges: &Charges,
    t: &Template<'_>,
    options: &[u32],
    reqs: &Requirements,
    cheapest: Option<u32>,
) -> Vec<i64> {
    let Some(cheapest) = cheapest else {
        return charges.zero();
    };
    let least = charges.of(cheapest).to_vec();
    if !reqs.has_min_values() {
        return least;
    }
    // The options within a charge are a superset of those within any smaller one, so the
    // smallest charge that keeps minValues is found among the prefixes of the options by
    // size (each widened to take the cheapest one), by bisection.
    let mut order: Vec<u32> = options.to_vec();
    order.sort_by(|&a, &b| {
        charges.size[a as usize]
            .total_cmp(&charges.size[b as usize])
            .then(a.cmp(&b))
    });
    let within = |n: usize| -> Vec<i64> {
        order[..n].iter().fold(least.clone(), |acc, &i| {
            acc.iter()
                .zip(charges.of(i))
                .map(|(a, c)| *a.max(c))
                .collect()
        })
    };
    let keeps = |n: usize| -> bool {
        let cap = within(n);
        let kept: Vec<u32> = options
            .iter()
            .copied()
            .filter(|&i| charges.within(i, &cap))
            .collect();
        matches!(
            check_min_values(&t.its, &kept, reqs, MinValuesPolicy::Strict),
            Ok(None)
        )
    };
    if keeps(0) {
        return least;
    }
    // `keeps(len)` fails only when the options never satisfied minValues (best effort):
    // then every option stays.
    let (mut lo, mut hi) = (0, order.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if keeps(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    within(hi)
}
