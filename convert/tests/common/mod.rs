//! Loading converted output the way karpenter-rs loads v1 manifests.
//!
//! NodePools and NodeClaims go through the project's own parser and types
//! (`karpenter_cluster::manifests`, `karpenter_cloudprovider::v1`) and their validation.
//! EC2NodeClass's type lives in the AWS provider crate, whose SDK this crate's tests do not
//! build; it is checked against the CRD that crate generates from that type and commits
//! (`charts/karpenter-rs/crds/karpenter.k8s.aws_ec2nodeclasses.yaml`, kept current by the
//! provider's `committed_crd_is_up_to_date` test): every field known, typed and in range,
//! required fields present, plus the CRD's CEL rules on selector terms and identity.

#![allow(dead_code)]

use karpenter_cloudprovider::{NodeClaim, NodePool};
use karpenter_cluster::inputs::Inputs;
use karpenter_cluster::manifests::parse_str;
use karpenter_convert::{Conversion, Options, Severity};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The fixture file `name`.
pub fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The text of fixture files, joined as one stream.
pub fn fixture_text(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| std::fs::read_to_string(fixture_path(n)).unwrap())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Converts fixture files (read as one stream) with `options`.
pub fn convert_with(names: &[&str], options: &Options) -> Conversion {
    karpenter_convert::convert_str(Path::new(names[0]), &fixture_text(names), options).unwrap()
}

/// Converts fixture files with the default options.
pub fn convert(names: &[&str]) -> Conversion {
    convert_with(names, &Options::default())
}

/// The output object of `kind` named `name`.
pub fn object<'a>(c: &'a Conversion, kind: &str, name: &str) -> &'a Value {
    c.objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {:#?}", c.objects))
}

/// `(field, message)` of the issues of `severity`.
pub fn issues(c: &Conversion, severity: Severity) -> Vec<(String, String)> {
    c.issues
        .iter()
        .filter(|i| i.severity == severity)
        .map(|i| (i.field.clone(), i.message.clone()))
        .collect()
}

/// The fields of the issues of `severity`.
pub fn fields(c: &Conversion, severity: Severity) -> Vec<String> {
    issues(c, severity).into_iter().map(|(f, _)| f).collect()
}

/// The placeholders the docs' manifests leave for `envsubst`, filled as a user's shell would.
pub fn envsubst(text: &str) -> String {
    text.replace("${CLUSTER_NAME}", "my-cluster")
        .replace("${ARM_AMI_ID}", "ami-0123456789abcdef0")
        .replace("${AMD_AMI_ID}", "ami-0fedcba9876543210")
        .replace("$KARPENTER_NODE_ROLE", "KarpenterNodeRole-my-cluster")
}

/// What the converted YAML holds, loaded as karpenter-rs loads v1 manifests.
pub struct Loaded {
    pub node_pools: Vec<NodePool>,
    pub node_claims: Vec<NodeClaim>,
    pub node_classes: Vec<Value>,
}

/// Parses the conversion's YAML (after `envsubst`) with the project's manifest parser,
/// decodes and validates every NodePool and NodeClaim with its v1 types, runs the documents
/// through `karpenter plan`'s reader, and checks every EC2NodeClass against the v1 CRD.
pub fn load_v1(c: &Conversion) -> Loaded {
    let yaml = envsubst(&c.to_yaml().unwrap());
    let docs = parse_str(Path::new("converted.yaml"), &yaml).unwrap();
    assert_eq!(docs.len(), c.objects.len(), "every object is one document");
    let mut loaded = Loaded {
        node_pools: Vec::new(),
        node_claims: Vec::new(),
        node_classes: Vec::new(),
    };
    for doc in &docs {
        match doc.kind() {
            Some("NodePool") => {
                let pool = doc.decode_node_pool().unwrap();
                pool.validate().unwrap();
                loaded.node_pools.push(pool);
            }
            Some("NodeClaim") => {
                assert_eq!(doc.api_version(), Some("karpenter.sh/v1"));
                let claim: NodeClaim = doc.decode().unwrap();
                claim.validate().unwrap();
                loaded.node_claims.push(claim);
            }
            Some("EC2NodeClass") => {
                assert_eq!(doc.api_version(), Some("karpenter.k8s.aws/v1"));
                let errors = ec2_node_class_errors(&doc.value);
                assert!(errors.is_empty(), "{errors:#?}\n{:#}", doc.value);
                loaded.node_classes.push(doc.value.clone());
            }
            _ => {}
        }
    }
    Inputs::from_documents(&docs).unwrap();
    loaded
}

fn crd_schema() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/karpenter-rs/crds/karpenter.k8s.aws_ec2nodeclasses.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let docs = parse_str(&path, &text).unwrap();
    let versions = docs[0].value["spec"]["versions"]
        .as_array()
        .unwrap()
        .clone();
    let v1 = versions.iter().find(|v| v["name"] == "v1").unwrap();
    v1["schema"]["openAPIV3Schema"].clone()
}

/// Everything wrong with `class` by the v1 CRD.
pub fn ec2_node_class_errors(class: &Value) -> Vec<String> {
    let schema = crd_schema();
    let mut errs = Vec::new();
    structural(
        &schema["properties"]["spec"],
        &class["spec"],
        "spec",
        &mut errs,
    );
    for key in schema["properties"]["spec"]["required"].as_array().unwrap() {
        if class["spec"].get(key.as_str().unwrap()).is_none() {
            errs.push(format!("spec.{key}: required"));
        }
    }
    errs.extend(cel_rules(&class["spec"]));
    errs
}

/// Types, known fields, enums, ranges, sizes and the ID patterns of the schema.
fn structural(schema: &Value, value: &Value, path: &str, errs: &mut Vec<String>) {
    let mut err = |m: String| errs.push(format!("{path}: {m}"));
    if schema["x-kubernetes-int-or-string"] == true {
        if !(value.is_i64() || value.is_string()) {
            err(format!("expected an int or string, found {value}"));
        }
        return;
    }
    // An untyped schema that preserves unknown fields (v1.15's open `spec.kubelet` map)
    // accepts any value, as the API server does.
    if schema.get("type").is_none() && schema["x-kubernetes-preserve-unknown-fields"] == true {
        return;
    }
    match schema["type"].as_str() {
        Some("object") => {
            let Some(map) = value.as_object() else {
                return err(format!("expected an object, found {value}"));
            };
            if let Some(max) = schema["maxProperties"].as_u64()
                && map.len() as u64 > max
            {
                err(format!("more than {max} properties"));
            }
            for key in schema["required"].as_array().into_iter().flatten() {
                if !map.contains_key(key.as_str().unwrap()) {
                    errs.push(format!("{path}.{key}: required"));
                }
            }
            for (k, v) in map {
                let sub = format!("{path}.{k}");
                if let Some(s) = schema["properties"].get(k) {
                    structural(s, v, &sub, errs);
                } else if let Some(s) = schema.get("additionalProperties") {
                    structural(s, v, &sub, errs);
                } else {
                    // The spec preserves unknown fields for round trips, but a converter
                    // should write none.
                    errs.push(format!("{sub}: not a field of the v1 EC2NodeClass"));
                }
            }
        }
        Some("array") => {
            let Some(items) = value.as_array() else {
                return err(format!("expected a list, found {value}"));
            };
            if let Some(max) = schema["maxItems"].as_u64()
                && items.len() as u64 > max
            {
                err(format!("more than {max} items"));
            }
            if let Some(min) = schema["minItems"].as_u64()
                && (items.len() as u64) < min
            {
                err(format!("fewer than {min} items"));
            }
            for (i, item) in items.iter().enumerate() {
                structural(&schema["items"], item, &format!("{path}[{i}]"), errs);
            }
        }
        Some("string") => {
            let Some(s) = value.as_str() else {
                return err(format!("expected a string, found {value}"));
            };
            if let Some(values) = schema["enum"].as_array()
                && !values.iter().any(|v| v == s)
            {
                err(format!("{s:?} not one of {values:?}"));
            }
            if let Some(pattern) = schema["pattern"].as_str()
                && !id_pattern_matches(pattern, s)
            {
                err(format!("{s:?} does not match {pattern}"));
            }
        }
        Some("integer") => {
            let Some(n) = value.as_i64() else {
                return err(format!("expected an integer, found {value}"));
            };
            if schema["minimum"].as_i64().is_some_and(|m| n < m)
                || schema["maximum"].as_i64().is_some_and(|m| n > m)
            {
                err(format!("{n} out of range"));
            }
        }
        Some("boolean") => {
            if !value.is_boolean() {
                err(format!("expected a boolean, found {value}"));
            }
        }
        other => err(format!("schema type {other:?} not handled by this check")),
    }
}

/// The CRD's only patterns are unanchored `<prefix>-[0-9a-z]+` (AMI, subnet and security
/// group IDs); any other pattern fails the test rather than pass unchecked.
fn id_pattern_matches(pattern: &str, value: &str) -> bool {
    let prefix = pattern
        .strip_suffix("[0-9a-z]+")
        .unwrap_or_else(|| panic!("pattern {pattern} is not handled by this check"));
    value.match_indices(prefix).any(|(i, _)| {
        value[i + prefix.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
    })
}

fn has(term: &Value, key: &str) -> bool {
    term.get(key).is_some()
}

/// The CRD's CEL rules on identity and selector terms.
fn cel_rules(spec: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    if has(spec, "role") == has(spec, "instanceProfile") {
        errs.push("must specify exactly one of ['role', 'instanceProfile']".to_owned());
    }
    let empty = Vec::new();
    let amis = spec["amiSelectorTerms"].as_array().unwrap_or(&empty);
    let alias = amis.iter().any(|t| has(t, "alias"));
    if alias && amis.len() != 1 {
        errs.push("'alias' is mutually exclusive with other amiSelectorTerms".to_owned());
    }
    for t in amis {
        if !["tags", "id", "name", "alias", "ssmParameter"]
            .iter()
            .any(|k| has(t, k))
        {
            errs.push(format!("AMI term {t} selects nothing"));
        }
        for exclusive in ["id", "alias"] {
            let others = ["id", "alias", "tags", "name", "owner"]
                .iter()
                .filter(|k| **k != exclusive)
                .any(|k| has(t, k));
            if has(t, exclusive) && others {
                errs.push(format!(
                    "'{exclusive}' is mutually exclusive in AMI term {t}"
                ));
            }
        }
    }
    if !alias && !has(spec, "amiFamily") {
        errs.push("amiFamily must be set when amiSelectorTerms does not contain an alias".into());
    }
    let al2_alias = amis
        .iter()
        .any(|t| t["alias"].as_str().is_some_and(|a| a.starts_with("al2@")));
    if al2_alias
        && spec["amiFamily"]
            .as_str()
            .is_some_and(|f| f != "AL2" && f != "Custom")
    {
        errs.push("amiFamily must be AL2 or Custom with an al2 alias".into());
    }
    for key in ["subnetSelectorTerms", "securityGroupSelectorTerms"] {
        if spec[key].as_array().is_some_and(Vec::is_empty) {
            errs.push(format!("{key} cannot be empty"));
        }
    }
    for t in spec["subnetSelectorTerms"].as_array().unwrap_or(&empty) {
        if has(t, "id") == has(t, "tags") {
            errs.push(format!("subnet term {t} needs exactly one of tags, id"));
        }
    }
    for t in spec["securityGroupSelectorTerms"]
        .as_array()
        .unwrap_or(&empty)
    {
        if ["tags", "id", "name"].iter().filter(|k| has(t, k)).count() != 1 {
            errs.push(format!(
                "security group term {t} needs exactly one of tags, id, name"
            ));
        }
    }
    errs
}
