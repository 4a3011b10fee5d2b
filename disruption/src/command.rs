//! The output of a pass: commands to carry out and, for every node left alone, why.

use karpenter_scheduling::model::{Millis, PodKey};
use karpenter_scheduling::plan::NewNodeClaim;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

use crate::reason::Reason;

/// What a command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Decision {
    /// Nothing.
    NoOp,
    /// Delete the candidates; their pods fit on capacity that exists.
    Delete,
    /// Launch the replacements first, then delete the candidates.
    Replace,
}

/// A node a command disrupts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateRef {
    /// Node name.
    pub node: String,
    /// Its NodeClaim.
    pub node_claim: String,
    /// Its NodePool.
    pub node_pool: String,
    /// Its price per hour (0 when unknown).
    pub price: f64,
    /// The pods that will be evicted and rescheduled (DaemonSet pods excluded).
    pub pods: Vec<PodKey>,
}

/// One disruption decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    /// Why.
    pub reason: Reason,
    /// Delete or replace.
    pub decision: Decision,
    /// The nodes to remove, in the order they were chosen.
    pub candidates: Vec<CandidateRef>,
    /// NodeClaims to launch (and wait for) before the candidates are removed.
    pub replacements: Vec<NewNodeClaim>,
    /// Candidate prices minus replacement prices, per hour.
    pub savings: f64,
    /// A sentence a person can read in a log or event.
    pub explanation: String,
    /// The `now` of the pass that produced it (validation waits for the delay from here).
    pub created_at: Millis,
    /// Forceful commands (expiry, interruption) ignore budgets, PDBs and `do-not-disrupt`
    /// when choosing nodes; the terminator still drains in eviction order.
    pub forceful: bool,
    /// For an `Underutilized` command, which consolidation method found it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation: Option<crate::balanced::ConsolidationMethod>,
    /// For an `Unhealthy` command, what repair found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<RepairRef>,
}

/// What an `Unhealthy` command repairs (its one candidate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairRef {
    /// The unhealthy condition type.
    pub condition: String,
    /// The drain bound to stamp when the NodeClaim is deleted: the shorter of the policy's
    /// and the NodeClaim's `terminationGracePeriod`, `Some(0)` for a forceful drain; `None`
    /// leaves the NodeClaim's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_bound_ms: Option<Millis>,
}

impl Command {
    /// Upstream's `consolidation_type` label of the method that produced the command:
    /// `empty` (emptiness), `single` or `multi` (consolidation), empty otherwise (drift,
    /// static drift, forceful commands).
    pub fn consolidation_type(&self) -> &'static str {
        match (self.reason, self.consolidation) {
            (Reason::EMPTY, _) => "empty",
            (_, Some(method)) => method.as_str(),
            _ => "",
        }
    }

    /// When the command may be validated, given the configured validation delay: `delay`
    /// after it was created if its reason [waits for validation](Reason::waits_for_validation),
    /// at once otherwise.
    pub fn validation_due(&self, delay: Millis) -> Millis {
        if self.reason.waits_for_validation() {
            self.created_at.saturating_add(delay)
        } else {
            self.created_at
        }
    }

    /// Names of the candidate nodes.
    pub fn node_names(&self) -> Vec<&str> {
        self.candidates.iter().map(|c| c.node.as_str()).collect()
    }

    /// Sum of the candidates' prices.
    pub fn source_price(&self) -> f64 {
        self.candidates.iter().map(|c| c.price).sum()
    }

    /// Sum of the replacements' (cheapest option) prices.
    pub fn replacement_price(&self) -> f64 {
        self.replacements.iter().map(|r| r.price).sum()
    }
}

/// Why a node was not disrupted by this pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Hold {
    /// No NodeClaim: Karpenter does not manage it.
    NotManaged,
    /// The node's NodePool is unknown.
    NodePoolNotFound {
        /// Pool name (empty when the node has none).
        node_pool: String,
    },
    /// The NodeClaim is not initialized.
    NotInitialized,
    /// Being deleted already.
    Deleting,
    /// An earlier command is disrupting it.
    AlreadyDisrupting,
    /// Nominated for a pending pod.
    Nominated,
    /// `karpenter.sh/do-not-disrupt: "true"` on the node.
    DoNotDisruptNode,
    /// A pod's `karpenter.sh/do-not-disrupt` is in force.
    DoNotDisruptPod {
        /// The pod.
        pod: PodKey,
    },
    /// A PDB allows no eviction of a pod on the node.
    PdbBlocked {
        /// The pod.
        pod: PodKey,
        /// `namespace/name` of the budget.
        pdb: String,
    },
    /// A pod is covered by several PDBs, which the eviction API refuses.
    MultiplePdbs {
        /// The pod.
        pod: PodKey,
        /// The budgets.
        pdbs: Vec<String>,
    },
    /// Evicting it together with the other candidates would exceed a PDB.
    PdbExhaustedByCommand {
        /// `namespace/name` of the budget.
        pdb: String,
    },
    /// The NodePool is static (`replicas`).
    StaticNodePool,
    /// A drifted node of a static pool waits: the pool has more NodeClaims than `replicas`
    /// and is scaling down first.
    StaticScalingDown,
    /// A drifted node of a static pool waits: `limits.nodes` leaves no room for its
    /// replacement.
    StaticNodeLimit,
    /// `consolidateAfter: Never`.
    ConsolidationDisabled,
    /// `consolidateAfter` has not passed since the last pod event.
    ConsolidateAfter {
        /// Milliseconds left.
        remaining_ms: Millis,
    },
    /// The pool's budget for the reason is used up.
    Budget {
        /// The reason whose budget is exhausted.
        reason: Reason,
    },
    /// Policy `WhenEmpty` and the node has workload pods.
    WhenEmptyPolicy,
    /// Price, zone or capacity type of the node is unknown.
    UnknownPrice,
    /// A pod could not be placed elsewhere.
    WouldNotFit {
        /// The pod.
        pod: PodKey,
        /// The solver's reason.
        reason: String,
    },
    /// Its pods would need more than one new node.
    NeedsMultipleNodes {
        /// How many.
        count: usize,
    },
    /// No replacement is strictly cheaper.
    NotCheaper,
    /// Spot-to-spot consolidation is disabled.
    SpotToSpotDisabled,
    /// Spot-to-spot needs at least 15 cheaper options.
    SpotToSpotTooFewOptions {
        /// How many there were.
        options: usize,
    },
    /// The cheaper options cannot satisfy the pool's `minValues`.
    MinValues {
        /// The requirement key.
        key: String,
    },
    /// The pool's policy is `Balanced` and even deleting the node, saving all of its price,
    /// would score below the threshold: single-node consolidation does not simulate it.
    BalancedCannotPass {
        /// The NodePool.
        node_pool: String,
    },
    /// The pool's policy is `Balanced` and the move consolidation found for the node scores
    /// below the threshold (the numbers are in [`PassResult::scored_moves`]).
    BalancedRejected {
        /// The NodePool.
        node_pool: String,
    },
    /// `karpenter.sh/do-not-repair` keeps node repair away from the unhealthy node.
    DoNotRepair,
    /// The unhealthy node has pods that block eviction and neither its repair policy nor its
    /// NodeClaim bounds the drain.
    RepairNeedsDrainBound,
    /// More than 20 % of the pool's nodes are unhealthy: repair stops for the pool.
    RepairBreaker {
        /// The NodePool.
        node_pool: String,
    },
    /// The node holds no pods but a CapacityBuffer's virtual pods: emptiness leaves it
    /// (consolidation may still move the buffer's room elsewhere).
    BufferPods {
        /// How many virtual pods the last provisioning plan put there.
        count: usize,
    },
    /// Not drifted, not empty and not consolidatable.
    NothingToDo,
    /// The pass's simulation budget ran out before the node was evaluated.
    NotEvaluated,
    /// An earlier method in Karpenter's order produced this pass's command.
    PreemptedByEarlierMethod {
        /// That command's reason.
        reason: Reason,
    },
}

impl Hold {
    /// The Kubernetes event Karpenter publishes for this hold, as `(reason, message)`:
    /// `DisruptionBlocked` when something forbids touching the node (a `do-not-disrupt`
    /// annotation, a PodDisruptionBudget, the pool's budget) and `Unconsolidatable` when
    /// consolidation looked and found nothing better. `None` for holds not worth telling:
    /// nothing to do, a transient countdown, a node that is not Karpenter's or is already
    /// going away, and a static pool's node (upstream's methods pass over those in silence).
    pub fn event(&self) -> Option<(&'static str, String)> {
        match self {
            Self::DoNotDisruptNode
            | Self::DoNotDisruptPod { .. }
            | Self::PdbBlocked { .. }
            | Self::MultiplePdbs { .. }
            | Self::Budget { .. }
            | Self::NodePoolNotFound { .. }
            | Self::DoNotRepair
            | Self::RepairNeedsDrainBound => {
                Some(("DisruptionBlocked", format!("Cannot disrupt Node: {self}")))
            }
            Self::RepairBreaker { .. } => Some(("NodeRepairBlocked", self.to_string())),
            Self::WouldNotFit { .. }
            | Self::NeedsMultipleNodes { .. }
            | Self::NotCheaper
            | Self::SpotToSpotDisabled
            | Self::SpotToSpotTooFewOptions { .. }
            | Self::MinValues { .. }
            | Self::UnknownPrice
            | Self::WhenEmptyPolicy
            | Self::BufferPods { .. } => Some(("Unconsolidatable", self.to_string())),
            _ => None,
        }
    }
}

impl fmt::Display for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotManaged => write!(f, "node isn't managed by karpenter"),
            Self::NodePoolNotFound { node_pool } => write!(f, "NodePool {node_pool:?} not found"),
            Self::NotInitialized => write!(f, "node isn't initialized"),
            Self::Deleting => write!(f, "node is deleting or marked for deletion"),
            Self::AlreadyDisrupting => write!(f, "node is already being disrupted"),
            Self::Nominated => write!(f, "node is nominated for a pending pod"),
            Self::DoNotDisruptNode => {
                write!(
                    f,
                    "disruption is blocked through the \"karpenter.sh/do-not-disrupt\" annotation"
                )
            }
            Self::DoNotDisruptPod { pod } => {
                write!(
                    f,
                    "pod {pod} has \"karpenter.sh/do-not-disrupt\" annotation"
                )
            }
            Self::PdbBlocked { pod, pdb } => {
                write!(f, "pdb {pdb} prevents eviction of pod {pod}")
            }
            Self::MultiplePdbs { pod, pdbs } => write!(
                f,
                "eviction does not support multiple PDBs (pod {pod}: {})",
                pdbs.join(", ")
            ),
            Self::PdbExhaustedByCommand { pdb } => write!(
                f,
                "pdb {pdb} allows no more evictions alongside the other candidates"
            ),
            Self::StaticNodePool => write!(f, "NodePool is static"),
            Self::StaticScalingDown => write!(
                f,
                "static NodePool has more NodeClaims than replicas and is scaling down"
            ),
            Self::StaticNodeLimit => write!(
                f,
                "static NodePool's limits.nodes leaves no room for a replacement"
            ),
            Self::ConsolidationDisabled => write!(f, "NodePool has consolidation disabled"),
            Self::ConsolidateAfter { remaining_ms } => write!(
                f,
                "consolidateAfter not reached ({}s left)",
                (remaining_ms + 999) / 1000
            ),
            Self::Budget { reason } => write!(
                f,
                "disruption budget for reason {reason} is exhausted in the NodePool"
            ),
            Self::WhenEmptyPolicy => write!(
                f,
                "NodePool has consolidation policy WhenEmpty, but node is not empty"
            ),
            Self::UnknownPrice => write!(f, "node price, zone or capacity type is unknown"),
            Self::WouldNotFit { pod, reason } => {
                write!(f, "pod {pod} would not schedule elsewhere: {reason}")
            }
            Self::NeedsMultipleNodes { count } => {
                write!(f, "can't remove without creating {count} nodes")
            }
            Self::NotCheaper => write!(f, "can't replace with a cheaper node"),
            Self::SpotToSpotDisabled => write!(
                f,
                "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
            ),
            Self::SpotToSpotTooFewOptions { options } => write!(
                f,
                "SpotToSpotConsolidation requires {} cheaper instance type options than the current candidate to consolidate, got {options}",
                crate::input::MIN_SPOT_TO_SPOT_OPTIONS
            ),
            Self::MinValues { key } => write!(
                f,
                "cheaper instance types do not satisfy minValues of {key:?}"
            ),
            Self::BalancedCannotPass { node_pool } => write!(
                f,
                "NodePool {node_pool:?} has consolidation policy Balanced and even deleting the node would not save enough for the disruption it causes"
            ),
            Self::BalancedRejected { node_pool } => write!(
                f,
                "NodePool {node_pool:?} has consolidation policy Balanced and the move does not save enough for the disruption it causes"
            ),
            Self::DoNotRepair => write!(
                f,
                "repair is blocked through the \"karpenter.sh/do-not-repair\" annotation"
            ),
            Self::RepairNeedsDrainBound => write!(
                f,
                "repair requires a termination grace period to bypass blocking pods"
            ),
            Self::RepairBreaker { node_pool } => write!(
                f,
                "more than 20% of nodes in nodepool {node_pool:?} are unhealthy"
            ),
            Self::BufferPods { count } => {
                write!(
                    f,
                    "node has buffer pods ({count} CapacityBuffer virtual pod(s))"
                )
            }
            Self::NothingToDo => write!(f, "node is not empty, drifted or consolidatable"),
            Self::NotEvaluated => write!(f, "simulation budget of the pass exhausted"),
            Self::PreemptedByEarlierMethod { reason } => {
                write!(f, "a {reason} command was chosen first this pass")
            }
        }
    }
}

/// Why one node was left alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeExplanation {
    /// Node name.
    pub node: String,
    /// Every reason found, most fundamental first (no duplicates).
    pub holds: Vec<Hold>,
}

/// A pass's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PassResult {
    /// Forceful commands (one per expired or interrupted node), then at most one command of
    /// the first method (Emptiness, Drift, multi-node, single-node consolidation) with work.
    pub commands: Vec<Command>,
    /// Every node of the snapshot not in a command, sorted by name.
    pub explanations: Vec<NodeExplanation>,
    /// Scheduling simulations spent.
    pub simulations: usize,
    /// Nodes each graceful method could act on this pass, before budgets and simulation
    /// (Karpenter's `voluntary_disruption_eligible_nodes`): `Empty`, `Drifted` and
    /// `Underutilized` are always present, possibly with 0.
    pub eligible: BTreeMap<Reason, usize>,
    /// The consolidation moves the methods scored, in the order they were scored, as
    /// upstream's Balanced evaluator reports them: every move single-node consolidation
    /// computed (approved or rejected; the approved one, if any, is this pass's command), and
    /// for multi-node consolidation the move it chose, or when a Balanced pool rejected every
    /// move it found and it chose none, the last one rejected. Moves of pools that are not
    /// Balanced are listed too (approved, without scores): upstream counts them in
    /// `karpenter_consolidation_moves_total`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scored_moves: Vec<crate::balanced::ScoredMove>,
    /// Every NodePool's disruption budget for each budget reason at this pass, as upstream's
    /// `BuildDisruptionBudgetMapping` reports it (`karpenter_nodepools_allowed_disruptions`,
    /// `karpenter_nodepools_nodes_consuming_budgets`), in pool then reason order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<PoolBudget>,
    /// The consolidation methods that stopped because the pass's simulation budget ran out
    /// (`DisruptionOptions::max_simulations`): where upstream's methods stop on a timeout
    /// (`karpenter_voluntary_disruption_consolidation_timeouts_total`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consolidation_timeouts: Vec<crate::balanced::ConsolidationMethod>,
    /// The methods this pass ran, in order, with how long each took on the caller's clock
    /// (see [`crate::compute_pass_timed`]; zero without one): upstream's
    /// `karpenter_voluntary_disruption_decision_evaluation_duration_seconds`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evaluations: Vec<MethodEvaluation>,
}

/// One disruption method's run in a pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MethodEvaluation {
    /// The method's disruption reason (`Empty`, `Drifted`, `Underutilized`).
    pub reason: Reason,
    /// Upstream's consolidation type of the method: `empty`, `multi`, `single`, or empty for
    /// the drift methods.
    pub consolidation_type: String,
    /// How long the method took, in seconds.
    pub seconds: f64,
}

/// One NodePool's disruption budget for one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolBudget {
    /// The NodePool.
    pub node_pool: String,
    /// The budget reason.
    pub reason: karpenter_cloudprovider::v1::DisruptionReason,
    /// Disruptions its budgets allow over its counted nodes (before subtracting the nodes
    /// already disrupting); upstream's unbounded value, `i32::MAX`, when no budget applies.
    pub allowed: u64,
    /// Its nodes being disrupted already (deleting, queued, or not ready).
    pub disrupting: u64,
}

impl PassResult {
    /// Why `node` was left alone this pass: `None` when it is in a command or not in the
    /// snapshot.
    pub fn holds(&self, node: &str) -> Option<&[Hold]> {
        // Explanations are sorted by node name.
        self.explanations
            .binary_search_by(|e| e.node.as_str().cmp(node))
            .ok()
            .map(|i| self.explanations[i].holds.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::model::PodKey;

    #[test]
    fn only_telling_holds_make_events() {
        let pod = PodKey::new("default", "db-0");
        let (reason, message) = Hold::DoNotDisruptPod { pod }.event().unwrap();
        assert_eq!(reason, "DisruptionBlocked");
        assert_eq!(
            message,
            "Cannot disrupt Node: pod default/db-0 has \"karpenter.sh/do-not-disrupt\" annotation"
        );
        assert_eq!(Hold::NotCheaper.event().unwrap().0, "Unconsolidatable");
        for quiet in [
            Hold::NothingToDo,
            Hold::NotEvaluated,
            Hold::ConsolidateAfter { remaining_ms: 5 },
            Hold::PreemptedByEarlierMethod {
                reason: Reason::EMPTY,
            },
            Hold::Deleting,
            Hold::StaticNodePool,
            Hold::StaticScalingDown,
            Hold::StaticNodeLimit,
        ] {
            assert_eq!(quiet.event(), None, "{quiet:?}");
        }
    }
}
