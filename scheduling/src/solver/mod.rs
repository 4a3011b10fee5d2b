//! The packing solver: Karpenter-compatible greedy scheduling simulation over existing nodes,
//! in-flight claims and new NodeClaims.

use crate::model::Snapshot;
use crate::plan::Plan;
use serde::{Deserialize, Serialize};

/// What to do with preferences (preferred affinities, ScheduleAnyway spreads,
/// PreferNoSchedule taints) — Karpenter's `--preference-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PreferencePolicy {
    /// Treat preferences as requirements, relaxing them one at a time when a pod cannot be
    /// placed (Karpenter's default).
    #[default]
    Respect,
    /// Ignore preferences entirely.
    Ignore,
}

/// What to do when a claim cannot keep `minValues` distinct values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum MinValuesPolicy {
    /// The pod is unschedulable on that pool (Karpenter's default).
    #[default]
    Strict,
    /// Keep as many values as possible.
    BestEffort,
}

/// Options for [`solve`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SolveOptions {
    /// Preference handling.
    #[serde(default)]
    pub preference_policy: PreferencePolicy,
    /// minValues handling.
    #[serde(default)]
    pub min_values_policy: MinValuesPolicy,
}

/// Decides where every pending pod of `snapshot` goes. Deterministic: the same snapshot and
/// options give the same plan.
pub fn solve(snapshot: &Snapshot, options: &SolveOptions) -> Plan {
    let _ = (snapshot, options);
    todo!()
}
