//! Manifests as Karpenter's docs published them for each API version (v0.31 v1alpha5, v0.32
//! and v0.37 v1beta1, the v1 migration guide's v1beta1 examples, a v1beta1 NodeClaim),
//! converted and checked field by field against what the migration guides say, and loaded
//! back through karpenter-rs's own v1 parser.

mod common;

use common::{convert, convert_with, fields, issues, load_v1, object};
use karpenter_convert::{Options, Severity};
use serde_json::{Value, json};

fn req(key: &str, op: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": op, "values": values})
}

const AWS_REF: fn(&str) -> Value =
    |name| json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name});

#[test]
fn v0_31_getting_started_provisioner_becomes_a_consolidating_never_expiring_nodepool() {
    let c = convert(&["v0.31-getting-started.yaml"]);
    let pool = object(&c, "NodePool", "default");
    assert_eq!(pool["apiVersion"], "karpenter.sh/v1");
    assert_eq!(pool["metadata"], json!({"name": "default"}));
    // consolidation.enabled: true
    assert_eq!(
        pool["spec"]["disruption"],
        json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
    );
    // limits.resources -> limits
    assert_eq!(pool["spec"]["limits"], json!({"cpu": 1000}));
    let t = &pool["spec"]["template"]["spec"];
    // No ttlSecondsUntilExpired: v1alpha5 nodes never expired.
    assert_eq!(t["expireAfter"], "Never");
    assert_eq!(t["nodeClassRef"], AWS_REF("default"));
    // The Provisioner's own requirement, then v1alpha5's webhook defaults it lacked.
    assert_eq!(
        t["requirements"],
        json!([
            req("karpenter.sh/capacity-type", "In", &["spot"]),
            req("kubernetes.io/os", "In", &["linux"]),
            req("kubernetes.io/arch", "In", &["amd64"]),
            req(
                "karpenter.k8s.aws/instance-category",
                "In",
                &["c", "m", "r"]
            ),
            req("karpenter.k8s.aws/instance-generation", "Gt", &["2"]),
        ])
    );
    assert!(pool["spec"].get("weight").is_none());
    assert!(c.is_complete(), "{:#?}", c.issues);
    let loaded = load_v1(&c);
    assert_eq!(loaded.node_pools.len(), 1);
    assert!(
        loaded.node_pools[0]
            .spec
            .template
            .spec
            .expire_after
            .is_never()
    );
}

#[test]
fn v0_31_getting_started_awsnodetemplate_becomes_an_al2_alias_class_with_a_role_placeholder() {
    let c = convert(&["v0.31-getting-started.yaml"]);
    let class = object(&c, "EC2NodeClass", "default");
    assert_eq!(class["apiVersion"], "karpenter.k8s.aws/v1");
    let spec = &class["spec"];
    // No amiFamily: v1alpha1 defaulted AL2, which v1 expresses as an alias.
    assert_eq!(spec["amiSelectorTerms"], json!([{"alias": "al2@latest"}]));
    assert!(spec.get("amiFamily").is_none());
    let discovery = json!([{"tags": {"karpenter.sh/discovery": "${CLUSTER_NAME}"}}]);
    assert_eq!(spec["subnetSelectorTerms"], discovery);
    assert_eq!(spec["securityGroupSelectorTerms"], discovery);
    // No instanceProfile: the global default applied, which v1 dropped.
    assert_eq!(spec["role"], "$KARPENTER_NODE_ROLE");
    assert!(spec.get("instanceProfile").is_none());
    // v1alpha1's IMDS hop limit default (2) is kept; v1's is 1.
    assert_eq!(
        spec["metadataOptions"],
        json!({"httpPutResponseHopLimit": 2})
    );
    assert_eq!(
        fields(&c, Severity::Warning),
        [
            "spec.instanceProfile",
            "spec.metadataOptions.httpPutResponseHopLimit"
        ]
    );
    assert_eq!(load_v1(&c).node_classes.len(), 1);
}

#[test]
fn ignore_defaults_leaves_the_alpha_webhook_requirements_out() {
    let c = convert_with(
        &["v0.31-getting-started.yaml"],
        &Options {
            alpha_default_requirements: false,
        },
    );
    let pool = object(&c, "NodePool", "default");
    assert_eq!(
        pool["spec"]["template"]["spec"]["requirements"],
        json!([req("karpenter.sh/capacity-type", "In", &["spot"])])
    );
    assert!(
        !c.issues
            .iter()
            .any(|i| i.message.contains("webhook defaulted"))
    );
}

#[test]
fn v0_31_migrating_from_cas_adds_only_the_missing_defaults_and_never_consolidates() {
    let c = convert(&["v0.31-migrating-from-cas.yaml"]);
    let pool = object(&c, "NodePool", "default");
    assert_eq!(
        pool["spec"]["template"]["spec"]["requirements"],
        json!([
            req(
                "karpenter.k8s.aws/instance-category",
                "In",
                &["c", "m", "r"]
            ),
            req("karpenter.k8s.aws/instance-generation", "Gt", &["2"]),
            req("kubernetes.io/os", "In", &["linux"]),
            req("kubernetes.io/arch", "In", &["amd64"]),
            req("karpenter.sh/capacity-type", "In", &["on-demand"]),
        ])
    );
    // Neither ttlSecondsAfterEmpty nor consolidation: nodes were never removed.
    assert_eq!(
        pool["spec"]["disruption"],
        json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
    );
    assert!(pool["spec"].get("limits").is_none());
    assert!(c.is_complete());
    let loaded = load_v1(&c);
    assert!(
        loaded.node_pools[0]
            .spec
            .disruption
            .consolidate_after
            .is_never()
    );
}

#[test]
fn v0_31_provisioner_reference_maps_every_field_and_reports_the_invalid_ttl_pair() {
    let c = convert(&["v0.31-provisioner-reference.yaml"]);
    let pool = object(&c, "NodePool", "default");
    let spec = &pool["spec"];
    assert_eq!(
        spec["template"]["metadata"],
        json!({"labels": {"billing-team": "my-team"}, "annotations": {"example.com/owner": "my-team"}})
    );
    let t = &spec["template"]["spec"];
    assert_eq!(
        t["taints"],
        json!([{"key": "example.com/special-taint", "effect": "NoSchedule"}])
    );
    assert_eq!(
        t["startupTaints"],
        json!([{"key": "example.com/another-taint", "effect": "NoSchedule"}])
    );
    // ttlSecondsUntilExpired: 2592000 -> 720h
    assert_eq!(t["expireAfter"], "720h");
    let reqs = t["requirements"].as_array().unwrap();
    assert_eq!(reqs.len(), 8, "the seven given and the OS default");
    assert_eq!(reqs[7], req("kubernetes.io/os", "In", &["linux"]));
    assert_eq!(
        reqs[1],
        req(
            "karpenter.k8s.aws/instance-cpu",
            "In",
            &["4", "8", "16", "32"]
        )
    );
    assert_eq!(spec["limits"], json!({"cpu": "1000", "memory": "1000Gi"}));
    assert_eq!(spec["weight"], 10);
    assert!(t.get("kubelet").is_none());
    // The page sets consolidation and ttlSecondsAfterEmpty together, which v1alpha5 rejects.
    assert_eq!(
        spec["disruption"],
        json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
    );
    assert_eq!(fields(&c, Severity::Error), ["spec.ttlSecondsAfterEmpty"]);
    // kubeletConfiguration has nowhere to go: its EC2NodeClass is not among the inputs.
    let lossy = issues(&c, Severity::Lossy);
    assert_eq!(lossy.len(), 1);
    assert_eq!(lossy[0].0, "spec.kubeletConfiguration");
    assert!(lossy[0].1.contains("\"maxPods\":20"), "{}", lossy[0].1);
    // containerRuntime: containerd is dropped without loss.
    assert!(
        issues(&c, Severity::Info)
            .iter()
            .any(|(f, _)| f == "spec.kubeletConfiguration.containerRuntime")
    );
    load_v1(&c);
}

#[test]
fn kubelet_settings_move_onto_the_class_the_pool_references() {
    // The reference Provisioner with the getting-started AWSNodeTemplate it names.
    let text = common::fixture_text(&[
        "v0.31-provisioner-reference.yaml",
        "v0.31-getting-started.yaml",
    ]);
    let docs =
        karpenter_cluster::manifests::parse_str(std::path::Path::new("t.yaml"), &text).unwrap();
    let docs: Vec<_> = docs
        .into_iter()
        .filter(|d| {
            d.kind() != Some("Provisioner") || d.value["spec"]["kubeletConfiguration"].is_object()
        })
        .collect();
    let c = karpenter_convert::convert_documents(docs, &Options::default());
    let class = object(&c, "EC2NodeClass", "default");
    assert_eq!(
        class["spec"]["kubelet"],
        json!({
            "clusterDNS": ["10.0.1.100"],
            "systemReserved": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"},
            "kubeReserved": {"cpu": "200m", "memory": "100Mi", "ephemeral-storage": "3Gi"},
            "evictionHard": {"memory.available": "5%", "nodefs.available": "10%", "nodefs.inodesFree": "10%"},
            "evictionSoft": {"memory.available": "500Mi", "nodefs.available": "15%", "nodefs.inodesFree": "15%"},
            "evictionSoftGracePeriod": {"memory.available": "1m", "nodefs.available": "1m30s", "nodefs.inodesFree": "2m"},
            "evictionMaxPodGracePeriod": 60,
            "imageGCHighThresholdPercent": 85,
            "imageGCLowThresholdPercent": 80,
            "cpuCFSQuota": true,
            "podsPerCore": 2,
            "maxPods": 20
        })
    );
    assert!(fields(&c, Severity::Lossy).is_empty(), "{:#?}", c.issues);
    assert!(issues(&c, Severity::Info).contains(&(
        "spec.kubeletConfiguration".to_owned(),
        "moved to EC2NodeClass default spec.kubelet".to_owned()
    )));
    load_v1(&c);
}

#[test]
fn v1beta1_guide_provisioner_example_converts_as_the_guide_shows() {
    // Without the webhook defaults, to compare with the guide's NodePool example.
    let c = convert_with(
        &["v0.32-v1beta1-migration-provisioners.yaml"],
        &Options {
            alpha_default_requirements: false,
        },
    );
    let pool = object(&c, "NodePool", "default");
    let spec = &pool["spec"];
    assert_eq!(
        spec["template"]["metadata"],
        json!({
            "annotations": {"custom-annotation": "custom-value"},
            "labels": {"team": "team-a", "custom-label": "custom-value"}
        })
    );
    let t = &spec["template"]["spec"];
    assert_eq!(
        t["requirements"],
        json!([
            req("karpenter.k8s.aws/instance-generation", "Gt", &["3"]),
            req(
                "karpenter.k8s.aws/instance-category",
                "In",
                &["c", "m", "r"]
            ),
            req("karpenter.sh/capacity-type", "In", &["spot"]),
        ])
    );
    assert_eq!(
        t["taints"],
        json!([{"key": "example.com/special-taint", "value": "true", "effect": "NoSchedule"}])
    );
    assert_eq!(
        t["startupTaints"],
        json!([{"key": "example.com/another-taint", "value": "true", "effect": "NoSchedule"}])
    );
    assert_eq!(spec["limits"], json!({"cpu": 1000, "memory": "1000Gi"}));
    assert_eq!(spec["weight"], 50);
    // The guide's v1alpha5 example writes `kubelet`, which v1alpha5 calls
    // kubeletConfiguration: the API server dropped it, so it is reported, not converted.
    let lossy = issues(&c, Severity::Lossy);
    let kubelet: Vec<_> = lossy.iter().filter(|(f, _)| f == "spec.kubelet").collect();
    assert_eq!(kubelet.len(), 1);
    assert!(kubelet[0].1.contains("kubeletConfiguration"));
    assert!(t.get("kubelet").is_none());

    // "TTLSecondsAfterEmpty": 120 -> WhenEmpty, 2m
    let empty = object(&c, "NodePool", "empty-after-2m");
    assert_eq!(
        empty["spec"]["disruption"],
        json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "2m"})
    );
    // "Consolidation": enabled -> WhenUnderutilized, renamed in v1.
    let consolidated = object(&c, "NodePool", "consolidated");
    assert_eq!(
        consolidated["spec"]["disruption"]["consolidationPolicy"],
        "WhenEmptyOrUnderutilized"
    );
    // "TTLSecondsUntilExpired": 2592000 -> 720h, under the template in v1.
    let expiring = object(&c, "NodePool", "expiring");
    assert_eq!(expiring["spec"]["template"]["spec"]["expireAfter"], "720h");
    assert!(expiring["spec"]["disruption"].get("expireAfter").is_none());
}

#[test]
fn v1beta1_guide_inline_provider_becomes_its_own_class() {
    let c = convert(&["v0.32-v1beta1-migration-provisioners.yaml"]);
    let pool = object(&c, "NodePool", "bottlerocket");
    assert_eq!(
        pool["spec"]["template"]["spec"]["nodeClassRef"],
        AWS_REF("bottlerocket")
    );
    let class = object(&c, "EC2NodeClass", "bottlerocket");
    // amiFamily: Bottlerocket -> the alias; tags kept.
    assert_eq!(
        class["spec"]["amiSelectorTerms"],
        json!([{"alias": "bottlerocket@latest"}])
    );
    assert_eq!(class["spec"]["tags"], json!({"test-tag": "test-value"}));
    // The class follows the pool in the output.
    let names: Vec<_> = c
        .objects
        .iter()
        .map(|o| {
            format!(
                "{} {}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    let at = names
        .iter()
        .position(|n| n == "NodePool bottlerocket")
        .unwrap();
    assert_eq!(names[at + 1], "EC2NodeClass bottlerocket");
    // The guide's provider block has no subnet or security-group selector.
    let lossy = fields(&c, Severity::Lossy);
    assert!(lossy.contains(&"spec.provider.subnetSelectorTerms".to_owned()));
    assert!(lossy.contains(&"spec.provider.securityGroupSelectorTerms".to_owned()));
}

#[test]
fn v1beta1_guide_node_template_examples_become_selector_terms() {
    let c = convert(&["v0.32-v1beta1-migration-nodetemplates.yaml"]);
    let by_tags = &object(&c, "EC2NodeClass", "by-tags")["spec"];
    let demo = json!([{"tags": {"karpenter.sh/discovery": "karpenter-demo"}}]);
    assert_eq!(by_tags["subnetSelectorTerms"], demo);
    assert_eq!(by_tags["securityGroupSelectorTerms"], demo);
    // Selector terms given: the family stays and no alias is made.
    assert_eq!(by_tags["amiSelectorTerms"], demo);
    assert_eq!(by_tags["amiFamily"], "AL2");
    // v1 still takes an instance profile (the guide's v1beta1 moved to role).
    assert_eq!(
        by_tags["instanceProfile"],
        "KarpenterNodeInstanceProfile-karpenter-demo"
    );
    assert!(by_tags.get("role").is_none());

    let by_ids = &object(&c, "EC2NodeClass", "by-ids")["spec"];
    assert_eq!(
        by_ids["subnetSelectorTerms"],
        json!([{"id": "subnet-123"}, {"id": "subnet-456"}])
    );
    assert_eq!(
        by_ids["securityGroupSelectorTerms"],
        json!([{"id": "sg-123"}, {"id": "sg-456"}])
    );
    assert_eq!(
        by_ids["amiSelectorTerms"],
        json!([{"id": "ami-123"}, {"id": "ami-456"}])
    );

    let by_names = &object(&c, "EC2NodeClass", "by-names")["spec"];
    assert_eq!(
        by_names["amiSelectorTerms"],
        json!([
            {"name": "my-name1", "owner": "123456789"},
            {"name": "my-name2", "owner": "123456789"},
            {"name": "my-name1", "owner": "amazon"},
            {"name": "my-name2", "owner": "amazon"},
        ])
    );
    assert!(c.is_complete(), "{:#?}", c.issues);
    assert_eq!(load_v1(&c).node_classes.len(), 3);
}

#[test]
fn v0_32_getting_started_nodepool_and_class_convert_without_loss() {
    let c = convert(&["v0.32-getting-started.yaml"]);
    let pool = object(&c, "NodePool", "default");
    let t = &pool["spec"]["template"]["spec"];
    // A name-only nodeClassRef gains the AWS group and kind.
    assert_eq!(t["nodeClassRef"], AWS_REF("default"));
    assert_eq!(
        t["requirements"],
        json!([
            req("kubernetes.io/arch", "In", &["amd64"]),
            req("kubernetes.io/os", "In", &["linux"]),
            req("karpenter.sh/capacity-type", "In", &["spot"]),
            req(
                "karpenter.k8s.aws/instance-category",
                "In",
                &["c", "m", "r"]
            ),
            req("karpenter.k8s.aws/instance-generation", "Gt", &["2"]),
        ])
    );
    // disruption.expireAfter moves into the template.
    assert_eq!(t["expireAfter"], "720h");
    assert_eq!(
        pool["spec"]["disruption"],
        json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
    );
    assert_eq!(pool["spec"]["limits"], json!({"cpu": 1000}));
    let class = &object(&c, "EC2NodeClass", "default")["spec"];
    assert_eq!(class["amiSelectorTerms"], json!([{"alias": "al2@latest"}]));
    assert!(class.get("amiFamily").is_none());
    assert_eq!(class["role"], "KarpenterNodeRole-${CLUSTER_NAME}");
    assert!(c.is_complete(), "{:#?}", c.issues);
    let loaded = load_v1(&c);
    let expire = loaded.node_pools[0]
        .spec
        .template
        .spec
        .expire_after
        .duration()
        .unwrap();
    assert_eq!(expire.millis(), 720 * 3600 * 1000);
}

#[test]
fn v0_37_getting_started_keeps_pinned_amis_and_the_family() {
    let c = convert(&["v0.37-getting-started.yaml"]);
    let class = &object(&c, "EC2NodeClass", "default")["spec"];
    assert_eq!(class["amiFamily"], "AL2");
    assert_eq!(
        class["amiSelectorTerms"],
        json!([{"id": "${ARM_AMI_ID}"}, {"id": "${AMD_AMI_ID}"}])
    );
    let pool = object(&c, "NodePool", "default");
    assert_eq!(
        pool["spec"]["template"]["spec"]["nodeClassRef"],
        AWS_REF("default")
    );
    assert!(c.is_complete());
    load_v1(&c);
}

#[test]
fn v0_37_nodepool_reference_keeps_budgets_min_values_and_moves_expiry() {
    let c = convert(&["v0.37-nodepool-reference.yaml"]);
    let pool = object(&c, "NodePool", "default");
    let d = &pool["spec"]["disruption"];
    assert_eq!(d["consolidationPolicy"], "WhenEmpty");
    assert_eq!(d["consolidateAfter"], "30s");
    assert_eq!(
        d["budgets"],
        json!([{"nodes": "10%"}, {"schedule": "0 9 * * mon-fri", "duration": "8h", "nodes": "0"}])
    );
    assert!(d.get("expireAfter").is_none());
    let t = &pool["spec"]["template"]["spec"];
    assert_eq!(t["expireAfter"], "720h");
    assert_eq!(t["requirements"][0]["minValues"], 2);
    assert_eq!(t["requirements"][1]["minValues"], 5);
    assert_eq!(t["requirements"].as_array().unwrap().len(), 8);
    assert_eq!(
        pool["spec"]["template"]["metadata"],
        json!({"labels": {"billing-team": "my-team"}, "annotations": {"example.com/owner": "my-team"}})
    );
    assert_eq!(pool["spec"]["weight"], 10);
    // Its kubelet block names EC2NodeClass default, which this page does not define.
    assert_eq!(fields(&c, Severity::Lossy), ["spec.template.spec.kubelet"]);
    let loaded = load_v1(&c);
    assert_eq!(loaded.node_pools[0].spec.disruption.budgets.len(), 2);
}

#[test]
fn v0_37_ec2nodeclass_reference_keeps_every_field_but_one_of_role_and_instance_profile() {
    let c = convert(&["v0.37-ec2nodeclass-reference.yaml"]);
    let spec = &object(&c, "EC2NodeClass", "default")["spec"];
    assert_eq!(spec["amiFamily"], "AL2");
    assert_eq!(
        spec["amiSelectorTerms"],
        json!([
            {"tags": {"karpenter.sh/discovery": "${CLUSTER_NAME}", "environment": "test"}},
            {"name": "my-ami"},
            {"id": "ami-123"}
        ])
    );
    assert_eq!(
        spec["subnetSelectorTerms"],
        json!([
            {"tags": {"karpenter.sh/discovery": "${CLUSTER_NAME}", "environment": "test"}},
            {"id": "subnet-09fa4a0a8f233a921"}
        ])
    );
    assert_eq!(
        spec["securityGroupSelectorTerms"][1],
        json!({"name": "my-security-group"})
    );
    assert_eq!(spec["role"], "KarpenterNodeRole-${CLUSTER_NAME}");
    assert!(spec.get("instanceProfile").is_none());
    assert_eq!(fields(&c, Severity::Lossy), ["spec.instanceProfile"]);
    assert_eq!(spec["instanceStorePolicy"], "RAID0");
    assert_eq!(spec["userData"], "echo \"Hello world\"\n");
    assert_eq!(spec["tags"], json!({"team": "team-a", "app": "team-a-app"}));
    assert_eq!(
        spec["metadataOptions"],
        json!({"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 2, "httpTokens": "required"})
    );
    assert_eq!(
        spec["blockDeviceMappings"],
        json!([{"deviceName": "/dev/xvda", "ebs": {
            "volumeSize": "100Gi", "volumeType": "gp3", "iops": 10000, "encrypted": true,
            "kmsKeyID": "1234abcd-12ab-34cd-56ef-1234567890ab", "deleteOnTermination": true,
            "throughput": 125, "snapshotID": "snap-0123456789"}}])
    );
    assert_eq!(spec["detailedMonitoring"], true);
    assert_eq!(spec["associatePublicIPAddress"], true);
    // The status the page shows is the controller's and is not carried over.
    assert!(
        object(&c, "EC2NodeClass", "default")
            .get("status")
            .is_none()
    );
    assert!(fields(&c, Severity::Info).contains(&"status".to_owned()));
    load_v1(&c);
}

#[test]
fn v1_guide_kubelet_example_splits_the_shared_class() {
    let c = convert(&["v1.0-kubelet-migration.yaml"]);
    let a = object(&c, "NodePool", "nodepool-a");
    let b = object(&c, "NodePool", "nodepool-b");
    assert_eq!(
        a["spec"]["template"]["spec"]["nodeClassRef"],
        AWS_REF("nodeclass")
    );
    assert_eq!(
        b["spec"]["template"]["spec"]["nodeClassRef"],
        AWS_REF("nodeclass-nodepool-b")
    );
    assert!(a["spec"]["template"]["spec"].get("kubelet").is_none());
    assert_eq!(
        object(&c, "EC2NodeClass", "nodeclass")["spec"]["kubelet"],
        json!({"maxPods": 10})
    );
    let copy = object(&c, "EC2NodeClass", "nodeclass-nodepool-b");
    assert_eq!(copy["spec"]["kubelet"], json!({"maxPods": 20}));
    // The copy is the class in every other field.
    let mut original = object(&c, "EC2NodeClass", "nodeclass").clone();
    original["metadata"]["name"] = json!("nodeclass-nodepool-b");
    original["spec"]["kubelet"] = json!({"maxPods": 20});
    assert_eq!(*copy, original);
    // nodepool-a keeps its class (info); nodepool-b is moved to the copy (warning).
    let kept = c
        .issues
        .iter()
        .find(|i| i.object.contains("nodepool-a") && i.field == "spec.template.spec.kubelet")
        .unwrap();
    assert_eq!(kept.severity, Severity::Info);
    assert!(
        kept.message
            .contains("nodeclass keeps this NodePool's ({\"maxPods\":10})")
    );
    let moved = issues(&c, Severity::Warning)
        .into_iter()
        .filter(|(f, _)| f == "spec.template.spec.kubelet")
        .collect::<Vec<_>>();
    assert_eq!(moved.len(), 1);
    assert!(
        moved[0]
            .1
            .contains("now uses EC2NodeClass nodeclass-nodepool-b")
    );
    assert!(moved[0].1.contains("drifts its nodes"));
    // As published the class has no spec: its required fields are reported.
    assert_eq!(fields(&c, Severity::Error), ["spec.amiFamily"]);
    assert_eq!(
        fields(&c, Severity::Lossy),
        [
            "spec.subnetSelectorTerms",
            "spec.securityGroupSelectorTerms"
        ]
    );
}

#[test]
fn v1_guide_ubuntu_example_becomes_al2_with_ubuntus_root_volume() {
    let c = convert(&["v1.0-ubuntu.yaml"]);
    let spec = &object(&c, "EC2NodeClass", "ubuntu")["spec"];
    // What the guide shows the conversion webhook writing, less its compatibility annotation.
    assert_eq!(spec["amiFamily"], "AL2");
    assert_eq!(spec["amiSelectorTerms"], json!([{"id": "ami-foo"}]));
    assert_eq!(
        spec["blockDeviceMappings"],
        json!([{"deviceName": "/dev/sda1", "rootVolume": true,
                "ebs": {"encrypted": true, "volumeType": "gp3", "volumeSize": "20Gi"}}])
    );
    assert!(
        fields(&c, Severity::Warning)
            .iter()
            .any(|f| f == "spec.amiFamily")
    );
}

#[test]
fn v1beta1_nodeclaim_keeps_its_status_and_takes_its_pools_expiry() {
    let alone = convert(&["v1beta1-nodeclaim.yaml"]);
    let claim = object(&alone, "NodeClaim", "default-m6pzn");
    assert_eq!(claim["apiVersion"], "karpenter.sh/v1");
    assert_eq!(claim["spec"]["nodeClassRef"], AWS_REF("default"));
    assert_eq!(claim["spec"]["requirements"].as_array().unwrap().len(), 7);
    assert_eq!(
        claim["spec"]["resources"],
        json!({"requests": {"cpu": "5150m", "pods": "8"}})
    );
    assert_eq!(
        claim["metadata"]["ownerReferences"][0]["apiVersion"],
        "karpenter.sh/v1"
    );
    assert_eq!(
        claim["metadata"]["labels"]["karpenter.sh/nodepool"],
        "default"
    );
    assert_eq!(
        claim["status"]["providerID"],
        "aws:///us-west-1a/i-xxxxxxxxxxxxxxxxx"
    );
    assert_eq!(claim["status"]["conditions"].as_array().unwrap().len(), 4);
    // Its NodePool is not among the inputs: v1's default applies, and the report says so.
    assert!(claim["spec"].get("expireAfter").is_none());
    assert_eq!(fields(&alone, Severity::Warning), ["spec"]);
    let loaded = load_v1(&alone);
    assert_eq!(loaded.node_claims.len(), 1);
    assert_eq!(
        loaded.node_claims[0].status.as_ref().unwrap().node_name,
        "ip-xxx-xxx-xx-xxx.us-west-1.compute.internal"
    );

    // With its NodePool (the v0.32 getting-started one), the claim takes the pool's expiry.
    let with_pool = convert(&["v1beta1-nodeclaim.yaml", "v0.32-getting-started.yaml"]);
    let claim = object(&with_pool, "NodeClaim", "default-m6pzn");
    assert_eq!(claim["spec"]["expireAfter"], "720h");
    assert!(
        fields(&with_pool, Severity::Warning)
            .iter()
            .all(|f| f != "spec")
    );
    load_v1(&with_pool);
}

#[test]
fn every_fixture_converts_to_objects_karpenter_rs_loads() {
    let dir = common::fixture_path("");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 12);
    for name in &names {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(text.starts_with("# Source: "), "{name} names its source");
        let c = convert(&[name]);
        assert!(!c.objects.is_empty(), "{name}");
        // Classes with reported gaps (missing selectors) are not valid v1; everything else is.
        let incomplete: Vec<&str> = c
            .issues
            .iter()
            .filter(|i| i.severity >= Severity::Lossy && i.field.contains("SelectorTerms"))
            .map(|i| i.object.as_str())
            .collect();
        if incomplete.is_empty() {
            load_v1(&c);
        }
        for o in &c.objects {
            let version = o["apiVersion"].as_str().unwrap();
            assert!(
                version == "karpenter.sh/v1" || version == "karpenter.k8s.aws/v1",
                "{name}: {version}"
            );
        }
    }
}

#[test]
fn the_crd_check_catches_what_v1_rejects() {
    let valid = json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
    "metadata": {"name": "x"},
    "spec": {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "role": "r",
        "subnetSelectorTerms": [{"id": "subnet-0abc"}],
        "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
        "metadataOptions": {"httpPutResponseHopLimit": 2}
    }});
    assert_eq!(common::ec2_node_class_errors(&valid), Vec::<String>::new());
    let broken = |pointer: &str, value: Value| {
        let mut c = valid.clone();
        *c.pointer_mut(pointer).unwrap() = value;
        common::ec2_node_class_errors(&c)
    };
    let cases = [
        ("/spec/role", json!(1)),
        ("/spec/metadataOptions/httpPutResponseHopLimit", json!(65)),
        ("/spec/subnetSelectorTerms", json!([{"id": "sn-1"}])),
        (
            "/spec/subnetSelectorTerms",
            json!([{"id": "subnet-1", "tags": {"a": "b"}}]),
        ),
        (
            "/spec/amiSelectorTerms",
            json!([{"alias": "al2023@latest"}, {"id": "ami-1"}]),
        ),
        ("/spec/amiSelectorTerms", json!([{"id": "ami-1"}])),
        ("/spec/metadataOptions", json!({"httpTokens": "sometimes"})),
        ("/spec/securityGroupSelectorTerms", json!([])),
        ("/spec/metadataOptions", json!({"hopLimit": 1})),
    ];
    for (pointer, value) in cases {
        assert!(
            !broken(pointer, value.clone()).is_empty(),
            "{pointer} = {value}"
        );
    }
    let mut both = valid.clone();
    both["spec"]["instanceProfile"] = json!("p");
    assert!(!common::ec2_node_class_errors(&both).is_empty());
    let mut none = valid.clone();
    none["spec"]
        .as_object_mut()
        .unwrap()
        .remove("subnetSelectorTerms");
    assert!(!common::ec2_node_class_errors(&none).is_empty());
}

/// Every JSON pointer into `value` (the root included).
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                pointers(
                    v,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                pointers(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn no_field_of_any_fixture_replaced_by_another_type_makes_the_converter_panic() {
    let names: Vec<String> = std::fs::read_dir(common::fixture_path(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let replacements = [
        json!(null),
        json!(7),
        json!("x"),
        json!(true),
        json!([]),
        json!({}),
        json!([{"k": 1}]),
    ];
    let mut conversions = 0;
    for name in &names {
        let text = common::fixture_text(&[name]);
        let docs =
            karpenter_cluster::manifests::parse_str(std::path::Path::new(name), &text).unwrap();
        for (d, doc) in docs.iter().enumerate() {
            let mut paths = Vec::new();
            pointers(&doc.value, String::new(), &mut paths);
            for path in paths.iter().filter(|p| !p.is_empty()) {
                for replacement in &replacements {
                    let mut mutated = docs.clone();
                    *mutated[d].value.pointer_mut(path).unwrap() = replacement.clone();
                    let c = karpenter_convert::convert_documents(mutated, &Options::default());
                    c.to_yaml().unwrap();
                    conversions += 1;
                }
            }
        }
    }
    assert!(conversions > 5000, "{conversions}");
}
