//! Reading Kubernetes manifests from files and directories: YAML or JSON, one or many
//! documents per file, `kind: List` expanded. Every error names the file, the document and,
//! when decoding, the object and the field.

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

    /// An error about this document's content that decoding cannot see.
    pub fn invalid(&self, field: impl Into<String>, message: impl Into<String>) -> ManifestError {
        ManifestError::Field {
            origin: Origin(self).to_string(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A manifest that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file or directory could not be read.
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

/// Reads every manifest under `paths`: files directly, directories non-recursively in name
/// order (only `.yaml`, `.yml` and `.json` files).
pub fn load_paths(paths: &[PathBuf]) -> Result<Vec<Document>, ManifestError> {
    let mut docs = Vec::new();
    for path in paths {
        for file in expand(path)? {
            docs.extend(load_file(&file)?);
        }
    }
    Ok(docs)
}

fn expand(path: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    let io = |source| ManifestError::Io {
        path: path.display().to_string(),
        source,
    };
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(io)? {
        let p = entry.map_err(io)?.path();
        let is_manifest = p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
        if p.is_file() && is_manifest {
            files.push(p);
        }
    }
    files.sort();
    Ok(files)
}

/// Reads one file: every YAML document (JSON is YAML too), with `kind: List` expanded and
/// empty documents skipped.
pub fn load_file(file: &Path) -> Result<Vec<Document>, ManifestError> {
    let text = std::fs::read_to_string(file).map_err(|source| ManifestError::Io {
        path: file.display().to_string(),
        source,
    })?;
    parse_str(file, &text)
}

/// Parses manifest text as if read from `file`.
pub fn parse_str(file: &Path, text: &str) -> Result<Vec<Document>, ManifestError> {
    let values: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| ManifestError::Syntax {
            path: file.display().to_string(),
            message: e.to_string(),
        })?;
    let mut docs = Vec::new();
    for value in values {
        if value.is_null() {
            continue;
        }
        let doc = Document {
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
            let items = match doc.value.get("items") {
                Some(Value::Array(items)) => items.clone(),
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

    #[test]
    fn directories_are_read_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("b.yaml"),
            "kind: Pod\nmetadata: {name: b}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("a.json"),
            r#"{"kind":"Pod","metadata":{"name":"a"}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let docs = load_paths(&[dir.path().to_path_buf()]).unwrap();
        let names: Vec<_> = docs.iter().map(|d| d.name().unwrap()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(matches!(
            load_paths(&[dir.path().join("missing.yaml")]),
            Err(ManifestError::Io { .. })
        ));
    }
}
