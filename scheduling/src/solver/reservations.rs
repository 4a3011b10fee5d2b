//! Capacity reservations within one solve (upstream's `reservationmanager.go` and
//! `NodeClaim.offeringsToReserve`): how many instances each reservation can still take, and
//! which reservations each claim this solve opened holds.
//!
//! A claim holds every reservation one of its remaining instance types could launch into
//! (pessimistically, as upstream: it may launch as any of its options), so no reservation is
//! ever promised to more claims than the provider said it has room for. A claim that holds
//! reservations is launched as reserved capacity into one of them (its requirements say so,
//! see [`pin_requirements`]); a claim that holds none never launches into a reservation.

use super::ReservedOfferingMode;
use super::nodeclaim::{Template, offering_ok};
use crate::labels::{CAPACITY_TYPE, CAPACITY_TYPE_RESERVED};
use crate::requirements::{Operator, Requirement, Requirements};
use std::collections::{BTreeMap, BTreeSet};

/// Why a pod could not be added to a claim because of reservations.
pub(crate) const DEFERRED: &str = "one or more instance types with compatible reserved offerings are available, but could not be reserved; the pod waits for a later scheduling round";

/// Why a pod could not be added to a claim that holds reservations.
pub(crate) const WOULD_DROP: &str =
    "satisfying the updated constraints would remove every compatible reserved offering";

/// Remaining capacity per reservation, for one solve.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reservations {
    /// The `ReservedCapacity` feature gate: when off, reserved offerings are never used.
    enabled: bool,
    /// Reservation id → (its id label, instances it can still take in this solve).
    capacity: BTreeMap<String, (String, u32)>,
}

/// What [`Reservations::to_reserve`] decided for a claim about to take a pod.
#[derive(Debug, Default)]
pub(crate) struct Decision {
    /// The reservations the claim holds after the pod is added.
    pub held: BTreeSet<String>,
    /// The options that remain: unchanged while the claim holds reservations; without
    /// reservations only those that can launch as another capacity type.
    pub options: Option<Vec<u32>>,
}

impl Reservations {
    /// The reservations the templates' instance types offer, each counted at the smallest
    /// capacity any offering reports (upstream: several NodePools may name one reservation,
    /// and their instance types may have been read at different times).
    pub(crate) fn new(templates: &[Template<'_>], enabled: bool) -> Self {
        let mut capacity: BTreeMap<String, (String, u32)> = BTreeMap::new();
        for t in templates {
            for it in &t.its {
                for r in it.offerings.iter().filter_map(|o| o.reservation.as_ref()) {
                    capacity
                        .entry(r.id.clone())
                        .and_modify(|(_, c)| *c = (*c).min(r.capacity))
                        .or_insert_with(|| (r.id_label.clone(), r.capacity));
                }
            }
        }
        Self { enabled, capacity }
    }

    /// Whether `claim_held` (a claim's reservations) may take one more instance of `id`:
    /// it already holds it, or the reservation has room left.
    fn can_reserve(&self, claim_held: &BTreeSet<String>, id: &str) -> bool {
        claim_held.contains(id) || self.capacity.get(id).is_some_and(|(_, c)| *c > 0)
    }

    /// Moves a claim from holding `old` to holding `new`: takes one instance of each newly
    /// held reservation and gives back those no longer held.
    pub(crate) fn update(&mut self, old: &BTreeSet<String>, new: &BTreeSet<String>) {
        for id in new.difference(old) {
            if let Some((_, c)) = self.capacity.get_mut(id) {
                // `to_reserve` only returns reservations with room, so this never saturates.
                *c = c.saturating_sub(1);
            }
        }
        for id in old.difference(new) {
            if let Some((_, c)) = self.capacity.get_mut(id) {
                *c += 1;
            }
        }
    }

    /// The label that carries `id` on a node.
    fn id_label(&self, id: &str) -> Option<&str> {
        self.capacity.get(id).map(|(l, _)| l.as_str())
    }

    /// Which reservations a claim of `t` holding `held` would hold with requirements `reqs`
    /// and remaining `options`, or why the pod cannot join it. Strict mode (the provisioner)
    /// refuses a pod that could only go on reserved capacity already promised elsewhere, or
    /// that would strip a claim of the reservations it holds, so the pod waits for the next
    /// round; fallback mode (disruption's simulations) lets the claim launch as another
    /// capacity type instead.
    pub(crate) fn to_reserve(
        &self,
        t: &Template<'_>,
        held: &BTreeSet<String>,
        options: &[u32],
        reqs: &Requirements,
        mode: ReservedOfferingMode,
    ) -> Result<Decision, &'static str> {
        if !t.has_reserved {
            return Ok(Decision::default());
        }
        let mut new = BTreeSet::new();
        let mut compatible = false;
        if self.enabled {
            let mut in_options = vec![false; t.its.len()];
            for &i in options {
                in_options[i as usize] = true;
            }
            for &(i, o) in &t.reserved_offerings {
                if !in_options[i as usize] {
                    continue;
                }
                let o = &t.its[i as usize].offerings[o as usize];
                let Some(r) = &o.reservation else { continue };
                if o.capacity_type != CAPACITY_TYPE_RESERVED || !offering_ok(o, reqs) {
                    continue;
                }
                compatible = true;
                if self.can_reserve(held, &r.id) {
                    new.insert(r.id.clone());
                }
            }
        }
        if mode == ReservedOfferingMode::Strict && new.is_empty() {
            if compatible {
                return Err(DEFERRED);
            }
            if !held.is_empty() {
                return Err(WOULD_DROP);
            }
        }
        if !new.is_empty() {
            return Ok(Decision {
                held: new,
                options: None,
            });
        }
        // Without a reservation the claim must launch as another capacity type: keep the
        // options that have such an offering.
        // Reserved is excluded by capacity type, so the template's cached offering table
        // answers this.
        let offers = t.offers(&exclude_reserved(reqs));
        let kept: Vec<u32> = options
            .iter()
            .copied()
            .filter(|&i| offers[i as usize].is_some())
            .collect();
        if kept.is_empty() {
            return Err(if self.enabled {
                "every compatible reserved offering is already promised to other NodeClaims and no other capacity type is allowed"
            } else {
                "reserved offerings are not used (ReservedCapacity feature gate is off) and no other capacity type is allowed"
            });
        }
        Ok(Decision {
            held: BTreeSet::new(),
            options: Some(kept),
        })
    }

    /// A claim's final requirements, as upstream's `FinalizeScheduling` writes them: one
    /// holding reservations gets `capacity-type In [reserved]` and `<id label> In [ids]`;
    /// one of a pool with reserved offerings that holds none gets reserved excluded, so the
    /// provider cannot launch it into a reservation promised to another claim.
    pub(crate) fn pin_requirements(
        &self,
        t: &Template<'_>,
        held: &BTreeSet<String>,
        reqs: &mut Requirements,
    ) {
        if !t.has_reserved {
            return;
        }
        if held.is_empty() {
            *reqs = exclude_reserved(reqs);
            return;
        }
        reqs.remove(CAPACITY_TYPE);
        if let Ok(r) = Requirement::new(CAPACITY_TYPE, Operator::In, [CAPACITY_TYPE_RESERVED]) {
            reqs.add(r);
        }
        let mut by_label: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for id in held {
            if let Some(label) = self.id_label(id) {
                by_label.entry(label).or_default().push(id);
            }
        }
        for (label, ids) in by_label {
            if let Ok(r) = Requirement::new(label, Operator::In, ids) {
                reqs.add(r);
            }
        }
    }
}

/// `reqs` with `reserved` taken out of the capacity types it allows.
fn exclude_reserved(reqs: &Requirements) -> Requirements {
    let mut out = reqs.clone();
    if let Ok(not) = Requirement::new(CAPACITY_TYPE, Operator::NotIn, [CAPACITY_TYPE_RESERVED]) {
        // `add` intersects with an existing requirement on the key.
        out.add(not);
    }
    out
}
