//! The CustomResourceDefinitions of NodePool, NodeClaim, NodeOverlay and CapacityBuffer.
//!
//! kube's derive gives the structure (fields, types, enums, required lists, defaults from
//! `#[serde(default = …)]`, printer columns, subresources). A post-processing pass then adds
//! what the derive cannot express, so the schema the API server enforces matches upstream's
//! CRDs: patterns, ranges, `maxItems`/`maxProperties`/`maxLength`, list and map types, the
//! `x-kubernetes-validations` CEL rules, upstream's exact `disruption` default, and the
//! resource-list (`Quantity`) shape. `nullable` is removed everywhere, as upstream's schema
//! never allows null.

use crate::autoscaling::v1beta1::CapacityBuffer;
use crate::v1::{NodeClaim, NodePool};
use crate::v1alpha1::NodeOverlay;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_core::CustomResourceExt;
use serde_json::{Map, Value, json};

const QUALIFIED_NAME_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
const NILLABLE_DURATION_PATTERN: &str = r"^(([0-9]+(s|m|h))+|Never)$";
const DURATION_PATTERN: &str = r"^([0-9]+(s|m|h))+$";

/// A CEL validation rule entry (`x-kubernetes-validations` item).
pub fn rule(rule: &str, message: &str) -> Value {
    json!({ "message": message, "rule": rule })
}

/// Finds the schema node at `path` under `root` (an object schema). Segments are property
/// names; a trailing `[]` steps into `items`, a trailing `{}` into `additionalProperties`.
/// Shared with the provider crates that generate their own NodeClass CRDs.
pub fn node<'a>(root: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    let mut cur = root;
    if path.is_empty() {
        return Some(cur);
    }
    for seg in path.split('.') {
        let (name, suffix) = if let Some(n) = seg.strip_suffix("[]") {
            (n, Some("items"))
        } else if let Some(n) = seg.strip_suffix("{}") {
            (n, Some("additionalProperties"))
        } else {
            (seg, None)
        };
        cur = cur.get_mut("properties")?.get_mut(name)?;
        if let Some(s) = suffix {
            cur = cur.get_mut(s)?;
        }
    }
    Some(cur)
}

/// Merges `patch`'s keys into the schema at `path`. A missing path is a programming error
/// caught by the CRD tests (the committed YAML would lack the rule), so it is skipped here
/// rather than panicking at runtime.
pub fn set(root: &mut Value, path: &str, patch: Value) {
    if let (Some(Value::Object(target)), Value::Object(p)) = (node(root, path), patch) {
        for (k, v) in p {
            target.insert(k, v);
        }
    }
}

/// Removes `key` from the schema node at `path`, if both exist.
pub fn remove(root: &mut Value, path: &str, key: &str) {
    if let Some(Value::Object(target)) = node(root, path) {
        target.remove(key);
    }
}

/// Removes every `nullable` marker: upstream's CRDs express optionality by omission.
pub fn strip_nullable(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("nullable");
            m.values_mut().for_each(strip_nullable);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}

fn quantity_map() -> Value {
    json!({
        "additionalProperties": {
            "anyOf": [{ "type": "integer" }, { "type": "string" }],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true
        },
        "type": "object"
    })
}

/// Key rules on requirements and labels: the `karpenter.sh` domain is reserved except for
/// capacity-type and nodepool; NodePools may not set `karpenter.sh/nodepool` themselves;
/// nobody may set the hostname.
fn key_rules(for_map_keys: bool, forbid_nodepool: bool) -> Vec<Value> {
    let (all, close) = if for_map_keys {
        ("self.all(x, ", ")")
    } else {
        ("", "")
    };
    let var = if for_map_keys { "x" } else { "self" };
    let mut rules = vec![rule(
        &format!(
            "{all}{var} in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !{var}.find(\"^([^/]+)\").endsWith(\"karpenter.sh\"){close}"
        ),
        "label domain \"karpenter.sh\" is restricted",
    )];
    if forbid_nodepool {
        rules.push(rule(
            &format!("{all}{var} != \"karpenter.sh/nodepool\"{close}"),
            "label \"karpenter.sh/nodepool\" is restricted",
        ));
    }
    rules.push(rule(
        &format!("{all}{var} != \"kubernetes.io/hostname\"{close}"),
        "label \"kubernetes.io/hostname\" is restricted",
    ));
    rules
}

fn requirement_list_rules() -> Value {
    json!([
        rule(
            "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
            "requirements with operator 'In' must have a value defined"
        ),
        rule(
            "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"
        ),
        rule(
            "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
            "requirements with 'minValues' must have at least that many values specified in the 'values' field"
        ),
    ])
}

/// The schema tweaks shared by `NodePool.spec.template.spec` and `NodeClaim.spec`.
fn patch_claim_spec(s: &mut Value, base: &str, forbid_nodepool: bool) {
    let p = |rest: &str| {
        if base.is_empty() {
            rest.to_owned()
        } else {
            format!("{base}.{rest}")
        }
    };
    for taints in ["taints", "startupTaints"] {
        set(s, &p(taints), json!({ "x-kubernetes-list-type": "atomic" }));
        set(
            s,
            &p(&format!("{taints}[].key")),
            json!({ "minLength": 1, "pattern": QUALIFIED_NAME_PATTERN }),
        );
        set(
            s,
            &p(&format!("{taints}[].value")),
            json!({ "pattern": QUALIFIED_NAME_PATTERN }),
        );
    }
    set(
        s,
        &p("requirements"),
        json!({ "maxItems": 100, "x-kubernetes-list-type": "atomic", "x-kubernetes-validations": requirement_list_rules() }),
    );
    set(
        s,
        &p("requirements[].key"),
        json!({ "maxLength": 316, "pattern": QUALIFIED_NAME_PATTERN, "x-kubernetes-validations": key_rules(false, forbid_nodepool) }),
    );
    set(
        s,
        &p("requirements[].minValues"),
        json!({ "minimum": 1, "maximum": 50 }),
    );
    remove(s, &p("requirements[].minValues"), "format");
    set(
        s,
        &p("requirements[].values"),
        json!({ "x-kubernetes-list-type": "atomic" }),
    );
    set(
        s,
        &p("requirements[].values[]"),
        json!({ "maxLength": 63, "pattern": LABEL_VALUE_PATTERN }),
    );
    for field in ["group", "kind", "name"] {
        set(
            s,
            &p(&format!("nodeClassRef.{field}")),
            json!({ "x-kubernetes-validations": [rule("self != ''", &format!("{field} may not be empty"))] }),
        );
    }
    set(s, &p("nodeClassRef.group"), json!({ "pattern": "^[^/]*$" }));
    set(
        s,
        &p("expireAfter"),
        json!({ "pattern": NILLABLE_DURATION_PATTERN }),
    );
    set(
        s,
        &p("terminationGracePeriod"),
        json!({ "pattern": DURATION_PATTERN }),
    );
}

fn patch_conditions(s: &mut Value, path: &str, reason_required: bool) {
    set(
        s,
        path,
        json!({ "x-kubernetes-list-map-keys": ["type"], "x-kubernetes-list-type": "map" }),
    );
    let item = format!("{path}[]");
    set(s, &format!("{item}.message"), json!({ "maxLength": 32768 }));
    set(
        s,
        &format!("{item}.observedGeneration"),
        json!({ "minimum": 0 }),
    );
    set(
        s,
        &format!("{item}.type"),
        json!({ "maxLength": 316, "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$" }),
    );
    if reason_required {
        set(
            s,
            &format!("{item}.reason"),
            json!({ "maxLength": 1024, "minLength": 1, "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$" }),
        );
    } else {
        set(
            s,
            &format!("{item}.reason"),
            json!({ "maxLength": 1024, "pattern": "^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$" }),
        );
    }
    // Upstream has no defaults on condition fields; ours come from `#[serde(default)]`.
    remove(s, &format!("{item}.message"), "default");
    remove(s, &format!("{item}.reason"), "default");
}

/// Applies `f` to the first version's OpenAPI schema (as JSON, `nullable` stripped) and
/// returns the CRD with the patched schema; if the schema cannot round-trip through JSON the
/// CRD is returned unpatched, which the CRD tests catch.
pub fn with_schema(
    crd: CustomResourceDefinition,
    f: impl FnOnce(&mut Value),
) -> CustomResourceDefinition {
    let Ok(mut v) = serde_json::to_value(&crd) else {
        return crd;
    };
    if let Some(schema) = v.pointer_mut("/spec/versions/0/schema/openAPIV3Schema") {
        strip_nullable(schema);
        f(schema);
    }
    serde_json::from_value(v).unwrap_or(crd)
}

/// The NodePool CRD, with upstream's validation rules.
pub fn node_pool_crd() -> CustomResourceDefinition {
    with_schema(NodePool::crd(), |s| {
        let t = "spec.template";
        set(
            s,
            &format!("{t}.metadata.annotations"),
            json!({ "x-kubernetes-map-type": "granular" }),
        );
        set(
            s,
            &format!("{t}.metadata.labels"),
            json!({ "maxProperties": 100, "x-kubernetes-map-type": "atomic", "x-kubernetes-validations": key_rules(true, true) }),
        );
        set(
            s,
            &format!("{t}.metadata.labels{{}}"),
            json!({ "maxLength": 63, "pattern": LABEL_VALUE_PATTERN }),
        );
        remove(s, &format!("{t}.metadata"), "default");
        patch_claim_spec(s, &format!("{t}.spec"), true);

        let d = "spec.disruption";
        set(s, d, json!({ "default": { "consolidateAfter": "0s" } }));
        set(
            s,
            &format!("{d}.budgets"),
            json!({
                "maxItems": 50,
                "x-kubernetes-list-type": "atomic",
                "x-kubernetes-validations": [rule("self.all(x, has(x.schedule) == has(x.duration))", "'schedule' must be set with 'duration'")]
            }),
        );
        set(
            s,
            &format!("{d}.budgets[]"),
            json!({ "required": ["nodes"] }),
        );
        set(
            s,
            &format!("{d}.budgets[].nodes"),
            json!({ "pattern": "^((100|[0-9]{1,2})%|[0-9]+)$" }),
        );
        set(
            s,
            &format!("{d}.budgets[].schedule"),
            json!({ "pattern": r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$" }),
        );
        set(
            s,
            &format!("{d}.budgets[].duration"),
            json!({ "pattern": "^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$" }),
        );
        set(
            s,
            &format!("{d}.budgets[].reasons"),
            json!({ "maxItems": 50, "x-kubernetes-list-type": "set" }),
        );
        set(
            s,
            &format!("{d}.consolidateAfter"),
            json!({ "pattern": NILLABLE_DURATION_PATTERN }),
        );

        set(s, "spec.limits", quantity_map());
        set(s, "spec.weight", json!({ "minimum": 1, "maximum": 100 }));
        set(s, "spec.replicas", json!({ "minimum": 0 }));
        set(
            s,
            "spec",
            json!({ "x-kubernetes-validations": [
                rule("has(self.replicas) == has(oldSelf.replicas)", "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"),
                rule("!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))", "only 'limits.nodes' is supported on static NodePools"),
                rule("!has(self.replicas) || !has(self.weight)", "'weight' is not supported on static NodePools"),
            ]}),
        );
        set(
            s,
            &format!("{t}.spec.nodeClassRef"),
            json!({ "x-kubernetes-validations": [
                rule("self.group == oldSelf.group", "nodeClassRef.group is immutable"),
                rule("self.kind == oldSelf.kind", "nodeClassRef.kind is immutable"),
            ]}),
        );

        set(s, "status.resources", quantity_map());
        patch_conditions(s, "status.conditions", true);
    })
}

/// The NodeClaim CRD, with upstream's validation rules.
pub fn node_claim_crd() -> CustomResourceDefinition {
    with_schema(NodeClaim::crd(), |s| {
        patch_claim_spec(s, "spec", false);
        set(s, "spec.resources.requests", quantity_map());
        set(
            s,
            "spec",
            json!({ "x-kubernetes-validations": [rule("self == oldSelf", "spec is immutable")] }),
        );
        set(s, "status.capacity", quantity_map());
        set(s, "status.allocatable", quantity_map());
        patch_conditions(s, "status.conditions", false);
    })
}

/// The NodeOverlay CRD (`karpenter.sh/v1alpha1`), with upstream's validation rules.
pub fn node_overlay_crd() -> CustomResourceDefinition {
    with_schema(NodeOverlay::crd(), |s| {
        set(
            s,
            "spec.requirements",
            json!({
                "maxItems": 100,
                "x-kubernetes-list-type": "atomic",
                "x-kubernetes-validations": [
                    rule(
                        "self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)",
                        "requirements with operator 'NotIn' must have a value defined"
                    ),
                    rule(
                        "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
                        "requirements with operator 'In' must have a value defined"
                    ),
                    rule(
                        "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
                        "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"
                    ),
                ]
            }),
        );
        remove(s, "spec.requirements", "default");
        set(
            s,
            "spec.requirements[].key",
            json!({ "maxLength": 316, "pattern": QUALIFIED_NAME_PATTERN, "x-kubernetes-validations": key_rules(false, false) }),
        );
        set(
            s,
            "spec.requirements[].values",
            json!({ "x-kubernetes-list-type": "atomic" }),
        );
        set(
            s,
            "spec.requirements[].values[]",
            json!({ "maxLength": 63, "pattern": LABEL_VALUE_PATTERN }),
        );
        set(
            s,
            "spec.priceAdjustment",
            json!({ "pattern": crate::overlay::PRICE_ADJUSTMENT_PATTERN }),
        );
        set(
            s,
            "spec.price",
            json!({ "pattern": crate::overlay::PRICE_PATTERN }),
        );
        set(s, "spec.capacity", quantity_map());
        set(
            s,
            "spec.capacity",
            json!({ "x-kubernetes-validations": [rule(
                "self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))",
                "invalid resource restricted"
            )]}),
        );
        set(s, "spec.weight", json!({ "minimum": 1, "maximum": 10000 }));
        set(
            s,
            "spec",
            json!({
                "required": ["requirements"],
                "x-kubernetes-validations": [rule(
                    "!has(self.price) || !has(self.priceAdjustment)",
                    "cannot set both 'price' and 'priceAdjustment'"
                )]
            }),
        );
        patch_conditions(s, "status.conditions", true);
    })
}

/// The CapacityBuffer CRD (`autoscaling.x-k8s.io/v1beta1`), with the schema Karpenter v1.15
/// ships: non-negative `replicas` and `percentage`, non-empty reference names, quantity
/// `limits`, and the two CEL rules on `spec`.
pub fn capacity_buffer_crd() -> CustomResourceDefinition {
    let mut crd = CapacityBuffer::crd();
    crd.spec.names.list_kind = Some("CapacityBufferList".into());
    with_schema(crd, |s| {
        set(s, "spec.limits", quantity_map());
        for field in ["replicas", "percentage"] {
            set(s, &format!("spec.{field}"), json!({ "minimum": 0 }));
        }
        for path in [
            "spec.podTemplateRef.name",
            "spec.scalableRef.kind",
            "spec.scalableRef.name",
            "status.podTemplateRef.name",
        ] {
            set(s, path, json!({ "minLength": 1 }));
        }
        remove(s, "spec.scalableRef.apiGroup", "default");
        set(
            s,
            "spec",
            json!({ "x-kubernetes-validations": [
                rule("!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)", "If podTemplateRef is set, replicas or limits must also be set"),
                rule("!(has(self.podTemplateRef) && has(self.scalableRef))", "You must define either PodTemplateRef or ScalableRef, but not both"),
            ]}),
        );
        patch_conditions(s, "status.conditions", true);
        set(
            s,
            "status.conditions[]",
            json!({ "required": ["lastTransitionTime", "message", "reason", "status", "type"] }),
        );
    })
}

/// Every CRD (CapacityBuffer, NodeClaim, NodeOverlay, then NodePool) as one multi-document
/// YAML stream, for `karpenter crds` and the Helm chart.
pub fn crds_yaml() -> String {
    let mut out = String::new();
    for crd in [
        capacity_buffer_crd(),
        node_claim_crd(),
        node_overlay_crd(),
        node_pool_crd(),
    ] {
        out.push_str(&crd_yaml(&crd));
    }
    out
}

/// One CRD as a YAML document starting with `---`.
pub fn crd_yaml(crd: &CustomResourceDefinition) -> String {
    // Serialising a CRD (strings, maps, lists) cannot fail; an empty document would be caught
    // by the CRD freshness test.
    let body = serde_json::to_value(crd)
        .ok()
        .and_then(|v| serde_saphyr::to_string(&sorted(v)).ok())
        .unwrap_or_default();
    format!("---\n{body}")
}

/// Object keys in sorted order, so the YAML is stable across serde_json map settings; whole
/// floats (`maximum`, `minimum` are `f64` in the CRD type) written as integers, as upstream.
fn sorted(v: Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sorted(v)))
                    .collect::<Map<_, _>>(),
            )
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}
