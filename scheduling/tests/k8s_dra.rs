//! A pod's ResourceClaims resolved from resource.k8s.io/v1 objects (the `k8s` feature).
#![cfg(feature = "k8s")]

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::resource::v1 as resource;
use karpenter_scheduling::devices::DeviceCount;
use karpenter_scheduling::k8s::{DraObjects, device_claims_from_k8s};
use serde_json::{Value, json};
use std::collections::BTreeMap;

#[derive(Default)]
struct Objects {
    claims: BTreeMap<String, resource::ResourceClaim>,
    templates: BTreeMap<String, resource::ResourceClaimTemplate>,
    classes: BTreeMap<String, resource::DeviceClass>,
}

impl DraObjects for Objects {
    fn resource_claim(&self, ns: &str, name: &str) -> Option<&resource::ResourceClaim> {
        self.claims.get(&format!("{ns}/{name}"))
    }
    fn resource_claim_template(
        &self,
        ns: &str,
        name: &str,
    ) -> Option<&resource::ResourceClaimTemplate> {
        self.templates.get(&format!("{ns}/{name}"))
    }
    fn device_class(&self, name: &str) -> Option<&resource::DeviceClass> {
        self.classes.get(name)
    }
}

fn claim_spec(requests: Value) -> Value {
    json!({"devices": {"requests": requests}})
}

fn objects() -> Objects {
    let mut o = Objects::default();
    o.classes.insert(
        "gpu".into(),
        serde_json::from_value(json!({
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.fake.karpenter.sh\""}}]}
        }))
        .unwrap(),
    );
    o.templates.insert(
        "ml/two-gpus".into(),
        serde_json::from_value(json!({
            "metadata": {"name": "two-gpus", "namespace": "ml"},
            "spec": {"spec": claim_spec(json!([{"name": "gpus", "exactly": {
                "deviceClassName": "gpu", "count": 2,
                "selectors": [{"cel": {"expression": "device.attributes[\"gpu.fake.karpenter.sh\"].model == \"t4\""}}]
            }}]))}
        }))
        .unwrap(),
    );
    o.claims.insert(
        "ml/shared".into(),
        serde_json::from_value(json!({
            "metadata": {"name": "shared", "namespace": "ml"},
            "spec": claim_spec(json!([{"name": "all", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]))
        }))
        .unwrap(),
    );
    o.claims.insert(
        "ml/matching".into(),
        serde_json::from_value(json!({
            "metadata": {"name": "matching", "namespace": "ml"},
            "spec": {"devices": {
                "requests": [{"name": "a", "exactly": {"deviceClassName": "gpu"}}],
                "constraints": [{"matchAttribute": "gpu.fake.karpenter.sh/model"}]
            }}
        }))
        .unwrap(),
    );
    o
}

fn pod(claims: Value, statuses: Value) -> core::Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {"containers": [{"name": "c"}], "resourceClaims": claims},
        "status": {"resourceClaimStatuses": statuses}
    }))
    .unwrap()
}

#[test]
fn templates_direct_claims_and_classes_resolve() {
    let o = objects();
    let p = pod(
        json!([
            {"name": "train", "resourceClaimTemplateName": "two-gpus"},
            {"name": "all", "resourceClaimName": "shared"}
        ]),
        json!([]),
    );
    let claims = device_claims_from_k8s(&p, &o);
    assert_eq!(claims.len(), 2);
    assert_eq!(claims[0].key, "ml/trainer/train");
    assert_eq!(claims[0].unsupported, None);
    let r = &claims[0].requests[0];
    assert_eq!(r.count, DeviceCount::ExactCount(2));
    assert_eq!(r.device_class, "gpu");
    // The class's selector comes first, then the request's.
    assert_eq!(r.selectors.len(), 2);
    assert!(r.selectors[0].contains("device.driver"));
    assert!(r.selectors[1].contains("t4"));
    assert_eq!(claims[1].key, "ml/shared");
    assert_eq!(claims[1].requests[0].count, DeviceCount::All);
}

#[test]
fn generated_claims_and_what_cannot_be_simulated() {
    let o = objects();
    // A status with no generated claim: nothing to allocate.
    let p = pod(
        json!([{"name": "train", "resourceClaimTemplateName": "two-gpus"}]),
        json!([{"name": "train"}]),
    );
    assert!(device_claims_from_k8s(&p, &o).is_empty());
    // A generated claim that exists is used by its own name.
    let p = pod(
        json!([{"name": "train", "resourceClaimTemplateName": "two-gpus"}]),
        json!([{"name": "train", "resourceClaimName": "shared"}]),
    );
    assert_eq!(device_claims_from_k8s(&p, &o)[0].key, "ml/shared");
    let why = |claims: Value| {
        let c = device_claims_from_k8s(&pod(claims, json!([])), &o);
        c[0].unsupported.clone().unwrap_or_default()
    };
    assert!(why(json!([{"name": "x", "resourceClaimName": "missing"}])).contains("does not exist"));
    assert!(
        why(json!([{"name": "x", "resourceClaimTemplateName": "missing"}])).contains("ml/missing")
    );
    assert!(why(json!([{"name": "x", "resourceClaimName": "matching"}])).contains("constraints"));
}
