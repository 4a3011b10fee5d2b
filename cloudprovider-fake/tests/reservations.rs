//! Capacity reservations in the fake provider: offered as `reserved` capacity with the
//! instances they have left, launched into first, full ones refused, slots given back on
//! delete, and nothing of it with the `ReservedCapacity` gate off.

use karpenter_catalog::{Catalogue, CatalogueOptions};
use karpenter_cloudprovider::v1::{NodeClaim, NodePool};
use karpenter_cloudprovider::{CloudProvider, CloudProviderError};
use karpenter_cloudprovider_fake::reservations::RESERVATION_TYPE_CAPACITY_BLOCK;
use karpenter_cloudprovider_fake::{FakeCloudProvider, FakeReservation, ReservationError};
use karpenter_scheduling::labels;
use serde_json::json;

mod common;
use common::label;

fn claim(name: &str, requirements: serde_json::Value) -> NodeClaim {
    common::claim(name, requirements, json!({}))
}

fn pool() -> NodePool {
    common::pool(json!([]))
}

/// `a1.large` (spot and on-demand at $1.00, zones a and b).
fn provider() -> FakeCloudProvider {
    let catalogue = Catalogue::from_json(
        r#"{"region": "test-1", "instance_types": [
          {"name": "a1.large", "vcpu": 2, "memory_mib": 4096, "architecture": "amd64",
           "max_network_interfaces": 3, "ipv4_per_interface": 10,
           "usage_classes": ["on-demand", "spot"], "on_demand_price_per_hour_usd": 1.0,
           "zones": ["test-1a", "test-1b"]}]}"#,
    )
    .unwrap();
    FakeCloudProvider::from_catalogue(&catalogue, &CatalogueOptions::default()).unwrap()
}

/// The reserved offering `instance_types` reports for `id`: (capacity, available, price).
async fn reserved(provider: &FakeCloudProvider, id: &str) -> Option<(u32, bool, f64)> {
    let types = provider.instance_types(&pool()).await.unwrap();
    types
        .iter()
        .flat_map(|it| it.offerings.iter())
        .find_map(|o| {
            let r = o.reservation.as_ref()?;
            (r.id == id).then_some((r.capacity, o.available, o.price))
        })
}

fn pinned(ids: &[&str]) -> serde_json::Value {
    json!([
        {"key": labels::CAPACITY_TYPE, "operator": "In", "values": ["reserved"]},
        {"key": labels::AWS_CAPACITY_RESERVATION_ID, "operator": "In", "values": ids}
    ])
}

#[tokio::test]
async fn reservations_are_offered_priced_as_aws_does_and_launched_into_first() {
    let provider = provider();
    provider
        .add_reservation(FakeReservation::new("cr-1", "a1.large", "test-1b", 2))
        .unwrap();
    let (capacity, available, price) = reserved(&provider, "cr-1").await.unwrap();
    assert_eq!((capacity, available), (2, true));
    assert_eq!(price, 1.0 / 10_000_000.0);
    let types = provider.instance_types(&pool()).await.unwrap();
    assert!(
        types[0]
            .requirements
            .get(labels::CAPACITY_TYPE)
            .unwrap()
            .has("reserved")
    );

    // A claim that allows every capacity type goes into the reservation (as the AWS
    // provider launches reserved before spot and on-demand), and the node says which.
    let launched = provider.create(&claim("c1", json!([]))).await.unwrap();
    assert_eq!(label(&launched, labels::CAPACITY_TYPE), "reserved");
    assert_eq!(label(&launched, labels::ZONE), "test-1b");
    assert_eq!(
        label(&launched, labels::AWS_CAPACITY_RESERVATION_ID),
        "cr-1"
    );
    assert_eq!(
        label(&launched, labels::AWS_CAPACITY_RESERVATION_TYPE),
        "default"
    );
    assert_eq!(
        label(&launched, labels::AWS_CAPACITY_RESERVATION_INTERRUPTIBLE),
        "false"
    );
    assert_eq!(
        provider.reservation_of(launched.provider_id()).as_deref(),
        Some("cr-1")
    );
    assert_eq!(reserved(&provider, "cr-1").await.unwrap().0, 1);
}

#[tokio::test]
async fn a_full_reservation_is_refused_then_reported_unavailable_and_delete_frees_a_slot() {
    let provider = provider();
    provider
        .add_reservation(FakeReservation::new("cr-1", "a1.large", "test-1a", 1))
        .unwrap();
    let first = provider
        .create(&claim("c1", pinned(&["cr-1"])))
        .await
        .unwrap();
    assert_eq!(label(&first, labels::AWS_CAPACITY_RESERVATION_ID), "cr-1");

    // Used up: a claim still pinned to it gets insufficient capacity naming the offering.
    let err = provider
        .create(&claim("c2", pinned(&["cr-1"])))
        .await
        .unwrap_err();
    match &err {
        CloudProviderError::InsufficientCapacity { offerings, message } => {
            assert_eq!(offerings.len(), 1);
            assert_eq!(offerings[0].capacity_type, "reserved");
            assert_eq!(offerings[0].zone, "test-1a");
            assert!(message.contains("cr-1"), "{message}");
        }
        other => panic!("expected insufficient capacity, got {other:?}"),
    }
    assert_eq!(
        reserved(&provider, "cr-1").await,
        Some((0, false, 1.0 / 10_000_000.0))
    );
    // The next claim, not pinned, falls back to spot.
    let next = provider.create(&claim("c3", json!([]))).await.unwrap();
    assert_eq!(label(&next, labels::CAPACITY_TYPE), "spot");
    assert_eq!(label(&next, labels::AWS_CAPACITY_RESERVATION_ID), "");

    // Deleting the reserved instance gives its slot back.
    provider.delete(&first).await.unwrap();
    assert_eq!(
        reserved(&provider, "cr-1").await.map(|r| (r.0, r.1)),
        Some((1, true))
    );
    let again = provider
        .create(&claim("c4", pinned(&["cr-1"])))
        .await
        .unwrap();
    assert_eq!(label(&again, labels::CAPACITY_TYPE), "reserved");
}

#[tokio::test]
async fn a_claim_pinned_to_one_reservation_never_launches_into_another() {
    let provider = provider();
    let mut block = FakeReservation::new("cr-block", "a1.large", "test-1a", 1);
    block.reservation_type = RESERVATION_TYPE_CAPACITY_BLOCK.into();
    block.interruptible = true;
    provider.add_reservation(block).unwrap();
    provider
        .add_reservation(FakeReservation::new("cr-2", "a1.large", "test-1b", 1))
        .unwrap();
    let launched = provider
        .create(&claim("c1", pinned(&["cr-2"])))
        .await
        .unwrap();
    assert_eq!(
        label(&launched, labels::AWS_CAPACITY_RESERVATION_ID),
        "cr-2"
    );
    assert_eq!(label(&launched, labels::ZONE), "test-1b");
    let block = provider
        .create(&claim("c2", pinned(&["cr-block"])))
        .await
        .unwrap();
    assert_eq!(
        label(&block, labels::AWS_CAPACITY_RESERVATION_TYPE),
        "capacity-block"
    );
    assert_eq!(
        label(&block, labels::AWS_CAPACITY_RESERVATION_INTERRUPTIBLE),
        "true"
    );
    let counts: Vec<(String, u32)> = provider
        .reservations()
        .into_iter()
        .map(|(r, left)| (r.id, left))
        .collect();
    assert_eq!(
        counts,
        [("cr-2".to_string(), 0), ("cr-block".to_string(), 0)]
    );
}

#[tokio::test]
async fn with_the_reserved_capacity_gate_off_reservations_are_neither_offered_nor_used() {
    let provider = provider().with_reserved_capacity(false);
    provider
        .add_reservation(FakeReservation::new("cr-1", "a1.large", "test-1a", 3))
        .unwrap();
    assert_eq!(reserved(&provider, "cr-1").await, None);
    let launched = provider.create(&claim("c1", json!([]))).await.unwrap();
    assert_eq!(label(&launched, labels::CAPACITY_TYPE), "spot");
    assert!(
        provider
            .create(&claim("c2", pinned(&["cr-1"])))
            .await
            .is_err()
    );
}

#[test]
fn reservations_the_catalogue_cannot_hold_are_refused_naming_the_field() {
    let provider = provider();
    let err = |r: FakeReservation| provider.add_reservation(r).unwrap_err().to_string();
    assert!(err(FakeReservation::new("cr-x", "z9.huge", "test-1a", 1)).contains("instanceType"));
    assert!(err(FakeReservation::new("cr-x", "a1.large", "test-1z", 1)).contains("zone"));
    assert!(err(FakeReservation::new("", "a1.large", "test-1a", 1)).contains("id"));
    let mut bad = FakeReservation::new("cr-x", "a1.large", "test-1a", 1);
    bad.reservation_type = "weekly".into();
    assert!(err(bad).contains("type"));
    provider
        .add_reservation(FakeReservation::new("cr-1", "a1.large", "test-1a", 1))
        .unwrap();
    assert_eq!(
        provider.add_reservation(FakeReservation::new("cr-1", "a1.large", "test-1b", 1)),
        Err(ReservationError::Duplicate("cr-1".into()))
    );
}

#[tokio::test]
async fn a_claim_that_requires_a_reservation_label_never_launches_outside_one() {
    let provider = provider();
    let mut block = FakeReservation::new("cr-block", "a1.large", "test-1a", 1);
    block.reservation_type = RESERVATION_TYPE_CAPACITY_BLOCK.into();
    provider.add_reservation(block).unwrap();
    provider
        .add_reservation(FakeReservation::new("cr-2", "a1.large", "test-1b", 1))
        .unwrap();
    let wants_block = json!([{"key": labels::AWS_CAPACITY_RESERVATION_TYPE, "operator": "In",
                              "values": ["capacity-block"]}]);
    let launched = provider
        .create(&claim("c1", wants_block.clone()))
        .await
        .unwrap();
    assert_eq!(
        label(&launched, labels::AWS_CAPACITY_RESERVATION_ID),
        "cr-block"
    );
    // The block is full; spot and on-demand carry no reservation type, so nothing fits.
    assert!(provider.create(&claim("c2", wants_block)).await.is_err());
    let outside = json!([{"key": labels::AWS_CAPACITY_RESERVATION_ID, "operator": "DoesNotExist"}]);
    let plain = provider.create(&claim("c3", outside)).await.unwrap();
    assert_eq!(label(&plain, labels::CAPACITY_TYPE), "spot");
}

#[tokio::test]
async fn reservations_parse_from_json_and_count_what_nodes_hold() {
    use karpenter_cloudprovider_fake::node_instances::{
        node_for, provider_id, reservations_in_use,
    };
    use karpenter_cloudprovider_fake::reservations::parse_reservations;
    let parsed = parse_reservations(
        r#"[{"id": "cr-1", "instanceType": "a1.large", "zone": "test-1a", "count": 3},
            {"id": "cr-2", "instanceType": "a1.large", "zone": "test-1b", "count": 1,
             "type": "capacity-block", "interruptible": false}]"#,
    )
    .unwrap();
    assert_eq!(
        parsed[0],
        FakeReservation::new("cr-1", "a1.large", "test-1a", 3)
    );
    assert_eq!(parsed[1].reservation_type, RESERVATION_TYPE_CAPACITY_BLOCK);
    let err =
        parse_reservations(r#"[{"id": "cr-1", "instanceType": "a1.large", "zone": "test-1a"}]"#)
            .unwrap_err();
    assert!(err.contains("[0]") && err.contains("count"), "{err}");
    let err = parse_reservations(r#"[{"id": "cr-1", "instanceTyp": "a1.large"}]"#).unwrap_err();
    assert!(err.contains("instanceTyp"), "{err}");

    let provider = provider();
    for r in parsed {
        provider.add_reservation(r).unwrap();
    }
    assert!(provider.has_reservations());
    // Two Nodes launched into cr-1 (the in-cluster provider's instances) and one that
    // holds no reservation.
    let launched = provider
        .create(&claim("a", pinned(&["cr-1"])))
        .await
        .unwrap();
    provider.delete(&launched).await.unwrap();
    let node = |name: &str| node_for(&launched, name, &provider_id("test-1a", name));
    let mut plain = node("n3");
    plain
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove(labels::AWS_CAPACITY_RESERVATION_ID);
    let used = reservations_in_use(&[node("n1"), node("n2"), plain]);
    assert_eq!(used, [("cr-1".to_owned(), 2)].into());
    provider.set_reservations_held_elsewhere(used);
    let types = provider.instance_types(&pool()).await.unwrap();
    let offering = |id: &str| {
        types[0]
            .offerings
            .iter()
            .find(|o| o.reservation_id() == Some(id))
            .cloned()
            .unwrap()
    };
    let cr1 = offering("cr-1");
    assert_eq!(
        (cr1.reservation.unwrap().capacity, cr1.available),
        (1, true)
    );
    let cr2 = offering("cr-2");
    assert_eq!(
        (cr2.reservation.unwrap().capacity, cr2.available),
        (1, true)
    );
    // Full once the Nodes hold all three: nothing more is offered or launched into it.
    provider.set_reservations_held_elsewhere([("cr-1".to_owned(), 3)].into());
    assert_eq!(
        reserved(&provider, "cr-1").await,
        Some((0, false, 1.0 / 10_000_000.0))
    );
    let err = provider
        .create(&claim("b", pinned(&["cr-1"])))
        .await
        .expect_err("cr-1 is full");
    assert!(err.is_insufficient_capacity(), "{err:?}");
}
