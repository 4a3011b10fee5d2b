//! The contract between karpenter-rs and a cloud: launch, delete and look up instances for
//! NodeClaims, list what a NodePool can launch, and report drift.

use crate::v1::{ConditionStatus, NodeClaim, NodePool};
use karpenter_scheduling::InstanceType;
use std::fmt;
use std::sync::Arc;

/// One offering a launch could not get (instance type, zone, capacity type).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OfferingRef {
    /// Instance type name (`m5.large`).
    pub instance_type: String,
    /// Zone (`us-east-1a`).
    pub zone: String,
    /// `spot`, `on-demand` or `reserved`.
    pub capacity_type: String,
}

impl fmt::Display for OfferingRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}",
            self.instance_type, self.zone, self.capacity_type
        )
    }
}

/// Why a provider call failed. Callers branch on the variant: `NotFound` means the instance
/// is gone (finalizers may be removed), `InsufficientCapacity` means retry elsewhere and mark
/// the offerings unavailable, `NodeClassNotReady` means wait for the NodeClass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloudProviderError {
    /// The instance (by provider ID or NodeClaim name) does not exist.
    #[error("nodeclaim not found: {provider_id}")]
    NotFound {
        /// The provider ID or NodeClaim name looked up.
        provider_id: String,
    },
    /// No capacity for any of the offerings tried.
    #[error("insufficient capacity: {message}")]
    InsufficientCapacity {
        /// The offerings that had no capacity.
        offerings: Vec<OfferingRef>,
        /// The provider's message.
        message: String,
    },
    /// The NodeClass the NodeClaim refers to is not ready.
    #[error("nodeclass {name:?} not ready: {reason}")]
    NodeClassNotReady {
        /// NodeClass name.
        name: String,
        /// Why it is not ready.
        reason: String,
    },
    /// Launch failed for another reason (reported in the NodeClaim's Launched condition).
    #[error("creating instance failed ({reason}): {message}")]
    Create {
        /// A CamelCase reason for the `Launched=False` condition.
        reason: String,
        /// Details.
        message: String,
    },
    /// Anything else (API errors, throttling …).
    #[error("{0}")]
    Other(String),
}

impl CloudProviderError {
    /// The `error` label of `karpenter_cloudprovider_errors_total`, as Karpenter names it
    /// (empty for errors without a dedicated type).
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "NodeClaimNotFoundError",
            Self::InsufficientCapacity { .. } => "InsufficientCapacityError",
            Self::NodeClassNotReady { .. } => "NodeClassNotReadyError",
            Self::Create { .. } | Self::Other(_) => "",
        }
    }

    /// Whether this is [`CloudProviderError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// Whether this is [`CloudProviderError::InsufficientCapacity`].
    pub fn is_insufficient_capacity(&self) -> bool {
        matches!(self, Self::InsufficientCapacity { .. })
    }
}

/// Why a NodeClaim has drifted from its NodeClass (`AMIDrift`, `SecurityGroupDrift` …).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DriftReason(pub String);

impl DriftReason {
    /// A reason.
    pub fn new(reason: impl Into<String>) -> Self {
        Self(reason.into())
    }

    /// The reason text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DriftReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a repair policy asks for (upstream's `RepairAction`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum RepairAction {
    /// Replace the node (the only action karpenter-rs carries out).
    #[default]
    ReplaceNode,
    /// Reboot the instance in place (upstream's `RebootForRepair`; karpenter-rs replaces
    /// such nodes instead, and says so at start-up).
    RebootNode,
}

/// A node condition that, held for `toleration_duration`, makes the node unhealthy enough to
/// be repaired (node auto-repair), with Karpenter v1.15's refinements: the condition's reason,
/// a drain bound, a priority and an action.
///
/// A provider's policies form a set: among the policies for one condition type and status,
/// those with a `reason_regex` apply to the reasons they match, and the set's one policy
/// without a regex (its fallback) applies to a covered condition whose reason none matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepairPolicy {
    /// Node condition type (`Ready`, `KernelReady` …).
    pub condition_type: String,
    /// The unhealthy status.
    pub condition_status: ConditionStatus,
    /// How long the condition must hold before the node is repaired.
    pub toleration_duration: std::time::Duration,
    /// A regular expression matched against the condition's reason (anywhere in it, as Go's
    /// `regexp.MatchString`); `None` marks the set's fallback.
    pub reason_regex: Option<String>,
    /// The drain bound of a repair under this policy: `None` keeps the NodeClaim's own
    /// `terminationGracePeriod`; otherwise the shorter of the two bounds the drain, and zero
    /// drains forcefully.
    pub termination_grace_period: Option<std::time::Duration>,
    /// 0–100: policies of a higher priority repair first.
    pub priority: u8,
    /// What to do.
    pub action: RepairAction,
}

impl RepairPolicy {
    /// A policy replacing a node whose `condition_type` has had `condition_status` for
    /// `toleration`, whatever the reason (a fallback), with the NodeClaim's own drain bound.
    pub fn replace(
        condition_type: impl Into<String>,
        condition_status: ConditionStatus,
        toleration: std::time::Duration,
    ) -> Self {
        Self {
            condition_type: condition_type.into(),
            condition_status,
            toleration_duration: toleration,
            reason_regex: None,
            termination_grace_period: None,
            priority: 0,
            action: RepairAction::ReplaceNode,
        }
    }

    /// The same policy for the reasons `regex` matches.
    pub fn for_reasons(mut self, regex: impl Into<String>) -> Self {
        self.reason_regex = Some(regex.into());
        self
    }

    /// The same policy bounding the drain by `bound`.
    pub fn drain_bound(mut self, bound: std::time::Duration) -> Self {
        self.termination_grace_period = Some(bound);
        self
    }
}

/// A cloud provider. Implementations must be safe to call concurrently; every method is
/// idempotent from the caller's point of view (`delete` of a missing instance returns
/// `NotFound`, which callers treat as success).
#[async_trait::async_trait]
pub trait CloudProvider: Send + Sync {
    /// Launches an instance for `node_claim` and returns the claim with its status filled:
    /// provider ID, image ID, capacity, allocatable, and labels for instance type, zone and
    /// capacity type.
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError>;
    /// Terminates the claim's instance; `NotFound` once it is gone.
    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError>;
    /// Looks up an instance by provider ID, as a NodeClaim.
    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError>;
    /// Every instance this provider manages, as NodeClaims (for garbage collection).
    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError>;
    /// The instance types `node_pool` may launch, with their offerings and prices.
    ///
    /// Reserved capacity: a provider publishes each capacity reservation the pool may use
    /// as an offering with capacity type `reserved`, the reservation's zone, a price below
    /// every other offering of the type (Karpenter's AWS provider: on-demand / 10,000,000),
    /// `available` false once it has no instance left, and
    /// [`Offering::reservation`](karpenter_scheduling::Offering::reservation) set (its id, the
    /// node label that carries the id, the instances it can still take after those already
    /// launched, further node labels); `reserved` belongs among the type's capacity-type
    /// requirement values. With Karpenter's `ReservedCapacity` gate off it publishes none.
    /// `create` must then launch a claim whose requirements name reservation ids into one of
    /// them, label the node with the id, and fail with `InsufficientCapacity` when they
    /// are full.
    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError>;
    /// Whether the claim's instance no longer matches its NodeClass, and why.
    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<DriftReason>, CloudProviderError>;
    /// Node conditions that trigger auto-repair; empty disables repair.
    fn repair_policies(&self) -> Vec<RepairPolicy>;
    /// The provider's name (`aws`, `fake`), used in metrics.
    fn name(&self) -> &str;
}

#[async_trait::async_trait]
impl<P: CloudProvider + ?Sized> CloudProvider for Arc<P> {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        (**self).create(node_claim).await
    }
    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        (**self).delete(node_claim).await
    }
    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        (**self).get(provider_id).await
    }
    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        (**self).list().await
    }
    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        (**self).instance_types(node_pool).await
    }
    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<DriftReason>, CloudProviderError> {
        (**self).is_drifted(node_claim).await
    }
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        (**self).repair_policies()
    }
    fn name(&self) -> &str {
        (**self).name()
    }
}
