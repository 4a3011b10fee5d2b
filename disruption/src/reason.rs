//! Why nodes are disrupted: the API's budget reasons plus the two forceful ones.
//!
//! The NodePool API's [`DisruptionReason`] lists the reasons a budget can pace (`Empty`,
//! `Drifted`, `Underutilized`, `Unhealthy`); upstream's CRD rejects any other budget reason.
//! A decision can also be forceful (expiry, interruption), which no budget limits. [`Reason`]
//! wraps the API enum instead of repeating it, so a budgeted decision carries exactly the
//! reason its budget is looked up by.

use karpenter_cloudprovider::v1::DisruptionReason;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Why nodes are disrupted (upstream's disruption reasons plus the forceful ones).
///
/// Spelled as upstream spells it everywhere (logs, events, the `reason` metric label, the
/// `DisruptionReason` condition, serde): `Empty`, `Drifted`, `Underutilized`, `Unhealthy`,
/// `Expired`, `Interrupted`. Ordered as those six were always ordered (`Empty`, `Drifted`,
/// `Underutilized`, `Expired`, `Interrupted`, `Unhealthy`), so maps keyed by reason print in
/// the same order as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A reason a NodePool disruption budget can be limited to (emptiness, drift,
    /// consolidation, repair).
    Budgeted(DisruptionReason),
    /// `expireAfter` has passed since the NodeClaim was created; forceful, no budget applies.
    Expired,
    /// The cloud provider announced the instance's interruption; forceful, no budget applies.
    Interrupted,
}

/// Every reason, in [`Reason`]'s order.
pub const ALL_REASONS: [Reason; 6] = [
    Reason::Budgeted(DisruptionReason::Empty),
    Reason::Budgeted(DisruptionReason::Drifted),
    Reason::Budgeted(DisruptionReason::Underutilized),
    Reason::Expired,
    Reason::Interrupted,
    Reason::Budgeted(DisruptionReason::Unhealthy),
];

impl Reason {
    /// Only DaemonSet pods run on the node.
    pub const EMPTY: Self = Self::Budgeted(DisruptionReason::Empty);
    /// The node no longer matches its NodePool, or the provider says it drifted.
    pub const DRIFTED: Self = Self::Budgeted(DisruptionReason::Drifted);
    /// Its pods fit elsewhere, or on one cheaper node.
    pub const UNDERUTILIZED: Self = Self::Budgeted(DisruptionReason::Underutilized);
    /// A node condition matched a repair policy past its toleration (node repair as a
    /// disruption method, Karpenter v1.15).
    pub const UNHEALTHY: Self = Self::Budgeted(DisruptionReason::Unhealthy);

    /// The budget reason this reason is paced by; `None` for the forceful reasons (expiry,
    /// interruption), which no budget limits.
    pub fn budget_reason(self) -> Option<DisruptionReason> {
        match self {
            Self::Budgeted(reason) => Some(reason),
            Self::Expired | Self::Interrupted => None,
        }
    }

    /// Whether commands for this reason wait for the validation delay and are re-checked
    /// against a later cluster state before they act. Upstream validates emptiness and
    /// consolidation this way; drift has no validator and acts at once (expiry and
    /// interruption are forceful).
    pub fn waits_for_validation(self) -> bool {
        matches!(self, Self::EMPTY | Self::UNDERUTILIZED)
    }

    /// The API / metrics spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Budgeted(reason) => reason.as_str(),
            Self::Expired => "Expired",
            Self::Interrupted => "Interrupted",
        }
    }

    /// Position in the historical order (see the type's docs).
    fn rank(self) -> u8 {
        match self {
            Self::Budgeted(DisruptionReason::Empty) => 0,
            Self::Budgeted(DisruptionReason::Drifted) => 1,
            Self::Budgeted(DisruptionReason::Underutilized) => 2,
            Self::Expired => 3,
            Self::Interrupted => 4,
            Self::Budgeted(DisruptionReason::Unhealthy) => 5,
        }
    }
}

impl From<DisruptionReason> for Reason {
    fn from(reason: DisruptionReason) -> Self {
        Self::Budgeted(reason)
    }
}

impl PartialOrd for Reason {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Reason {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of the six disruption reasons.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown disruption reason {0:?} (expected Empty, Drifted, Underutilized, Unhealthy, Expired or Interrupted)"
)]
pub struct UnknownReason(pub String);

impl FromStr for Reason {
    type Err = UnknownReason;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ALL_REASONS
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownReason(s.to_string()))
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every spelling that reaches logs, events, metric labels and serde, pinned.
    #[test]
    fn spellings_are_upstreams() {
        let spelled: Vec<&str> = ALL_REASONS.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            spelled,
            [
                "Empty",
                "Drifted",
                "Underutilized",
                "Expired",
                "Interrupted",
                "Unhealthy"
            ]
        );
        for reason in ALL_REASONS {
            assert_eq!(reason.to_string(), reason.as_str());
            let json = serde_json::to_string(&reason).unwrap();
            assert_eq!(json, format!("\"{}\"", reason.as_str()));
            assert_eq!(serde_json::from_str::<Reason>(&json).unwrap(), reason);
            assert_eq!(reason.as_str().parse::<Reason>().unwrap(), reason);
        }
        // A budgeted reason is spelled as the API spells the budget reason.
        for api in [
            DisruptionReason::Empty,
            DisruptionReason::Drifted,
            DisruptionReason::Underutilized,
            DisruptionReason::Unhealthy,
        ] {
            assert_eq!(Reason::from(api).as_str(), api.as_str());
            assert_eq!(
                serde_json::to_string(&Reason::from(api)).unwrap(),
                serde_json::to_string(&api).unwrap()
            );
        }
        let err = serde_json::from_str::<Reason>("\"Consolidated\"").unwrap_err();
        assert!(err.to_string().contains("Consolidated"), "{err}");
    }

    #[test]
    fn order_and_budgets_are_unchanged() {
        let mut sorted = ALL_REASONS;
        sorted.sort();
        assert_eq!(sorted, ALL_REASONS);
        assert_eq!(Reason::Expired.budget_reason(), None);
        assert_eq!(Reason::Interrupted.budget_reason(), None);
        assert_eq!(
            Reason::UNHEALTHY.budget_reason(),
            Some(DisruptionReason::Unhealthy)
        );
        assert!(Reason::EMPTY.waits_for_validation());
        assert!(Reason::UNDERUTILIZED.waits_for_validation());
        assert!(!Reason::DRIFTED.waits_for_validation());
        assert!(!Reason::Expired.waits_for_validation());
    }

    /// Budgets keep rejecting the forceful reasons, as upstream's CRD does.
    #[test]
    fn budgets_reject_forceful_reasons() {
        assert!(serde_json::from_str::<DisruptionReason>("\"Expired\"").is_err());
        assert!(serde_json::from_str::<DisruptionReason>("\"Interrupted\"").is_err());
    }
}
