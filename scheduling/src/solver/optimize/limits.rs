//! NodePool limits on the optimised plan, with Karpenter's guarantee: every claim counts
//! the largest capacity among its options (`subtractMax`), so launching any option of
//! every new claim keeps the pool within its limits.
//!
//! A re-packing ignores limits, and so may the greedy pass's claims of a pool it planned
//! in another `LimitMode`. Here every claim of a limited pool counts at least the capacity
//! of the type it is priced at (with the types minValues needs, see [`least_charge`]);
//! re-packed groups are accepted while those least charges fit, and the slack left is
//! shared out in plan order, each claim keeping the options within its least charge plus
//! the slack. Far from a limit every claim keeps every option; close to it, only types no
//! larger than the one it is priced at. Prices never change: the cheapest option always
//! stays.

use super::Group;
use crate::solver::Scheduler;
use crate::solver::limits::{Charges, Remaining, cheapest_option, least_charge};
use crate::solver::nodeclaim::{Claim, Template};

/// What fitting one pool's claims under its limits decided.
pub(super) struct Fitted {
    /// The re-packed groups offered that stay.
    pub accepted: Vec<usize>,
    /// The greedy claims that stay but had to give up options (a shrunk host's version
    /// narrowed further), by index into the greedy claims.
    pub narrowed: Vec<(usize, Claim)>,
    /// Whether the least charges fit at all. Always so when the greedy claims count within
    /// the limits; a pool the greedy pass planned without its limits may not fit even with
    /// every re-packed group it can take.
    pub fits: bool,
}

/// The least charge of `claim`.
fn least(charges: &Charges, t: &Template<'_>, claim: &Claim) -> Vec<i64> {
    let cheapest = cheapest_option(charges, t, &claim.options, &claim.reqs);
    least_charge(charges, t, &claim.options, &claim.reqs, cheapest)
}

/// `left` with `delta` given back (subtracted when negative).
fn give_back(left: &Remaining, delta: &[i64]) -> Remaining {
    let mut left = left.clone();
    left.subtract(&delta.iter().map(|d| -d).collect::<Vec<_>>());
    left
}

/// Fits the claims of pool `ti` under its limits: the greedy claims that stay (neither in
/// an accepted group nor in `gone`, the sorted free claims the free groups replace; a
/// partial claim of an accepted group as its `shrunk` version) and the re-packed groups
/// `members` (their claims in `replaced`, narrowed in place). When the greedy claims fit,
/// groups are accepted all at once when every claim's least charge fits, else one by one
/// in plan order. When they do not (see [`Fitted::fits`]), every group that gives back as
/// much as it takes in each resource is accepted.
pub(super) fn fit_limits(
    s: &Scheduler<'_>,
    ti: usize,
    groups: &[Group],
    members: &[usize],
    gone: &[usize],
    replaced: &mut [Option<Vec<Claim>>],
    shrunk: &[Vec<(usize, Claim)>],
) -> Fitted {
    let t = &s.templates[ti];
    let initial = Remaining::new(t.pool);
    let charges = Charges::new(&initial, t);
    let pool_claims: Vec<usize> = (0..s.claims.len())
        .filter(|&c| s.claims[c].template == ti && gone.binary_search(&c).is_err())
        .collect();
    let greedy: Vec<Vec<i64>> = pool_claims
        .iter()
        .map(|&c| least(&charges, t, &s.claims[c]))
        .collect();
    let hosts: Vec<Vec<Vec<i64>>> = members
        .iter()
        .map(|&g| {
            shrunk[g]
                .iter()
                .map(|(_, claim)| least(&charges, t, claim))
                .collect()
        })
        .collect();
    let repacked: Vec<Vec<Vec<i64>>> = members
        .iter()
        .map(|&g| {
            replaced[g].as_ref().map_or_else(Vec::new, |claims| {
                claims.iter().map(|c| least(&charges, t, c)).collect()
            })
        })
        .collect();
    // Per greedy claim of the pool, the member whose group replaces it whole, and the
    // member and position of its shrunk version, if any (each claim is in one group).
    let whole_in: Vec<Option<usize>> = pool_claims
        .iter()
        .map(|c| (0..members.len()).find(|&m| groups[members[m]].claims.contains(c)))
        .collect();
    let host_in: Vec<Option<(usize, usize)>> = pool_claims
        .iter()
        .map(|c| {
            (0..members.len()).find_map(|m| {
                let k = shrunk[members[m]].iter().position(|(h, _)| h == c)?;
                Some((m, k))
            })
        })
        .collect();
    // What accepting each member gives back (its greedy claims' least charges, what its
    // hosts shrink by) less what its re-packed claims count.
    let mut delta: Vec<Vec<i64>> = repacked
        .iter()
        .map(|claims| {
            claims.iter().fold(charges.zero(), |acc, l| {
                acc.iter().zip(l).map(|(a, x)| a - x).collect()
            })
        })
        .collect();
    for (k, least) in greedy.iter().enumerate() {
        let back = match (whole_in[k], host_in[k]) {
            (Some(m), _) => Some((m, least.clone())),
            (None, Some((m, h))) => Some((
                m,
                least.iter().zip(&hosts[m][h]).map(|(a, b)| a - b).collect(),
            )),
            (None, None) => None,
        };
        if let Some((m, back)) = back {
            for (d, b) in delta[m].iter_mut().zip(&back) {
                *d += b;
            }
        }
    }
    // What remains when every greedy claim counts its least charge and no group is taken.
    let mut base = initial.clone();
    for least in &greedy {
        base.subtract(least);
    }
    let zero = charges.zero();
    let all = (0..members.len()).fold(base.clone(), |left, m| give_back(&left, &delta[m]));
    let (accepted, left): (Vec<usize>, Remaining) = if all.admits(&zero) {
        ((0..members.len()).collect(), all)
    } else if base.admits(&zero) {
        let mut accepted = Vec::new();
        let mut left = base;
        for (m, delta) in delta.iter().enumerate() {
            let next = give_back(&left, delta);
            if next.admits(&zero) {
                accepted.push(m);
                left = next;
            }
        }
        (accepted, left)
    } else {
        let helps: Vec<usize> = (0..members.len())
            .filter(|&m| delta[m].iter().all(|&d| d >= 0))
            .collect();
        let left = helps
            .iter()
            .fold(base, |left, &m| give_back(&left, &delta[m]));
        (helps, left)
    };
    let fits = left.admits(&zero);
    let mut taken = vec![false; members.len()];
    for &m in &accepted {
        taken[m] = true;
    }
    let mut slack = left.left();
    let mut narrowed = Vec::new();
    for (k, &c) in pool_claims.iter().enumerate() {
        if whole_in[k].is_some_and(|m| taken[m]) {
            continue;
        }
        let (claim, least) = match host_in[k] {
            Some((m, h)) if taken[m] => (&shrunk[members[m]][h].1, &hosts[m][h]),
            _ => (&s.claims[c], &greedy[k]),
        };
        if let Some(claim) = narrow(&charges, t, claim, least, &mut slack) {
            narrowed.push((c, claim));
        }
    }
    for &m in &accepted {
        let Some(claims) = replaced[members[m]].as_mut() else {
            continue;
        };
        for (claim, least) in claims.iter_mut().zip(&repacked[m]) {
            if let Some(smaller) = narrow(&charges, t, claim, least, &mut slack) {
                *claim = smaller;
            }
        }
    }
    Fitted {
        accepted: accepted.into_iter().map(|m| members[m]).collect(),
        narrowed,
        fits,
    }
}

/// Lets `claim` keep the options within its `least` charge plus the `slack` and takes what
/// the largest of them needs beyond `least` from the slack; returns the narrowed claim, or
/// `None` when it keeps every option.
fn narrow(
    charges: &Charges,
    t: &Template<'_>,
    claim: &Claim,
    least: &[i64],
    slack: &mut [i64],
) -> Option<Claim> {
    // Never below `least`: the options within it always stay, so the claim keeps its price
    // (and its minValues) whatever is left.
    let allowed: Vec<i64> = least
        .iter()
        .zip(slack.iter())
        .map(|(l, s)| l + (*s).max(0))
        .collect();
    let mut smaller = None;
    if !claim.options.iter().all(|&i| charges.within(i, &allowed)) {
        let mut c = claim.clone();
        c.retain_options(t, |&i| charges.within(i, &allowed));
        smaller = Some(c);
    }
    let options = smaller.as_ref().map_or(&claim.options, |c| &c.options);
    let largest = charges.largest(options);
    for ((s, c), l) in slack.iter_mut().zip(&largest).zip(least) {
        *s -= (c - l).max(0);
    }
    smaller
}
