//! The reconciler: every timing decision Karpenter makes between observing the cluster and
//! acting on it, in one place, for the controller and the simulator alike.
//!
//! [`Reconciler::tick`] takes the index, what only the cloud provider knows
//! ([`ProviderFacts`]) and the instant `now`, and returns a [`Tick`]: the [`Action`]s to carry
//! out, the [`Event`]s to log, publish or count, and when it next needs to run. It never
//! reads a clock, performs I/O or mutates the index; its own memory is the pacing state that
//! upstream keeps in its controllers (batch windows, nominations, the disruption queue and
//! poll). One tick runs, in order:
//!
//! 1. **lifecycle**: the next step of every NodeClaim not yet initialized (finalizer, launch,
//!    register, initialize, or give up after Karpenter's launch and registration timeouts;
//!    [`crate::registration`]);
//! 2. **repair**: unhealthy nodes past their policy's toleration are replaced, unless too
//!    many of their pool are unhealthy ([`crate::repair`]);
//! 3. **termination**: drain and terminate the nodes of deleting NodeClaims
//!    ([`crate::termination`]);
//! 4. **provisioning**: batch provisionable pods (1 s idle, 10 s max), plan them with
//!    `karpenter_scheduling::solve`, nominate the existing nodes the plan uses, and launch the
//!    new NodeClaims; CapacityBuffers' virtual pods are planned with them and their
//!    placements recorded (`buffers`, [`crate::capacity_buffer`]);
//! 5. **static NodePools** (with the `StaticCapacity` gate, [`ReconcilerSettings::static_capacity`]):
//!    create or delete NodeClaims so each static pool has `spec.replicas` of them, within
//!    `limits.nodes` ([`crate::static_capacity`]);
//! 6. **disruption**: advance the queued commands ([`crate::orchestration`]), and every poll
//!    interval compute a pass with `karpenter_disruption::compute_pass`; nodes tainted
//!    `karpenter.sh/disrupted` by a predecessor and held by no command are untainted.
//!
//! Decisions within one tick all read the same index; the caller applies the actions and the
//! index reflects them at the next tick, as a controller's watches do.

mod buffers;
pub mod conditions;
mod disruption;
mod event;
mod lifecycle;
pub mod pod_events;
mod provisioning;
mod repair;
mod static_pools;

pub use event::{Event, PlanSummary, StaticChange};
pub use repair::BLOCKED_REPORT_INTERVAL_MS;
pub use static_pools::STATIC_OBSERVE_MS;

use super::provisioner::{Batcher, NameGenerator, ProvisionQueue};
use super::{Action, ClusterState, termination};
use crate::orchestration::Orchestrator;
use karpenter_disruption::DisruptionOptions;
use karpenter_scheduling::SolveOptions;
use karpenter_scheduling::model::{Millis, PodKey};
use karpenter_scheduling::solver::SolveCache;
use std::collections::{BTreeMap, BTreeSet};

/// Upstream's disruption poll period.
pub const DISRUPTION_POLL_MS: Millis = 10_000;
/// Pending pods that were already planned are planned again after this long.
pub const RESOLVE_PERIOD_MS: Millis = 30_000;

/// How the reconciler paces its work.
#[derive(Debug, Clone)]
pub struct ReconcilerSettings {
    /// A batch closes after this long without a new provisionable pod.
    pub batch_idle: Millis,
    /// A batch closes at the latest this long after it opened.
    pub batch_max: Millis,
    /// Pods still pending this long after they were planned are planned again.
    pub resolve_after: Millis,
    /// Time between disruption passes.
    pub disruption_interval: Millis,
    /// Solver options for provisioning.
    pub solve: SolveOptions,
    /// Disruption options (the validation delay included).
    pub disruption: DisruptionOptions,
    /// Shadow mode: decide provisioning and disruption but start nothing. Ticks skip the
    /// NodeClaim lifecycle, repair and termination (the claims may be another autoscaler's),
    /// disruption commands are reported as [`Event::DisruptionDecided`] without entering the
    /// orchestration queue, and orphaned taints are left alone. Provisioning still returns its
    /// `LaunchNodeClaim` actions, for the caller to report instead of carrying out.
    pub observe_only: bool,
    /// Karpenter's `StaticCapacity` feature gate (default off, as upstream): static NodePools
    /// (`spec.replicas`) get their NodeClaims created and removed. Whatever the gate, static
    /// pools take no pending pods and are not consolidated, and drifted static nodes are
    /// replaced one for one, as upstream.
    pub static_capacity: bool,
}

impl Default for ReconcilerSettings {
    fn default() -> Self {
        Self {
            batch_idle: super::provisioner::DEFAULT_BATCH_IDLE_MS,
            batch_max: super::provisioner::DEFAULT_BATCH_MAX_MS,
            resolve_after: RESOLVE_PERIOD_MS,
            disruption_interval: DISRUPTION_POLL_MS,
            solve: SolveOptions::default(),
            disruption: DisruptionOptions::default(),
            observe_only: false,
            static_capacity: false,
        }
    }
}

impl ReconcilerSettings {
    /// Upstream's nomination window: twice the maximum batch duration, at least 10 s. A node
    /// the provisioner placed pending pods on is not a disruption candidate for this long.
    pub fn nomination_window(&self) -> Millis {
        (2 * self.batch_max).max(10_000)
    }
}

/// What only the cloud provider knows, sampled by the caller before a tick.
#[derive(Clone, Copy)]
pub struct ProviderFacts<'a> {
    /// Drift the provider reports, by NodeClaim name (the reason).
    pub drift: &'a BTreeMap<String, String>,
    /// Changes whenever anything the provider knows changed (drift, capacity, prices). A
    /// disruption pass whose inputs are all unchanged is skipped until a timer runs out.
    pub version: u64,
    /// The provider's node repair policies; empty when the `NodeRepair` gate is off.
    pub repair_policies: &'a [karpenter_cloudprovider::RepairPolicy],
    /// Seconds on the caller's monotonic clock, for the durations events report. The
    /// reconciler never reads a clock itself; the simulator passes a constant.
    pub seconds: &'a dyn Fn() -> f64,
    /// Told when a provisioning simulation starts and when it ends, while the tick is still
    /// running, so a caller can report work in progress (upstream's
    /// `karpenter_scheduler_unfinished_work_seconds`). The simulator ignores it.
    pub solving: &'a dyn Fn(SolveProgress),
}

/// A provisioning simulation's progress, as [`ProviderFacts::solving`] hears of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SolveProgress {
    /// A simulation of `pods` pods begins.
    Started {
        /// The pods queued for it.
        pods: usize,
    },
    /// The simulation ended; `unplaced` pods are left in its queue (no place found, or
    /// deferred to a later round).
    Finished {
        /// The pods it could not place.
        unplaced: usize,
    },
}

/// What one tick decided.
#[derive(Debug, Default)]
pub struct Tick {
    /// What to do, in order.
    pub actions: Vec<Action>,
    /// What happened, for logs, Kubernetes events and metrics.
    pub events: Vec<Event>,
    /// When the reconciler next has work even if nothing changes; `None` when it only needs
    /// to run again on a change.
    pub next_wakeup: Option<Millis>,
}

impl Tick {
    fn wake_at(&mut self, at: Millis) {
        self.next_wakeup = Some(self.next_wakeup.map_or(at, |t| t.min(at)));
    }
}

/// The pacing state of the provisioner and the disruption controller. Nothing in it is
/// needed for correctness after a restart: a fresh reconciler decides again from the objects.
pub struct Reconciler {
    settings: ReconcilerSettings,
    queue: ProvisionQueue,
    names: NameGenerator,
    orchestrator: Orchestrator,
    /// Nodes the provisioner placed pods on, until when.
    nominated_nodes: BTreeMap<String, Millis>,
    /// The node each pod was last nominated to (one event per change).
    nominated_pods: BTreeMap<PodKey, String>,
    /// Pods the last plan could not place, and why.
    unschedulable: BTreeMap<PodKey, String>,
    /// The index's initialization counter at the last tick (a new node re-plans pods left
    /// pending).
    initializations: Option<u64>,
    next_disruption: Millis,
    /// The inputs of the last disruption pass and until when its result stays valid.
    pass_memo: Option<(u64, u64, Millis)>,
    /// Nodes seen tainted `karpenter.sh/disrupted` with no command holding them.
    orphan_taints: BTreeSet<String>,
    /// The index generation of the last repair decision and until when it holds.
    repair_memo: Option<(u64, Millis)>,
    /// Nodes whose repair is blocked, and when that was last reported.
    repair_blocked: BTreeMap<String, Millis>,
    /// What disruption passes' scheduling simulations derive from unchanged nodes and
    /// NodePools, kept from one pass to the next (it never changes a result).
    solve_cache: SolveCache,
    /// The index generation up to which pod events were stamped.
    pod_events_seen: u64,
    /// Drifted NodeClaims (name to reason) as the last disruption pass found them.
    drifted: BTreeMap<String, String>,
    /// What the NodeClaim conditions step remembers between ticks.
    conditions: conditions::ConditionsState,
    /// Static pools' NodeClaims created and not yet seen in the index, with their pool and
    /// until when they count as created (a creation that failed is forgotten then).
    static_launches: BTreeMap<String, (String, Millis)>,
    /// Static pools' NodeClaims whose deletion was asked for and is not yet in the index,
    /// until when they count as deleting.
    static_deletions: BTreeMap<String, Millis>,
    /// Static pools held at `limits.nodes`, and when that was last reported.
    static_limited: BTreeMap<String, Millis>,
    /// Each NodePool's last registration outcomes (`NodeRegistrationHealthy`).
    registration_health: crate::registration_health::RegistrationHealth,
    /// Maturing NodeClaims whose outcome was counted there.
    outcomes_counted: BTreeSet<String>,
    /// Where the last plan put each CapacityBuffer's virtual pods.
    buffer_placements:
        BTreeMap<crate::capacity_buffer::BufferKey, crate::capacity_buffer::Placement>,
    /// Virtual pods the last plan put on each node (emptiness leaves those nodes alone).
    buffer_nodes: BTreeMap<String, usize>,
    /// The index generation up to which buffer changes and pod events were seen.
    buffers_seen: u64,
    /// The index generation up to which interruption notices were seen.
    interruptions_seen: u64,
}

impl Reconciler {
    /// A reconciler with empty pacing state, naming NodeClaims with `names`.
    pub fn new(settings: ReconcilerSettings, names: NameGenerator) -> Self {
        let batcher = Batcher::new(settings.batch_idle, settings.batch_max);
        Self {
            queue: ProvisionQueue::new(batcher, settings.resolve_after),
            orchestrator: Orchestrator::new(settings.disruption.validation_delay_ms),
            settings,
            names,
            nominated_nodes: BTreeMap::new(),
            nominated_pods: BTreeMap::new(),
            unschedulable: BTreeMap::new(),
            initializations: None,
            next_disruption: 0,
            pass_memo: None,
            orphan_taints: BTreeSet::new(),
            repair_memo: None,
            repair_blocked: BTreeMap::new(),
            solve_cache: SolveCache::new(),
            pod_events_seen: 0,
            drifted: BTreeMap::new(),
            conditions: conditions::ConditionsState::default(),
            static_launches: BTreeMap::new(),
            static_deletions: BTreeMap::new(),
            static_limited: BTreeMap::new(),
            registration_health: Default::default(),
            outcomes_counted: BTreeSet::new(),
            buffer_placements: BTreeMap::new(),
            buffer_nodes: BTreeMap::new(),
            buffers_seen: 0,
            interruptions_seen: 0,
        }
    }

    /// What each NodePool's `NodeRegistrationHealthy` should be, from the registrations and
    /// timeouts this reconciler saw ([`crate::nodepool_status::desired_status`] writes it).
    pub fn registration_health(&self) -> &crate::registration_health::RegistrationHealth {
        &self.registration_health
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &ReconcilerSettings {
        &self.settings
    }

    /// One reconcile at `now`: NodeClaim lifecycle, node repair, termination, provisioning,
    /// static NodePools, then disruption (only provisioning and disruption in
    /// [`ReconcilerSettings::observe_only`]).
    pub fn tick(&mut self, index: &ClusterState, facts: &ProviderFacts, now: Millis) -> Tick {
        let mut tick = Tick::default();
        if !self.settings.observe_only {
            self.mature(index, now, &mut tick);
            self.repair(index, facts, now, &mut tick);
            self.terminate(index, now, &mut tick);
            self.stamp_pod_events(index, now, &mut tick);
        }
        self.provision(index, facts, now, &mut tick);
        if self.settings.static_capacity && !self.settings.observe_only {
            self.keep_static(index, now, &mut tick);
        }
        self.disrupt(index, facts, now, &mut tick);
        if !self.settings.observe_only {
            self.claim_conditions(index, now, &mut tick);
        }
        // Termination ran before this tick's deletions: upstream's terminator would see them
        // through its watch at once, so the next reconcile must not wait for an unrelated
        // timer to start the drain.
        if tick.actions.iter().any(|a| {
            matches!(
                a,
                Action::DeleteNodeClaim { .. } | Action::DeleteNode { .. }
            )
        }) {
            tick.wake_at(now + termination::RECONCILE_INTERVAL_MS);
        }
        tick
    }

    /// Plans the provisionable pods again at the next tick, whatever the batch state: the
    /// provider reported a failed launch, so the plan's capacity will not come.
    pub fn replan(&mut self, now: Millis) {
        self.queue.trigger(now);
    }

    /// Nodes held by queued disruption commands.
    pub fn disrupting(&self) -> BTreeSet<String> {
        self.orchestrator.disrupting()
    }

    /// Pods the last plan could not place, with the reason.
    pub fn unschedulable(&self) -> &BTreeMap<PodKey, String> {
        &self.unschedulable
    }

    /// Nodes nominated for pending pods at `now`.
    pub fn nominated_nodes(&self, now: Millis) -> BTreeSet<String> {
        self.nominated_nodes
            .iter()
            .filter(|(_, until)| **until > now)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Upstream's terminator drains only nodes Karpenter manages (those of a NodeClaim).
    fn terminate(&mut self, index: &ClusterState, now: Millis, tick: &mut Tick) {
        tick.actions.extend(termination::start(index));
        let (actions, draining) = termination::step(index, now);
        let managed = |node: &str| {
            index
                .nodes()
                .get(node)
                .is_some_and(|r| r.node_claim.is_some())
        };
        tick.actions.extend(actions.into_iter().filter(|a| match a {
            Action::TaintDisrupted { node }
            | Action::EvictPod { node, .. }
            | Action::DeletePod { node, .. } => managed(node),
            _ => true,
        }));
        if termination::instances_shutting_down(index) {
            tick.wake_at(now + termination::INSTANCE_POLL_MS);
        }
        if draining {
            tick.wake_at(now + termination::RECONCILE_INTERVAL_MS);
        }
    }
}

#[cfg(test)]
mod buffer_tests;
#[cfg(test)]
mod interruption_tests;
#[cfg(test)]
mod static_tests;
#[cfg(test)]
mod tests;
