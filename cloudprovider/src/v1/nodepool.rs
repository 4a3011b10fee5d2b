//! `NodePool` (`karpenter.sh/v1`): the template of nodes Karpenter may launch, with its
//! disruption settings and limits.

use super::common::{
    Condition, NodeClassReference, NodeSelectorRequirementWithMinValues, Taint, TemplateMetadata,
};
use crate::duration::{Duration, NillableDuration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `NodePool.spec`. Defaults are applied while deserialising, as the API server applies the
/// CRD's defaults, so a parsed object always carries them.
// kube's `printcolumn(...)` repeats keys by design; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    singular = "nodepool",
    category = "karpenter",
    status = "NodePoolStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.nodes"
    ),
    printcolumn(
        name = "NodeClass",
        type_ = "string",
        json_path = ".spec.template.spec.nodeClassRef.name"
    ),
    printcolumn(name = "Nodes", type_ = "string", json_path = ".status.nodes"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Weight",
        type_ = "integer",
        json_path = ".spec.weight",
        priority = 1
    ),
    printcolumn(
        name = "CPU",
        type_ = "string",
        json_path = ".status.resources.cpu",
        priority = 1
    ),
    printcolumn(
        name = "Memory",
        type_ = "string",
        json_path = ".status.resources.memory",
        priority = 1
    ),
    doc = "NodePool is the Schema for the NodePools API"
)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    /// The template of the NodeClaims this pool launches.
    pub template: NodeClaimTemplate,
    /// Disruption settings (default `{consolidateAfter: 0s}` plus nested defaults).
    #[serde(default)]
    pub disruption: Disruption,
    /// Bounds on the total capacity of the pool's nodes (`cpu`, `memory`, `nodes` …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
    /// Priority among pools (1–100; higher first; absent counts as 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Static pool size (alpha): when set, the pool keeps exactly this many nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
}

/// `spec.template`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    /// Labels and annotations for the nodes.
    #[serde(default)]
    pub metadata: TemplateMetadata,
    /// The NodeClaim spec, without resource requests.
    pub spec: NodeClaimTemplateSpec,
}

impl NodeClaimTemplate {
    /// The spec of a NodeClaim launched from this template (Karpenter's `ToNodeClaim`); the
    /// caller adds requirements narrowed by scheduling and resource requests.
    pub fn to_node_claim_spec(&self) -> super::NodeClaimSpec {
        let s = &self.spec;
        super::NodeClaimSpec {
            taints: s.taints.clone(),
            startup_taints: s.startup_taints.clone(),
            requirements: s.requirements.clone(),
            resources: super::ResourceRequirements::default(),
            node_class_ref: s.node_class_ref.clone(),
            termination_grace_period: s.termination_grace_period.clone(),
            expire_after: s.expire_after.clone(),
        }
    }
}

/// `spec.template.spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    /// Taints every node gets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints present at startup and removed by something else; pods need not tolerate them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// Node requirements (at most 100).
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// The provider's NodeClass.
    pub node_class_ref: NodeClassReference,
    /// How long draining may take before pods are deleted regardless of PDBs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<Duration>,
    /// Node lifetime before it is replaced (default `720h`; `Never` disables).
    #[serde(default = "default_expire_after")]
    pub expire_after: NillableDuration,
}

impl Default for NodeClaimTemplateSpec {
    fn default() -> Self {
        Self {
            taints: Vec::new(),
            startup_taints: Vec::new(),
            requirements: Vec::new(),
            node_class_ref: NodeClassReference::default(),
            termination_grace_period: None,
            expire_after: default_expire_after(),
        }
    }
}

/// `spec.disruption`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// How long a node must be consolidatable before it is consolidated (default `0s`;
    /// `Never` disables consolidation).
    #[serde(default = "default_consolidate_after")]
    pub consolidate_after: NillableDuration,
    /// Which nodes consolidation may remove (default `WhenEmptyOrUnderutilized`).
    #[serde(default)]
    pub consolidation_policy: ConsolidationPolicy,
    /// Disruption budgets (default one budget of `10%`; at most 50).
    #[serde(default = "default_budgets")]
    pub budgets: Vec<Budget>,
}

impl Default for Disruption {
    fn default() -> Self {
        Self {
            consolidate_after: default_consolidate_after(),
            consolidation_policy: ConsolidationPolicy::default(),
            budgets: default_budgets(),
        }
    }
}

/// Which nodes consolidation may remove.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConsolidationPolicy {
    /// Only nodes without workload pods.
    WhenEmpty,
    /// Empty nodes and nodes whose pods fit elsewhere (the default).
    #[default]
    WhenEmptyOrUnderutilized,
    /// Like `WhenEmptyOrUnderutilized`, but a move must save enough relative to its churn.
    Balanced,
}

/// The `k` of the `Balanced` policy (upstream's `BalancedK`): a consolidation move in a
/// Balanced pool is approved when its score — the fraction of the pool's cost it saves over
/// the fraction of the pool's disruption cost it causes — is at least `1 / k`.
pub const BALANCED_K: u32 = 2;

impl ConsolidationPolicy {
    /// Whether consolidation moves in a pool with this policy are scored (`Balanced`).
    pub fn is_balanced(self) -> bool {
        self == Self::Balanced
    }

    /// The API spelling (also the `policy` label of upstream's consolidation metrics).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WhenEmpty => "WhenEmpty",
            Self::WhenEmptyOrUnderutilized => "WhenEmptyOrUnderutilized",
            Self::Balanced => "Balanced",
        }
    }
}

/// A disruption reason a budget can be limited to.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum DisruptionReason {
    /// Consolidation of underutilized nodes.
    Underutilized,
    /// Removal of empty nodes.
    Empty,
    /// Replacement of drifted nodes.
    Drifted,
    /// Repair of unhealthy nodes (Karpenter v1.15: node repair is paced by the budgets).
    Unhealthy,
}

impl DisruptionReason {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Underutilized => "Underutilized",
            Self::Empty => "Empty",
            Self::Drifted => "Drifted",
            Self::Unhealthy => "Unhealthy",
        }
    }
}

/// How many of the pool's nodes may be disrupted at once, and when.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// Reasons the budget applies to; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<DisruptionReason>,
    /// A node count (`5`) or a percentage of the pool's nodes (`10%`); default `10%`.
    #[serde(default = "default_budget_nodes")]
    pub nodes: String,
    /// Cron schedule (UTC) at which the budget becomes active; absent means always active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// How long the budget stays active after each schedule hit (hours/minutes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
}

impl Budget {
    /// An always-active budget of `nodes`.
    pub fn nodes(nodes: impl Into<String>) -> Self {
        Self {
            reasons: Vec::new(),
            nodes: nodes.into(),
            schedule: None,
            duration: None,
        }
    }

    /// `nodes` as a count or percentage, or `None` when it does not match
    /// `^((100|[0-9]{1,2})%|[0-9]+)$`.
    pub fn nodes_value(&self) -> Option<BudgetNodes> {
        BudgetNodes::parse(&self.nodes)
    }
}

/// A budget's `nodes` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetNodes {
    /// A number of nodes.
    Count(u64),
    /// A percentage (0–100) of the pool's nodes, rounded up when applied.
    Percent(u8),
}

impl BudgetNodes {
    /// Parses `N` or `P%` under the CRD's pattern `^((100|[0-9]{1,2})%|[0-9]+)$`.
    pub fn parse(text: &str) -> Option<Self> {
        if let Some(p) = text.strip_suffix('%') {
            let ok = (p == "100")
                || (!p.is_empty() && p.len() <= 2 && p.bytes().all(|b| b.is_ascii_digit()));
            return if ok {
                p.parse().ok().map(Self::Percent)
            } else {
                None
            };
        }
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            // Digits beyond u64 still match the pattern; saturate like a very large budget.
            return Some(Self::Count(text.parse().unwrap_or(u64::MAX)));
        }
        None
    }

    /// The number of nodes allowed out of `total`, rounding percentages up (as
    /// `intstr.GetScaledValueFromIntOrPercent(…, roundUp=true)`).
    pub fn allowed(self, total: u64) -> u64 {
        match self {
            Self::Count(n) => n,
            Self::Percent(p) => (total.saturating_mul(u64::from(p))).div_ceil(100),
        }
    }
}

/// `NodePool.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// Resources provisioned by the pool's nodes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
    /// Number of nodes (default 0).
    #[serde(default)]
    pub nodes: i64,
    /// The NodeClass generation last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    /// Conditions (`ValidationSucceeded`, `NodeClassReady`, `NodeRegistrationHealthy`, `Ready`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// NodePool condition: the pool passed runtime validation.
pub const NODEPOOL_CONDITION_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// NodePool condition: the referenced NodeClass is ready.
pub const NODEPOOL_CONDITION_NODE_CLASS_READY: &str = "NodeClassReady";
/// NodePool condition: nodes launched from the pool register.
pub const NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";

crate::status_conditions!(
    NodePool,
    NodePoolStatus,
    &[
        NODEPOOL_CONDITION_VALIDATION_SUCCEEDED,
        NODEPOOL_CONDITION_NODE_CLASS_READY,
    ]
);

/// Default `expireAfter`: `720h`.
pub fn default_expire_after() -> NillableDuration {
    NillableDuration::of(
        Duration::parse("720h").unwrap_or_else(|_| Duration::from_secs(720 * 3600)),
    )
}

/// Default `consolidateAfter`: `0s`.
pub fn default_consolidate_after() -> NillableDuration {
    NillableDuration::of(Duration::parse("0s").unwrap_or_else(|_| Duration::from_secs(0)))
}

/// Default `budgets`: `[{nodes: "10%"}]`.
pub fn default_budgets() -> Vec<Budget> {
    vec![Budget::nodes(default_budget_nodes())]
}

/// Default budget `nodes`: `10%`.
pub fn default_budget_nodes() -> String {
    "10%".to_owned()
}

impl NodePool {
    /// The pool's weight, 0 when unset.
    pub fn weight(&self) -> i32 {
        self.spec.weight.unwrap_or(0)
    }

    /// Whether the pool is static (`replicas` set).
    pub fn is_static(&self) -> bool {
        self.spec.replicas.is_some()
    }

    /// The name, empty if unset.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }
}
