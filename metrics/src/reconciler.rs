//! The families fed by what the shared reconciler reports ([`Event`]): solve durations,
//! disruption pass durations, eligible nodes and disruption decisions. The controller
//! passes every event here; what is logged or published as a Kubernetes event is its own
//! business.

use crate::{
    BudgetLabels, ConsolidationLabels, ConsolidationTypeLabels, ControllerLabels,
    ControllerZoneLabels, DecisionLabels, EvaluationLabels, Metrics, NodePoolDecisionLabels,
    ReasonLabels,
};
use karpenter_cluster::orchestration::Outcome;
use karpenter_cluster::reconciler::Event;
use karpenter_disruption::{ConsolidationMethod, PoolBudget, PoolScore, ScoredMove};
use std::collections::BTreeSet;

fn consolidation_labels(pool: &PoolScore, approved: bool) -> ConsolidationLabels {
    ConsolidationLabels {
        decision: if approved { "approved" } else { "rejected" }.to_owned(),
        nodepool: pool.node_pool.clone(),
        policy: pool.policy.as_str().to_owned(),
    }
}

impl Metrics {
    /// Counts every move a computed pass scored in `karpenter_consolidation_moves_total`,
    /// and Balanced pools' scores in `karpenter_consolidation_score`, as upstream does: a
    /// single-node move counts once for its pool; a multi-node move counts for each pool,
    /// its score labelled by that pool's own verdict.
    fn observe_scored_moves(&self, moves: &[ScoredMove]) {
        for mv in moves {
            let pools = match mv.method {
                ConsolidationMethod::SingleNode => &mv.pools[..mv.pools.len().min(1)],
                ConsolidationMethod::MultiNode | ConsolidationMethod::Repack => &mv.pools[..],
            };
            if mv.method == ConsolidationMethod::SingleNode && mv.candidates.is_empty() {
                continue;
            }
            for pool in pools {
                let moved = consolidation_labels(pool, mv.approved);
                self.consolidation_moves.get_or_create(&moved).inc();
                let Some(score) = pool.score else {
                    continue;
                };
                let scored = match mv.method {
                    ConsolidationMethod::SingleNode => moved,
                    ConsolidationMethod::MultiNode | ConsolidationMethod::Repack => {
                        consolidation_labels(pool, score.approved())
                    }
                };
                self.consolidation_score
                    .get_or_create(&scored)
                    .observe(score.score());
            }
        }
    }

    /// Counts what upstream counts of a queued command moving on: candidates of a
    /// consolidation command (emptiness, single- or multi-node) that failed validation, and
    /// a command abandoned because a replacement was lost (labelled as upstream labels it,
    /// with the decision as its `consolidation_type`).
    fn observe_outcome(&self, outcome: &Outcome) {
        match outcome {
            Outcome::Invalidated { command, .. } if !command.consolidation_type().is_empty() => {
                let labels = ConsolidationTypeLabels {
                    consolidation_type: command.consolidation_type().to_owned(),
                };
                (self.disruption_failed_validations)
                    .get_or_create(&labels)
                    .inc_by(command.candidates.len() as u64);
            }
            Outcome::Abandoned { command, .. } => {
                let decision = format!("{:?}", command.decision).to_lowercase();
                let labels = DecisionLabels {
                    consolidation_type: decision.clone(),
                    decision,
                    reason: crate::termination::snake_case(command.reason.as_str()),
                };
                self.disruption_queue_failures.get_or_create(&labels).inc();
            }
            Outcome::Invalidated { .. } | Outcome::Started(_) | Outcome::Completed(_) => {}
        }
    }

    /// Sets the NodePool budget gauges to a pass's budgets; the series of pools no longer
    /// reported are dropped.
    fn observe_budgets(&self, budgets: &[PoolBudget]) {
        self.nodepools_allowed_disruptions.clear();
        self.nodepools_nodes_consuming_budgets.clear();
        for b in budgets {
            let labels = BudgetLabels {
                nodepool: b.node_pool.clone(),
                reason: b.reason.as_str().to_owned(),
            };
            let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
            (self.nodepools_allowed_disruptions)
                .get_or_create(&labels)
                .set(gauge(b.allowed));
            (self.nodepools_nodes_consuming_budgets)
                .get_or_create(&labels)
                .set(gauge(b.disrupting));
        }
    }

    /// Records what `event` says about the families above; events that carry no metric
    /// are ignored.
    pub fn observe(&self, event: &Event) {
        match event {
            Event::Planned {
                plan, seconds, at, ..
            } => {
                self.observe_decisions(plan, *at);
                let provisioner = ControllerLabels {
                    controller: "provisioner".into(),
                };
                self.scheduling_duration
                    .get_or_create(&provisioner)
                    .observe(*seconds);
                // Pods waiting for reserved capacity promised elsewhere are not unschedulable:
                // upstream plans them again in a later round.
                let unschedulable = plan.unschedulable.iter().filter(|u| !u.deferred).count();
                self.scheduler_unschedulable_pods
                    .get_or_create(&provisioner)
                    .set(i64::try_from(unschedulable).unwrap_or(i64::MAX));
                // Only the latest simulation's zones, as upstream resets them per solve.
                self.scheduler_pending_by_zone.clear();
                for (zone, count) in &plan.pending_by_effective_zone {
                    let labels = ControllerZoneLabels {
                        controller: provisioner.controller.clone(),
                        zone: zone.clone(),
                    };
                    (self.scheduler_pending_by_zone)
                        .get_or_create(&labels)
                        .set(i64::try_from(*count).unwrap_or(i64::MAX));
                }
            }
            Event::DisruptionPass { result, .. } => {
                for run in &result.evaluations {
                    let labels = EvaluationLabels {
                        reason: run.reason.as_str().to_lowercase(),
                        consolidation_type: run.consolidation_type.clone(),
                    };
                    (self.disruption_evaluation_duration)
                        .get_or_create(&labels)
                        .observe(run.seconds);
                }
                self.observe_scored_moves(&result.scored_moves);
                self.observe_budgets(&result.budgets);
                for method in &result.consolidation_timeouts {
                    let labels = ConsolidationTypeLabels {
                        consolidation_type: method.as_str().to_owned(),
                    };
                    self.disruption_consolidation_timeouts
                        .get_or_create(&labels)
                        .inc();
                }
                for (reason, count) in &result.eligible {
                    self.disruption_eligible_nodes
                        .get_or_create(&ReasonLabels {
                            reason: reason.as_str().to_lowercase(),
                        })
                        .set(i64::try_from(*count).unwrap_or(i64::MAX));
                }
            }
            // Upstream counts voluntary decisions only: expiry and interruption are their own
            // controllers there, outside the disruption queue.
            Event::DisruptionDecided(command) if command.forceful => {}
            Event::DisruptionDecided(command) => {
                let decision = format!("{:?}", command.decision).to_lowercase();
                let reason = command.reason.as_str().to_lowercase();
                let consolidation_type = command.consolidation_type().to_owned();
                self.disruption_decisions
                    .get_or_create(&DecisionLabels {
                        decision: decision.clone(),
                        reason: reason.clone(),
                        consolidation_type: consolidation_type.clone(),
                    })
                    .inc();
                let pools: BTreeSet<&str> = command
                    .candidates
                    .iter()
                    .map(|c| c.node_pool.as_str())
                    .collect();
                for nodepool in pools {
                    self.disruption_decisions_by_nodepool
                        .get_or_create(&NodePoolDecisionLabels {
                            nodepool: nodepool.to_owned(),
                            decision: decision.clone(),
                            reason: reason.clone(),
                            consolidation_type: consolidation_type.clone(),
                        })
                        .inc();
                }
            }
            Event::Disruption(outcome) => self.observe_outcome(outcome),
            Event::Nominated { .. }
            | Event::FailedScheduling { .. }
            | Event::LifecycleTimeout { .. }
            | Event::RepairBlocked { .. }
            | Event::StaticCapacity { .. }
            | Event::OrphanTaint { .. }
            | Event::CapacityBuffer { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_disruption::{Command, Decision, PassResult, Reason};

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn reconciler_events_feed_their_families() {
        let m = Metrics::new();
        let planned = |zones: &[(&str, usize)]| {
            let plan = karpenter_scheduling::Plan {
                pending_by_effective_zone: (zones.iter())
                    .map(|(z, n)| ((*z).to_owned(), *n))
                    .collect(),
                ..Default::default()
            };
            m.observe(&Event::Planned {
                pods: 3,
                plan: Box::new(plan),
                seconds: 0.25,
                at: 0,
            });
            let family = "karpenter_scheduler_pending_pods_by_effective_zone_count{";
            crate::tests::lines(&m, family)
        };
        assert_eq!(planned(&[("zone-a", 2), ("flexible", 1)]).len(), 2);
        assert_eq!(
            planned(&[("zone-b", 1)]),
            [
                r#"karpenter_scheduler_pending_pods_by_effective_zone_count{controller="provisioner",zone="zone-b"} 1"#
            ],
            "only the latest simulation's zones"
        );
        let mut result = PassResult::default();
        result.eligible.insert(Reason::UNDERUTILIZED, 4);
        result.evaluations = vec![
            karpenter_disruption::MethodEvaluation {
                reason: Reason::EMPTY,
                consolidation_type: "empty".into(),
                seconds: 0.5,
            },
            karpenter_disruption::MethodEvaluation {
                reason: Reason::DRIFTED,
                consolidation_type: String::new(),
                seconds: 1.0,
            },
        ];
        result
            .consolidation_timeouts
            .push(karpenter_disruption::ConsolidationMethod::SingleNode);
        result.budgets.push(karpenter_disruption::PoolBudget {
            node_pool: "default".into(),
            reason: karpenter_cloudprovider::v1::DisruptionReason::Drifted,
            allowed: 3,
            disrupting: 1,
        });
        m.observe(&Event::DisruptionPass {
            drifted: Default::default(),
            result: Box::new(result),
            seconds: 1.5,
        });
        m.observe(&Event::DisruptionDecided(Box::new(Command {
            reason: Reason::EMPTY,
            decision: Decision::Delete,
            candidates: ["a", "b"]
                .map(|n| karpenter_disruption::CandidateRef {
                    node: n.into(),
                    node_claim: n.into(),
                    node_pool: "default".into(),
                    price: 0.1,
                    pods: Vec::new(),
                })
                .to_vec(),
            replacements: Vec::new(),
            savings: 0.0,
            explanation: String::new(),
            created_at: 0,
            forceful: false,
            consolidation: None,
            repair: None,
        })));
        m.observe(&Event::DisruptionDecided(Box::new(Command {
            reason: Reason::Interrupted,
            decision: Decision::Delete,
            candidates: Vec::new(),
            replacements: Vec::new(),
            savings: 0.0,
            explanation: String::new(),
            created_at: 0,
            forceful: true,
            consolidation: None,
            repair: None,
        })));
        let text = m.encode();
        assert!(
            !text.contains("reason=\"interrupted\""),
            "a forceful command is not a voluntary decision: {text}"
        );
        assert!(
            line(&text, "karpenter_scheduler_scheduling_duration_seconds_sum{controller=\"provisioner\"} 0.5").is_some(),
            "{text}"
        );
        assert!(
            line(
                &text,
                "karpenter_voluntary_disruption_eligible_nodes{reason=\"underutilized\"} 4"
            )
            .is_some(),
            "{text}"
        );
        assert!(
            line(&text, r#"karpenter_voluntary_disruption_consolidation_timeouts_total{consolidation_type="single"} 1"#).is_some(),
            "{text}"
        );
        assert!(
            line(&text, r#"karpenter_nodepools_allowed_disruptions{nodepool="default",reason="Drifted"} 3"#).is_some()
                && line(&text, r#"karpenter_nodepools_nodes_consuming_budgets{nodepool="default",reason="Drifted"} 1"#).is_some(),
            "{text}"
        );
        assert!(
            line(
                &text,
                r#"karpenter_voluntary_disruption_decision_evaluation_duration_seconds_sum{reason="empty",consolidation_type="empty"} 0.5"#
            )
            .is_some()
                && line(
                    &text,
                    r#"karpenter_voluntary_disruption_decision_evaluation_duration_seconds_sum{reason="drifted",consolidation_type=""} 1.0"#
                )
                .is_some(),
            "each method the pass ran, by its labels: {text}"
        );
        assert!(
            line(&text, "karpenter_voluntary_disruption_decisions_total{decision=\"delete\",reason=\"empty\",consolidation_type=\"empty\"} 1").is_some(),
            "{text}"
        );
        assert!(
            line(&text, "karpenter_voluntary_disruption_decisions_by_nodepool_total{nodepool=\"default\",decision=\"delete\",reason=\"empty\",consolidation_type=\"empty\"} 1").is_some(),
            "one count per pool, however many of its nodes: {text}"
        );
    }

    #[test]
    fn failed_validations_and_abandoned_commands_are_counted() {
        use karpenter_disruption::ConsolidationMethod;
        let m = Metrics::new();
        let command = |reason, method, candidates: &[&str]| {
            Box::new(Command {
                reason,
                decision: Decision::Replace,
                candidates: candidates
                    .iter()
                    .map(|n| karpenter_disruption::CandidateRef {
                        node: (*n).into(),
                        node_claim: (*n).into(),
                        node_pool: "default".into(),
                        price: 0.1,
                        pods: Vec::new(),
                    })
                    .collect(),
                replacements: Vec::new(),
                savings: 0.0,
                explanation: String::new(),
                created_at: 0,
                forceful: false,
                consolidation: method,
                repair: None,
            })
        };
        let multi = Some(ConsolidationMethod::MultiNode);
        let invalid = |command| {
            Event::Disruption(Outcome::Invalidated {
                command,
                reason: "a pod was nominated".into(),
            })
        };
        m.observe(&invalid(command(Reason::UNDERUTILIZED, multi, &["a", "b"])));
        m.observe(&invalid(command(Reason::DRIFTED, None, &["c"])));
        m.observe(&Event::Disruption(Outcome::Abandoned {
            command: command(Reason::UNDERUTILIZED, multi, &["a"]),
            node_claim: "replacement".into(),
        }));
        m.observe(&Event::Disruption(Outcome::Completed(command(
            Reason::UNDERUTILIZED,
            multi,
            &["a"],
        ))));
        let text = m.encode();
        assert_eq!(
            crate::tests::lines(
                &m,
                "karpenter_voluntary_disruption_failed_validations_total"
            ),
            [
                r#"karpenter_voluntary_disruption_failed_validations_total{consolidation_type="multi"} 2"#
            ],
            "each candidate of a consolidation command; drift is not validated upstream: {text}"
        );
        assert_eq!(
            crate::tests::lines(&m, "karpenter_voluntary_disruption_queue_failures_total"),
            [
                r#"karpenter_voluntary_disruption_queue_failures_total{decision="replace",reason="underutilized",consolidation_type="replace"} 1"#
            ]
        );
    }
}
