//! Launching into capacity reservations, as Karpenter's AWS provider does with the
//! `ReservedCapacity` gate on:
//!
//! - which reserved offerings one launch may use ([`choose`]): one kind of reservation only
//!   (the kind whose cheapest offering is cheapest; on a tie ordinary reservations, then
//!   capacity blocks, then interruptible reservations), a single offering for a capacity
//!   block, and per instance type and zone the reservation with the most instances left;
//! - how the launch template addresses reservations ([`TemplateTarget`]): a reserved launch
//!   targets its reservation and nothing else, with the capacity-block or interruptible
//!   market type; spot and on-demand launches opt out of open reservations, so that their
//!   instances never take reserved capacity the scheduler counted for other claims;
//! - the fleet's target capacity type ([`target_capacity_type`]).

use crate::launch::LaunchOverride;
use aws_sdk_ec2::types::{
    CapacityReservationPreference, CapacityReservationTarget, DefaultTargetCapacityType,
    FleetReservationType, LaunchTemplateCapacityReservationSpecificationRequest,
    LaunchTemplateInstanceMarketOptionsRequest, MarketType, ReservedCapacityOptionsRequest,
};
use karpenter_cloudprovider::reserved::{
    RESERVATION_TYPE_CAPACITY_BLOCK, RESERVATION_TYPE_DEFAULT,
};
use karpenter_scheduling::labels;
use karpenter_scheduling::model::Reservation;
use std::collections::BTreeMap;

/// The kind of reservation a reserved launch goes into.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReservationKind {
    /// `default` or `capacity-block`.
    pub reservation_type: String,
    /// Whether EC2 may reclaim the instances.
    pub interruptible: bool,
}

impl ReservationKind {
    /// The kind of `r`, read from the labels its offering carries.
    pub fn of(r: &Reservation) -> Self {
        Self {
            reservation_type: r
                .labels
                .get(labels::AWS_CAPACITY_RESERVATION_TYPE)
                .cloned()
                .unwrap_or_else(|| RESERVATION_TYPE_DEFAULT.into()),
            interruptible: r
                .labels
                .get(labels::AWS_CAPACITY_RESERVATION_INTERRUPTIBLE)
                .is_some_and(|v| v == "true"),
        }
    }

    /// Whether this is a capacity block.
    pub fn is_capacity_block(&self) -> bool {
        self.reservation_type == RESERVATION_TYPE_CAPACITY_BLOCK
    }

    /// Upstream's order among kinds whose cheapest offerings cost the same.
    fn priority(&self) -> u8 {
        match (self.is_capacity_block(), self.interruptible) {
            (false, false) => 0,
            (true, false) => 1,
            (false, true) => 2,
            (true, true) => 3,
        }
    }
}

/// A reserved offering a launch could use.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservedCandidate {
    /// The override it becomes (with its reservation id).
    pub ov: LaunchOverride,
    /// Its reservation's kind.
    pub kind: ReservationKind,
    /// Instances its reservation still takes.
    pub capacity: u32,
}

/// The kind and overrides of a reserved launch among `candidates`, or `None` when there is
/// none. The overrides keep the candidates' order.
pub fn choose(
    candidates: Vec<ReservedCandidate>,
) -> Option<(ReservationKind, Vec<LaunchOverride>)> {
    let mut cheapest: BTreeMap<&ReservationKind, f64> = BTreeMap::new();
    for c in &candidates {
        let p = cheapest.entry(&c.kind).or_insert(f64::INFINITY);
        *p = p.min(c.ov.price);
    }
    let kind = cheapest
        .into_iter()
        .min_by(|(a, pa), (b, pb)| pa.total_cmp(pb).then(a.priority().cmp(&b.priority())))?
        .0
        .clone();
    let mut chosen: Vec<ReservedCandidate> =
        candidates.into_iter().filter(|c| c.kind == kind).collect();
    if kind.is_capacity_block() {
        // A capacity block is launched into one offering at a time: the cheapest.
        let best = chosen
            .iter()
            .enumerate()
            .min_by(|(_, a), (_, b)| a.ov.price.total_cmp(&b.ov.price))
            .map(|(i, _)| i)?;
        chosen = vec![chosen.swap_remove(best)];
    }
    // Per type and zone, the reservation with the most instances left.
    let mut best: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (i, c) in chosen.iter().enumerate() {
        let key = (c.ov.instance_type.clone(), c.ov.zone.clone());
        match best.get(&key) {
            Some(&j) if chosen[j].capacity >= c.capacity => {}
            _ => {
                best.insert(key, i);
            }
        }
    }
    let keep: std::collections::BTreeSet<usize> = best.into_values().collect();
    let overrides = chosen
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep.contains(i))
        .map(|(_, c)| c.ov)
        .collect();
    Some((kind, overrides))
}

/// How a launch template addresses capacity reservations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateTarget<'a> {
    /// The `ReservedCapacity` gate is off: EC2's default, instances may use open
    /// reservations (Karpenter before native reservation support).
    Open,
    /// A spot or on-demand launch with the gate on: no reservation at all.
    NoReservation,
    /// A reserved launch into one reservation.
    Reservation {
        /// The reservation id.
        id: &'a str,
        /// Its kind.
        kind: &'a ReservationKind,
    },
}

impl TemplateTarget<'_> {
    /// The template's capacity reservation specification and market options.
    pub fn options(
        &self,
    ) -> (
        Option<LaunchTemplateCapacityReservationSpecificationRequest>,
        Option<LaunchTemplateInstanceMarketOptionsRequest>,
    ) {
        match self {
            Self::Open => (None, None),
            Self::NoReservation => (
                Some(
                    LaunchTemplateCapacityReservationSpecificationRequest::builder()
                        .capacity_reservation_preference(CapacityReservationPreference::None)
                        .build(),
                ),
                None,
            ),
            Self::Reservation { id, kind } => {
                let spec = LaunchTemplateCapacityReservationSpecificationRequest::builder()
                    .capacity_reservation_preference(
                        CapacityReservationPreference::CapacityReservationsOnly,
                    )
                    .capacity_reservation_target(
                        CapacityReservationTarget::builder()
                            .capacity_reservation_id(*id)
                            .build(),
                    )
                    .build();
                let market = if kind.is_capacity_block() {
                    Some(MarketType::CapacityBlock)
                } else if kind.interruptible {
                    Some(MarketType::InterruptibleCapacityReservation)
                } else {
                    None
                };
                (
                    Some(spec),
                    market.map(|m| {
                        LaunchTemplateInstanceMarketOptionsRequest::builder()
                            .market_type(m)
                            .build()
                    }),
                )
            }
        }
    }

    /// What distinguishes this target in the launch template's name (empty for
    /// [`TemplateTarget::Open`], so templates made with the gate off keep their names).
    pub fn name_key(&self) -> String {
        match self {
            Self::Open => String::new(),
            Self::NoReservation => "|targeted".into(),
            Self::Reservation { id, kind } => format!(
                "|targeted|{id}|{}|{}",
                kind.reservation_type, kind.interruptible
            ),
        }
    }
}

/// The fleet's default target capacity type for a reserved launch, and its reserved capacity
/// options: a capacity block is its own market, an interruptible reservation is launched as
/// reserved capacity, an ordinary reservation as on-demand capacity its template targets.
pub fn target_capacity_type(
    kind: &ReservationKind,
) -> (
    DefaultTargetCapacityType,
    Option<ReservedCapacityOptionsRequest>,
) {
    if kind.is_capacity_block() {
        (DefaultTargetCapacityType::CapacityBlock, None)
    } else if kind.interruptible {
        (
            DefaultTargetCapacityType::ReservedCapacity,
            Some(
                ReservedCapacityOptionsRequest::builder()
                    .reservation_types(FleetReservationType::InterruptibleCapacityReservation)
                    .build(),
            ),
        )
    } else {
        (DefaultTargetCapacityType::OnDemand, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(t: &str, interruptible: bool) -> ReservationKind {
        ReservationKind {
            reservation_type: t.into(),
            interruptible,
        }
    }

    fn cand(
        it: &str,
        zone: &str,
        id: &str,
        price: f64,
        k: &ReservationKind,
        capacity: u32,
    ) -> ReservedCandidate {
        ReservedCandidate {
            ov: LaunchOverride {
                instance_type: it.into(),
                zone: zone.into(),
                subnet_id: format!("subnet-{zone}"),
                image_id: "ami-1".into(),
                price,
                reservation_id: Some(id.into()),
            },
            kind: k.clone(),
            capacity,
        }
    }

    fn ids(ovs: &[LaunchOverride]) -> Vec<&str> {
        ovs.iter()
            .map(|o| o.reservation_id.as_deref().unwrap_or(""))
            .collect()
    }

    #[test]
    fn one_kind_the_cheapest_then_upstreams_priority() {
        let odcr = kind(RESERVATION_TYPE_DEFAULT, false);
        let block = kind(RESERVATION_TYPE_CAPACITY_BLOCK, false);
        let interruptible = kind(RESERVATION_TYPE_DEFAULT, true);
        // The cheapest kind wins, whatever its priority.
        let (k, ovs) = choose(vec![
            cand("m5.large", "a", "cr-odcr", 2e-8, &odcr, 3),
            cand("m5.xlarge", "a", "cr-int", 1e-8, &interruptible, 3),
        ])
        .expect("a launch");
        assert_eq!((k, ids(&ovs)), (interruptible.clone(), vec!["cr-int"]));
        // On a tie: ordinary, then capacity block, then interruptible.
        let (k, _) = choose(vec![
            cand("m5.large", "a", "cr-int", 1e-8, &interruptible, 3),
            cand("m5.large", "b", "cr-block", 1e-8, &block, 3),
        ])
        .expect("a launch");
        assert_eq!(k, block);
        let (k, _) = choose(vec![
            cand("m5.large", "b", "cr-block", 1e-8, &block, 3),
            cand("m5.large", "a", "cr-odcr", 1e-8, &odcr, 3),
        ])
        .expect("a launch");
        assert_eq!(k, odcr);
        assert!(choose(Vec::new()).is_none());
    }

    #[test]
    fn capacity_blocks_launch_one_offering_and_reservations_the_fullest_per_zone() {
        let block = kind(RESERVATION_TYPE_CAPACITY_BLOCK, false);
        let (_, ovs) = choose(vec![
            cand("p5.48xlarge", "a", "cr-b1", 3e-6, &block, 1),
            cand("p5.48xlarge", "b", "cr-b2", 2e-6, &block, 1),
            cand("p4d.24xlarge", "a", "cr-b3", 4e-6, &block, 1),
        ])
        .expect("a launch");
        assert_eq!(ids(&ovs), vec!["cr-b2"]);
        let odcr = kind(RESERVATION_TYPE_DEFAULT, false);
        let (_, ovs) = choose(vec![
            cand("m5.large", "a", "cr-1", 1e-8, &odcr, 1),
            cand("m5.large", "a", "cr-2", 1e-8, &odcr, 5),
            cand("m5.large", "b", "cr-3", 1e-8, &odcr, 1),
            cand("c5.large", "a", "cr-4", 1e-8, &odcr, 2),
        ])
        .expect("a launch");
        assert_eq!(ids(&ovs), vec!["cr-2", "cr-3", "cr-4"]);
    }

    #[test]
    fn templates_target_their_reservation_and_others_opt_out() {
        assert_eq!(TemplateTarget::Open.options(), (None, None));
        assert_eq!(TemplateTarget::Open.name_key(), "");
        let (spec, market) = TemplateTarget::NoReservation.options();
        let spec = spec.expect("a specification");
        assert_eq!(
            spec.capacity_reservation_preference(),
            Some(&CapacityReservationPreference::None)
        );
        assert!(spec.capacity_reservation_target().is_none() && market.is_none());
        let block = kind(RESERVATION_TYPE_CAPACITY_BLOCK, false);
        let target = TemplateTarget::Reservation {
            id: "cr-1",
            kind: &block,
        };
        let (spec, market) = target.options();
        let spec = spec.expect("a specification");
        assert_eq!(
            spec.capacity_reservation_preference(),
            Some(&CapacityReservationPreference::CapacityReservationsOnly)
        );
        assert_eq!(
            spec.capacity_reservation_target()
                .and_then(|t| t.capacity_reservation_id()),
            Some("cr-1")
        );
        assert_eq!(
            market.and_then(|m| m.market_type().cloned()),
            Some(MarketType::CapacityBlock)
        );
        let interruptible = kind(RESERVATION_TYPE_DEFAULT, true);
        let (_, market) = TemplateTarget::Reservation {
            id: "cr-2",
            kind: &interruptible,
        }
        .options();
        assert_eq!(
            market.and_then(|m| m.market_type().cloned()),
            Some(MarketType::InterruptibleCapacityReservation)
        );
        assert_ne!(target.name_key(), TemplateTarget::NoReservation.name_key());

        assert_eq!(
            target_capacity_type(&block),
            (DefaultTargetCapacityType::CapacityBlock, None)
        );
        let (t, opts) = target_capacity_type(&interruptible);
        assert_eq!(t, DefaultTargetCapacityType::ReservedCapacity);
        assert_eq!(
            opts.map(|o| o.reservation_types().to_vec()),
            Some(vec![FleetReservationType::InterruptibleCapacityReservation])
        );
        assert_eq!(
            target_capacity_type(&kind(RESERVATION_TYPE_DEFAULT, false)).0,
            DefaultTargetCapacityType::OnDemand
        );
    }
}
