//! The entry point of the `manifests` fuzz target (`fuzz/`), shared with this crate's tests,
//! which replay the committed corpus through it on stable Rust and drive it from proptest
//! generators. Not part of the API: hidden from the documentation and free to change.
//!
//! It follows `karpenter plan` from text to plan — [`crate::manifests::parse_str`],
//! [`Inputs::from_documents`], [`Inputs::snapshot`], `solve` — and converts each document the
//! way the controller converts what its watches hold ([`crate::api_objects`]). It panics only
//! when that code panics or breaks a property checked here.

use crate::api_objects::{in_flight_record, node_record, pdb_record, pod_record};
use crate::inputs::Inputs;
use crate::manifests::{Document, Origin, parse_str};
use k8s_openapi::api::{core::v1 as core, policy::v1 as policy};
use karpenter_scheduling::labels;
use karpenter_scheduling::model::{InstanceType, Offering};
use karpenter_scheduling::{Operator, Requirement, Requirements, Resources, SolveOptions, solve};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// Pods a workload may ask for in a fuzz run; larger counts up to the real limit are lowered
/// to this (expanding 150,000 identical pods finds nothing new and takes the fuzzer's time),
/// while counts beyond the limit, negative or malformed ones are left for the conversion to
/// reject.
pub const MAX_FUZZ_REPLICAS: i64 = 32;

/// Pending pods beyond which the fuzz run stops before solving (the solver is fuzzed for
/// unusual pods, not for its running time on many).
pub const MAX_FUZZ_PODS: usize = 200;

/// Parses `data` (invalid UTF-8 replaced) as a manifest file and carries every document as
/// far as `karpenter plan` and the controller's watches would.
pub fn manifests(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(mut docs) = parse_str(Path::new("fuzz.yaml"), &text) else {
        return;
    };
    for doc in &mut docs {
        cap_replicas(&mut doc.value);
        watched(doc);
    }
    let Ok(inputs) = Inputs::from_documents(&docs) else {
        return;
    };
    let Ok(snapshot) = inputs.snapshot(&instance_types()) else {
        return;
    };
    if snapshot.pending_pods.len() > MAX_FUZZ_PODS {
        return;
    }
    let mut options = SolveOptions::default();
    options.optimizer.max_work = 2_000_000;
    let plan = solve(&snapshot, &options);
    // `karpenter plan -o json` prints this.
    serde_json::to_string(&plan).expect("a plan serialises");
    if let Some(greedy) = plan.greedy_price {
        assert!(
            plan.total_price <= greedy + 1e-6 * greedy.abs().max(1.0),
            "the optimiser made the plan dearer: {} > {greedy}",
            plan.total_price
        );
    }
}

/// Lowers `spec.replicas`, `spec.parallelism` and `spec.completions` (see
/// [`MAX_FUZZ_REPLICAS`]), also inside `kind: List` items.
pub fn cap_replicas(value: &mut Value) {
    if let Some(Value::Array(items)) = value.get_mut("items") {
        items.iter_mut().for_each(cap_replicas);
    }
    let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let limit = i64::from(karpenter_scheduling::k8s::MAX_PODS);
    for field in ["replicas", "parallelism", "completions"] {
        if let Some(n) = spec.get_mut(field)
            && n.as_i64()
                .is_some_and(|c| c > MAX_FUZZ_REPLICAS && c <= limit)
        {
            *n = Value::from(MAX_FUZZ_REPLICAS);
        }
    }
}

/// The controller's conversions of watched objects; errors are fine, panics are not.
fn watched(doc: &Document) {
    let _ = (Origin(doc).to_string(), doc.api_version(), doc.namespace());
    match doc.kind() {
        Some("Pod") => {
            if let Ok(pod) = doc.decode::<core::Pod>() {
                let _ = pod_record(&pod);
            }
        }
        Some("Node") => {
            if let Ok(node) = doc.decode::<core::Node>() {
                let _ = node_record(&node, None);
            }
        }
        Some("PodDisruptionBudget") => {
            if let Ok(pdb) = doc.decode::<policy::PodDisruptionBudget>() {
                let _ = pdb_record(&pdb);
            }
        }
        Some("NodeClaim") => {
            if let Ok(claim) = doc.decode::<karpenter_cloudprovider::NodeClaim>() {
                let _ = claim.validate().map_err(|e| e.to_string());
                let _ = in_flight_record(&claim);
            }
        }
        Some("NodePool") => {
            if let Ok(pool) = doc.decode_node_pool() {
                let _ = pool.validate().map_err(|e| e.to_string());
            }
        }
        _ => {}
    }
}

/// Three instance types in two zones, on-demand and spot, amd64 and arm64, with the
/// numeric labels NodePools constrain with Gt/Lt.
fn instance_types() -> Vec<Arc<InstanceType>> {
    [
        ("m5.large", "amd64", "2", "8Gi", 0.096),
        ("c6g.xlarge", "arm64", "4", "8Gi", 0.136),
        ("r5.2xlarge", "amd64", "8", "64Gi", 0.504),
    ]
    .into_iter()
    .map(|(name, arch, cpu, memory, price)| {
        let label = |key: &str, value: &str| {
            Requirement::new(key, Operator::In, [value]).expect("a valid label")
        };
        let mut requirements = Requirements::new();
        requirements.add(label(labels::INSTANCE_TYPE, name));
        requirements.add(label(labels::ARCH, arch));
        requirements.add(label(labels::OS, "linux"));
        requirements.add(label(labels::AWS_INSTANCE_CPU, cpu));
        requirements.add(label(labels::AWS_INSTANCE_GENERATION, &name[1..2]));
        requirements.add(label(labels::AWS_INSTANCE_CATEGORY, &name[..1]));
        requirements.add(
            Requirement::new(labels::ZONE, Operator::In, ["zone-a", "zone-b"])
                .expect("a valid label"),
        );
        requirements.add(
            Requirement::new(labels::CAPACITY_TYPE, Operator::In, ["on-demand", "spot"])
                .expect("a valid label"),
        );
        let offerings = ["zone-a", "zone-b"]
            .into_iter()
            .flat_map(|zone| {
                [("on-demand", price), ("spot", price * 0.4)].map(|(capacity_type, price)| {
                    Offering {
                        zone: zone.to_owned(),
                        capacity_type: capacity_type.to_owned(),
                        price,
                        available: true,
                        reservation: None,
                    }
                })
            })
            .collect();
        Arc::new(InstanceType {
            devices: Vec::new(),
            name: name.to_owned(),
            requirements,
            capacity: Resources::parse(&[("cpu", cpu), ("memory", memory), ("pods", "29")])
                .expect("valid capacity"),
            overhead: Default::default(),
            offerings,
        })
    })
    .collect()
}
