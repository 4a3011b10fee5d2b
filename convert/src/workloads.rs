//! Objects that are not Karpenter's (Pods, workloads, Nodes …) pass through, with the keys
//! the migration guides rename renamed where they name Karpenter's labels, annotations and
//! taints: `karpenter.sh/do-not-evict` on pods, `karpenter.sh/provisioner-name` in node
//! selectors and affinities, tolerations of the old disruption taint.

use crate::labels::{rename_label_map, requirements, tolerations};
use crate::metadata::rename_in_metadata;
use crate::report::{Reporter, index, join};
use serde_json::Value;

/// Where a kind keeps its pod template (`None`: the object is a pod; no template: nothing
/// beyond its own metadata).
fn pod_template_path(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "Deployment"
        | "ReplicaSet"
        | "StatefulSet"
        | "DaemonSet"
        | "Job"
        | "ReplicationController"
        | "PodTemplate" => Some(&["spec", "template"]),
        "CronJob" => Some(&["spec", "jobTemplate", "spec", "template"]),
        _ => None,
    }
}

/// Renames Karpenter keys inside `value`, an object of `kind`, in place.
pub(crate) fn rename(value: &mut Value, kind: &str, report: &mut Reporter<'_>) {
    if let Some(metadata) = value.get_mut("metadata") {
        rename_in_metadata(metadata, "metadata", report);
    }
    if kind == "Pod" {
        if let Some(spec) = value.get_mut("spec") {
            pod_spec(spec, "spec", report);
        }
        return;
    }
    let Some(path) = pod_template_path(kind) else {
        return;
    };
    let mut template = &mut *value;
    for key in path {
        match template.get_mut(*key) {
            Some(next) => template = next,
            None => return,
        }
    }
    let at = path.join(".");
    if let Some(metadata) = template.get_mut("metadata") {
        rename_in_metadata(metadata, &join(&at, "metadata"), report);
    }
    if let Some(spec) = template.get_mut("spec") {
        pod_spec(spec, &join(&at, "spec"), report);
    }
}

/// Node selector, node affinity, tolerations and spread constraints of a pod spec.
fn pod_spec(spec: &mut Value, path: &str, report: &mut Reporter<'_>) {
    if let Some(Value::Object(selector)) = spec.get_mut("nodeSelector") {
        rename_label_map(selector, &join(path, "nodeSelector"), report);
    }
    if let Some(Value::Array(tols)) = spec.get_mut("tolerations") {
        tolerations(tols, &join(path, "tolerations"), report);
    }
    if let Some(Value::Array(spreads)) = spec.get_mut("topologySpreadConstraints") {
        for (i, spread) in spreads.iter_mut().enumerate() {
            let field = join(
                &index(&join(path, "topologySpreadConstraints"), i),
                "topologyKey",
            );
            if spread["topologyKey"] == crate::labels::PROVISIONER_LABEL {
                spread["topologyKey"] = Value::from(crate::labels::NODEPOOL_LABEL);
                report.info(&field, format!("renamed {}", crate::labels::NODEPOOL_LABEL));
            }
        }
    }
    let affinity = join(path, "affinity.nodeAffinity");
    let Some(node_affinity) = spec.pointer_mut("/affinity/nodeAffinity") else {
        return;
    };
    let required = join(
        &affinity,
        "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
    );
    if let Some(Value::Array(terms)) = node_affinity
        .pointer_mut("/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
    {
        for (i, term) in terms.iter_mut().enumerate() {
            expressions(term, &index(&required, i), report);
        }
    }
    let preferred = join(&affinity, "preferredDuringSchedulingIgnoredDuringExecution");
    if let Some(Value::Array(terms)) =
        node_affinity.get_mut("preferredDuringSchedulingIgnoredDuringExecution")
    {
        for (i, term) in terms.iter_mut().enumerate() {
            if let Some(preference) = term.get_mut("preference") {
                expressions(
                    preference,
                    &join(&index(&preferred, i), "preference"),
                    report,
                );
            }
        }
    }
}

/// The `matchExpressions` of a node selector term.
fn expressions(term: &mut Value, path: &str, report: &mut Reporter<'_>) {
    if let Some(Value::Array(items)) = term.get_mut("matchExpressions") {
        let converted = requirements(
            std::mem::take(items),
            &join(path, "matchExpressions"),
            true,
            report,
        );
        *items = converted;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deployment_templates_get_renamed_annotations_selectors_and_affinities() {
        let mut issues = Vec::new();
        let mut r = Reporter::new("obj", &mut issues);
        let mut deploy = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"template": {
                "metadata": {"annotations": {"karpenter.sh/do-not-evict": "true"}},
                "spec": {
                    "nodeSelector": {"karpenter.sh/provisioner-name": "default"},
                    "affinity": {"nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "karpenter.sh/provisioner-name", "operator": "DoesNotExist"}]}
                        ]},
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 1, "preference": {"matchExpressions": [{"key": "karpenter.sh/provisioner-name", "operator": "In", "values": ["a"]}]}}
                        ]
                    }},
                    "topologySpreadConstraints": [{"topologyKey": "karpenter.sh/provisioner-name", "maxSkew": 1}],
                    "containers": [{"name": "c", "image": "nginx"}]
                }
            }}
        });
        rename(&mut deploy, "Deployment", &mut r);
        let t = &deploy["spec"]["template"];
        assert_eq!(
            t["metadata"]["annotations"],
            json!({"karpenter.sh/do-not-disrupt": "true"})
        );
        assert_eq!(
            t["spec"]["nodeSelector"],
            json!({"karpenter.sh/nodepool": "default"})
        );
        let na = &t["spec"]["affinity"]["nodeAffinity"];
        assert_eq!(
            na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"],
            json!([
                {"key": "karpenter.sh/provisioner-name", "operator": "DoesNotExist"},
                {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}
            ])
        );
        assert_eq!(
            na["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]["matchExpressions"]
                [0]["key"],
            "karpenter.sh/nodepool"
        );
        assert_eq!(
            t["spec"]["topologySpreadConstraints"][0]["topologyKey"],
            "karpenter.sh/nodepool"
        );
        assert!(
            issues
                .iter()
                .any(|i| i.field == "spec.template.spec.nodeSelector.karpenter.sh/provisioner-name")
        );
    }

    #[test]
    fn pods_cronjobs_and_nodes() {
        let mut issues = Vec::new();
        let mut r = Reporter::new("obj", &mut issues);
        let mut pod = json!({"kind": "Pod", "metadata": {"annotations": {"karpenter.sh/do-not-evict": "true"}},
            "spec": {"tolerations": [{"key": "karpenter.sh/disruption", "operator": "Exists"}]}});
        rename(&mut pod, "Pod", &mut r);
        assert_eq!(
            pod["metadata"]["annotations"],
            json!({"karpenter.sh/do-not-disrupt": "true"})
        );
        assert_eq!(
            pod["spec"]["tolerations"][0]["key"],
            "karpenter.sh/disrupted"
        );
        let mut cron = json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {
            "spec": {"nodeSelector": {"karpenter.sh/provisioner-name": "batch"}}}}}}});
        rename(&mut cron, "CronJob", &mut r);
        assert_eq!(
            cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["nodeSelector"],
            json!({"karpenter.sh/nodepool": "batch"})
        );
        let mut node = json!({"kind": "Node", "metadata": {
            "labels": {"karpenter.sh/provisioner-name": "default"},
            "annotations": {"karpenter.sh/do-not-consolidate": "true"}}});
        rename(&mut node, "Node", &mut r);
        assert_eq!(
            node["metadata"],
            json!({"labels": {"karpenter.sh/nodepool": "default"},
                   "annotations": {"karpenter.sh/do-not-disrupt": "true"}})
        );
    }
}
