//! `NodeClaim` (`karpenter.sh/v1`): a request for one node, and what the provider launched.

use super::common::{
    Condition, NodeClassReference, NodeSelectorRequirementWithMinValues, StatusConditions, Taint,
};
use super::nodepool::default_expire_after;
use crate::duration::{Duration, NillableDuration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `NodeClaim.spec`; immutable once created.
// kube's `printcolumn(...)` repeats keys by design; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    singular = "nodeclaim",
    category = "karpenter",
    status = "NodeClaimStatus",
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".metadata.labels.node\\.kubernetes\\.io/instance-type"
    ),
    printcolumn(
        name = "Capacity",
        type_ = "string",
        json_path = ".metadata.labels.karpenter\\.sh/capacity-type"
    ),
    printcolumn(
        name = "Zone",
        type_ = "string",
        json_path = ".metadata.labels.topology\\.kubernetes\\.io/zone"
    ),
    printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"),
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
        name = "ImageID",
        type_ = "string",
        json_path = ".status.imageID",
        priority = 1
    ),
    printcolumn(
        name = "ID",
        type_ = "string",
        json_path = ".status.providerID",
        priority = 1
    ),
    printcolumn(
        name = "NodePool",
        type_ = "string",
        json_path = ".metadata.labels.karpenter\\.sh/nodepool",
        priority = 1
    ),
    printcolumn(
        name = "NodeClass",
        type_ = "string",
        json_path = ".spec.nodeClassRef.name",
        priority = 1
    ),
    printcolumn(
        name = "Drifted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Drifted\")].status",
        priority = 1
    ),
    doc = "NodeClaim is the Schema for the NodeClaims API"
)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimSpec {
    /// Taints the node gets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints present at startup and removed by something else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// Requirements the launched instance must meet (at most 100).
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// Resources the node must be able to hold.
    #[serde(default, skip_serializing_if = "ResourceRequirements::is_empty")]
    pub resources: ResourceRequirements,
    /// The provider's NodeClass.
    pub node_class_ref: NodeClassReference,
    /// How long draining may take before pods are deleted regardless of PDBs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<Duration>,
    /// Node lifetime before it is replaced (default `720h`; `Never` disables).
    #[serde(default = "default_expire_after")]
    pub expire_after: NillableDuration,
}

/// `spec.resources`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    /// Minimum resources the node must offer to the claim's pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
}

impl ResourceRequirements {
    /// Whether no request is set.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// `NodeClaim.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// Name of the Node that registered for this claim.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    /// The provider's instance ID (`aws:///us-east-1a/i-0123…`).
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "String::is_empty"
    )]
    pub provider_id: String,
    /// The image the node runs.
    #[serde(default, rename = "imageID", skip_serializing_if = "String::is_empty")]
    pub image_id: String,
    /// Estimated full capacity of the node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    /// Estimated allocatable capacity of the node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, Quantity>,
    /// Conditions (see [`ConditionType`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Last time a pod was scheduled to or removed from the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<Time>,
}

/// NodeClaim condition types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConditionType {
    /// The provider created the instance.
    Launched,
    /// A Node registered for the claim.
    Registered,
    /// The node is ready, startup taints are gone and resources are reported.
    Initialized,
    /// Root condition: Launched, Registered and Initialized are all true.
    Ready,
    /// The node no longer matches its NodePool or NodeClass.
    Drifted,
    /// The node may be consolidated (consolidateAfter has passed since the last pod event).
    Consolidatable,
    /// Pods were drained during termination.
    Drained,
    /// Volume attachments were removed during termination.
    VolumesDetached,
    /// The provider is terminating the instance.
    InstanceTerminating,
    /// The claim and its node agree with each other.
    ConsistentStateFound,
    /// Why the claim is being disrupted.
    DisruptionReason,
}

impl ConditionType {
    /// Every type, in declaration order.
    pub const ALL: [ConditionType; 11] = [
        Self::Launched,
        Self::Registered,
        Self::Initialized,
        Self::Ready,
        Self::Drifted,
        Self::Consolidatable,
        Self::Drained,
        Self::VolumesDetached,
        Self::InstanceTerminating,
        Self::ConsistentStateFound,
        Self::DisruptionReason,
    ];

    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Launched => "Launched",
            Self::Registered => "Registered",
            Self::Initialized => "Initialized",
            Self::Ready => "Ready",
            Self::Drifted => "Drifted",
            Self::Consolidatable => "Consolidatable",
            Self::Drained => "Drained",
            Self::VolumesDetached => "VolumesDetached",
            Self::InstanceTerminating => "InstanceTerminating",
            Self::ConsistentStateFound => "ConsistentStateFound",
            Self::DisruptionReason => "DisruptionReason",
        }
    }

    /// Parses the API spelling.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

impl std::fmt::Display for ConditionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AsRef<str> for ConditionType {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

crate::status_conditions!(
    NodeClaim,
    NodeClaimStatus,
    &["Launched", "Registered", "Initialized"]
);

impl NodeClaim {
    /// The name, empty if unset.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    /// The provider ID, empty before launch.
    pub fn provider_id(&self) -> &str {
        self.status.as_ref().map_or("", |s| s.provider_id.as_str())
    }

    /// The node name, empty before registration.
    pub fn node_name(&self) -> &str {
        self.status.as_ref().map_or("", |s| s.node_name.as_str())
    }

    /// The owning NodePool (its `karpenter.sh/nodepool` label).
    pub fn node_pool(&self) -> Option<&str> {
        self.label(super::labels::NODEPOOL)
    }

    /// A label value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .map(String::as_str)
    }

    /// An annotation value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }

    /// Whether the claim is being deleted.
    pub fn is_deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    /// Whether the typed condition is `True`.
    pub fn is(&self, t: ConditionType) -> bool {
        self.is_true(t.as_str())
    }

    /// The typed condition, if set.
    pub fn get_condition(&self, t: ConditionType) -> Option<&Condition> {
        self.condition(t.as_str())
    }
}
