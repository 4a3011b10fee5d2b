//! EC2NodeClass fields karpenter-rs accepts but does not act on (see
//! [`karpenter_cloudprovider::ignored`]): they are named when a class is admitted, so a
//! class that behaves differently from Karpenter says so.

use crate::nodeclass::EC2NodeClass;
use karpenter_cloudprovider::IgnoredField;

impl EC2NodeClass {
    /// The fields of this class karpenter-rs does not act on; empty when it honours all of
    /// them.
    pub fn ignored_fields(&self) -> Vec<IgnoredField> {
        let mut ignored = Vec::new();
        let spec = &self.spec;
        for key in spec.other.keys() {
            ignored.push(IgnoredField {
                path: format!("spec.{key}"),
                why: "a field of Karpenter's EC2NodeClass that karpenter-rs carries but does \
                      not implement"
                    .into(),
            });
        }
        ignored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(spec: serde_json::Value) -> EC2NodeClass {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn paths(nc: &EC2NodeClass) -> Vec<String> {
        nc.ignored_fields().into_iter().map(|f| f.path).collect()
    }

    #[test]
    fn a_class_karpenter_rs_honours_fully_names_nothing() {
        let nc = class(serde_json::json!({
            "instanceProfile": "KarpenterNodeInstanceProfile",
            "amiSelectorTerms": [{"id": "ami-0123456789abcdef0"}],
            "amiFamily": "AL2023",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
        }));
        assert!(paths(&nc).is_empty(), "{:?}", nc.ignored_fields());
    }

    #[test]
    fn the_getting_started_class_names_neither_role_nor_its_alias() {
        let nc = class(serde_json::json!({
            "role": "KarpenterNodeRole-c",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "capacityReservationSelectorTerms": [{"id": "cr-0123456789abcdef0"}],
        }));
        // `role` is acted on (a managed instance profile is created for it), and so are
        // capacity reservations (launched into with the ReservedCapacity gate on).
        assert!(paths(&nc).is_empty(), "{:?}", nc.ignored_fields());
    }

    #[test]
    fn fields_carried_without_a_model_are_named_the_v1_15_ones_acted_on_are_not() {
        let nc = class(serde_json::json!({
            "instanceProfile": "p",
            "amiSelectorTerms": [{"id": "ami-0123456789abcdef0"}],
            "amiFamily": "AL2023",
            "subnetSelectorTerms": [{"id": "subnet-0123"}],
            "securityGroupSelectorTerms": [{"id": "sg-0123"}],
            "cpuOptions": {"nestedVirtualization": "enabled"},
            "ipPrefixCount": 2,
            "connectionTracking": {"udpTimeout": 30},
            "placementGroupSelector": {"name": "pg"},
            "networkInterfaces": [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}],
            "ipPrefixDelegation": true,
        }));
        assert_eq!(
            paths(&nc),
            [
                "spec.ipPrefixDelegation",
                "spec.networkInterfaces",
                "spec.placementGroupSelector"
            ]
        );
    }
}
