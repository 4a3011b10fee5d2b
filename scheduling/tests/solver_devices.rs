//! Dynamic Resource Allocation in `solve`: pods with ResourceClaims go only where the instance
//! type's (or node's) devices serve every claim placed there, as Karpenter's DRA simulation.

use karpenter_scheduling::devices::{
    Device, DeviceAttribute, DeviceClaim, DeviceCount, DeviceRequest,
};
use karpenter_scheduling::model::{InstanceType, NodePool, Pod};
use karpenter_scheduling::plan::Plan;
use karpenter_testing::*;
use std::collections::BTreeMap;
use std::sync::Arc;

const DRIVER: &str = "gpu.example.com";

fn gpus(model: &str, n: usize) -> Vec<Device> {
    (0..n)
        .map(|i| Device {
            driver: DRIVER.into(),
            pool: "node".into(),
            name: format!("gpu-{i}"),
            attributes: BTreeMap::from([
                ("model".into(), DeviceAttribute::String(model.into())),
                ("memory".into(), DeviceAttribute::Int(16)),
            ]),
            capacity: BTreeMap::new(),
        })
        .collect()
}

fn with_devices(it: Arc<InstanceType>, devices: Vec<Device>) -> Arc<InstanceType> {
    let mut it = (*it).clone();
    it.devices = devices;
    Arc::new(it)
}

/// cpu (no device, cheapest), g1 (one T4), g4 (four T4, cheaper per GPU), h1 (one H100).
fn gpu_pool() -> NodePool {
    NodePool {
        name: "default".into(),
        instance_types: vec![
            InstanceTypeBuilder::new("cpu", 8, 32)
                .on_demand(0.1)
                .build(),
            with_devices(
                InstanceTypeBuilder::new("g1", 8, 32).on_demand(0.5).build(),
                gpus("T4", 1),
            ),
            with_devices(
                InstanceTypeBuilder::new("g4", 32, 128)
                    .on_demand(1.2)
                    .build(),
                gpus("T4", 4),
            ),
            with_devices(
                InstanceTypeBuilder::new("h1", 8, 32).on_demand(3.0).build(),
                gpus("H100", 1),
            ),
        ],
        ..NodePool::default()
    }
}

fn claim(key: &str, selector: Option<&str>, count: DeviceCount) -> DeviceClaim {
    let mut selectors = vec![format!("device.driver == \"{DRIVER}\"")];
    selectors.extend(selector.map(str::to_string));
    DeviceClaim {
        key: key.into(),
        requests: vec![DeviceRequest {
            name: "gpu".into(),
            device_class: "gpu.example.com".into(),
            selectors,
            count,
        }],
        unsupported: None,
    }
}

fn gpu_pod(name: &str, claims: Vec<DeviceClaim>) -> Pod {
    let mut p = pod(name, 1000, GI);
    p.device_claims = claims;
    p
}

fn options(plan: &Plan, c: usize) -> Vec<String> {
    plan.new_node_claims[c]
        .instance_type_options
        .iter()
        .map(|o| o.name.to_string())
        .collect()
}

#[test]
fn a_claim_pod_gets_an_instance_type_with_the_device() {
    let one = DeviceCount::ExactCount(1);
    let plan = solve_default(&snapshot(
        vec![gpu_pod("p", vec![claim("default/p-gpu", None, one)])],
        vec![gpu_pool()],
    ));
    assert!(plan.unschedulable.is_empty(), "{plan:#?}");
    assert_eq!(options(&plan, 0), ["g1", "g4", "h1"]);
    // The same pod without claims (ignore-dra-requests) takes the cheapest type.
    let plan = solve_default(&snapshot(vec![gpu_pod("p", vec![])], vec![gpu_pool()]));
    assert_eq!(options(&plan, 0)[0], "cpu");
    // A selector on the model narrows to it.
    let h100 = r#"device.attributes["gpu.example.com"].model == "H100""#;
    let plan = solve_default(&snapshot(
        vec![gpu_pod("p", vec![claim("default/p-gpu", Some(h100), one)])],
        vec![gpu_pool()],
    ));
    assert_eq!(options(&plan, 0), ["h1"]);
}

#[test]
fn devices_are_counted_per_node_across_pods_and_shared_claims_once() {
    let one = DeviceCount::ExactCount(1);
    let pods: Vec<Pod> = (0..5)
        .map(|i| {
            gpu_pod(
                &format!("p{i}"),
                vec![claim(&format!("default/c{i}"), None, one)],
            )
        })
        .collect();
    let plan = solve_greedy(&snapshot(pods, vec![gpu_pool()]));
    assert!(plan.unschedulable.is_empty(), "{plan:#?}");
    // Never more claims on a node than its type has GPUs.
    for c in &plan.new_node_claims {
        let n = c.pods.len();
        for o in c.instance_type_options.iter() {
            let gpus = match &*o.name {
                "g4" => 4,
                "g1" | "h1" => 1,
                other => panic!("{other} has no GPU"),
            };
            assert!(n <= gpus, "{n} pods on {}: {plan:#?}", o.name);
        }
    }
    assert_eq!(plan.placed_pods(), 5);
    // Two pods naming one claim share its device: both fit a one-GPU type.
    let shared = claim("default/shared", None, one);
    let plan = solve_greedy(&snapshot(
        vec![
            gpu_pod("a", vec![shared.clone()]),
            gpu_pod("b", vec![shared]),
        ],
        vec![gpu_pool()],
    ));
    assert_eq!(plan.new_node_claims.len(), 1, "{plan:#?}");
    assert_eq!(options(&plan, 0)[0], "g1");
}

#[test]
fn a_claim_no_type_can_serve_is_unschedulable_with_a_reason() {
    let a100 = r#"device.attributes["gpu.example.com"].model == "A100""#;
    let plan = solve_default(&snapshot(
        vec![gpu_pod(
            "p",
            vec![claim("default/big", Some(a100), DeviceCount::ExactCount(1))],
        )],
        vec![gpu_pool()],
    ));
    let why = reason(&plan, "p").expect("unschedulable");
    assert!(
        why.contains("allocating dynamic resources")
            && why.contains("ResourceClaim default/big request gpu")
            && why.contains("A100"),
        "{why}"
    );
    // Five GPUs in one claim: no type has that many.
    let plan = solve_default(&snapshot(
        vec![gpu_pod(
            "p",
            vec![claim("default/five", None, DeviceCount::ExactCount(5))],
        )],
        vec![gpu_pool()],
    ));
    assert!(reason(&plan, "p").is_some_and(|r| r.contains("5 device(s)")));
    // A selector outside the CEL subset is reported, not guessed.
    let plan = solve_default(&snapshot(
        vec![gpu_pod(
            "p",
            vec![claim(
                "default/cel",
                Some("device.allowMultipleAllocations == true"),
                DeviceCount::ExactCount(1),
            )],
        )],
        vec![gpu_pool()],
    ));
    let why = reason(&plan, "p").expect("unschedulable");
    assert!(
        why.contains("CEL selector") && why.contains("allowMultipleAllocations"),
        "{why}"
    );
}

#[test]
fn all_mode_takes_every_matching_device() {
    let plan = solve_greedy(&snapshot(
        vec![
            gpu_pod("all", vec![claim("default/all", None, DeviceCount::All)]),
            gpu_pod(
                "one",
                vec![claim("default/one", None, DeviceCount::ExactCount(1))],
            ),
        ],
        vec![gpu_pool()],
    ));
    assert!(plan.unschedulable.is_empty(), "{plan:#?}");
    assert_eq!(plan.new_node_claims.len(), 2, "{plan:#?}");
}

#[test]
fn existing_nodes_count_devices_of_bound_pods() {
    let one = DeviceCount::ExactCount(1);
    let mut busy = node("a-busy", "zone-a", 8, 32);
    busy.devices = gpus("T4", 1);
    let mut free = node("b-free", "zone-a", 8, 32);
    free.devices = gpus("T4", 1);
    let plain = node("c-plain", "zone-a", 8, 32);
    let mut snap = snapshot(
        vec![gpu_pod("p", vec![claim("default/p", None, one)])],
        vec![gpu_pool()],
    );
    snap.nodes = vec![busy, free, plain];
    snap.bound_pods = vec![bound(
        gpu_pod("user", vec![claim("default/user", None, one)]),
        "a-busy",
    )];
    let plan = solve_default(&snap);
    assert!(plan.new_node_claims.is_empty(), "{plan:#?}");
    assert_eq!(plan.existing.len(), 1);
    assert_eq!(plan.existing[0].node, "b-free");
    // With the free device taken too, the pod needs a new GPU node.
    snap.bound_pods.push(bound(
        gpu_pod("user2", vec![claim("default/user2", None, one)]),
        "b-free",
    ));
    let plan = solve_default(&snap);
    assert!(plan.existing.is_empty(), "{plan:#?}");
    assert_eq!(options(&plan, 0)[0], "g1");
}
