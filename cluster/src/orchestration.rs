//! Disruption orchestration: carrying out the commands `karpenter_disruption` computes.
//!
//! Graceful commands (emptiness, drift, consolidation) are re-checked with
//! [`karpenter_disruption::validate()`] against fresh state (emptiness and consolidation only
//! after the validation delay), then their candidates are tainted
//! `karpenter.sh/disrupted:NoSchedule` and their replacements launched; once every
//! replacement has initialized the candidates' NodeClaims are deleted
//! (termination drains them). A replacement that fails to launch abandons the command and
//! untaints the candidates. Forceful commands (expiry, interruption) delete their NodeClaims
//! at once. While queued, a command's nodes are reported as `disrupting` so the next pass
//! leaves them alone.

use super::provisioner::{LaunchTypes, NameGenerator, node_claim_for, static_node_claim};
use super::{Action, ClusterState};
use karpenter_cloudprovider::v1::ConditionType;
use karpenter_disruption::{Command, Decision, DisruptionInput, validate};
use karpenter_scheduling::model::Millis;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone)]
enum Stage {
    Validating,
    Launching { replacements: Vec<String> },
}

#[derive(Debug, Clone)]
struct Queued {
    command: Command,
    stage: Stage,
}

/// What happened to a command, for logs and the report.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Validation passed and the command is being carried out.
    Started(Box<Command>),
    /// Validation failed; nothing was done.
    Invalidated {
        /// The command.
        command: Box<Command>,
        /// Why.
        reason: String,
    },
    /// Replacements are ready (or none were needed): the candidates are being deleted.
    Completed(Box<Command>),
    /// A replacement failed to launch: the candidates were untainted.
    Abandoned {
        /// The command.
        command: Box<Command>,
        /// The replacement NodeClaim that disappeared.
        node_claim: String,
    },
}

/// The queue of commands being carried out.
#[derive(Debug, Clone, Default)]
pub struct Orchestrator {
    queue: Vec<Queued>,
    validation_delay: Millis,
}

impl Orchestrator {
    /// An empty queue; graceful commands wait `validation_delay` before validation.
    pub fn new(validation_delay: Millis) -> Self {
        Self {
            queue: Vec::new(),
            validation_delay,
        }
    }

    /// Nodes held by queued commands.
    pub fn disrupting(&self) -> BTreeSet<String> {
        self.queue
            .iter()
            .flat_map(|q| q.command.candidates.iter().map(|c| c.node.clone()))
            .collect()
    }

    /// The NodeClaims of commands past validation (being carried out), with their reason:
    /// what upstream marks with the `DisruptionReason` condition.
    pub fn started(&self) -> BTreeMap<String, karpenter_disruption::Reason> {
        self.queue
            .iter()
            .filter(|q| matches!(q.stage, Stage::Launching { .. }))
            .flat_map(|q| {
                q.command
                    .candidates
                    .iter()
                    .map(|c| (c.node_claim.clone(), q.command.reason))
            })
            .collect()
    }

    /// Whether any command is queued.
    pub fn is_busy(&self) -> bool {
        !self.queue.is_empty()
    }

    /// The earliest instant a queued command needs attention.
    pub fn next_due(&self) -> Option<Millis> {
        self.queue
            .iter()
            .filter(|q| matches!(q.stage, Stage::Validating))
            .map(|q| q.command.validation_due(self.validation_delay))
            .min()
    }

    /// Accepts a command from a pass. Forceful commands act at once (their NodeClaims are
    /// deleted); graceful ones wait for validation.
    pub fn submit(&mut self, command: Command) -> Vec<Action> {
        if command.forceful {
            return command
                .candidates
                .iter()
                .map(|c| Action::DeleteNodeClaim {
                    node_claim: c.node_claim.clone(),
                    cause: command.reason.into(),
                })
                .collect();
        }
        self.queue.push(Queued {
            command,
            stage: Stage::Validating,
        });
        Vec::new()
    }

    /// Advances every queued command at `now`. `fresh` builds the disruption input with the
    /// given nodes marked as disrupting (every other queued command's nodes).
    pub fn step(
        &mut self,
        state: &ClusterState,
        fresh: &dyn Fn(&BTreeSet<String>) -> DisruptionInput,
        names: &mut NameGenerator,
        types: &LaunchTypes<'_>,
        now: Millis,
    ) -> (Vec<Action>, Vec<Outcome>) {
        let mut actions = Vec::new();
        let mut outcomes = Vec::new();
        let mut keep = Vec::new();
        let queue = std::mem::take(&mut self.queue);
        // The nodes each queued command holds, for validating one against the others. Taken
        // before the queue is consumed, so a waiting command is moved, not copied, each tick.
        let held: Vec<Vec<String>> = queue
            .iter()
            .map(|o| {
                o.command
                    .candidates
                    .iter()
                    .map(|c| c.node.clone())
                    .collect()
            })
            .collect();
        for (i, mut q) in queue.into_iter().enumerate() {
            match &q.stage {
                Stage::Validating => {
                    if now < q.command.validation_due(self.validation_delay) {
                        keep.push(q);
                        continue;
                    }
                    let others: BTreeSet<String> = held
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .flat_map(|(_, nodes)| nodes.iter().cloned())
                        .collect();
                    let input = fresh(&others);
                    if let Err(e) = validate(&q.command, &input, now) {
                        outcomes.push(Outcome::Invalidated {
                            command: Box::new(q.command.clone()),
                            reason: e.to_string(),
                        });
                        continue;
                    }
                    // Replacements are cut as any launch is; one whose cheapest types miss
                    // a minValues cannot launch, so the command does not start.
                    let cuts: Result<Vec<_>, _> = q
                        .command
                        .replacements
                        .iter()
                        .filter(|_| q.command.decision == Decision::Replace)
                        .map(|planned| types.cut(planned))
                        .collect();
                    let cuts = match cuts {
                        Ok(cuts) => cuts,
                        Err(e) => {
                            outcomes.push(Outcome::Invalidated {
                                command: Box::new(q.command.clone()),
                                reason: format!("a replacement cannot launch: {e}"),
                            });
                            continue;
                        }
                    };
                    for c in &q.command.candidates {
                        actions.push(Action::TaintDisrupted {
                            node: c.node.clone(),
                        });
                    }
                    let mut replacements = Vec::new();
                    if q.command.decision == Decision::Replace {
                        for (planned, cut) in q.command.replacements.iter().zip(&cuts) {
                            let Some(pool) = state.node_pools().get(&planned.node_pool) else {
                                continue;
                            };
                            let taken = |n: &str| {
                                state.node_claims().contains_key(n)
                                    || replacements.iter().any(|r: &String| r == n)
                            };
                            let name = names.next(pool.name(), &taken);
                            // A static pool's replacement is built from its template alone,
                            // as its other NodeClaims are.
                            let claim = if pool.is_static() {
                                static_node_claim(&name, pool, now)
                            } else {
                                node_claim_for(&name, pool, planned, cut, now)
                            };
                            actions.push(Action::LaunchNodeClaim {
                                claim: Box::new(claim),
                                plan: Box::new(planned.clone()),
                            });
                            replacements.push(name);
                        }
                    }
                    outcomes.push(Outcome::Started(Box::new(q.command.clone())));
                    q.stage = Stage::Launching { replacements };
                    keep.push(q);
                }
                Stage::Launching { replacements } => {
                    if let Some(missing) = replacements
                        .iter()
                        .find(|r| !state.node_claims().contains_key(*r))
                    {
                        for c in &q.command.candidates {
                            actions.push(Action::UntaintDisrupted {
                                node: c.node.clone(),
                            });
                        }
                        outcomes.push(Outcome::Abandoned {
                            command: Box::new(q.command.clone()),
                            node_claim: missing.clone(),
                        });
                        continue;
                    }
                    let ready = replacements.iter().all(|r| {
                        state
                            .node_claims()
                            .get(r)
                            .is_some_and(|c| c.is(ConditionType::Initialized))
                    });
                    if !ready {
                        keep.push(q);
                        continue;
                    }
                    for c in &q.command.candidates {
                        actions.push(match &q.command.repair {
                            // A repair's drain is bounded as its policy says.
                            Some(repair) => Action::RepairNodeClaim {
                                node_claim: c.node_claim.clone(),
                                node: c.node.clone(),
                                condition: repair.condition.clone(),
                                drain_bound: repair.drain_bound_ms,
                                legacy: false,
                            },
                            None => Action::DeleteNodeClaim {
                                node_claim: c.node_claim.clone(),
                                cause: q.command.reason.into(),
                            },
                        });
                    }
                    outcomes.push(Outcome::Completed(Box::new(q.command.clone())));
                }
            }
        }
        self.queue = keep;
        (actions, outcomes)
    }
}
