//! Re-pack consolidation, karpenter-rs's own method beyond Karpenter's.
//!
//! Karpenter deletes nodes, or replaces one or several with at most one cheaper node, and
//! decides on its greedy scheduling simulation. Nodes that many small batches of pods filled
//! one after another stay as they are: no single node can go, and their pods together need
//! more than one new node. Re-packing takes the nodes that waste the most, plans their pods
//! again as provisioning plans them — the greedy pass, then the packing optimiser — onto
//! the other nodes' free capacity and M new NodeClaims, and replaces the N nodes with those
//! claims when that cuts their price by at least
//! [`RepackOptions::price_improvement_threshold`](crate::input::RepackOptions).
//!
//! It runs after Karpenter's methods and only when they found nothing, and only in a
//! settled cluster: while a pod of a node already going away (another command's, or one
//! being deleted) still needs a place, it waits, so two commands never plan the same pods.
//! Its candidates are consolidation's (no `do-not-disrupt`, PDBs that allow the evictions,
//! `consolidateAfter` passed, the `Underutilized` budget of each pool, `Balanced` scores as
//! for a multi-node move). A re-pack command guarantees:
//!
//! - every pod that must move has a place in the re-solved plan: on an existing node
//!   outside its pool's `consolidateAfter` window, or on a replacement;
//! - whichever of its instance types each replacement launches as, the replacements cost at
//!   most `(1 - threshold)` times the nodes they replace, and strictly less;
//! - with `SpotToSpotConsolidation` off, nodes that include a spot node are replaced only by
//!   on-demand capacity (upstream replaces no spot node by another without the gate).
//!
//! Like every consolidation command it waits for the validation delay, is simulated again
//! ([`revalidate`]) and must still plan the same replacements; they are launched and
//! initialized before the nodes are drained.

use crate::balanced::{ScoredMove, score_move};
use crate::candidate::Candidate;
use crate::command::{Command, Hold};
use crate::consolidation::{Catalog, allows, pin_to_spot, sort_by_price};
use crate::simulate::Simulator;
use crate::validate::ValidationFailure;
use karpenter_scheduling::labels::{
    CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, HOSTNAME, NODEPOOL, ZONE,
};
use karpenter_scheduling::model::{Node, NodeState};
use karpenter_scheduling::plan::NewNodeClaim;
use karpenter_scheduling::resources::Resources;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How many windows of the ranking one pass tries (see [`search`]).
pub(crate) const WINDOWS: usize = 3;

/// A re-pack that works.
#[derive(Debug, Clone)]
pub(crate) struct Proposal {
    /// The NodeClaims to launch, each narrowed to the options the price allows.
    pub replacements: Vec<NewNodeClaim>,
    /// The candidates' price minus the replacements' cheapest options', per hour.
    pub savings: f64,
    /// The replacements' price per hour if each launched as its dearest option.
    pub worst_price: f64,
}

/// The outcome of [`search`].
pub(crate) struct Search<'c> {
    /// The nodes to replace and how, if a re-pack was found and approved.
    pub found: Option<(Vec<&'c Candidate>, Proposal)>,
    /// The simulation allowance ran out before the search ended.
    pub out_of_budget: bool,
}

/// The candidates worth re-packing, most wasteful first. A node's waste is its price minus
/// what its pods would cost spread fluidly over the cheapest instance shape its pool could
/// launch for them ([`fluid_price`]); nodes whose waste is below `threshold` of their own
/// price (already packed about as cheaply as their pods allow) are left out. Ties by name.
pub(crate) fn rank<'c>(
    cands: Vec<&'c Candidate>,
    threshold: f64,
    spot_to_spot: bool,
    catalog: &Catalog<'_>,
) -> Vec<&'c Candidate> {
    let mut shapes: BTreeMap<(&str, bool), Vec<(Resources, f64)>> = BTreeMap::new();
    let mut scored: Vec<(f64, &'c Candidate)> = cands
        .into_iter()
        .filter_map(|c| {
            // A spot node without the gate may only be replaced on demand.
            let spot = spot_to_spot || c.capacity_type.as_deref() != Some(CAPACITY_TYPE_SPOT);
            let pool_shapes = shapes
                .entry((c.node_pool.as_str(), spot))
                .or_insert_with(|| pool_shapes(catalog, &c.node_pool, spot));
            let mut need = c.pod_requests.clone();
            // As the solver counts pods: one slot each.
            need.pods = i64::try_from(c.pods.len()).unwrap_or(i64::MAX);
            let waste = c.price - fluid_price(pool_shapes, &need);
            (waste > 0.0 && waste >= threshold * c.price).then_some((waste, c))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.node.cmp(&b.1.node)));
    scored.into_iter().map(|(_, c)| c).collect()
}

/// Each instance type of `pool` with its allocatable and its cheapest available offering
/// the pool's requirements allow (capacity type and zone; spot only when `spot`).
fn pool_shapes(catalog: &Catalog<'_>, pool: &str, spot: bool) -> Vec<(Resources, f64)> {
    let Some(p) = catalog.pool(pool) else {
        return Vec::new();
    };
    let allowed = |key: &str, value: &str| p.requirements.get(key).is_none_or(|r| r.has(value));
    p.instance_types
        .iter()
        .filter_map(|it| {
            let price = it
                .offerings
                .iter()
                .filter(|o| {
                    o.available
                        && o.price.is_finite()
                        && (spot || o.capacity_type != CAPACITY_TYPE_SPOT)
                        && allowed(CAPACITY_TYPE, &o.capacity_type)
                        && allowed(ZONE, &o.zone)
                })
                .map(|o| o.price)
                .reduce(f64::min)?;
            Some((it.allocatable(), price))
        })
        .collect()
}

/// What `need` would cost per hour spread fluidly over the cheapest of `shapes` for it: the
/// least, over the shapes, of the price times the largest share of the allocatable that
/// `need` takes. Infinite when no shape has room for some resource of `need`. An estimate
/// for ranking nodes, not a bound on what a packing of several nodes' pods costs.
fn fluid_price(shapes: &[(Resources, f64)], need: &Resources) -> f64 {
    shapes
        .iter()
        .map(|(alloc, price)| {
            let share = need
                .iter()
                .map(|(name, amount)| match alloc.get(name) {
                    a if a > 0 => amount as f64 / a as f64,
                    _ => f64::INFINITY,
                })
                .fold(0.0, f64::max);
            price * share
        })
        .fold(f64::INFINITY, f64::min)
}

/// Looks for the largest prefix of `list` (ranked by [`rank`], within budgets and PDBs)
/// that re-packs past the threshold and that `approve` (the Balanced scores) lets through.
/// It starts from the whole list; a set whose pod cannot be placed loses that pod's node,
/// any other failure halves the set. Each try is one scheduling simulation, until the
/// simulator's allowance runs out.
pub(crate) fn search<'c>(
    sim: &mut Simulator,
    list: &[&'c Candidate],
    threshold: f64,
    spot_to_spot: bool,
    catalog: &Catalog<'_>,
    approve: &mut dyn FnMut(&[&'c Candidate], &Proposal) -> bool,
) -> Search<'c> {
    let mut set: Vec<&'c Candidate> = list.to_vec();
    while !set.is_empty() {
        let attempt = evaluate(sim, &set, threshold, spot_to_spot, catalog);
        let stuck = match attempt {
            None => {
                return Search {
                    found: None,
                    out_of_budget: true,
                };
            }
            Some(Ok(p)) if approve(&set, &p) => {
                return Search {
                    found: Some((set, p)),
                    out_of_budget: false,
                };
            }
            Some(Err(Hold::WouldNotFit { pod, .. })) => {
                // That pod's node stays; the others may still re-pack.
                match set.iter().position(|c| c.pods.binary_search(&pod).is_ok()) {
                    Some(i) => {
                        set.remove(i);
                        false
                    }
                    None => true,
                }
            }
            Some(_) => {
                if set.len() == 1 {
                    true
                } else {
                    set.truncate(set.len().div_ceil(2));
                    false
                }
            }
        };
        if stuck {
            break;
        }
    }
    Search {
        found: None,
        out_of_budget: false,
    }
}

/// Simulates re-packing `set`, prices what the plan launches and checks that first fit
/// finds it (at most three simulations). `None` when the simulation allowance is spent.
fn evaluate(
    sim: &mut Simulator,
    set: &[&Candidate],
    threshold: f64,
    spot_to_spot: bool,
    catalog: &Catalog<'_>,
) -> Option<Result<Proposal, Hold>> {
    let source: f64 = set.iter().map(|c| c.price).sum();
    // No simulation when even the cheapest new capacity for what free capacity cannot hold
    // would not save enough.
    if let Some(lb) = sim.new_capacity_lower_bound(set)
        && lb > source * (1.0 - threshold)
    {
        return Some(Err(Hold::NotCheaper));
    }
    let outcome = sim.simulate_repack(set)?;
    if let Some(f) = outcome.failure {
        return Some(Err(f));
    }
    let proposal = match price(outcome.claims, set, threshold, spot_to_spot, catalog) {
        Ok(p) => p,
        Err(h) => return Some(Err(h)),
    };
    first_fit(sim, set, proposal, threshold, spot_to_spot, catalog)
}

/// The optimiser packs tightly, and a scheduler placing the evicted pods one by one, first
/// fit, may not find its packing: a pod left over would make provisioning launch a node
/// the move did not pay for. So the pods are placed first fit on the other nodes and the
/// replacements (each as the least allocatable of its options, with the labels all of them
/// share), as the provisioner and the simulated scheduler place pods on existing nodes,
/// once with the replacements after every other node and once before (their names, which
/// decide where first fit tries them, are not known yet). What first fit leaves over gets
/// the greedy's new claims and the whole is priced and checked again, at most twice.
fn first_fit(
    sim: &mut Simulator,
    set: &[&Candidate],
    mut proposal: Proposal,
    threshold: f64,
    spot_to_spot: bool,
    catalog: &Catalog<'_>,
) -> Option<Result<Proposal, Hold>> {
    const REPAIRS: usize = 2;
    let mut repairs = 0;
    loop {
        let mut left_over = Vec::new();
        for last in [true, false] {
            let nodes = stand_ins(&proposal.replacements, catalog, last);
            let outcome = sim.simulate_first_fit(set, nodes)?;
            if let Some(f) = outcome.failure {
                return Some(Err(f));
            }
            if !outcome.claims.is_empty() {
                left_over = outcome.claims;
                break;
            }
        }
        if left_over.is_empty() {
            return Some(Ok(proposal));
        }
        if repairs == REPAIRS {
            return Some(Err(Hold::NeedsMultipleNodes {
                count: proposal.replacements.len() + left_over.len(),
            }));
        }
        repairs += 1;
        let mut claims = proposal.replacements;
        claims.extend(left_over);
        proposal = match price(claims, set, threshold, spot_to_spot, catalog) {
            Ok(p) => p,
            Err(h) => return Some(Err(h)),
        };
    }
}

/// Ready nodes standing for `claims` as they will be, named to come after (`last`) or
/// before every node of the cluster in the solver's order: each has the least, resource by
/// resource, of its options' allocatable (whichever launches has at least that), the
/// claim's single-valued requirements and the labels every option's instance type shares as
/// labels, and its pool's labels and taints.
fn stand_ins(claims: &[NewNodeClaim], catalog: &Catalog<'_>, last: bool) -> Vec<Node> {
    // Node names are lowercase letters, digits, `-` and `.`: `~` sorts after them, `!`
    // before.
    let prefix = if last { '~' } else { '!' };
    claims
        .iter()
        .enumerate()
        .map(|(i, claim)| {
            let name = format!("{prefix}replacement-{i:04}");
            let mut allocatable: Option<Resources> = None;
            let mut shared: Option<BTreeMap<String, String>> = None;
            for o in claim.instance_type_options.iter() {
                let Some(it) = catalog.instance_type(&claim.node_pool, &o.name) else {
                    continue;
                };
                let alloc = it.allocatable();
                allocatable = Some(match allocatable {
                    None => alloc,
                    Some(a) => least(&a, &alloc),
                });
                let mut labels = it.requirements.single_valued_labels();
                labels.insert(ZONE.to_owned(), o.zone.to_string());
                labels.insert(CAPACITY_TYPE.to_owned(), o.capacity_type.to_string());
                shared = Some(match shared {
                    None => labels,
                    Some(mut s) => {
                        s.retain(|k, v| labels.get(k) == Some(v));
                        s
                    }
                });
            }
            let mut labels = shared.unwrap_or_default();
            labels.extend(claim.requirements.single_valued_labels());
            labels.insert(HOSTNAME.to_owned(), name.clone());
            labels.insert(NODEPOOL.to_owned(), claim.node_pool.clone());
            let pool = catalog.pool(&claim.node_pool);
            if let Some(p) = pool {
                labels.extend(p.labels.clone());
            }
            let allocatable = allocatable.unwrap_or_default();
            Node {
                name,
                node_pool: Some(claim.node_pool.clone()),
                labels,
                taints: pool.map(|p| p.taints.clone()).unwrap_or_default(),
                capacity: allocatable.clone(),
                allocatable,
                state: NodeState::Ready,
                price: claim.price,
                ..Node::default()
            }
        })
        .collect()
}

/// Resource by resource, the smaller of `a` and `b` (a resource absent from either is 0).
fn least(a: &Resources, b: &Resources) -> Resources {
    let mut out = Resources::default();
    for (name, amount) in a.iter() {
        out.set(name, amount.min(b.get(name)));
    }
    out
}

/// Decides what re-packing `cands` into `claims` may launch, and whether it saves enough.
///
/// Each claim's options are sorted by price. Nodes that include a spot node are replaced
/// only by on-demand capacity unless `spot_to_spot`; otherwise a claim that may be spot or
/// on-demand is pinned to spot, as upstream pins its replacement. Then, with `allowed` =
/// `(1 - threshold)` × the candidates' price, the claims' cheapest options must cost at most
/// `allowed` and strictly less than the candidates; the room left up to `allowed` is shared
/// among the claims in proportion to their cheapest price, and each keeps only the options
/// within its share and within `1 + threshold` times its cheapest, so the replacements
/// never cost more than `allowed` whatever they launch as, and the node a replacement
/// becomes is not worth re-packing again. A claim whose remaining options miss a
/// `minValues` fails the move. One node replaced by at most one is left to single-node
/// consolidation.
pub(crate) fn price(
    mut claims: Vec<NewNodeClaim>,
    cands: &[&Candidate],
    threshold: f64,
    spot_to_spot: bool,
    catalog: &Catalog<'_>,
) -> Result<Proposal, Hold> {
    let source: f64 = cands.iter().map(|c| c.price).sum();
    let any_spot = cands
        .iter()
        .any(|c| c.capacity_type.as_deref() == Some(CAPACITY_TYPE_SPOT));
    for claim in &mut claims {
        if any_spot && !spot_to_spot {
            if !allows(claim, CAPACITY_TYPE_ON_DEMAND) {
                return Err(Hold::SpotToSpotDisabled);
            }
            catalog.restrict_capacity_type(claim, CAPACITY_TYPE_ON_DEMAND);
        } else {
            sort_by_price(claim);
            pin_to_spot(claim);
        }
        if claim.instance_type_options.is_empty() {
            return Err(if any_spot && !spot_to_spot {
                Hold::SpotToSpotDisabled
            } else {
                Hold::NotCheaper
            });
        }
    }
    // One node for at most one is single-node consolidation's move, under Karpenter's rules
    // (spot-to-spot flexibility among them); it decided already.
    if cands.len() == 1 && claims.len() <= 1 {
        return Err(Hold::NotCheaper);
    }
    let cheapest_of = |c: &NewNodeClaim| c.instance_type_options.first().map_or(0.0, |o| o.price);
    let cheapest: f64 = claims.iter().map(cheapest_of).sum();
    let allowed = source * (1.0 - threshold);
    if !(cheapest < source && cheapest <= allowed) {
        return Err(Hold::NotCheaper);
    }
    let room = allowed - cheapest;
    let count = claims.len() as f64;
    let mut worst_price = 0.0;
    for claim in &mut claims {
        let own = cheapest_of(claim);
        let share = if cheapest > 0.0 {
            own / cheapest
        } else {
            1.0 / count
        };
        // At most `1 + threshold` times its cheapest option, too: whatever it launches as,
        // re-packing its pods again cannot save the threshold ((1 + t)(1 - t) < 1), so a
        // replacement is not replaced at once by its own cheapest option.
        let ceiling = (own + room * share).min(own * (1.0 + threshold));
        Arc::make_mut(&mut claim.instance_type_options).retain(|o| o.price <= ceiling);
        if let Some(key) = catalog.min_values_violation(claim) {
            return Err(Hold::MinValues { key });
        }
        claim.price = own;
        worst_price += claim
            .instance_type_options
            .iter()
            .map(|o| o.price)
            .fold(own, f64::max);
    }
    // The shares add up to the room; guard against rounding all the same.
    if !(worst_price < source && worst_price <= allowed * (1.0 + 1e-12)) {
        return Err(Hold::NotCheaper);
    }
    Ok(Proposal {
        replacements: claims,
        savings: source - cheapest,
        worst_price,
    })
}

/// Whether a re-pack `scored` as a move is worth the evictions it causes: in every pool it
/// touches, the share of the pool's price it saves is at least `min_score` times the share
/// of the pool's disruption cost it causes (the `Balanced` score, whatever the pool's
/// policy). A replacement that saves a tenth of a few nodes' price by evicting most of a
/// pool's pods would otherwise be taken, and the scheduler's own placement of the evicted
/// pods often leaves its replacements to be consolidated again minutes later.
pub(crate) fn worth_its_churn(scored: &ScoredMove, min_score: f64) -> bool {
    min_score <= 0.0
        || scored
            .pools
            .iter()
            .all(|p| score_move(p.savings, p.disruption_cost, p.totals, 1).score() >= min_score)
}

/// Re-checks a re-pack command after the validation delay: the same simulation on fresh
/// state (`current` are the candidates as they are now) must still place every pod, still
/// save past `threshold`, and plan as many replacements, each of the command's within the
/// options of a distinct fresh one (upstream's subset rule for its single replacement).
pub(crate) fn revalidate(
    sim: &mut Simulator,
    current: &[&Candidate],
    cmd: &Command,
    threshold: f64,
    spot_to_spot: bool,
    catalog: &Catalog<'_>,
) -> Result<(), ValidationFailure> {
    let changed = |detail: String| ValidationFailure::Scheduling { detail };
    let fresh = match evaluate(sim, current, threshold, spot_to_spot, catalog) {
        None => return Err(ValidationFailure::NoSimulationBudget),
        Some(Ok(p)) => p,
        Some(Err(Hold::NotCheaper)) => return Err(ValidationFailure::NotCheaper),
        Some(Err(h)) => return Err(changed(h.to_string())),
    };
    if fresh.replacements.len() != cmd.replacements.len() {
        return Err(changed(format!(
            "{} new nodes needed where the command planned {}",
            fresh.replacements.len(),
            cmd.replacements.len()
        )));
    }
    let mut used = vec![false; fresh.replacements.len()];
    for planned in &cmd.replacements {
        let matched = fresh.replacements.iter().enumerate().position(|(i, r)| {
            !used[i]
                && r.node_pool == planned.node_pool
                && planned
                    .instance_type_options
                    .iter()
                    .all(|o| r.instance_type_options.iter().any(|f| f.name == o.name))
        });
        match matched {
            Some(i) => used[i] = true,
            None => {
                return Err(changed(
                    "the replacements' instance types no longer fit".to_owned(),
                ));
            }
        }
    }
    Ok(())
}
