//! `karpenter.k8s.aws/v1alpha1` AWSNodeTemplate (and a Provisioner's inline `provider`) and
//! `karpenter.k8s.aws/v1beta1` EC2NodeClass as `karpenter.k8s.aws/v1` EC2NodeClass, after the
//! v1beta1 migration guide ("AWSNodeTemplate -> EC2NodeClass") and upstream's v1 conversion
//! webhook: an AMI family without AMI selector terms becomes an `alias` term
//! (`al2023@latest`), Ubuntu becomes AL2 with Ubuntu's root volume, and defaults that v1
//! changed (the IMDS hop limit) are kept at their old value.

use crate::fields::{Fields, put};
use crate::report::{Reporter, compact, index, join};
use crate::selectors::{ami_terms, network_terms};
use serde_json::{Map, Value, json};

/// API version of the v1 EC2NodeClass.
pub const API_VERSION: &str = "karpenter.k8s.aws/v1";
/// Kind of the EC2NodeClass.
pub const KIND: &str = "EC2NodeClass";
/// API group of the EC2NodeClass.
pub const GROUP: &str = "karpenter.k8s.aws";

/// Placeholder role upstream's `karpenter-convert` wrote where a v1alpha1 template named no
/// instance profile (the controller's `aws.defaultInstanceProfile` applied); `envsubst`
/// fills it.
pub const ROLE_PLACEHOLDER: &str = "$KARPENTER_NODE_ROLE";

/// The hop limit v1alpha1 and v1beta1 defaulted to; v1 defaults to 1.
const OLD_DEFAULT_HOP_LIMIT: u64 = 2;

/// Tag keys v1 reserves for itself (its CRD rejects them).
const RESTRICTED_TAGS: [&str; 4] = [
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
];
const RESTRICTED_TAG_PREFIX: &str = "kubernetes.io/cluster";

/// The fields of an EBS block device, the same in v1alpha1, v1beta1 and v1.
const EBS_FIELDS: [&str; 8] = [
    "deleteOnTermination",
    "encrypted",
    "iops",
    "kmsKeyID",
    "snapshotID",
    "throughput",
    "volumeSize",
    "volumeType",
];

/// AMI families whose AMIs v1 finds through an alias (lower-cased: `al2023@latest`).
const ALIAS_FAMILIES: [&str; 6] = [
    "AL2",
    "AL2023",
    "Bottlerocket",
    "Windows2019",
    "Windows2022",
    "Windows2025",
];

/// A v1 EC2NodeClass object.
pub(crate) fn object(metadata: Map<String, Value>, spec: Map<String, Value>) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": spec,
    })
}

/// The spec of a v1alpha1 AWSNodeTemplate, or of a v1alpha5 Provisioner's inline `provider`
/// (the same fields), as a v1 EC2NodeClass spec. `what` names the input in messages.
pub(crate) fn from_alpha(
    mut f: Fields,
    what: &str,
    report: &mut Reporter<'_>,
) -> Map<String, Value> {
    let mut spec = Map::new();
    // An inline provider carried its own type (`apiVersion`/`kind`), which the class replaces.
    for key in ["apiVersion", "kind"] {
        if f.take(key).is_some() {
            report.info(
                &f.path_of(key),
                "the inline provider's type; the EC2NodeClass replaces it",
            );
        }
    }
    for (old, new) in [
        ("subnetSelector", "subnetSelectorTerms"),
        ("securityGroupSelector", "securityGroupSelectorTerms"),
    ] {
        let path = f.path_of(old);
        if let Some(map) = f.take_string_map(old, report) {
            let terms = network_terms(map, &path, report);
            if !terms.is_empty() {
                spec.insert(new.into(), Value::Array(terms));
            }
        }
    }
    let ami_path = f.path_of("amiSelector");
    let terms = match f.take_string_map("amiSelector", report) {
        Some(map) => {
            report.warning(
                &ami_path,
                "v1 no longer reads scheduling requirements from AMI tags \
                 (karpenter.k8s.aws/instance-gpu-manufacturer …): if your AMIs carry such tags, \
                 split them into EC2NodeClasses for NodePools with matching requirements",
            );
            ami_terms(map, &ami_path, report)
        }
        None => Vec::new(),
    };
    let family_path = f.path_of("amiFamily");
    let family = f.take_str("amiFamily", report).unwrap_or_else(|| {
        report.info(&family_path, "not set: v1alpha1 defaulted it to AL2");
        "AL2".to_owned()
    });
    let profile_path = f.path_of("instanceProfile");
    match f.take_str("instanceProfile", report) {
        Some(profile) => {
            spec.insert("instanceProfile".into(), Value::from(profile));
        }
        None => {
            spec.insert("role".into(), Value::from(ROLE_PLACEHOLDER));
            report.warning(
                &profile_path,
                format!(
                    "not set, so the controller's aws.defaultInstanceProfile applied, which v1 \
                     dropped: role is set to the placeholder {ROLE_PLACEHOLDER} (fill it with \
                     envsubst) — or replace it with instanceProfile: <your default profile>"
                ),
            );
        }
    }
    if f.take("launchTemplate").is_some() {
        report.lossy(
            &f.path_of("launchTemplate"),
            "unmanaged launch templates were removed in v1beta1: express the template's \
             settings (AMI, user data, block devices, security groups …) in the EC2NodeClass; \
             not converted",
        );
    }
    let bdm = common(&mut f, &mut spec, report);
    ami_selection(&family, &family_path, terms, bdm, &mut spec, report);
    check_required(&spec, f.path(), report);
    f.finish(what, report);
    spec
}

/// The spec of a v1beta1 EC2NodeClass as a v1 spec.
pub(crate) fn from_beta(mut f: Fields, report: &mut Reporter<'_>) -> Map<String, Value> {
    let mut spec = Map::new();
    for key in ["subnetSelectorTerms", "securityGroupSelectorTerms"] {
        put(&mut spec, key, f.take(key));
    }
    let terms = f.take_list("amiSelectorTerms", report).unwrap_or_default();
    let family_path = f.path_of("amiFamily");
    let family = f.take_str("amiFamily", report).unwrap_or_else(|| {
        report.error(
            &family_path,
            "required in v1beta1 and missing; converted as AL2, v1alpha1's default",
        );
        "AL2".to_owned()
    });
    for key in [
        "role",
        "instanceProfile",
        "associatePublicIPAddress",
        "instanceStorePolicy",
    ] {
        put(&mut spec, key, f.take(key));
    }
    let bdm = common(&mut f, &mut spec, report);
    ami_selection(&family, &family_path, terms, bdm, &mut spec, report);
    if spec.contains_key("role") && spec.contains_key("instanceProfile") {
        spec.remove("instanceProfile");
        report.lossy(
            &f.path_of("instanceProfile"),
            "v1 takes exactly one of role and instanceProfile: role is kept (Karpenter manages \
             its instance profile), instanceProfile is dropped",
        );
    }
    check_required(&spec, f.path(), report);
    f.finish("a v1beta1 EC2NodeClass spec", report);
    spec
}

/// The fields both old versions share and v1 keeps: user data, tags, block devices, IMDS
/// options, monitoring, context. Returns whether block device mappings were given.
fn common(f: &mut Fields, spec: &mut Map<String, Value>, report: &mut Reporter<'_>) -> bool {
    for key in ["userData", "detailedMonitoring", "context"] {
        put(spec, key, f.take(key));
    }
    let tags_path = f.path_of("tags");
    if let Some(mut tags) = f.take_string_map("tags", report) {
        tags.retain(|key, _| {
            let restricted =
                RESTRICTED_TAGS.contains(&key.as_str()) || key.starts_with(RESTRICTED_TAG_PREFIX);
            if restricted {
                report.lossy(
                    &join(&tags_path, key),
                    "v1 reserves this tag key for Karpenter and rejects it; dropped",
                );
            }
            !restricted
        });
        if !tags.is_empty() {
            spec.insert("tags".into(), Value::Object(tags));
        }
    }
    let bdm_path = f.path_of("blockDeviceMappings");
    let bdm = f.take_list("blockDeviceMappings", report);
    let given = bdm.is_some();
    if let Some(items) = bdm {
        let items = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| block_device_mapping(item, &index(&bdm_path, i), report))
            .collect();
        spec.insert("blockDeviceMappings".into(), Value::Array(items));
    }
    let mo_path = f.path_of("metadataOptions");
    let mo = f.take_fields("metadataOptions", report);
    spec.insert(
        "metadataOptions".into(),
        metadata_options(mo, &mo_path, report),
    );
    given
}

/// A block device mapping with only the fields v1 knows (the others are reported).
fn block_device_mapping(item: Value, path: &str, report: &mut Reporter<'_>) -> Value {
    let mut f = Fields::of(item, path, report);
    let mut out = Map::new();
    for key in ["deviceName", "rootVolume"] {
        put(&mut out, key, f.take(key));
    }
    let mut ebs = f.take_fields("ebs", report);
    let mut device = Map::new();
    for key in EBS_FIELDS {
        put(&mut device, key, ebs.take(key));
    }
    ebs.finish("an EBS block device", report);
    if !device.is_empty() {
        out.insert("ebs".into(), Value::Object(device));
    }
    f.finish("a block device mapping", report);
    Value::Object(out)
}

/// `metadataOptions`, with the hop limit the old versions defaulted to made explicit: v1
/// lowered the default from 2 to 1, which cuts pods without host networking off from IMDS.
fn metadata_options(mut f: Fields, path: &str, report: &mut Reporter<'_>) -> Value {
    let mut out = Map::new();
    for key in [
        "httpEndpoint",
        "httpProtocolIPv6",
        "httpPutResponseHopLimit",
        "httpTokens",
    ] {
        put(&mut out, key, f.take(key));
    }
    if !out.contains_key("httpPutResponseHopLimit") {
        report.warning(
            &join(path, "httpPutResponseHopLimit"),
            format!(
                "set to {OLD_DEFAULT_HOP_LIMIT}, the old default; v1 defaults to 1, which keeps \
                 pods without hostNetwork from reaching IMDS: remove it to take v1's default"
            ),
        );
        out.insert(
            "httpPutResponseHopLimit".into(),
            Value::from(OLD_DEFAULT_HOP_LIMIT),
        );
    }
    f.finish("metadataOptions", report);
    Value::Object(out)
}

/// `amiFamily` and AMI selector terms as v1 wants them (upstream's v1 conversion webhook):
/// a supported family without terms becomes a lone `alias` term and no family; with terms,
/// both are kept; Ubuntu becomes AL2 (same user data) with Ubuntu's root volume; Custom
/// keeps its terms and must register nodes with v1's taint.
fn ami_selection(
    family: &str,
    family_path: &str,
    terms: Vec<Value>,
    block_devices_given: bool,
    spec: &mut Map<String, Value>,
    report: &mut Reporter<'_>,
) {
    let terms_path = join(parent(family_path), "amiSelectorTerms");
    if ALIAS_FAMILIES.contains(&family) {
        if terms.is_empty() {
            let alias = format!("{}@latest", family.to_lowercase());
            report.info(
                family_path,
                format!(
                    "{family} without AMI selector terms becomes amiSelectorTerms [{{alias: \
                     {alias}}}] (the latest EKS-optimized AMI, as before); pin a version \
                     (al2023@v20240807 …) to control AMI upgrades"
                ),
            );
            spec.insert("amiSelectorTerms".into(), json!([{ "alias": alias }]));
        } else {
            spec.insert("amiFamily".into(), Value::from(family));
            spec.insert("amiSelectorTerms".into(), Value::Array(terms));
        }
    } else if family == "Ubuntu" {
        spec.insert("amiFamily".into(), Value::from("AL2"));
        report.warning(
            family_path,
            "v1 dropped the Ubuntu family: amiFamily AL2 generates the same user data for the \
             Ubuntu AMIs your selector terms pick",
        );
        if !block_devices_given {
            spec.insert(
                "blockDeviceMappings".into(),
                json!([{
                    "deviceName": "/dev/sda1",
                    "rootVolume": true,
                    "ebs": {"encrypted": true, "volumeType": "gp3", "volumeSize": "20Gi"}
                }]),
            );
            report.info(
                family_path,
                "Ubuntu's default root volume (/dev/sda1, 20Gi gp3, encrypted) is written out, \
                 since AL2's default device differs",
            );
        }
        if terms.is_empty() {
            report.lossy(
                &terms_path,
                "v1 no longer discovers Ubuntu AMIs: add amiSelectorTerms that select them",
            );
        } else {
            spec.insert("amiSelectorTerms".into(), Value::Array(terms));
        }
    } else if family == "Custom" {
        spec.insert("amiFamily".into(), Value::from(family));
        if terms.is_empty() {
            report.error(&terms_path, "amiFamily Custom needs AMI selector terms");
        } else {
            spec.insert("amiSelectorTerms".into(), Value::Array(terms));
        }
        let registers = spec
            .get("userData")
            .and_then(Value::as_str)
            .is_some_and(|u| u.contains("karpenter.sh/unregistered"));
        if !registers {
            report.warning(
                family_path,
                "with amiFamily Custom, v1 needs the kubelet to register with the taint \
                 karpenter.sh/unregistered:NoExecute: add it to your user data",
            );
        }
    } else {
        report.error(
            family_path,
            format!("unknown AMI family {family:?}; kept as it is"),
        );
        spec.insert("amiFamily".into(), Value::from(family));
        spec.insert("amiSelectorTerms".into(), Value::Array(terms));
    }
    if family == "AL2023" && spec.contains_key("userData") {
        report.warning(
            family_path,
            "with AL2023, v1 merges Karpenter's NodeConfig after your user data, so Karpenter's \
             values win: set kubelet settings in spec.kubelet instead",
        );
    }
}

/// The path's parent (`spec.provider` of `spec.provider.amiFamily`).
fn parent(path: &str) -> &str {
    path.rsplit_once('.').map_or("", |(p, _)| p)
}

/// Reports the fields v1 requires that nothing converted into.
fn check_required(spec: &Map<String, Value>, path: &str, report: &mut Reporter<'_>) {
    for key in ["subnetSelectorTerms", "securityGroupSelectorTerms"] {
        let present = spec
            .get(key)
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty());
        if !present {
            report.lossy(
                &join(path, key),
                "required in v1 and nothing converts into it: add selector terms",
            );
        }
    }
}

/// The kubelet settings of a class, for messages.
pub(crate) fn describe_kubelet(kubelet: Option<&Value>) -> String {
    kubelet.map_or_else(|| "no kubelet settings".to_owned(), compact)
}

#[cfg(test)]
mod tests {
    use crate::Severity;
    use crate::testing::{beta_class, message, object, raised, run};
    use serde_json::{Value, json};

    fn template(spec: &str) -> String {
        format!(
            "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {{name: t}}\n\
             spec:\n  subnetSelector: {{a: b}}\n  securityGroupSelector: {{a: b}}\n{spec}"
        )
    }

    fn class_spec(c: &crate::Conversion, name: &str) -> Value {
        object(c, "EC2NodeClass", name)["spec"].clone()
    }

    #[test]
    fn ami_families_without_terms_become_aliases() {
        for (family, alias) in [
            ("AL2", "al2@latest"),
            ("Bottlerocket", "bottlerocket@latest"),
            ("Windows2019", "windows2019@latest"),
            ("Windows2022", "windows2022@latest"),
        ] {
            let spec = class_spec(&run(&template(&format!("  amiFamily: {family}\n"))), "t");
            assert_eq!(
                spec["amiSelectorTerms"],
                json!([{"alias": alias}]),
                "{family}"
            );
            assert!(spec.get("amiFamily").is_none());
        }
        let beta = run(&beta_class("c", ""));
        let spec = class_spec(&beta, "c");
        assert_eq!(
            spec["amiSelectorTerms"],
            json!([{"alias": "al2023@latest"}])
        );
        assert!(spec.get("amiFamily").is_none());
    }

    #[test]
    fn ami_families_with_terms_keep_both() {
        let spec = class_spec(
            &run(&beta_class(
                "c",
                "  amiSelectorTerms: [{name: my-ami, owner: self}]\n",
            )),
            "c",
        );
        assert_eq!(spec["amiFamily"], "AL2023");
        assert_eq!(
            spec["amiSelectorTerms"],
            json!([{"name": "my-ami", "owner": "self"}])
        );
    }

    #[test]
    fn custom_needs_terms_and_the_registration_taint() {
        let c = run(&template("  amiFamily: Custom\n"));
        assert!(
            raised(&c, Severity::Error)
                .contains(&(Severity::Error, "spec.amiSelectorTerms".to_owned()))
        );
        assert!(
            message(&c, Severity::Warning, "spec.amiFamily").contains("karpenter.sh/unregistered")
        );
        let c = run(&template(
            "  amiFamily: Custom\n  amiSelector: {aws::ids: ami-1}\n  userData: |\n    registerWithTaints: [{key: karpenter.sh/unregistered, effect: NoExecute}]\n",
        ));
        assert!(raised(&c, Severity::Error).is_empty());
        assert!(
            !c.issues
                .iter()
                .any(|i| i.field == "spec.amiFamily" && i.severity == Severity::Warning)
        );
        assert_eq!(class_spec(&c, "t")["amiFamily"], "Custom");
    }

    #[test]
    fn ubuntu_without_terms_cannot_be_converted_and_unknown_families_are_errors() {
        let c = run(&template("  amiFamily: Ubuntu\n"));
        assert_eq!(
            raised(&c, Severity::Lossy),
            [(Severity::Lossy, "spec.amiSelectorTerms".to_owned())]
        );
        let c = run(&template("  amiFamily: Gentoo\n"));
        assert_eq!(
            raised(&c, Severity::Error),
            [(Severity::Error, "spec.amiFamily".to_owned())]
        );
    }

    #[test]
    fn al2023_user_data_precedence_is_a_warning() {
        let c = run(&beta_class(
            "c",
            "  userData: \"#!/bin/bash\\necho hi\\n\"\n",
        ));
        assert!(message(&c, Severity::Warning, "spec.amiFamily").contains("NodeConfig"));
    }

    #[test]
    fn instance_profile_is_kept_and_role_gets_a_placeholder_without_one() {
        let spec = class_spec(
            &run(&template(
                "  instanceProfile: KarpenterNodeInstanceProfile\n",
            )),
            "t",
        );
        assert_eq!(spec["instanceProfile"], "KarpenterNodeInstanceProfile");
        assert!(spec.get("role").is_none());
        let c = run(&template(""));
        assert_eq!(class_spec(&c, "t")["role"], "$KARPENTER_NODE_ROLE");
        assert!(message(&c, Severity::Warning, "spec.instanceProfile").contains("envsubst"));
        // v1beta1 with both: role is kept.
        let c = run(&beta_class("c", "  instanceProfile: p\n"));
        assert_eq!(class_spec(&c, "c")["role"], "r");
        assert_eq!(
            raised(&c, Severity::Lossy),
            [(Severity::Lossy, "spec.instanceProfile".to_owned())]
        );
    }

    #[test]
    fn launch_templates_and_restricted_tags_are_lossy() {
        let c = run(&template(
            "  launchTemplate: my-template\n  tags: {team: a, karpenter.sh/nodepool: x, kubernetes.io/cluster/demo: owned}\n",
        ));
        assert_eq!(
            raised(&c, Severity::Lossy),
            [
                (Severity::Lossy, "spec.launchTemplate".to_owned()),
                (
                    Severity::Lossy,
                    "spec.tags.karpenter.sh/nodepool".to_owned()
                ),
                (
                    Severity::Lossy,
                    "spec.tags.kubernetes.io/cluster/demo".to_owned()
                ),
            ]
        );
        let spec = class_spec(&c, "t");
        assert_eq!(spec["tags"], json!({"team": "a"}));
        assert!(spec.get("launchTemplate").is_none());
    }

    #[test]
    fn metadata_options_keep_the_old_hop_limit_default() {
        let spec = class_spec(
            &run(&template("  metadataOptions: {httpTokens: optional}\n")),
            "t",
        );
        assert_eq!(
            spec["metadataOptions"],
            json!({"httpTokens": "optional", "httpPutResponseHopLimit": 2})
        );
        let c = run(&template(
            "  metadataOptions: {httpPutResponseHopLimit: 3}\n",
        ));
        assert_eq!(
            class_spec(&c, "t")["metadataOptions"],
            json!({"httpPutResponseHopLimit": 3})
        );
        assert!(
            !c.issues
                .iter()
                .any(|i| i.field.ends_with("httpPutResponseHopLimit"))
        );
    }

    #[test]
    fn block_devices_user_data_monitoring_and_context_are_copied() {
        let c = run(&template(
            "  blockDeviceMappings:\n  - deviceName: /dev/xvda\n    ebs: {volumeSize: 50Gi, volumeType: gp3, fast: true}\n\
             \x20 userData: echo hi\n  detailedMonitoring: true\n  context: ctx\n",
        ));
        let spec = class_spec(&c, "t");
        assert_eq!(
            spec["blockDeviceMappings"],
            json!([{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "50Gi", "volumeType": "gp3"}}])
        );
        assert_eq!(spec["userData"], "echo hi");
        assert_eq!(spec["detailedMonitoring"], true);
        assert_eq!(spec["context"], "ctx");
        assert_eq!(
            raised(&c, Severity::Lossy),
            [(
                Severity::Lossy,
                "spec.blockDeviceMappings[0].ebs.fast".to_owned()
            )]
        );
    }

    #[test]
    fn missing_selectors_and_a_missing_family_are_reported() {
        let c = run(
            "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: t}\nspec: {}\n",
        );
        assert_eq!(
            raised(&c, Severity::Lossy),
            [
                (Severity::Lossy, "spec.subnetSelectorTerms".to_owned()),
                (
                    Severity::Lossy,
                    "spec.securityGroupSelectorTerms".to_owned()
                ),
            ]
        );
        let c = run(&beta_class("c", "").replace("  amiFamily: AL2023\n", ""));
        assert_eq!(
            raised(&c, Severity::Error),
            [(Severity::Error, "spec.amiFamily".to_owned())]
        );
    }

    #[test]
    fn v1beta1_fields_v1_kept_are_copied() {
        let spec = class_spec(
            &run(&beta_class(
                "c",
                "  associatePublicIPAddress: false\n  instanceStorePolicy: RAID0\n  detailedMonitoring: true\n",
            )),
            "c",
        );
        assert_eq!(spec["associatePublicIPAddress"], false);
        assert_eq!(spec["instanceStorePolicy"], "RAID0");
        assert_eq!(spec["subnetSelectorTerms"], json!([{"id": "subnet-1"}]));
        assert_eq!(spec["securityGroupSelectorTerms"], json!([{"id": "sg-1"}]));
    }
}
