//! The fake provider against the `CloudProvider` contract.

use karpenter_catalog::pricing::spot_price;
use karpenter_catalog::{Catalogue, CatalogueOptions};
use karpenter_cloudprovider::{CloudProvider, CloudProviderError, DriftReason, OfferingRef};
use karpenter_cloudprovider_fake::{FakeCloudProvider, ProviderCall};
use karpenter_scheduling::labels;
use serde_json::json;

mod common;
use common::{claim, label, pool, types_in};

fn offering(it: &str, zone: &str, ct: &str) -> OfferingRef {
    OfferingRef {
        instance_type: it.into(),
        zone: zone.into(),
        capacity_type: ct.into(),
    }
}

/// Two small types: `a1.large` (spot and on-demand, $1.00, zones a and b) and `b1.large`
/// (on-demand only, $0.10, zone a).
fn small_provider() -> FakeCloudProvider {
    let catalogue = Catalogue::from_json(
        r#"{"region": "test-1", "instance_types": [
          {"name": "a1.large", "vcpu": 2, "memory_mib": 4096, "architecture": "amd64",
           "max_network_interfaces": 3, "ipv4_per_interface": 10,
           "usage_classes": ["on-demand", "spot"], "on_demand_price_per_hour_usd": 1.0,
           "zones": ["test-1a", "test-1b"]},
          {"name": "b1.large", "vcpu": 2, "memory_mib": 4096, "architecture": "amd64",
           "max_network_interfaces": 3, "ipv4_per_interface": 10,
           "usage_classes": ["on-demand"], "on_demand_price_per_hour_usd": 0.1,
           "zones": ["test-1a"]}]}"#,
    )
    .unwrap();
    FakeCloudProvider::from_catalogue(&catalogue, &CatalogueOptions::default()).unwrap()
}

#[tokio::test]
async fn create_launches_cheapest_spot_offering_with_status_and_labels() {
    let provider = FakeCloudProvider::default();
    let names = ["m5.large", "c5.large", "m5.xlarge"];
    let launched = provider
        .create(&claim("c1", types_in(&names), json!({})))
        .await
        .unwrap();

    // Expected: the cheapest spot price over every (type, zone) by the documented rule.
    let catalogue = Catalogue::embedded();
    let mut best: Option<(f64, &str, &str)> = None;
    for name in names {
        let e = catalogue.get(name).unwrap();
        for zone in &e.zones {
            let p = spot_price(name, zone, e.on_demand_price_per_hour_usd);
            if best.is_none_or(|(bp, _, _)| p < bp) {
                best = Some((p, name, zone));
            }
        }
    }
    let (price, it, zone) = best.unwrap();
    assert_eq!(label(&launched, labels::INSTANCE_TYPE), it);
    assert_eq!(label(&launched, labels::ZONE), zone);
    assert_eq!(label(&launched, labels::CAPACITY_TYPE), "spot");
    assert_eq!(label(&launched, "karpenter.sh/nodepool"), "default");
    assert_eq!(label(&launched, labels::ARCH), "amd64");
    let provider_id = launched.provider_id().to_string();
    assert_eq!(provider_id, format!("fake://{zone}/i-00000000000000001"));
    assert_eq!(provider.price_of(&provider_id), Some(price));
    let status = launched.status.as_ref().unwrap();
    assert!(status.capacity.contains_key("cpu") && status.allocatable.contains_key("memory"));
}

#[tokio::test]
async fn status_quantities_of_m5_large() {
    let provider = FakeCloudProvider::default();
    let req = json!([
        {"key": labels::INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]},
        {"key": labels::CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": labels::ZONE, "operator": "In", "values": ["us-east-1b"]}
    ]);
    let launched = provider.create(&claim("c1", req, json!({}))).await.unwrap();
    assert_eq!(label(&launched, labels::ZONE), "us-east-1b");
    assert_eq!(label(&launched, labels::CAPACITY_TYPE), "on-demand");
    let status = launched.status.as_ref().unwrap();
    let q = |m: &std::collections::BTreeMap<
        String,
        k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    >,
             k: &str| m.get(k).map(|q| q.0.clone()).unwrap_or_default();
    // 2 vCPU − 70m; 7577Mi − 574Mi − 100Mi = 6903Mi; 29 pods.
    assert_eq!(q(&status.allocatable, "cpu"), "1930m");
    assert_eq!(q(&status.allocatable, "memory"), "6903Mi");
    assert_eq!(q(&status.allocatable, "pods"), "29");
    assert_eq!(q(&status.capacity, "memory"), "7577Mi");
    assert_eq!(provider.price_of(launched.provider_id()), Some(0.096));
}

#[tokio::test]
async fn on_demand_only_claim_takes_cheapest_on_demand_type_then_zone() {
    let provider = FakeCloudProvider::default();
    let req = json!([
        {"key": labels::INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "c5.large"]},
        {"key": labels::CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}
    ]);
    let launched = provider.create(&claim("c1", req, json!({}))).await.unwrap();
    // c5.large $0.085 < m5.large $0.096; equal prices in every zone: the first zone wins.
    assert_eq!(label(&launched, labels::INSTANCE_TYPE), "c5.large");
    assert_eq!(label(&launched, labels::ZONE), "us-east-1a");
    assert_eq!(label(&launched, labels::CAPACITY_TYPE), "on-demand");
}

#[tokio::test]
async fn spot_is_preferred_over_cheaper_on_demand() {
    let provider = small_provider();
    let launched = provider
        .create(&claim("c1", json!([]), json!({})))
        .await
        .unwrap();
    // b1.large on-demand costs $0.10, a1.large spot at least $0.30: Karpenter still buys spot.
    assert_eq!(label(&launched, labels::CAPACITY_TYPE), "spot");
    assert_eq!(label(&launched, labels::INSTANCE_TYPE), "a1.large");
    let cheaper_zone =
        if spot_price("a1.large", "test-1a", 1.0) <= spot_price("a1.large", "test-1b", 1.0) {
            "test-1a"
        } else {
            "test-1b"
        };
    assert_eq!(label(&launched, labels::ZONE), cheaper_zone);
}

#[tokio::test]
async fn insufficient_capacity_marks_offerings_unavailable_then_falls_back() {
    let provider = small_provider();
    let spot_a = offering("a1.large", "test-1a", "spot");
    let spot_b = offering("a1.large", "test-1b", "spot");
    provider.insufficient_capacity([spot_a.clone(), spot_b.clone()]);

    let err = provider
        .create(&claim("c1", json!([]), json!({})))
        .await
        .unwrap_err();
    let CloudProviderError::InsufficientCapacity { mut offerings, .. } = err else {
        panic!("expected insufficient capacity, got {err}");
    };
    offerings.sort();
    assert_eq!(offerings, [spot_a.clone(), spot_b.clone()]);
    assert_eq!(
        provider.unavailable_offerings(),
        [spot_a.clone(), spot_b.clone()]
    );
    assert_eq!(provider.instance_count(), 0);

    // The scheduler now sees the spot offerings unavailable...
    let types = provider.instance_types(&pool(json!([]))).await.unwrap();
    let a1 = types.iter().find(|t| t.name == "a1.large").unwrap();
    for o in &a1.offerings {
        assert_eq!(o.available, o.capacity_type != "spot", "{o:?}");
    }
    // ...and the retry falls back to the cheapest on-demand offering.
    let launched = provider
        .create(&claim("c1", json!([]), json!({})))
        .await
        .unwrap();
    assert_eq!(label(&launched, labels::CAPACITY_TYPE), "on-demand");
    assert_eq!(label(&launched, labels::INSTANCE_TYPE), "b1.large");

    // Once the cache is reset and capacity is back, spot is bought again.
    provider.clear_insufficient_capacity();
    provider.reset_unavailable_offerings();
    let launched = provider
        .create(&claim("c2", json!([]), json!({})))
        .await
        .unwrap();
    assert_eq!(label(&launched, labels::CAPACITY_TYPE), "spot");
}

#[tokio::test]
async fn partial_insufficient_capacity_launches_next_cheapest_offering() {
    let provider = small_provider();
    let (cheap, dear) =
        if spot_price("a1.large", "test-1a", 1.0) <= spot_price("a1.large", "test-1b", 1.0) {
            ("test-1a", "test-1b")
        } else {
            ("test-1b", "test-1a")
        };
    provider.insufficient_capacity([offering("a1.large", cheap, "spot")]);
    let launched = provider
        .create(&claim("c1", json!([]), json!({})))
        .await
        .unwrap();
    assert_eq!(label(&launched, labels::ZONE), dear);
    assert_eq!(label(&launched, labels::CAPACITY_TYPE), "spot");
    assert_eq!(
        provider.unavailable_offerings(),
        [offering("a1.large", cheap, "spot")]
    );
}

#[tokio::test]
async fn launch_faults_fail_named_offerings_and_delay_others() {
    use karpenter_cloudprovider_fake::launch_faults::{LaunchFaults, OfferingPattern};
    use std::time::Duration;
    let faults = LaunchFaults {
        // Every spot offering of a1.large: like CreateFleet, a launch tries only the
        // preferred capacity type (spot) and fails; the next falls back to on-demand.
        insufficient_capacity: vec![OfferingPattern::parse("a1.large/*/spot").unwrap()],
        delays: vec![(
            OfferingPattern::parse("b1.large").unwrap(),
            Duration::from_secs(7),
        )],
    };
    let provider = small_provider().with_launch_faults(faults).unwrap();
    let a1 = json!([{"key": labels::INSTANCE_TYPE, "operator": "In", "values": ["a1.large"]}]);
    let err = provider
        .create(&claim("c1", a1.clone(), json!({})))
        .await
        .unwrap_err();
    assert!(err.is_insufficient_capacity(), "{err}");
    assert_eq!(
        provider.unavailable_offerings(),
        [
            offering("a1.large", "test-1a", "spot"),
            offering("a1.large", "test-1b", "spot")
        ]
    );
    let launched = provider.create(&claim("c1", a1, json!({}))).await.unwrap();
    assert_eq!(label(&launched, labels::CAPACITY_TYPE), "on-demand");
    assert_eq!(provider.launch_delay_of(&launched), Duration::ZERO);
    let spot_only = json!([
        {"key": labels::INSTANCE_TYPE, "operator": "In", "values": ["a1.large"]},
        {"key": labels::CAPACITY_TYPE, "operator": "In", "values": ["spot"]}
    ]);
    let err = provider
        .create(&claim("c2", spot_only, json!({})))
        .await
        .unwrap_err();
    assert!(err.is_insufficient_capacity(), "{err}");
    let b1 = json!([{"key": labels::INSTANCE_TYPE, "operator": "In", "values": ["b1.large"]}]);
    let slow = provider.create(&claim("c3", b1, json!({}))).await.unwrap();
    assert_eq!(provider.launch_delay_of(&slow), Duration::from_secs(7));
    let typo = LaunchFaults {
        insufficient_capacity: vec![OfferingPattern::parse("c1.large").unwrap()],
        ..LaunchFaults::default()
    };
    let e = small_provider().with_launch_faults(typo).unwrap_err();
    assert!(e.to_string().contains("c1.large"), "{e}");
}

#[tokio::test]
async fn requests_and_requirements_that_nothing_meets() {
    let provider = small_provider();
    // 2 vCPU types have 1930m allocatable: 2 cpu does not fit.
    let err = provider
        .create(&claim("c1", json!([]), json!({"cpu": "2"})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, CloudProviderError::InsufficientCapacity { ref offerings, .. } if offerings.is_empty())
    );
    let fits = provider
        .create(&claim("c2", json!([]), json!({"cpu": "1900m"})))
        .await;
    assert!(fits.is_ok());
    let zone_c = json!([{"key": labels::ZONE, "operator": "In", "values": ["test-1c"]}]);
    assert!(
        provider
            .create(&claim("c3", zone_c, json!({})))
            .await
            .unwrap_err()
            .is_insufficient_capacity()
    );
    let bad = json!([{"key": labels::ZONE, "operator": "Gt", "values": ["x"]}]);
    let err = provider
        .create(&claim("c4", bad, json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, CloudProviderError::Create { ref reason, .. } if reason == "InvalidRequirements"),
        "{err}"
    );
}

#[tokio::test]
async fn get_list_delete_like_a_real_cloud() {
    let provider = small_provider();
    let a = provider
        .create(&claim("a", json!([]), json!({})))
        .await
        .unwrap();
    let b = provider
        .create(&claim("b", json!([]), json!({})))
        .await
        .unwrap();
    assert_ne!(a.provider_id(), b.provider_id());
    assert!(b.provider_id().ends_with("i-00000000000000002"));
    let got = provider.get(a.provider_id()).await.unwrap();
    assert_eq!(
        (
            got.name(),
            got.provider_id(),
            &got.status,
            &got.metadata.labels
        ),
        (a.name(), a.provider_id(), &a.status, &a.metadata.labels)
    );
    let listed = provider.list().await.unwrap();
    assert_eq!(
        listed.iter().map(|c| c.name()).collect::<Vec<_>>(),
        ["a", "b"]
    );

    provider.delete(&a).await.unwrap();
    let err = provider.delete(&a).await.unwrap_err();
    assert_eq!(
        err,
        CloudProviderError::NotFound {
            provider_id: a.provider_id().to_string()
        }
    );
    assert!(
        provider
            .get(a.provider_id())
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert_eq!(provider.list().await.unwrap().len(), 1);
    // A claim that was never launched has no provider ID: NotFound by name.
    let never = claim("never", json!([]), json!({}));
    assert_eq!(
        provider.delete(&never).await.unwrap_err(),
        CloudProviderError::NotFound {
            provider_id: "never".into()
        }
    );
}

#[tokio::test]
async fn drift_node_class_readiness_and_metadata() {
    let provider = small_provider();
    let a = provider
        .create(&claim("a", json!([]), json!({})))
        .await
        .unwrap();
    assert_eq!(provider.is_drifted(&a).await.unwrap(), None);
    provider.set_drifted("a", DriftReason::new("AMIDrift"));
    assert_eq!(
        provider.is_drifted(&a).await.unwrap(),
        Some(DriftReason::new("AMIDrift"))
    );
    provider.clear_drift("a");
    provider.set_drifted(a.provider_id(), DriftReason::new("SubnetDrift"));
    assert_eq!(
        provider.is_drifted(&a).await.unwrap(),
        Some(DriftReason::new("SubnetDrift"))
    );

    provider.set_node_class_not_ready(Some("no subnets".into()));
    let err = provider
        .create(&claim("b", json!([]), json!({})))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        CloudProviderError::NodeClassNotReady {
            name: "default".into(),
            reason: "no subnets".into()
        }
    );
    provider.set_node_class_not_ready(None);
    assert!(
        provider
            .create(&claim("b", json!([]), json!({})))
            .await
            .is_ok()
    );

    assert_eq!(provider.name(), "fake");
    let policies = provider.repair_policies();
    assert_eq!(policies.len(), 2);
    assert!(
        policies
            .iter()
            .all(|p| p.condition_type == "Ready" && p.toleration_duration.as_secs() == 1800)
    );
    let slow = small_provider().with_launch_latency(std::time::Duration::from_secs(45));
    assert_eq!(slow.launch_latency().as_secs(), 45);
}

#[tokio::test]
async fn instance_types_optionally_filtered_by_pool() {
    let arm = json!([{"key": labels::ARCH, "operator": "In", "values": ["arm64"]}]);
    let all = FakeCloudProvider::default();
    assert_eq!(
        all.instance_types(&pool(arm.clone())).await.unwrap().len(),
        1340
    );
    let filtering = FakeCloudProvider::default().with_node_pool_filtering(true);
    let types = filtering.instance_types(&pool(arm)).await.unwrap();
    assert_eq!(types.len(), 396);
    assert!(
        types
            .iter()
            .all(|t| t.requirements.get(labels::ARCH).unwrap().has("arm64"))
    );
}

#[tokio::test]
async fn every_call_is_recorded() {
    let provider = small_provider();
    let a = provider
        .create(&claim("a", json!([]), json!({})))
        .await
        .unwrap();
    let id = a.provider_id().to_string();
    provider.get(&id).await.unwrap();
    provider.list().await.unwrap();
    provider.instance_types(&pool(json!([]))).await.unwrap();
    provider.is_drifted(&a).await.unwrap();
    provider.delete(&a).await.unwrap();
    let _ = provider.get("fake://nowhere/i-0").await;
    let call = |method, argument: &str| ProviderCall {
        method,
        argument: argument.into(),
    };
    assert_eq!(
        provider.calls(),
        [
            call("create", "a"),
            call("get", &id),
            call("list", ""),
            call("instance_types", "default"),
            call("is_drifted", "a"),
            call("delete", &id),
            call("get", "fake://nowhere/i-0"),
        ]
    );
    provider.clear_calls();
    assert!(provider.calls().is_empty());
}

/// A resource the catalogue does not know (a NodeOverlay's `capacity`, which a device plugin
/// would advertise) is taken to be present as requested, as Karpenter's kwok provider does;
/// resources the type defines must still fit.
#[tokio::test]
async fn unknown_extended_resources_are_assumed_present_as_requested() {
    let provider = small_provider();
    let launched = provider
        .create(&claim(
            "fuse",
            types_in(&["b1.large"]),
            json!({"cpu": "1", "example.com/fuse": "2"}),
        ))
        .await
        .unwrap();
    let status = launched.status.unwrap();
    assert_eq!(status.capacity["example.com/fuse"].0, "2");
    assert_eq!(status.allocatable["example.com/fuse"].0, "2");
    let too_big = provider
        .create(&claim(
            "big",
            types_in(&["b1.large"]),
            json!({"cpu": "3", "example.com/fuse": "1"}),
        ))
        .await;
    assert!(matches!(
        too_big,
        Err(CloudProviderError::InsufficientCapacity { .. })
    ));
}
