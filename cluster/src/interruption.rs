//! Interruption notices: what the cloud said is about to happen to a NodeClaim's instance
//! (a spot interruption, a scheduled change, a failed status check …).
//!
//! Both drivers hand notices to the index ([`crate::ClusterState::record_interruption`]):
//! the controller from its provider's interruption queue, the simulator from a scenario's
//! interrupt event. The index fills each node's `NodeInfo::interruption` from them, and the
//! NodeClaim is then deleted by disruption's forceful path in the next tick, the only place
//! an interruption deletes anything. A notice is forgotten with its NodeClaim.

use karpenter_disruption::InterruptionKind;
use karpenter_scheduling::model::Millis;

/// One notice about one NodeClaim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notice {
    /// What the provider reported.
    pub kind: InterruptionKind,
    /// When the driver received it (its clock, Unix milliseconds).
    pub received_at: Millis,
}

impl Notice {
    /// Whether `next`, received after `self` about the same NodeClaim, replaces it: only a
    /// notice that replaces the node supersedes one that does not (a spot interruption
    /// after a rebalance recommendation). Otherwise the first notice stands, so its receipt
    /// time is not moved by repeats.
    pub fn superseded_by(&self, next: &Notice) -> bool {
        !self.kind.triggers_replacement() && next.kind.triggers_replacement()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(kind: InterruptionKind, at: Millis) -> Notice {
        Notice {
            kind,
            received_at: at,
        }
    }

    #[test]
    fn a_replacing_notice_supersedes_a_rebalance_only() {
        let rebalance = notice(InterruptionKind::RebalanceRecommendation, 1);
        let spot = notice(InterruptionKind::SpotInterruption, 2);
        assert!(rebalance.superseded_by(&spot));
        assert!(!spot.superseded_by(&rebalance));
        assert!(!spot.superseded_by(&notice(InterruptionKind::InstanceStopped, 3)));
        assert!(!rebalance.superseded_by(&rebalance));
    }
}
