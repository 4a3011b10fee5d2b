//! `NodeOverlay` (`karpenter.sh/v1alpha1`): price and extended-resource capacity overrides
//! applied to the instance types a NodePool offers, before scheduling (the NodeOverlay
//! feature gate). How overlays combine is in [`crate::overlay`].

use crate::v1::{Condition, NodeSelectorOperator, NodeSelectorRequirementWithMinValues};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A node selector requirement as NodeOverlay writes it (no `minValues`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirement {
    /// The label key.
    pub key: String,
    /// How the key relates to the values.
    pub operator: NodeSelectorOperator,
    /// Values: non-empty for In/NotIn, empty for Exists/DoesNotExist, one integer for
    /// Gt/Lt/Gte/Lte.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl NodeSelectorRequirement {
    /// A requirement.
    pub fn new(
        key: impl Into<String>,
        operator: NodeSelectorOperator,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        let r = NodeSelectorRequirementWithMinValues::new(key, operator, values);
        Self {
            key: r.key,
            operator: r.operator,
            values: r.values,
        }
    }

    /// The same requirement in NodePool form (no minValues), for the shared validators and
    /// the scheduler's requirement algebra.
    pub fn with_min_values(&self) -> NodeSelectorRequirementWithMinValues {
        NodeSelectorRequirementWithMinValues::new(
            self.key.clone(),
            self.operator,
            self.values.clone(),
        )
    }
}

/// `NodeOverlay.spec`.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "karpenter.sh",
    version = "v1alpha1",
    kind = "NodeOverlay",
    plural = "nodeoverlays",
    singular = "nodeoverlay",
    shortname = "overlays",
    category = "karpenter",
    status = "NodeOverlayStatus",
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
    doc = "NodeOverlay adjusts the price and extended-resource capacity of the instance types it selects"
)]
#[serde(rename_all = "camelCase")]
pub struct NodeOverlaySpec {
    /// Which instance types and offerings the overlay applies to: well-known labels
    /// (instance type, zone, capacity type, `karpenter.sh/nodepool` …) and the NodePool's
    /// template labels. Empty selects everything.
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirement>,
    /// A change to the price of matching offerings: `+0.5`, `-0.25` (absolute) or `+10%`,
    /// `-15%` (relative). Never below 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_adjustment: Option<String>,
    /// A price that replaces that of matching offerings (`5.00`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<String>,
    /// Extended resources added to (or replacing those of) matching instance types; `cpu`,
    /// `memory`, `ephemeral-storage` and `pods` are not allowed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    /// Precedence (1–10000, absent counts as 0): higher weights win; equal weights that
    /// touch the same offering or resource conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// `NodeOverlay.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeOverlayStatus {
    /// Conditions (`ValidationSucceeded`, `Ready`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// NodeOverlay condition: the overlay is valid and conflicts with no other overlay.
pub const NODEOVERLAY_CONDITION_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";

crate::status_conditions!(
    NodeOverlay,
    NodeOverlayStatus,
    &[NODEOVERLAY_CONDITION_VALIDATION_SUCCEEDED]
);

impl NodeOverlay {
    /// The name, empty if unset.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    /// The weight, 0 when unset (as upstream orders overlays).
    pub fn weight(&self) -> i32 {
        self.spec.weight.unwrap_or(0)
    }
}
