//! The disruption half of a tick: the command queue, the poll, orphaned taints.

use super::{Event, ProviderFacts, Reconciler, Tick};
use crate::repair_policy::{self, RepairMatcher};
use crate::{Action, ClusterState, DeletionCause, termination};
use karpenter_disruption::{
    DisruptionInput, DisruptionOptions, Hold, Reason, candidate, compute_pass_timed,
};
use karpenter_scheduling::model::Millis;
use std::collections::{BTreeMap, BTreeSet};

/// The disruption input at `now` with `disrupting` held by commands. NodeClaims in
/// `stamped` get a pod event at `now`: this tick stamps them, and a decision must not act on
/// the time the stamp is about to replace. `buffer_nodes` counts the CapacityBuffer virtual
/// pods the last plan put on each node (an in-flight node is named after its claim).
#[allow(clippy::too_many_arguments)]
fn input(
    index: &ClusterState,
    options: &DisruptionOptions,
    facts: &ProviderFacts,
    nominated: &BTreeSet<String>,
    disrupting: &BTreeSet<String>,
    stamped: &BTreeSet<String>,
    buffer_nodes: &BTreeMap<String, usize>,
    now: Millis,
) -> DisruptionInput {
    let mut input = index.disruption_input(now, options, disrupting, facts.drift, nominated);
    for (node, info) in input.nodes.iter_mut() {
        if stamped.contains(&info.node_claim) {
            info.last_pod_event_at = Some(now);
        }
        info.buffer_pods = buffer_nodes
            .get(node)
            .or_else(|| buffer_nodes.get(&info.node_claim))
            .copied()
            .unwrap_or(0);
    }
    if let Some(matcher) = repair_matcher(options, facts) {
        repair_policy::annotate(&mut input, index, &matcher, now);
    }
    input
}

/// An interruption command's deletion names the kind of the notice behind it, for the
/// announcement and the metric's reason (upstream's interruption controller labels them
/// with the message kind).
fn with_notice(index: &ClusterState, action: Action) -> Action {
    match action {
        Action::DeleteNodeClaim {
            node_claim,
            cause: DeletionCause::Disruption(Reason::Interrupted),
        } => {
            let cause = match index.interruptions().get(&node_claim) {
                Some(notice) => DeletionCause::Interruption(notice.kind),
                None => DeletionCause::Disruption(Reason::Interrupted),
            };
            Action::DeleteNodeClaim { node_claim, cause }
        }
        other => other,
    }
}

/// The provider's repair policies compiled, when node repair runs as a disruption method.
/// A set upstream would refuse (no fallback, a bad regex) repairs nothing.
fn repair_matcher(options: &DisruptionOptions, facts: &ProviderFacts) -> Option<RepairMatcher> {
    if !options.node_repair || facts.repair_policies.is_empty() {
        return None;
    }
    RepairMatcher::new(facts.repair_policies).ok()
}

impl Reconciler {
    pub(super) fn disrupt(
        &mut self,
        index: &ClusterState,
        facts: &ProviderFacts,
        now: Millis,
        tick: &mut Tick,
    ) {
        let nominated = self.nominated_nodes(now);
        let stamped: BTreeSet<String> = tick
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::StampPodEvent { node_claim, .. } => Some(node_claim.clone()),
                _ => None,
            })
            .collect();
        let options = &self.settings.disruption;
        if self.orchestrator.is_busy() {
            let buffer_nodes = &self.buffer_nodes;
            let fresh = |others: &BTreeSet<String>| {
                input(
                    index,
                    options,
                    facts,
                    &nominated,
                    others,
                    &stamped,
                    buffer_nodes,
                    now,
                )
            };
            let types = crate::provisioner::LaunchTypes::new(
                index,
                self.settings.disruption.solve.min_values_policy,
            );
            let (actions, outcomes) =
                self.orchestrator
                    .step(index, &fresh, &mut self.names, &types, now);
            if !outcomes.is_empty() {
                // A command that ended frees its nodes: the next poll must look at them
                // again, even with no change to the index.
                self.pass_memo = None;
            }
            tick.actions.extend(actions);
            tick.events
                .extend(outcomes.into_iter().map(Event::Disruption));
        }
        if let Some(due) = self.orchestrator.next_due() {
            tick.wake_at(due);
        }
        if self.orchestrator.is_busy() {
            // Replacements launching: their initialization is seen on a later tick.
            tick.wake_at(now + termination::RECONCILE_INTERVAL_MS);
        }

        // A new interruption notice is acted on at once, as upstream's interruption
        // controller does, not at the next poll.
        if index.interruptions_changed_after(self.interruptions_seen) {
            self.interruptions_seen = index.generation();
            self.next_disruption = self.next_disruption.min(now);
        }
        if now < self.next_disruption {
            tick.wake_at(self.next_disruption);
            return;
        }
        self.next_disruption = now + self.settings.disruption_interval;
        tick.wake_at(self.next_disruption);
        if !self.settings.observe_only {
            self.untaint_orphans(index, tick);
        }
        let inputs = (index.generation(), facts.version);
        if stamped.is_empty()
            && self
                .pass_memo
                .is_some_and(|(g, v, until)| (g, v) == inputs && now < until)
        {
            return;
        }
        let input = input(
            index,
            &self.settings.disruption,
            facts,
            &nominated,
            &self.orchestrator.disrupting(),
            &stamped,
            &self.buffer_nodes,
            now,
        );
        let started = (facts.seconds)();
        let result = compute_pass_timed(&input, now, &mut self.solve_cache, facts.seconds);
        let seconds = (facts.seconds)() - started;
        let mut until = self.pass_valid_until(index, &input, &result, now);
        if let Some(matcher) = repair_matcher(&self.settings.disruption, facts)
            && let Some(at) = repair_policy::next_eligible(index, &matcher, now)
        {
            until = until.min(at);
        }
        self.pass_memo = Some((inputs.0, inputs.1, until));
        for command in &result.commands {
            tick.events
                .push(Event::DisruptionDecided(Box::new(command.clone())));
            if !self.settings.observe_only {
                let actions = self.orchestrator.submit(command.clone());
                tick.actions
                    .extend(actions.into_iter().map(|a| with_notice(index, a)));
            }
        }
        self.drifted = candidate::drifted(&input);
        tick.events.push(Event::DisruptionPass {
            drifted: self.drifted.clone(),
            result: Box::new(result),
            seconds,
        });
        if let Some(due) = self.orchestrator.next_due() {
            tick.wake_at(due);
        }
    }

    /// Until when an unchanged index gives the same pass result: without a change to the
    /// index or the provider's facts, a pass can only decide differently once a timer runs
    /// out (consolidateAfter, expiry, a pod becoming Ready).
    fn pass_valid_until(
        &self,
        index: &ClusterState,
        input: &DisruptionInput,
        result: &karpenter_disruption::PassResult,
        now: Millis,
    ) -> Millis {
        let timers = index.node_pools().values().any(|p| {
            p.spec
                .disruption
                .budgets
                .iter()
                .any(|b| b.schedule.is_some())
        }) || index.pods().values().any(|p| {
            p.pod
                .annotations
                .get(karpenter_scheduling::labels::DO_NOT_DISRUPT)
                .is_some_and(|v| v != "true")
        });
        // Budget schedules and `do-not-disrupt` durations change the result at instants this
        // does not compute: such clusters are evaluated at every poll, as upstream does. So
        // is a pass that deletes forcefully, until those claims are seen deleting: a
        // deletion that failed is decided again at the next poll.
        if timers || result.commands.iter().any(|c| c.forceful) {
            return now;
        }
        let mut until = Millis::MAX;
        for e in &result.explanations {
            for h in &e.holds {
                if let Hold::ConsolidateAfter { remaining_ms } = h {
                    until = until.min(now + remaining_ms);
                }
            }
        }
        for info in input.nodes.values() {
            if let Some(exp) = info.expire_after {
                let at = info.created_at + exp;
                if at > now {
                    until = until.min(at);
                }
            }
        }
        // Budgets count Ready pods: a pod becoming Ready can allow an eviction.
        for p in index.pods().values() {
            if let Some(at) = p.ready_at.filter(|t| *t > now) {
                until = until.min(at);
            }
        }
        until
    }

    /// After a restart or failover the previous leader's command queue is gone; nodes it
    /// tainted `karpenter.sh/disrupted` but never deleted are untainted, as upstream does.
    /// A node must be seen so on two consecutive polls, so that a NodeClaim deletion still
    /// on its way to the index is not mistaken for an orphan.
    fn untaint_orphans(&mut self, index: &ClusterState, tick: &mut Tick) {
        let disrupting = self.orchestrator.disrupting();
        let orphans: BTreeSet<String> = index
            .nodes()
            .iter()
            .filter(|(name, record)| {
                let claim_deleting = record
                    .node_claim
                    .as_ref()
                    .and_then(|c| index.node_claims().get(c))
                    .is_some_and(|c| c.is_deleting());
                record.is_disrupted()
                    && !record.deleting
                    && !claim_deleting
                    && record.node_claim.is_some()
                    && !disrupting.contains(*name)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for node in orphans.intersection(&self.orphan_taints) {
            tick.events.push(Event::OrphanTaint { node: node.clone() });
            tick.actions
                .push(Action::UntaintDisrupted { node: node.clone() });
        }
        self.orphan_taints = orphans.difference(&self.orphan_taints).cloned().collect();
    }
}
