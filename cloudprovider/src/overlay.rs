//! How NodeOverlays change the instance types a NodePool offers, before anything schedules
//! on them (Karpenter's NodeOverlay controller, instance-type store and cloud-provider
//! decorator, as one pure function of the overlays and the provider's instance types).
//!
//! [`evaluate`] reads every overlay against every NodePool's instance types and decides,
//! per overlay, whether it applies ([`Verdict`]); [`Evaluation::apply`] then rewrites a
//! pool's instance types. The rules are upstream's:
//! - An overlay matches an instance type of a pool when its requirements are compatible
//!   with the type's requirements plus `karpenter.sh/nodepool` and the pool's template
//!   labels (a key the overlay names must be defined there, except for NotIn and
//!   DoesNotExist); within a matching type, the offerings (zone, capacity type) its
//!   requirements admit are the ones it prices.
//! - Overlays are taken by weight, highest first; among equal weights the name that sorts
//!   later comes first. The first overlay to set an offering's price, or a resource of a
//!   type's capacity, wins; later (lower-weight) ones fill only what is still unset.
//! - An overlay whose weight equals that of the last overlay that touched the same offering
//!   price, or the same capacity resource of a type, conflicts: it is applied nowhere (not
//!   even to the pools where it does not conflict) and its `ValidationSucceeded` condition
//!   is `False` with reason `Conflict`. An overlay that fails validation is likewise not
//!   applied (reason `RuntimeValidation`). Scheduling carries on either way (upstream's
//!   "fail open").
//! - `price` replaces the offering's price; `priceAdjustment` adds an amount (`+0.5`,
//!   `-0.25`) or a percentage (`+10%`, `-15%`); a result below 0 is 0. `capacity` sets
//!   extended resources on the whole instance type when any of its offerings matches.
//!
//! Pure and deterministic: no clock, overlays and pools in a fixed order.

use crate::NodePool;
use crate::v1::{ConditionStatus, StatusConditions};
use crate::v1alpha1::{NODEOVERLAY_CONDITION_VALIDATION_SUCCEEDED, NodeOverlay};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_scheduling::model::{InstanceType, Offering};
use karpenter_scheduling::requirements::{NodeSelectorRequirement, Operator};
use karpenter_scheduling::{Requirement, Requirements, Resources, labels};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// `spec.price`: a non-negative decimal.
pub const PRICE_PATTERN: &str = r"^\d+(\.\d+)?$";
/// `spec.priceAdjustment`: a signed amount, `+N%`, or `-N%` of at most 100.
pub const PRICE_ADJUSTMENT_PATTERN: &str =
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$";

/// NodeClaim annotation: some instance type among the claim's options has an overlaid price.
pub const PRICE_OVERLAY_APPLIED_ANNOTATION: &str = "karpenter.sh/price-overlay-applied";
/// NodeClaim annotation: some instance type among the claim's options has overlaid capacity.
pub const CAPACITY_OVERLAY_APPLIED_ANNOTATION: &str = "karpenter.sh/capacity-overlay-applied";

/// Condition reason of an overlay that overlaps another of the same weight.
pub const REASON_CONFLICT: &str = "Conflict";
/// Condition reason of an overlay that fails validation.
pub const REASON_RUNTIME_VALIDATION: &str = "RuntimeValidation";

/// A price change, parsed from `price` or `priceAdjustment`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PriceChange {
    /// `price: "5.00"`: the new price.
    Set(f64),
    /// `priceAdjustment: "+0.5"` / `"-0.25"`: an amount added.
    Add(f64),
    /// `priceAdjustment: "+10%"` / `"-15%"`: a percentage of the price added.
    Percent(f64),
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `\d*\.?\d+`.
fn is_unsigned_decimal(s: &str) -> bool {
    match s.split_once('.') {
        Some((int, frac)) => (int.is_empty() || all_digits(int)) && all_digits(frac),
        None => all_digits(s),
    }
}

impl PriceChange {
    /// Parses `spec.price` ([`PRICE_PATTERN`]); `None` when it does not match.
    pub fn parse_price(text: &str) -> Option<Self> {
        let ok = match text.split_once('.') {
            Some((int, frac)) => all_digits(int) && all_digits(frac),
            None => all_digits(text),
        };
        if !ok {
            return None;
        }
        text.parse().ok().map(Self::Set)
    }

    /// Parses `spec.priceAdjustment` ([`PRICE_ADJUSTMENT_PATTERN`]); `None` when it does
    /// not match. A decrease by percentage is at most 100%.
    pub fn parse_adjustment(text: &str) -> Option<Self> {
        let (negative, rest) = match text.as_bytes().first()? {
            b'+' => (false, &text[1..]),
            b'-' => (true, &text[1..]),
            _ => return None,
        };
        let value = |s: &str| s.parse::<f64>().ok().map(|v| if negative { -v } else { v });
        match rest.strip_suffix('%') {
            None => is_unsigned_decimal(rest)
                .then(|| value(rest))
                .flatten()
                .map(Self::Add),
            Some(pct) if !negative => is_unsigned_decimal(pct)
                .then(|| value(pct))
                .flatten()
                .map(Self::Percent),
            Some(pct) => {
                let (int, frac) = pct.split_once('.').unwrap_or((pct, "1"));
                let ok = pct == "100" || (all_digits(int) && int.len() <= 2 && all_digits(frac));
                ok.then(|| value(pct)).flatten().map(Self::Percent)
            }
        }
    }

    /// The price after the change, never below 0 (computed as upstream does, in `f64`).
    pub fn apply(self, price: f64) -> f64 {
        let adjusted = match self {
            Self::Set(p) => return p,
            Self::Add(d) => price + d,
            Self::Percent(p) => price * (1.0 + p / 100.0),
        };
        if adjusted >= 0.0 { adjusted } else { 0.0 }
    }
}

/// What became of one overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Valid and free of conflicts: applied wherever it matches.
    Applied,
    /// Failed validation; the message says why.
    Invalid(String),
    /// Overlaps an overlay of the same weight; the message names it and where.
    Conflict(String),
}

impl Verdict {
    /// Why the overlay `name` is not applied, as one line for logs and warnings
    /// (`NodeOverlay "a" is not applied: it conflicts with …`); `None` when it is applied.
    pub fn not_applied(&self, name: &str) -> Option<String> {
        match self {
            Self::Applied => None,
            Self::Invalid(why) => Some(format!("NodeOverlay {name:?} is not applied: {why}")),
            Self::Conflict(why) => Some(format!("NodeOverlay {name:?} is not applied: it {why}")),
        }
    }

    /// Writes the verdict as the overlay's `ValidationSucceeded` condition (and the `Ready`
    /// roll-up); returns whether the status changed. `now` is used only on a transition.
    pub fn set_condition(&self, overlay: &mut NodeOverlay, now: Time) -> bool {
        let t = NODEOVERLAY_CONDITION_VALIDATION_SUCCEEDED;
        match self {
            Self::Applied => overlay.set_true(t, now),
            Self::Invalid(m) => {
                overlay.set_condition(t, ConditionStatus::False, REASON_RUNTIME_VALIDATION, m, now)
            }
            Self::Conflict(m) => {
                overlay.set_condition(t, ConditionStatus::False, REASON_CONFLICT, m, now)
            }
        }
    }
}

/// Where the last (lowest-weight so far) overlay to touch something came from.
#[derive(Debug, Clone)]
struct Touch {
    weight: i32,
    overlay: String,
}

#[derive(Debug, Clone)]
struct PriceUpdate {
    change: PriceChange,
    last: Touch,
}

#[derive(Debug, Clone, Default)]
struct CapacityUpdate {
    /// Merged resources: the first (highest-weight) overlay to name a resource sets it.
    resources: BTreeMap<String, i64>,
    /// The resources of the last overlay applied to the type, the only ones a same-weight
    /// overlay is checked against (upstream keeps only those).
    last_resources: BTreeSet<String>,
    last: Option<Touch>,
}

#[derive(Debug, Clone, Default)]
struct TypeUpdate {
    /// By offering (zone, capacity type).
    prices: BTreeMap<(String, String), PriceUpdate>,
    capacity: CapacityUpdate,
}

/// The outcome of [`evaluate`]: each overlay's verdict and the per-pool changes to apply.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    /// Pool → instance type → update.
    updates: BTreeMap<String, BTreeMap<String, TypeUpdate>>,
    evaluated: BTreeSet<String>,
    verdicts: BTreeMap<String, Verdict>,
}

/// A pool's instance types cannot be overlaid because the pool was not part of the
/// evaluation (its instance types were not known then); upstream makes such a pool wait.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nodepool {0:?} is awaiting NodeOverlay evaluation")]
pub struct UnevaluatedNodePool(pub String);

/// An overlay ready to match: its requirements in the scheduler's algebra, its parsed
/// price change and capacity.
struct Prepared<'a> {
    overlay: &'a NodeOverlay,
    requirements: Requirements,
    price: Option<PriceChange>,
    capacity: BTreeMap<String, i64>,
}

fn prepare(overlay: &NodeOverlay) -> Result<Prepared<'_>, String> {
    overlay.validate().map_err(|e| e.to_string())?;
    let selectors: Vec<NodeSelectorRequirement> = overlay
        .spec
        .requirements
        .iter()
        .map(|r| r.with_min_values().to_model())
        .collect();
    let requirements = Requirements::from_node_selector(&selectors).map_err(|e| e.to_string())?;
    let price = match (&overlay.spec.price, &overlay.spec.price_adjustment) {
        (Some(p), _) => PriceChange::parse_price(p),
        (None, Some(a)) => PriceChange::parse_adjustment(a),
        (None, None) => None,
    };
    let parsed = overlay
        .spec
        .capacity
        .iter()
        .map(|(name, q)| {
            karpenter_scheduling::Quantity::parse(&q.0)
                .map(|q| (name.as_str(), q))
                .map_err(|e| format!("spec.capacity[{name}]: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let resources = Resources::from_quantities(parsed.iter().map(|(n, q)| (*n, q)))
        .map_err(|e| format!("spec.capacity: {e}"))?;
    // Every named resource is kept, zero included: an overlay may set a resource to 0.
    let capacity = parsed
        .iter()
        .map(|(name, _)| ((*name).to_owned(), resources.get(name)))
        .collect();
    Ok(Prepared {
        overlay,
        requirements,
        price,
        capacity,
    })
}

/// The requirements an overlay is matched against for `pool`'s instance type `it`.
fn type_requirements(pool: &NodePool, it: &InstanceType) -> Requirements {
    let mut reqs = Requirements::new();
    if let Ok(r) = Requirement::new(labels::NODEPOOL, Operator::In, [pool.name()]) {
        reqs.add(r);
    }
    reqs.add_all(&Requirements::from_labels(
        &pool.spec.template.metadata.labels,
    ));
    reqs.add_all(&it.requirements);
    reqs
}

fn offering_requirements(o: &Offering) -> Requirements {
    let pairs = [
        (labels::ZONE.to_owned(), o.zone.clone()),
        (labels::CAPACITY_TYPE.to_owned(), o.capacity_type.clone()),
    ];
    Requirements::from_labels(pairs.iter().map(|(k, v)| (k, v)))
}

/// One instance type of one pool with what overlays are matched against, computed once
/// per evaluation rather than once per overlay.
struct Candidate<'a> {
    it: &'a InstanceType,
    requirements: Requirements,
    offerings: Vec<(&'a Offering, Requirements)>,
}

/// A pool and its candidates.
struct PoolCandidates<'a> {
    pool: &'a NodePool,
    types: Vec<Candidate<'a>>,
}

fn candidates<'a>(pools: &[(&'a NodePool, &'a [Arc<InstanceType>])]) -> Vec<PoolCandidates<'a>> {
    pools
        .iter()
        .map(|(pool, types)| PoolCandidates {
            pool,
            types: types
                .iter()
                .map(|it| Candidate {
                    it,
                    requirements: type_requirements(pool, it),
                    offerings: it
                        .offerings
                        .iter()
                        .map(|o| (o, offering_requirements(o)))
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

/// The offerings of the candidate type that `overlay` selects (empty: the overlay does not
/// match the type at all).
fn matching_offerings<'t>(overlay: &Prepared<'_>, c: &Candidate<'t>) -> Vec<&'t Offering> {
    if c.requirements
        .compatible(&overlay.requirements, false)
        .is_err()
    {
        return Vec::new();
    }
    c.offerings
        .iter()
        .filter(|(_, reqs)| overlay.requirements.compatible(reqs, true).is_ok())
        .map(|(o, _)| *o)
        .collect()
}

fn offering_key(o: &Offering) -> (String, String) {
    (o.zone.clone(), o.capacity_type.clone())
}

impl Evaluation {
    fn conflict(&self, p: &Prepared<'_>, pools: &[PoolCandidates<'_>]) -> Option<String> {
        let weight = p.overlay.weight();
        for PoolCandidates { pool, types } in pools {
            let Some(by_type) = self.updates.get(pool.name()) else {
                continue;
            };
            for c in types {
                let it = c.it;
                let offerings = matching_offerings(p, c);
                if offerings.is_empty() {
                    continue;
                }
                let Some(update) = by_type.get(&it.name) else {
                    continue;
                };
                let at = |other: &str, what: String| {
                    format!(
                        "conflicts with NodeOverlay {other:?} (same weight {weight}) on {what} of instance type {} in nodepool {}",
                        it.name,
                        pool.name()
                    )
                };
                if p.price.is_some() {
                    for o in &offerings {
                        if let Some(u) = update.prices.get(&offering_key(o))
                            && u.last.weight == weight
                        {
                            return Some(at(
                                &u.last.overlay,
                                format!("the price of offering {}/{}", o.zone, o.capacity_type),
                            ));
                        }
                    }
                }
                if !p.capacity.is_empty()
                    && let Some(last) = &update.capacity.last
                    && last.weight == weight
                    && let Some(r) = p
                        .capacity
                        .keys()
                        .find(|r| update.capacity.last_resources.contains(*r))
                {
                    return Some(at(&last.overlay, format!("capacity {r}")));
                }
            }
        }
        None
    }

    fn store(&mut self, p: &Prepared<'_>, pools: &[PoolCandidates<'_>]) {
        let touch = Touch {
            weight: p.overlay.weight(),
            overlay: p.overlay.name().to_owned(),
        };
        for PoolCandidates { pool, types } in pools {
            for c in types {
                let offerings = matching_offerings(p, c);
                if offerings.is_empty() {
                    continue;
                }
                let it = c.it;
                let has_price = p.price.is_some();
                if !has_price && p.capacity.is_empty() {
                    continue;
                }
                let update = self
                    .updates
                    .entry(pool.name().to_owned())
                    .or_default()
                    .entry(it.name.clone())
                    .or_default();
                if let Some(change) = p.price {
                    for o in &offerings {
                        update
                            .prices
                            .entry(offering_key(o))
                            .and_modify(|u| u.last = touch.clone())
                            .or_insert_with(|| PriceUpdate {
                                change,
                                last: touch.clone(),
                            });
                    }
                }
                if !p.capacity.is_empty() {
                    let c = &mut update.capacity;
                    for (name, value) in &p.capacity {
                        c.resources.entry(name.clone()).or_insert(*value);
                    }
                    c.last_resources = p.capacity.keys().cloned().collect();
                    c.last = Some(touch.clone());
                }
            }
        }
    }

    /// The annotations Karpenter puts on a NodeClaim of `pool` whose instance-type options
    /// are `options`: [`PRICE_OVERLAY_APPLIED_ANNOTATION`] when one of them has an overlaid
    /// price, [`CAPACITY_OVERLAY_APPLIED_ANNOTATION`] when one has overlaid capacity (each
    /// with the value `"true"`); empty when no overlay touched any of them.
    pub fn claim_annotations<'a>(
        &self,
        pool: &str,
        options: impl IntoIterator<Item = &'a str>,
    ) -> Vec<(&'static str, &'static str)> {
        let Some(by_type) = self.updates.get(pool) else {
            return Vec::new();
        };
        let (mut price, mut capacity) = (false, false);
        for name in options {
            if let Some(u) = by_type.get(name) {
                price |= !u.prices.is_empty();
                capacity |= !u.capacity.resources.is_empty();
            }
        }
        let mut out = Vec::new();
        if price {
            out.push((PRICE_OVERLAY_APPLIED_ANNOTATION, "true"));
        }
        if capacity {
            out.push((CAPACITY_OVERLAY_APPLIED_ANNOTATION, "true"));
        }
        out
    }

    /// Each overlay's verdict, by name.
    pub fn verdicts(&self) -> &BTreeMap<String, Verdict> {
        &self.verdicts
    }

    /// Whether `pool` was part of the evaluation.
    pub fn evaluated(&self, pool: &str) -> bool {
        self.evaluated.contains(pool)
    }

    /// `types` (the provider's instance types of `pool`) with the overlays applied: prices
    /// of the selected offerings changed, capacity overlays merged in. Types no overlay
    /// touches are shared, not copied.
    ///
    /// # Errors
    /// `pool` was not evaluated ([`UnevaluatedNodePool`]).
    pub fn apply(
        &self,
        pool: &str,
        types: &[Arc<InstanceType>],
    ) -> Result<Vec<Arc<InstanceType>>, UnevaluatedNodePool> {
        if !self.evaluated.contains(pool) {
            return Err(UnevaluatedNodePool(pool.to_owned()));
        }
        let Some(by_type) = self.updates.get(pool) else {
            return Ok(types.to_vec());
        };
        Ok(types
            .iter()
            .map(|it| match by_type.get(&it.name) {
                None => it.clone(),
                Some(update) => {
                    let mut changed = InstanceType::clone(it);
                    for o in &mut changed.offerings {
                        if let Some(u) = update.prices.get(&offering_key(o)) {
                            o.price = u.change.apply(o.price);
                        }
                    }
                    for (name, value) in &update.capacity.resources {
                        changed.capacity.set(name, *value);
                    }
                    Arc::new(changed)
                }
            })
            .collect())
    }
}

/// Orders overlays as upstream merges them: weight descending, then name descending.
fn ordered(overlays: &[NodeOverlay]) -> Vec<&NodeOverlay> {
    let mut v: Vec<&NodeOverlay> = overlays.iter().collect();
    v.sort_by(|a, b| {
        b.weight()
            .cmp(&a.weight())
            .then_with(|| b.name().cmp(a.name()))
    });
    v
}

/// Evaluates `overlays` against every pool's instance types (`pools`: each NodePool with
/// the provider's types for it; a pool whose types could not be listed is left out and
/// [`Evaluation::apply`] refuses it). Every overlay gets a verdict.
pub fn evaluate(
    overlays: &[NodeOverlay],
    pools: &[(&NodePool, &[Arc<InstanceType>])],
) -> Evaluation {
    let mut eval = Evaluation {
        evaluated: pools.iter().map(|(p, _)| p.name().to_owned()).collect(),
        ..Evaluation::default()
    };
    let candidates = if overlays.is_empty() {
        Vec::new()
    } else {
        candidates(pools)
    };
    for overlay in ordered(overlays) {
        let verdict = match prepare(overlay) {
            Err(why) => Verdict::Invalid(why),
            Ok(p) => match eval.conflict(&p, &candidates) {
                Some(why) => Verdict::Conflict(why),
                None => {
                    eval.store(&p, &candidates);
                    Verdict::Applied
                }
            },
        };
        eval.verdicts.insert(overlay.name().to_owned(), verdict);
    }
    eval
}

/// The instance types of every pool in `types` with `overlays` applied, and the
/// evaluation (for the overlays' verdicts). Pools missing from `types` are not evaluated.
pub fn overlay_instance_types(
    overlays: &[NodeOverlay],
    pools: &[&NodePool],
    types: &BTreeMap<String, Vec<Arc<InstanceType>>>,
) -> (BTreeMap<String, Vec<Arc<InstanceType>>>, Evaluation) {
    let inputs: Vec<(&NodePool, &[Arc<InstanceType>])> = pools
        .iter()
        .filter_map(|p| types.get(p.name()).map(|t| (*p, t.as_slice())))
        .collect();
    let eval = evaluate(overlays, &inputs);
    let out = types
        .iter()
        .map(|(pool, t)| {
            let applied = eval.apply(pool, t).unwrap_or_else(|_| t.clone());
            (pool.clone(), applied)
        })
        .collect();
    (out, eval)
}

mod published;
pub use published::Published;

#[cfg(test)]
mod tests;
