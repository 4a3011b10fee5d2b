//! Taints and tolerations, matched exactly as the kube-scheduler matches them.

use serde::{Deserialize, Serialize};

/// A taint effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    /// Pods that do not tolerate it are not scheduled.
    NoSchedule,
    /// The scheduler tries to avoid the node.
    PreferNoSchedule,
    /// Pods that do not tolerate it are not scheduled and are evicted.
    NoExecute,
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value (empty when absent).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

/// A toleration operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum TolerationOperator {
    /// Key and value must match (the default).
    #[default]
    Equal,
    /// The key must match; the value is ignored.
    Exists,
}

/// A pod toleration, with Kubernetes' optional fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// Key; empty with operator Exists tolerates every key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// Operator (default Equal).
    #[serde(default)]
    pub operator: TolerationOperator,
    /// Value, compared with Equal.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Effect; `None` tolerates every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
    /// Only meaningful for NoExecute; does not affect scheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

impl Taint {
    /// A taint.
    pub fn new(key: impl Into<String>, value: impl Into<String>, effect: TaintEffect) -> Self {
        Self { key: key.into(), value: value.into(), effect }
    }

    /// Whether two taints are the same for matching purposes (key and effect), like
    /// `Taint.MatchTaint`.
    pub fn matches(&self, other: &Taint) -> bool {
        let _ = other;
        todo!()
    }
}

impl Toleration {
    /// `Toleration.ToleratesTaint`: whether this toleration tolerates `taint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        let _ = taint;
        todo!()
    }
}

/// The first taint among `taints` that `tolerations` do not tolerate, considering only the
/// effects the scheduler filters on (NoSchedule, NoExecute) and — when `prefer_no_schedule`
/// is true, as Karpenter does before it relaxes preferences — PreferNoSchedule too.
pub fn first_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    prefer_no_schedule: bool,
) -> Option<&'a Taint> {
    let _ = (taints, tolerations, prefer_no_schedule);
    todo!()
}
