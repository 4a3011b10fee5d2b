//! The packing optimiser: after the greedy pass, re-packs groups of interchangeable
//! new-claim pods onto a cheaper mix of instance types, and computes an LP lower bound on
//! the price of the new capacity so every plan shows its gap to optimal.
//!
//! Only pods that cannot tell one new node from another are moved. A pod may move when it
//! binds no host port and every topology group it owns, and every group that could count
//! it, is keyed on a label its claim pins to a single value (a zone, say; never the
//! hostname), except hostname-keyed spreads and anti-affinities owned by other pods: their
//! counts only fall when a pod leaves their owner's node (see `Topology::movable`). The
//! claims' pods grouped by NodePool and requirements form a group; a zone-pinned claim's
//! pods are thus re-packed within their zone. A claim holding pods that may not move
//! (owners of hostname anti-affinity, spread or affinity, host ports) keeps them and its
//! hostname, and becomes a host (see [`hosts`]): the group's movable pods first fill the
//! room those pinned pods leave on the cheapest type that holds them, as far as the
//! hostname-keyed constraints the pinned pods own allow, and the rest is packed onto new
//! nodes. Any packing of a group's pods onto nodes with those requirements satisfies every
//! constraint the greedy checked (taints, requirements, volume and topology domains), so
//! only capacity, DaemonSet overhead, offerings, NodePool limits and minValues need
//! re-checking — which is done on the final claims with the solver's own arithmetic,
//! falling back to the greedy claims of a group on any failure. Under NodePool limits each
//! re-packed claim's options are narrowed to what the remaining limit allows (see
//! `fit_limits`), so launching any option of every claim stays within it, and a host keeps
//! only options no larger than its largest before.
//!
//! Pods on claims that only hold free pods (see [`is_free`]: nothing but their
//! nodeSelector and tolerations decides where they go) are grouped instead by the
//! highest-weight NodePool that takes them and their own nodeSelector. The greedy pass puts
//! such a pod on any open claim with room, even one of a lower-weight pool or narrowed by
//! another pod's selectors (arm64, on-demand), so this both moves it up to the pool its
//! weight asks for and lets it use cheaper capacity. These free groups replace the free
//! claims all together or not at all; every other pod keeps its claim's NodePool, so no pod
//! ever lands on a lower-weight pool than the greedy gave it. A group is replaced only when
//! strictly cheaper, so the plan is never worse than the greedy one.
//!
//! Effort is bounded by a deterministic work budget ([`OptimizerOptions::max_work`]) and
//! optionally by a caller's deadline callback; each group gets the share of what is left
//! that its movable pods are of those left, and groups not reached keep their greedy claims.

mod bound;
mod budget;
mod cover;
mod global;
mod hosts;
mod limits;
mod lp;
mod lpround;
mod master;
mod owners;
mod pack;

use super::Scheduler;
use super::arith;
use super::limits::Remaining;
use super::nodeclaim::{Claim, Template, cheapest, check_min_values};
use crate::labels::HOSTNAME;
use crate::model::Pod;
use crate::plan::{GroupWork, OptimizerStats};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::Resources;
use crate::taints::{Toleration, first_untolerated};
use bound::{BoundClass, BoundColumn};
use budget::Budget;
use pack::{BinType, Class, Instance};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Bound work per placed pod when no group is re-packable (about a millisecond per
/// hundred pods in a release build).
const BOUND_WORK_PER_FIXED_POD: u64 = 2_000;

/// The least bound work, so small plans (a few pods, where the per-pod allowance would be a
/// few thousand units) still get their bound; about 10 ms.
const MIN_BOUND_WORK: u64 = 2_000_000;

/// The number of pods whose re-packing, and whose bound, the whole budget is sized for:
/// each pod the optimiser may move brings `max_work / PODS_PER_BUDGET` units of re-packing
/// (20,000 with the default budget), and each placed pod as much work for the bound. The
/// issue 13 time targets grow with the pods (1,000 pods in 100 ms, 20,000 in 2 s), so the
/// work does too; with the heuristic packer first, 20,000 units per pod find the plans the
/// old flat 100 million did on every benchmark case but three (docs/benchmarks.md).
const PODS_PER_BUDGET: u64 = 7_500;

/// The least re-packing work, as a fraction of the budget (10 million units by default), so
/// a handful of free pods still get an exact search.
const MIN_REPACK_SHARE: u64 = 15;

/// The share of the work left that covering one group may use, so the packers after it
/// always get the rest.
const COVER_SHARE: f64 = 0.1;

/// The share of a group's work its packing heuristic may use before the LP rounding.
const HEURISTIC_SHARE: f64 = 0.25;

/// Groups of at most this many movable pods with hosts are re-packed both with and without
/// the hosts growing, and the cheaper kept (see [`repack`]).
const SMALL_GROUP_PODS: usize = 150;

/// The share of the work left that merging one group's nodes may use.
const MERGE_SHARE: f64 = 0.1;

/// Work per pod of a group re-packed with its owners (see [`owners`]), as a fraction of the
/// re-packing's per-pod allowance. The joint packing draws on a pool of its own, so the
/// packing with the owners kept in place, and every later group, get exactly the work they
/// get with `repack_owners` off.
const JOINT_SHARE: f64 = 0.5;

/// Settings of the packing optimiser (a field of [`crate::SolveOptions`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OptimizerOptions {
    /// Whether to improve the greedy plan at all (default true). When false the plan is
    /// exactly the greedy one and carries no bound.
    pub enabled: bool,
    /// Work budget in deterministic units (about one resource comparison each). When it
    /// runs out the best plan found so far is returned: groups not yet improved keep their
    /// greedy claims. The re-packing gets `max_work / 7,500` units per pod it may move (at
    /// least a fifteenth of `max_work`) and the lower bound as much per placed pod (at
    /// most a third of `max_work`), so the time grows with the batch: with the default
    /// (150 million) 1,000 pods get 20 million units of each and 5,000 pods or more the
    /// whole budget. A larger budget raises both the per-pod allowance and the ceiling.
    pub max_work: u64,
    /// Whether owners of hostname spreads that nothing else keeps on their claim are
    /// re-paired across the nodes of their group (default false): they join the kept
    /// claims (or new ones of their own) wherever every hostname-keyed count of the final
    /// content stays within bounds, and kept claims may grow to a larger type when that
    /// absorbs pods more cheaply than new capacity. It makes Karpenter's diverse mix
    /// cheaper but some other constrained mixes dearer than without it (see
    /// docs/benchmarks.md), so it is off until it is never worse. Plans stay valid and never
    /// dearer than the greedy plan either way.
    pub repair_spread_owners: bool,
    /// Whether pods that only hostname-keyed constraints keep on their node (owners of a
    /// hostname anti-affinity or spread, and the pods such an anti-affinity keeps apart)
    /// are re-packed together with the pods around them (default true): every node's
    /// final content then keeps every such constraint of every pod on it. When false
    /// they stay on the nodes the greedy pass gave them and only the other pods move.
    pub repack_owners: bool,
    /// Whether the plan's lower bound is taken to the optimum of its configuration LP
    /// (default false): every pod whole on one node, at most one pod per node of each set
    /// kept apart by hostname anti-affinity, column generation until no node pattern is
    /// worth more than its price, each checked by an exhaustive search. The bound is then
    /// as tight as this model allows, whatever the work budget, but it can take minutes (a
    /// thousand pods of Karpenter's diverse mix: about two and a half); it runs beside
    /// the re-packing and does not change the plan. For analysis: `packing_report` sets it
    /// with `KARPENTER_BENCH_PROVE_BOUND=1`.
    pub prove_bound: bool,
}

impl Default for OptimizerOptions {
    fn default() -> Self {
        OptimizerOptions {
            enabled: true,
            max_work: 150_000_000,
            repair_spread_owners: false,
            repack_owners: true,
            prove_bound: false,
        }
    }
}

/// What the optimiser hands back to the scheduler.
pub(crate) struct Optimized {
    /// The claims to plan, when any group improved (kept greedy claims first, in their
    /// order, then the re-packed ones).
    pub claims: Option<Vec<Claim>>,
    /// A valid lower bound on the price of the new capacity.
    pub lower_bound: Option<f64>,
    /// The price of the greedy pass's claims, each at its cheapest option's cheapest
    /// offering.
    pub greedy_price: f64,
    /// Counters.
    pub stats: OptimizerStats,
    /// Whether every claim fits its pool's limits (false only for a pool the greedy pass
    /// planned without them, see `LimitMode::Unbounded`).
    pub within_limits: bool,
}

/// Resource dimensions: cpu, memory, ephemeral-storage, pods, then extended names.
struct Dims {
    extended: Vec<String>,
}

impl Dims {
    fn new<'a>(all: impl Iterator<Item = &'a Resources>) -> Self {
        let mut extended: Vec<String> = Vec::new();
        for r in all {
            for (n, _) in &r.extended {
                if let Err(i) = extended.binary_search(n) {
                    extended.insert(i, n.clone());
                }
            }
        }
        Dims { extended }
    }

    fn len(&self) -> usize {
        4 + self.extended.len()
    }

    fn vector(&self, r: &Resources) -> Vec<i64> {
        let mut v = vec![r.cpu_millis, r.memory, r.ephemeral_storage, r.pods];
        v.extend(self.extended.iter().map(|n| arith::extended(r, n)));
        v
    }
}

fn pod_requests(pod: &Pod) -> Resources {
    let mut r = pod.requests.clone();
    r.pods = 1;
    r
}

/// The claim's requirements without its placeholder hostname.
fn without_hostname(reqs: &Requirements) -> Requirements {
    let mut out = reqs.clone();
    out.remove(HOSTNAME);
    out
}

/// The price `finish` reports for a claim: its cheapest option's cheapest offering.
/// What the plan charges for greedy claim `c`: [`claim_price`] under its requirements with
/// its reservations pinned as the finished plan writes them (the ones it holds, or no
/// reserved capacity at all when it holds none); without the pins such a claim would be
/// priced on an offering it does not launch into.
fn greedy_claim_price(s: &Scheduler<'_>, c: &Claim) -> f64 {
    let t = &s.templates[c.template];
    if !t.has_reserved {
        return claim_price(t, &c.options, &c.reqs);
    }
    let mut reqs = c.reqs.clone();
    s.reservations.pin_requirements(t, &c.reserved, &mut reqs);
    claim_price(t, &c.options, &reqs)
}

fn claim_price(t: &Template<'_>, options: &[u32], reqs: &Requirements) -> f64 {
    let offers = t.offers(reqs);
    options
        .iter()
        .filter_map(|&i| {
            let o = offers[i as usize]?;
            Some(t.its[i as usize].offerings[o as usize].price)
        })
        .reduce(f64::min)
        .unwrap_or(0.0)
}

struct Group {
    template: usize,
    reqs: Requirements,
    /// Pods taken off free claims (see [`is_free`]): they join this group's
    /// packing, and the group is replaced only together with every other such group.
    free: Vec<usize>,
    /// The greedy claims its movable pods fill whole, for the size of the problem.
    greedy_nodes: usize,
    /// Greedy claims whose every pod may move.
    claims: Vec<usize>,
    /// Greedy claims pinned by some of their pods (hostname-keyed constraints, host ports),
    /// with the pods on them that may move: see [`hosts::fill_hosts`].
    partial: Vec<(usize, Vec<usize>)>,
    /// The pods of its claims (whole or partial) that own hostname spreads and may move
    /// only to hosts, sorted (see `Topology::spread_owner_only`).
    movers: Vec<usize>,
    /// The pods of its whole claims that only hostname-keyed constraints keep on their
    /// node, sorted: the group is re-packed with them (see [`owners`]).
    owners: Vec<usize>,
}

/// One claim's split (see [`optimize`]): the claim, its group's requirements, the pods
/// that may move, the owners only hostname-keyed constraints keep and the spread owners
/// to re-pair.
type ClaimSplit = (usize, Requirements, Vec<usize>, Vec<usize>, Vec<usize>);

/// An instance type a group may use.
struct Candidate {
    it: u32,
    price: f64,
}

/// Runs the optimiser over the scheduler's state after the greedy pass.
pub(crate) fn optimize(
    s: &Scheduler<'_>,
    options: &OptimizerOptions,
    deadline: Option<&dyn Fn() -> bool>,
) -> Optimized {
    let mut stats = OptimizerStats::default();

    // Claims whose every pod is free to go to the highest-weight pool that takes it, on
    // nodes that only its own selectors narrow: those pods are regrouped by that pool and
    // their own requirements (the claims they leave are all replaced, or none is). These
    // free groups come first.
    let mut groups: Vec<Group> = Vec::new();
    // Pods with the same selector, tolerations and requests find the same pool: checking
    // every instance type of every pool is done once per such kind, not once per pod.
    type Kind<'p> = (&'p crate::model::Labels, &'p [Toleration], Resources);
    let mut targets: HashMap<Kind<'_>, Option<(usize, Requirements)>> = HashMap::new();
    let mut free_of: Vec<Option<(usize, Requirements)>> = vec![None; s.pods.len()];
    // With one pool and no selector, free pods would be regrouped exactly as their claims
    // are, only over looser requirements (more types for the packers to weigh, about 1.5x
    // the time at 20,000 unconstrained pods for the same plan).
    // Pools with reserved offerings are left as the greedy pass packed them (see below), so
    // no free pod may be regrouped into one either.
    let reserved_pools = s.templates.iter().any(|t| t.has_reserved);
    let regroup = !reserved_pools
        && (s.templates.len() > 1
            || s.claims
                .iter()
                .flat_map(|c| &c.pods)
                .any(|&p| !s.pods[p].node_selector.is_empty()));
    for claim in s.claims.iter().filter(|_| regroup) {
        for &p in &claim.pods {
            let pod = &s.pods[p];
            if is_free(s, p) {
                let kind = (
                    &pod.node_selector,
                    pod.tolerations.as_slice(),
                    pod_requests(pod),
                );
                free_of[p] = targets
                    .entry(kind)
                    .or_insert_with(|| free_target(s, pod))
                    .clone();
            }
        }
    }
    let free_claims: Vec<usize> = (0..s.claims.len())
        .filter(|&c| {
            let claim = &s.claims[c];
            regroup && !claim.pods.is_empty() && claim.pods.iter().all(|&p| free_of[p].is_some())
        })
        .collect();
    let mut free_index: HashMap<(usize, Requirements), usize> = HashMap::new();
    let mut free_sources: Vec<std::collections::BTreeSet<usize>> = Vec::new();
    for &c in &free_claims {
        for &p in &s.claims[c].pods {
            let Some((ti, reqs)) = free_of[p].clone() else {
                continue;
            };
            let g = *free_index.entry((ti, reqs.clone())).or_insert_with(|| {
                groups.push(Group {
                    template: ti,
                    reqs,
                    free: Vec::new(),
                    greedy_nodes: 0,
                    claims: Vec::new(),
                    partial: Vec::new(),
                    movers: Vec::new(),
                    owners: Vec::new(),
                });
                free_sources.push(std::collections::BTreeSet::new());
                groups.len() - 1
            });
            groups[g].free.push(p);
            free_sources[g].insert(c);
        }
    }
    for (g, sources) in groups.iter_mut().zip(&free_sources) {
        g.greedy_nodes = sources.len();
    }
    let free_groups = groups.len();
    let free_greedy: f64 = free_claims
        .iter()
        .map(|&c| greedy_claim_price(s, &s.claims[c]))
        .sum();

    // The other claims' interchangeable groups, in order of their first claim.
    let modeled = global::modeled_apart(s.pods);
    let mut index: HashMap<(usize, Requirements), usize> = HashMap::new();
    // Per claim: its group's requirements, the pods that may move, the owners only
    // hostname-keyed constraints keep (see [`owners`]) and the spread owners to re-pair.
    let mut sorted: Vec<ClaimSplit> = Vec::new();
    for (c, claim) in s.claims.iter().enumerate() {
        if free_claims.binary_search(&c).is_ok() {
            continue;
        }
        let reqs = without_hostname(&claim.reqs);
        // A pool with reserved offerings keeps its greedy claims: each holds the
        // reservations the greedy pass counted for it, and a re-packing priced on reserved
        // offerings could promise more instances than the reservations have.
        let reserved = s.templates[claim.template].has_reserved;
        // Owners of hostname spreads that nothing else keeps may leave too, but only for
        // hosts whose content keeps their spreads (see [`hosts`]).
        let mut movers: Vec<usize> = Vec::new();
        let mut owners: Vec<usize> = Vec::new();
        let movable: Vec<usize> = claim
            .pods
            .iter()
            .copied()
            .filter(|_| !reserved)
            .filter(|&p| {
                let pod = &s.pods[p];
                if !pod.host_ports.is_empty() || !pod.device_claims.is_empty() {
                    return false;
                }
                if s.topology.movable(p, pod, &reqs) {
                    return true;
                }
                if options.repack_owners && s.topology.kept_on_hostname_only(p, pod, &reqs) {
                    owners.push(p);
                }
                if options.repair_spread_owners && s.topology.spread_owner_only(p, pod, &reqs) {
                    movers.push(p);
                    return true;
                }
                false
            })
            .collect();
        sorted.push((c, reqs, movable, owners, movers));
    }
    // A group whose claims hold nothing but movable pods and owners re-packs them all
    // together; one with a claim some other pod pins keeps its owners where they are.
    let pinning: std::collections::HashSet<(usize, &Requirements)> = sorted
        .iter()
        .filter(|(c, _, movable, owners, movers)| {
            let n = s.claims[*c].pods.len();
            !movable.is_empty()
                && movable.len() < n
                && movable.len() - movers.len() + owners.len() < n
        })
        .map(|(c, reqs, ..)| (s.claims[*c].template, reqs))
        .collect();
    for (c, reqs, mut movable, mut owners, mut movers) in sorted.iter().cloned() {
        let claim = &s.claims[c];
        let key = (claim.template, reqs);
        // The stats (and the bound's gap and the work split they set) count owners as
        // fixed either way: the bound models none of their hostname-keyed constraints.
        let in_place = movable.clone();
        if !owners.is_empty() {
            if movable.len() - movers.len() + owners.len() == claim.pods.len()
                && !pinning.contains(&(key.0, &key.1))
            {
                movable.clone_from(&claim.pods);
                movers.clear();
            } else {
                owners.clear();
            }
        }
        stats.pods_fixed += claim.pods.len() - in_place.len();
        // `in_place` keeps the claim's order, so the fixed pods are the ones it skips.
        let mut kept = in_place.iter().peekable();
        for &p in &claim.pods {
            if kept.next_if_eq(&&p).is_none()
                && modeled[p]
                && s.topology.selected_only_apart(&s.pods[p])
            {
                stats.pods_fixed_apart += 1;
            }
        }
        if movable.is_empty() {
            continue;
        }
        let g = *index.entry(key.clone()).or_insert_with(|| {
            groups.push(Group {
                template: key.0,
                reqs: key.1,
                free: Vec::new(),
                greedy_nodes: 0,
                claims: Vec::new(),
                partial: Vec::new(),
                movers: Vec::new(),
                owners: Vec::new(),
            });
            groups.len() - 1
        });
        groups[g].movers.extend(movers);
        groups[g].owners.extend(owners);
        if movable.len() == claim.pods.len() {
            groups[g].greedy_nodes += 1;
            groups[g].claims.push(c);
        } else {
            groups[g].partial.push((c, movable));
        }
    }
    for g in &mut groups {
        g.movers.sort_unstable();
        g.owners.sort_unstable();
    }
    stats.groups = groups.len();

    // The bound only reports; it gets at most a third of the work so the packing, which
    // changes the plan, always has the rest, and otherwise work in proportion to the pods
    // placed: its column generation stops with its best valid bound so far. When most pods
    // are pinned to their claims the re-packing has little to do and the bound would be
    // most of what the optimiser spends (on plans mostly pinned by hostname constraints it
    // would dominate the solve time), so each pod then brings far less.
    let placed: usize = s.claims.iter().map(|c| c.pods.len()).sum();
    let per_pod = (options.max_work / PODS_PER_BUDGET).max(1);
    let bound_per_pod = if 2 * stats.pods_fixed >= placed {
        BOUND_WORK_PER_FIXED_POD
    } else {
        per_pod
    };
    let bound_units = (options.max_work / 3).min(
        (placed as u64)
            .saturating_mul(bound_per_pod)
            .max(MIN_BOUND_WORK),
    );
    let greedy_price: f64 = s.claims.iter().map(|c| greedy_claim_price(s, c)).sum();
    let mut bound_budget = Budget::new(bound_units, deadline);
    let effort = if options.prove_bound {
        bound::Effort::Proven
    } else {
        bound::Effort::Budgeted
    };
    let bound_input = global::model(s, effort, &mut bound_budget);
    // Re-packing gets work in proportion to the pods it may move, so a plan whose claims are
    // mostly pinned (a few free pods beside each anti-affinity pod) is not charged the time
    // of a free batch of a thousand pods for a few percent.
    let movable = placed - stats.pods_fixed;
    let repack_units = (movable as u64)
        .saturating_mul(per_pod)
        .max(options.max_work / MIN_REPACK_SHARE);
    // The bound's whole share is set aside, whatever it ends up spending, so the packing
    // does not wait for it (see [`global`]).
    let mut budget = Budget::new(
        options
            .max_work
            .saturating_sub(bound_units)
            .min(repack_units),
        deadline,
    );

    let mut replaced: Vec<Option<Vec<Claim>>> = Vec::with_capacity(groups.len());
    let mut shrunk: Vec<Vec<(usize, Claim)>> = Vec::with_capacity(groups.len());
    let mut proven: Vec<bool> = Vec::with_capacity(groups.len());
    let mut next_host = 0u32;
    // Each group gets the share of the work left that its movable pods are of those left,
    // so that one large group cannot starve the others, but never more than its pods' share
    // of the whole: what a group leaves over is not handed to the groups after it. Those
    // leftovers bought nothing on the benchmarks (the same plans but on aws-mixed at 1,000
    // and 20,000 pods, 0.03 % and 0.3 % dearer) and cost the most time: on 1,000 pods of
    // Karpenter's diverse mix the last small groups took 16 ms instead of 6 for the same
    // plan (docs/benchmarks.md).
    // A group with owners is counted without them: its share is what the packing with the
    // owners kept in place moves, and the joint packing's work comes from `joint_budget`.
    let group_pods: Vec<usize> = groups
        .iter()
        .map(|g| {
            g.claims
                .iter()
                .map(|&c| s.claims[c].pods.len())
                .sum::<usize>()
                + g.partial.iter().map(|(_, m)| m.len()).sum::<usize>()
                + g.free.len()
                - g.owners.len()
        })
        .collect();
    let mut pods_left: usize = group_pods.iter().sum();
    let mut group_work: Vec<GroupWork> = Vec::with_capacity(groups.len());
    let all_pods = pods_left.max(1) as f64;
    let whole = budget.left() as f64;
    let joint_pods: Vec<usize> = groups
        .iter()
        .zip(&group_pods)
        .map(|(g, &n)| {
            if g.owners.is_empty() {
                0
            } else {
                n + g.owners.len()
            }
        })
        .collect();
    let mut joint_left: usize = joint_pods.iter().sum();
    let joint_all = joint_left.max(1) as f64;
    let mut joint_budget = Budget::new(
        ((joint_left as u64).saturating_mul(per_pod) as f64 * JOINT_SHARE) as u64,
        deadline,
    );
    let joint_whole = joint_budget.left() as f64;
    let bound_left = bound_units.saturating_sub(bound_budget.spent());
    let (part_exhausted, bound) =
        global::alongside(bound_input, greedy_price, bound_left, deadline, || {
            let mut part_exhausted = false;
            for ((g, &n), &jn) in groups.iter_mut().zip(&group_pods).zip(&joint_pods) {
                let mut joint = joint_budget.portion_capped(
                    jn as f64 / joint_left.max(1) as f64,
                    joint_whole * jn as f64 / joint_all,
                );
                joint_left -= jn;
                if budget.exhausted() {
                    replaced.push(None);
                    shrunk.push(Vec::new());
                    proven.push(false);
                    group_work.push(GroupWork {
                        pods: n,
                        ..GroupWork::default()
                    });
                    continue;
                }
                let mut part = budget.portion_capped(
                    n as f64 / pods_left.max(1) as f64,
                    whole * n as f64 / all_pods,
                );
                let allowed = part.left();
                pods_left -= n;
                // A free group beats no claim of its own: all free groups together must beat the
                // free claims' price (checked below), which bounds what any one of them may cost.
                let target = (!g.free.is_empty()).then_some(free_greedy);
                let outcome = repack(s, g, target, &mut part, &mut joint, &mut next_host);
                joint_budget.absorb(&joint);
                group_work.push(GroupWork {
                    pods: n,
                    allowed,
                    spent: part.spent(),
                });
                budget.absorb(&part);
                part_exhausted |= part.exhausted();
                proven.push(outcome.proven_optimal);
                replaced.push(outcome.claims);
                shrunk.push(outcome.shrunk);
            }
            part_exhausted
        });
    let lower_bound = bound.value;

    // The free groups hold the pods of every free claim: they replace those claims all
    // together, when each of them was packed and they cost less in total, or not at all.
    let free_cost = |replaced: &[Option<Vec<Claim>>]| -> Option<f64> {
        replaced[..free_groups]
            .iter()
            .map(|r| {
                r.as_ref()
                    .map(|claims| claims.iter().map(|c| greedy_claim_price(s, c)).sum::<f64>())
            })
            .sum()
    };
    let mut free_kept = free_groups > 0
        && free_cost(&replaced).is_some_and(|cost| cost < free_greedy - price_epsilon(free_greedy));
    // NodePool limits (see [`limits::fit_limits`]): a re-packed group is proven optimal only if it
    // survives them, since its packing ignored them. While the free groups stand, the free
    // claims they replace count as gone; if the limits then drop any free group, they all
    // go and the limits are fitted again with the free claims back (narrowing options
    // twice only narrows them further).
    // A single free group whose exact search found nothing cheaper than the free claims,
    // all of its own pool, proves those greedy claims optimal.
    let free_proof = free_groups == 1
        && replaced[0].is_none()
        && proven[0]
        && free_claims
            .iter()
            .all(|&c| s.claims[c].template == groups[0].template);
    let mut narrowed: Vec<(usize, Claim)> = Vec::new();
    let mut within_limits;
    loop {
        if !free_kept {
            for g in 0..free_groups {
                replaced[g] = None;
                proven[g] = free_proof;
            }
        }
        let gone: &[usize] = if free_kept { &free_claims } else { &[] };
        narrowed.clear();
        within_limits = true;
        for (ti, t) in s.templates.iter().enumerate() {
            if !Remaining::new(t.pool).is_limited() {
                continue;
            }
            let members: Vec<usize> = (0..groups.len())
                .filter(|&g| groups[g].template == ti && replaced[g].is_some())
                .collect();
            let fitted = limits::fit_limits(s, ti, &groups, &members, gone, &mut replaced, &shrunk);
            for &g in &members {
                if !fitted.accepted.contains(&g) {
                    replaced[g] = None;
                    proven[g] = false;
                }
            }
            narrowed.extend(fitted.narrowed);
            within_limits &= fitted.fits;
        }
        if free_kept && replaced[..free_groups].iter().any(Option::is_none) {
            free_kept = false;
            continue;
        }
        break;
    }
    stats.groups_proven_optimal = proven.iter().filter(|&&p| p).count();

    stats.groups_improved = replaced.iter().filter(|r| r.is_some()).count();
    stats.group_work = group_work;
    stats.work = budget
        .spent()
        .saturating_add(joint_budget.spent())
        .saturating_add(bound_budget.spent())
        .saturating_add(bound.spent);
    stats.budget_exhausted = budget.exhausted()
        || joint_budget.exhausted()
        || part_exhausted
        || bound_budget.exhausted()
        || bound.exhausted;
    if stats.groups_improved == 0 && narrowed.is_empty() {
        return Optimized {
            claims: None,
            lower_bound,
            greedy_price,
            stats,
            within_limits,
        };
    }
    let mut dropped = vec![false; s.claims.len()];
    if free_kept {
        for &c in &free_claims {
            dropped[c] = true;
        }
    }
    let mut smaller: HashMap<usize, Claim> = HashMap::new();
    for ((g, r), sh) in groups.iter().zip(&replaced).zip(shrunk) {
        if r.is_some() {
            for &c in &g.claims {
                dropped[c] = true;
            }
            smaller.extend(sh);
        }
    }
    // Kept claims a limit narrowed, a shrunk host's narrowed version included.
    smaller.extend(narrowed);
    let mut claims: Vec<Claim> = s
        .claims
        .iter()
        .enumerate()
        .filter(|(c, _)| !dropped[*c])
        .map(|(c, claim)| smaller.remove(&c).unwrap_or_else(|| claim.clone()))
        .collect();
    for r in replaced.into_iter().flatten() {
        stats.pods_repacked += r.iter().map(|c| c.pods.len()).sum::<usize>();
        claims.extend(r);
    }
    Optimized {
        claims: Some(claims),
        lower_bound,
        greedy_price,
        stats,
        within_limits,
    }
}

/// Whether a pod is free: nothing but its nodeSelector and tolerations decides where it
/// goes. It binds no host port, has no volume requirement, required node affinity or
/// preferred node affinity in force (one relaxed away or ignored by the policy does not
/// count), and no topology group owns it or could count it other than hostname-keyed
/// spreads and anti-affinities of other pods (which it may leave) and groups with no say
/// in where it goes (see `Topology::movable`).
fn is_free(s: &Scheduler<'_>, p: usize) -> bool {
    let pod = &s.pods[p];
    pod.host_ports.is_empty()
        && pod.device_claims.is_empty()
        && pod.volume_requirements.is_empty()
        && pod.affinity.node_affinity.required.is_empty()
        && !s.prefers_node[p]
        && s.topology.movable(p, pod, &Requirements::new())
}

/// The pool and requirements a free pod (see [`is_free`]) is re-packed with: the
/// highest-weight pool (the templates are in weight order) whose taints it tolerates, whose
/// requirements admit its nodeSelector and which has an instance type that holds it beside
/// its DaemonSets, on nodes with exactly that pool's requirements and its nodeSelector;
/// `None` when no pool takes it. That is where the greedy pass opens claims for it too; it
/// only puts such a pod elsewhere when a claim opened for another pod, maybe of a
/// lower-weight pool or narrowed by that pod's selectors, had room.
fn free_target(s: &Scheduler<'_>, pod: &Pod) -> Option<(usize, Requirements)> {
    let selector = Requirements::from_labels(pod.node_selector.iter());
    let requests = pod_requests(pod);
    s.templates.iter().enumerate().find_map(|(ti, t)| {
        if !tolerates(&t.pool.taints, &pod.tolerations)
            || t.reqs.compatible(&selector, true).is_err()
        {
            return None;
        }
        let mut reqs = t.reqs.clone();
        reqs.add_all(&selector);
        let fits = t.its.iter().enumerate().any(|(i, it)| {
            let mut load = requests.clone();
            arith::add_into(&mut load, &t.groups[t.group_of[i]].overhead);
            arith::fits(&load, &t.allocs[i])
                && it.requirements.intersects(&reqs).is_ok()
                && cheapest(it, &reqs).is_some()
        });
        fits.then_some((ti, reqs))
    })
}

fn price_epsilon(price: f64) -> f64 {
    1e-9 * price.abs().max(1.0)
}

fn greedy_cost(s: &Scheduler<'_>, g: &Group) -> f64 {
    let t = &s.templates[g.template];
    g.claims
        .iter()
        .map(|&c| claim_price(t, &s.claims[c].options, &g.reqs))
        .sum()
}

struct Repacked {
    claims: Option<Vec<Claim>>,
    /// The group's partial claims that gave up pods, by claim index, with what is left on
    /// them; meaningful only when `claims` is `Some`.
    shrunk: Vec<(usize, Claim)>,
    proven_optimal: bool,
}

/// Re-packs one group; `claims` is `Some` only when strictly cheaper and fully valid.
///
/// The group's partial claims (see [`Group::partial`]) become hosts ([`hosts::fill_hosts`]):
/// each keeps its hostname, requirements and pinned pods, and the group's movable pods fill
/// the room beside them before the rest is packed onto new nodes. The packing then has to
/// beat `target` (a free group's share of the free claims, see [`is_free`]) or else the
/// greedy price of the group's whole claims, plus what the hosts save. A group with owners
/// is also re-packed whole on `joint` (see [`owners`]), and the cheaper kept.
fn repack(
    s: &Scheduler<'_>,
    g: &mut Group,
    target: Option<f64>,
    budget: &mut Budget<'_>,
    joint: &mut Budget<'_>,
    next_host: &mut u32,
) -> Repacked {
    if !g.owners.is_empty() {
        // The owners kept where they are, with the group's claims that hold them as
        // hosts, get the group's budget, exactly as without joint re-packing; the owners
        // re-packed with the rest get a budget of their own. The cheaper wins.
        let mut pinned = owners::pinned(s, g);
        let kept = repack(s, &mut pinned, target, budget, joint, next_host);
        let mut joint_next = *next_host;
        let joint = owners::repack(s, g, target, joint, &mut joint_next);
        let (j, k) = (net_price(s, g, &joint), net_price(s, &pinned, &kept));
        if joint.claims.is_some() && j < k - price_epsilon(k) {
            *next_host = joint_next;
            return joint;
        }
        *g = pinned;
        return kept;
    }
    let grown = repack_hosts(s, g, target, budget, next_host, true);
    let pods = g
        .claims
        .iter()
        .map(|&c| s.claims[c].pods.len())
        .sum::<usize>()
        + g.partial.iter().map(|(_, m)| m.len()).sum::<usize>();
    if g.partial.is_empty() || pods > SMALL_GROUP_PODS || budget.exhausted() {
        return grown;
    }
    // On a small group the packers see every pod the hosts' growth took away, and may do
    // better with them: both are tried, the cheaper kept.
    let kept = repack_hosts(s, g, target, budget, next_host, false);
    if net_price(s, g, &kept) < net_price(s, g, &grown) - price_epsilon(net_price(s, g, &grown)) {
        kept
    } else {
        grown
    }
}

/// What a group's re-packing changes the plan's price by (0 when it keeps the greedy
/// claims).
fn net_price(s: &Scheduler<'_>, g: &Group, r: &Repacked) -> f64 {
    let Some(claims) = &r.claims else {
        return 0.0;
    };
    let t = &s.templates[g.template];
    let new: f64 = claims.iter().map(|c| greedy_claim_price(s, c)).sum();
    let shrunk: f64 = r
        .shrunk
        .iter()
        .map(|(c, claim)| {
            claim_price(t, &claim.options, &g.reqs) - claim_price(t, &s.claims[*c].options, &g.reqs)
        })
        .sum();
    new + shrunk - greedy_cost(s, g)
}

/// The instance types of `t` a group with requirements `reqs` may launch, each at the price
/// of its cheapest offering `reqs` allows: those whose labels intersect `reqs`, which the
/// pool's limits admit on their own and which hold their DaemonSets. `None` when the budget
/// ran out (it is charged four units per type, whatever the answer).
///
/// The per-key compatibility and the cheapest offerings come from the template's memos
/// ([`Template::compatible_with`], [`Template::offers`]), which hold the same answers as
/// [`Requirements::intersects`] and [`cheapest`] per type: groups of one pool mostly share
/// their requirements, and walking 1,340 types' labels per group took milliseconds each.
fn candidate_types(
    t: &Template<'_>,
    reqs: &Requirements,
    budget: &mut Budget<'_>,
) -> Option<Vec<Candidate>> {
    let compatible: Vec<_> = reqs.iter().map(|r| t.compatible_with(r)).collect();
    let offers = t.offers(reqs);
    let initial = Remaining::new(t.pool);
    let mut candidates = Vec::new();
    for (i, it) in t.its.iter().enumerate() {
        if !budget.spend(4) {
            return None;
        }
        if !compatible.iter().all(|c| c[i])
            || !initial.exceeded_by(it).is_empty()
            || !arith::fits(&t.groups[t.group_of[i]].overhead, &t.allocs[i])
        {
            continue;
        }
        if let Some(o) = offers[i] {
            candidates.push(Candidate {
                it: i as u32,
                price: it.offerings[o as usize].price,
            });
        }
    }
    Some(candidates)
}

/// [`repack`] once, with the hosts growing or not (see [`hosts::fill_hosts`]).
fn repack_hosts(
    s: &Scheduler<'_>,
    g: &Group,
    target: Option<f64>,
    budget: &mut Budget<'_>,
    next_host: &mut u32,
    grow: bool,
) -> Repacked {
    let none = Repacked {
        claims: None,
        shrunk: Vec::new(),
        proven_optimal: false,
    };
    let t = &s.templates[g.template];
    let reqs = &g.reqs;
    let mut pods: Vec<usize> = g
        .claims
        .iter()
        .flat_map(|&c| s.claims[c].pods.iter().copied())
        .chain(g.free.iter().copied())
        .collect();
    if pods.is_empty() && g.partial.is_empty() {
        return none;
    }
    let Some(candidates) = candidate_types(t, reqs, budget) else {
        return none;
    };
    // Every pod of the group's claims, pinned ones included, so a shrunk claim's load has
    // every resource its pods request.
    let everything: Vec<Resources> = pods
        .iter()
        .chain(g.partial.iter().flat_map(|(c, _)| &s.claims[*c].pods))
        .map(|&p| pod_requests(&s.pods[p]))
        .collect();
    let (dims, types, price_of) = group_types(t, &candidates, &everything);
    let Some(hosts::Filled {
        shrunk,
        added,
        saving,
    }) = hosts::fill_hosts(
        s,
        g,
        &candidates,
        &types,
        &dims,
        &price_of,
        &mut pods,
        next_host,
        grow,
        budget,
    )
    else {
        return none;
    };
    if pods.is_empty() {
        // Everything fits on the hosts: the group needs no new node at all.
        let target = greedy_cost(s, g) + saving;
        return if target > price_epsilon(target) && (!shrunk.is_empty() || !added.is_empty()) {
            Repacked {
                claims: Some(added),
                shrunk,
                proven_optimal: false,
            }
        } else {
            none
        };
    }
    let requests: Vec<Resources> = pods.iter().map(|&p| pod_requests(&s.pods[p])).collect();

    let (classes, members) = classes_of(requests.iter().map(|r| dims.vector(r)));
    if !budget.spend((pods.len() * dims.len()) as u64) {
        return none;
    }

    // What the packing must beat: the whole claims' price, less what shrinking saves.
    let greedy = target.unwrap_or_else(|| greedy_cost(s, g)) + saving;
    let (packing, proven_optimal) = pack_classes(
        dims.len(),
        &classes,
        &types,
        pods.len(),
        g.greedy_nodes,
        greedy,
        budget,
    );
    // A proof that nothing beats the greedy claims holds only when no claim was shrunk:
    // otherwise it was against a target that assumed the shrinking.
    let proven_optimal = proven_optimal && shrunk.is_empty() && added.is_empty();
    let Some(packing) = packing else {
        return Repacked {
            proven_optimal,
            ..none
        };
    };
    if packing.cost >= greedy - price_epsilon(greedy) {
        return Repacked {
            proven_optimal,
            ..none
        };
    }

    // Materialise and re-check every claim against every candidate.
    let mut next_member = vec![0usize; classes.len()];
    let mut claims = Vec::new();
    let mut total = 0.0;
    for bin in &packing.bins {
        let mut content: Vec<usize> = Vec::new();
        let mut options: Option<(Vec<u32>, Resources)> = None;
        for _ in 0..bin.copies {
            let sum = take_copy(
                &bin.items,
                &members,
                &mut next_member,
                &requests,
                &pods,
                &mut content,
            );
            if options.as_ref().is_none_or(|(_, r)| *r != sum) {
                let load = dims.vector(&sum);
                let Some(o) = claim_options(s, t, &candidates, &types, reqs, &load) else {
                    return none;
                };
                options = Some((o, sum.clone()));
            }
            let Some((opts, _)) = &options else {
                return none;
            };
            total += opts
                .iter()
                .map(|&i| price_of[i as usize])
                .fold(f64::INFINITY, f64::min);
            claims.push(new_claim(
                g,
                t,
                next_host,
                opts.clone(),
                content.clone(),
                sum,
            ));
        }
    }
    let placed: usize = claims.iter().map(|c| c.pods.len()).sum();
    if placed != pods.len() || total >= greedy - price_epsilon(greedy) {
        return none;
    }
    // The proof covers the moved pods on new nodes only, not the room they might have
    // taken on the shrunk claims or new hosts.
    let proven_optimal = packing.optimal && shrunk.is_empty() && added.is_empty();
    claims.extend(added);
    Repacked {
        claims: Some(claims),
        proven_optimal,
        shrunk,
    }
}

/// Fills `content` with the next copy of a bin holding `items` (class, count): each class's
/// pods taken in order from `members` (`next_member` advances past them), as indices into
/// `pods`. Returns their summed requests.
fn take_copy(
    items: &[(usize, u32)],
    members: &[Vec<usize>],
    next_member: &mut [usize],
    requests: &[Resources],
    pods: &[usize],
    content: &mut Vec<usize>,
) -> Resources {
    content.clear();
    let mut sum = Resources::default();
    for &(c, k) in items {
        for _ in 0..k {
            let n = members[c][next_member[c]];
            next_member[c] += 1;
            arith::add_into(&mut sum, &requests[n]);
            content.push(pods[n]);
        }
    }
    sum
}

/// Identical request vectors form a class, in first-seen order: the classes, and per
/// class the indices (in `vectors`) of its members.
fn classes_of(vectors: impl Iterator<Item = Vec<i64>>) -> (Vec<Class>, Vec<Vec<usize>>) {
    let mut class_of: HashMap<Vec<i64>, usize> = HashMap::new();
    let mut classes: Vec<Class> = Vec::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    for (n, v) in vectors.enumerate() {
        let c = *class_of.entry(v.clone()).or_insert_with(|| {
            classes.push(Class { req: v, count: 0 });
            members.push(Vec::new());
            classes.len() - 1
        });
        classes[c].count += 1;
        members[c].push(n);
    }
    (classes, members)
}

/// The cheapest packing of `classes` (vectors of `dims` dimensions, `pods` pods in all, which the greedy pass put on
/// `greedy_nodes` nodes) onto `types` that the packers find within the budget, below
/// `greedy` for the exact search, with nodes merged wherever one holds two for no more
/// money; and whether it is proven optimal (the exact search or the cover finished).
fn pack_classes(
    dims: usize,
    classes: &[Class],
    types: &[BinType],
    pods: usize,
    greedy_nodes: usize,
    greedy: f64,
    budget: &mut Budget<'_>,
) -> (Option<pack::Packing>, bool) {
    let (weights, fluid) = weights(dims, classes, types, greedy, budget);
    let values = values(classes, &weights);
    let inst = Instance {
        types,
        classes,
        weights: &weights,
        values: &values,
    };
    let (packing, proven_optimal) = if pods <= pack::EXACT_MAX_PODS {
        let e = pack::exact(&inst, greedy - price_epsilon(greedy), budget);
        (e.packing, e.finished)
    } else {
        // With few nodes the price turns on fragmentation: choosing the node types first
        // (covers of the total demand) and filling them second finds what committing to
        // one pattern at a time misses, and it often proves its packing optimal, which
        // makes the costlier packers below pointless.
        let covered = if greedy_nodes <= cover::MAX_NODES {
            let mut part = budget.portion(COVER_SHARE);
            let c = cover::cover_pack(&inst, fluid.as_deref(), greedy, &mut part);
            budget.absorb(&part);
            c
        } else {
            None
        };
        if let Some(c) = covered.as_ref().filter(|c| c.optimal) {
            (Some(c.clone()), true)
        } else {
            // Two packers, the cheapest of all kept: the LP rounding is near-optimal for
            // large batches of small pods, the heuristic is cheap and better on a handful
            // of big ones. The heuristic goes first, with a share of its own, so a budget
            // too small for the rounding still improves the plan. When the rounding ran
            // first, 40 million units on 1,000 pods of the AWS catalogue gave back the
            // greedy plan, 30 times the price. With several free groups it matters twice:
            // one that finds no packing keeps every free claim.
            let mut part = budget.portion(HEURISTIC_SHARE);
            let heuristic = pack::heuristic(&inst, &mut part);
            budget.absorb(&part);
            let rounded = lpround::lp_round(&inst, budget);
            let best = [heuristic, rounded, covered]
                .into_iter()
                .flatten()
                .reduce(|a, b| {
                    if b.cost < a.cost - price_epsilon(a.cost) {
                        b
                    } else {
                        a
                    }
                });
            (best, false)
        }
    };
    // Fewer nodes at no extra price: whichever packer won, merge what one node can hold.
    let packing = packing.map(|mut p| {
        let mut part = budget.portion(MERGE_SHARE);
        let bins = lpround::undominated(&inst, &mut part).map(|kept| {
            let prices = pack::PriceOrder::among(types, kept);
            pack::merge(classes, &prices, dims, &p.bins, &mut part)
        });
        budget.absorb(&part);
        if let Some(bins) = bins {
            let cost = pack::cost_of(types, &bins);
            if cost <= p.cost * (1.0 + 1e-12) {
                p.bins = bins;
                p.cost = cost;
            }
        }
        p
    });
    (packing, proven_optimal)
}

/// The group's resource dimensions (every resource `requests` or a candidate's DaemonSets
/// ask for), each candidate as a bin type (its allocatable less its DaemonSet overhead, at
/// its price), and the price of each of the template's instance types (infinite for those
/// that are not candidates).
fn group_types(
    t: &Template<'_>,
    candidates: &[Candidate],
    requests: &[Resources],
) -> (Dims, Vec<BinType>, Vec<f64>) {
    let dims = Dims::new(
        requests.iter().chain(
            candidates
                .iter()
                .map(|c| &t.groups[t.group_of[c.it as usize]].overhead),
        ),
    );
    let types: Vec<BinType> = candidates
        .iter()
        .map(|c| {
            let i = c.it as usize;
            let alloc = dims.vector(&t.allocs[i]);
            let over = dims.vector(&t.groups[t.group_of[i]].overhead);
            BinType {
                cap: alloc.iter().zip(&over).map(|(a, o)| a - o).collect(),
                price: c.price,
            }
        })
        .collect();
    let mut price_of = vec![f64::INFINITY; t.its.len()];
    for c in candidates {
        price_of[c.it as usize] = c.price;
    }
    (dims, types, price_of)
}

/// A new claim of group `g` (template `t`) holding `content`, whose requests sum to
/// `load`, with `options` already checked; its hostname is the next optimised one.
fn new_claim(
    g: &Group,
    t: &Template<'_>,
    next_host: &mut u32,
    options: Vec<u32>,
    content: Vec<usize>,
    load: Resources,
) -> Claim {
    *next_host += 1;
    let hostname = format!("hostname-optimized-{:04}", *next_host);
    let mut reqs = g.reqs.clone();
    if let Ok(r) = Requirement::new(HOSTNAME, Operator::In, [hostname.as_str()]) {
        reqs.add(r);
    }
    Claim::planned(g.template, t, hostname, reqs, options, content, load)
}

/// Every candidate that holds `load` (the claim's requests as a vector over the group's
/// dimensions, which cover every resource its pods or DaemonSets request) plus its
/// DaemonSet overhead, or `None` when none does or minValues would not hold.
fn claim_options(
    s: &Scheduler<'_>,
    t: &Template<'_>,
    candidates: &[Candidate],
    types: &[BinType],
    reqs: &Requirements,
    load: &[i64],
) -> Option<Vec<u32>> {
    let options: Vec<u32> = candidates
        .iter()
        .zip(types)
        .filter(|(_, ty)| load.iter().zip(&ty.cap).all(|(l, c)| l <= c))
        .map(|(c, _)| c.it)
        .collect();
    if options.is_empty() {
        return None;
    }
    if reqs.has_min_values() {
        match check_min_values(&t.its, &options, reqs, s.options.min_values_policy) {
            Ok(None) => {}
            _ => return None,
        }
    }
    Some(options)
}

/// Value per unit of each dimension for the packing heuristic: the group's LP dual prices,
/// plus a small even share of the price so no resource (and no pod) is worth nothing. Also
/// returns the dual prices alone, which are feasible for every type (`Σ_d p_d · cap_td ≤
/// price_t`), when the LP was solved.
fn weights(
    n: usize,
    classes: &[Class],
    types: &[BinType],
    greedy: f64,
    budget: &mut Budget<'_>,
) -> (Vec<f64>, Option<Vec<f64>>) {
    let mut demand = vec![0.0f64; n];
    for c in classes {
        for (d, &r) in demand.iter_mut().zip(&c.req) {
            *d += r as f64 * f64::from(c.count);
        }
    }
    let active = demand.iter().filter(|&&d| d > 0.0).count().max(1) as f64;
    let columns = BoundColumn::of_types(types);
    let class = BoundClass {
        demand: demand.clone(),
        columns: (0..columns.len()).collect(),
    };
    let lp = bound::lower_bound(n, &[class], &[], &columns, budget);
    let scale = lp.as_ref().map_or(greedy, |b| b.value.max(greedy * 0.5));
    let share = if lp.is_some() { 0.01 } else { 1.0 };
    let weights = (0..n)
        .map(|d| {
            let dual = lp.as_ref().map_or(0.0, |b| b.prices[0][d]);
            let even = if demand[d] > 0.0 {
                share * scale / (active * demand[d])
            } else {
                0.0
            };
            dual + even
        })
        .collect();
    (weights, lp.and_then(|b| b.prices.into_iter().next()))
}

/// Value of one pod of each class for the packing heuristic: its resources at the LP's
/// resource prices.
fn values(classes: &[Class], weights: &[f64]) -> Vec<f64> {
    classes
        .iter()
        .map(|c| c.req.iter().zip(weights).map(|(&r, w)| r as f64 * w).sum())
        .collect()
}

/// Whether a pod tolerates a pool's taints, PreferNoSchedule ones included (they never
/// keep a pod off once its preferences are relaxed).
fn tolerates(taints: &[crate::taints::Taint], tolerations: &[Toleration]) -> bool {
    first_untolerated(taints, tolerations, false).is_none()
}
