//! # karpenter-convert
//!
//! Converts manifests of Karpenter's older APIs into the v1 APIs karpenter-rs reads:
//!
//! | input | output |
//! |---|---|
//! | `karpenter.sh/v1alpha5` Provisioner | `karpenter.sh/v1` NodePool (and an EC2NodeClass for an inline `provider`) |
//! | `karpenter.k8s.aws/v1alpha1` AWSNodeTemplate | `karpenter.k8s.aws/v1` EC2NodeClass |
//! | `karpenter.sh/v1beta1` NodePool, NodeClaim | `karpenter.sh/v1` NodePool, NodeClaim |
//! | `karpenter.k8s.aws/v1beta1` EC2NodeClass | `karpenter.k8s.aws/v1` EC2NodeClass |
//! | `karpenter.sh/v1` and `karpenter.k8s.aws/v1` objects | unchanged |
//! | anything else (Pods, Deployments, Nodes …) | unchanged but for the label, annotation and taint keys the guides rename |
//!
//! The rules are upstream's: the v1beta1 migration guide (v0.32), upstream's
//! `karpenter-convert` tool (v0.32, for the v1alpha5 webhook defaults it wrote out) and the
//! v1 migration guide and conversion webhooks (v1.0). Every field is either converted or
//! reported: a conversion returns the objects and one [`Issue`] per rename, move, default,
//! placeholder or loss, naming the input object, the field's path and why. Nothing is
//! dropped silently.
//!
//! Pure: text or documents in, values and issues out; no I/O, no clock.
#![forbid(unsafe_code)]

mod fields;
mod kubelet;
pub mod labels;
mod metadata;
mod nodeclaim;
pub mod nodeclass;
pub mod nodepool;
pub mod report;
mod selectors;
mod state;
mod verdict;
mod workloads;

use karpenter_cluster::manifests::{self, Document, ManifestError, Origin};
use report::Reporter;
pub use report::{Issue, Severity};
use serde_json::Value;
use state::State;
use std::collections::HashMap;
use std::path::Path;
pub use verdict::Refusal;

/// Choices a user makes about a conversion.
#[derive(Debug, Clone)]
pub struct Options {
    /// Write out the requirements v1alpha5's webhook added to Provisioners that lacked them
    /// (`kubernetes.io/os In [linux]`, `kubernetes.io/arch In [amd64]`,
    /// `karpenter.sh/capacity-type In [on-demand]`, instance category c/m/r of a generation
    /// above 2), as upstream's `karpenter-convert` did by default: without them, a v1
    /// NodePool offers every OS, architecture, capacity type and instance type. Default
    /// `true`.
    pub alpha_default_requirements: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            alpha_default_requirements: true,
        }
    }
}

/// A conversion that could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The input is not YAML or JSON Kubernetes objects.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// An object could not be written as YAML.
    #[error("writing {object} as YAML: {message}")]
    Yaml {
        /// The object.
        object: String,
        /// What the serialiser said.
        message: String,
    },
}

/// The result of a conversion: the output objects in input order, and the issues in the
/// order of the objects they are about.
#[derive(Debug, Clone, Default)]
pub struct Conversion {
    /// The objects: converted ones in v1, the others as they came (keys renamed).
    pub objects: Vec<Value>,
    /// Everything the user should know.
    pub issues: Vec<Issue>,
}

impl Conversion {
    /// How many issues have `severity`.
    pub fn count(&self, severity: Severity) -> usize {
        self.issues
            .iter()
            .filter(|i| i.severity == severity)
            .count()
    }

    /// Whether the output means what the input meant: no lossy conversion and no error.
    pub fn is_complete(&self) -> bool {
        self.issues.iter().all(|i| i.severity < Severity::Lossy)
    }

    /// The objects as a multi-document YAML stream (`---` before each).
    pub fn to_yaml(&self) -> Result<String, ConvertError> {
        let mut out = String::new();
        for object in &self.objects {
            let text = serde_saphyr::to_string(object).map_err(|e| ConvertError::Yaml {
                object: describe(object),
                message: e.to_string(),
            })?;
            out.push_str("---\n");
            out.push_str(&text);
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
        Ok(out)
    }
}

fn describe(object: &Value) -> String {
    format!(
        "{} {}",
        object["kind"].as_str().unwrap_or("object"),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Parses `text` (YAML or JSON, many documents, `kind: List` expanded) as if read from `file`
/// and converts it.
pub fn convert_str(file: &Path, text: &str, options: &Options) -> Result<Conversion, ConvertError> {
    let docs = manifests::parse_str(file, text)?;
    Ok(convert_documents(docs, options))
}

const KARPENTER_GROUPS: [&str; 2] = ["karpenter.sh", nodeclass::GROUP];
const V1: [&str; 2] = [nodepool::API_VERSION, nodeclass::API_VERSION];

/// Converts `docs` (taken, not cloned: a cluster dump can hold tens of thousands of
/// objects). Objects that cannot be converted at all are left out and reported as errors;
/// everything else is in [`Conversion::objects`].
pub fn convert_documents(docs: Vec<Document>, options: &Options) -> Conversion {
    let mut state = State::default();
    let mut objects = Vec::with_capacity(docs.len());
    for (n, doc) in docs.into_iter().enumerate() {
        let object = Origin(&doc).to_string();
        convert_one(doc, &object, n, options, &mut state);
        objects.push(object);
    }
    kubelet::place(&mut state);
    nodeclaim::link(&mut state);
    let mut outs = std::mem::take(&mut state.outs);
    outs.sort_by_key(|o| o.order);
    // Each object a cluster can hold once, and the input object that first made it.
    let mut made: HashMap<ObjectKey, String> = HashMap::new();
    let mut kept: Vec<Value> = Vec::with_capacity(outs.len());
    for out in outs {
        if let Some(key) = object_key(&out.value) {
            if let Some(first) = made.get(&key) {
                Reporter::new(out.object.clone(), &mut state.issues).error(
                    "(object)",
                    format!(
                        "{} is also made from {first}; this one is left out",
                        describe(&out.value)
                    ),
                );
                continue;
            }
            made.insert(key, out.object.clone());
        }
        if out.converted {
            validate(
                &out.value,
                &mut Reporter::new(out.object.clone(), &mut state.issues),
            );
        }
        kept.push(out.value);
    }
    // Issues in the order of their objects; within one object, in the order raised.
    let position: HashMap<&str, usize> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| (o.as_str(), i))
        .collect();
    state.issues.sort_by_key(|i| {
        position
            .get(i.object.as_str())
            .copied()
            .unwrap_or(usize::MAX)
    });
    Conversion {
        objects: kept,
        issues: state.issues,
    }
}

/// What makes an object one object in a cluster: group, kind, namespace and name.
type ObjectKey = (String, String, String, String);

/// The key of a named object; `None` for one without a name.
fn object_key(value: &Value) -> Option<ObjectKey> {
    let name = value["metadata"]["name"].as_str()?;
    let api = value["apiVersion"].as_str().unwrap_or_default();
    let group = api.rsplit_once('/').map_or("", |(g, _)| g);
    Some((
        group.to_owned(),
        value["kind"].as_str().unwrap_or_default().to_owned(),
        value["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        name.to_owned(),
    ))
}

fn convert_one(doc: Document, object: &str, n: usize, options: &Options, state: &mut State) {
    let api_version = doc.api_version().unwrap_or_default().to_owned();
    let kind = doc.kind().unwrap_or_default().to_owned();
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    let mut report = Reporter::new(object, &mut state.issues);
    let mut value = doc.value;
    match (api_version.as_str(), kind.as_str()) {
        ("karpenter.sh/v1alpha5", "Provisioner") => {
            let (metadata, spec) = config_envelope(value, "a Provisioner", &mut report);
            let pool = nodepool::from_provisioner(metadata, spec, options, &mut report);
            push_pool(state, pool, object, n);
        }
        ("karpenter.sh/v1beta1", "NodePool") => {
            let (metadata, spec) = config_envelope(value, "a NodePool", &mut report);
            let pool = nodepool::from_beta(metadata, spec, &mut report);
            push_pool(state, pool, object, n);
        }
        ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate") => {
            let (metadata, spec) = config_envelope(value, "an AWSNodeTemplate", &mut report);
            let spec = nodeclass::from_alpha(spec, "a v1alpha1 AWSNodeTemplate spec", &mut report);
            state.push(nodeclass::object(metadata, spec), object, true, (n, 0));
        }
        ("karpenter.k8s.aws/v1beta1", "EC2NodeClass") => {
            let (metadata, spec) = config_envelope(value, "an EC2NodeClass", &mut report);
            let spec = nodeclass::from_beta(spec, &mut report);
            state.push(nodeclass::object(metadata, spec), object, true, (n, 0));
        }
        ("karpenter.sh/v1beta1", "NodeClaim") => {
            let claim = nodeclaim::convert(value, &mut report);
            let out = state.push(claim.value, object, true, (n, 0));
            state.claims.push(nodeclaim::ClaimLink {
                out,
                object: object.to_owned(),
                pool: claim.pool,
                class: claim.class,
                kubelet: claim.kubelet,
            });
        }
        ("karpenter.sh/v1alpha5", "Machine") => report.lossy(
            "(object)",
            "Machines are made by the v1alpha5 controller, and v1 has no equivalent to apply \
             (the controller makes NodeClaims): left out",
        ),
        _ if V1.contains(&api_version.as_str()) => {
            state.push(value, object, false, (n, 0));
        }
        _ if KARPENTER_GROUPS.contains(&group) => report.error(
            "apiVersion",
            format!(
                "{kind} {api_version} is not a Karpenter API this tool converts (it converts {}); \
                 left out",
                manifests::OLDER_KARPENTER_APIS
                    .iter()
                    .map(|(v, k, _)| format!("{v} {k}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        _ => {
            workloads::rename(&mut value, &kind, &mut report);
            state.push(value, object, false, (n, 0));
        }
    }
}

/// The metadata (converted) and spec fields of a NodePool or node class input; its status
/// is dropped, since the controller writes it.
fn config_envelope(
    value: Value,
    what: &str,
    report: &mut Reporter<'_>,
) -> (serde_json::Map<String, Value>, fields::Fields) {
    let mut top = fields::Fields::of(value, "", report);
    top.take("apiVersion");
    top.take("kind");
    let metadata = metadata::config_metadata(top.take("metadata"), report);
    if top.take("status").is_some() {
        report.info("status", "removed: the controller writes it");
    }
    let spec = top.take_fields("spec", report);
    top.finish(what, report);
    (metadata, spec)
}

fn push_pool(state: &mut State, pool: nodepool::Pool, object: &str, n: usize) {
    let name = pool.value["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let out = state.push(pool.value, object, true, (n, 0));
    if let Some(class) = pool.inline_class {
        state.push(class, object, true, (n, 1));
    }
    if let Some(class) = pool.class {
        state.pool_kubelets.push(kubelet::PoolKubelet {
            out,
            object: object.to_owned(),
            pool: name,
            class,
            kubelet: pool.kubelet,
            field: pool.kubelet_field,
        });
    } else if pool.kubelet.is_some() {
        Reporter::new(object, &mut state.issues).lossy(
            &pool.kubelet_field,
            "v1 keeps kubelet settings on the node class, and this NodePool's class is not an \
             EC2NodeClass: move them there by hand",
        );
    }
}

/// Checks a converted NodePool or NodeClaim against karpenter-rs's own v1 types and
/// validation (the API server's schema and CEL rules); a failure is an error on the object.
/// A NodePool's requirements that no EC2 instance type meets, or whose key looks like a
/// mistyped well-known label, are warnings naming the likely fix.
fn validate(value: &Value, report: &mut Reporter<'_>) {
    let result = match value["kind"].as_str() {
        Some("NodePool") => {
            serde_json::from_value::<karpenter_cloudprovider::NodePool>(value.clone())
                .map_err(|e| e.to_string())
                .and_then(|p| {
                    // Checked against the embedded EC2 catalogue even when validation fails,
                    // so a pool with two mistakes hears of both.
                    for hint in
                        p.requirement_hints(karpenter_catalog::default_instance_types(), false)
                    {
                        report.warning("spec.template.spec.requirements", hint);
                    }
                    p.validate().map_err(|e| e.to_string())
                })
        }
        Some("NodeClaim") => {
            serde_json::from_value::<karpenter_cloudprovider::NodeClaim>(value.clone())
                .map_err(|e| e.to_string())
                .and_then(|c| c.validate().map_err(|e| e.to_string()))
        }
        _ => Ok(()),
    };
    if let Err(e) = result {
        report.error("(converted object)", format!("not a valid v1 object: {e}"));
    }
}

/// Converting YAML text in unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// Converts `yaml` with the default options.
    pub(crate) fn run(yaml: &str) -> Conversion {
        convert_str(Path::new("t.yaml"), yaml, &Options::default()).unwrap()
    }

    /// The output object of `kind` named `name`.
    pub(crate) fn object<'a>(c: &'a Conversion, kind: &str, name: &str) -> &'a Value {
        c.objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in {:#?}", c.objects))
    }

    /// `(severity, field)` of every issue at or above `min`.
    pub(crate) fn raised(c: &Conversion, min: Severity) -> Vec<(Severity, String)> {
        c.issues
            .iter()
            .filter(|i| i.severity >= min)
            .map(|i| (i.severity, i.field.clone()))
            .collect()
    }

    /// The issue on `field` of `severity`, its message.
    pub(crate) fn message(c: &Conversion, severity: Severity, field: &str) -> String {
        c.issues
            .iter()
            .find(|i| i.severity == severity && i.field == field)
            .unwrap_or_else(|| panic!("no {severity} on {field} in {:#?}", c.issues))
            .message
            .clone()
    }

    /// A v1beta1 EC2NodeClass with every required field, plus `extra` spec lines.
    pub(crate) fn beta_class(name: &str, extra: &str) -> String {
        format!(
            "apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {{name: {name}}}\n\
             spec:\n  amiFamily: AL2023\n  role: r\n  subnetSelectorTerms: [{{id: subnet-1}}]\n  \
             securityGroupSelectorTerms: [{{id: sg-1}}]\n  metadataOptions: {{httpPutResponseHopLimit: 1}}\n{extra}"
        )
    }

    /// A v1beta1 NodePool on class `class`, plus `extra` template-spec lines.
    pub(crate) fn beta_pool(name: &str, class: &str, extra: &str) -> String {
        format!(
            "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {{name: {name}}}\n\
             spec:\n  template:\n    spec:\n      requirements: []\n      nodeClassRef: {{name: {class}}}\n{extra}"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{beta_class, beta_pool, object, raised, run};
    use super::*;
    use serde_json::json;

    #[test]
    fn v1_objects_and_other_kinds_pass_through() {
        let c = run(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec: {anything: kept}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {k: v}\n",
        );
        assert_eq!(c.objects[0]["spec"], json!({"anything": "kept"}));
        assert_eq!(c.objects[1]["data"], json!({"k": "v"}));
        assert!(c.issues.is_empty());
        assert!(c.is_complete());
    }

    #[test]
    fn machines_are_left_out_as_lossy_and_unknown_versions_as_errors() {
        let c = run(
            "apiVersion: karpenter.sh/v1alpha5\nkind: Machine\nmetadata: {name: m}\n---\n\
             apiVersion: karpenter.sh/v1alpha4\nkind: Provisioner\nmetadata: {name: p}\n---\n\
             apiVersion: karpenter.k8s.aws/v1beta1\nkind: Mystery\nmetadata: {name: q}\n",
        );
        assert!(c.objects.is_empty());
        assert_eq!(
            raised(&c, Severity::Lossy),
            [
                (Severity::Lossy, "(object)".to_owned()),
                (Severity::Error, "apiVersion".to_owned()),
                (Severity::Error, "apiVersion".to_owned()),
            ]
        );
        assert!(
            c.issues[1]
                .message
                .contains("karpenter.sh/v1alpha5 Provisioner")
        );
    }

    #[test]
    fn the_same_object_made_twice_is_an_error_and_kept_once() {
        // Mid-migration inputs: a Provisioner and a v1beta1 NodePool of the same name.
        let c = run(&format!(
            "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {{name: default}}\n\
             spec: {{providerRef: {{name: c}}}}\n---\n{}",
            beta_pool("default", "c", "")
        ));
        assert_eq!(c.objects.len(), 1);
        let e = &c
            .issues
            .iter()
            .find(|i| i.severity == Severity::Error)
            .unwrap();
        assert!(e.object.contains("document 2"));
        assert!(
            e.message
                .contains("also made from t.yaml (document 1, Provisioner default)")
        );
    }

    #[test]
    fn common_label_mistakes_name_the_likely_fix() {
        // The getting-started v1beta1 pool as often written: the AWS domain for the capacity
        // type, and families where categories were meant.
        let c = run(
            "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: default}\n\
             spec:\n  template:\n    spec:\n      nodeClassRef: {name: default}\n      \
             requirements:\n      - {key: karpenter.k8s.aws/capacity-type, operator: In, \
             values: [spot, on-demand]}\n      - {key: karpenter.k8s.aws/instance-family, \
             operator: In, values: [m, c, r]}\n",
        );
        let error = testing::message(&c, Severity::Error, "(converted object)");
        assert!(
            error.contains("did you mean karpenter.sh/capacity-type?"),
            "{error}"
        );
        // The short list, not all 37 well-known labels.
        assert!(!error.contains("topology.kubernetes.io/zone"), "{error}");
        let warning = testing::message(&c, Severity::Warning, "spec.template.spec.requirements");
        assert_eq!(
            warning,
            "NodePool \"default\": requirement karpenter.k8s.aws/instance-family In [c m r] \
             matches no instance type of the catalogue; did you mean \
             karpenter.k8s.aws/instance-category, whose values include all of them?"
        );
    }

    #[test]
    fn converted_pools_that_fail_v1_validation_are_errors() {
        let c = run(&beta_pool(
            "bad",
            "c",
            "      taints: [{key: a, effect: Sometimes}]\n",
        ));
        assert_eq!(
            raised(&c, Severity::Error),
            [(Severity::Error, "(converted object)".to_owned())]
        );
        assert!(!c.is_complete());
        // A valid one passes.
        let c = run(&beta_pool("good", "c", ""));
        assert!(raised(&c, Severity::Error).is_empty());
    }

    #[test]
    fn issues_are_ordered_by_object() {
        // The kubelet pass runs after both objects, but its issue sits with its pool.
        let c = run(&format!(
            "{}---\n{}",
            beta_pool("p", "c", "      kubelet: {maxPods: 10}\n"),
            beta_class("c", "")
        ));
        let objects: Vec<_> = c.issues.iter().map(|i| i.object.as_str()).collect();
        let first_class = objects
            .iter()
            .position(|o| o.contains("EC2NodeClass"))
            .unwrap();
        assert!(
            objects[..first_class]
                .iter()
                .all(|o| o.contains("NodePool p"))
        );
        assert!(
            objects[first_class..]
                .iter()
                .all(|o| o.contains("EC2NodeClass c"))
        );
        assert_eq!(
            object(&c, "EC2NodeClass", "c")["spec"]["kubelet"],
            json!({"maxPods": 10})
        );
    }

    #[test]
    fn yaml_output_is_a_multi_document_stream_that_parses_back() {
        let c = run(&format!(
            "{}---\n{}",
            beta_pool("p", "c", ""),
            beta_class("c", "  userData: |\n    line 1\n    line 2\n")
        ));
        let yaml = c.to_yaml().unwrap();
        assert_eq!(yaml.matches("---\n").count(), 2);
        let back = manifests::parse_str(Path::new("out.yaml"), &yaml).unwrap();
        let values: Vec<Value> = back.into_iter().map(|d| d.value).collect();
        assert_eq!(values, c.objects);
    }
}

#[cfg(test)]
mod yaml_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_that_read_as_other_types_are_quoted() {
        let tricky = [
            "y",
            "n",
            "yes",
            "no",
            "on",
            "off",
            "true",
            "False",
            "~",
            "null",
            "",
            "1",
            "0x1F",
            "1e3",
            "1.5",
            ".inf",
            "2024-08-06",
            "$KARPENTER_NODE_ROLE",
            "${CLUSTER_NAME}",
            "a: b",
            "- x",
            "#c",
            "line 1\nline 2\n",
        ];
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n"},
            "data": tricky.iter().enumerate().map(|(i, s)| (format!("k{i}"), json!(s))).collect::<serde_json::Map<_, _>>()});
        let c = Conversion {
            objects: vec![object.clone()],
            issues: Vec::new(),
        };
        let yaml = c.to_yaml().unwrap();
        let back = manifests::parse_str(Path::new("out.yaml"), &yaml).unwrap();
        assert_eq!(back[0].value, object, "{yaml}");
        for line in yaml.lines().filter(|l| l.trim_start().starts_with('k')) {
            let value = line.split_once(": ").map(|(_, v)| v).unwrap_or("");
            for word in ["y", "n", "yes", "no", "on", "off"] {
                assert_ne!(value, word, "unquoted YAML 1.1 boolean: {line}");
            }
        }
    }
}
