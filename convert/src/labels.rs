//! The label, annotation and taint keys the migration guides rename or drop (v1beta1
//! migration: "Annotations, Labels, and Status Conditions"; v1 migration: "Deprecated
//! Annotations, Labels, and Tags Removed" and the disruption taint), applied wherever a key
//! names a node label: requirements, label maps, node selectors and affinities.

use crate::fields::Fields;
use crate::report::{Reporter, index, join};
use serde_json::{Map, Value, json};

/// The NodePool label, which replaced the Provisioner's.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";
/// The v1alpha5 Provisioner label.
pub const PROVISIONER_LABEL: &str = "karpenter.sh/provisioner-name";

/// Node label keys renamed between v1alpha5 and v1: `(old, new)`.
pub const LABEL_RENAMES: &[(&str, &str)] = &[(PROVISIONER_LABEL, NODEPOOL_LABEL)];

/// Node label keys dropped in v1beta1 with no replacement.
pub const DROPPED_LABELS: &[&str] = &["karpenter.k8s.aws/instance-pods"];

/// Annotation keys renamed between v1alpha5 and v1: `(old, new)`. v1 removed the two
/// disruption annotations that v1beta1 had deprecated.
pub const ANNOTATION_RENAMES: &[(&str, &str)] = &[
    ("karpenter.sh/do-not-evict", "karpenter.sh/do-not-disrupt"),
    (
        "karpenter.sh/do-not-consolidate",
        "karpenter.sh/do-not-disrupt",
    ),
    (
        "karpenter.sh/provisioner-hash",
        "karpenter.sh/nodepool-hash",
    ),
    (
        "karpenter.k8s.aws/nodetemplate-hash",
        "karpenter.k8s.aws/ec2nodeclass-hash",
    ),
];

/// The taint Karpenter put on nodes it disrupted before v1 (`karpenter.sh/disruption=
/// disrupting:NoSchedule`), and the one it puts since (`karpenter.sh/disrupted:NoSchedule`).
pub const TAINT_RENAMES: &[(&str, &str)] = &[("karpenter.sh/disruption", "karpenter.sh/disrupted")];

fn renamed(table: &[(&str, &'static str)], key: &str) -> Option<&'static str> {
    table
        .iter()
        .find(|(old, _)| *old == key)
        .map(|(_, new)| *new)
}

/// The v1 name of a node label key: `Some(Some(new))` renamed, `Some(None)` dropped, `None`
/// unchanged.
fn label_fate(key: &str) -> Option<Option<&'static str>> {
    if DROPPED_LABELS.contains(&key) {
        return Some(None);
    }
    renamed(LABEL_RENAMES, key).map(Some)
}

/// Renames the keys of a label map or node selector (`path`) in place; a dropped label is
/// removed and reported as lossy.
pub(crate) fn rename_label_map(
    map: &mut Map<String, Value>,
    path: &str,
    report: &mut Reporter<'_>,
) {
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        match label_fate(&key) {
            None => {}
            Some(None) => {
                map.remove(&key);
                report.lossy(
                    &join(path, &key),
                    format!("label {key} was dropped in v1beta1 and has no replacement; removed"),
                );
            }
            Some(Some(new)) => {
                if let Some(value) = map.remove(&key) {
                    if map.contains_key(new) {
                        report.info(
                            &join(path, &key),
                            format!("{key} removed: {new} is already set"),
                        );
                    } else {
                        map.insert(new.to_owned(), value);
                        report.info(&join(path, &key), format!("renamed {new}"));
                    }
                }
            }
        }
    }
}

/// Renames the keys of an annotation map (`path`) in place.
pub(crate) fn rename_annotations(
    map: &mut Map<String, Value>,
    path: &str,
    report: &mut Reporter<'_>,
) {
    for (old, new) in ANNOTATION_RENAMES {
        let Some(value) = map.remove(*old) else {
            continue;
        };
        let field = join(path, old);
        if map.contains_key(*new) {
            report.info(&field, format!("removed: {new} is already set"));
        } else {
            map.insert((*new).to_owned(), value);
            report.info(&field, format!("renamed {new}"));
        }
    }
}

/// Converts node selector requirements (`path`): renamed keys are renamed, requirements on
/// dropped labels are removed (lossy). In a pod (`pod: true`), a `DoesNotExist` on the
/// Provisioner label is kept and joined by one on the NodePool label, as the v1beta1 guide
/// asks, so that the pod still avoids every node Karpenter launched.
pub(crate) fn requirements(
    items: Vec<Value>,
    path: &str,
    pod: bool,
    report: &mut Reporter<'_>,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(items.len());
    for (i, mut item) in items.into_iter().enumerate() {
        let field = index(path, i);
        let Some(key) = item.get("key").and_then(Value::as_str).map(str::to_owned) else {
            out.push(item);
            continue;
        };
        match label_fate(&key) {
            None => out.push(item),
            Some(None) => report.lossy(
                &field,
                format!(
                    "requirement on {key}, a label dropped in v1beta1 with no replacement; removed"
                ),
            ),
            Some(Some(new)) => {
                let does_not_exist =
                    item.get("operator").and_then(Value::as_str) == Some("DoesNotExist");
                if pod && does_not_exist {
                    out.push(item);
                    out.push(json!({"key": new, "operator": "DoesNotExist"}));
                    report.info(
                        &field,
                        format!("{key} DoesNotExist kept and {new} DoesNotExist added"),
                    );
                } else {
                    item["key"] = Value::from(new);
                    out.push(item);
                    report.info(&join(&field, "key"), format!("{key} renamed {new}"));
                }
            }
        }
    }
    out
}

/// Takes a NodePool template's or NodeClaim's `requirements` out of `f`, converted by
/// [`requirements`] (absent is empty: v1 requires the list).
pub(crate) fn take_requirements(f: &mut Fields, report: &mut Reporter<'_>) -> Vec<Value> {
    let path = f.path_of("requirements");
    let items = f.take_list("requirements", report).unwrap_or_default();
    requirements(items, &path, false, report)
}

/// Renames the disruption taint in tolerations (`path`): v1 taints disrupted nodes with
/// `karpenter.sh/disrupted:NoSchedule`, which has no value, so a toleration of the old taint
/// becomes an `Exists` toleration of the new one.
pub(crate) fn tolerations(items: &mut [Value], path: &str, report: &mut Reporter<'_>) {
    for (i, item) in items.iter_mut().enumerate() {
        let Some(key) = item.get("key").and_then(Value::as_str) else {
            continue;
        };
        let Some(new) = renamed(TAINT_RENAMES, key) else {
            continue;
        };
        let old = key.to_owned();
        if let Some(map) = item.as_object_mut() {
            map.insert("key".into(), Value::from(new));
            map.insert("operator".into(), Value::from("Exists"));
            map.remove("value");
        }
        report.info(
            &index(path, i),
            format!("toleration of {old} now tolerates {new} (Exists: the v1 taint has no value)"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Issue, Severity};

    fn with_report<T>(f: impl FnOnce(&mut Reporter<'_>) -> T) -> (T, Vec<Issue>) {
        let mut issues = Vec::new();
        let out = f(&mut Reporter::new("obj", &mut issues));
        (out, issues)
    }

    #[test]
    fn provisioner_label_becomes_the_nodepool_label_and_instance_pods_is_dropped() {
        let (map, issues) = with_report(|r| {
            let mut map = json!({
                "karpenter.sh/provisioner-name": "default",
                "karpenter.k8s.aws/instance-pods": "110",
                "team": "a"
            })
            .as_object()
            .cloned()
            .unwrap();
            rename_label_map(&mut map, "spec.nodeSelector", r);
            map
        });
        assert_eq!(
            Value::Object(map),
            json!({"karpenter.sh/nodepool": "default", "team": "a"})
        );
        let lossy: Vec<_> = issues
            .iter()
            .filter(|i| i.severity == Severity::Lossy)
            .map(|i| i.field.as_str())
            .collect();
        assert_eq!(lossy, ["spec.nodeSelector.karpenter.k8s.aws/instance-pods"]);
    }

    fn renamed_annotations(annotations: Value) -> (Value, Vec<Issue>) {
        with_report(|r| {
            let mut map = annotations.as_object().cloned().unwrap();
            rename_annotations(&mut map, "metadata.annotations", r);
            Value::Object(map)
        })
    }

    #[test]
    fn do_not_evict_and_do_not_consolidate_become_do_not_disrupt() {
        let (map, issues) = renamed_annotations(json!({"karpenter.sh/do-not-evict": "true"}));
        assert_eq!(map, json!({"karpenter.sh/do-not-disrupt": "true"}));
        assert_eq!(issues.len(), 1);
        // Both old annotations on one object: one do-not-disrupt remains.
        let (map, _) = renamed_annotations(json!({
            "karpenter.sh/do-not-evict": "true",
            "karpenter.sh/do-not-consolidate": "true"
        }));
        assert_eq!(map, json!({"karpenter.sh/do-not-disrupt": "true"}));
    }

    #[test]
    fn requirements_rename_keys_and_pods_keep_does_not_exist() {
        let reqs = vec![
            json!({"key": "karpenter.sh/provisioner-name", "operator": "In", "values": ["a"]}),
            json!({"key": "karpenter.k8s.aws/instance-pods", "operator": "Gt", "values": ["8"]}),
            json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}),
        ];
        let (out, issues) = with_report(|r| requirements(reqs, "spec.requirements", false, r));
        assert_eq!(
            out,
            [
                json!({"key": "karpenter.sh/nodepool", "operator": "In", "values": ["a"]}),
                json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}),
            ]
        );
        assert_eq!(issues[1].severity, Severity::Lossy);
        assert_eq!(issues[1].field, "spec.requirements[1]");

        let pod = vec![json!({"key": "karpenter.sh/provisioner-name", "operator": "DoesNotExist"})];
        let (out, _) = with_report(|r| requirements(pod, "matchExpressions", true, r));
        assert_eq!(
            out,
            [
                json!({"key": "karpenter.sh/provisioner-name", "operator": "DoesNotExist"}),
                json!({"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}),
            ]
        );
    }

    #[test]
    fn tolerations_of_the_old_disruption_taint_tolerate_the_new_one() {
        let mut tols = vec![
            json!({"key": "karpenter.sh/disruption", "operator": "Equal", "value": "disrupting", "effect": "NoSchedule"}),
            json!({"key": "other", "operator": "Exists"}),
        ];
        let ((), issues) = with_report(|r| tolerations(&mut tols, "spec.tolerations", r));
        assert_eq!(
            tols[0],
            json!({"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"})
        );
        assert_eq!(tols[1], json!({"key": "other", "operator": "Exists"}));
        assert_eq!(issues.len(), 1);
    }
}
