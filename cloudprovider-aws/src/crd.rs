//! The EC2NodeClass CustomResourceDefinition: kube's derive gives the structure, then the
//! validation the derive cannot express (patterns, item limits, enums and upstream's
//! `x-kubernetes-validations` CEL rules) is patched in, so the API server enforces what
//! Karpenter's CRD enforces. [`crate::nodeclass::EC2NodeClass::validate`] implements the same
//! rules in Rust for callers without an API server.

use crate::nodeclass::{CT_TCP_ESTABLISHED, CT_UDP, CT_UDP_STREAM, EC2NodeClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_cloudprovider::crd::{remove, rule, set, with_schema};
use kube_core::CustomResourceExt;
use serde_json::{Value, json};

const TAGS_RULES: &str = "self.all(k, k != '' && self[k] != '')";

/// Every path [`ec2_node_class_crd`] patches, for the test that checks none is missing.
pub const PATCHED_PATHS: &[&str] = &[
    "spec",
    "spec.subnetSelectorTerms",
    "spec.subnetSelectorTerms[].tags",
    "spec.subnetSelectorTerms[].id",
    "spec.securityGroupSelectorTerms",
    "spec.securityGroupSelectorTerms[].tags",
    "spec.securityGroupSelectorTerms[].id",
    "spec.amiSelectorTerms",
    "spec.amiSelectorTerms[].alias",
    "spec.amiSelectorTerms[].id",
    "spec.amiSelectorTerms[].tags",
    "spec.amiFamily",
    "spec.role",
    "spec.instanceProfile",
    "spec.tags",
    "spec.blockDeviceMappings",
    "spec.blockDeviceMappings[].ebs",
    "spec.blockDeviceMappings[].ebs.volumeType",
    "spec.instanceStorePolicy",
    "spec.metadataOptions",
    "spec.metadataOptions.httpEndpoint",
    "spec.metadataOptions.httpProtocolIPv6",
    "spec.metadataOptions.httpPutResponseHopLimit",
    "spec.metadataOptions.httpTokens",
    "spec.cpuOptions.nestedVirtualization",
    "spec.ipPrefixCount",
    "spec.connectionTracking",
    "spec.connectionTracking.tcpEstablishedTimeout",
    "spec.connectionTracking.udpStreamTimeout",
    "spec.connectionTracking.udpTimeout",
];

fn patch(s: &mut Value) {
    // `#[serde(default)]` makes the derive write `default: []` on the required selector
    // lists; the API server rejects a CRD whose default breaks its own minItems and CEL rules.
    for required in [
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
        "amiSelectorTerms",
    ] {
        remove(s, &format!("spec.{required}"), "default");
    }
    set(
        s,
        "spec",
        json!({
            "x-kubernetes-preserve-unknown-fields": true,
            "required": ["amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"],
            "x-kubernetes-validations": [
                rule("(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))", "must specify exactly one of ['role', 'instanceProfile']"),
                rule("!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2') : true)", "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias"),
                rule("self.amiSelectorTerms.exists(x, has(x.alias)) || has(self.amiFamily)", "amiFamily must be set when amiSelectorTerms does not contain an alias"),
            ]
        }),
    );
    set(
        s,
        "spec.subnetSelectorTerms",
        json!({ "maxItems": 30, "x-kubernetes-validations": [
            rule("self.size() != 0", "subnetSelectorTerms cannot be empty"),
            rule("self.all(x, has(x.tags) || has(x.id))", "expected at least one, got none, ['tags', 'id']"),
            rule("!self.all(x, has(x.id) && has(x.tags))", "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"),
        ]}),
    );
    let tags = json!({ "maxProperties": 20, "x-kubernetes-validations": [rule(TAGS_RULES, "empty tag keys or values aren't supported")] });
    set(s, "spec.subnetSelectorTerms[].tags", tags.clone());
    set(
        s,
        "spec.subnetSelectorTerms[].id",
        json!({ "pattern": "subnet-[0-9a-z]+" }),
    );
    set(
        s,
        "spec.securityGroupSelectorTerms",
        json!({ "maxItems": 30, "x-kubernetes-validations": [
            rule("self.size() != 0", "securityGroupSelectorTerms cannot be empty"),
            rule("self.all(x, has(x.tags) || has(x.id) || has(x.name))", "expected at least one, got none, ['tags', 'id', 'name']"),
            rule("!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))", "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"),
            rule("!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))", "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"),
        ]}),
    );
    set(s, "spec.securityGroupSelectorTerms[].tags", tags.clone());
    set(
        s,
        "spec.securityGroupSelectorTerms[].id",
        json!({ "pattern": "sg-[0-9a-z]+" }),
    );
    set(
        s,
        "spec.amiSelectorTerms",
        json!({ "minItems": 1, "maxItems": 30, "x-kubernetes-validations": [
            rule("self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))", "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"),
            rule("!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))", "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"),
            rule("!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))", "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"),
            rule("!(self.exists(x, has(x.alias)) && self.size() != 1)", "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"),
        ]}),
    );
    set(
        s,
        "spec.amiSelectorTerms[].alias",
        json!({ "maxLength": 30, "x-kubernetes-validations": [
            rule("self.matches('^[a-zA-Z0-9]+@.+$')", "'alias' is improperly formatted, must match the format 'family@version'"),
            rule("self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']", "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"),
            rule("self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true", "windows families may only specify version 'latest'"),
        ]}),
    );
    set(
        s,
        "spec.amiSelectorTerms[].id",
        json!({ "pattern": "ami-[0-9a-z]+" }),
    );
    set(s, "spec.amiSelectorTerms[].tags", tags);
    set(
        s,
        "spec.amiFamily",
        json!({ "enum": ["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"] }),
    );
    set(
        s,
        "spec.role",
        json!({ "x-kubernetes-validations": [rule("self != ''", "role cannot be empty")] }),
    );
    set(
        s,
        "spec.instanceProfile",
        json!({ "x-kubernetes-validations": [rule("self != ''", "instanceProfile cannot be empty")] }),
    );
    set(
        s,
        "spec.tags",
        json!({ "x-kubernetes-validations": [
            rule("self.all(k, k != '')", "empty tag keys aren't supported"),
            rule("self.all(k, k !='eks:eks-cluster-name')", "tag contains a restricted tag matching eks:eks-cluster-name"),
            rule("self.all(k, !k.startsWith('kubernetes.io/cluster') )", "tag contains a restricted tag matching kubernetes.io/cluster/"),
            rule("self.all(k, k != 'karpenter.sh/nodepool')", "tag contains a restricted tag matching karpenter.sh/nodepool"),
            rule("self.all(k, k !='karpenter.sh/nodeclaim')", "tag contains a restricted tag matching karpenter.sh/nodeclaim"),
            rule("self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')", "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass"),
        ]}),
    );
    set(
        s,
        "spec.blockDeviceMappings",
        json!({ "maxItems": 50, "x-kubernetes-validations": [
            rule("self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1", "must have only one blockDeviceMappings with rootVolume"),
        ]}),
    );
    set(
        s,
        "spec.blockDeviceMappings[].ebs",
        json!({ "x-kubernetes-validations": [
            rule("has(self.snapshotID) || has(self.volumeSize)", "snapshotID or volumeSize must be defined"),
        ]}),
    );
    set(
        s,
        "spec.blockDeviceMappings[].ebs.volumeType",
        json!({ "enum": ["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"] }),
    );
    set(s, "spec.instanceStorePolicy", json!({ "enum": ["RAID0"] }));
    set(
        s,
        "spec.metadataOptions",
        json!({ "default": { "httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required" } }),
    );
    set(
        s,
        "spec.metadataOptions.httpEndpoint",
        json!({ "enum": ["enabled", "disabled"] }),
    );
    set(
        s,
        "spec.metadataOptions.httpProtocolIPv6",
        json!({ "enum": ["enabled", "disabled"] }),
    );
    set(
        s,
        "spec.metadataOptions.httpPutResponseHopLimit",
        json!({ "minimum": 1, "maximum": 64 }),
    );
    set(
        s,
        "spec.metadataOptions.httpTokens",
        json!({ "enum": ["required", "optional"] }),
    );
    set(
        s,
        "spec.cpuOptions.nestedVirtualization",
        json!({ "enum": ["enabled", "disabled"] }),
    );
    set(s, "spec.ipPrefixCount", json!({ "minimum": 0 }));
    set(
        s,
        "spec.connectionTracking",
        json!({ "x-kubernetes-validations": [
            rule("has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)", "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"),
        ]}),
    );
    for (field, (min, max)) in [
        ("tcpEstablishedTimeout", CT_TCP_ESTABLISHED),
        ("udpStreamTimeout", CT_UDP_STREAM),
        ("udpTimeout", CT_UDP),
    ] {
        set(
            s,
            &format!("spec.connectionTracking.{field}"),
            json!({ "minimum": min, "maximum": max }),
        );
    }
}

/// The EC2NodeClass CRD with upstream's validation.
pub fn ec2_node_class_crd() -> CustomResourceDefinition {
    with_schema(EC2NodeClass::crd(), patch)
}

/// The CRD as the YAML document committed at
/// `charts/karpenter-rs/crds/karpenter.k8s.aws_ec2nodeclasses.yaml`.
pub fn ec2_node_class_crd_yaml() -> String {
    karpenter_cloudprovider::crd::crd_yaml(&ec2_node_class_crd())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_patched_path_exists() {
        let crd = EC2NodeClass::crd();
        let mut v = serde_json::to_value(
            crd.spec.versions[0]
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("schema"),
        )
        .expect("json");
        for path in PATCHED_PATHS {
            assert!(
                karpenter_cloudprovider::crd::node(&mut v, path).is_some(),
                "missing schema path {path}"
            );
        }
    }

    #[test]
    fn crd_carries_upstream_rules_and_defaults() {
        let yaml = ec2_node_class_crd_yaml();
        for needle in [
            "name: ec2nodeclasses.karpenter.k8s.aws",
            "scope: Cluster",
            "- ec2nc",
            "tag contains a restricted tag matching kubernetes.io/cluster/",
            "must specify exactly one of ['role', 'instanceProfile']",
            "httpPutResponseHopLimit: 1",
            "pattern: subnet-[0-9a-z]+",
            "subresources",
        ] {
            assert!(yaml.contains(needle), "CRD lacks {needle:?}");
        }
        assert!(!yaml.contains("nullable"));
        let crd: serde_json::Value = serde_json::to_value(ec2_node_class_crd()).expect("json");
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        for required in [
            "subnetSelectorTerms",
            "securityGroupSelectorTerms",
            "amiSelectorTerms",
        ] {
            assert!(
                spec["properties"][required].get("default").is_none(),
                "{required} has a default the API server rejects"
            );
        }
    }
}
