//! The `Balanced` consolidation policy (upstream Karpenter v1.14, `balanced.go`): a
//! consolidation move that touches a Balanced NodePool is carried out only when it saves
//! enough of the pool's cost for the disruption it causes there.
//!
//! For each Balanced pool of a move:
//!
//! ```text
//! savings fraction    = savings attributed to the pool / cost of every node of the pool
//! disruption fraction = disruption cost of the pool's candidates
//!                       / disruption cost of every node of the pool
//! score               = savings fraction / disruption fraction      approved: score >= 1/k
//! ```
//!
//! with `k` = [`BALANCED_K`] (2). A node's disruption cost is 1 plus the positive eviction
//! costs of its pods ([`node_disruption_cost`]). Both fractions are shares of the same pool,
//! so the score does not depend on the pool's size or on prices' units. A move across several
//! pools gives each pool a share of the savings proportional to the price of its candidates,
//! and is approved only when every Balanced pool approves its share. Pools with any other
//! policy are not scored: their moves are approved exactly as before.
//!
//! Emptiness and drift are never scored (upstream deletes empty nodes of every policy
//! through Emptiness); single-node consolidation skips a candidate of a Balanced pool whose
//! best case — deleting it outright — cannot pass (upstream's `CanPassThreshold`), and
//! both consolidation methods drop moves a Balanced pool rejects (`EvaluateBalancedMove`).

use crate::candidate::{Candidate, node_disruption_cost, pool_of};
use crate::command::{CandidateRef, Decision};
use crate::input::DisruptionInput;
use karpenter_cloudprovider::v1::{BALANCED_K, ConsolidationPolicy};
use karpenter_scheduling::model::Pod;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The denominators of a pool's scores (upstream's `NodePoolTotals`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolTotals {
    /// Hourly price of every Karpenter-managed node of the pool, candidate or not (upstream
    /// reads it from its cluster cost tracker); when that is not positive, the sum of the
    /// candidates' prices.
    pub total_cost: f64,
    /// Disruption cost of every node of the pool, candidate or not.
    pub total_disruption_cost: f64,
}

/// A Balanced pool's verdict on its part of a move (upstream's `ScoreResult`). Only the two
/// fractions and `k` are stored; [`score`](Self::score), [`threshold`](Self::threshold) and
/// [`approved`](Self::approved) follow from them, so the three always agree.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoreResult {
    /// Savings attributed to the pool over the pool's total cost (0 when the pool's totals
    /// are not positive).
    pub savings_fraction: f64,
    /// Disruption cost of the pool's candidates over the pool's total disruption cost (0 when
    /// the pool's totals are not positive).
    pub disruption_fraction: f64,
    /// The policy's `k`.
    pub k: u32,
}

impl ScoreResult {
    /// Savings fraction over disruption fraction: 0 when nothing is saved, +∞ when something
    /// is saved without disruption.
    pub fn score(&self) -> f64 {
        if self.savings_fraction <= 0.0 {
            0.0
        } else if self.disruption_fraction == 0.0 {
            f64::INFINITY
        } else {
            self.savings_fraction / self.disruption_fraction
        }
    }

    /// `1 / k` (`k` of 0 is read as 1, so the threshold is never infinite).
    pub fn threshold(&self) -> f64 {
        1.0 / f64::from(self.k.max(1))
    }

    /// `score >= threshold`. A NaN anywhere rejects.
    pub fn approved(&self) -> bool {
        self.score() >= self.threshold()
    }

    /// The message upstream's `ConsolidationApproved` event carries for this score.
    pub fn approved_message(&self) -> String {
        format!(
            "score {:.2} >= threshold {:.2} (k: {}, savings {:.1}%, disruption {:.1}%)",
            self.score(),
            self.threshold(),
            self.k,
            self.savings_fraction * 100.0,
            self.disruption_fraction * 100.0
        )
    }
}

/// Upstream's `ScoreMove`: scores a move saving `savings` per hour and causing
/// `disruption_cost` in a pool with `totals`. Totals that are not positive leave nothing to
/// compare against: both fractions are 0 and the move is rejected.
pub fn score_move(savings: f64, disruption_cost: f64, totals: PoolTotals, k: u32) -> ScoreResult {
    // Written as negations so that NaN totals also take the "nothing to compare" branch.
    if !(totals.total_cost > 0.0 && totals.total_disruption_cost > 0.0) {
        return ScoreResult {
            savings_fraction: 0.0,
            disruption_fraction: 0.0,
            k,
        };
    }
    ScoreResult {
        savings_fraction: savings / totals.total_cost,
        disruption_fraction: disruption_cost / totals.total_disruption_cost,
        k,
    }
}

/// Upstream's `computeNodePoolTotals`, for every pool with at least one of `candidates`
/// (the pass's candidates before any method's filter). Every node of the snapshot counts in
/// its pool's disruption total — a candidate with its reschedule cost, any other node with 1
/// plus the positive eviction costs of its non-DaemonSet pods — and every Karpenter-managed
/// node in its pool's cost.
pub fn pool_totals(
    input: &DisruptionInput,
    candidates: &[Candidate],
) -> BTreeMap<String, PoolTotals> {
    let mut totals: BTreeMap<String, PoolTotals> = BTreeMap::new();
    let mut candidate_cost: BTreeMap<&str, f64> = BTreeMap::new();
    let mut fallback: BTreeMap<&str, f64> = BTreeMap::new();
    for c in candidates {
        totals.entry(c.node_pool.clone()).or_default();
        candidate_cost.insert(c.node.as_str(), c.reschedule_cost);
        *fallback.entry(c.node_pool.as_str()).or_default() += c.price;
    }
    let mut pods_of: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for p in &input.cluster.bound_pods {
        if let Some(n) = p.node_name.as_deref()
            && !p.is_daemon()
        {
            pods_of.entry(n).or_default().push(p);
        }
    }
    for node in &input.cluster.nodes {
        let Some(t) = pool_of(node).and_then(|p| totals.get_mut(p)) else {
            continue;
        };
        let disruption = match candidate_cost.get(node.name.as_str()) {
            Some(&cost) => cost,
            None => node_disruption_cost(
                pods_of
                    .get(node.name.as_str())
                    .into_iter()
                    .flatten()
                    .copied(),
            ),
        };
        t.total_disruption_cost += disruption;
        if input.nodes.contains_key(&node.name) && node.price.is_finite() {
            t.total_cost += node.price;
        }
    }
    for (pool, t) in &mut totals {
        // Upstream falls back to the candidates' prices when its cost tracker has nothing.
        if t.total_cost <= 0.0 {
            t.total_cost = fallback.get(pool.as_str()).copied().unwrap_or(0.0);
        }
    }
    totals
}

/// Which consolidation method scored a move (upstream's `consolidation_type` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConsolidationMethod {
    /// Multi-node consolidation (`multi`).
    MultiNode,
    /// Single-node consolidation (`single`).
    SingleNode,
    /// Re-pack consolidation (`repack`), karpenter-rs's own: several nodes replaced with
    /// the optimiser's packing of their pods (see [`crate::repack`]). Upstream has no such
    /// label value; Balanced pools score it as a multi-node move.
    Repack,
}

impl ConsolidationMethod {
    /// Upstream's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MultiNode => "multi",
            Self::SingleNode => "single",
            Self::Repack => "repack",
        }
    }
}

/// One pool's part of a scored move.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolScore {
    /// The NodePool.
    pub node_pool: String,
    /// Its consolidation policy (upstream's `policy` label).
    pub policy: ConsolidationPolicy,
    /// The move's savings attributed to this pool, per hour: all of them for a move within
    /// one pool, else in proportion to the price of the pool's candidates.
    pub savings: f64,
    /// Disruption cost of the pool's candidates.
    pub disruption_cost: f64,
    /// The pool's totals (zero when the pool has none).
    pub totals: PoolTotals,
    /// The verdict: `Some` exactly for Balanced pools.
    pub score: Option<ScoreResult>,
}

impl PoolScore {
    /// Whether this pool lets the move through: always for pools that are not scored.
    pub fn approved(&self) -> bool {
        self.score.is_none_or(|s| s.approved())
    }
}

/// A consolidation move a method scored, with what upstream reports about it through the
/// `karpenter_consolidation_moves_total` and `karpenter_consolidation_score` metrics and
/// `ConsolidationApproved` events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoredMove {
    /// The method that proposed it.
    pub method: ConsolidationMethod,
    /// Delete or replace.
    pub decision: Decision,
    /// The nodes it would remove.
    pub candidates: Vec<CandidateRef>,
    /// Candidates' prices minus the replacement's, per hour.
    pub savings: f64,
    /// Every Balanced pool approved (true when no pool is Balanced); for a re-pack, also
    /// every pool reached [`RepackOptions::min_score`](crate::RepackOptions::min_score).
    pub approved: bool,
    /// One entry per NodePool of the candidates, by name.
    pub pools: Vec<PoolScore>,
}

/// The pass's scoring state: totals per pool and each pool's policy.
pub(crate) struct Scorer<'a> {
    input: &'a DisruptionInput,
    totals: BTreeMap<String, PoolTotals>,
}

impl<'a> Scorer<'a> {
    /// Totals over `candidates`, the pass's candidates before any method's filter.
    pub fn new(input: &'a DisruptionInput, candidates: &[Candidate]) -> Self {
        Self {
            input,
            totals: pool_totals(input, candidates),
        }
    }

    fn policy(&self, pool: &str) -> ConsolidationPolicy {
        self.input
            .node_pools
            .get(pool)
            .map_or(ConsolidationPolicy::default(), |p| p.consolidation_policy)
    }

    /// Upstream's `CanPassThreshold`: whether deleting `c` outright — the best any move of
    /// it can do, all of its price saved — would pass its pool's threshold. True for pools
    /// that are not Balanced and for pools without positive cost totals.
    pub fn can_pass(&self, c: &Candidate) -> bool {
        if !self.policy(&c.node_pool).is_balanced() {
            return true;
        }
        match self.totals.get(&c.node_pool) {
            Some(t) if t.total_cost > 0.0 => {
                score_move(c.price, c.reschedule_cost, *t, BALANCED_K).approved()
            }
            _ => true,
        }
    }

    /// Upstream's `EvaluateBalancedMove`: each pool's part of removing `cands` for `savings`
    /// per hour with `decision`; the move is approved when every Balanced pool approves. An
    /// empty move is never approved.
    pub fn judge(
        &self,
        method: ConsolidationMethod,
        decision: Decision,
        cands: &[&Candidate],
        savings: f64,
    ) -> ScoredMove {
        let mut by_pool: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        for c in cands {
            let e = by_pool.entry(c.node_pool.as_str()).or_default();
            e.0 += c.price;
            e.1 += c.reschedule_cost;
        }
        let source: f64 = cands.iter().map(|c| c.price).sum();
        let pools: Vec<PoolScore> = by_pool
            .iter()
            .map(|(&pool, &(price, disruption_cost))| {
                let policy = self.policy(pool);
                let totals = self.totals.get(pool).copied().unwrap_or_default();
                // Savings are net of the replacement; a cross-pool move splits them by each
                // pool's share of the price of what is removed.
                let share = if by_pool.len() > 1 && source > 0.0 {
                    savings * (price / source)
                } else {
                    savings
                };
                PoolScore {
                    node_pool: pool.to_owned(),
                    policy,
                    savings: share,
                    disruption_cost,
                    totals,
                    score: policy
                        .is_balanced()
                        .then(|| score_move(share, disruption_cost, totals, BALANCED_K)),
                }
            })
            .collect();
        ScoredMove {
            method,
            decision,
            candidates: cands
                .iter()
                .map(|c| crate::pass::candidate_ref(c))
                .collect(),
            savings,
            approved: !cands.is_empty() && pools.iter().all(PoolScore::approved),
            pools,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approval_message_shows_score_threshold_and_fractions() {
        let s = ScoreResult {
            savings_fraction: 0.25,
            disruption_fraction: 0.1,
            k: 2,
        };
        assert_eq!(
            s.approved_message(),
            "score 2.50 >= threshold 0.50 (k: 2, savings 25.0%, disruption 10.0%)"
        );
        let free = ScoreResult {
            disruption_fraction: 0.0,
            ..s
        };
        assert!(free.approved_message().starts_with("score inf >= "));
    }

    // Upstream's example pool: eight m7i.xlarge at $4.84/day and two m7i.2xlarge at
    // $9.68/day, 80 pods of default cost on 10 nodes.
    const RFC: PoolTotals = PoolTotals {
        total_cost: 58.08,
        total_disruption_cost: 90.0,
    };

    fn score(savings: f64, disruption: f64, totals: PoolTotals, k: u32) -> ScoreResult {
        score_move(savings, disruption, totals, k)
    }

    #[test]
    fn upstream_score_examples() {
        // Oversized m7i.2xlarge replaced by an m7i.large, three pods.
        let r = score(7.26, 4.0, RFC, BALANCED_K);
        assert!((r.savings_fraction - 7.26 / 58.08).abs() < 1e-12);
        assert!((r.disruption_fraction - 4.0 / 90.0).abs() < 1e-12);
        assert!((r.score() - 2.8125).abs() < 1e-9);
        assert!(r.approved());
        // Spare m7i.xlarge deleted, four pods: 0.0833 / 0.0556 = 1.5.
        assert!((score(4.84, 5.0, RFC, BALANCED_K).score() - 1.5).abs() < 1e-9);
        // Marginal xlarge -> large with eight pods: 0.0417 / 0.1 = 0.4167 < 0.5.
        let marginal = score(2.42, 9.0, RFC, BALANCED_K);
        assert!((marginal.score() - 0.416_666).abs() < 1e-5);
        assert!(!marginal.approved());
        // ... passes at k = 3, not at k = 1.
        assert!(score(2.42, 9.0, RFC, 3).approved());
        assert!(!score(2.42, 9.0, RFC, 1).approved());
        // A uniform pool ($48.40/day): the same replace now passes (0.5).
        let uniform = PoolTotals {
            total_cost: 48.40,
            total_disruption_cost: 90.0,
        };
        assert!((score(2.42, 9.0, uniform, BALANCED_K).score() - 0.5).abs() < 1e-9);
        assert!(score(2.42, 9.0, uniform, BALANCED_K).approved());
        // Heterogeneous disruption: 117 in total; 5 passes, 32 does not.
        let het = PoolTotals {
            total_cost: 58.08,
            total_disruption_cost: 117.0,
        };
        assert!(score(4.84, 5.0, het, BALANCED_K).approved());
        assert!(!score(4.84, 32.0, het, BALANCED_K).approved());
        // Scale invariance: ten times the pool, same score.
        let big = PoolTotals {
            total_cost: 580.8,
            total_disruption_cost: 900.0,
        };
        assert!((score(72.6, 40.0, big, 2).score() - r.score()).abs() < 1e-9);
    }

    #[test]
    fn edge_cases_follow_upstream() {
        let hundred = PoolTotals {
            total_cost: 100.0,
            total_disruption_cost: 100.0,
        };
        let table = [
            (20.0, 5.0, 4.0, true),
            (10.0, 10.0, 1.0, true),
            (5.0, 50.0, 0.1, false),
            (0.0, 10.0, 0.0, false),
            (-5.0, 10.0, 0.0, false),
        ];
        for (savings, disruption, want, approved) in table {
            let r = score(savings, disruption, hundred, BALANCED_K);
            assert!((r.score() - want).abs() < 1e-9, "{savings} {disruption}");
            assert_eq!(r.approved(), approved);
        }
        let free = score(10.0, 0.0, hundred, BALANCED_K);
        assert!(free.score().is_infinite() && free.approved());
        assert!(!score(0.0, 0.0, hundred, BALANCED_K).approved());
        let zero_cost = PoolTotals {
            total_cost: 0.0,
            total_disruption_cost: 90.0,
        };
        let r = score(4.84, 5.0, zero_cost, BALANCED_K);
        assert_eq!((r.score(), r.approved()), (0.0, false));
        let nan = PoolTotals {
            total_cost: f64::NAN,
            total_disruption_cost: 90.0,
        };
        assert!(!score(4.84, 5.0, nan, BALANCED_K).approved());
        assert!(!score(f64::NAN, 5.0, hundred, BALANCED_K).approved());
        assert_eq!(free.threshold(), 0.5);
    }
}
