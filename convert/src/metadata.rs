//! `metadata` of converted objects, and the Go durations the old APIs spelt in seconds.

use crate::fields::{Fields, kind_of, put, string_map};
use crate::labels::{rename_annotations, rename_label_map};
use crate::report::{Reporter, join};
use serde_json::{Map, Value};

/// Annotations a controller writes on NodePools and node classes: hashes of the old object
/// that the new controller recomputes, and kubectl's record of the old object (which would
/// make the next `kubectl apply` diff against a v1alpha5 or v1beta1 object).
const CONTROLLER_ANNOTATIONS: &[&str] = &[
    "karpenter.sh/provisioner-hash",
    "karpenter.sh/nodepool-hash",
    "karpenter.sh/nodepool-hash-version",
    "karpenter.k8s.aws/nodetemplate-hash",
    "karpenter.k8s.aws/ec2nodeclass-hash",
    "karpenter.k8s.aws/ec2nodeclass-hash-version",
    "kubectl.kubernetes.io/last-applied-configuration",
];

/// The metadata of a NodePool or EC2NodeClass made from an older object: its name, labels,
/// annotations and finalizers (what upstream's `karpenter-convert` kept). Server-set fields
/// (`uid`, `resourceVersion`, `managedFields` …) and controller-written annotations are
/// dropped and reported, since the object is meant to be applied anew.
pub(crate) fn config_metadata(
    value: Option<Value>,
    report: &mut Reporter<'_>,
) -> Map<String, Value> {
    let mut fields = Fields::of(value.unwrap_or(Value::Null), "metadata", report);
    let mut out = Map::new();
    put(&mut out, "name", fields.take("name"));
    if let Some(mut labels) = fields.take_string_map("labels", report) {
        rename_label_map(&mut labels, "metadata.labels", report);
        out.insert("labels".into(), Value::Object(labels));
    }
    if let Some(mut annotations) = fields.take_string_map("annotations", report) {
        for key in CONTROLLER_ANNOTATIONS {
            if annotations.remove(*key).is_some() {
                report.info(
                    &join("metadata.annotations", key),
                    "removed: written by the controller for the old object",
                );
            }
        }
        rename_annotations(&mut annotations, "metadata.annotations", report);
        if !annotations.is_empty() {
            out.insert("annotations".into(), Value::Object(annotations));
        }
    }
    put(&mut out, "finalizers", fields.take("finalizers"));
    let dropped: Vec<String> = {
        let mut keys = Vec::new();
        for key in [
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
            "selfLink",
            "namespace",
            "generateName",
            "ownerReferences",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            if fields.take(key).is_some() {
                keys.push(key.to_owned());
            }
        }
        keys
    };
    if !dropped.is_empty() {
        report.info(
            "metadata",
            format!(
                "{} removed: set by the API server for the old object",
                dropped.join(", ")
            ),
        );
    }
    fields.finish("object metadata", report);
    out
}

/// Renames label and annotation keys in the metadata of an object that is otherwise kept
/// as it is (`path` is where the metadata sits: `metadata`, `spec.template.metadata` …).
pub(crate) fn rename_in_metadata(metadata: &mut Value, path: &str, report: &mut Reporter<'_>) {
    let Some(map) = metadata.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(labels)) = map.get_mut("labels") {
        rename_label_map(labels, &join(path, "labels"), report);
    }
    if let Some(Value::Object(annotations)) = map.get_mut("annotations") {
        rename_annotations(annotations, &join(path, "annotations"), report);
    }
}

/// A label or annotation map for a template (`spec.labels` of a Provisioner …), renamed.
pub(crate) fn template_map(
    value: Value,
    path: &str,
    annotations: bool,
    report: &mut Reporter<'_>,
) -> Option<Map<String, Value>> {
    let mut map = string_map(value, path, report)?;
    if annotations {
        rename_annotations(&mut map, path, report);
    } else {
        rename_label_map(&mut map, path, report);
    }
    (!map.is_empty()).then_some(map)
}

/// A number of seconds as a Go duration in its shortest form, as the migration guides
/// write them: 2592000 → `720h`, 120 → `2m`, 90 → `1m30s`, 0 → `0s`.
pub(crate) fn seconds_to_duration(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// A v1alpha5 TTL (`ttlSecondsAfterEmpty`, `ttlSecondsUntilExpired`): a non-negative whole
/// number of seconds, as a Go duration. Anything else is an error on `path`.
pub(crate) fn ttl(value: &Value, path: &str, report: &mut Reporter<'_>) -> Option<String> {
    match value.as_u64() {
        // Go durations stop at about 292 years; larger TTLs never fire, like `Never`.
        Some(secs) if secs <= i64::MAX as u64 / 1_000_000_000 => Some(seconds_to_duration(secs)),
        Some(_) => Some(karpenter_cloudprovider::duration::NEVER.to_owned()),
        None => {
            report.error(
                path,
                format!(
                    "expected a whole number of seconds, found {} {value}",
                    kind_of(value)
                ),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Severity;
    use karpenter_cloudprovider::duration::parse_go_duration;
    use serde_json::json;

    #[test]
    fn seconds_become_the_shortest_go_duration() {
        for (secs, text) in [
            (0, "0s"),
            (30, "30s"),
            (90, "1m30s"),
            (120, "2m"),
            (3600, "1h"),
            (3661, "1h1m1s"),
            (2_592_000, "720h"),
        ] {
            assert_eq!(seconds_to_duration(secs), text);
            assert_eq!(
                parse_go_duration(text).unwrap(),
                secs as i64 * 1_000_000_000
            );
        }
    }

    #[test]
    fn ttls_must_be_whole_non_negative_seconds() {
        let mut issues = Vec::new();
        let mut r = Reporter::new("obj", &mut issues);
        assert_eq!(ttl(&json!(30), "spec.t", &mut r).as_deref(), Some("30s"));
        assert_eq!(ttl(&json!(-1), "spec.t", &mut r), None);
        assert_eq!(ttl(&json!("30"), "spec.t", &mut r), None);
        assert_eq!(ttl(&json!(1.5), "spec.t", &mut r), None);
        assert_eq!(
            ttl(&json!(u64::MAX), "spec.t", &mut r).as_deref(),
            Some("Never")
        );
        assert_eq!(issues.len(), 3);
        assert!(issues.iter().all(|i| i.severity == Severity::Error));
    }

    #[test]
    fn config_metadata_keeps_name_labels_annotations_and_finalizers() {
        let mut issues = Vec::new();
        let mut r = Reporter::new("obj", &mut issues);
        let meta = config_metadata(
            Some(json!({
                "name": "default",
                "uid": "1234",
                "resourceVersion": "99",
                "labels": {"team": "a"},
                "annotations": {
                    "karpenter.sh/provisioner-hash": "123",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}",
                    "owner": "me"
                },
                "finalizers": ["karpenter.sh/termination"]
            })),
            &mut r,
        );
        assert_eq!(
            Value::Object(meta),
            json!({
                "name": "default",
                "labels": {"team": "a"},
                "annotations": {"owner": "me"},
                "finalizers": ["karpenter.sh/termination"]
            })
        );
        assert!(issues.iter().all(|i| i.severity == Severity::Info));
        assert!(
            issues
                .iter()
                .any(|i| i.message.starts_with("uid, resourceVersion removed"))
        );
    }
}
