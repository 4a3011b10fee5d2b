//! Karpenter v1.15's repair policy matching (upstream's `RepairPolicyMatcher` and
//! `Resolve`): which of the provider's repair policies a node's conditions match, and the
//! repair decision they add up to at an instant — what node repair as a disruption method
//! ([`karpenter_disruption::NodeInfo::repair`]) acts on.
//!
//! Among the policies for one condition type and status, those with a reason regex apply to
//! the reasons they match; a covered condition whose reason none matches falls to the set's
//! one fallback (the policy without a regex). A policy becomes eligible its toleration after
//! the condition's last transition (never before the Node's creation). The decision merges
//! the eligible policies: the shortest drain bound, and a score — the dense rank of the
//! priority plus the time since eligibility in units of [`AGING_MS`] — that orders repairs.

use crate::{ClusterState, Kubelet, NodeCondition};
use karpenter_cloudprovider::v1::ConditionStatus;
use karpenter_cloudprovider::{RepairAction, RepairPolicy};
use karpenter_disruption::{DisruptionInput, RepairNeed};
use karpenter_scheduling::model::Millis;
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};

/// Upstream's `agingConstant`: waiting this long past toleration earns one priority rank.
pub const AGING_MS: Millis = 30 * 60_000;

/// Why a provider's policy set cannot be used (upstream refuses to start node repair).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepairPolicyError {
    /// A policy's reason regex does not compile.
    #[error("repair policy for {condition}={status}: invalid reason regex {regex:?}: {error}")]
    Regex {
        /// Condition type.
        condition: String,
        /// Condition status.
        status: String,
        /// The regex.
        regex: String,
        /// The parser's complaint.
        error: String,
    },
    /// The set has no fallback, or more than one.
    #[error(
        "repair policy set must define exactly one default fallback (a policy without a reason regex), found {0}"
    )]
    Fallbacks(usize),
    /// The fallback does not replace.
    #[error("the default fallback repair policy must replace the node")]
    FallbackAction,
    /// A priority outside 0–100.
    #[error("repair policy for {0} has a priority above 100")]
    Priority(String),
}

fn status_text(s: ConditionStatus) -> &'static str {
    match s {
        ConditionStatus::True => "True",
        ConditionStatus::False => "False",
        ConditionStatus::Unknown => "Unknown",
    }
}

/// A provider's policies, validated and compiled.
#[derive(Debug, Clone)]
pub struct RepairMatcher {
    /// (condition type, status) → the policies with a regex for it.
    groups: BTreeMap<(String, &'static str), Vec<(Regex, RepairPolicy)>>,
    fallback: RepairPolicy,
    /// Priority → dense rank.
    ranks: BTreeMap<u8, u32>,
}

impl RepairMatcher {
    /// Validates and compiles `policies` as upstream does: one fallback, which replaces;
    /// priorities in 0–100; compilable regexes.
    pub fn new(policies: &[RepairPolicy]) -> Result<Self, RepairPolicyError> {
        let mut groups: BTreeMap<(String, &'static str), Vec<(Regex, RepairPolicy)>> =
            BTreeMap::new();
        let mut fallbacks = Vec::new();
        for p in policies {
            let key = (p.condition_type.clone(), status_text(p.condition_status));
            if p.priority > 100 {
                return Err(RepairPolicyError::Priority(p.condition_type.clone()));
            }
            let specific = groups.entry(key).or_default();
            match &p.reason_regex {
                None => fallbacks.push(p.clone()),
                Some(re) => {
                    let compiled = Regex::new(re).map_err(|e| RepairPolicyError::Regex {
                        condition: p.condition_type.clone(),
                        status: status_text(p.condition_status).to_owned(),
                        regex: re.clone(),
                        error: e.to_string(),
                    })?;
                    specific.push((compiled, p.clone()));
                }
            }
        }
        let [fallback] = <[RepairPolicy; 1]>::try_from(fallbacks)
            .map_err(|all| RepairPolicyError::Fallbacks(all.len()))?;
        if fallback.action != RepairAction::ReplaceNode {
            return Err(RepairPolicyError::FallbackAction);
        }
        let priorities: BTreeSet<u8> = policies.iter().map(|p| p.priority).collect();
        let ranks = priorities
            .into_iter()
            .enumerate()
            .map(|(rank, p)| (p, rank as u32))
            .collect();
        Ok(Self {
            groups,
            fallback,
            ranks,
        })
    }

    /// Whether a policy covers `c` (its type and status), whatever its reason and toleration:
    /// such a node counts as unhealthy for repair's circuit breaker.
    pub fn covers(&self, c: &NodeCondition) -> bool {
        self.groups
            .keys()
            .any(|(t, s)| *t == c.type_ && *s == c.status)
    }

    /// The policies `c` matches: those of its group whose regex matches its reason, else the
    /// fallback.
    fn matching(&self, c: &NodeCondition) -> Vec<&RepairPolicy> {
        let Some((_, specific)) = self
            .groups
            .iter()
            .find(|((t, s), _)| *t == c.type_ && *s == c.status)
        else {
            return Vec::new();
        };
        let hits: Vec<&RepairPolicy> = specific
            .iter()
            .filter(|(re, _)| re.is_match(&c.reason))
            .map(|(_, p)| p)
            .collect();
        if hits.is_empty() {
            vec![&self.fallback]
        } else {
            hits
        }
    }

    /// The repair `conditions` call for at `now` on a Node created at `created_at`, or
    /// `None` while no matching policy's toleration has passed. Every action is a
    /// replacement here: karpenter-rs does not reboot (`RebootForRepair` is named at
    /// start-up when set).
    pub fn resolve(
        &self,
        conditions: &[NodeCondition],
        created_at: Millis,
        now: Millis,
    ) -> Option<RepairNeed> {
        // (score, eligible at, priority, condition, reason, bound)
        let mut best: Option<RepairNeed> = None;
        let mut selected: Option<(u8, Millis, String)> = None;
        let mut bound: Option<(Millis, Millis, String)> = None;
        let mut score = f64::NEG_INFINITY;
        for c in conditions {
            // A condition cannot predate its Node.
            let since = c.since.max(created_at);
            for p in self.matching(c) {
                let toleration =
                    i64::try_from(p.toleration_duration.as_millis()).unwrap_or(i64::MAX);
                let eligible_at = since.saturating_add(toleration);
                if eligible_at > now {
                    continue;
                }
                let rank = f64::from(self.ranks.get(&p.priority).copied().unwrap_or(0));
                score = score.max(rank + (now - eligible_at) as f64 / AGING_MS as f64);
                if let Some(tgp) = p.termination_grace_period {
                    let tgp = i64::try_from(tgp.as_millis()).unwrap_or(i64::MAX);
                    let shorter = bound
                        .as_ref()
                        .is_none_or(|(b, at, t)| (tgp, eligible_at, &c.type_) < (*b, *at, t));
                    if shorter {
                        bound = Some((tgp, eligible_at, c.type_.clone()));
                    }
                }
                // The selected policy: higher priority, then earlier eligibility, then the
                // lower condition type (every action here is the same, a replacement).
                let better = selected.as_ref().is_none_or(|(pr, at, t)| {
                    (std::cmp::Reverse(p.priority), eligible_at, &c.type_)
                        < (std::cmp::Reverse(*pr), *at, t)
                });
                if better {
                    selected = Some((p.priority, eligible_at, c.type_.clone()));
                    best = Some(RepairNeed {
                        condition: c.type_.clone(),
                        reason: c.reason.clone(),
                        score: 0.0,
                        termination_grace_period: None,
                    });
                }
            }
        }
        let mut need = best?;
        need.score = score;
        need.termination_grace_period = bound.map(|(b, _, _)| b);
        Some(need)
    }
}

/// Fills in what node repair needs about each managed node of `input` from `index` at
/// `now`: the repair its conditions call for, whether it counts as unhealthy, and
/// `karpenter.sh/do-not-repair` on its Node (the NodeClaim's is read with the claim).
pub fn annotate(
    input: &mut DisruptionInput,
    index: &ClusterState,
    matcher: &RepairMatcher,
    now: Millis,
) {
    for (name, info) in &mut input.nodes {
        let Some(record) = index.nodes().get(name) else {
            continue;
        };
        let Kubelet::Joined { conditions, .. } = &record.kubelet else {
            continue;
        };
        info.unhealthy = conditions.iter().any(|c| matcher.covers(c));
        info.repair = matcher.resolve(conditions, record.node.created_at, now);
        info.do_not_repair |= record
            .node
            .annotations
            .get(karpenter_disruption::input::DO_NOT_REPAIR)
            .is_some_and(|v| v == "true");
    }
}

/// When `index`'s nodes next become eligible for repair after `now`: a pass cannot decide
/// repair differently before that unless the index changes.
pub fn next_eligible(index: &ClusterState, matcher: &RepairMatcher, now: Millis) -> Option<Millis> {
    let mut next: Option<Millis> = None;
    for record in index.nodes().values() {
        let Kubelet::Joined { conditions, .. } = &record.kubelet else {
            continue;
        };
        for c in conditions {
            for p in matcher.matching(c) {
                let toleration =
                    i64::try_from(p.toleration_duration.as_millis()).unwrap_or(i64::MAX);
                let at = c
                    .since
                    .max(record.node.created_at)
                    .saturating_add(toleration);
                if at > now {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            }
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MIN: Millis = 60_000;

    fn condition(type_: &str, status: &str, reason: &str, since: Millis) -> NodeCondition {
        NodeCondition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            since,
        }
    }

    /// AWS v1.15.1's GPU policies and a Ready one.
    fn policies() -> Vec<RepairPolicy> {
        let gpu = "AcceleratedHardwareReady";
        vec![
            RepairPolicy::replace("Ready", ConditionStatus::False, Duration::from_secs(1800))
                .for_reasons(".*")
                .drain_bound(Duration::from_secs(600)),
            RepairPolicy::replace(gpu, ConditionStatus::False, Duration::from_secs(600))
                .for_reasons(".*XID(64|74|79).*")
                .drain_bound(Duration::from_secs(300)),
            RepairPolicy::replace(gpu, ConditionStatus::False, Duration::from_secs(1800))
                .drain_bound(Duration::from_secs(600)),
        ]
    }

    #[test]
    fn a_reason_picks_its_policy_and_others_fall_back() {
        let m = RepairMatcher::new(&policies()).unwrap();
        let fatal = [condition(
            "AcceleratedHardwareReady",
            "False",
            "GPUXID79",
            0,
        )];
        assert!(m.resolve(&fatal, 0, 10 * MIN - 1).is_none());
        let need = m.resolve(&fatal, 0, 10 * MIN).unwrap();
        assert_eq!(need.condition, "AcceleratedHardwareReady");
        assert_eq!(need.termination_grace_period, Some(5 * MIN));
        // An unknown XID takes the fallback: 30 minutes, a 10-minute drain.
        let other = [condition(
            "AcceleratedHardwareReady",
            "False",
            "GPUXID13",
            0,
        )];
        assert!(m.resolve(&other, 0, 29 * MIN).is_none());
        assert_eq!(
            m.resolve(&other, 0, 30 * MIN)
                .unwrap()
                .termination_grace_period,
            Some(10 * MIN)
        );
        // A condition of a status no policy covers is healthy.
        let fine = [condition("Ready", "True", "", 0)];
        assert!(!m.covers(&fine[0]) && m.resolve(&fine, 0, 100 * MIN).is_none());
        assert!(m.covers(&other[0]));
    }

    #[test]
    fn the_shortest_bound_wins_and_the_score_ages() {
        let m = RepairMatcher::new(&policies()).unwrap();
        let both = [
            condition("Ready", "False", "KubeletNotReady", 0),
            condition("AcceleratedHardwareReady", "False", "GPUXID79", 20 * MIN),
        ];
        let need = m.resolve(&both, 0, 30 * MIN).unwrap();
        assert_eq!(need.termination_grace_period, Some(5 * MIN));
        // Ready became eligible at 30 min, the GPU policy at 30 min too: ties by type.
        assert_eq!(need.condition, "AcceleratedHardwareReady");
        let later = m.resolve(&both, 0, 60 * MIN).unwrap();
        assert!((later.score - 1.0).abs() < 1e-9, "{later:?}");
        // A condition cannot predate the node: toleration counts from its creation.
        let old = [condition("Ready", "False", "", 0)];
        assert!(m.resolve(&old, 10 * MIN, 30 * MIN).is_none());
    }

    #[test]
    fn a_set_needs_exactly_one_replacing_fallback() {
        let mut two = policies();
        two.push(RepairPolicy::replace(
            "Ready",
            ConditionStatus::Unknown,
            Duration::from_secs(60),
        ));
        assert_eq!(
            RepairMatcher::new(&two).unwrap_err(),
            RepairPolicyError::Fallbacks(2)
        );
        assert_eq!(
            RepairMatcher::new(&policies()[..2]).unwrap_err(),
            RepairPolicyError::Fallbacks(0)
        );
        let mut bad = policies();
        bad[0].reason_regex = Some("(".into());
        assert!(matches!(
            RepairMatcher::new(&bad),
            Err(RepairPolicyError::Regex { .. })
        ));
    }
}
