//! Consolidation decisions (upstream's `computeConsolidation`, spot-to-spot rules and
//! `filterOutSameInstanceType`).

use crate::candidate::Candidate;
use crate::command::Hold;
use crate::input::MIN_SPOT_TO_SPOT_OPTIONS;
use crate::simulate::Simulator;
use karpenter_scheduling::labels::{
    CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, ZONE,
};
use karpenter_scheduling::model::{InstanceType, NodePool, Snapshot};
use karpenter_scheduling::plan::NewNodeClaim;
use karpenter_scheduling::requirements::{Operator, Requirement};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A consolidation that works: delete the candidates, or replace them with one cheaper node.
#[derive(Debug, Clone)]
pub(crate) struct Proposal {
    /// The single replacement, if any.
    pub replacement: Option<NewNodeClaim>,
    /// Candidates' price minus the replacement's.
    pub savings: f64,
}

/// Result of one attempt: a proposal, a reason it failed, or `None` when the work budget ran
/// out.
pub(crate) type Attempt = Option<Result<Proposal, Hold>>;

/// NodePools and their instance types by pool and name, for `minValues` checks on filtered
/// options and for what a replacement will be.
pub(crate) struct Catalog<'a> {
    types: BTreeMap<(&'a str, &'a str), &'a Arc<InstanceType>>,
    pools: BTreeMap<&'a str, &'a NodePool>,
}

impl<'a> Catalog<'a> {
    pub fn new(snap: &'a Snapshot) -> Self {
        let types = snap
            .node_pools
            .iter()
            .flat_map(|p| {
                p.instance_types
                    .iter()
                    .map(move |it| ((p.name.as_str(), it.name.as_str()), it))
            })
            .collect();
        let pools = snap
            .node_pools
            .iter()
            .map(|p| (p.name.as_str(), p))
            .collect();
        Self { types, pools }
    }

    /// The instance type `name` of `pool`.
    pub(crate) fn instance_type(&self, pool: &str, name: &str) -> Option<&'a Arc<InstanceType>> {
        self.types.get(&(pool, name)).copied()
    }

    /// The NodePool `name`.
    pub(crate) fn pool(&self, name: &str) -> Option<&'a NodePool> {
        self.pools.get(name).copied()
    }

    /// The first requirement with `minValues` that `claim`'s options no longer meet.
    pub(crate) fn min_values_violation(&self, claim: &NewNodeClaim) -> Option<String> {
        for req in claim.requirements.iter() {
            let Some(min) = req.min_values() else {
                continue;
            };
            let mut values = BTreeSet::new();
            for o in claim.instance_type_options.iter() {
                if let Some(it) = self.types.get(&(claim.node_pool.as_str(), o.name.as_ref()))
                    && let Some(r) = it.requirements.get(req.key())
                {
                    values.extend(r.values().filter(|v| req.has(v)).map(str::to_owned));
                }
            }
            if values.len() < min as usize {
                return Some(req.key().to_owned());
            }
        }
        None
    }
}

impl Catalog<'_> {
    /// Narrows `claim` to `capacity_type`: its requirement, and each option priced at its
    /// type's cheapest available offering of that capacity type in a zone the claim allows
    /// (an option's price names only its cheapest offering, which may be of another capacity
    /// type); options without such an offering are dropped. Cheapest first, ties by name.
    pub(crate) fn restrict_capacity_type(&self, claim: &mut NewNodeClaim, capacity_type: &str) {
        if let Ok(r) = Requirement::new(CAPACITY_TYPE, Operator::In, [capacity_type]) {
            claim.requirements.add(r);
        }
        let zones = claim.requirements.get(ZONE);
        let pool = claim.node_pool.as_str();
        let target: Arc<str> = Arc::from(capacity_type);
        let options = Arc::make_mut(&mut claim.instance_type_options);
        options.retain_mut(|o| {
            if &*o.capacity_type == capacity_type {
                return true;
            }
            let Some(it) = self.types.get(&(pool, o.name.as_ref())) else {
                return false;
            };
            let cheapest = it
                .offerings
                .iter()
                .filter(|f| {
                    f.available
                        && f.capacity_type == capacity_type
                        && f.price.is_finite()
                        && zones.is_none_or(|z| z.has(&f.zone))
                })
                .min_by(|a, b| {
                    a.price
                        .total_cmp(&b.price)
                        .then_with(|| a.zone.cmp(&b.zone))
                });
            match cheapest {
                Some(f) => {
                    o.price = f.price;
                    o.zone = Arc::from(f.zone.as_str());
                    o.capacity_type = target.clone();
                    true
                }
                None => false,
            }
        });
        sort_by_price(claim);
    }
}

/// Sorts `claim`'s options cheapest first, ties by name (upstream's `OrderByPrice`).
pub(crate) fn sort_by_price(claim: &mut NewNodeClaim) {
    Arc::make_mut(&mut claim.instance_type_options).sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// Keeps only options strictly cheaper than `max_price`, then checks `minValues`.
fn filter_by_price(
    claim: &mut NewNodeClaim,
    max_price: f64,
    catalog: &Catalog<'_>,
) -> Result<(), Hold> {
    Arc::make_mut(&mut claim.instance_type_options).retain(|o| o.price < max_price);
    if claim.instance_type_options.is_empty() {
        return Err(Hold::NotCheaper);
    }
    if let Some(key) = catalog.min_values_violation(claim) {
        return Err(Hold::MinValues { key });
    }
    Ok(())
}

fn restrict_to_spot(claim: &mut NewNodeClaim) {
    if let Ok(r) = Requirement::new(CAPACITY_TYPE, Operator::In, [CAPACITY_TYPE_SPOT]) {
        claim.requirements.add(r);
    }
    Arc::make_mut(&mut claim.instance_type_options)
        .retain(|o| &*o.capacity_type == CAPACITY_TYPE_SPOT);
}

/// Upstream's pin: a claim that may launch as spot or on-demand was priced assuming its
/// cheap (spot) offerings launch, so it is narrowed to spot and a fallback to on-demand
/// cannot make the move more expensive (the launch fails instead).
pub(crate) fn pin_to_spot(claim: &mut NewNodeClaim) {
    if allows(claim, CAPACITY_TYPE_SPOT)
        && allows(claim, CAPACITY_TYPE_ON_DEMAND)
        && claim
            .instance_type_options
            .iter()
            .any(|o| &*o.capacity_type == CAPACITY_TYPE_SPOT)
    {
        restrict_to_spot(claim);
    }
}

/// Whether `claim`'s requirements admit `capacity_type`.
pub(crate) fn allows(claim: &NewNodeClaim, capacity_type: &str) -> bool {
    claim
        .requirements
        .get(CAPACITY_TYPE)
        .is_none_or(|r| r.has(capacity_type))
}

/// Upstream's `filterOutSameInstanceType`: when a multi-node replacement could be one of the
/// candidates' own instance types, it must be cheaper than the cheapest such candidate, or
/// deleting the others alone would do.
fn filter_out_same_instance_type(
    claim: &mut NewNodeClaim,
    cands: &[&Candidate],
    catalog: &Catalog<'_>,
) -> Result<(), Hold> {
    let mut prices: BTreeMap<&str, f64> = BTreeMap::new();
    for c in cands {
        if let Some(it) = c.instance_type.as_deref() {
            let e = prices.entry(it).or_insert(f64::MAX);
            *e = e.min(c.price);
        }
    }
    let max_price = claim
        .instance_type_options
        .iter()
        .filter_map(|o| prices.get(o.name.as_ref()).copied())
        .fold(f64::MAX, f64::min);
    filter_by_price(claim, max_price, catalog)
}

/// Simulates consolidating `cands` together and decides as upstream does: every pod placed
/// and no new node ⇒ delete; exactly one new node with a strictly cheaper option ⇒ replace
/// (spot-to-spot only when enabled, and for a single spot node only with ≥ 15 cheaper
/// options, launching only the 15 cheapest); anything else fails with the reason.
pub(crate) fn compute(
    sim: &mut Simulator,
    cands: &[&Candidate],
    spot_to_spot: bool,
    catalog: &Catalog<'_>,
) -> Attempt {
    let source: f64 = cands.iter().map(|c| c.price).sum();
    if let Some(lb) = sim.replacement_lower_bound(cands)
        && lb >= source
    {
        return Some(Err(Hold::NotCheaper));
    }
    let outcome = sim.simulate_consolidation(cands)?;
    if let Some(f) = outcome.failure {
        return Some(Err(f));
    }
    let mut claims = outcome.claims;
    if claims.is_empty() {
        return Some(Ok(Proposal {
            replacement: None,
            savings: source,
        }));
    }
    if claims.len() > 1 {
        return Some(Err(Hold::NeedsMultipleNodes {
            count: claims.len(),
        }));
    }
    let mut claim = claims.remove(0);
    sort_by_price(&mut claim);
    let all_spot = cands
        .iter()
        .all(|c| c.capacity_type.as_deref() == Some(CAPACITY_TYPE_SPOT));
    let result = if all_spot && allows(&claim, CAPACITY_TYPE_SPOT) {
        spot_to_spot_filter(&mut claim, cands, source, spot_to_spot, catalog)
    } else {
        filter_by_price(&mut claim, source, catalog).map(|()| pin_to_spot(&mut claim))
    };
    if let Err(h) = result {
        return Some(Err(h));
    }
    if cands.len() > 1
        && let Err(h) = filter_out_same_instance_type(&mut claim, cands, catalog)
    {
        return Some(Err(h));
    }
    let Some(best) = claim.instance_type_options.first() else {
        return Some(Err(Hold::NotCheaper));
    };
    claim.price = best.price;
    if claim.price >= source {
        return Some(Err(Hold::NotCheaper));
    }
    Some(Ok(Proposal {
        savings: source - claim.price,
        replacement: Some(claim),
    }))
}

fn spot_to_spot_filter(
    claim: &mut NewNodeClaim,
    cands: &[&Candidate],
    source: f64,
    enabled: bool,
    catalog: &Catalog<'_>,
) -> Result<(), Hold> {
    if !enabled {
        return Err(Hold::SpotToSpotDisabled);
    }
    restrict_to_spot(claim);
    filter_by_price(claim, source, catalog)?;
    if cands.len() > 1 {
        return Ok(());
    }
    let n = claim.instance_type_options.len();
    if n < MIN_SPOT_TO_SPOT_OPTIONS {
        return Err(Hold::SpotToSpotTooFewOptions { options: n });
    }
    // Launch only the cheapest options (more when minValues needs them), so the instance we
    // get is always among them and the next pass does not immediately consolidate it again.
    let mut keep = MIN_SPOT_TO_SPOT_OPTIONS;
    while keep < n {
        let mut probe = claim.clone();
        Arc::make_mut(&mut probe.instance_type_options).truncate(keep);
        if catalog.min_values_violation(&probe).is_none() {
            break;
        }
        keep += 1;
    }
    Arc::make_mut(&mut claim.instance_type_options).truncate(keep);
    Ok(())
}
