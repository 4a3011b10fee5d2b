//! The committed CRDs under charts/karpenter-rs/crds/ match the generated ones.
//! Regenerate with `UPDATE_CRDS=1 cargo test -p karpenter-cloudprovider --test crds`.

use karpenter_cloudprovider::crd::{
    capacity_buffer_crd, crd_yaml, node_claim_crd, node_overlay_crd, node_pool_crd,
};
use std::path::PathBuf;

fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/karpenter-rs/crds")
}

#[test]
fn committed_crds_are_fresh() {
    let files = [
        (
            "autoscaling.x-k8s.io_capacitybuffers.yaml",
            crd_yaml(&capacity_buffer_crd()),
        ),
        ("karpenter.sh_nodeclaims.yaml", crd_yaml(&node_claim_crd())),
        ("karpenter.sh_nodepools.yaml", crd_yaml(&node_pool_crd())),
        (
            "karpenter.sh_nodeoverlays.yaml",
            crd_yaml(&node_overlay_crd()),
        ),
    ];
    let update = std::env::var_os("UPDATE_CRDS").is_some();
    let dir = chart_dir();
    for (name, generated) in files {
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).expect("create chart dir");
            std::fs::write(&path, &generated).expect("write CRD");
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} is stale; run UPDATE_CRDS=1 cargo test -p karpenter-cloudprovider --test crds",
            path.display()
        );
    }
}

#[test]
fn crds_yaml_holds_every_document_and_upstream_rules() {
    let all = karpenter_cloudprovider::crds_yaml();
    assert_eq!(
        all.matches("\n---\n").count() + usize::from(all.starts_with("---\n")),
        4
    );
    let mut docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&all).expect("valid YAML");
    assert_eq!(docs.len(), 4);
    let buffer = docs.remove(0);
    check_capacity_buffer_crd(&buffer);
    let overlay = docs.remove(1);
    check_node_overlay_crd(&overlay);
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nodeclaims.karpenter.sh", "nodepools.karpenter.sh"]);

    let np = &docs[1];
    assert_eq!(np["spec"]["scope"], "Cluster");
    let s = &np["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let tspec = &s["properties"]["template"]["properties"]["spec"]["properties"];
    assert_eq!(tspec["expireAfter"]["default"], "720h");
    assert_eq!(
        tspec["expireAfter"]["pattern"],
        r"^(([0-9]+(s|m|h))+|Never)$"
    );
    assert_eq!(tspec["requirements"]["maxItems"], 100);
    assert_eq!(
        tspec["requirements"]["x-kubernetes-validations"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        tspec["requirements"]["items"]["properties"]["key"]["x-kubernetes-validations"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        tspec["requirements"]["items"]["properties"]["minValues"]["maximum"],
        50
    );
    assert_eq!(
        tspec["nodeClassRef"]["x-kubernetes-validations"][0]["message"],
        "nodeClassRef.group is immutable"
    );
    let d = &s["properties"]["disruption"];
    assert_eq!(d["default"], serde_json::json!({"consolidateAfter": "0s"}));
    assert_eq!(
        d["properties"]["budgets"]["default"],
        serde_json::json!([{"nodes": "10%"}])
    );
    assert_eq!(d["properties"]["budgets"]["maxItems"], 50);
    assert_eq!(
        d["properties"]["budgets"]["items"]["properties"]["nodes"]["pattern"],
        "^((100|[0-9]{1,2})%|[0-9]+)$"
    );
    assert_eq!(
        d["properties"]["consolidationPolicy"]["default"],
        "WhenEmptyOrUnderutilized"
    );
    // Karpenter v1.15: consolidateAfter is optional and defaults to 0s on its own (a
    // `disruption` block without it is admitted and defaulted), and budgets may be limited
    // to node repair (`Unhealthy`).
    assert_eq!(d["properties"]["consolidateAfter"]["default"], "0s");
    assert!(
        d.get("required")
            .and_then(|r| r.as_array())
            .is_none_or(|r| !r.iter().any(|k| k == "consolidateAfter")),
        "{d}"
    );
    assert_eq!(
        d["properties"]["budgets"]["items"]["properties"]["reasons"]["items"]["enum"],
        serde_json::json!(["Underutilized", "Empty", "Drifted", "Unhealthy"])
    );
    assert_eq!(s["properties"]["weight"]["maximum"], 100);
    assert_eq!(
        s["properties"]["limits"]["additionalProperties"]["x-kubernetes-int-or-string"],
        true
    );
    assert_eq!(s["x-kubernetes-validations"].as_array().unwrap().len(), 3);
    assert!(!all.contains("nullable"));
    let labels = &s["properties"]["template"]["properties"]["metadata"]["properties"]["labels"];
    assert_eq!(labels["maxProperties"], 100);
    assert_eq!(
        labels["x-kubernetes-validations"].as_array().unwrap().len(),
        3
    );

    let nc = &docs[0];
    let cols = nc["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap();
    assert_eq!(cols.len(), 11);
    assert_eq!(
        cols[0]["jsonPath"],
        r".metadata.labels.node\.kubernetes\.io/instance-type"
    );
    let ncs = &nc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(
        ncs["x-kubernetes-validations"][0]["rule"],
        "self == oldSelf"
    );
    assert_eq!(
        ncs["properties"]["requirements"]["items"]["properties"]["key"]["x-kubernetes-validations"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let np_cols = np["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap();
    assert_eq!(np_cols.len(), 7);
    assert_eq!(
        np["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"],
        ".spec.replicas"
    );
}

/// The NodeOverlay CRD carries upstream's names, printer columns and validation rules.
fn check_node_overlay_crd(crd: &serde_json::Value) {
    assert_eq!(crd["metadata"]["name"], "nodeoverlays.karpenter.sh");
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(crd["spec"]["names"]["shortNames"][0], "overlays");
    assert_eq!(crd["spec"]["names"]["categories"][0], "karpenter");
    let v = &crd["spec"]["versions"][0];
    assert_eq!(v["name"], "v1alpha1");
    assert_eq!(v["subresources"]["status"], serde_json::json!({}));
    let cols = v["additionalPrinterColumns"].as_array().unwrap();
    assert_eq!(cols.len(), 3);
    let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["required"], serde_json::json!(["requirements"]));
    assert_eq!(
        spec["x-kubernetes-validations"][0]["rule"],
        "!has(self.price) || !has(self.priceAdjustment)"
    );
    let p = &spec["properties"];
    assert_eq!(p["weight"]["minimum"], 1);
    assert_eq!(p["weight"]["maximum"], 10000);
    assert_eq!(p["price"]["pattern"], r"^\d+(\.\d+)?$");
    assert_eq!(
        p["priceAdjustment"]["pattern"],
        r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"
    );
    assert_eq!(
        p["capacity"]["x-kubernetes-validations"][0]["rule"],
        "self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))"
    );
    assert_eq!(
        p["capacity"]["additionalProperties"]["x-kubernetes-int-or-string"],
        true
    );
    let reqs = &p["requirements"];
    assert_eq!(reqs["maxItems"], 100);
    assert_eq!(
        reqs["x-kubernetes-validations"].as_array().unwrap().len(),
        3
    );
    assert!(reqs.get("default").is_none());
    let key = &reqs["items"]["properties"]["key"];
    assert_eq!(key["x-kubernetes-validations"].as_array().unwrap().len(), 2);
    assert_eq!(
        reqs["items"]["properties"]["operator"]["enum"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    let conditions =
        &v["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
}

/// The CapacityBuffer CRD is Karpenter v1.15's `autoscaling.x-k8s.io_capacitybuffers.yaml`:
/// names, scope, version, printer columns, defaults, ranges and CEL rules.
fn check_capacity_buffer_crd(crd: &serde_json::Value) {
    use serde_json::json;
    assert_eq!(
        crd["metadata"]["name"],
        "capacitybuffers.autoscaling.x-k8s.io"
    );
    assert_eq!(crd["spec"]["group"], "autoscaling.x-k8s.io");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    let names = &crd["spec"]["names"];
    assert_eq!(names["kind"], "CapacityBuffer");
    assert_eq!(names["listKind"], "CapacityBufferList");
    assert_eq!(names["plural"], "capacitybuffers");
    assert_eq!(names["singular"], "capacitybuffer");
    assert_eq!(names["shortNames"], json!(["cb"]));
    assert_eq!(names["categories"], json!(["autoscaling"]));
    let versions = crd["spec"]["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1);
    let v = &versions[0];
    assert_eq!(v["name"], "v1beta1");
    assert_eq!(
        (v["served"].clone(), v["storage"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(v["subresources"], json!({"status": {}}));
    let cols: Vec<(&str, &str, &str)> = v["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap(),
                c["type"].as_str().unwrap(),
                c["jsonPath"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        cols,
        [
            ("Strategy", "string", ".spec.provisioningStrategy"),
            ("PodTemplate", "string", ".status.podTemplateRef.name"),
            ("Replicas", "integer", ".status.replicas"),
            ("ConditionsType", "string", ".status.conditions[*].type"),
            ("ConditionsStatus", "string", ".status.conditions[*].status"),
            ("ConditionsReason", "string", ".status.conditions[*].reason"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ]
    );
    let root = &v["schema"]["openAPIV3Schema"];
    assert_eq!(root["required"], json!(["spec"]));
    let spec = &root["properties"]["spec"];
    assert!(spec.get("required").is_none());
    let rules: Vec<&str> = spec["x-kubernetes-validations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        [
            "!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",
            "!(has(self.podTemplateRef) && has(self.scalableRef))"
        ]
    );
    let p = &spec["properties"];
    let keys: Vec<&String> = p.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "limits",
            "percentage",
            "podTemplateRef",
            "provisioningStrategy",
            "replicas",
            "scalableRef"
        ]
    );
    assert_eq!(
        p["provisioningStrategy"],
        json!({"default": "buffer.x-k8s.io/active-capacity", "description": p["provisioningStrategy"]["description"], "type": "string"})
    );
    for field in ["replicas", "percentage"] {
        assert_eq!(p[field]["minimum"], 0, "{field}");
        assert_eq!(p[field]["format"], "int32", "{field}");
        assert_eq!(p[field]["type"], "integer", "{field}");
    }
    assert_eq!(
        p["limits"]["additionalProperties"]["x-kubernetes-int-or-string"],
        true
    );
    assert_eq!(p["podTemplateRef"]["required"], json!(["name"]));
    assert_eq!(p["podTemplateRef"]["properties"]["name"]["minLength"], 1);
    assert_eq!(p["scalableRef"]["required"], json!(["kind", "name"]));
    let scalable = &p["scalableRef"]["properties"];
    assert_eq!(scalable["kind"]["minLength"], 1);
    assert_eq!(scalable["name"]["minLength"], 1);
    assert_eq!(scalable["apiGroup"]["type"], "string");
    assert!(scalable["apiGroup"].get("default").is_none());
    let status = &root["properties"]["status"]["properties"];
    let keys: Vec<&String> = status.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "conditions",
            "podTemplateGeneration",
            "podTemplateRef",
            "provisioningStrategy",
            "replicas"
        ]
    );
    assert_eq!(status["podTemplateGeneration"]["format"], "int64");
    assert_eq!(status["replicas"]["format"], "int32");
    let conditions = &status["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
    assert_eq!(
        conditions["items"]["required"],
        json!(["lastTransitionTime", "message", "reason", "status", "type"])
    );
    assert_eq!(conditions["items"]["properties"]["reason"]["minLength"], 1);
}
