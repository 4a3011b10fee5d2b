//! `karpenter.sh/v1alpha5` Provisioner and `karpenter.sh/v1beta1` NodePool as
//! `karpenter.sh/v1` NodePool, after the v1beta1 migration guide ("Provisioner ->
//! NodePool") and the v1 migration guide's changelog (expireAfter moved into the template,
//! `WhenUnderutilized` renamed `WhenEmptyOrUnderutilized`, `nodeClassRef` gains group and kind,
//! kubelet settings move to the EC2NodeClass).

use crate::Options;
use crate::fields::{Fields, put};
use crate::kubelet;
use crate::labels;
use crate::metadata::{template_map, ttl};
use crate::nodeclass;
use crate::report::{Reporter, compact};
use serde_json::{Map, Value, json};

/// API version of the v1 NodePool.
pub const API_VERSION: &str = "karpenter.sh/v1";

/// A converted pool and what the cross-object passes need from it.
pub(crate) struct Pool {
    /// The v1 NodePool.
    pub value: Value,
    /// The EC2NodeClass its `nodeClassRef` names (`None` for another kind of class).
    pub class: Option<String>,
    /// Its kubelet settings and where they were.
    pub kubelet: Option<Value>,
    /// Path of the kubelet settings in the input.
    pub kubelet_field: String,
    /// The EC2NodeClass made from an inline `provider` block.
    pub inline_class: Option<Value>,
}

/// The requirements v1alpha5's AWS webhook added to every Provisioner that lacked them, and
/// that upstream's `karpenter-convert` wrote out unless told `--ignore-defaults`: `(keys that
/// satisfy it, requirements added)`.
fn alpha_defaults() -> [(&'static [&'static str], Vec<Value>); 4] {
    [
        (
            &["kubernetes.io/os"],
            vec![json!({"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]})],
        ),
        (
            &["kubernetes.io/arch"],
            vec![json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]})],
        ),
        (
            &["karpenter.sh/capacity-type"],
            vec![
                json!({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}),
            ],
        ),
        (
            &[
                "node.kubernetes.io/instance-type",
                "karpenter.k8s.aws/instance-family",
                "karpenter.k8s.aws/instance-category",
                "karpenter.k8s.aws/instance-generation",
            ],
            vec![
                json!({"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]}),
                json!({"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]}),
            ],
        ),
    ]
}

/// The well-known key a deprecated alias stands for (Karpenter's normalized labels).
fn normalized(key: &str) -> &str {
    match key {
        "beta.kubernetes.io/arch" => "kubernetes.io/arch",
        "beta.kubernetes.io/os" => "kubernetes.io/os",
        "beta.kubernetes.io/instance-type" => "node.kubernetes.io/instance-type",
        other => other,
    }
}

fn add_alpha_defaults(reqs: &mut Vec<Value>, path: &str, report: &mut Reporter<'_>) {
    let present: Vec<String> = reqs
        .iter()
        .filter_map(|r| r.get("key").and_then(Value::as_str))
        .map(|k| normalized(k).to_owned())
        .collect();
    let mut added = Vec::new();
    for (keys, defaults) in alpha_defaults() {
        if !keys.iter().any(|k| present.iter().any(|p| p == k)) {
            added.extend(defaults);
        }
    }
    if added.is_empty() {
        return;
    }
    report.info(
        path,
        format!(
            "added {}: v1alpha5's webhook defaulted them, v1 does not (--ignore-defaults leaves \
             them out)",
            added
                .iter()
                .map(requirement_text)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    reqs.extend(added);
}

/// A requirement as `key Operator [values]`, for messages.
fn requirement_text(r: &Value) -> String {
    let values: Vec<&str> = r["values"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    format!(
        "{} {} [{}]",
        r["key"].as_str().unwrap_or_default(),
        r["operator"].as_str().unwrap_or_default(),
        values.join(", ")
    )
}

/// A v1 `nodeClassRef` from a v1alpha5 `providerRef` (`kind` defaulted to AWSNodeTemplate)
/// or a v1beta1 `nodeClassRef` (`kind` defaulted to EC2NodeClass), and the EC2NodeClass it
/// names.
fn class_ref(mut f: Fields, alpha: bool, report: &mut Reporter<'_>) -> (Value, Option<String>) {
    let name = f.take_str("name", report).unwrap_or_else(|| {
        report.error(&f.path_of("name"), "required");
        String::new()
    });
    let kind = f.take_str("kind", report);
    let api_version = f.take_str("apiVersion", report);
    let path = f.path().to_owned();
    f.finish(
        if alpha {
            "a providerRef"
        } else {
            "a nodeClassRef"
        },
        report,
    );
    let aws_kind = if alpha {
        "AWSNodeTemplate"
    } else {
        nodeclass::KIND
    };
    let is_aws = kind.as_deref().is_none_or(|k| k == aws_kind);
    if is_aws {
        report.info(
            &path,
            format!(
                "becomes nodeClassRef {{group: {}, kind: {}, name: {name}}}",
                nodeclass::GROUP,
                nodeclass::KIND
            ),
        );
        let reference = json!({"group": nodeclass::GROUP, "kind": nodeclass::KIND, "name": name});
        return (reference, Some(name));
    }
    let kind = kind.unwrap_or_default();
    let group = api_version
        .as_deref()
        .map(|v| v.split('/').next().unwrap_or_default().to_owned())
        .unwrap_or_default();
    report.warning(
        &path,
        format!("{kind} is not an AWS node class: kept as group {group:?}, kind {kind}"),
    );
    (json!({"group": group, "kind": kind, "name": name}), None)
}

/// The NodePool object around a converted spec.
fn object(metadata: Map<String, Value>, spec: Map<String, Value>) -> Value {
    json!({"apiVersion": API_VERSION, "kind": "NodePool", "metadata": metadata, "spec": spec})
}

/// Taints and startup taints, copied.
fn taints(f: &mut Fields, out: &mut Map<String, Value>, report: &mut Reporter<'_>) {
    for key in ["taints", "startupTaints"] {
        if let Some(items) = f.take_list(key, report) {
            out.insert(key.into(), Value::Array(items));
        }
    }
}

/// A v1 NodePool spec's template (its metadata from label and annotation maps) and
/// disruption; limits and weight are the caller's.
fn spec_of(
    labels: Option<Map<String, Value>>,
    annotations: Option<Map<String, Value>>,
    template_spec: Map<String, Value>,
    disruption: Map<String, Value>,
) -> Map<String, Value> {
    let mut meta = Map::new();
    put(&mut meta, "labels", labels.map(Value::Object));
    put(&mut meta, "annotations", annotations.map(Value::Object));
    let mut template = Map::new();
    if !meta.is_empty() {
        template.insert("metadata".into(), Value::Object(meta));
    }
    template.insert("spec".into(), Value::Object(template_spec));
    let mut spec = Map::new();
    spec.insert("template".into(), Value::Object(template));
    spec.insert("disruption".into(), Value::Object(disruption));
    spec
}

/// A v1alpha5 Provisioner (its metadata already converted, its spec in `f`) as a v1 NodePool.
pub(crate) fn from_provisioner(
    metadata: Map<String, Value>,
    mut f: Fields,
    options: &Options,
    report: &mut Reporter<'_>,
) -> Pool {
    let name = metadata
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut tspec = Map::new();
    let labels = f
        .take("labels")
        .and_then(|v| template_map(v, "spec.labels", false, report));
    let annotations = f
        .take("annotations")
        .and_then(|v| template_map(v, "spec.annotations", true, report));
    taints(&mut f, &mut tspec, report);
    let req_path = f.path_of("requirements");
    let mut reqs = labels::take_requirements(&mut f, report);
    if options.alpha_default_requirements {
        add_alpha_defaults(&mut reqs, &req_path, report);
    }
    tspec.insert("requirements".into(), Value::Array(reqs));

    let provider_path = f.path_of("provider");
    let provider = f.take("provider");
    let provider_ref = f.take("providerRef");
    let mut inline_class = None;
    let (reference, class) = match (provider, provider_ref) {
        (Some(provider), reference) => {
            if reference.is_some() {
                report.error(
                    &f.path_of("providerRef"),
                    "v1alpha5 takes provider or providerRef, not both: provider is converted",
                );
            }
            // Upstream's karpenter-convert turned an inline provider into a class named
            // after the Provisioner.
            let spec = nodeclass::from_alpha(
                Fields::of(provider, &provider_path, report),
                "a v1alpha5 inline provider",
                report,
            );
            let class_meta = json!({"name": name})
                .as_object()
                .cloned()
                .unwrap_or_default();
            inline_class = Some(nodeclass::object(class_meta, spec));
            report.info(
                &provider_path,
                format!("becomes EC2NodeClass {name}, which the NodePool references"),
            );
            (
                json!({"group": nodeclass::GROUP, "kind": nodeclass::KIND, "name": name}),
                Some(name.clone()),
            )
        }
        (None, Some(reference)) => {
            let path = f.path_of("providerRef");
            class_ref(Fields::of(reference, &path, report), true, report)
        }
        (None, None) => {
            report.error(
                f.path(),
                "neither providerRef nor provider: v1 requires a nodeClassRef; name one in \
                 spec.template.spec.nodeClassRef",
            );
            (
                json!({"group": nodeclass::GROUP, "kind": nodeclass::KIND, "name": ""}),
                None,
            )
        }
    };
    tspec.insert("nodeClassRef".into(), reference);

    let expiry_path = f.path_of("ttlSecondsUntilExpired");
    let expire_after = match f.take("ttlSecondsUntilExpired") {
        Some(v) => ttl(&v, &expiry_path, report).inspect(|d| {
            report.info(
                &expiry_path,
                format!("becomes spec.template.spec.expireAfter {d}"),
            );
        }),
        None => {
            report.info(
                &expiry_path,
                "not set, so nodes never expired: spec.template.spec.expireAfter is Never \
                 (v1's default is 720h)",
            );
            Some("Never".to_owned())
        }
    };
    put(&mut tspec, "expireAfter", expire_after.map(Value::from));

    let disruption = alpha_disruption(&mut f, report);
    let kubelet_field = f.path_of("kubeletConfiguration");
    let kubelet = f
        .take("kubeletConfiguration")
        .and_then(|v| kubelet::settings(v, &kubelet_field, report));
    if f.take("kubelet").is_some() {
        // The v1beta1 guide's own v1alpha5 example writes `kubelet`; the v1alpha5 schema
        // pruned it, so those settings never reached a node.
        report.lossy(
            &f.path_of("kubelet"),
            "not a v1alpha5 field (v1alpha5 calls it kubeletConfiguration), so the API server \
             dropped it and its settings never applied: not converted; rename it \
             kubeletConfiguration if you meant them",
        );
    }

    let mut spec = spec_of(labels, annotations, tspec, disruption);
    let mut limits = f.take_fields("limits", report);
    if let Some(resources) = limits.take("resources") {
        report.info(&limits.path_of("resources"), "becomes spec.limits");
        spec.insert("limits".into(), resources);
    }
    limits.finish("v1alpha5 limits", report);
    put(&mut spec, "weight", f.take("weight"));
    f.finish("a v1alpha5 Provisioner spec", report);
    Pool {
        value: object(metadata, spec),
        class,
        kubelet,
        kubelet_field,
        inline_class,
    }
}

/// v1alpha5 `consolidation.enabled` and `ttlSecondsAfterEmpty` as a v1 `disruption`.
fn alpha_disruption(f: &mut Fields, report: &mut Reporter<'_>) -> Map<String, Value> {
    let empty_path = f.path_of("ttlSecondsAfterEmpty");
    let empty = f.take("ttlSecondsAfterEmpty");
    let mut consolidation = f.take_fields("consolidation", report);
    let enabled_path = consolidation.path_of("enabled");
    let enabled = match consolidation.take("enabled") {
        Some(Value::Bool(b)) => b,
        Some(other) => {
            report.error(&enabled_path, format!("expected a boolean, found {other}"));
            false
        }
        None => false,
    };
    consolidation.finish("v1alpha5 consolidation", report);
    let (policy, after) = match (enabled, empty) {
        (true, empty) => {
            if empty.is_some() {
                report.error(
                    &empty_path,
                    "v1alpha5 rejects it beside consolidation.enabled: true; consolidation is \
                     converted and this TTL is ignored, as upstream's converter did",
                );
            }
            report.info(
                &enabled_path,
                "consolidation becomes consolidationPolicy WhenEmptyOrUnderutilized with \
                 consolidateAfter 0s",
            );
            ("WhenEmptyOrUnderutilized", "0s".to_owned())
        }
        (false, Some(ttl_value)) => {
            let after = ttl(&ttl_value, &empty_path, report).unwrap_or_else(|| "0s".to_owned());
            report.info(
                &empty_path,
                format!("becomes consolidationPolicy WhenEmpty with consolidateAfter {after}"),
            );
            ("WhenEmpty", after)
        }
        (false, None) => {
            report.info(
                &empty_path,
                "neither this nor consolidation is set, so nodes were never removed for being \
                 empty or underutilized: consolidateAfter is Never",
            );
            ("WhenEmpty", "Never".to_owned())
        }
    };
    json!({"consolidationPolicy": policy, "consolidateAfter": after})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// A v1beta1 NodePool (metadata converted, spec in `f`) as a v1 NodePool.
pub(crate) fn from_beta(
    metadata: Map<String, Value>,
    mut f: Fields,
    report: &mut Reporter<'_>,
) -> Pool {
    let mut template = f.take_fields("template", report);
    let mut tmeta = template.take_fields("metadata", report);
    let labels = tmeta
        .take("labels")
        .and_then(|v| template_map(v, "spec.template.metadata.labels", false, report));
    let annotations = tmeta
        .take("annotations")
        .and_then(|v| template_map(v, "spec.template.metadata.annotations", true, report));
    tmeta.finish("a v1beta1 template's metadata", report);
    let mut ts = template.take_fields("spec", report);
    template.finish("a v1beta1 NodePool template", report);
    let mut tspec = Map::new();
    taints(&mut ts, &mut tspec, report);
    tspec.insert(
        "requirements".into(),
        Value::Array(labels::take_requirements(&mut ts, report)),
    );
    let ref_path = ts.path_of("nodeClassRef");
    let (reference, class) = match ts.take("nodeClassRef") {
        Some(v) => class_ref(Fields::of(v, &ref_path, report), false, report),
        None => {
            report.error(&ref_path, "required");
            (
                json!({"group": nodeclass::GROUP, "kind": nodeclass::KIND, "name": ""}),
                None,
            )
        }
    };
    tspec.insert("nodeClassRef".into(), reference);
    put(
        &mut tspec,
        "terminationGracePeriod",
        ts.take("terminationGracePeriod"),
    );
    if let Some(resources) = ts.take("resources") {
        let empty = resources
            .get("requests")
            .is_none_or(|r| r.as_object().is_some_and(Map::is_empty));
        if !empty {
            report.lossy(
                &ts.path_of("resources"),
                "a v1 NodePool template has no resource requests; dropped",
            );
        }
    }
    let kubelet_field = ts.path_of("kubelet");
    let kubelet = ts
        .take("kubelet")
        .and_then(|v| kubelet::settings(v, &kubelet_field, report));
    ts.finish("a v1beta1 NodeClaim template spec", report);

    let mut d = f.take_fields("disruption", report);
    let (disruption, expire_after) = beta_disruption(&mut d, report);
    d.finish("a v1beta1 disruption block", report);
    put(&mut tspec, "expireAfter", expire_after);

    let mut spec = spec_of(labels, annotations, tspec, disruption);
    put(&mut spec, "limits", f.take("limits"));
    put(&mut spec, "weight", f.take("weight"));
    f.finish("a v1beta1 NodePool spec", report);
    Pool {
        value: object(metadata, spec),
        class,
        kubelet,
        kubelet_field,
        inline_class: None,
    }
}

/// v1beta1 `disruption` as v1's, and the `expireAfter` that moves into the template.
fn beta_disruption(
    d: &mut Fields,
    report: &mut Reporter<'_>,
) -> (Map<String, Value>, Option<Value>) {
    let policy_path = d.path_of("consolidationPolicy");
    let after_path = d.path_of("consolidateAfter");
    let policy = d.take_str("consolidationPolicy", report);
    let after = d.take("consolidateAfter");
    let mut out = Map::new();
    match policy.as_deref().unwrap_or("WhenUnderutilized") {
        "WhenUnderutilized" => {
            // Upstream's webhook set 0s; a v1beta1 pool could only say `Never` here, which
            // disabled consolidation and still does.
            let after = after.unwrap_or_else(|| Value::from("0s"));
            report.info(
                &policy_path,
                format!(
                    "WhenUnderutilized is renamed WhenEmptyOrUnderutilized; consolidateAfter \
                     is {} (v1 requires it)",
                    after.as_str().unwrap_or_default()
                ),
            );
            out.insert(
                "consolidationPolicy".into(),
                Value::from("WhenEmptyOrUnderutilized"),
            );
            out.insert("consolidateAfter".into(), after);
        }
        "WhenEmpty" => {
            out.insert("consolidationPolicy".into(), Value::from("WhenEmpty"));
            let after = after.unwrap_or_else(|| {
                report.error(&after_path, "v1beta1 requires it with WhenEmpty; set to 0s");
                Value::from("0s")
            });
            out.insert("consolidateAfter".into(), after);
        }
        other => {
            report.error(
                &policy_path,
                format!(
                    "{other:?} is not a v1beta1 consolidation policy (WhenUnderutilized or \
                     WhenEmpty); kept as it is"
                ),
            );
            out.insert("consolidationPolicy".into(), Value::from(other));
            put(&mut out, "consolidateAfter", after);
        }
    }
    put(&mut out, "budgets", d.take("budgets"));
    let expire_path = d.path_of("expireAfter");
    let expire = d.take("expireAfter");
    if let Some(e) = &expire {
        report.info(
            &expire_path,
            format!(
                "moves to spec.template.spec.expireAfter {}",
                e.as_str().map_or_else(|| compact(e), str::to_owned)
            ),
        );
    }
    (out, expire)
}

#[cfg(test)]
mod tests {
    use crate::Severity;
    use crate::testing::{beta_pool, message, object, raised, run};
    use serde_json::json;

    fn provisioner(spec: &str) -> String {
        format!(
            "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {{name: p}}\n\
             spec:\n  providerRef: {{name: c}}\n{spec}"
        )
    }

    fn pool_spec(yaml: &str) -> serde_json::Value {
        object(&run(yaml), "NodePool", "p")["spec"].clone()
    }

    #[test]
    fn ttl_seconds_after_empty_becomes_when_empty_with_consolidate_after() {
        let spec = pool_spec(&provisioner("  ttlSecondsAfterEmpty: 90\n"));
        assert_eq!(
            spec["disruption"],
            json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m30s"})
        );
        // consolidation: {enabled: false} changes nothing.
        let spec = pool_spec(&provisioner(
            "  ttlSecondsAfterEmpty: 0\n  consolidation: {enabled: false}\n",
        ));
        assert_eq!(spec["disruption"]["consolidateAfter"], "0s");
    }

    #[test]
    fn consolidation_enabled_becomes_when_empty_or_underutilized() {
        let spec = pool_spec(&provisioner("  consolidation: {enabled: true}\n"));
        assert_eq!(
            spec["disruption"],
            json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
        );
        let c = run(&provisioner(
            "  consolidation: {enabled: true}\n  ttlSecondsAfterEmpty: 30\n",
        ));
        assert_eq!(
            raised(&c, Severity::Error),
            [(Severity::Error, "spec.ttlSecondsAfterEmpty".to_owned())]
        );
        let c = run(&provisioner("  consolidation: {enabled: yes please}\n"));
        assert_eq!(
            raised(&c, Severity::Error),
            [(Severity::Error, "spec.consolidation.enabled".to_owned())]
        );
    }

    #[test]
    fn no_empty_ttl_and_no_consolidation_never_consolidates() {
        let spec = pool_spec(&provisioner(""));
        assert_eq!(
            spec["disruption"],
            json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
        );
    }

    #[test]
    fn ttl_seconds_until_expired_moves_to_the_template_and_its_absence_is_never() {
        let spec = pool_spec(&provisioner("  ttlSecondsUntilExpired: 604800\n"));
        assert_eq!(spec["template"]["spec"]["expireAfter"], "168h");
        assert!(spec["disruption"].get("expireAfter").is_none());
        let spec = pool_spec(&provisioner(""));
        assert_eq!(spec["template"]["spec"]["expireAfter"], "Never");
        let c = run(&provisioner("  ttlSecondsUntilExpired: -5\n"));
        assert_eq!(
            raised(&c, Severity::Error),
            [(Severity::Error, "spec.ttlSecondsUntilExpired".to_owned())]
        );
    }

    #[test]
    fn limits_resources_become_limits_and_weight_stays() {
        let spec = pool_spec(&provisioner(
            "  limits: {resources: {cpu: 100, nvidia.com/gpu: 4}}\n  weight: 7\n",
        ));
        assert_eq!(spec["limits"], json!({"cpu": 100, "nvidia.com/gpu": 4}));
        assert_eq!(spec["weight"], 7);
        let c = run(&provisioner("  limits: {resources: {cpu: 1}, other: 2}\n"));
        assert_eq!(
            raised(&c, Severity::Lossy),
            [(Severity::Lossy, "spec.limits.other".to_owned())]
        );
    }

    #[test]
    fn labels_annotations_taints_and_requirements_move_into_the_template() {
        let spec = pool_spec(&provisioner(
            "  labels: {team: a}\n  annotations: {karpenter.sh/do-not-consolidate: \"true\"}\n\
             \x20 taints: [{key: t, effect: NoSchedule}]\n\
             \x20 startupTaints: [{key: s, effect: NoExecute}]\n\
             \x20 requirements:\n\
             \x20 - {key: karpenter.sh/provisioner-name, operator: Exists}\n\
             \x20 - {key: karpenter.k8s.aws/instance-pods, operator: Gt, values: [\"20\"]}\n\
             \x20 - {key: beta.kubernetes.io/arch, operator: In, values: [arm64]}\n\
             \x20 - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}\n\
             \x20 - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}\n\
             \x20 - {key: kubernetes.io/os, operator: In, values: [linux]}\n",
        ));
        let t = &spec["template"];
        assert_eq!(
            t["metadata"],
            json!({"labels": {"team": "a"}, "annotations": {"karpenter.sh/do-not-disrupt": "true"}})
        );
        assert_eq!(
            t["spec"]["taints"],
            json!([{"key": "t", "effect": "NoSchedule"}])
        );
        assert_eq!(
            t["spec"]["startupTaints"],
            json!([{"key": "s", "effect": "NoExecute"}])
        );
        // Renamed, dropped, and no default added: the deprecated arch alias, an instance
        // type, a capacity type and an OS are all there.
        assert_eq!(
            t["spec"]["requirements"],
            json!([
                {"key": "karpenter.sh/nodepool", "operator": "Exists"},
                {"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            ])
        );
    }

    #[test]
    fn provider_refs_become_node_class_refs_with_group_and_kind() {
        let spec = pool_spec(
            "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\nspec:\n\
             \x20 providerRef: {apiVersion: karpenter.k8s.aws/v1alpha1, kind: AWSNodeTemplate, name: c}\n",
        );
        assert_eq!(
            spec["template"]["spec"]["nodeClassRef"],
            json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"})
        );
        let c = run(
            "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\nspec:\n\
             \x20 providerRef: {apiVersion: example.com/v1, kind: MyClass, name: c}\n",
        );
        assert_eq!(
            object(&c, "NodePool", "p")["spec"]["template"]["spec"]["nodeClassRef"],
            json!({"group": "example.com", "kind": "MyClass", "name": "c"})
        );
        assert!(
            message(&c, Severity::Warning, "spec.providerRef").contains("not an AWS node class")
        );
    }

    #[test]
    fn a_provisioner_needs_exactly_one_of_provider_and_provider_ref() {
        let none = run(
            "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\nspec: {}\n",
        );
        // The pool, left with an empty nodeClassRef, also fails v1 validation.
        assert_eq!(
            raised(&none, Severity::Error),
            [
                (Severity::Error, "spec".to_owned()),
                (Severity::Error, "(converted object)".to_owned()),
            ]
        );
        let both = run(&provisioner(
            "  provider: {subnetSelector: {a: b}, securityGroupSelector: {a: b}}\n",
        ));
        assert_eq!(
            raised(&both, Severity::Error),
            [(Severity::Error, "spec.providerRef".to_owned())]
        );
        // The inline provider wins, as upstream's converter had it.
        assert_eq!(
            object(&both, "NodePool", "p")["spec"]["template"]["spec"]["nodeClassRef"]["name"],
            "p"
        );
        object(&both, "EC2NodeClass", "p");
    }

    #[test]
    fn unknown_fields_and_the_kubelet_spelling_are_reported_not_dropped() {
        let c = run(&provisioner("  kubelet: {maxPods: 5}\n  surprise: 1\n"));
        assert_eq!(
            raised(&c, Severity::Lossy),
            [
                (Severity::Lossy, "spec.kubelet".to_owned()),
                (Severity::Lossy, "spec.surprise".to_owned()),
            ]
        );
        assert!(message(&c, Severity::Lossy, "spec.kubelet").contains("kubeletConfiguration"));
        let c = run(&provisioner(
            "  kubeletConfiguration: {containerRuntime: dockerd}\n",
        ));
        assert_eq!(
            raised(&c, Severity::Lossy),
            [(
                Severity::Lossy,
                "spec.kubeletConfiguration.containerRuntime".to_owned()
            )]
        );
    }

    #[test]
    fn when_underutilized_is_renamed_with_consolidate_after_zero_or_as_given() {
        let spec = pool_spec(&beta_pool("p", "c", ""));
        assert_eq!(
            spec["disruption"],
            json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
        );
        let spec = pool_spec(&format!(
            "{}  disruption: {{consolidationPolicy: WhenUnderutilized, consolidateAfter: Never}}\n",
            beta_pool("p", "c", "")
        ));
        assert_eq!(spec["disruption"]["consolidateAfter"], "Never");
    }

    #[test]
    fn v1beta1_disruption_errors_and_budgets() {
        let c = run(&format!(
            "{}  disruption: {{consolidationPolicy: WhenEmpty}}\n",
            beta_pool("p", "c", "")
        ));
        assert_eq!(
            raised(&c, Severity::Error),
            [(
                Severity::Error,
                "spec.disruption.consolidateAfter".to_owned()
            )]
        );
        let c = run(&format!(
            "{}  disruption: {{consolidationPolicy: Sometimes}}\n",
            beta_pool("p", "c", "")
        ));
        assert!(raised(&c, Severity::Error).contains(&(
            Severity::Error,
            "spec.disruption.consolidationPolicy".to_owned()
        )));
        let spec = pool_spec(&format!(
            "{}  disruption:\n    expireAfter: Never\n    budgets: [{{nodes: \"0\", schedule: \"@daily\", duration: 10m}}]\n",
            beta_pool("p", "c", "")
        ));
        assert_eq!(
            spec["disruption"]["budgets"],
            json!([{"nodes": "0", "schedule": "@daily", "duration": "10m"}])
        );
        assert_eq!(spec["template"]["spec"]["expireAfter"], "Never");
    }

    #[test]
    fn v1beta1_template_fields() {
        let c = run(&beta_pool(
            "p",
            "c",
            "      resources: {requests: {cpu: \"1\"}}\n      terminationGracePeriod: 1h\n",
        ));
        let t = &object(&c, "NodePool", "p")["spec"]["template"]["spec"];
        assert_eq!(t["terminationGracePeriod"], "1h");
        assert!(t.get("resources").is_none());
        assert_eq!(
            raised(&c, Severity::Lossy),
            [(Severity::Lossy, "spec.template.spec.resources".to_owned())]
        );
        let c = run(
            "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  template:\n    spec:\n\
             \x20     requirements: []\n      nodeClassRef: {apiVersion: karpenter.k8s.aws/v1beta1, kind: EC2NodeClass, name: c}\n",
        );
        assert_eq!(
            object(&c, "NodePool", "p")["spec"]["template"]["spec"]["nodeClassRef"],
            json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"})
        );
    }
}
