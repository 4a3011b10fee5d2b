//! Why a NodeClaim is deleted: the cause every [`Action::DeleteNodeClaim`] carries.
//!
//! The spelling ([`DeletionCause::as_str`]) reaches users as the `reason` of logs, of the
//! `DisruptionTerminating` events and of `karpenter_nodeclaims_disrupted_total`: it is an
//! interface and keeps upstream's strings.
//!
//! [`Action::DeleteNodeClaim`]: crate::Action::DeleteNodeClaim

use karpenter_disruption::{InterruptionKind, Reason};
use std::fmt;

/// Why a NodeClaim is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeletionCause {
    /// A disruption command decided it (emptiness, drift, consolidation, expiry, node
    /// repair). Spelled as the API spells the reason (`Underutilized`, `Expired` …).
    Disruption(Reason),
    /// Disruption's forceful interruption command, for the notice of this kind the index
    /// holds ([`crate::ClusterState::record_interruption`]). Spelled as upstream's
    /// interruption controller labels `karpenter_nodeclaims_disrupted_total`: the message
    /// kind (`spot_interrupted`, `scheduled_change` …). Announced with upstream's
    /// `TerminatingOnInterruption` events rather than `DisruptionTerminating`.
    Interruption(InterruptionKind),
    /// Its Node was deleted out of band: termination takes the NodeClaim with it. Not a
    /// disruption: nothing is counted or announced as one.
    NodeDeleted,
    /// A static NodePool has more NodeClaims than `replicas`: the user's decision, not a
    /// disruption (upstream deletes the claim without a disruption event or metric).
    Overprovisioned,
    /// Its instance no longer exists at the provider (garbage collection); counted as
    /// upstream's `garbage_collected` disruption.
    GarbageCollected,
    /// The NodeClaim did not launch or register in time (lifecycle gives it up); counted
    /// as a disruption with upstream's snake-case reason.
    LifecycleTimeout(LifecycleTimeout),
    /// Its NodePool was deleted (the simulator's scripted deletion; in a cluster the API
    /// server's garbage collector follows the owner reference instead).
    NodePoolDeleted,
}

impl DeletionCause {
    /// The spelling in logs, events and the metrics' `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disruption(reason) => reason.as_str(),
            Self::Interruption(kind) => kind.as_str(),
            Self::NodeDeleted => "NodeDeleted",
            Self::Overprovisioned => "Overprovisioned",
            Self::GarbageCollected => "garbage_collected",
            Self::LifecycleTimeout(t) => t.metric_reason(),
            Self::NodePoolDeleted => "NodePoolDeleted",
        }
    }

    /// Whether the deletion is announced as a disruption: a `DisruptionTerminating` event
    /// on the NodeClaim and its Node and a `karpenter_nodeclaims_disrupted_total` count.
    /// A Node or NodePool deleted by someone else and a static pool's scale-down are not.
    pub fn is_disruption(self) -> bool {
        match self {
            Self::Disruption(_)
            | Self::Interruption(_)
            | Self::GarbageCollected
            | Self::LifecycleTimeout(_) => true,
            Self::NodeDeleted | Self::Overprovisioned | Self::NodePoolDeleted => false,
        }
    }
}

impl From<Reason> for DeletionCause {
    fn from(reason: Reason) -> Self {
        Self::Disruption(reason)
    }
}

impl fmt::Display for DeletionCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which lifecycle deadline a NodeClaim missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LifecycleTimeout {
    /// The provider did not launch an instance in time.
    Launch,
    /// No Node registered for the launched instance in time.
    Registration,
}

impl LifecycleTimeout {
    /// The reason of the event announcing it (CamelCase, as upstream's).
    pub fn event_reason(self) -> &'static str {
        match self {
            Self::Launch => "LaunchTimeout",
            Self::Registration => "RegistrationTimeout",
        }
    }

    /// Upstream's `reason` label on `karpenter_nodeclaims_disrupted_total` (snake case).
    pub fn metric_reason(self) -> &'static str {
        match self {
            Self::Launch => "launch_timeout",
            Self::Registration => "registration_timeout",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spellings are an interface (logs, event messages, metric labels).
    #[test]
    fn spellings_are_upstreams() {
        let cases = [
            (
                DeletionCause::Disruption(Reason::UNDERUTILIZED),
                "Underutilized",
            ),
            (
                DeletionCause::Disruption(Reason::Interrupted),
                "Interrupted",
            ),
            (
                DeletionCause::Interruption(InterruptionKind::SpotInterruption),
                "spot_interrupted",
            ),
            (DeletionCause::NodeDeleted, "NodeDeleted"),
            (DeletionCause::Overprovisioned, "Overprovisioned"),
            (DeletionCause::GarbageCollected, "garbage_collected"),
            (
                DeletionCause::LifecycleTimeout(LifecycleTimeout::Launch),
                "launch_timeout",
            ),
            (
                DeletionCause::LifecycleTimeout(LifecycleTimeout::Registration),
                "registration_timeout",
            ),
            (DeletionCause::NodePoolDeleted, "NodePoolDeleted"),
        ];
        for (cause, want) in cases {
            assert_eq!(cause.as_str(), want);
            assert_eq!(cause.to_string(), want);
        }
        assert_eq!(LifecycleTimeout::Launch.event_reason(), "LaunchTimeout");
        assert_eq!(
            LifecycleTimeout::Registration.event_reason(),
            "RegistrationTimeout"
        );
    }

    #[test]
    fn only_out_of_band_and_static_deletions_are_not_disruptions() {
        assert!(DeletionCause::Disruption(Reason::Expired).is_disruption());
        assert!(DeletionCause::GarbageCollected.is_disruption());
        let spot = DeletionCause::Interruption(InterruptionKind::SpotInterruption);
        assert!(spot.is_disruption());
        assert!(DeletionCause::LifecycleTimeout(LifecycleTimeout::Registration).is_disruption());
        assert!(!DeletionCause::NodeDeleted.is_disruption());
        assert!(!DeletionCause::Overprovisioned.is_disruption());
        assert!(!DeletionCause::NodePoolDeleted.is_disruption());
    }
}
