//! Reading Kubernetes manifests from files and directories; parsing is
//! [`karpenter_cluster::manifests`]'s. Every error names the file, the document and, when
//! decoding, the object and the field.

use karpenter_cluster::manifests::{Document, ManifestError, parse_str};
use std::path::{Path, PathBuf};

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

#[cfg(test)]
mod tests {
    use super::*;

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
