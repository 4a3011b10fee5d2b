//! Re-checking a command against fresh state after the validation delay (upstream's
//! `validation.go`): the candidates must still be candidates for the same reason, budgets
//! must still allow them, their pods must still fit, and a replacement must still be what
//! scheduling asks for and still cheaper.

use crate::balanced::ConsolidationMethod;
use crate::candidate::{self, Candidate, PdbLedger};
use crate::command::{Command, Hold};
use crate::consolidation::Catalog;
use crate::input::DisruptionInput;
use crate::pass::{forceful_nodes, mapping, pool_counts};
use crate::reason::Reason;
use crate::simulate::Simulator;
use karpenter_cloudprovider::v1::{ConsolidationPolicy, DisruptionReason};
use karpenter_scheduling::model::{Millis, NodeState};
use karpenter_scheduling::solver::SolveCache;
use std::collections::BTreeSet;

/// Why a command must not be carried out.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValidationFailure {
    /// Called before the validation delay has passed since the command was made.
    #[error("validation delay not over: {remaining_ms} ms left")]
    TooEarly {
        /// Milliseconds to wait.
        remaining_ms: Millis,
    },
    /// A candidate node no longer exists or is being deleted.
    #[error("node {node} is gone or deleting")]
    NodeGone {
        /// The node.
        node: String,
    },
    /// A candidate no longer qualifies.
    #[error("node {node} is no longer a candidate: {hold}")]
    NotCandidate {
        /// The node.
        node: String,
        /// Why.
        hold: Hold,
    },
    /// The pool's budget no longer allows the candidate.
    #[error(
        "node {node} can no longer be disrupted without violating the {reason} budget of NodePool {node_pool}"
    )]
    Budget {
        /// The node.
        node: String,
        /// Its pool.
        node_pool: String,
        /// The budget's reason.
        reason: Reason,
    },
    /// Pods no longer fit, or scheduling now asks for something else.
    #[error("scheduling simulation produced new results: {detail}")]
    Scheduling {
        /// What changed.
        detail: String,
    },
    /// The replacement is no longer cheaper than the candidates.
    #[error("replacement is no longer cheaper than the candidates")]
    NotCheaper,
    /// The fresh input's simulation budget is zero.
    #[error("no simulation budget to validate with")]
    NoSimulationBudget,
}

/// Whether `cmd` (made at `cmd.created_at`) may still be carried out at `now` given `fresh`
/// state. Forceful commands only need their nodes to still exist and not be deleting. The
/// command's own nodes must not yet be in `fresh.disrupting`.
///
/// # Examples
///
/// An emptiness command is due after the validation delay, and fails if a pod has landed on
/// the node meanwhile.
///
/// ```
/// use karpenter_disruption::{ValidationFailure, compute_pass, validate};
/// use karpenter_testing::disruption::Cluster;
///
/// let mut c = Cluster::new();
/// c.node("empty", "large");
/// let cmd = compute_pass(&c.input, c.now).commands.remove(0);
/// let due = cmd.validation_due(c.input.options.validation_delay_ms);
/// assert_eq!(due, c.now + 15_000);
///
/// assert!(matches!(
///     validate(&cmd, &c.input, c.now),
///     Err(ValidationFailure::TooEarly { remaining_ms: 15_000 })
/// ));
/// assert_eq!(validate(&cmd, &c.input, due), Ok(()));
///
/// c.pod("empty", "late-arrival", 100);
/// let Err(ValidationFailure::NotCandidate { node, .. }) = validate(&cmd, &c.input, due) else {
///     panic!("the node is no longer empty")
/// };
/// assert_eq!(node, "empty");
/// ```
pub fn validate(
    cmd: &Command,
    fresh: &DisruptionInput,
    now: Millis,
) -> Result<(), ValidationFailure> {
    if cmd.forceful {
        for c in &cmd.candidates {
            alive(fresh, &c.node)?;
        }
        return Ok(());
    }
    if cmd.reason == Reason::UNHEALTHY {
        // Upstream validates no repair; the node must still exist and still need it.
        for c in &cmd.candidates {
            alive(fresh, &c.node)?;
            if fresh.nodes.get(&c.node).is_none_or(|i| i.repair.is_none()) {
                return Err(ValidationFailure::NotCandidate {
                    node: c.node.clone(),
                    hold: Hold::NothingToDo,
                });
            }
        }
        return Ok(());
    }
    let due = cmd.validation_due(fresh.options.validation_delay_ms);
    if now < due {
        return Err(ValidationFailure::TooEarly {
            remaining_ms: due - now,
        });
    }
    let gone = forceful_nodes(fresh, now);
    let eval = candidate::evaluate(fresh, now, &gone);
    let mut current: Vec<&Candidate> = Vec::new();
    for r in &cmd.candidates {
        let Some(c) = eval.candidates.iter().find(|c| c.node == r.node) else {
            if !fresh.cluster.nodes.iter().any(|n| n.name == r.node) {
                return Err(ValidationFailure::NodeGone {
                    node: r.node.clone(),
                });
            }
            let hold = eval
                .holds
                .get(&r.node)
                .and_then(|h| h.first().cloned())
                .unwrap_or(Hold::NothingToDo);
            return Err(ValidationFailure::NotCandidate {
                node: r.node.clone(),
                hold,
            });
        };
        if let Err(hold) = still_qualifies(cmd.reason, c, fresh) {
            return Err(ValidationFailure::NotCandidate {
                node: r.node.clone(),
                hold,
            });
        }
        current.push(c);
    }
    let Some(reason) = cmd.reason.budget_reason() else {
        return Ok(());
    };
    let counts = pool_counts(fresh, &gone);
    let mut budget = mapping(fresh, &counts, reason, now);
    let mut ledger = PdbLedger::default();
    for c in &current {
        if !budget.take(&c.node_pool) {
            return Err(ValidationFailure::Budget {
                node: c.node.clone(),
                node_pool: c.node_pool.clone(),
                reason: cmd.reason,
            });
        }
        if let Err(hold) = ledger.try_add(fresh, c) {
            return Err(ValidationFailure::NotCandidate {
                node: c.node.clone(),
                hold,
            });
        }
    }
    // Emptiness moves no pod; static drift launches its template replacement whatever the
    // pods need, as upstream's does, so neither simulates.
    if cmd.reason == Reason::EMPTY || current.iter().all(|c| c.static_pool) {
        return Ok(());
    }
    let mut cache = SolveCache::new();
    let mut sim = Simulator::new(fresh, &gone, now, &mut cache);
    if cmd.consolidation == Some(ConsolidationMethod::Repack) {
        let Some(opts) = &fresh.options.repack else {
            return Err(ValidationFailure::Scheduling {
                detail: "re-pack consolidation is turned off".to_owned(),
            });
        };
        // Re-packing's own allowance, as in the pass.
        sim.allow_more(opts.max_simulations.max(7));
        return crate::repack::revalidate(
            &mut sim,
            &current,
            cmd,
            opts.price_improvement_threshold,
            fresh.options.spot_to_spot_consolidation,
            &Catalog::new(&fresh.cluster),
        );
    }
    // The same simulation that computed the command: drift launches its replacements as
    // planned, consolidation decides on Karpenter's greedy scheduling.
    let outcome = if cmd.reason == Reason::DRIFTED {
        sim.simulate(&current)
    } else {
        sim.simulate_consolidation(&current)
    }
    .ok_or(ValidationFailure::NoSimulationBudget)?;
    if let Some(f) = outcome.failure {
        return Err(ValidationFailure::Scheduling {
            detail: f.to_string(),
        });
    }
    if cmd.reason == Reason::DRIFTED {
        return Ok(());
    }
    let changed = |detail: &str| ValidationFailure::Scheduling {
        detail: detail.to_owned(),
    };
    match (outcome.claims.as_slice(), cmd.replacements.as_slice()) {
        ([], []) => Ok(()),
        ([], _) => Err(changed("no replacement is needed any more")),
        ([fresh_claim], [planned]) => {
            let names: BTreeSet<&str> = fresh_claim
                .instance_type_options
                .iter()
                .map(|o| o.name.as_ref())
                .collect();
            if !planned
                .instance_type_options
                .iter()
                .all(|o| names.contains(o.name.as_ref()))
            {
                return Err(changed("the replacement's instance types no longer fit"));
            }
            let planned_names: BTreeSet<&str> = planned
                .instance_type_options
                .iter()
                .map(|o| o.name.as_ref())
                .collect();
            let cheapest = fresh_claim
                .instance_type_options
                .iter()
                .filter(|o| planned_names.contains(o.name.as_ref()))
                .map(|o| o.price)
                .fold(f64::INFINITY, f64::min);
            let source: f64 = current.iter().map(|c| c.price).sum();
            if cheapest < source {
                Ok(())
            } else {
                Err(ValidationFailure::NotCheaper)
            }
        }
        (claims, _) => Err(changed(&format!(
            "{} new nodes needed where the command planned {}",
            claims.len(),
            cmd.replacements.len()
        ))),
    }
}

/// `node` still exists in `fresh` and is not being deleted.
fn alive(fresh: &DisruptionInput, node: &str) -> Result<(), ValidationFailure> {
    let alive = fresh.cluster.nodes.iter().any(|n| {
        n.name == node
            && n.state != NodeState::Deleting
            && !fresh.nodes.get(&n.name).is_some_and(|i| i.deleting)
    });
    if alive {
        Ok(())
    } else {
        Err(ValidationFailure::NodeGone {
            node: node.to_owned(),
        })
    }
}

fn still_qualifies(reason: Reason, c: &Candidate, fresh: &DisruptionInput) -> Result<(), Hold> {
    // Of the graceful methods only drift touches static pools (static drift).
    if c.static_pool && reason != Reason::DRIFTED {
        return Err(Hold::StaticNodePool);
    }
    match reason {
        Reason::Budgeted(DisruptionReason::Drifted) => {
            if c.drift.is_none() {
                return Err(Hold::NothingToDo);
            }
            match &c.pod_block {
                Some(h) if !c.has_termination_grace_period => Err(h.clone()),
                _ => Ok(()),
            }
        }
        Reason::Budgeted(DisruptionReason::Empty | DisruptionReason::Underutilized) => {
            if let Some(h) = &c.pod_block {
                return Err(h.clone());
            }
            c.consolidatable.clone()?;
            if reason == Reason::EMPTY {
                return if c.is_empty() {
                    Ok(())
                } else if c.holds_only_buffer_pods() {
                    Err(Hold::BufferPods {
                        count: c.buffer_pods,
                    })
                } else {
                    Err(Hold::NothingToDo)
                };
            }
            if c.is_empty() {
                // Emptiness owns empty nodes (budget accounting per reason).
                return Err(Hold::NothingToDo);
            }
            let policy = fresh
                .node_pools
                .get(&c.node_pool)
                .map(|p| p.consolidation_policy);
            if policy == Some(ConsolidationPolicy::WhenEmpty) {
                return Err(Hold::WhenEmptyPolicy);
            }
            if !c.price_known() {
                return Err(Hold::UnknownPrice);
            }
            Ok(())
        }
        Reason::Expired | Reason::Interrupted | Reason::Budgeted(DisruptionReason::Unhealthy) => {
            Ok(())
        }
    }
}
