//! The provisioning half of a tick: batching, planning, nominations and launches.

use super::{Event, ProviderFacts, Reconciler, SolveProgress, Tick};
use crate::provisioner::{LaunchTypes, launch_actions};
use crate::{ClusterState, Scope};
use karpenter_scheduling::model::{Millis, PodKey};
use karpenter_scheduling::solve;
use std::collections::BTreeSet;

impl Reconciler {
    /// Plans once a batch closes. Provisionable pods are the pending pods the kube-scheduler
    /// marked unschedulable, plus the pods of deleting nodes: like upstream's provisioner,
    /// their new capacity launches while the old node still drains. CapacityBuffers' virtual
    /// pods are planned with them (see `buffers`).
    pub(super) fn provision(
        &mut self,
        index: &ClusterState,
        facts: &ProviderFacts,
        now: Millis,
        tick: &mut Tick,
    ) {
        let displaced = index.displaced_pods();
        let mut provisionable: BTreeSet<PodKey> =
            index.provisionable_pods().map(|p| p.pod.key()).collect();
        provisionable.extend(displaced.iter().map(|p| p.key()));
        let virtual_pods = self.buffer_pods(index, now);
        provisionable.extend(virtual_pods.iter().cloned());

        // A node that initializes with pods still pending changes what the kube-scheduler
        // could place: those pods are planned again rather than waiting for the re-plan.
        let initializations = index.initializations();
        if !provisionable.is_empty() && self.initializations != Some(initializations) {
            self.queue.trigger(now);
        }
        self.initializations = Some(initializations);
        self.nominated_nodes.retain(|_, until| *until > now);
        self.nominated_pods.retain(|k, _| provisionable.contains(k));
        self.unschedulable.retain(|k, _| provisionable.contains(k));
        let ready = self.queue.ready(&provisionable, now);
        if let Some(due) = self.queue.next_due(!provisionable.is_empty()) {
            tick.wake_at(due);
        }
        if !ready {
            return;
        }

        let mut snapshot = index.snapshot(now, Scope::Provisioner);
        snapshot
            .pending_pods
            .retain(|p| provisionable.contains(&p.key()));
        // Pods of deleting nodes are planned as if pending and no longer count where they
        // are (their node takes nothing new).
        let moving: BTreeSet<PodKey> = displaced.iter().map(|p| p.key()).collect();
        snapshot.bound_pods.retain(|p| !moving.contains(&p.key()));
        snapshot.pending_pods.extend(displaced);
        (facts.solving)(SolveProgress::Started {
            pods: snapshot.pending_pods.len(),
        });
        let started = (facts.seconds)();
        let mut plan = solve(&snapshot, &self.settings.solve);
        // A claim whose cheapest 60 types miss a minValues is not launched (upstream's
        // launch fails): its pods are reported as the plan's unschedulable pods.
        let types = LaunchTypes::new(index, self.settings.solve.min_values_policy);
        types.refuse_short_claims(&mut plan);
        let seconds = (facts.seconds)() - started;
        (facts.solving)(SolveProgress::Finished {
            unplaced: plan.unschedulable.len(),
        });
        // Buffers' claims launch like any other; everything after the launches sees only the
        // real pods.
        let claims = index.node_claims();
        let launches = launch_actions(
            &plan,
            index.node_pools(),
            &types,
            &mut self.names,
            &|n| claims.contains_key(n),
            now,
        );
        self.place_buffers(index, &virtual_pods, &mut plan, &mut tick.events);
        let pending = snapshot
            .pending_pods
            .len()
            .saturating_sub(virtual_pods.len());

        let window = self.settings.nomination_window();
        for placement in &plan.existing {
            for pod in &placement.pods {
                self.unschedulable.remove(pod);
            }
            self.nominated_nodes
                .insert(placement.node.clone(), now + window);
            for pod in &placement.pods {
                if self.nominated_pods.get(pod) != Some(&placement.node) {
                    self.nominated_pods
                        .insert(pod.clone(), placement.node.clone());
                    tick.events.push(Event::Nominated {
                        pod: pod.clone(),
                        node: placement.node.clone(),
                    });
                }
            }
        }
        for u in &plan.unschedulable {
            // Waiting for reserved capacity another claim was promised is not a scheduling
            // failure: upstream plans the pod again in a later round without an event.
            if u.deferred {
                continue;
            }
            if self.unschedulable.get(&u.pod) != Some(&u.reason) {
                self.unschedulable.insert(u.pod.clone(), u.reason.clone());
                tick.events.push(Event::FailedScheduling {
                    pod: u.pod.clone(),
                    reason: u.reason.clone(),
                });
            }
        }
        for placement in &plan.new_node_claims {
            for pod in &placement.pods {
                self.unschedulable.remove(pod);
            }
        }
        tick.actions.extend(launches);
        // A plan of virtual pods alone that launches nothing is not news (they are planned
        // again every re-plan period).
        if pending > 0 || !plan.new_node_claims.is_empty() {
            tick.events.push(Event::Planned {
                pods: pending,
                plan: Box::new(plan),
                seconds,
                at: now,
            });
        }
        if let Some(due) = self.queue.next_due(true) {
            tick.wake_at(due);
        }
    }
}
