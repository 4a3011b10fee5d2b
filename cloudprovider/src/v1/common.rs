//! Types shared by NodePool and NodeClaim: taints, requirements, the NodeClass reference and
//! status conditions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A taint effect (`NoSchedule`, `PreferNoSchedule`, `NoExecute`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum TaintEffect {
    /// Pods that do not tolerate it are not scheduled.
    NoSchedule,
    /// The scheduler tries to avoid the node.
    PreferNoSchedule,
    /// Pods that do not tolerate it are not scheduled and are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }
}

impl From<TaintEffect> for karpenter_scheduling::taints::TaintEffect {
    fn from(e: TaintEffect) -> Self {
        match e {
            TaintEffect::NoSchedule => Self::NoSchedule,
            TaintEffect::PreferNoSchedule => Self::PreferNoSchedule,
            TaintEffect::NoExecute => Self::NoExecute,
        }
    }
}

/// A node taint as written in a NodePool template or NodeClaim (`core/v1` Taint).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value (empty when absent).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
    /// When the taint was added (set by the node lifecycle controller for NoExecute taints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<Time>,
}

impl Taint {
    /// A taint without `timeAdded`.
    pub fn new(key: impl Into<String>, value: impl Into<String>, effect: TaintEffect) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
            effect,
            time_added: None,
        }
    }

    /// The scheduler's view of this taint.
    pub fn to_model(&self) -> karpenter_scheduling::taints::Taint {
        karpenter_scheduling::taints::Taint::new(
            self.key.clone(),
            self.value.clone(),
            self.effect.into(),
        )
    }
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

/// A node selector operator, with Karpenter's `Gte` and `Lte`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum NodeSelectorOperator {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// Integer greater than the single value.
    Gt,
    /// Integer less than the single value.
    Lt,
    /// Integer greater than or equal to the single value.
    Gte,
    /// Integer less than or equal to the single value.
    Lte,
}

impl NodeSelectorOperator {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::In => "In",
            Self::NotIn => "NotIn",
            Self::Exists => "Exists",
            Self::DoesNotExist => "DoesNotExist",
            Self::Gt => "Gt",
            Self::Lt => "Lt",
            Self::Gte => "Gte",
            Self::Lte => "Lte",
        }
    }

    /// Whether it compares integers (Gt, Lt, Gte, Lte).
    pub fn is_numeric(self) -> bool {
        matches!(self, Self::Gt | Self::Lt | Self::Gte | Self::Lte)
    }
}

impl From<NodeSelectorOperator> for karpenter_scheduling::Operator {
    fn from(o: NodeSelectorOperator) -> Self {
        use karpenter_scheduling::Operator as O;
        match o {
            NodeSelectorOperator::In => O::In,
            NodeSelectorOperator::NotIn => O::NotIn,
            NodeSelectorOperator::Exists => O::Exists,
            NodeSelectorOperator::DoesNotExist => O::DoesNotExist,
            NodeSelectorOperator::Gt => O::Gt,
            NodeSelectorOperator::Lt => O::Lt,
            NodeSelectorOperator::Gte => O::Gte,
            NodeSelectorOperator::Lte => O::Lte,
        }
    }
}

/// A requirement with Karpenter's `minValues` (`NodeSelectorRequirementWithMinValues`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    /// The label key.
    pub key: String,
    /// How the key relates to the values.
    pub operator: NodeSelectorOperator,
    /// Values: non-empty for In/NotIn, empty for Exists/DoesNotExist, one integer for
    /// Gt/Lt/Gte/Lte.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Minimum number of distinct values that must stay available (1–50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i64>,
}

impl NodeSelectorRequirementWithMinValues {
    /// A requirement without minValues.
    pub fn new(
        key: impl Into<String>,
        operator: NodeSelectorOperator,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            key: key.into(),
            operator,
            values: values.into_iter().map(Into::into).collect(),
            min_values: None,
        }
    }

    /// The scheduler's manifest form. minValues outside `u32` (rejected by validation anyway)
    /// is dropped rather than wrapped.
    ///
    /// Normalised the way Karpenter's `NewRequirement` reads a NodePool requirement: `NotIn`
    /// with no values allows every value of a present label (`Exists`), and values given to
    /// `Exists`/`DoesNotExist` are ignored.
    pub fn to_model(&self) -> karpenter_scheduling::requirements::NodeSelectorRequirement {
        use karpenter_scheduling::requirements::Operator;
        let mut operator: Operator = self.operator.into();
        let mut values = self.values.clone();
        match operator {
            Operator::NotIn if values.is_empty() => operator = Operator::Exists,
            Operator::Exists | Operator::DoesNotExist => values.clear(),
            _ => {}
        }
        karpenter_scheduling::requirements::NodeSelectorRequirement {
            key: self.key.clone(),
            operator,
            values,
            min_values: self.min_values.and_then(|v| u32::try_from(v).ok()),
        }
    }
}

/// A reference to the provider's NodeClass (`EC2NodeClass` …).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassReference {
    /// API group of the referent (`karpenter.k8s.aws`).
    pub group: String,
    /// Kind of the referent (`EC2NodeClass`).
    pub kind: String,
    /// Name of the referent.
    pub name: String,
}

/// The metadata a NodePool template stamps on its NodeClaims and nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    /// Labels put on every node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations put on every node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A condition status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// It does not.
    False,
    /// Not known yet.
    Unknown,
}

/// A status condition (the shape of `metav1.Condition` that Karpenter uses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type (`Launched`, `Ready` …).
    #[serde(rename = "type")]
    pub type_: String,
    /// Status.
    pub status: ConditionStatus,
    /// The object's generation the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the status last changed.
    pub last_transition_time: Time,
    /// A CamelCase reason for the last transition.
    #[serde(default)]
    pub reason: String,
    /// A human-readable message.
    #[serde(default)]
    pub message: String,
}

/// The root condition every condition set rolls up into.
pub const CONDITION_READY: &str = "Ready";

/// Typed access to an object's status conditions, with operatorpkg's semantics: setting a
/// condition keeps `lastTransitionTime` unless the status changes, and the root `Ready`
/// condition is recomputed from the object's dependent conditions after every change
/// (`False` if any is false, `True` if all are true, otherwise `Unknown`).
pub trait StatusConditions {
    /// Conditions whose conjunction is `Ready`.
    const READY_DEPENDENTS: &'static [&'static str];

    /// The conditions (empty without a status).
    fn conditions(&self) -> &[Condition];

    /// Mutable conditions, creating the status if needed.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;

    /// The object's `metadata.generation`, recorded as `observedGeneration`.
    fn generation(&self) -> Option<i64>;

    /// The condition of `type_`, if set.
    fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions().iter().find(|c| c.type_ == type_)
    }

    /// Whether the condition of `type_` is `True`.
    fn is_true(&self, type_: &str) -> bool {
        self.condition(type_)
            .is_some_and(|c| c.status == ConditionStatus::True)
    }

    /// Whether the condition of `type_` is `False`.
    fn is_false(&self, type_: &str) -> bool {
        self.condition(type_)
            .is_some_and(|c| c.status == ConditionStatus::False)
    }

    /// Sets a condition; returns whether anything changed. `now` is used only when the status
    /// transitions (or the condition is new).
    fn set_condition(
        &mut self,
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: &str,
        now: Time,
    ) -> bool {
        let generation = self.generation();
        let changed = upsert(
            self.conditions_mut(),
            type_,
            status,
            reason,
            message,
            &now,
            generation,
        );
        let ready_changed = if type_ == CONDITION_READY {
            false
        } else {
            let status = rollup(self.conditions(), Self::READY_DEPENDENTS);
            let (reason, message) = match status {
                ConditionStatus::True => ("Ready", String::new()),
                ConditionStatus::False => (
                    "NotReady",
                    not_ready_message(self.conditions(), Self::READY_DEPENDENTS),
                ),
                ConditionStatus::Unknown => ("AwaitingReconciliation", String::new()),
            };
            upsert(
                self.conditions_mut(),
                CONDITION_READY,
                status,
                reason,
                &message,
                &now,
                generation,
            )
        };
        changed || ready_changed
    }

    /// Sets `type_` to `True` with the type as reason.
    fn set_true(&mut self, type_: &str, now: Time) -> bool {
        self.set_condition(type_, ConditionStatus::True, type_, "", now)
    }

    /// Sets `type_` to `False`.
    fn set_false(&mut self, type_: &str, reason: &str, message: &str, now: Time) -> bool {
        self.set_condition(type_, ConditionStatus::False, reason, message, now)
    }

    /// Removes the condition of `type_`; returns whether it was present.
    fn clear_condition(&mut self, type_: &str) -> bool {
        let conditions = self.conditions_mut();
        let before = conditions.len();
        conditions.retain(|c| c.type_ != type_);
        before != conditions.len()
    }
}

/// Implements [`StatusConditions`] for a `kube` custom resource whose status type (with a
/// `conditions` field) is `$status`, rolling `Ready` up from `$deps`.
#[macro_export]
macro_rules! status_conditions {
    ($kind:ty, $status:ty, $deps:expr) => {
        impl $crate::v1::StatusConditions for $kind {
            const READY_DEPENDENTS: &'static [&'static str] = $deps;

            fn conditions(&self) -> &[$crate::v1::Condition] {
                self.status.as_ref().map_or(&[], |s| &s.conditions)
            }

            fn conditions_mut(&mut self) -> &mut Vec<$crate::v1::Condition> {
                &mut self
                    .status
                    .get_or_insert_with(<$status>::default)
                    .conditions
            }

            fn generation(&self) -> Option<i64> {
                self.metadata.generation
            }
        }
    };
}

pub(crate) fn upsert(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    now: &Time,
    generation: Option<i64>,
) -> bool {
    let new = |t: Time| Condition {
        type_: type_.to_owned(),
        status,
        observed_generation: generation,
        last_transition_time: t,
        reason: reason.to_owned(),
        message: message.to_owned(),
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            let time = if existing.status == status {
                existing.last_transition_time.clone()
            } else {
                now.clone()
            };
            let updated = new(time);
            if *existing == updated {
                false
            } else {
                *existing = updated;
                true
            }
        }
        None => {
            conditions.push(new(now.clone()));
            true
        }
    }
}

fn rollup(conditions: &[Condition], dependents: &[&str]) -> ConditionStatus {
    let status_of = |t: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == t)
            .map_or(ConditionStatus::Unknown, |c| c.status)
    };
    if dependents
        .iter()
        .any(|t| status_of(t) == ConditionStatus::False)
    {
        ConditionStatus::False
    } else if dependents
        .iter()
        .all(|t| status_of(t) == ConditionStatus::True)
    {
        ConditionStatus::True
    } else {
        ConditionStatus::Unknown
    }
}

fn not_ready_message(conditions: &[Condition], dependents: &[&str]) -> String {
    let failing: Vec<&str> = dependents
        .iter()
        .copied()
        .filter(|t| {
            conditions
                .iter()
                .any(|c| c.type_ == *t && c.status == ConditionStatus::False)
        })
        .collect();
    format!("{} not ready", failing.join(", "))
}
