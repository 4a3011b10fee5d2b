//! One disruption pass: forceful commands (expiry, interruption), then Karpenter's methods in
//! order — Emptiness, static drift, Drift, multi-node consolidation, single-node
//! consolidation — where the first method with work produces the pass's command (static drift
//! one command per node it replaces).

use crate::balanced::{ConsolidationMethod, ScoredMove, Scorer};
use crate::budget::{BudgetMapping, PoolCounts};
use crate::candidate::{self, Candidate, PdbLedger, is_reschedulable, pods_by_node};
use crate::command::{
    CandidateRef, Command, Decision, Hold, MethodEvaluation, NodeExplanation, PassResult,
    PoolBudget,
};
use crate::consolidation::{self, Catalog, Proposal};
use crate::input::DisruptionInput;
use crate::reason::Reason;
use crate::repack;
use crate::repair;
use crate::simulate::Simulator;
use crate::static_pool::{room_under_limit, template_claim};
use karpenter_cloudprovider::v1::{ConsolidationPolicy, DisruptionReason};
use karpenter_scheduling::model::{Millis, NodeState};
use karpenter_scheduling::plan::NewNodeClaim;
use karpenter_scheduling::solver::SolveCache;
use std::collections::{BTreeMap, BTreeSet};

/// How many candidates in a row may fail to fold into a multi-node move before the search
/// beyond Karpenter's prefix stops (each try costs one scheduling simulation).
const MAX_EXTENSION_FAILURES_IN_A_ROW: usize = 3;

/// Every command of one pass (see [`compute_pass`]).
pub fn compute_commands(input: &DisruptionInput, now: Millis) -> Vec<Command> {
    compute_pass(input, now).commands
}

/// Decides one pass at instant `now`. Deterministic: the same input and `now` give the same
/// result. Guarantees, for the graceful commands: only candidates (see
/// [`crate::candidate::evaluate`]) are disrupted; per pool, no more nodes than the budget for
/// the reason allows (nodes already disrupting counted); together, a command's candidates
/// never evict more pods under one PDB than it allows (a single node needs one allowed
/// eviction per budget, as upstream); every pod that must move has a place in the re-solved
/// plan; a replacement is strictly cheaper than what it replaces; and a consolidation
/// command touching a `Balanced` pool scored at least the threshold in each such pool (see
/// [`crate::balanced`]; [`PassResult::scored_moves`](crate::PassResult::scored_moves) lists
/// the moves scored).
///
/// # Examples
///
/// With `karpenter-testing`'s cluster builder (one pool over 2- to 16-core on-demand types,
/// budget 100 %): an empty node is deleted, an underused one stays until the next pass, and
/// the pass says why.
///
/// ```
/// use karpenter_disruption::{Decision, Hold, Reason, compute_pass};
/// use karpenter_testing::disruption::Cluster;
///
/// let mut c = Cluster::new();
/// c.node("empty", "xlarge");
/// c.daemon("empty", "agent-1"); // DaemonSet pods do not count
/// c.node("busy", "large");
/// c.pod("busy", "web-0", 6000);
/// c.node("idle", "large");
/// c.pod("idle", "web-1", 500);
///
/// let result = compute_pass(&c.input, c.now);
/// let [cmd] = result.commands.as_slice() else {
///     panic!("one command expected")
/// };
/// assert_eq!((cmd.reason, cmd.decision), (Reason::EMPTY, Decision::Delete));
/// assert_eq!(cmd.node_names(), ["empty"]);
/// assert!(cmd.replacements.is_empty());
/// assert!((cmd.savings - c.input.cluster.nodes[0].price).abs() < 1e-9);
/// // Emptiness goes first; consolidation of `idle` waits for a later pass.
/// assert_eq!(result.explanations.len(), 2);
/// let idle = result.explanations.iter().find(|e| e.node == "idle").unwrap();
/// assert_eq!(
///     idle.holds,
///     [Hold::PreemptedByEarlierMethod { reason: Reason::EMPTY }]
/// );
/// assert_eq!(result.eligible[&Reason::UNDERUTILIZED], 2);
/// ```
pub fn compute_pass(input: &DisruptionInput, now: Millis) -> PassResult {
    compute_pass_cached(input, now, &mut SolveCache::new())
}

/// [`compute_pass`], reusing what `cache` kept from earlier passes about nodes and NodePools
/// that have not changed (see [`SolveCache`]): a caller that computes pass after pass, such as
/// the reconciler, keeps one. The result is the one [`compute_pass`] gives.
pub fn compute_pass_cached(
    input: &DisruptionInput,
    now: Millis,
    cache: &mut SolveCache,
) -> PassResult {
    compute_pass_timed(input, now, cache, &|| 0.0)
}

/// [`compute_pass_cached`], timing each method it runs on the caller's clock `seconds` (the
/// crate reads no clock itself) into [`PassResult::evaluations`]. The decisions do not
/// depend on the clock.
pub fn compute_pass_timed(
    input: &DisruptionInput,
    now: Millis,
    cache: &mut SolveCache,
    seconds: &dyn Fn() -> f64,
) -> PassResult {
    let started = seconds();
    let mut commands = forceful_commands(input, now);
    let gone: BTreeSet<String> = commands
        .iter()
        .flat_map(|c| c.candidates.iter().map(|r| r.node.clone()))
        .collect();
    let eval = candidate::evaluate(input, now, &gone);
    let mut holds = eval.holds;
    for g in &gone {
        holds.remove(g);
    }
    let mut ctx = Ctx {
        input,
        now,
        counts: pool_counts(input, &gone),
        sim: Simulator::new(input, &gone, now, cache),
        catalog: Catalog::new(&input.cluster),
        holds,
        scorer: Scorer::new(input, &eval.candidates),
        scored_moves: Vec::new(),
        timeouts: Vec::new(),
    };
    let cands = &eval.candidates;
    let eligible = eligible_counts(input, cands);
    // Karpenter's methods in order; the first with work decides the pass. Static drift may
    // produce one command per drifted node, as upstream's does.
    // Each method is timed as upstream times it, from its start until it decides; the
    // candidates, which upstream gathers in every method, are gathered once here and counted
    // in the first method's time.
    let mut timer = MethodTimer {
        seconds,
        from: started,
        evaluations: Vec::new(),
    };
    let chosen: Vec<Command> = 'methods: {
        if input.options.node_repair {
            // Fixing a fault outranks any discretionary rebalance.
            let repaired = ctx.repair(cands, &eval.repair_only);
            timer.lap(Reason::UNHEALTHY, "");
            if let Some(cmd) = repaired {
                break 'methods vec![cmd];
            }
        }
        let empty = ctx.emptiness(cands);
        timer.lap(Reason::EMPTY, "empty");
        if let Some(cmd) = empty {
            break 'methods vec![cmd];
        }
        let replaced = ctx.static_drift(cands);
        timer.lap(Reason::DRIFTED, "");
        if !replaced.is_empty() {
            break 'methods replaced;
        }
        let drift = ctx.drift(cands);
        timer.lap(Reason::DRIFTED, "");
        if let Some(cmd) = drift {
            break 'methods vec![cmd];
        }
        let multi = ctx.multi_node(cands);
        timer.lap(
            Reason::UNDERUTILIZED,
            ConsolidationMethod::MultiNode.as_str(),
        );
        if let Some(cmd) = multi {
            break 'methods vec![cmd];
        }
        let single = ctx.single_node(cands);
        timer.lap(
            Reason::UNDERUTILIZED,
            ConsolidationMethod::SingleNode.as_str(),
        );
        if let Some(cmd) = single {
            break 'methods vec![cmd];
        }
        if input.options.repack.is_none() {
            break 'methods Vec::new();
        }
        let repack = ctx.repack(cands);
        timer.lap(Reason::UNDERUTILIZED, ConsolidationMethod::Repack.as_str());
        repack.into_iter().collect()
    };

    let mut in_command: BTreeSet<String> = gone;
    for cmd in &chosen {
        in_command.extend(cmd.candidates.iter().map(|c| c.node.clone()));
    }
    let mut explanations = Vec::new();
    let mut names: Vec<&str> = input
        .cluster
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        if in_command.contains(name) {
            continue;
        }
        let mut hs = ctx.holds.remove(name).unwrap_or_default();
        if hs.is_empty() {
            hs.push(match chosen.first() {
                Some(cmd) => Hold::PreemptedByEarlierMethod { reason: cmd.reason },
                None => Hold::NothingToDo,
            });
        }
        explanations.push(NodeExplanation {
            node: name.to_owned(),
            holds: hs,
        });
    }
    let simulations = ctx.sim.runs;
    commands.extend(chosen);
    let budgets = pool_budgets(input, &ctx.counts, now);
    PassResult {
        commands,
        explanations,
        simulations,
        eligible,
        scored_moves: ctx.scored_moves,
        budgets,
        consolidation_timeouts: ctx.timeouts,
        evaluations: timer.evaluations,
    }
}

/// Times the methods of one pass in turn on the caller's clock.
struct MethodTimer<'c> {
    seconds: &'c dyn Fn() -> f64,
    from: f64,
    evaluations: Vec<MethodEvaluation>,
}

impl MethodTimer<'_> {
    /// Records the method that just finished and starts timing the next.
    fn lap(&mut self, reason: Reason, consolidation_type: &str) {
        let now = (self.seconds)();
        self.evaluations.push(MethodEvaluation {
            reason,
            consolidation_type: consolidation_type.to_owned(),
            seconds: (now - self.from).max(0.0),
        });
        self.from = now;
    }
}

/// Why the graceful consolidation methods (emptiness, multi- and single-node) must skip
/// `c`, if they must.
fn graceful_block(c: &Candidate) -> Option<Hold> {
    if c.static_pool {
        return Some(Hold::StaticNodePool);
    }
    if let Some(h) = &c.pod_block {
        return Some(h.clone());
    }
    c.consolidatable.as_ref().err().cloned()
}

/// Why drift must skip a drifted `c`, if it must: a pod-level block stops it unless the
/// claim has a `terminationGracePeriod`.
fn drift_block(c: &Candidate) -> Option<Hold> {
    if c.static_pool {
        return Some(Hold::StaticNodePool);
    }
    static_drift_block(c)
}

/// Why static drift must skip a drifted node of a static pool, if it must: as for drift, a
/// pod-level block stops it unless the claim has a `terminationGracePeriod`.
fn static_drift_block(c: &Candidate) -> Option<Hold> {
    c.pod_block
        .clone()
        .filter(|_| !c.has_termination_grace_period)
}

/// Drift's order: empty nodes first (least churn), then oldest first.
fn drift_order(drifted: &mut [&Candidate]) {
    drifted.sort_by(|a, b| {
        b.is_empty()
            .cmp(&a.is_empty())
            .then_with(|| a.created_at.cmp(&b.created_at))
            .then_with(|| a.node.cmp(&b.node))
    });
}

/// Why consolidation must skip a non-empty `c` that passed [`graceful_block`], if it must.
fn consolidation_block(input: &DisruptionInput, c: &Candidate) -> Option<Hold> {
    let when_empty = input
        .node_pools
        .get(&c.node_pool)
        .is_some_and(|p| p.consolidation_policy == ConsolidationPolicy::WhenEmpty);
    if when_empty {
        return Some(Hold::WhenEmptyPolicy);
    }
    (!c.price_known()).then_some(Hold::UnknownPrice)
}

/// How many candidates each graceful method would consider: the filters the methods apply
/// before budgets and simulations, without recording holds.
fn eligible_counts(input: &DisruptionInput, cands: &[Candidate]) -> BTreeMap<Reason, usize> {
    let empty = cands
        .iter()
        .filter(|c| c.is_empty() && graceful_block(c).is_none())
        .count();
    let drifted = cands
        .iter()
        .filter(|c| c.drift.is_some() && drift_block(c).is_none())
        .count();
    let underutilized = cands
        .iter()
        .filter(|c| {
            !c.is_empty() && graceful_block(c).is_none() && consolidation_block(input, c).is_none()
        })
        .count();
    let mut out = BTreeMap::from([
        (Reason::EMPTY, empty),
        (Reason::DRIFTED, drifted),
        (Reason::UNDERUTILIZED, underutilized),
    ]);
    if input.options.node_repair {
        let unhealthy = cands
            .iter()
            .filter(|c| input.nodes.get(&c.node).is_some_and(|i| i.repair.is_some()))
            .count();
        out.insert(Reason::UNHEALTHY, unhealthy);
    }
    out
}

/// Budget counts per pool (`BuildDisruptionBudgetMapping`): managed, initialized nodes whose
/// instance is not terminating; of those, the ones deleting, queued, removed by this pass,
/// or not ready are already disrupting.
pub(crate) fn pool_counts(
    input: &DisruptionInput,
    gone: &BTreeSet<String>,
) -> BTreeMap<String, PoolCounts> {
    let mut counts: BTreeMap<String, PoolCounts> = BTreeMap::new();
    for node in &input.cluster.nodes {
        let Some(info) = input.nodes.get(&node.name) else {
            continue;
        };
        if !info.initialized || info.instance_terminating {
            continue;
        }
        let pool = node
            .node_pool
            .clone()
            .or_else(|| {
                node.labels
                    .get(karpenter_scheduling::labels::NODEPOOL)
                    .cloned()
            })
            .unwrap_or_default();
        let c = counts.entry(pool).or_default();
        c.nodes += 1;
        if !info.ready
            || info.deleting
            || node.state == NodeState::Deleting
            || input.disrupting.contains(&node.name)
            || gone.contains(&node.name)
        {
            c.disrupting += 1;
        }
    }
    counts
}

/// Every pool's budget per reason, from the same counts the methods' budgets use.
fn pool_budgets(
    input: &DisruptionInput,
    counts: &BTreeMap<String, PoolCounts>,
    now: Millis,
) -> Vec<PoolBudget> {
    let mut reasons = vec![
        DisruptionReason::Empty,
        DisruptionReason::Drifted,
        DisruptionReason::Underutilized,
    ];
    if input.options.node_repair {
        reasons.push(DisruptionReason::Unhealthy);
    }
    let mut out = Vec::new();
    for (name, pool) in &input.node_pools {
        let c = counts.get(name).copied().unwrap_or_default();
        for &reason in &reasons {
            let allowed = crate::budget::allowed_disruptions(&pool.budgets, c.nodes, reason, now);
            out.push(PoolBudget {
                node_pool: name.clone(),
                reason,
                allowed: allowed.min(i32::MAX as u64),
                disrupting: c.disrupting,
            });
        }
    }
    out
}

pub(crate) fn mapping(
    input: &DisruptionInput,
    counts: &BTreeMap<String, PoolCounts>,
    reason: DisruptionReason,
    now: Millis,
) -> BudgetMapping {
    BudgetMapping::new(
        input
            .node_pools
            .iter()
            .map(|(n, p)| (n.as_str(), p.budgets.as_slice())),
        counts,
        reason,
        now,
    )
}

/// Nodes the forceful commands at `now` remove.
pub(crate) fn forceful_nodes(input: &DisruptionInput, now: Millis) -> BTreeSet<String> {
    forceful_commands(input, now)
        .into_iter()
        .flat_map(|c| c.candidates.into_iter().map(|r| r.node))
        .collect()
}

/// Expired NodeClaims and actionable interruptions: deleted without budgets, as upstream's
/// expiration and interruption controllers do.
fn forceful_commands(input: &DisruptionInput, now: Millis) -> Vec<Command> {
    let by_node = pods_by_node(&input.cluster.bound_pods);
    let mut nodes: Vec<_> = input.cluster.nodes.iter().collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = Vec::new();
    for node in nodes {
        let Some(info) = input.nodes.get(&node.name) else {
            continue;
        };
        if info.deleting || node.state == NodeState::Deleting {
            continue;
        }
        // A node a queued command holds is left to it, unless it is interrupted: the
        // instance goes away whatever the command waits for (upstream's interruption
        // controller deletes regardless of disruption).
        let held = input.disrupting.contains(&node.name);
        let expired = !held
            && info
                .expire_after
                .is_some_and(|e| now >= info.created_at.saturating_add(e));
        let (reason, why) = if expired {
            (
                Reason::Expired,
                "expireAfter has passed since the NodeClaim was created".to_owned(),
            )
        } else if let Some(kind) = info.interruption.filter(|k| k.triggers_replacement()) {
            (
                Reason::Interrupted,
                format!("interruption notice: {kind:?}"),
            )
        } else {
            continue;
        };
        let mut pods: Vec<_> = by_node
            .get(node.name.as_str())
            .map(|ps| {
                ps.iter()
                    .filter(|p| is_reschedulable(p))
                    .map(|p| p.key())
                    .collect()
            })
            .unwrap_or_default();
        pods.sort();
        let price = if node.price.is_finite() {
            node.price
        } else {
            0.0
        };
        out.push(Command {
            reason,
            decision: Decision::Delete,
            candidates: vec![CandidateRef {
                node: node.name.clone(),
                node_claim: info.node_claim.clone(),
                node_pool: node.node_pool.clone().unwrap_or_default(),
                price,
                pods,
            }],
            replacements: Vec::new(),
            savings: price,
            explanation: format!("{reason}: delete [{}]: {why}", node.name),
            created_at: now,
            forceful: true,
            consolidation: None,
            repair: None,
        });
    }
    out
}

pub(crate) fn candidate_ref(c: &Candidate) -> CandidateRef {
    CandidateRef {
        node: c.node.clone(),
        node_claim: c.node_claim.clone(),
        node_pool: c.node_pool.clone(),
        price: c.price,
        pods: c.pods.clone(),
    }
}

fn describe(
    reason: Reason,
    cands: &[&Candidate],
    replacements: &[NewNodeClaim],
    savings: f64,
) -> String {
    let names: Vec<&str> = cands.iter().map(|c| c.node.as_str()).collect();
    if replacements.is_empty() {
        format!(
            "{reason}: delete [{}] (savings: ${savings:.4}/h)",
            names.join(", ")
        )
    } else {
        let types: Vec<String> = replacements
            .iter()
            .map(|r| {
                let opts: Vec<&str> = r
                    .instance_type_options
                    .iter()
                    .take(5)
                    .map(|o| o.name.as_ref())
                    .collect();
                let more = r.instance_type_options.len().saturating_sub(5);
                if more > 0 {
                    format!("{} and {more} other(s)", opts.join("/"))
                } else {
                    opts.join("/")
                }
            })
            .collect();
        format!(
            "{reason}: replace [{}] with {} node(s) [{}] (savings: ${savings:.4}/h)",
            names.join(", "),
            replacements.len(),
            types.join("; ")
        )
    }
}

pub(crate) fn build_command(
    reason: Reason,
    cands: &[&Candidate],
    replacements: Vec<NewNodeClaim>,
    savings: f64,
    now: Millis,
) -> Command {
    Command {
        reason,
        decision: if replacements.is_empty() {
            Decision::Delete
        } else {
            Decision::Replace
        },
        explanation: describe(reason, cands, &replacements, savings),
        candidates: cands.iter().map(|c| candidate_ref(c)).collect(),
        replacements,
        savings,
        created_at: now,
        forceful: false,
        consolidation: None,
        repair: None,
    }
}

/// Consolidation's sort (upstream `sortCandidates`): highest savings per unit of disruption
/// first; ties by lower disruption cost, then name, so the order is total.
pub(crate) fn consolidation_order(cands: &mut [&Candidate]) {
    cands.sort_by(|a, b| {
        b.savings_ratio()
            .total_cmp(&a.savings_ratio())
            .then_with(|| a.disruption_cost.total_cmp(&b.disruption_cost))
            .then_with(|| a.node.cmp(&b.node))
    });
}

struct Ctx<'a> {
    input: &'a DisruptionInput,
    now: Millis,
    counts: BTreeMap<String, PoolCounts>,
    sim: Simulator<'a>,
    catalog: Catalog<'a>,
    holds: BTreeMap<String, Vec<Hold>>,
    scorer: Scorer<'a>,
    scored_moves: Vec<ScoredMove>,
    /// Consolidation methods that stopped on the simulation budget.
    timeouts: Vec<ConsolidationMethod>,
}

impl<'a> Ctx<'a> {
    fn note(&mut self, node: &str, hold: Hold) {
        let hs = self.holds.entry(node.to_owned()).or_default();
        if !hs.contains(&hold) {
            hs.push(hold);
        }
    }

    /// How the pool(s) of `cands` judge consolidating them as `p` proposes.
    fn judge(&self, method: ConsolidationMethod, cands: &[&Candidate], p: &Proposal) -> ScoredMove {
        let decision = if p.replacement.is_some() {
            Decision::Replace
        } else {
            Decision::Delete
        };
        self.scorer.judge(method, decision, cands, p.savings)
    }

    /// Shared gate of the graceful consolidation methods; records why a node fails it.
    fn gate(&mut self, c: &Candidate) -> bool {
        match graceful_block(c) {
            Some(h) => {
                self.note(&c.node, h);
                false
            }
            None => true,
        }
    }

    /// Upstream's `Repair`: see [`crate::repair`]. `only` are the nodes no other method may
    /// take.
    fn repair(&mut self, cands: &'a [Candidate], only: &'a [Candidate]) -> Option<Command> {
        let (eligible, holds) = repair::eligible(self.input, cands.iter().chain(only));
        for (node, hold) in holds {
            self.note(&node, hold);
        }
        if eligible.is_empty() {
            return None;
        }
        let tripped = repair::tripped_pools(self.input);
        let budget = mapping(
            self.input,
            &self.counts,
            DisruptionReason::Unhealthy,
            self.now,
        );
        for (i, c) in eligible.iter().enumerate() {
            if tripped.contains(&c.node_pool) {
                let node_pool = c.node_pool.clone();
                self.note(&c.node, Hold::RepairBreaker { node_pool });
                continue;
            }
            // Budgets count initialized nodes only: repairing one that never initialized
            // neither needs nor takes budget.
            let initialized = self.input.nodes.get(&c.node).is_some_and(|i| i.initialized);
            if initialized && budget.remaining(&c.node_pool) == 0 {
                let reason = Reason::UNHEALTHY;
                self.note(&c.node, Hold::Budget { reason });
                continue;
            }
            if c.static_pool {
                // As static drift: a NodeClaim from the template, when the pool has room.
                let Some(sp) = self
                    .input
                    .node_pools
                    .get(&c.node_pool)
                    .and_then(|p| p.static_capacity.as_ref())
                else {
                    continue;
                };
                if sp.claims.active + sp.claims.pending_disruption > sp.replicas {
                    self.note(&c.node, Hold::StaticScalingDown);
                    continue;
                }
                if room_under_limit(sp.node_limit, sp.claims, 1) == 0 {
                    self.note(&c.node, Hold::StaticNodeLimit);
                    continue;
                }
                let replacement = vec![template_claim(&c.node_pool)];
                return Some(repair::command(self.input, c, replacement, self.now));
            }
            let Some(outcome) = self.sim.simulate(&[c]) else {
                for rest in &eligible[i..] {
                    self.note(&rest.node, Hold::NotEvaluated);
                }
                return None;
            };
            if let Some(f) = outcome.failure {
                self.note(&c.node, f);
                continue;
            }
            return Some(repair::command(self.input, c, outcome.claims, self.now));
        }
        None
    }

    fn emptiness(&mut self, cands: &'a [Candidate]) -> Option<Command> {
        for c in cands.iter().filter(|c| c.holds_only_buffer_pods()) {
            self.note(
                &c.node,
                Hold::BufferPods {
                    count: c.buffer_pods,
                },
            );
        }
        let mut empty: Vec<&Candidate> = Vec::new();
        for c in cands.iter().filter(|c| c.is_empty()) {
            if self.gate(c) {
                empty.push(c);
            }
        }
        consolidation_order(&mut empty);
        let mut budget = mapping(self.input, &self.counts, DisruptionReason::Empty, self.now);
        let mut ledger = PdbLedger::default();
        let mut picked = Vec::new();
        for c in empty {
            if budget.remaining(&c.node_pool) == 0 {
                self.note(
                    &c.node,
                    Hold::Budget {
                        reason: Reason::EMPTY,
                    },
                );
                continue;
            }
            if let Err(h) = ledger.try_add(self.input, c) {
                self.note(&c.node, h);
                continue;
            }
            budget.take(&c.node_pool);
            picked.push(c);
        }
        if picked.is_empty() {
            return None;
        }
        let savings = picked.iter().map(|c| c.price).sum();
        Some(build_command(
            Reason::EMPTY,
            &picked,
            Vec::new(),
            savings,
            self.now,
        ))
    }

    /// Upstream's `StaticDrift`: each drifted node of a static pool is replaced one for one
    /// by a NodeClaim from the pool's template (created first, the node deleted once it
    /// initializes), no scheduling simulation, up to the pool's Drifted budget and what
    /// `limits.nodes` leaves room for, and not while the pool has more claims than replicas.
    fn static_drift(&mut self, cands: &'a [Candidate]) -> Vec<Command> {
        let mut by_pool: BTreeMap<&str, Vec<&Candidate>> = BTreeMap::new();
        for c in cands.iter().filter(|c| c.static_pool && c.drift.is_some()) {
            match static_drift_block(c) {
                Some(h) => self.note(&c.node, h),
                None => by_pool.entry(c.node_pool.as_str()).or_default().push(c),
            }
        }
        let budget = mapping(
            self.input,
            &self.counts,
            DisruptionReason::Drifted,
            self.now,
        );
        let mut out = Vec::new();
        for (pool, mut drifted) in by_pool {
            let Some(sp) = self
                .input
                .node_pools
                .get(pool)
                .and_then(|p| p.static_capacity.as_ref())
            else {
                continue;
            };
            drift_order(&mut drifted);
            let scaling_down = sp.claims.active + sp.claims.pending_disruption > sp.replicas;
            let allowed = usize::try_from(budget.remaining(pool))
                .unwrap_or(usize::MAX)
                .min(drifted.len());
            let room = if scaling_down {
                0
            } else {
                room_under_limit(sp.node_limit, sp.claims, allowed as i64) as usize
            };
            for (i, c) in drifted.into_iter().enumerate() {
                if i < room {
                    let mut cmd = build_command(
                        Reason::DRIFTED,
                        &[c],
                        vec![template_claim(pool)],
                        0.0,
                        self.now,
                    );
                    cmd.explanation = format!(
                        "Drifted: replace [{}] with a NodeClaim from the template of static NodePool {pool} — drift: {}",
                        c.node,
                        c.drift.as_deref().unwrap_or_default()
                    );
                    out.push(cmd);
                } else if scaling_down {
                    self.note(&c.node, Hold::StaticScalingDown);
                } else if i >= allowed {
                    self.note(
                        &c.node,
                        Hold::Budget {
                            reason: Reason::DRIFTED,
                        },
                    );
                } else {
                    self.note(&c.node, Hold::StaticNodeLimit);
                }
            }
        }
        out
    }

    fn drift(&mut self, cands: &'a [Candidate]) -> Option<Command> {
        let mut drifted: Vec<&Candidate> = Vec::new();
        // Static pools' drifted nodes are static drift's (it ran first).
        for c in cands.iter().filter(|c| c.drift.is_some() && !c.static_pool) {
            match drift_block(c) {
                Some(h) => self.note(&c.node, h),
                None => drifted.push(c),
            }
        }
        drift_order(&mut drifted);
        let budget = mapping(
            self.input,
            &self.counts,
            DisruptionReason::Drifted,
            self.now,
        );
        for (i, c) in drifted.iter().enumerate() {
            if budget.remaining(&c.node_pool) == 0 {
                self.note(
                    &c.node,
                    Hold::Budget {
                        reason: Reason::DRIFTED,
                    },
                );
                continue;
            }
            let Some(outcome) = self.sim.simulate(&[c]) else {
                for rest in &drifted[i..] {
                    self.note(&rest.node, Hold::NotEvaluated);
                }
                return None;
            };
            if let Some(f) = outcome.failure {
                self.note(&c.node, f);
                continue;
            }
            let cost: f64 = outcome.claims.iter().map(|r| r.price).sum();
            let savings = c.price - cost;
            let mut cmd = build_command(Reason::DRIFTED, &[c], outcome.claims, savings, self.now);
            cmd.explanation = format!(
                "{} — drift: {}",
                cmd.explanation,
                c.drift.as_deref().unwrap_or_default()
            );
            return Some(cmd);
        }
        None
    }

    /// Candidates consolidation may consider, in consolidation order.
    fn consolidation_candidates(&mut self, cands: &'a [Candidate]) -> Vec<&'a Candidate> {
        let mut out = Vec::new();
        for c in cands.iter().filter(|c| !c.is_empty()) {
            if !self.gate(c) {
                continue;
            }
            if let Some(h) = consolidation_block(self.input, c) {
                self.note(&c.node, h);
                continue;
            }
            out.push(c);
        }
        consolidation_order(&mut out);
        out
    }

    /// The longest run of `ordered` (at most `cap`) that the `Underutilized` budgets and the
    /// PodDisruptionBudgets let go together, in order; nodes over a budget are explained.
    fn within_budgets(&mut self, ordered: Vec<&'a Candidate>, cap: usize) -> Vec<&'a Candidate> {
        let mut budget = mapping(
            self.input,
            &self.counts,
            DisruptionReason::Underutilized,
            self.now,
        );
        let mut ledger = PdbLedger::default();
        let mut list: Vec<&Candidate> = Vec::new();
        for c in ordered {
            if list.len() >= cap {
                break;
            }
            if budget.remaining(&c.node_pool) == 0 {
                self.note(
                    &c.node,
                    Hold::Budget {
                        reason: Reason::UNDERUTILIZED,
                    },
                );
                continue;
            }
            // Left out silently: single-node consolidation may still take it alone.
            if ledger.try_add(self.input, c).is_err() {
                continue;
            }
            budget.take(&c.node_pool);
            list.push(c);
        }
        list
    }

    fn multi_node(&mut self, cands: &'a [Candidate]) -> Option<Command> {
        let ordered = self.consolidation_candidates(cands);
        let list = self.within_budgets(ordered, usize::MAX);
        if list.len() < 2 {
            return None;
        }
        let cap = self.input.options.max_multi_node_batch.max(1);
        let mut hi = if list.len() <= cap {
            list.len() - 1
        } else {
            cap
        };
        let mut lo = 1usize;
        let mut best: Option<(Vec<&Candidate>, Proposal, ScoredMove)> = None;
        let mut last_rejected: Option<ScoredMove> = None;
        let mut out_of_budget = false;
        // Upstream's binary search over prefixes of the sorted list (at least two nodes); a
        // move a Balanced pool rejects counts as one that does not work.
        while lo <= hi {
            let mid = (lo + hi) / 2;
            let prefix = &list[..=mid];
            match consolidation::compute(
                &mut self.sim,
                prefix,
                self.input.options.spot_to_spot_consolidation,
                &self.catalog,
            ) {
                None => {
                    out_of_budget = true;
                    self.timeouts.push(ConsolidationMethod::MultiNode);
                    break;
                }
                Some(Ok(p)) => {
                    let scored = self.judge(ConsolidationMethod::MultiNode, prefix, &p);
                    if scored.approved {
                        best = Some((prefix.to_vec(), p, scored));
                        lo = mid + 1;
                    } else {
                        last_rejected = Some(scored);
                        hi = mid - 1;
                    }
                }
                Some(Err(_)) => hi = mid - 1,
            }
        }
        let Some((mut set, mut proposal, mut scored)) = best else {
            // Upstream reports one rejection, the last, when the search ends with nothing;
            // not when it stopped on its timeout, our simulation budget.
            if !out_of_budget {
                self.scored_moves.extend(last_rejected);
            }
            return None;
        };
        // Beyond upstream: a prefix search stops at the first candidate that does not fit;
        // later ones may still fold into the same move. Try each once, keeping it only when
        // the move still works and saves strictly more.
        let start = set.len();
        let extension = if self.input.options.extend_multi_node {
            &list[start..]
        } else {
            &[]
        };
        // Each try is a full scheduling simulation; candidates later in the order save less
        // per disruption, so a run of failures means the rest are unlikely to fold in.
        let mut failures_in_a_row = 0;
        for &c in extension {
            if set.len() > cap
                || !self.sim.has_budget()
                || failures_in_a_row >= MAX_EXTENSION_FAILURES_IN_A_ROW
            {
                break;
            }
            set.push(c);
            let grown = match consolidation::compute(
                &mut self.sim,
                &set,
                self.input.options.spot_to_spot_consolidation,
                &self.catalog,
            ) {
                Some(Ok(p)) if p.savings > proposal.savings => {
                    let s = self.judge(ConsolidationMethod::MultiNode, &set, &p);
                    s.approved.then_some((p, s))
                }
                _ => None,
            };
            match grown {
                Some((p, s)) => {
                    proposal = p;
                    scored = s;
                    failures_in_a_row = 0;
                }
                None => {
                    set.pop();
                    failures_in_a_row += 1;
                }
            }
        }
        self.scored_moves.push(scored);
        let replacements: Vec<NewNodeClaim> = proposal.replacement.into_iter().collect();
        let mut cmd = build_command(
            Reason::UNDERUTILIZED,
            &set,
            replacements,
            proposal.savings,
            self.now,
        );
        cmd.consolidation = Some(ConsolidationMethod::MultiNode);
        Some(cmd)
    }

    fn single_node(&mut self, cands: &'a [Candidate]) -> Option<Command> {
        let ordered = self.consolidation_candidates(cands);
        // Interleave pools (upstream `shuffleCandidates`) so one big pool cannot starve the
        // others when the work budget runs out; pools in name order.
        let mut by_pool: BTreeMap<&str, Vec<&Candidate>> = BTreeMap::new();
        for c in ordered {
            by_pool.entry(c.node_pool.as_str()).or_default().push(c);
        }
        let rounds = by_pool.values().map(Vec::len).max().unwrap_or(0);
        let mut queue = Vec::new();
        for i in 0..rounds {
            for list in by_pool.values() {
                if let Some(c) = list.get(i) {
                    queue.push(*c);
                }
            }
        }
        let budget = mapping(
            self.input,
            &self.counts,
            DisruptionReason::Underutilized,
            self.now,
        );
        for (i, c) in queue.iter().enumerate() {
            if budget.remaining(&c.node_pool) == 0 {
                self.note(
                    &c.node,
                    Hold::Budget {
                        reason: Reason::UNDERUTILIZED,
                    },
                );
                continue;
            }
            // Not worth a simulation when even deleting the node would be rejected.
            if !self.scorer.can_pass(c) {
                self.note(
                    &c.node,
                    Hold::BalancedCannotPass {
                        node_pool: c.node_pool.clone(),
                    },
                );
                continue;
            }
            match consolidation::compute(
                &mut self.sim,
                &[c],
                self.input.options.spot_to_spot_consolidation,
                &self.catalog,
            ) {
                None => {
                    for rest in &queue[i..] {
                        self.note(&rest.node, Hold::NotEvaluated);
                    }
                    self.timeouts.push(ConsolidationMethod::SingleNode);
                    return None;
                }
                Some(Err(h)) => self.note(&c.node, h),
                Some(Ok(p)) => {
                    let scored = self.judge(ConsolidationMethod::SingleNode, &[c], &p);
                    let approved = scored.approved;
                    self.scored_moves.push(scored);
                    if !approved {
                        self.note(
                            &c.node,
                            Hold::BalancedRejected {
                                node_pool: c.node_pool.clone(),
                            },
                        );
                        continue;
                    }
                    let replacements: Vec<NewNodeClaim> = p.replacement.into_iter().collect();
                    let mut cmd = build_command(
                        Reason::UNDERUTILIZED,
                        &[c],
                        replacements,
                        p.savings,
                        self.now,
                    );
                    cmd.consolidation = Some(ConsolidationMethod::SingleNode);
                    return Some(cmd);
                }
            }
        }
        None
    }

    /// Re-pack consolidation (see the `repack` module): the most wasteful candidates the
    /// budgets allow together, replaced by the optimiser's packing of their pods when it saves
    /// past the threshold. Only in a settled cluster.
    fn repack(&mut self, cands: &'a [Candidate]) -> Option<Command> {
        let opts = self.input.options.repack.as_ref()?;
        if !self.sim.settled() {
            return None;
        }
        let threshold = opts.price_improvement_threshold;
        let min_score = opts.min_score;
        let now = self.now;
        let mut ordered = self.consolidation_candidates(cands);
        // Young nodes settle first: re-packing a replacement minutes after launch evicts the
        // same pods twice for a saving the next pass could have found anyway.
        ordered.retain(|c| opts.old_enough(c.created_at, now));
        let ranked = repack::rank(
            ordered,
            threshold,
            self.input.options.spot_to_spot_consolidation,
            &self.catalog,
        );
        self.sim.allow_more(opts.max_simulations);
        // Windows of the ranking, each as many nodes as the budgets allow together: the most
        // wasteful nodes first, then the next ones (a set that saves too little may sit
        // beside one that saves enough), within the simulation allowance.
        let mut start = 0;
        let mut search = repack::Search {
            found: None,
            out_of_budget: false,
        };
        // The last move scored: the approved one when the search ends with a move.
        let mut last = None;
        for _ in 0..repack::WINDOWS {
            let window = self.within_budgets(ranked[start..].to_vec(), opts.max_nodes);
            let Some(end) = window
                .last()
                .and_then(|l| ranked.iter().position(|c| std::ptr::eq(*c, *l)))
            else {
                break;
            };
            start = end + 1;
            let Ctx {
                sim,
                scorer,
                catalog,
                input,
                ..
            } = &mut *self;
            let mut approve = |set: &[&'a Candidate], p: &repack::Proposal| {
                let decision = if p.replacements.is_empty() {
                    Decision::Delete
                } else {
                    Decision::Replace
                };
                let mut scored =
                    scorer.judge(ConsolidationMethod::Repack, decision, set, p.savings);
                // Re-packing is karpenter-rs's own: it also answers for its churn.
                scored.approved &= repack::worth_its_churn(&scored, min_score);
                let approved = scored.approved;
                last = Some(scored);
                approved
            };
            search = repack::search(
                sim,
                &window,
                threshold,
                input.options.spot_to_spot_consolidation,
                catalog,
                &mut approve,
            );
            if search.found.is_some() || search.out_of_budget {
                break;
            }
        }
        if search.out_of_budget {
            self.timeouts.push(ConsolidationMethod::Repack);
        }
        // As multi-node consolidation: the move taken, or the last one rejected when the
        // search ends with nothing (not when it stopped on its allowance).
        if search.found.is_some() || !search.out_of_budget {
            self.scored_moves.extend(last);
        }
        let (set, proposal) = search.found?;
        let source: f64 = set.iter().map(|c| c.price).sum();
        let mut cmd = build_command(
            Reason::UNDERUTILIZED,
            &set,
            proposal.replacements,
            proposal.savings,
            self.now,
        );
        cmd.consolidation = Some(ConsolidationMethod::Repack);
        cmd.explanation = if cmd.replacements.is_empty() {
            format!(
                "{} — re-pack: every pod fits on other nodes",
                cmd.explanation
            )
        } else {
            format!(
                "{} — re-pack: {:.1}% cheaper, at most ${:.4}/h whatever the replacements launch as",
                cmd.explanation,
                100.0 * proposal.savings / source,
                proposal.worst_price
            )
        };
        Some(cmd)
    }
}
