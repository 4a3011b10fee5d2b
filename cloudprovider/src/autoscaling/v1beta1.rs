//! `CapacityBuffer` (`autoscaling.x-k8s.io/v1beta1`), field for field as Karpenter v1.15
//! ships it (`pkg/apis/autoscaling/v1beta1`, itself a copy of the Cluster Autoscaler's API):
//! spare capacity for a pod shape, kept by an autoscaler as placeholder ("virtual") pods
//! that never exist in the API server. What Karpenter does with a buffer (resolving its
//! template, counting its chunks, placing its virtual pods) is in `karpenter-cluster`'s
//! `capacity_buffer`; this module holds the types, their defaults and their validation.

use crate::v1::{Condition, ConditionStatus};
use crate::validation::{ErrorKind, ValidationError, ValidationErrors};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The API group.
pub const GROUP: &str = "autoscaling.x-k8s.io";
/// `apiVersion` of the objects.
pub const API_VERSION: &str = "autoscaling.x-k8s.io/v1beta1";
/// The default (and, in Karpenter v1.15, the only acted-on) provisioning strategy: keep the
/// capacity at all times.
pub const ACTIVE_PROVISIONING_STRATEGY: &str = "buffer.x-k8s.io/active-capacity";
/// Condition: the pod shape is resolved and the number of chunks computed.
pub const CONDITION_READY_FOR_PROVISIONING: &str = "ReadyForProvisioning";
/// Condition: the buffer's virtual pods fit on existing capacity (without new NodeClaims).
pub const CONDITION_PROVISIONING: &str = "Provisioning";
/// `scalableRef.kind` values Karpenter resolves (API group `apps`, the default).
pub const SCALABLE_KINDS: [&str; 3] = ["Deployment", "StatefulSet", "ReplicaSet"];

/// Annotation marking a virtual pod built from a CapacityBuffer (value `"true"`).
pub const FAKE_POD_ANNOTATION: &str = "karpenter.sh/capacity-buffer-fake-pod";
/// Annotation naming the CapacityBuffer a virtual pod belongs to.
pub const BUFFER_NAME_ANNOTATION: &str = "karpenter.sh/capacity-buffer-name";
/// Annotation naming the namespace of the CapacityBuffer a virtual pod belongs to.
pub const BUFFER_NAMESPACE_ANNOTATION: &str = "karpenter.sh/capacity-buffer-namespace";

/// A reference to an object in the buffer's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalObjectRef {
    /// Name of the referent.
    pub name: String,
}

/// A reference to an object with a scale subresource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalableRef {
    /// API group of the referent; empty for the core group (Karpenter reads an empty group
    /// as `apps`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// Kind of the referent (`Deployment`, `StatefulSet`, `ReplicaSet`).
    pub kind: String,
    /// Name of the referent.
    pub name: String,
}

fn default_strategy() -> Option<String> {
    Some(ACTIVE_PROVISIONING_STRATEGY.to_owned())
}

/// `CapacityBuffer.spec`.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "autoscaling.x-k8s.io",
    version = "v1beta1",
    kind = "CapacityBuffer",
    plural = "capacitybuffers",
    singular = "capacitybuffer",
    shortname = "cb",
    category = "autoscaling",
    namespaced,
    status = "CapacityBufferStatus",
    printcolumn(
        name = "Strategy",
        type_ = "string",
        description = "The strategy to be used.",
        json_path = ".spec.provisioningStrategy"
    ),
    printcolumn(
        name = "PodTemplate",
        type_ = "string",
        description = "The name of the PodTemplate used.",
        json_path = ".status.podTemplateRef.name"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        description = "The actual number of buffer chunks.",
        json_path = ".status.replicas"
    ),
    printcolumn(
        name = "ConditionsType",
        type_ = "string",
        description = "List of all condition types.",
        json_path = ".status.conditions[*].type"
    ),
    printcolumn(
        name = "ConditionsStatus",
        type_ = "string",
        description = "List of all condition statuses.",
        json_path = ".status.conditions[*].status"
    ),
    printcolumn(
        name = "ConditionsReason",
        type_ = "string",
        description = "List of all condition reasons.",
        json_path = ".status.conditions[*].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        description = "The age of the CapacityBuffer.",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "CapacityBuffer is spare capacity an autoscaler keeps for a pod shape, as placeholder pods that never run"
)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBufferSpec {
    /// How the buffer is used; `buffer.x-k8s.io/active-capacity` (the default) keeps the
    /// capacity at all times.
    #[serde(default = "default_strategy", skip_serializing_if = "Option::is_none")]
    pub provisioning_strategy: Option<String>,
    /// A PodTemplate in the buffer's namespace giving the shape of one chunk. Exactly one
    /// of `podTemplateRef` and `scalableRef` should be set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// A Deployment, StatefulSet or ReplicaSet in the buffer's namespace whose pod template
    /// gives the shape of one chunk (and whose replicas `percentage` counts from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scalable_ref: Option<ScalableRef>,
    /// How many chunks to keep. With `percentage` too, the larger of the two counts; with
    /// neither, as many chunks as fit `limits`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Chunks as a percentage of the `scalableRef`'s replicas, rounded up (at least one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<i32>,
    /// An upper bound on the chunks' summed requests; alone, it sizes the buffer to as many
    /// chunks as fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
}

/// `CapacityBuffer.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBufferStatus {
    /// The PodTemplate the buffer was resolved from (unset for a `scalableRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// How many chunks the buffer keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The `metadata.generation` of that PodTemplate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_generation: Option<i64>,
    /// `ReadyForProvisioning` and `Provisioning`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The spec's provisioning strategy, as last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_strategy: Option<String>,
}

impl CapacityBuffer {
    /// The name, empty if unset.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    /// The namespace, `default` if unset (as a manifest without one is created).
    pub fn namespace(&self) -> &str {
        self.metadata
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("default")
    }

    /// The condition of `type_`, if set.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
    }

    /// Checks the buffer as the API server applies the CRD's schema and CEL rules, returning
    /// every failure with its field path.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errors = Vec::new();
        let mut push = |path: &str, kind: ErrorKind, value: Option<String>, message: &str| {
            errors.push(ValidationError {
                path: path.to_owned(),
                kind,
                value,
                message: message.to_owned(),
            });
        };
        let spec = &self.spec;
        if let Some(r) = &spec.pod_template_ref
            && r.name.is_empty()
        {
            push(
                "spec.podTemplateRef.name",
                ErrorKind::Invalid,
                Some(String::new()),
                "should be at least 1 chars long",
            );
        }
        if let Some(r) = &spec.scalable_ref {
            for (field, value) in [("kind", &r.kind), ("name", &r.name)] {
                if value.is_empty() {
                    push(
                        &format!("spec.scalableRef.{field}"),
                        ErrorKind::Invalid,
                        Some(String::new()),
                        "should be at least 1 chars long",
                    );
                }
            }
        }
        for (field, value) in [("replicas", spec.replicas), ("percentage", spec.percentage)] {
            if let Some(v) = value.filter(|v| *v < 0) {
                push(
                    &format!("spec.{field}"),
                    ErrorKind::Invalid,
                    Some(v.to_string()),
                    "should be greater than or equal to 0",
                );
            }
        }
        for (name, q) in spec.limits.iter().flatten() {
            if let Err(e) = karpenter_scheduling::Quantity::parse(&q.0) {
                push(
                    &format!("spec.limits[{name}]"),
                    ErrorKind::Invalid,
                    Some(q.0.clone()),
                    &e.to_string(),
                );
            }
        }
        // The CRD's CEL rules, in its order.
        if spec.pod_template_ref.is_some() && spec.replicas.is_none() && spec.limits.is_none() {
            push(
                "spec",
                ErrorKind::Invalid,
                None,
                "If podTemplateRef is set, replicas or limits must also be set",
            );
        }
        if spec.pod_template_ref.is_some() && spec.scalable_ref.is_some() {
            push(
                "spec",
                ErrorKind::Invalid,
                None,
                "You must define either PodTemplateRef or ScalableRef, but not both",
            );
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ValidationErrors {
                object: format!("CapacityBuffer \"{}/{}\"", self.namespace(), self.name()),
                errors,
            })
        }
    }
}

/// Sets the condition `type_` in `conditions` as `meta.SetStatusCondition` does: its
/// `lastTransitionTime` moves to `now` only when the status changes (or the condition is
/// new). Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) -> bool {
    crate::v1::common::upsert(conditions, type_, status, reason, message, now, generation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> CapacityBuffer {
        serde_saphyr::from_str(yaml).expect("a CapacityBuffer")
    }

    const HEAD: &str = "apiVersion: autoscaling.x-k8s.io/v1beta1\nkind: CapacityBuffer\nmetadata: {name: b, namespace: team}\n";

    #[test]
    fn defaults_and_round_trip() {
        let b = parse(&format!(
            "{HEAD}spec:\n  podTemplateRef: {{name: pt}}\n  replicas: 3\n"
        ));
        assert_eq!(
            b.spec.provisioning_strategy.as_deref(),
            Some(ACTIVE_PROVISIONING_STRATEGY)
        );
        assert_eq!(b.namespace(), "team");
        assert!(b.validate().is_ok());
        let json = serde_json::to_value(&b).unwrap();
        assert_eq!(json["spec"]["podTemplateRef"]["name"], "pt");
        assert!(json["spec"].get("limits").is_none());
        let scalable = parse(&format!(
            "{HEAD}spec:\n  scalableRef: {{kind: Deployment, name: web}}\n  percentage: 20\n"
        ));
        assert_eq!(scalable.spec.scalable_ref.as_ref().unwrap().api_group, "");
        assert!(scalable.validate().is_ok());
    }

    #[test]
    fn the_schema_and_cel_rules_are_enforced_with_field_paths() {
        let err = |spec: &str| {
            parse(&format!("{HEAD}spec:\n{spec}"))
                .validate()
                .unwrap_err()
        };
        let e = err("  podTemplateRef: {name: pt}\n");
        assert!(e.has_path("spec"), "{e}");
        assert!(
            e.to_string()
                .contains("If podTemplateRef is set, replicas or limits must also be set"),
            "{e}"
        );
        let e = err(
            "  podTemplateRef: {name: pt}\n  scalableRef: {kind: Deployment, name: w}\n  replicas: 1\n",
        );
        assert!(
            e.to_string()
                .contains("You must define either PodTemplateRef or ScalableRef, but not both"),
            "{e}"
        );
        let e = err("  scalableRef: {kind: '', name: ''}\n  replicas: -1\n  percentage: -5\n");
        for path in [
            "spec.scalableRef.kind",
            "spec.scalableRef.name",
            "spec.replicas",
            "spec.percentage",
        ] {
            assert!(e.has_path(path), "{path}: {e}");
        }
        let e = err("  podTemplateRef: {name: ''}\n  limits: {cpu: lots}\n");
        assert!(e.has_path("spec.podTemplateRef.name"), "{e}");
        assert!(e.has_path("spec.limits[cpu]"), "{e}");
        assert!(
            e.to_string()
                .starts_with("CapacityBuffer \"team/b\" is invalid")
        );
        // Zero is allowed, and limits alone size a template buffer.
        for ok in [
            "  podTemplateRef: {name: pt}\n  replicas: 0\n",
            "  podTemplateRef: {name: pt}\n  limits: {cpu: '4'}\n",
            "  scalableRef: {apiGroup: apps, kind: Deployment, name: w}\n  percentage: 0\n",
            "  scalableRef: {kind: StatefulSet, name: w}\n",
        ] {
            parse(&format!("{HEAD}spec:\n{ok}"))
                .validate()
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }

    #[test]
    fn conditions_keep_their_transition_time_while_the_status_holds() {
        let t = |s: i64| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let mut c = Vec::new();
        assert!(set_condition(
            &mut c,
            CONDITION_PROVISIONING,
            ConditionStatus::False,
            "RequiresNewCapacity",
            "1/2",
            Some(1),
            &t(10)
        ));
        assert!(set_condition(
            &mut c,
            CONDITION_PROVISIONING,
            ConditionStatus::False,
            "RequiresNewCapacity",
            "2/2",
            Some(1),
            &t(20)
        ));
        assert_eq!(c[0].last_transition_time, t(10));
        assert_eq!(c[0].message, "2/2");
        assert!(!set_condition(
            &mut c,
            CONDITION_PROVISIONING,
            ConditionStatus::False,
            "RequiresNewCapacity",
            "2/2",
            Some(1),
            &t(30)
        ));
        assert!(set_condition(
            &mut c,
            CONDITION_PROVISIONING,
            ConditionStatus::True,
            "FitsExistingCapacity",
            "",
            Some(1),
            &t(40)
        ));
        assert_eq!(c[0].last_transition_time, t(40));
    }
}
