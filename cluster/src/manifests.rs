//! Parsing Kubernetes manifests: YAML or JSON text, one or many documents, `kind: List`
//! expanded. Every error names the file, the document and, when decoding, the object and the
//! field. Reading files is the caller's: it passes the text and the path it came from (used
//! only in messages), and reports a file it could not read as [`ManifestError::Io`].

use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};

/// One manifest document and where it came from.
#[derive(Debug, Clone)]
pub struct Document {
    /// The file it was read from.
    pub file: PathBuf,
    /// 1-based position among the file's documents (list items count separately).
    pub index: usize,
    /// The object.
    pub value: Value,
}

/// Where a document came from, for messages: `file.yaml (document 2, Deployment default/web)`.
pub struct Origin<'a>(pub &'a Document);

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        write!(f, "{} (document {}", d.file.display(), d.index)?;
        if let Some(kind) = d.kind() {
            write!(f, ", {kind}")?;
            match (d.namespace(), d.name()) {
                (Some(ns), Some(name)) => write!(f, " {ns}/{name}")?,
                (None, Some(name)) => write!(f, " {name}")?,
                _ => {}
            }
        }
        write!(f, ")")
    }
}

impl Document {
    /// `kind`, if present.
    pub fn kind(&self) -> Option<&str> {
        self.value.get("kind").and_then(Value::as_str)
    }

    /// `apiVersion`, if present.
    pub fn api_version(&self) -> Option<&str> {
        self.value.get("apiVersion").and_then(Value::as_str)
    }

    /// `metadata.name`, if present.
    pub fn name(&self) -> Option<&str> {
        self.value.pointer("/metadata/name").and_then(Value::as_str)
    }

    /// `metadata.namespace`, if present.
    pub fn namespace(&self) -> Option<&str> {
        self.value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
    }

    /// Decodes the document as `T`; a failure names the file, document, object and the path
    /// of the offending field.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, ManifestError> {
        serde_path_to_error::deserialize(&self.value).map_err(|e| {
            let path = e.path().to_string();
            ManifestError::Field {
                origin: Origin(self).to_string(),
                field: if path == "." {
                    "(root)".to_string()
                } else {
                    path
                },
                message: e.into_inner().to_string(),
            }
        })
    }

    /// Decodes the document as a `karpenter.sh/v1` NodePool; any other apiVersion is an
    /// error on `apiVersion` naming the one found (and `karpenter convert` for v1beta1).
    pub fn decode_node_pool(&self) -> Result<karpenter_cloudprovider::NodePool, ManifestError> {
        self.refuse_older_karpenter_api()?;
        if self.api_version() != Some("karpenter.sh/v1") {
            return Err(self.invalid(
                "apiVersion",
                format!(
                    "NodePool must be karpenter.sh/v1, found {:?}",
                    self.api_version().unwrap_or_default()
                ),
            ));
        }
        self.decode()
    }

    /// Decodes the document as a `karpenter.sh/v1alpha1` NodeOverlay and validates it as the
    /// API server would; any other apiVersion is an error on `apiVersion`.
    pub fn decode_node_overlay(
        &self,
    ) -> Result<karpenter_cloudprovider::NodeOverlay, ManifestError> {
        if self.api_version() != Some(NODE_OVERLAY_API_VERSION) {
            return Err(self.invalid(
                "apiVersion",
                format!(
                    "NodeOverlay must be {NODE_OVERLAY_API_VERSION}, found {:?}",
                    self.api_version().unwrap_or_default()
                ),
            ));
        }
        let overlay: karpenter_cloudprovider::NodeOverlay = self.decode()?;
        overlay
            .validate()
            .map_err(|e| self.invalid("spec", e.to_string()))?;
        Ok(overlay)
    }

    /// Decodes the document as an `autoscaling.x-k8s.io/v1beta1` CapacityBuffer (the version
    /// Karpenter v1.15 serves) and validates it as the API server would; any other apiVersion
    /// is an error on `apiVersion`.
    pub fn decode_capacity_buffer(
        &self,
    ) -> Result<karpenter_cloudprovider::CapacityBuffer, ManifestError> {
        use karpenter_cloudprovider::autoscaling::v1beta1::API_VERSION;
        if self.api_version() != Some(API_VERSION) {
            return Err(self.invalid(
                "apiVersion",
                format!(
                    "CapacityBuffer must be {API_VERSION} (the version Karpenter v1.15 serves), found {:?}",
                    self.api_version().unwrap_or_default()
                ),
            ));
        }
        let buffer: karpenter_cloudprovider::CapacityBuffer = self.decode()?;
        buffer.validate().map_err(|e| {
            let field = e.errors.first().map_or("spec", |f| f.path.as_str());
            self.invalid(field, e.to_string())
        })?;
        Ok(buffer)
    }

    /// An error on `apiVersion` when the document is an object of one of Karpenter's older
    /// APIs ([`OLDER_KARPENTER_APIS`]), naming `karpenter convert`, which turns it into v1.
    /// Readers of v1 manifests call it before anything else, so that a v1alpha5 Provisioner is
    /// not skipped as an unknown kind.
    pub fn refuse_older_karpenter_api(&self) -> Result<(), ManifestError> {
        let (Some(api_version), Some(kind)) = (self.api_version(), self.kind()) else {
            return Ok(());
        };
        let Some((_, _, target)) = OLDER_KARPENTER_APIS
            .iter()
            .find(|(v, k, _)| *v == api_version && *k == kind)
        else {
            return Ok(());
        };
        let message = if target.ends_with(kind) {
            format!(
                "{kind} must be {}, found {api_version:?}",
                &target[..target.len() - kind.len() - 1]
            )
        } else {
            format!(
                "{kind} ({api_version}) is an older Karpenter API that karpenter-rs does not read"
            )
        };
        Err(self.invalid(
            "apiVersion",
            format!("{message}: `karpenter convert` turns it into a {target}"),
        ))
    }

    /// An error about this document's content that decoding cannot see.
    pub fn invalid(&self, field: impl Into<String>, message: impl Into<String>) -> ManifestError {
        ManifestError::Field {
            origin: Origin(self).to_string(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The apiVersion of NodeOverlay.
pub const NODE_OVERLAY_API_VERSION: &str = "karpenter.sh/v1alpha1";

/// Objects of Karpenter's older APIs that `karpenter convert` turns into v1:
/// `(apiVersion, kind, "v1 apiVersion and kind")`.
pub const OLDER_KARPENTER_APIS: [(&str, &str, &str); 5] = [
    (
        "karpenter.sh/v1alpha5",
        "Provisioner",
        "karpenter.sh/v1 NodePool",
    ),
    (
        "karpenter.k8s.aws/v1alpha1",
        "AWSNodeTemplate",
        "karpenter.k8s.aws/v1 EC2NodeClass",
    ),
    (
        "karpenter.sh/v1beta1",
        "NodePool",
        "karpenter.sh/v1 NodePool",
    ),
    (
        "karpenter.sh/v1beta1",
        "NodeClaim",
        "karpenter.sh/v1 NodeClaim",
    ),
    (
        "karpenter.k8s.aws/v1beta1",
        "EC2NodeClass",
        "karpenter.k8s.aws/v1 EC2NodeClass",
    ),
];

/// A manifest that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file or directory could not be read (reported by the caller that reads files;
    /// nothing in this crate does I/O).
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not YAML or JSON.
    #[error("{path}: not valid YAML or JSON: {message}")]
    Syntax {
        /// The path.
        path: String,
        /// What the parser said.
        message: String,
    },
    /// A document is not a Kubernetes object.
    #[error("{origin}: {message}")]
    NotAnObject {
        /// File and document.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// A field has a bad value.
    #[error("{origin}: field {field}: {message}")]
    Field {
        /// File, document and object.
        origin: String,
        /// JSON path of the field.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// Deepest nesting accepted in a manifest (mappings and sequences). Kubernetes objects nest
/// about 20 levels at most (a `kind: List` of Deployments with node affinity); anything far
/// deeper is a malformed or hostile file.
pub const MAX_DEPTH: usize = 64;

/// Alias events a YAML file may replay in total. Real manifests use few anchors; an alias
/// bomb (nested anchors each repeating the previous one) needs millions.
pub const MAX_ALIAS_REPLAY: usize = 100_000;

/// Parses manifest text as if read from `file`. Text that starts with `{` or `[` is read as a
/// stream of JSON values (serde_json; a `kind: List` dump of a large cluster parses in linear
/// time without YAML's budget); anything else, or JSON that does not parse, as YAML with a
/// budget sized to the text: as many nodes, events and documents as its length allows without
/// aliases, but few alias replays and at most [`MAX_DEPTH`] levels of nesting.
pub fn parse_str(file: &Path, text: &str) -> Result<Vec<Document>, ManifestError> {
    let values = parse_values(text).map_err(|message| ManifestError::Syntax {
        path: file.display().to_string(),
        message,
    })?;
    documents(file, values)
}

fn parse_values(text: &str) -> Result<Vec<Value>, String> {
    let trimmed = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let json = parse_json(trimmed);
        let json_error = match json {
            Ok(values) => return Ok(values),
            Err(e) => e,
        };
        // `{kind: Pod}` is YAML flow syntax, not JSON: try YAML before giving up.
        return parse_yaml(text).map_err(|yaml_error| {
            format!("not valid JSON ({json_error}) nor YAML ({yaml_error})")
        });
    }
    parse_yaml(text)
}

/// A stream of JSON values; serde_json refuses nesting beyond 128 levels, and deeper than
/// [`MAX_DEPTH`] is refused here so that JSON and YAML accept the same files.
fn parse_json(text: &str) -> Result<Vec<Value>, String> {
    let mut values = Vec::new();
    for value in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        let value = value.map_err(|e| e.to_string())?;
        let depth = depth(&value);
        if depth > MAX_DEPTH {
            return Err(format!(
                "nested {depth} levels deep, more than the {MAX_DEPTH} allowed"
            ));
        }
        values.push(value);
    }
    Ok(values)
}

fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn parse_yaml(text: &str) -> Result<Vec<Value>, String> {
    let defaults = serde_saphyr::Budget::default();
    // Without aliases a node, an event pair or a document takes at least one byte of text, so
    // these limits never reject a file for its size, only for what aliases make of it.
    let len = text.len();
    let budget = serde_saphyr::budget! {
        max_nodes: defaults.max_nodes.max(len),
        max_events: defaults.max_events.max(len.saturating_mul(2)),
        max_documents: defaults.max_documents.max(len),
        max_total_scalar_bytes: defaults.max_total_scalar_bytes.max(len),
        max_depth: MAX_DEPTH,
        max_aliases: defaults.max_aliases.min(MAX_ALIAS_REPLAY),
        max_recorded_anchor_events: defaults.max_recorded_anchor_events.min(MAX_ALIAS_REPLAY),
    };
    let options = serde_saphyr::options! {
        budget: budget,
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: MAX_ALIAS_REPLAY,
        },
    };
    serde_saphyr::from_multiple_with_options(text, options)
        .map_err(|e| explain_yaml_error(&e.to_string()))
}

/// Names the budget breaches a user can act on; the parser's own text (with its snippet)
/// follows in parentheses.
fn explain_yaml_error(text: &str) -> String {
    let first_line = text.lines().next().unwrap_or_default();
    let alias = ["Aliases", "AliasAnchorRatio", "RecordedAnchor", "replay"];
    if first_line.contains("Depth {") || first_line.contains("recursion limit") {
        format!("nested more than {MAX_DEPTH} levels deep ({text})")
    } else if alias.iter().any(|a| first_line.contains(a)) {
        format!("too many YAML alias expansions, as in an alias bomb ({text})")
    } else {
        text.to_string()
    }
}

fn documents(file: &Path, values: Vec<Value>) -> Result<Vec<Document>, ManifestError> {
    let mut docs = Vec::new();
    for value in values {
        if value.is_null() {
            continue;
        }
        let mut doc = Document {
            file: file.to_path_buf(),
            index: docs.len() + 1,
            value,
        };
        if !doc.value.is_object() {
            return Err(ManifestError::NotAnObject {
                origin: Origin(&doc).to_string(),
                message: "expected a Kubernetes object (a mapping with apiVersion and kind)".into(),
            });
        }
        if doc
            .kind()
            .is_some_and(|k| k == "List" || k.ends_with("List"))
        {
            // Taken, not cloned: a cluster dump is one List of tens of thousands of objects.
            let items = match doc.value.get_mut("items").map(Value::take) {
                Some(Value::Array(items)) => items,
                None | Some(Value::Null) => Vec::new(),
                Some(_) => return Err(doc.invalid("items", "expected a list of objects")),
            };
            for item in items {
                docs.push(Document {
                    file: file.to_path_buf(),
                    index: docs.len() + 1,
                    value: item,
                });
            }
        } else if doc.kind().is_none() {
            return Err(ManifestError::NotAnObject {
                origin: Origin(&doc).to_string(),
                message: "missing field `kind`".into(),
            });
        } else {
            docs.push(doc);
        }
    }
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Document>, ManifestError> {
        parse_str(Path::new("t.yaml"), text)
    }

    #[test]
    fn multi_document_yaml_with_empty_documents() {
        let docs = parse(
            "---\nkind: Pod\nmetadata: {name: a}\n---\n---\nkind: Pod\nmetadata: {name: b}\n",
        )
        .unwrap();
        let names: Vec<_> = docs.iter().map(|d| d.name().unwrap()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(docs[1].index, 2);
    }

    #[test]
    fn json_and_list_expansion() {
        let docs = parse(
            r#"{"apiVersion":"v1","kind":"List","items":[{"kind":"Pod","metadata":{"name":"x"}},{"kind":"Deployment","metadata":{"name":"y","namespace":"n"}}]}"#,
        )
        .unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].kind(), Some("Deployment"));
        assert_eq!(docs[1].namespace(), Some("n"));
    }

    #[test]
    fn errors_name_file_document_and_field() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Spec {
            replicas: u32,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Obj {
            spec: Spec,
        }
        let docs = parse(
            "kind: Deployment\nmetadata: {name: web, namespace: prod}\nspec: {replicas: many}\n",
        )
        .unwrap();
        let err = docs[0].decode::<Obj>().unwrap_err().to_string();
        assert!(
            err.starts_with("t.yaml (document 1, Deployment prod/web): field spec.replicas:"),
            "{err}"
        );
    }

    #[test]
    fn older_karpenter_apis_name_karpenter_convert() {
        let docs = parse(
            "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: default}\n---\n\
             apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: old}\n---\n\
             apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: c}\n---\n\
             apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: new}\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
        )
        .unwrap();
        let err = docs[0].decode_node_pool().unwrap_err().to_string();
        assert_eq!(
            err,
            "t.yaml (document 1, NodePool default): field apiVersion: NodePool must be \
             karpenter.sh/v1, found \"karpenter.sh/v1beta1\": `karpenter convert` turns it into \
             a karpenter.sh/v1 NodePool"
        );
        let err = docs[1]
            .refuse_older_karpenter_api()
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "t.yaml (document 2, Provisioner old): field apiVersion: Provisioner \
             (karpenter.sh/v1alpha5) is an older Karpenter API that karpenter-rs does not read: \
             `karpenter convert` turns it into a karpenter.sh/v1 NodePool"
        );
        let err = docs[2]
            .refuse_older_karpenter_api()
            .unwrap_err()
            .to_string();
        assert!(err.contains("EC2NodeClass must be karpenter.k8s.aws/v1, found \"karpenter.k8s.aws/v1beta1\": `karpenter convert`"), "{err}");
        assert!(docs[3].refuse_older_karpenter_api().is_ok());
        assert!(docs[4].refuse_older_karpenter_api().is_ok());
        // Any other version is still refused, without a converter to offer.
        let docs =
            parse("apiVersion: karpenter.sh/v2\nkind: NodePool\nmetadata: {name: x}\n").unwrap();
        let err = docs[0].decode_node_pool().unwrap_err().to_string();
        assert!(
            err.ends_with("NodePool must be karpenter.sh/v1, found \"karpenter.sh/v2\""),
            "{err}"
        );
    }

    #[test]
    fn rejects_non_objects_and_missing_kind() {
        assert!(matches!(
            parse("- a\n- b\n"),
            Err(ManifestError::NotAnObject { .. })
        ));
        let err = parse("metadata: {name: a}\n").unwrap_err().to_string();
        assert!(err.contains("missing field `kind`"), "{err}");
        assert!(matches!(
            parse("kind: [unclosed\n"),
            Err(ManifestError::Syntax { .. })
        ));
    }

    fn pod_json(i: usize) -> String {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p{i}","namespace":"default","labels":{{"app":"a{}"}}}},"spec":{{"containers":[{{"name":"c","image":"nginx","resources":{{"requests":{{"cpu":"250m","memory":"512Mi"}}}}}}]}}}}"#,
            i % 10
        )
    }

    const LARGE: usize = 50_000;

    #[test]
    fn a_json_list_of_50k_pods_parses() {
        let items: Vec<String> = (0..LARGE).map(pod_json).collect();
        let text = format!(
            r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
            items.join(",")
        );
        let docs = parse_str(Path::new("big.json"), &text).unwrap();
        assert_eq!(docs.len(), LARGE);
        assert_eq!(docs[LARGE - 1].name(), Some("p49999"));
        assert_eq!(
            docs[7]
                .value
                .pointer("/spec/containers/0/resources/requests/cpu"),
            Some(&Value::from("250m"))
        );
    }

    fn pod_yaml(i: usize) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  labels: {{app: a{}}}\nspec:\n  containers:\n  - resources:\n      requests: {{cpu: 250m, memory: 512Mi}}\n",
            i % 10
        )
    }

    fn check_pods(docs: &[Document], n: usize) {
        assert_eq!(docs.len(), n);
        assert_eq!(
            docs[n - 1].name().map(String::from),
            Some(format!("p{}", n - 1))
        );
        assert_eq!(
            docs[3]
                .value
                .pointer("/spec/containers/0/resources/requests/memory"),
            Some(&Value::from("512Mi"))
        );
    }

    #[test]
    fn a_yaml_list_of_50k_pods_parses() {
        // About 12 nodes a pod: 600,000 in all, over twice the parser's default budget.
        let mut list = String::from("apiVersion: v1\nkind: List\nitems:\n");
        for i in 0..LARGE {
            for (n, line) in pod_yaml(i).lines().enumerate() {
                list.push_str(if n == 0 { "- " } else { "  " });
                list.push_str(line);
                list.push('\n');
            }
        }
        check_pods(&parse_str(Path::new("big.yaml"), &list).unwrap(), LARGE);
    }

    #[test]
    fn a_yaml_stream_of_more_documents_than_the_parser_default_parses() {
        let n = 3_000;
        let stream: String = (0..n).map(|i| format!("---\n{}", pod_yaml(i))).collect();
        check_pods(&parse_str(Path::new("many.yaml"), &stream).unwrap(), n);
    }

    #[test]
    fn yaml_flow_mappings_starting_with_a_brace_are_still_yaml() {
        let docs = parse("{kind: Pod, metadata: {name: a}}\n").unwrap();
        assert_eq!(docs[0].name(), Some("a"));
    }

    #[test]
    fn a_json_stream_of_several_objects_parses() {
        let text = format!("{}\n{}\n", pod_json(1), pod_json(2));
        let docs = parse_str(Path::new("s.json"), &text).unwrap();
        let names: Vec<_> = docs.iter().map(|d| d.name().unwrap()).collect();
        assert_eq!(names, ["p1", "p2"]);
    }

    #[test]
    fn alias_bombs_are_rejected() {
        // The "billion laughs": each level repeats the previous one nine times.
        let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for level in 1..10 {
            let prev = format!("*a{}", level - 1);
            let refs = [prev.as_str(); 9].join(", ");
            text.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
        }
        text.push_str("kind: Pod\n");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("alias"), "{err}");
        assert!(matches!(parse(&text), Err(ManifestError::Syntax { .. })));
    }

    #[test]
    fn absurd_nesting_is_rejected_in_yaml_and_json() {
        let depth = 10_000;
        let yaml = format!("kind: Pod\nx: {}{}\n", "[".repeat(depth), "]".repeat(depth));
        let err = parse(&yaml).unwrap_err().to_string();
        assert!(err.contains("nest"), "{err}");
        let mut block = String::from("kind: Pod\n");
        for level in 0..200 {
            block.push_str(&" ".repeat(level));
            block.push_str("k:\n");
        }
        let err = parse(&block).unwrap_err().to_string();
        assert!(err.contains("nested more than 64 levels"), "{err}");
        let json = format!(
            r#"{{"kind":"Pod","x":{}1{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let err = parse_str(Path::new("deep.json"), &json)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("recursion limit") && err.contains("nest"),
            "{err}"
        );
        // Deeper than the manifest limit but within serde_json's own: refused all the same.
        let json = format!(
            r#"{{"kind":"Pod","x":{}1{}}}"#,
            "[".repeat(100),
            "]".repeat(100)
        );
        let err = parse_str(Path::new("deep.json"), &json)
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than the 64 allowed"), "{err}");
    }
}
