//! What a failed launch leads to, decided once for the controller and the simulator.
//!
//! Upstream's launch controller (`pkg/controllers/nodeclaim/lifecycle/launch.go`) deletes
//! the NodeClaim when the provider had no capacity (its pods are planned again, the
//! offerings tried now reported unavailable) or when the NodeClass is not ready, and counts
//! both as `karpenter_nodeclaims_disrupted_total` with reasons `insufficient_capacity` and
//! `nodeclass_not_ready`. Any other error keeps the claim, sets `Launched=Unknown` with the
//! provider's condition reason (`LaunchFailed` when it gave none) and retries the launch
//! with backoff; the launch timeout of [`crate::registration::next_step`] ends the retries.

use karpenter_cloudprovider::CloudProviderError;

/// A launch error as the policy distinguishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchErrorKind {
    /// No capacity for any offering tried.
    InsufficientCapacity,
    /// The claim's NodeClass is not ready.
    NodeClassNotReady,
    /// The provider refused the launch and named the condition reason (upstream's
    /// `CreateError`).
    Create {
        /// CamelCase reason for the `Launched` condition.
        reason: String,
    },
    /// Anything else: API errors, throttling, an instance not found.
    Other,
}

impl LaunchErrorKind {
    /// The kind of a provider's launch error.
    pub fn of(error: &CloudProviderError) -> Self {
        match error {
            CloudProviderError::InsufficientCapacity { .. } => Self::InsufficientCapacity,
            CloudProviderError::NodeClassNotReady { .. } => Self::NodeClassNotReady,
            CloudProviderError::Create { reason, .. } => Self::Create {
                reason: reason.clone(),
            },
            CloudProviderError::NotFound { .. } | CloudProviderError::Other(_) => Self::Other,
        }
    }
}

/// Why a failed launch deletes its NodeClaim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LaunchDeletion {
    /// The provider had no capacity.
    InsufficientCapacity,
    /// The NodeClass was not ready.
    NodeClassNotReady,
}

impl LaunchDeletion {
    /// The reason of the Warning event on the claim (`InsufficientCapacity`,
    /// `NodeClassNotReady`).
    pub fn event_reason(self) -> &'static str {
        match self {
            Self::InsufficientCapacity => "InsufficientCapacity",
            Self::NodeClassNotReady => "NodeClassNotReady",
        }
    }

    /// Upstream's `reason` label of `karpenter_nodeclaims_disrupted_total`.
    pub fn metric_reason(self) -> &'static str {
        match self {
            Self::InsufficientCapacity => "insufficient_capacity",
            Self::NodeClassNotReady => "nodeclass_not_ready",
        }
    }

    /// Whether the provider now reports offerings unavailable, so instance types must be
    /// read again before the pods are planned again (or they would land on the same
    /// offerings).
    pub fn offerings_changed(self) -> bool {
        self == Self::InsufficientCapacity
    }
}

/// What to do after a launch failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterLaunchFailure {
    /// Delete the NodeClaim; its pods are planned again.
    DeleteClaim(LaunchDeletion),
    /// Keep the claim, set `Launched=Unknown` with `condition_reason` and the error as
    /// message, and launch again on a later reconcile (with backoff).
    Retry {
        /// Reason of the `Launched` condition and of the Warning event.
        condition_reason: String,
    },
}

impl AfterLaunchFailure {
    /// The reason of the Warning event published for the failure.
    pub fn event_reason(&self) -> &str {
        match self {
            Self::DeleteClaim(d) => d.event_reason(),
            Self::Retry { condition_reason } => condition_reason,
        }
    }
}

/// The `Launched` condition reason when the provider names none.
pub const LAUNCH_FAILED: &str = "LaunchFailed";

/// Upstream's launch-failure policy: capacity and NodeClass errors delete the claim,
/// everything else is retried.
pub fn after_launch_failure(kind: &LaunchErrorKind) -> AfterLaunchFailure {
    match kind {
        LaunchErrorKind::InsufficientCapacity => {
            AfterLaunchFailure::DeleteClaim(LaunchDeletion::InsufficientCapacity)
        }
        LaunchErrorKind::NodeClassNotReady => {
            AfterLaunchFailure::DeleteClaim(LaunchDeletion::NodeClassNotReady)
        }
        LaunchErrorKind::Create { reason } if !reason.is_empty() => AfterLaunchFailure::Retry {
            condition_reason: reason.clone(),
        },
        LaunchErrorKind::Create { .. } | LaunchErrorKind::Other => AfterLaunchFailure::Retry {
            condition_reason: LAUNCH_FAILED.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(error: CloudProviderError) -> AfterLaunchFailure {
        after_launch_failure(&LaunchErrorKind::of(&error))
    }

    #[test]
    fn capacity_and_node_class_errors_delete_the_claim() {
        let ice = decide(CloudProviderError::InsufficientCapacity {
            offerings: Vec::new(),
            message: "none".into(),
        });
        assert_eq!(
            ice,
            AfterLaunchFailure::DeleteClaim(LaunchDeletion::InsufficientCapacity)
        );
        assert_eq!(ice.event_reason(), "InsufficientCapacity");
        let not_ready = decide(CloudProviderError::NodeClassNotReady {
            name: "default".into(),
            reason: "no subnets".into(),
        });
        assert_eq!(
            not_ready,
            AfterLaunchFailure::DeleteClaim(LaunchDeletion::NodeClassNotReady)
        );
        assert_eq!(not_ready.event_reason(), "NodeClassNotReady");
        assert!(LaunchDeletion::InsufficientCapacity.offerings_changed());
        assert!(!LaunchDeletion::NodeClassNotReady.offerings_changed());
        assert_eq!(
            LaunchDeletion::InsufficientCapacity.metric_reason(),
            "insufficient_capacity"
        );
        assert_eq!(
            LaunchDeletion::NodeClassNotReady.metric_reason(),
            "nodeclass_not_ready"
        );
    }

    #[test]
    fn other_errors_are_retried_with_the_providers_reason() {
        assert_eq!(
            decide(CloudProviderError::Create {
                reason: "InvalidLaunchTemplate".into(),
                message: "bad".into(),
            }),
            AfterLaunchFailure::Retry {
                condition_reason: "InvalidLaunchTemplate".into()
            }
        );
        for error in [
            CloudProviderError::Create {
                reason: String::new(),
                message: "bad".into(),
            },
            CloudProviderError::Other("RequestLimitExceeded".into()),
            CloudProviderError::NotFound {
                provider_id: "aws:///i-1".into(),
            },
        ] {
            let step = decide(error);
            assert_eq!(
                step,
                AfterLaunchFailure::Retry {
                    condition_reason: LAUNCH_FAILED.into()
                }
            );
            assert_eq!(step.event_reason(), LAUNCH_FAILED);
        }
    }
}
