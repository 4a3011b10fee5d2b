//! Reserved offerings as every provider publishes them, after Karpenter's AWS provider: one
//! `reserved` offering per capacity reservation (EC2 on-demand capacity reservations and
//! capacity blocks), priced at the type's on-demand price divided by 10,000,000 so the
//! scheduler prefers it to anything else while keeping the relative order of types, and
//! labelled with the reservation's id, type and interruptibility.

use crate::NodeClaim;
use karpenter_catalog::pricing::reserved_price;
use karpenter_scheduling::labels;
use karpenter_scheduling::model::{InstanceType, Labels, Offering, Reservation};
use karpenter_scheduling::requirements::{Operator, Requirement, Requirements};
use std::collections::BTreeSet;

/// `karpenter.k8s.aws/capacity-reservation-type` of an ordinary capacity reservation.
pub const RESERVATION_TYPE_DEFAULT: &str = "default";
/// `karpenter.k8s.aws/capacity-reservation-type` of a capacity block.
pub const RESERVATION_TYPE_CAPACITY_BLOCK: &str = "capacity-block";

/// What a reserved offering is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservedOffering<'a> {
    /// The reservation id.
    pub id: &'a str,
    /// Its zone.
    pub zone: &'a str,
    /// [`RESERVATION_TYPE_DEFAULT`] or [`RESERVATION_TYPE_CAPACITY_BLOCK`].
    pub reservation_type: &'a str,
    /// Whether EC2 may reclaim its instances.
    pub interruptible: bool,
    /// Instances it can still take.
    pub remaining: u32,
    /// Whether the provider may launch into it at all (false once it is expiring, or its
    /// zone is not one the type is offered in); an offering with nothing remaining is never
    /// available.
    pub usable: bool,
}

impl ReservedOffering<'_> {
    /// The offering on `it`: priced from `it`'s on-demand offering in the reservation's zone
    /// (any zone's when that zone has none; free when the type has no on-demand price, as
    /// upstream).
    pub fn offering(&self, it: &InstanceType) -> Offering {
        let on_demand = it
            .offerings
            .iter()
            .find(|o| o.zone == self.zone && o.capacity_type == labels::CAPACITY_TYPE_ON_DEMAND)
            .map(|o| o.price)
            .or_else(|| it.offering_price(None, labels::CAPACITY_TYPE_ON_DEMAND))
            .unwrap_or(0.0);
        let mut extra = Labels::new();
        extra.insert(
            labels::AWS_CAPACITY_RESERVATION_TYPE.into(),
            self.reservation_type.to_owned(),
        );
        extra.insert(
            labels::AWS_CAPACITY_RESERVATION_INTERRUPTIBLE.into(),
            self.interruptible.to_string(),
        );
        Offering {
            zone: self.zone.to_owned(),
            capacity_type: labels::CAPACITY_TYPE_RESERVED.into(),
            price: reserved_price(on_demand),
            available: self.usable && self.remaining > 0,
            reservation: Some(Reservation {
                id: self.id.to_owned(),
                id_label: labels::AWS_CAPACITY_RESERVATION_ID.into(),
                capacity: self.remaining,
                labels: extra,
            }),
        }
    }
}

/// `it` with `offerings` appended and `reserved` among the capacity types its requirements
/// allow.
pub fn with_reserved(it: &InstanceType, offerings: Vec<Offering>) -> InstanceType {
    let mut copy = it.clone();
    copy.offerings.extend(offerings);
    let mut types: Vec<String> = copy
        .requirements
        .get(labels::CAPACITY_TYPE)
        .map(|r| r.values().map(str::to_string).collect())
        .unwrap_or_default();
    if !types.iter().any(|t| t == labels::CAPACITY_TYPE_RESERVED) {
        types.push(labels::CAPACITY_TYPE_RESERVED.into());
        copy.requirements.remove(labels::CAPACITY_TYPE);
        if let Ok(r) = Requirement::new(labels::CAPACITY_TYPE, Operator::In, types) {
            copy.requirements.add(r);
        }
    }
    copy
}

fn allows(reqs: &Requirements, key: &str, value: &str) -> bool {
    reqs.get(key).is_none_or(|r| r.has(value))
}

/// Whether `reqs` allow the reservation `o` launches into (its id and labels), or, for an
/// offering without one, require none of the labels only reserved nodes carry.
pub fn allows_reservation(reqs: &Requirements, o: &Offering) -> bool {
    match &o.reservation {
        Some(r) => {
            allows(reqs, &r.id_label, &r.id) && r.labels.iter().all(|(k, v)| allows(reqs, k, v))
        }
        None => labels::RESERVED_CAPACITY_LABELS.iter().all(|k| {
            reqs.get(k)
                .is_none_or(|x| matches!(x.operator(), Operator::NotIn | Operator::DoesNotExist))
        }),
    }
}

/// The NodeClaims in capacity reservations (labelled with a reservation id), each with
/// whether it has launched. A launch into a reservation, or a reserved claim's end, changes
/// what the reservation can still take, so offerings are stale when this set changes.
pub fn reserved_claims<'a>(
    claims: impl IntoIterator<Item = &'a NodeClaim>,
) -> BTreeSet<(String, bool)> {
    let reserved = claims
        .into_iter()
        .filter(|c| c.label(labels::AWS_CAPACITY_RESERVATION_ID).is_some());
    reserved
        .map(|c| (c.name().to_owned(), !c.provider_id().is_empty()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_claims_are_those_labelled_with_a_reservation() {
        let claim = |name: &str, reservation: Option<&str>, launched: bool| {
            let mut json = serde_json::json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": name, "labels": {}},
                "spec": {"requirements": [], "nodeClassRef":
                    {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}},
            });
            if let Some(r) = reservation {
                json["metadata"]["labels"][labels::AWS_CAPACITY_RESERVATION_ID] = r.into();
            }
            if launched {
                json["status"] = serde_json::json!({"providerID": format!("aws:///{name}")});
            }
            serde_json::from_value::<NodeClaim>(json).unwrap()
        };
        let claims = [
            claim("a", Some("cr-1"), true),
            claim("b", Some("cr-1"), false),
            claim("c", None, true),
        ];
        let want = BTreeSet::from([("a".to_owned(), true), ("b".to_owned(), false)]);
        assert_eq!(reserved_claims(&claims), want);
    }

    fn m5() -> InstanceType {
        karpenter_catalog::default_instance_types()
            .iter()
            .find(|t| t.name == "m5.large")
            .map(|t| InstanceType::clone(t))
            .expect("m5.large in the catalogue")
    }

    #[test]
    fn reserved_offerings_are_nearly_free_labelled_and_add_the_capacity_type() {
        let it = m5();
        let od = it
            .offering_price(Some("us-east-1a"), labels::CAPACITY_TYPE_ON_DEMAND)
            .expect("on-demand price");
        let r = ReservedOffering {
            id: "cr-1",
            zone: "us-east-1a",
            reservation_type: RESERVATION_TYPE_CAPACITY_BLOCK,
            interruptible: false,
            remaining: 2,
            usable: true,
        };
        let o = r.offering(&it);
        assert_eq!(o.capacity_type, labels::CAPACITY_TYPE_RESERVED);
        assert!(o.available);
        assert!((o.price - od / 10_000_000.0).abs() < 1e-15);
        let res = o.reservation.as_ref().expect("reservation");
        assert_eq!(res.capacity, 2);
        assert_eq!(
            res.labels[labels::AWS_CAPACITY_RESERVATION_TYPE],
            RESERVATION_TYPE_CAPACITY_BLOCK
        );
        let none_left = ReservedOffering { remaining: 0, ..r }.offering(&it);
        assert!(!none_left.available);
        let expiring = ReservedOffering { usable: false, ..r }.offering(&it);
        assert!(!expiring.available);

        let with = with_reserved(&it, vec![o.clone()]);
        assert!(
            with.requirements
                .get(labels::CAPACITY_TYPE)
                .expect("capacity type")
                .has(labels::CAPACITY_TYPE_RESERVED)
        );
        assert_eq!(with.offerings.len(), it.offerings.len() + 1);

        let pin = |id: &str| {
            Requirements::from_node_selector(&[
                karpenter_scheduling::requirements::NodeSelectorRequirement {
                    key: labels::AWS_CAPACITY_RESERVATION_ID.into(),
                    operator: Operator::In,
                    values: vec![id.into()],
                    min_values: None,
                },
            ])
            .expect("valid")
        };
        assert!(allows_reservation(&pin("cr-1"), &o));
        assert!(!allows_reservation(&pin("cr-2"), &o));
        assert!(
            !allows_reservation(&pin("cr-1"), &it.offerings[0]),
            "an offering without a reservation cannot satisfy a reservation id"
        );
        assert!(allows_reservation(
            &Requirements::default(),
            &it.offerings[0]
        ));
    }
}
