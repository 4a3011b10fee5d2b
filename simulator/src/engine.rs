//! The simulation engine: a virtual clock driving the cluster index, the fake cloud provider
//! and the controller logic of [`karpenter_cluster`], plus the parts of Kubernetes a cluster
//! would supply (kube-scheduler, workload and DaemonSet controllers, kubelet timings).
//!
//! Time advances from one instant of interest to the next (timeline events, batch windows,
//! lifecycle transitions, disruption ticks, drains, pod readiness, Job completions), so a
//! simulated day costs only as many steps as things happen. Everything is deterministic:
//! maps are ordered, names come from counters, and the provider has no clock.

use crate::Files;
use crate::buffers::Buffers;
use crate::controller_manager::{ControllerManager, JOB_SYNC_BATCH_PERIOD_MS};
use crate::kubelet;
use crate::lower_bound::{BoundRecorder, LowerBoundReport};
use crate::metrics::Metrics;
use crate::overlays::Overlays;
use crate::rate_limiter::RateLimiter;
use crate::scenario::{self, Action as Event, Scenario, Settings};
use crate::workloads::{Kind, Workload, WorkloadKey, Workloads};
use k8s_openapi::api::{
    apps::v1 as apps, batch::v1 as batch, core::v1 as core, policy::v1 as policy,
};
use karpenter_cloudprovider::v1::{
    ConditionStatus, ConditionType, NodeClaim, NodePool, StatusConditions,
};
use karpenter_cloudprovider::{CloudProvider, DriftReason, OfferingRef};
use karpenter_cloudprovider_fake::{FakeCloudProvider, FakeReservation};
use karpenter_cluster::api_objects::{quantities, service_selector, workload_selector};
use karpenter_cluster::default_spread::SourceKind;
use karpenter_cluster::launch_failure::{
    AfterLaunchFailure, LaunchErrorKind, after_launch_failure,
};
use karpenter_cluster::manifests::{Document, ManifestError};
use karpenter_cluster::orchestration::Outcome;
use karpenter_cluster::provisioner::{NameGenerator, time};
use karpenter_cluster::reconciler::{
    Event as Decided, PlanSummary, ProviderFacts, Reconciler, ReconcilerSettings, StaticChange,
    conditions,
};
use karpenter_cluster::{
    Action, ClusterState, DeletionCause, Kubelet, NodeRecord, Object, ObjectKey, PdbRecord,
    PodRecord, Scope, termination,
};
use karpenter_disruption::{
    Command, ConsolidationMethod, Decision, DisruptionOptions, InterruptionKind, Reason,
    RepackOptions,
};
use karpenter_scheduling::k8s::{
    daemonset_from_k8s, node_from_k8s, pdb_from_k8s, pod_from_k8s, pod_from_pod_template,
    pods_from_workload,
};
use karpenter_scheduling::model::{DaemonSet, InstanceType, Millis, NodeState, Pod, PodKey};
use karpenter_scheduling::taints::first_untolerated;
use karpenter_scheduling::{Plan, SolveOptions, labels, solve};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// How long after a pod event the controller's next pass stamps the NodeClaim: it passes
/// at least once a second.
const POD_EVENT_PASS_MS: Millis = 1_000;

/// The annotation that sets how long a Job's pods run once Ready.
pub const JOB_RUN_TIME_ANNOTATION: &str = "karpenter-rs/simulated-run-time";

/// Drives a future that never waits on I/O (the fake provider's) to completion.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// A simulation failed.
#[derive(Debug, thiserror::Error)]
pub enum SimulationError {
    /// A manifest or event is invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The catalogue could not be loaded.
    #[error("catalogue {path}: {message}")]
    Catalogue {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A setting the provider cannot honour (a capacity reservation of an unknown type).
    #[error("{field}: {message}")]
    Settings {
        /// The field (`spec.settings.capacityReservations[0]`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// An event refers to something that does not exist.
    #[error("{origin}: {message}")]
    Event {
        /// Where the event is written.
        origin: String,
        /// What is wrong.
        message: String,
    },
}

/// One decision, at a virtual instant.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// Milliseconds since the start.
    pub at: Millis,
    /// The message.
    pub message: String,
}

/// What varies between runs of the same scenario (`--compare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// Whether the packing optimiser runs (false: Karpenter-equivalent greedy first fit).
    pub optimizer: bool,
    /// Whether to compute the hourly lower bound ([`crate::lower_bound`]): it plans the
    /// wanted pods from scratch every sample, which costs a plan per distinct set.
    pub lower_bound: bool,
}

impl RunOptions {
    /// The optimiser on, no hourly lower bound: what `karpenter simulate` runs by default.
    pub const OPTIMIZED: Self = Self {
        optimizer: true,
        lower_bound: false,
    };
    /// The Karpenter-equivalent greedy first fit, no hourly lower bound.
    pub const GREEDY: Self = Self {
        optimizer: false,
        lower_bound: false,
    };
}

/// The pods the workloads want at an instant, as [`BoundRecorder`] tells sets apart: the
/// manifests' epoch (bumped whenever objects are applied or deleted), each workload's
/// wanted count and the bare pods.
type Wanted = (u64, Vec<(WorkloadKey, usize)>, Vec<PodKey>);

/// The engine.
pub struct Engine<'a> {
    scenario: &'a Scenario,
    settings: Settings,
    provider: FakeCloudProvider,
    catalogue: Vec<Arc<InstanceType>>,
    state: ClusterState,
    now: Millis,
    next_event: usize,
    workloads: Workloads,
    /// The index's generation and the workloads' version when the workload controllers last
    /// ran: with both unchanged, running them again would change nothing.
    workloads_synced: Option<(u64, u64)>,
    /// The workload controllers' pacing: which pod creations are sent when.
    controller_manager: ControllerManager,
    /// Pod creations sent later than now, by instant and order of sending.
    creations: BTreeMap<(Millis, u64), WorkloadKey>,
    creation_order: u64,
    /// Creations reserved and not yet arrived, per workload: the controllers count them as
    /// pods already (their expectations).
    in_flight: BTreeMap<WorkloadKey, u32>,
    /// An OrderedReady StatefulSet waits for a pod to become Ready before its next one.
    ordered_waiting: bool,
    /// Workloads whose spec changed since their controller last synced them: the Job
    /// controller syncs those at once, and other Jobs a batch period after a pod changed.
    spec_changed: BTreeSet<WorkloadKey>,
    /// The kube-scheduler's API client: its status updates and bindings share it.
    scheduler_client: RateLimiter,
    /// Pods whose `PodScheduled=False` update is sent later than now, by instant.
    marks: BTreeMap<(Millis, u64), PodKey>,
    /// The pods in `marks`.
    marking: BTreeSet<PodKey>,
    /// The controller logic, exactly as `karpenter controller` runs it.
    reconciler: Reconciler,
    /// When the reconciler asked to run again.
    reconcile_at: Option<Millis>,
    /// Bumped whenever something only the provider knows may have changed (timeline events,
    /// failed launches): the reconciler then evaluates disruption afresh.
    facts_version: u64,
    /// The `facts_version` the provider's facts (the index's instance types, `drift`) were
    /// last sampled at: they change only with it.
    sampled_version: Option<u64>,
    /// Drift the provider reports, by NodeClaim name.
    drift: BTreeMap<String, String>,
    /// NodeOverlays, applied to the pools' instance types.
    overlays: Overlays,
    /// CapacityBuffers and PodTemplates, resolved into the index at every step.
    buffers: Buffers,
    pod_counter: u64,
    scheduled_generation: Option<u64>,
    interruptions: BTreeMap<String, Millis>,
    solve_options: SolveOptions,
    /// What the report is built from.
    pub metrics: Metrics,
    /// The hourly lower bound, when asked for.
    bounds: Option<BoundRecorder<Wanted>>,
    /// The most pods one from-scratch plan of the hourly bound could not place.
    bound_unplaced: usize,
    /// Bumped whenever manifests are applied or deleted (part of [`Wanted`]).
    inputs_epoch: u64,
    log: &'a mut dyn FnMut(&LogLine),
}

impl<'a> Engine<'a> {
    /// Sets up the cluster at time 0 from the scenario's manifests, offering the instance
    /// types of the catalogue the scenario names (read through `files`) or the embedded one.
    /// Log lines go to `log`.
    pub fn new(
        scenario: &'a Scenario,
        options: RunOptions,
        files: &dyn Files,
        log: &'a mut dyn FnMut(&LogLine),
    ) -> Result<Self, SimulationError> {
        let settings = scenario.settings.clone();
        let catalogue = match &settings.catalogue {
            None => karpenter_catalog::default_instance_types().to_vec(),
            Some(path) => {
                let err = |message: String| SimulationError::Catalogue {
                    path: path.display().to_string(),
                    message,
                };
                let text = files.read_to_string(path).map_err(|e| err(e.to_string()))?;
                let cat = karpenter_catalog::Catalogue::from_json(&text)
                    .map_err(|e| err(e.to_string()))?;
                cat.instance_types(&karpenter_catalog::CatalogueOptions::default())
                    .map_err(|e| err(e.to_string()))?
            }
        };
        let provider = FakeCloudProvider::new(catalogue.clone())
            .with_node_pool_filtering(true)
            .with_launch_latency(std::time::Duration::from_millis(
                settings.launch_latency.0.unsigned_abs(),
            ))
            .with_reserved_capacity(settings.reserved_capacity);
        for (i, r) in settings.capacity_reservations.iter().enumerate() {
            let mut fake = FakeReservation::new(&r.id, &r.instance_type, &r.zone, r.count);
            fake.reservation_type = r.reservation_type.clone();
            fake.interruptible = r.interruptible;
            provider
                .add_reservation(fake)
                .map_err(|e| SimulationError::Settings {
                    field: format!("spec.settings.capacityReservations[{i}]"),
                    message: e.to_string(),
                })?;
        }
        let threshold = settings.repack_price_improvement_threshold;
        let min_node_age = settings.repack_min_node_age.0;
        let min_score = settings.repack_min_score;
        // Each re-pack setting against the range disruption accepts, named as the scenario
        // spells it.
        for (ok, field, value, expected) in [
            (
                RepackOptions::valid_threshold(threshold),
                "repackPriceImprovementThreshold",
                threshold.to_string(),
                RepackOptions::THRESHOLD_RANGE,
            ),
            (
                RepackOptions::valid_min_node_age(min_node_age),
                "repackMinNodeAge",
                format!("{min_node_age} ms"),
                RepackOptions::MIN_NODE_AGE_RANGE,
            ),
            (
                RepackOptions::valid_min_score(min_score),
                "repackMinScore",
                min_score.to_string(),
                RepackOptions::MIN_SCORE_RANGE,
            ),
        ] {
            if !ok {
                return Err(SimulationError::Settings {
                    field: format!("spec.settings.{field}"),
                    message: format!("{value} is out of range: expected {expected}"),
                });
            }
        }
        // The Karpenter-equivalent run (no optimiser) keeps to Karpenter's methods.
        let repack = (options.optimizer && settings.repack_consolidation).then(|| RepackOptions {
            price_improvement_threshold: threshold,
            min_node_age,
            min_score,
            ..RepackOptions::default()
        });
        let mut solve_options = SolveOptions {
            reserved_capacity: settings.reserved_capacity,
            ..SolveOptions::default()
        };
        solve_options.optimizer.enabled = options.optimizer;
        let reconciler = Reconciler::new(
            ReconcilerSettings {
                batch_idle: settings.batch_idle_duration.0,
                batch_max: settings.batch_max_duration.0,
                disruption_interval: settings.disruption_interval.0,
                solve: solve_options.clone(),
                disruption: DisruptionOptions {
                    spot_to_spot_consolidation: settings.spot_to_spot_consolidation,
                    validation_delay_ms: settings.validation_delay.0,
                    repack,
                    solve: solve_options.clone(),
                    ..DisruptionOptions::default()
                },
                static_capacity: settings.static_capacity,
                ..ReconcilerSettings::default()
            },
            NameGenerator::default(),
        );
        let mut engine = Self {
            scenario,
            reconciler,
            reconcile_at: None,
            facts_version: 0,
            sampled_version: None,
            drift: BTreeMap::new(),
            overlays: Overlays::new(settings.node_overlay),
            buffers: Buffers::new(settings.capacity_buffer),
            settings,
            provider,
            catalogue,
            state: ClusterState::new(),
            now: 0,
            next_event: 0,
            workloads: Workloads::default(),
            workloads_synced: None,
            controller_manager: ControllerManager::new(&scenario.settings.kube_controller_manager),
            creations: BTreeMap::new(),
            creation_order: 0,
            in_flight: BTreeMap::new(),
            spec_changed: BTreeSet::new(),
            ordered_waiting: false,
            scheduler_client: RateLimiter::new(
                scenario.settings.kube_scheduler.kube_api_qps,
                scenario.settings.kube_scheduler.kube_api_burst,
            ),
            marks: BTreeMap::new(),
            marking: BTreeSet::new(),
            pod_counter: 0,
            scheduled_generation: None,
            interruptions: BTreeMap::new(),
            solve_options,
            metrics: Metrics::new(scenario.duration, options.optimizer),
            bounds: options.lower_bound.then(BoundRecorder::default),
            bound_unplaced: 0,
            inputs_epoch: 0,
            log,
        };
        engine
            .state
            .set_scheduler_config(engine.settings.scheduler_config.0.as_ref());
        for doc in &scenario.manifests {
            engine.ingest(doc)?;
        }
        Ok(engine)
    }

    fn log(&mut self, message: impl Into<String>) {
        let line = LogLine {
            at: self.now,
            message: message.into(),
        };
        (self.log)(&line);
    }

    /// Runs to the end of the scenario; `progress` is called with the virtual time after
    /// each step.
    pub fn run(&mut self, progress: &mut dyn FnMut(Millis)) -> Result<(), SimulationError> {
        let end = self.scenario.duration;
        loop {
            self.step()?;
            self.metrics.sample(self.now, &self.state);
            let mut disrupting = self.reconciler.disrupting();
            disrupting.extend(
                self.state
                    .nodes()
                    .values()
                    .filter(|r| r.deleting)
                    .map(|r| r.node.name.clone()),
            );
            self.metrics.disrupting(disrupting.len());
            progress(self.now);
            if self.now >= end {
                break;
            }
            let next = self.next_wakeup().min(end);
            self.metrics.integrate(self.now, next, &self.state);
            self.record_bound(next);
            self.now = next;
        }
        // Only pods still pending at the end count as never scheduled.
        let unschedulable: BTreeMap<PodKey, String> = self
            .reconciler
            .unschedulable()
            .iter()
            .filter(|(k, _)| {
                self.state
                    .pods()
                    .get(*k)
                    .is_some_and(|p| p.pod.node_name.is_none())
            })
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect();
        self.metrics.finish(self.now, &self.state, &unschedulable);
        self.metrics
            .finish_reservations(&self.provider.reservations());
        Ok(())
    }

    /// The hourly lower bound's samples in `[now, until)`, while the wanted pods are what
    /// they are now.
    fn record_bound(&mut self, until: Millis) {
        let Some(mut bounds) = self.bounds.take() else {
            return;
        };
        let mut unplaced = self.bound_unplaced;
        bounds.record(
            self.now,
            until,
            || self.wanted(),
            || {
                let snapshot = self.wanted_snapshot();
                if snapshot.pending_pods.is_empty() {
                    return Ok(0.0);
                }
                let mut options = self.solve_options.clone();
                options.optimizer.enabled = true;
                let plan = solve(&snapshot, &options);
                unplaced = unplaced.max(plan.unschedulable.len());
                plan.lower_bound.ok_or(plan.total_price)
            },
        );
        self.bound_unplaced = unplaced;
        self.bounds = Some(bounds);
    }

    /// The hourly lower bound of the run so far (`None` unless asked for).
    pub fn lower_bound(&self) -> Option<LowerBoundReport> {
        self.bounds.as_ref().map(|b| LowerBoundReport {
            unplaced_pods: self.bound_unplaced,
            ..b.report(self.scenario.duration)
        })
    }

    /// Which pods the workloads want now (see [`Wanted`]).
    fn wanted(&self) -> Wanted {
        let workloads = self
            .workloads
            .iter()
            .map(|(k, w)| (k.clone(), w.desired(k.0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let bare = self
            .state
            .pods()
            .values()
            .filter(|p| p.pod.owner.is_none() && p.deleting_at.is_none())
            .map(|p| p.pod.key())
            .collect();
        (self.inputs_epoch, workloads, bare)
    }

    /// The wanted pods on an empty cluster: no nodes, nothing used of any limit, every pod
    /// pending (what `karpenter plan` of the same manifests would plan).
    fn wanted_snapshot(&self) -> karpenter_scheduling::Snapshot {
        let mut snapshot = self.state.snapshot(self.now, Scope::Provisioner);
        snapshot.nodes.clear();
        snapshot.bound_pods.clear();
        for pool in &mut snapshot.node_pools {
            pool.usage = Default::default();
        }
        let mut pods: Vec<Pod> = Vec::new();
        for (key, w) in self.workloads.iter() {
            let n = w.desired(key.0);
            let names: Vec<String> = if key.0 == Kind::StatefulSet {
                ordinal_names(key, w, n)
            } else {
                (0..n).map(|i| format!("{}-wanted-{i}", key.2)).collect()
            };
            for name in names {
                let mut pod = w.proto.clone();
                pod.uid = format!("wanted-{}-{name}", key.1);
                pod.name = name;
                pod.created_at = self.now;
                pods.push(pod);
            }
        }
        pods.extend(
            self.state
                .pods()
                .values()
                .filter(|p| p.pod.owner.is_none() && p.deleting_at.is_none())
                .map(|p| {
                    let mut pod = p.pod.clone();
                    pod.node_name = None;
                    pod.started_at = None;
                    pod
                }),
        );
        snapshot.pending_pods = pods;
        snapshot
    }

    fn next_wakeup(&self) -> Millis {
        let now = self.now;
        let mut candidates: Vec<Millis> = self.reconcile_at.into_iter().collect();
        if let Some(e) = self.scenario.timeline.get(self.next_event) {
            candidates.push(e.at);
        }
        candidates.extend(kubelet::step(&self.state, self.timings(), now).1);
        candidates.extend(self.interruptions.values().copied());
        candidates.extend(self.controller_manager.next_wakeup());
        candidates.extend(self.creations.keys().next().map(|(at, _)| *at));
        candidates.extend(self.marks.keys().next().map(|(at, _)| *at));
        // The controller passes at least once a second; pods bound or removed since the last
        // tick have their NodeClaims stamped by then.
        if self.reconciler.has_pod_events(&self.state) {
            candidates.push(now + POD_EVENT_PASS_MS);
        }
        // The controller launches a claim whose launch failed again on its next pass.
        if self
            .state
            .maturing_claims()
            .any(|(c, _)| !c.is_deleting() && !c.is(ConditionType::Launched))
        {
            candidates.push(now + POD_EVENT_PASS_MS);
        }
        // The kube-scheduler retries pods it could not place when the cluster changed.
        if self.state.pending_pods().next().is_some()
            && self.scheduled_generation != Some(self.state.generation())
        {
            candidates.push(now + termination::RECONCILE_INTERVAL_MS);
        }
        for p in self.state.pods().values() {
            if let Some(r) = p.ready_at {
                if r > now {
                    candidates.push(r);
                } else if let Some(done) = self.job_done_at(&p.pod, r) {
                    candidates.push(done);
                }
            }
        }
        candidates
            .into_iter()
            .map(|t| if t <= now { now + 1 } else { t })
            .min()
            .unwrap_or(now + 1)
    }

    fn timings(&self) -> kubelet::Timings {
        kubelet::Timings {
            registration: i64::try_from(self.provider.launch_latency().as_millis())
                .unwrap_or(i64::MAX),
            initialization: self.settings.initialization_delay.0,
        }
    }

    fn step(&mut self) -> Result<(), SimulationError> {
        while let Some(e) = self.scenario.timeline.get(self.next_event) {
            if e.at > self.now {
                break;
            }
            self.next_event += 1;
            if let Some(note) = &e.note {
                self.log(format!("scenario: {note}"));
            }
            let e = e.clone();
            // Some events change what only the provider knows (drift, capacity), which the
            // index's generation does not see.
            self.facts_version += 1;
            self.event(&e)?;
        }
        self.reclaim_interrupted();
        let (changes, _) = kubelet::step(&self.state, self.timings(), self.now);
        for change in changes {
            self.kubelet(change);
        }
        self.complete_job_pods();
        self.reconcile_workloads();
        self.schedule();
        self.sync_buffers();
        self.reconcile();
        // What the controller did (evictions, launches) shows in the cluster at once: the
        // workload controllers replace evicted pods and the kube-scheduler places them.
        self.reconcile_workloads();
        self.schedule();
        Ok(())
    }

    /// Resolves the CapacityBuffers against the workloads as they are now and hands them to
    /// the index (which changes only when they do).
    fn sync_buffers(&mut self) {
        let (resolved, lines) = self.buffers.resolve(&self.workloads);
        for line in lines {
            self.log(line);
        }
        self.state.set_capacity_buffers(resolved);
    }

    /// One pass of the shared reconciler, with the provider's current facts.
    fn reconcile(&mut self) {
        // The fake provider's drift and offerings change only through timeline events and
        // failed launches, which bump `facts_version`; asking it every step would only log
        // calls.
        if self.sampled_version != Some(self.facts_version) {
            self.refresh_instance_types();
            self.drift = self.drift_map();
            self.sampled_version = Some(self.facts_version);
        }
        let facts = ProviderFacts {
            drift: &self.drift,
            version: self.facts_version,
            // The simulated kubelet reports no node conditions: nothing to repair.
            repair_policies: &[],
            seconds: &|| 0.0,
            solving: &|_| {},
        };
        let mut tick = self.reconciler.tick(&self.state, &facts, self.now);
        self.reconcile_at = tick.next_wakeup;
        for event in tick.events {
            self.record(event);
        }
        self.overlays.annotate(&mut tick.actions);
        self.apply_all(tick.actions);
    }

    /// Logs and counts what the reconciler reports.
    fn record(&mut self, event: Decided) {
        match event {
            Decided::Planned { pods, plan, .. } => {
                self.metrics.solves += 1;
                self.log_plan(&plan, pods);
            }
            Decided::Nominated { .. } => {}
            Decided::FailedScheduling { pod, reason } => {
                self.log(format!("could not schedule pod {pod}: {reason}"));
            }
            Decided::DisruptionPass { .. } => self.metrics.disruption_passes += 1,
            Decided::DisruptionDecided(command) => {
                if command.forceful {
                    self.log(describe(&command, "disrupting node(s)"));
                    self.count_disruption(&command);
                }
            }
            Decided::Disruption(outcome) => self.log_outcome(&outcome),
            Decided::RepairBlocked { node, .. } => {
                self.log(format!(
                    "node {node} is unhealthy; repair blocked: too many unhealthy nodes"
                ));
            }
            Decided::LifecycleTimeout {
                node_claim,
                reason,
                message,
            } => self.log(format!(
                "deleting nodeclaim {node_claim} ({reason}): {message}"
            )),
            Decided::StaticCapacity {
                node_pool,
                current,
                desired,
                change,
            } => self.log(match change {
                StaticChange::Provision(claims) => format!(
                    "static nodepool {node_pool}: {current} of {desired} replica(s); creating {} nodeclaim(s) [{}]",
                    claims.len(),
                    claims.join(", ")
                ),
                StaticChange::Deprovision(claims) => format!(
                    "static nodepool {node_pool}: {current} of {desired} replica(s); deleting {} nodeclaim(s) [{}]",
                    claims.len(),
                    claims.join(", ")
                ),
                StaticChange::LimitReached => format!(
                    "static nodepool {node_pool}: {current} of {desired} replica(s); limits.nodes reached"
                ),
            }),
            Decided::CapacityBuffer {
                buffer,
                replicas,
                placement,
            } => self.log(placement.describe(&buffer, replicas)),
            Decided::OrphanTaint { node } => {
                self.log(format!(
                    "node {node} is tainted disrupted with no command; untainting"
                ));
            }
        }
    }

    // ----- manifests and events -------------------------------------------------------

    fn ingest(&mut self, doc: &Document) -> Result<(), ManifestError> {
        doc.refuse_older_karpenter_api()?;
        self.inputs_epoch += 1;
        let convert =
            |e: karpenter_scheduling::k8s::ConversionError| doc.invalid(e.field, e.reason);
        let kind = doc.kind().unwrap_or_default().to_owned();
        match kind.as_str() {
            "NodePool" => {
                let pool: NodePool = doc.decode_node_pool()?;
                self.apply_node_pool(pool)
                    .map_err(|e| doc.invalid("spec", e))?;
            }
            "CapacityBuffer" => {
                let buffer = doc.decode_capacity_buffer()?;
                let line = self.buffers.apply(buffer);
                self.log(line);
            }
            "PodTemplate" => {
                let pt: core::PodTemplate = doc.decode()?;
                pod_from_pod_template(&pt).map_err(convert)?;
                self.buffers.apply_pod_template(pt);
            }
            "NodeOverlay" => {
                let overlay = doc.decode_node_overlay()?;
                let line = self.overlays.apply(overlay);
                self.log(line);
                self.refresh_instance_types();
            }
            "Deployment" => {
                let w: apps::Deployment = doc.decode()?;
                let replicas = w.spec.replicas.unwrap_or(1);
                let mut one = w.clone();
                one.spec.replicas = Some(1);
                let proto = first_pod(pods_from_workload(&one).map_err(convert)?);
                self.add_selector(workload_selector(&w).map_err(convert)?);
                self.add_workload(Kind::Deployment, Workload::new(proto, replicas));
            }
            "ReplicaSet" => {
                let w: apps::ReplicaSet = doc.decode()?;
                let replicas = w.spec.replicas.unwrap_or(1);
                let mut one = w.clone();
                one.spec.replicas = Some(1);
                let proto = first_pod(pods_from_workload(&one).map_err(convert)?);
                self.add_selector(workload_selector(&w).map_err(convert)?);
                self.add_workload(Kind::ReplicaSet, Workload::new(proto, replicas));
            }
            "StatefulSet" => {
                let w: apps::StatefulSet = doc.decode()?;
                let replicas = w.spec.replicas.unwrap_or(1);
                let start = w.spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
                let mut one = w.clone();
                one.spec.replicas = Some(1);
                let proto = first_pod(pods_from_workload(&one).map_err(convert)?);
                self.add_selector(workload_selector(&w).map_err(convert)?);
                // Kubernetes' default policy creates one pod at a time.
                let ordered_ready = w.spec.pod_management_policy.as_deref() != Some("Parallel");
                self.add_workload(
                    Kind::StatefulSet,
                    Workload {
                        ordinal_start: start,
                        ordered_ready,
                        ..Workload::new(proto, replicas)
                    },
                );
            }
            "Job" => {
                let w: batch::Job = doc.decode()?;
                let spec = w.spec.as_ref();
                let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
                let completions = spec.and_then(|s| s.completions).unwrap_or(parallelism);
                let run_time = match w
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(JOB_RUN_TIME_ANNOTATION))
                {
                    Some(text) => karpenter_cloudprovider::duration::parse_go_duration(text)
                        .map(|n| n / 1_000_000)
                        .map_err(|e| {
                            doc.invalid(
                                format!("metadata.annotations[{JOB_RUN_TIME_ANNOTATION}]"),
                                e.to_string(),
                            )
                        })?,
                    None => self.settings.job_run_time.0,
                };
                let mut one = w.clone();
                one.status = None;
                if let Some(s) = one.spec.as_mut() {
                    s.parallelism = Some(1);
                    s.completions = None;
                    s.suspend = None;
                }
                let proto = first_pod(pods_from_workload(&one).map_err(convert)?);
                let suspended = spec.and_then(|s| s.suspend) == Some(true);
                self.add_workload(
                    Kind::Job,
                    Workload {
                        completions,
                        run_time: run_time.max(0),
                        ..Workload::new(proto, if suspended { 0 } else { parallelism })
                    },
                );
            }
            "Pod" => {
                let pod: core::Pod = doc.decode()?;
                let mut converted = pod_from_k8s(&pod).map_err(convert)?;
                converted.created_at = self.now;
                self.pod_counter += 1;
                converted.uid = format!("sim-{}", self.pod_counter);
                let bound = converted
                    .node_name
                    .as_ref()
                    .is_some_and(|n| self.state.nodes().contains_key(n));
                if !bound {
                    converted.node_name = None;
                }
                let ready_at = bound.then_some(self.now);
                if bound {
                    converted.started_at = Some(self.now);
                }
                self.metrics.pods_created += 1;
                self.state.apply(Object::Pod(Box::new(PodRecord {
                    pod: converted,
                    ready_at,
                    deleting_at: None,
                    unschedulable: false,
                })));
            }
            "DaemonSet" => {
                let ds: apps::DaemonSet = doc.decode()?;
                let ds = daemonset_from_k8s(&ds).map_err(convert)?;
                self.state.apply(Object::DaemonSet(Box::new(ds.clone())));
                let nodes: Vec<String> = self
                    .state
                    .nodes()
                    .iter()
                    .filter(|(_, r)| self.registered(r) && !r.deleting)
                    .map(|(n, _)| n.clone())
                    .collect();
                for node in nodes {
                    self.place_daemon(&ds, &node);
                }
            }
            "PodDisruptionBudget" => {
                let pdb: policy::PodDisruptionBudget = doc.decode()?;
                let budget = pdb_from_k8s(&pdb).map_err(convert)?;
                let spec = pdb.spec.clone().unwrap_or_default();
                self.state.apply(Object::Pdb(Box::new(PdbRecord {
                    budget,
                    min_available: spec.min_available,
                    max_unavailable: spec.max_unavailable,
                })));
            }
            "Namespace" => {
                let ns: core::Namespace = doc.decode()?;
                self.state.apply(Object::Namespace(
                    ns.metadata.name.clone().unwrap_or_default(),
                    ns.metadata.labels.clone().unwrap_or_default(),
                ));
            }
            "Node" => {
                let node: core::Node = doc.decode()?;
                let mut model = node_from_k8s(&node, &[]).map_err(convert)?;
                model.created_at = self.now;
                model.price = self.catalogue_price(&model);
                self.metrics.node_started(&model, self.now, false);
                self.state.apply(Object::Node(Box::new(NodeRecord {
                    node: model,
                    node_claim: None,
                    startup_taints: Vec::new(),
                    deleting: false,
                    kubelet: Kubelet::ready(),
                })));
            }
            // Its selector deduces default spread constraints; without them it plays no
            // part.
            "Service" => {
                let svc: core::Service = doc.decode()?;
                self.add_selector(Some(service_selector(&svc)));
                if !self.state.default_spread().is_active() {
                    self.ignore_kind(&kind);
                }
            }
            other => self.ignore_kind(other),
        }
        Ok(())
    }

    fn ignore_kind(&mut self, kind: &str) {
        *self
            .metrics
            .ignored_kinds
            .entry(kind.to_owned())
            .or_default() += 1;
    }

    fn add_selector(&mut self, source: Option<karpenter_cluster::default_spread::SelectorSource>) {
        if let Some(source) = source {
            self.state.apply(Object::SelectorSource(Box::new(source)));
        }
    }

    fn catalogue_price(&self, node: &karpenter_scheduling::Node) -> f64 {
        let Some(it) = node
            .instance_type()
            .and_then(|t| self.catalogue.iter().find(|i| i.name == t))
        else {
            return 0.0;
        };
        let cap = node
            .capacity_type()
            .unwrap_or(labels::CAPACITY_TYPE_ON_DEMAND);
        it.offering_price(node.zone(), cap).unwrap_or(0.0)
    }

    fn apply_node_pool(&mut self, pool: NodePool) -> Result<(), String> {
        pool.validate().map_err(|e| e.to_string())?;
        pool.to_model(Vec::new(), Default::default())
            .map_err(|e| e.to_string())?;
        let name = pool.name().to_owned();
        if let Some(old) = self.state.node_pools().get(&name) {
            let (before, after) = (old.hash(), pool.hash());
            if before != after {
                self.log(format!(
                    "updated nodepool {name} (template hash {before} -> {after})"
                ));
            } else {
                self.log(format!("updated nodepool {name}"));
            }
        }
        for field in pool.ignored_fields(self.settings.static_capacity) {
            self.log(format!("warning: nodepool {name}: {field}"));
        }
        let types = block_on(self.provider.instance_types(&pool)).unwrap_or_default();
        self.state.set_instance_types(&name, types);
        self.state.apply(Object::NodePool(Box::new(pool)));
        // Overlays are evaluated across every pool at once (a conflict in one withholds an
        // overlay from all), so a pool change re-evaluates them all.
        if self.overlays.active() {
            self.refresh_instance_types();
        }
        Ok(())
    }

    /// Creates or replaces a workload; a replaced one keeps its pod-name counter and its
    /// succeeded count. Its controller syncs it at once.
    fn add_workload(&mut self, kind: Kind, mut w: Workload) {
        let key = (kind, w.proto.namespace.clone(), workload_name(&w.proto));
        if let Some(old) = self.workloads.get(&key) {
            w.counter = old.counter;
            w.succeeded = old.succeeded;
        }
        self.spec_changed.insert(key.clone());
        self.workloads.insert(key, w);
    }

    fn event(&mut self, e: &scenario::TimedAction) -> Result<(), SimulationError> {
        let err = |message: String| SimulationError::Event {
            origin: e.origin.clone(),
            message,
        };
        match &e.action {
            Event::Advance => {}
            Event::Apply(docs) => {
                for doc in docs {
                    self.log(format!(
                        "applied {} {}",
                        doc.kind().unwrap_or_default(),
                        doc.name().unwrap_or_default()
                    ));
                    self.ingest(doc)?;
                }
            }
            Event::Delete(r) => {
                self.inputs_epoch += 1;
                self.delete_object(r).map_err(err)?;
            }
            Event::Scale {
                kind,
                namespace,
                name,
                replicas,
            } => {
                let k = Kind::parse(kind).ok_or_else(|| err(format!("cannot scale {kind}")))?;
                let key = (k, namespace.clone(), name.clone());
                let w = self
                    .workloads
                    .get_mut(&key)
                    .ok_or_else(|| err(format!("{kind} {namespace}/{name} does not exist")))?;
                w.replicas = *replicas;
                self.spec_changed.insert(key);
                self.log(format!(
                    "scaled {kind} {namespace}/{name} to {replicas} replica(s)"
                ));
            }
            Event::UpdateNodePool(u) => {
                self.inputs_epoch += 1;
                let pool = self
                    .state
                    .node_pools()
                    .get(&u.name)
                    .ok_or_else(|| err(format!("NodePool {:?} does not exist", u.name)))?;
                let mut value = serde_json::to_value(pool)
                    .map_err(|x| err(format!("NodePool {:?}: {x}", u.name)))?;
                merge_patch(&mut value, &u.patch);
                let patched: NodePool = serde_path_to_error::deserialize(&value).map_err(|x| {
                    err(format!(
                        "updateNodePool.patch: field {}: {}",
                        x.path(),
                        x.inner()
                    ))
                })?;
                if patched.name() != u.name {
                    return Err(err(
                        "updateNodePool.patch must not rename the NodePool".into()
                    ));
                }
                self.apply_node_pool(patched)
                    .map_err(|x| err(format!("updateNodePool: {x}")))?;
            }
            Event::Drift(d) => {
                let reason = d.reason.clone().unwrap_or_else(|| "AMIDrift".into());
                let claims: Vec<String> = self
                    .state
                    .node_claims()
                    .values()
                    .filter(|c| c.node_pool() == Some(d.node_pool.as_str()) && !c.is_deleting())
                    .map(|c| c.name().to_owned())
                    .collect();
                for c in &claims {
                    self.provider
                        .set_drifted(c.clone(), DriftReason::new(&reason));
                }
                self.log(format!(
                    "provider reports {reason} for {} nodeclaim(s) of nodepool {}",
                    claims.len(),
                    d.node_pool
                ));
            }
            Event::Interrupt(i) => {
                let targets = self.interrupt_targets(i);
                if targets.is_empty() {
                    self.log("spot interruption: no matching node");
                }
                for (node, claim) in targets {
                    self.log(format!(
                        "received spot interruption warning for node {node}; the instance is reclaimed in {}s",
                        self.settings.interruption_notice.0 / 1000
                    ));
                    self.interruptions.insert(
                        claim.clone(),
                        self.now + self.settings.interruption_notice.0,
                    );
                    // The index holds the notice; the tick's disruption pass deletes the
                    // claim, as in a cluster.
                    let spot = InterruptionKind::SpotInterruption;
                    self.state.record_interruption(&claim, spot, self.now);
                }
            }
            Event::InsufficientCapacity(o) => {
                let refs: Vec<OfferingRef> = self
                    .catalogue
                    .iter()
                    .filter(|it| o.instance_type.as_ref().is_none_or(|t| *t == it.name))
                    .flat_map(|it| {
                        it.offerings.iter().map(|off| OfferingRef {
                            instance_type: it.name.clone(),
                            zone: off.zone.clone(),
                            capacity_type: off.capacity_type.clone(),
                        })
                    })
                    .filter(|r| o.zone.as_ref().is_none_or(|z| *z == r.zone))
                    .filter(|r| {
                        o.capacity_type
                            .as_ref()
                            .is_none_or(|c| *c == r.capacity_type)
                    })
                    .collect();
                if refs.is_empty() {
                    return Err(err("insufficientCapacity matches no offering".into()));
                }
                self.log(format!(
                    "provider has insufficient capacity for {} offering(s) ({} {} {})",
                    refs.len(),
                    o.instance_type.as_deref().unwrap_or("any type"),
                    o.zone.as_deref().unwrap_or("any zone"),
                    o.capacity_type.as_deref().unwrap_or("any capacity type"),
                ));
                self.provider.insufficient_capacity(refs);
            }
            Event::FailLaunches(f) => {
                let reason = f
                    .reason
                    .clone()
                    .unwrap_or_else(|| karpenter_cluster::launch_failure::LAUNCH_FAILED.into());
                self.log(format!(
                    "provider fails the next {} launch(es) ({reason})",
                    f.count
                ));
                self.provider.fail_launches(f.count, reason);
            }
            Event::RestoreCapacity => {
                self.provider.clear_insufficient_capacity();
                self.provider.reset_unavailable_offerings();
                self.refresh_instance_types();
                self.log("provider capacity restored");
            }
        }
        Ok(())
    }

    fn interrupt_targets(&self, i: &scenario::Interrupt) -> Vec<(String, String)> {
        if let Some(node) = &i.node {
            return self
                .state
                .nodes()
                .get(node)
                .and_then(|r| r.node_claim.clone())
                .map(|c| vec![(node.clone(), c)])
                .unwrap_or_default();
        }
        let capacity = i
            .capacity_type
            .as_deref()
            .unwrap_or(labels::CAPACITY_TYPE_SPOT);
        let mut nodes: Vec<&NodeRecord> = self
            .state
            .nodes()
            .values()
            .filter(|r| r.node_claim.is_some() && !r.deleting)
            .filter(|r| r.node.capacity_type() == Some(capacity))
            .filter(|r| {
                i.node_pool
                    .as_ref()
                    .is_none_or(|p| r.node.node_pool.as_deref() == Some(p.as_str()))
            })
            .collect();
        nodes.sort_by(|a, b| {
            a.node
                .created_at
                .cmp(&b.node.created_at)
                .then_with(|| a.node.name.cmp(&b.node.name))
        });
        nodes
            .into_iter()
            .take(i.count.unwrap_or(1))
            .filter_map(|r| r.node_claim.clone().map(|c| (r.node.name.clone(), c)))
            .collect()
    }

    fn delete_object(&mut self, r: &scenario::ObjectRef) -> Result<(), String> {
        let ns = r.namespace.clone().unwrap_or_else(|| "default".into());
        if let Some(kind) = Kind::parse(&r.kind) {
            let key = (kind, ns.clone(), r.name.clone());
            if self.workloads.remove(&key).is_none() {
                return Err(format!("{} {ns}/{} does not exist", r.kind, r.name));
            }
            self.controller_manager.forget(&key);
            self.in_flight.remove(&key);
            self.creations.retain(|_, k| *k != key);
            self.spec_changed.remove(&key);
            let owned: Vec<PodKey> = self
                .state
                .pods()
                .values()
                .filter(|p| owned_by(&p.pod, kind, &ns, &r.name))
                .map(|p| p.pod.key())
                .collect();
            for k in owned {
                self.delete_pod(k);
            }
            if let Some(source) = SourceKind::of_owner(kind.as_str()) {
                self.state.delete(&ObjectKey::SelectorSource(
                    source,
                    ns.clone(),
                    r.name.clone(),
                ));
            }
            self.log(format!("deleted {} {ns}/{}", r.kind, r.name));
            return Ok(());
        }
        let found = match r.kind.as_str() {
            "Pod" => self
                .state
                .delete(&ObjectKey::Pod(PodKey::new(ns.clone(), r.name.clone()))),
            "PodDisruptionBudget" => self
                .state
                .delete(&ObjectKey::Pdb(ns.clone(), r.name.clone())),
            "Namespace" => self.state.delete(&ObjectKey::Namespace(r.name.clone())),
            "Service" => self.state.delete(&ObjectKey::SelectorSource(
                SourceKind::Service,
                ns.clone(),
                r.name.clone(),
            )),
            "DaemonSet" => {
                let pods: Vec<PodKey> = self
                    .state
                    .pods()
                    .values()
                    .filter(|p| {
                        p.pod.namespace == ns
                            && p.pod
                                .owner
                                .as_ref()
                                .is_some_and(|o| o.kind == "DaemonSet" && o.name == r.name)
                    })
                    .map(|p| p.pod.key())
                    .collect();
                for k in pods {
                    self.delete_pod(k);
                }
                self.state
                    .delete(&ObjectKey::DaemonSet(ns.clone(), r.name.clone()))
            }
            "NodePool" => {
                let found = self.state.delete(&ObjectKey::NodePool(r.name.clone()));
                let claims: Vec<String> = self
                    .state
                    .node_claims()
                    .values()
                    .filter(|c| c.node_pool() == Some(r.name.as_str()))
                    .map(|c| c.name().to_owned())
                    .collect();
                for c in claims {
                    self.apply(Action::DeleteNodeClaim {
                        node_claim: c,
                        cause: DeletionCause::NodePoolDeleted,
                    });
                }
                found
            }
            "Node" => match self.state.nodes().get(&r.name).cloned() {
                Some(rec) => {
                    match rec.node_claim {
                        Some(c) => self.apply(Action::DeleteNodeClaim {
                            node_claim: c,
                            cause: DeletionCause::NodeDeleted,
                        }),
                        None => self.remove_node(&r.name),
                    }
                    true
                }
                None => false,
            },
            "NodeOverlay" => {
                let found = self.overlays.delete(&r.name);
                self.refresh_instance_types();
                found
            }
            "CapacityBuffer" | "PodTemplate" => self.buffers.delete(&r.kind, &ns, &r.name),
            other => return Err(format!("cannot delete objects of kind {other}")),
        };
        if !found {
            return Err(format!("{} {} does not exist", r.kind, r.name));
        }
        self.log(format!("deleted {} {}", r.kind, r.name));
        Ok(())
    }

    fn refresh_instance_types(&mut self) {
        let pools: Vec<NodePool> = self.state.node_pools().values().cloned().collect();
        let raw = pools
            .iter()
            .map(|pool| {
                let types = block_on(self.provider.instance_types(pool)).unwrap_or_default();
                (pool.name().to_owned(), types)
            })
            .collect();
        let (types, lines) = self.overlays.apply_to(&pools, raw);
        for line in lines {
            self.log(line);
        }
        for (pool, types) in types {
            self.state.set_instance_types(&pool, types);
        }
    }

    // ----- Kubernetes stand-ins -----------------------------------------------------------

    fn registered(&self, r: &NodeRecord) -> bool {
        r.node_claim.as_ref().is_none_or(|c| {
            self.state
                .node_claims()
                .get(c)
                .is_some_and(|c| c.is(ConditionType::Registered))
        })
    }

    /// The DaemonSet controller: one pod per node whose labels match the pod's node selector
    /// and whose taints it tolerates.
    fn place_daemon(&mut self, ds: &DaemonSet, node: &str) {
        let Some(record) = self.state.nodes().get(node) else {
            return;
        };
        let fits = ds
            .pod
            .node_selector
            .iter()
            .all(|(k, v)| record.node.labels.get(k) == Some(v))
            && first_untolerated(&record.node.taints, &ds.pod.tolerations, false).is_none();
        if !fits {
            return;
        }
        let mut pod = ds.pod.clone();
        pod.name = format!("{}-{}", ds.name, node);
        pod.namespace = ds.namespace.clone();
        pod.node_name = Some(node.to_owned());
        pod.created_at = self.now;
        pod.started_at = Some(self.now);
        self.pod_counter += 1;
        pod.uid = format!("sim-{}", self.pod_counter);
        self.state.apply(Object::Pod(Box::new(PodRecord {
            pod,
            ready_at: Some(self.now + self.settings.pod_startup_time.0),
            deleting_at: None,
            unschedulable: false,
        })));
    }

    fn job_done_at(&self, pod: &Pod, ready_at: Millis) -> Option<Millis> {
        let owner = pod.owner.as_ref().filter(|o| o.kind == "Job")?;
        let w = self
            .workloads
            .get(&(Kind::Job, pod.namespace.clone(), owner.name.clone()))?;
        Some(ready_at + w.run_time)
    }

    fn complete_job_pods(&mut self) {
        let done: Vec<(PodKey, String)> = self
            .state
            .pods()
            .values()
            .filter(|p| p.pod.node_name.is_some())
            .filter_map(|p| {
                let at = self.job_done_at(&p.pod, p.ready_at?)?;
                let job = p.pod.owner.as_ref()?.name.clone();
                (at <= self.now).then(|| (p.pod.key(), job))
            })
            .collect();
        for (key, job) in done {
            self.delete_pod(key.clone());
            let wkey = (Kind::Job, key.namespace.clone(), job.clone());
            let Some(w) = self.workloads.get_mut(&wkey) else {
                continue;
            };
            w.succeeded += 1;
            self.metrics.completed += 1;
            if w.succeeded >= w.completions && !w.complete {
                w.complete = true;
                let n = w.succeeded;
                self.log(format!(
                    "job {}/{job} completed ({n} pod(s) succeeded)",
                    key.namespace
                ));
            }
        }
    }

    /// The workload controllers: ask their controller to create missing pods, delete
    /// surplus ones at once (pending first, then the newest), and create the pods whose
    /// requests are sent by now.
    fn reconcile_workloads(&mut self) {
        // Each run leaves every workload with its desired pods or a sync asked for, so a run
        // over unchanged pods and workloads (most steps: a pod becoming Ready changes
        // neither) has nothing to do, unless an OrderedReady StatefulSet waits for a pod to
        // become Ready.
        let key = (self.state.generation(), self.workloads.version());
        if self.workloads_synced != Some(key) || self.ordered_waiting {
            self.sync_workloads();
            self.workloads_synced = Some((self.state.generation(), self.workloads.version()));
        }
        self.run_controllers();
    }

    /// What each workload has now: its live pods, and for a StatefulSet which ordinals
    /// exist and whether each is Ready.
    fn owned(&self) -> BTreeMap<WorkloadKey, Owned> {
        let mut owned: BTreeMap<WorkloadKey, Owned> = BTreeMap::new();
        for p in self.state.pods().values() {
            if let Some(o) = &p.pod.owner
                && let Some(kind) = Kind::parse(&o.kind)
            {
                let entry = owned
                    .entry((kind, p.pod.namespace.clone(), o.name.clone()))
                    .or_default();
                entry.pods.push(p.pod.key());
                if kind == Kind::StatefulSet {
                    let ready = p.is_ready(self.now);
                    entry.names.insert(p.pod.name.clone(), ready);
                }
            }
        }
        owned
    }

    fn sync_workloads(&mut self) {
        let owned = self.owned();
        let mut remove: Vec<PodKey> = Vec::new();
        let mut requests: Vec<(WorkloadKey, Millis)> = Vec::new();
        self.ordered_waiting = false;
        for (key, w) in self.workloads.iter() {
            let have = owned.get(key);
            let pods: Vec<&PodRecord> = have
                .map(|o| {
                    o.pods
                        .iter()
                        .filter_map(|k| self.state.pods().get(k))
                        .collect()
                })
                .unwrap_or_default();
            let desired = w.desired(key.0);
            if key.0 == Kind::StatefulSet {
                let names: BTreeSet<String> = ordinal_names(key, w, desired).into_iter().collect();
                remove.extend(
                    pods.iter()
                        .filter(|p| !names.contains(&p.pod.name))
                        .map(|p| p.pod.key()),
                );
            } else if pods.len() > desired {
                let mut victims = pods.clone();
                victims.sort_by(|a, b| {
                    a.pod
                        .node_name
                        .is_some()
                        .cmp(&b.pod.node_name.is_some())
                        .then_with(|| b.pod.created_at.cmp(&a.pod.created_at))
                        .then_with(|| b.pod.name.cmp(&a.pod.name))
                });
                remove.extend(
                    victims
                        .iter()
                        .take(pods.len() - desired)
                        .map(|p| p.pod.key()),
                );
            }
            let missing = missing_pods(key, w, have, self.in_flight_of(key));
            if key.0 == Kind::StatefulSet && w.ordered_ready && missing == 0 {
                let live = have.map_or(0, |o| o.names.len());
                self.ordered_waiting |= live < desired;
            }
            if missing > 0 && !self.controller_manager.busy(key) {
                // The Job controller syncs a Job a batch period after one of its pods
                // changed, and at once after the Job itself did.
                let delay = if key.0 == Kind::Job && !self.spec_changed.contains(key) {
                    JOB_SYNC_BATCH_PERIOD_MS
                } else {
                    0
                };
                requests.push((key.clone(), self.now + delay));
            }
        }
        for key in remove {
            self.delete_pod(key);
        }
        for (key, at) in requests {
            self.controller_manager.request(&key, at);
            self.spec_changed.remove(&key);
        }
    }

    fn in_flight_of(&self, key: &WorkloadKey) -> u32 {
        self.in_flight.get(key).copied().unwrap_or(0)
    }

    /// Runs the workload controllers to now and creates the pods whose requests are sent.
    fn run_controllers(&mut self) {
        if self
            .controller_manager
            .next_wakeup()
            .is_some_and(|t| t <= self.now)
        {
            let owned = self.owned();
            let mut sent: Vec<(Millis, WorkloadKey)> = Vec::new();
            let (workloads, in_flight) = (&self.workloads, &self.in_flight);
            self.controller_manager.advance(
                self.now,
                &mut |key, sent_now| {
                    let Some(w) = workloads.get(key) else {
                        return 0;
                    };
                    let flying = in_flight.get(key).copied().unwrap_or(0) + sent_now;
                    missing_pods(key, w, owned.get(key), flying)
                },
                &mut sent,
            );
            for (at, key) in sent {
                self.creation_order += 1;
                *self.in_flight.entry(key.clone()).or_default() += 1;
                self.creations.insert((at, self.creation_order), key);
            }
        }
        while let Some(entry) = self.creations.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let key = entry.remove();
            if let Some(n) = self.in_flight.get_mut(&key) {
                *n = n.saturating_sub(1);
            }
            self.create_pod(&key);
        }
    }

    /// The pod a controller's create request makes, as it arrives.
    fn create_pod(&mut self, key: &WorkloadKey) {
        let Some(w) = self.workloads.get(key) else {
            return;
        };
        let mut pod = w.proto.clone();
        if key.0 == Kind::StatefulSet {
            // The lowest ordinal missing (none: the set shrank meanwhile, nothing to create).
            let taken: BTreeSet<String> = self
                .state
                .pods()
                .values()
                .filter(|p| owned_by(&p.pod, key.0, &key.1, &key.2))
                .map(|p| p.pod.name.clone())
                .collect();
            let Some(name) = ordinal_names(key, w, w.desired(key.0))
                .into_iter()
                .find(|n| !taken.contains(n))
            else {
                return;
            };
            pod.name = name;
        } else {
            let Some(w) = self.workloads.get_mut(key) else {
                return;
            };
            pod.name = format!("{}-{}", key.2, w.counter);
            w.counter += 1;
        }
        pod.created_at = self.now;
        self.pod_counter += 1;
        pod.uid = format!("sim-{}", self.pod_counter);
        self.metrics.pods_created += 1;
        self.state.apply(Object::Pod(Box::new(PodRecord {
            pod,
            ready_at: None,
            deleting_at: None,
            unschedulable: false,
        })));
    }

    /// The kube-scheduler: binds pending pods to Ready nodes with the solver's own fit
    /// checks (a solve over Ready nodes and no NodePools can only place pods on them), and
    /// marks the others `PodScheduled=False` / `Unschedulable`. Both are requests of its
    /// client, sent at its rate: a pod counts as marked when its update is sent, and as
    /// bound (its pending time ends, it starts) when its binding is.
    fn schedule(&mut self) {
        self.apply_marks();
        let generation = self.state.generation();
        if self.scheduled_generation == Some(generation) {
            return;
        }
        self.scheduled_generation = Some(generation);
        if self.state.pending_pods().next().is_none() {
            return;
        }
        let snapshot = self.state.snapshot(self.now, Scope::Scheduler);
        if snapshot.nodes.iter().any(|n| n.state == NodeState::Ready) {
            self.bind(&snapshot);
        }
        // What it could not place it marks, in its queue's order (priority, then age).
        let mut unmarked: Vec<(i32, Millis, PodKey)> = self
            .state
            .pending_pods()
            .filter(|p| !p.unschedulable && !self.marking.contains(&p.pod.key()))
            .map(|p| (-p.pod.priority, p.pod.created_at, p.pod.key()))
            .collect();
        unmarked.sort();
        for (_, _, key) in unmarked {
            let at = self.scheduler_client.reserve(self.now);
            self.creation_order += 1;
            self.marking.insert(key.clone());
            self.marks.insert((at, self.creation_order), key);
        }
        self.apply_marks();
        self.scheduled_generation = Some(self.state.generation());
    }

    /// Marks the pods whose status update is sent by now (those still pending).
    fn apply_marks(&mut self) {
        while let Some(entry) = self.marks.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let key = entry.remove();
            self.marking.remove(&key);
            if let Some(record) = self.state.pods().get(&key)
                && record.pod.node_name.is_none()
                && !record.unschedulable
            {
                let mut record = record.clone();
                record.unschedulable = true;
                self.state.apply(Object::Pod(Box::new(record)));
            }
        }
    }

    /// Binds the pending pods of `snapshot` that fit its Ready nodes. The scheduler assumes
    /// each pod on its node at once (nothing else takes the room); the binding is sent at
    /// its client's rate.
    fn bind(&mut self, snapshot: &karpenter_scheduling::Snapshot) {
        let plan = solve(snapshot, &self.solve_options);
        for placement in &plan.existing {
            for key in &placement.pods {
                let Some(record) = self.state.pods().get(key).cloned() else {
                    continue;
                };
                let bound = self.scheduler_client.reserve(self.now);
                let mut record = record;
                record.pod.node_name = Some(placement.node.clone());
                record.pod.started_at = Some(bound);
                record.ready_at = Some(bound + self.settings.pod_startup_time.0);
                record.unschedulable = false;
                self.metrics.pod_bound(bound - record.pod.created_at);
                self.state.apply(Object::Pod(Box::new(record)));
            }
        }
    }

    // ----- provisioning and disruption, as the reconciler reports them ---------------

    fn log_plan(&mut self, plan: &Plan, pending: usize) {
        if plan.new_node_claims.is_empty() {
            return;
        }
        let summary = PlanSummary::of(plan, 5);
        let mut list = summary.options.join(", ");
        if summary.more_options > 0 {
            list.push_str(&format!(" and {} other(s)", summary.more_options));
        }
        let bound = match (plan.lower_bound, plan.greedy_price) {
            (Some(lb), Some(g)) if g > plan.total_price + 1e-9 => format!(
                "; ${:.4}/h (greedy ${g:.4}/h, lower bound ${lb:.4}/h)",
                plan.total_price
            ),
            _ => format!("; ${:.4}/h", plan.total_price),
        };
        self.log(format!(
            "found {pending} provisionable pod(s); computed {} new node(s) will fit {} pod(s) with instance type option(s) [{list}]{bound}",
            summary.node_claims, summary.pods
        ));
    }

    // ----- disruption -----------------------------------------------------------------

    fn drift_map(&self) -> BTreeMap<String, String> {
        self.state
            .node_claims()
            .values()
            .filter_map(|c| {
                block_on(self.provider.is_drifted(c))
                    .ok()
                    .flatten()
                    .map(|r| (c.name().to_owned(), r.0))
            })
            .collect()
    }

    fn count_disruption(&mut self, command: &Command) {
        self.metrics
            .disrupted(command.reason.as_str(), command.candidates.len(), self.now);
    }

    fn log_outcome(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Started(c) => {
                self.count_disruption(c);
                self.log(describe(c, "disrupting node(s)"));
            }
            Outcome::Invalidated { command, reason } => {
                self.metrics.invalidated_commands += 1;
                self.log(format!(
                    "abandoned {} command for {}: {reason}",
                    command.reason,
                    command.node_names().join(", ")
                ));
            }
            Outcome::Completed(c) => {
                if !c.replacements.is_empty() {
                    self.log(format!(
                        "replacement(s) initialized; deleting {}",
                        c.node_names().join(", ")
                    ));
                }
            }
            Outcome::Abandoned {
                command,
                node_claim,
            } => self.log(format!(
                "abandoned {} command for {}: replacement {node_claim} failed to launch",
                command.reason,
                command.node_names().join(", ")
            )),
        }
    }

    fn reclaim_interrupted(&mut self) {
        let due: Vec<String> = self
            .interruptions
            .iter()
            .filter(|(_, at)| **at <= self.now)
            .map(|(c, _)| c.clone())
            .collect();
        for claim in due {
            self.interruptions.remove(&claim);
            let Some(node) = self
                .state
                .nodes()
                .values()
                .find(|r| r.node_claim.as_deref() == Some(claim.as_str()))
                .map(|r| r.node.name.clone())
            else {
                continue;
            };
            let pods: Vec<PodKey> = self.state.pods_on(&node).map(|p| p.pod.key()).collect();
            self.log(format!(
                "instance of node {node} reclaimed by the provider ({} pod(s) still on it)",
                pods.len()
            ));
            for p in pods {
                self.metrics.evictions += 1;
                self.delete_pod(p);
            }
            let node = Some(node);
            self.apply(Action::TerminateInstance {
                node_claim: claim,
                node,
            });
        }
    }

    // ----- carrying out actions ---------------------------------------------------------

    /// A change the simulated kubelet makes to a claim's Node (the claim's name is the
    /// Node's).
    fn kubelet(&mut self, change: kubelet::Change) {
        let (name, kubelet) = match change {
            kubelet::Change::Join(name) => (
                name,
                Kubelet::Joined {
                    waiting_for: Some("node is not Ready".into()),
                    conditions: Vec::new(),
                },
            ),
            kubelet::Change::Ready(name) => (name, Kubelet::ready()),
        };
        let Some(mut record) = self.state.nodes().get(&name).cloned() else {
            return;
        };
        if kubelet.initializable() {
            // The node's agents finished: their startup taints are gone.
            record.startup_taints.clear();
        }
        record.kubelet = kubelet;
        self.state.apply(Object::Node(Box::new(record)));
    }

    fn apply_all(&mut self, actions: Vec<Action>) {
        for a in actions {
            self.apply(a);
        }
    }

    fn apply(&mut self, action: Action) {
        let now = self.now;
        match action {
            Action::LaunchNodeClaim { claim, plan } => self.launch(*claim, &plan),
            Action::AddTerminationFinalizer { node_claim } => {
                let Some(mut claim) = self.state.node_claims().get(&node_claim).cloned() else {
                    return;
                };
                claim
                    .metadata
                    .finalizers
                    .get_or_insert_with(Vec::new)
                    .push(karpenter_cloudprovider::v1::labels::TERMINATION_FINALIZER.to_owned());
                self.state.apply(Object::NodeClaim(Box::new(claim)));
            }
            Action::LaunchInstance { node_claim } => {
                if let Some(claim) = self.state.node_claims().get(&node_claim).cloned() {
                    self.launch_instance(claim);
                }
            }
            Action::RegisterNode { node_claim, .. } => {
                let Some(mut claim) = self.state.node_claims().get(&node_claim).cloned() else {
                    return;
                };
                claim.set_true(ConditionType::Registered.as_str(), time(now));
                if let Some(s) = claim.status.as_mut() {
                    s.node_name = node_claim.clone();
                }
                self.state.apply(Object::NodeClaim(Box::new(claim)));
                if let Some(mut record) = self.state.nodes().get(&node_claim).cloned() {
                    record
                        .node
                        .labels
                        .insert(labels::NODE_REGISTERED.to_owned(), "true".into());
                    self.state.apply(Object::Node(Box::new(record)));
                }
                self.log(format!(
                    "registered nodeclaim {node_claim} (node {node_claim})"
                ));
                let daemons: Vec<DaemonSet> = self.state.daemon_sets().cloned().collect();
                for ds in daemons {
                    self.place_daemon(&ds, &node_claim);
                }
            }
            Action::InitializeNode { node_claim, node } => {
                let Some(mut claim) = self.state.node_claims().get(&node_claim).cloned() else {
                    return;
                };
                claim.set_true(ConditionType::Initialized.as_str(), time(now));
                let removed = claim.spec.startup_taints.len();
                self.state.apply(Object::NodeClaim(Box::new(claim)));
                if let Some(mut record) = self.state.nodes().get(&node).cloned() {
                    record
                        .node
                        .labels
                        .insert(labels::NODE_INITIALIZED.to_owned(), "true".into());
                    self.state.apply(Object::Node(Box::new(record)));
                    let extra = if removed > 0 {
                        format!(", {removed} startup taint(s) removed")
                    } else {
                        String::new()
                    };
                    self.log(format!("initialized nodeclaim {node_claim}{extra}"));
                }
            }
            Action::TaintDisrupted { node } => {
                if let Some(mut record) = self.state.nodes().get(&node).cloned()
                    && !record.is_disrupted()
                {
                    record
                        .node
                        .taints
                        .push(karpenter_cluster::disrupted_taint());
                    self.state.apply(Object::Node(Box::new(record)));
                    self.log(format!(
                        "tainted node {node} karpenter.sh/disrupted:NoSchedule"
                    ));
                }
            }
            Action::UntaintDisrupted { node } => {
                if let Some(mut record) = self.state.nodes().get(&node).cloned() {
                    let t = karpenter_cluster::disrupted_taint();
                    record
                        .node
                        .taints
                        .retain(|x| !(x.key == t.key && x.effect == t.effect));
                    self.state.apply(Object::Node(Box::new(record)));
                    self.log(format!("untainted node {node}"));
                }
            }
            Action::RepairNodeClaim {
                node_claim,
                node,
                condition,
                ..
            } => {
                self.log(format!("node {node} is unhealthy ({condition}); repairing"));
                self.apply(Action::DeleteNodeClaim {
                    node_claim,
                    cause: DeletionCause::Disruption(Reason::UNHEALTHY),
                });
            }
            Action::DeleteNode { node } => {
                if let Some(mut record) = self.state.nodes().get(&node).cloned() {
                    record.deleting = true;
                    self.state.apply(Object::Node(Box::new(record)));
                }
            }
            Action::DeleteNodeClaim { node_claim, cause } => {
                let Some(mut claim) = self.state.node_claims().get(&node_claim).cloned() else {
                    return;
                };
                if claim.is_deleting() {
                    return;
                }
                claim.metadata.deletion_timestamp = Some(time(now));
                self.metrics.drain_started(&node_claim, now);
                self.state.apply(Object::NodeClaim(Box::new(claim)));
                let node = self
                    .state
                    .nodes()
                    .values()
                    .find(|r| r.node_claim.as_deref() == Some(node_claim.as_str()))
                    .cloned();
                if let Some(mut record) = node {
                    record.deleting = true;
                    self.state.apply(Object::Node(Box::new(record)));
                }
                // Deletions no disruption command counted: a command's deletions are
                // counted when it is decided.
                if matches!(
                    cause,
                    DeletionCause::NodeDeleted | DeletionCause::NodePoolDeleted
                ) {
                    self.metrics.disrupted(cause.as_str(), 1, now);
                }
                self.log(format!("deleting nodeclaim {node_claim} (reason {cause})"));
            }
            Action::EvictPod { pod, node } => {
                if self.delete_pod(pod.clone()) {
                    self.metrics.evictions += 1;
                    self.log(format!("evicted pod {pod} from node {node}"));
                }
            }
            Action::DeletePod { pod, node } => {
                if self.delete_pod(pod.clone()) {
                    self.metrics.evictions += 1;
                    self.log(format!(
                        "deleted pod {pod} from node {node}: terminationGracePeriod elapsed"
                    ));
                }
            }
            Action::SetClaimConditions {
                node_claim,
                changes,
            } => {
                let Some(mut claim) = self.state.node_claims().get(&node_claim).cloned() else {
                    return;
                };
                if conditions::apply(&mut claim, &changes, time(now)) {
                    self.state.apply(Object::NodeClaim(Box::new(claim)));
                }
            }
            Action::StampPodEvent { node_claim, at } => {
                let Some(mut claim) = self.state.node_claims().get(&node_claim).cloned() else {
                    return;
                };
                claim
                    .status
                    .get_or_insert_with(Default::default)
                    .last_pod_event_time = Some(time(at));
                self.state.apply(Object::NodeClaim(Box::new(claim)));
            }
            Action::TerminateInstance { node_claim, .. } => {
                let Some(claim) = self.state.node_claims().get(&node_claim).cloned() else {
                    return;
                };
                // A slot of a reservation freed changes the offerings the provider reports.
                if self.provider.reservation_of(claim.provider_id()).is_some() {
                    self.facts_version += 1;
                }
                let _ = block_on(self.provider.delete(&claim));
                self.provider.clear_drift(&node_claim);
                self.metrics.drain_finished(&node_claim, now);
                self.interruptions.remove(&node_claim);
                let node = self
                    .state
                    .nodes()
                    .values()
                    .find(|r| r.node_claim.as_deref() == Some(node_claim.as_str()))
                    .map(|r| r.node.name.clone());
                if let Some(node) = node {
                    self.remove_node(&node);
                }
                self.state.delete(&ObjectKey::NodeClaim(node_claim.clone()));
                self.log(format!(
                    "deleted nodeclaim {node_claim}; instance terminated"
                ));
            }
        }
    }

    /// Deletes a pod and records the pod event on its node's NodeClaim.
    fn delete_pod(&mut self, key: PodKey) -> bool {
        self.state.delete(&ObjectKey::Pod(key))
    }

    fn remove_node(&mut self, node: &str) {
        let pods: Vec<PodKey> = self.state.pods_on(node).map(|p| p.pod.key()).collect();
        for p in pods {
            self.delete_pod(p);
        }
        self.metrics.node_stopped(node, self.now);
        self.state.delete(&ObjectKey::Node(node.to_owned()));
    }

    fn launch(&mut self, claim: NodeClaim, plan: &karpenter_scheduling::NewNodeClaim) {
        let name = claim.name().to_owned();
        let pool = claim.node_pool().unwrap_or_default().to_owned();
        let mut requests: Vec<String> = plan
            .requests
            .to_quantities()
            .into_iter()
            .filter(|(k, _)| k == "cpu" || k == "memory" || k == "pods")
            .map(|(k, q)| format!("{k}: {q}"))
            .collect();
        requests.sort();
        self.log(format!(
            "created nodeclaim {name} (nodepool {pool}, {} pod(s), requests {{{}}}, {} instance type option(s))",
            plan.pods.len(),
            requests.join(", "),
            plan.instance_type_options
                .len()
                .min(karpenter_cluster::provisioner::MAX_INSTANCE_TYPES)
        ));
        self.metrics.node_claims_created += 1;
        self.launch_instance(claim);
    }

    /// Launches `claim`'s instance through the fake provider and indexes the claim and its
    /// in-flight node. A failure is handled as the controller handles it
    /// ([`after_launch_failure`]): no capacity or a NodeClass not ready deletes the claim
    /// and re-plans its pods, any other error keeps it for another launch.
    fn launch_instance(&mut self, claim: NodeClaim) {
        let name = claim.name().to_owned();
        let pool = claim.node_pool().unwrap_or_default().to_owned();
        match block_on(self.provider.create(&claim)) {
            Ok(mut launched) => {
                launched.set_true(ConditionType::Launched.as_str(), time(self.now));
                let provider_id = launched.provider_id().to_owned();
                let price = self.provider.price_of(&provider_id).unwrap_or(0.0);
                let it_name = launched
                    .label(labels::INSTANCE_TYPE)
                    .unwrap_or_default()
                    .to_owned();
                let it = self.catalogue.iter().find(|i| i.name == it_name).cloned();
                let mut node_labels = launched.metadata.labels.clone().unwrap_or_default();
                node_labels.insert(labels::HOSTNAME.to_owned(), name.clone());
                node_labels.insert(
                    karpenter_cloudprovider::v1::labels::NODECLAIM_LABEL.to_owned(),
                    name.clone(),
                );
                let node = karpenter_scheduling::Node {
                    name: name.clone(),
                    node_pool: Some(pool.clone()),
                    labels: node_labels,
                    annotations: launched.metadata.annotations.clone().unwrap_or_default(),
                    taints: launched.spec.taints.iter().map(|t| t.to_model()).collect(),
                    // The provider's launched status: the catalogue's shape plus what it
                    // takes to be there (extended resources a NodeOverlay promised).
                    allocatable: launched.status.as_ref().map_or_else(
                        || it.as_ref().map(|i| i.allocatable()).unwrap_or_default(),
                        |s| quantities(&s.allocatable),
                    ),
                    capacity: launched.status.as_ref().map_or_else(
                        || it.as_ref().map(|i| i.capacity.clone()).unwrap_or_default(),
                        |s| quantities(&s.capacity),
                    ),
                    state: NodeState::InFlight,
                    price,
                    created_at: self.now,
                    under_consolidate_after: false,
                    // Until its driver publishes ResourceSlices, the type's device templates.
                    devices: it.as_ref().map(|i| i.devices.clone()).unwrap_or_default(),
                };
                let reservation = self.provider.reservation_of(&provider_id);
                self.log(format!(
                    "launched nodeclaim {name} (provider-id {provider_id}, instance-type {it_name}, zone {}, capacity-type {}{}, ${price:.4}/h)",
                    node.zone().unwrap_or_default(),
                    node.capacity_type().unwrap_or_default(),
                    reservation
                        .as_ref()
                        .map(|id| format!(", capacity-reservation {id}"))
                        .unwrap_or_default(),
                ));
                if let Some(id) = reservation {
                    *self.metrics.reserved_launches.entry(id).or_default() += 1;
                    // The reservation has one instance less: the offerings the provider
                    // reports changed (as the AWS provider counts a launch at once).
                    self.facts_version += 1;
                }
                self.metrics.node_started(&node, self.now, true);
                let startup_taints = launched
                    .spec
                    .startup_taints
                    .iter()
                    .map(|t| t.to_model())
                    .collect();
                self.state.apply(Object::NodeClaim(Box::new(launched)));
                self.state.apply(Object::Node(Box::new(NodeRecord {
                    node,
                    node_claim: Some(name),
                    startup_taints,
                    deleting: false,
                    kubelet: Kubelet::NotJoined,
                })));
            }
            Err(e) => {
                self.metrics.launch_failures += 1;
                self.log(format!("failed launching nodeclaim {name}: {e}"));
                match after_launch_failure(&LaunchErrorKind::of(&e)) {
                    AfterLaunchFailure::DeleteClaim(_) => {
                        self.state.delete(&ObjectKey::NodeClaim(name.clone()));
                        self.state.delete(&ObjectKey::Node(name));
                        // After no capacity the offerings tried are known unavailable;
                        // either way the pods are planned again.
                        self.facts_version += 1;
                        self.reconciler.replan(self.now);
                    }
                    AfterLaunchFailure::Retry { condition_reason } => {
                        // The claim stays, `Launched=Unknown`; lifecycle launches it again
                        // on a later pass until the launch timeout gives it up.
                        let mut claim = claim;
                        claim.set_condition(
                            ConditionType::Launched.as_str(),
                            ConditionStatus::Unknown,
                            &condition_reason,
                            &e.to_string(),
                            time(self.now),
                        );
                        self.state.apply(Object::NodeClaim(Box::new(claim)));
                    }
                }
            }
        }
    }
}

fn describe(command: &Command, prefix: &str) -> String {
    let how = match command.decision {
        Decision::Delete => "delete",
        Decision::Replace => "replace",
        Decision::NoOp => "no-op",
    };
    let pods: usize = command.candidates.iter().map(|c| c.pods.len()).sum();
    let nodes: Vec<String> = command
        .candidates
        .iter()
        .map(|c| format!("{} (${:.4}/h)", c.node, c.price))
        .collect();
    // Karpenter's methods are named by reason alone, as upstream logs them; karpenter-rs's
    // own re-pack consolidation says so.
    let method = if command.consolidation == Some(ConsolidationMethod::Repack) {
        " (re-pack)"
    } else {
        ""
    };
    let mut out = format!(
        "{prefix} via {how}{method}, reason {}, terminating {} node(s) ({pods} pod(s)) {}",
        command.reason,
        command.candidates.len(),
        nodes.join(", ")
    );
    if !command.replacements.is_empty() {
        let types: Vec<String> = command
            .replacements
            .iter()
            .flat_map(|r| {
                r.instance_type_options
                    .iter()
                    .take(3)
                    .map(|o| o.name.to_string())
            })
            .collect();
        if types.is_empty() {
            // A static pool's replacement: the provider picks from the template.
            out.push_str(&format!(
                " and replacing with {} node(s) from the NodePool's template",
                command.replacements.len()
            ));
        } else {
            out.push_str(&format!(
                " and replacing with {} node(s) from types {}",
                command.replacements.len(),
                types.join(", ")
            ));
        }
    }
    if !command.forceful && command.savings > 0.0 {
        out.push_str(&format!(", saving ${:.4}/h", command.savings));
    }
    out
}

/// What a workload has: its pods, and for a StatefulSet each pod's name with whether it
/// is Running and Ready.
#[derive(Debug, Default)]
struct Owned {
    pods: Vec<PodKey>,
    names: BTreeMap<String, bool>,
}

/// A StatefulSet's pod names for `desired` replicas, in ordinal order.
fn ordinal_names(key: &WorkloadKey, w: &Workload, desired: usize) -> Vec<String> {
    (0..desired)
        .map(|i| format!("{}-{}", key.2, i64::from(w.ordinal_start) + i as i64))
        .collect()
}

/// How many pods a sync of `key` creates: what it misses beyond the pods it `has` and the
/// `in_flight` creations; an OrderedReady StatefulSet one at a time, once every lower
/// ordinal is Running and Ready.
fn missing_pods(key: &WorkloadKey, w: &Workload, has: Option<&Owned>, in_flight: u32) -> u32 {
    let desired = w.desired(key.0);
    let in_flight = in_flight as usize;
    if key.0 != Kind::StatefulSet {
        let live = has.map_or(0, |o| o.pods.len());
        let n = desired.saturating_sub(live).saturating_sub(in_flight);
        return u32::try_from(n).unwrap_or(u32::MAX);
    }
    let names = ordinal_names(key, w, desired);
    let exists = |n: &String| has.and_then(|o| o.names.get(n)).copied();
    if !w.ordered_ready {
        let absent = names.iter().filter(|n| exists(n).is_none()).count();
        return u32::try_from(absent.saturating_sub(in_flight)).unwrap_or(u32::MAX);
    }
    if in_flight > 0 {
        return 0;
    }
    for n in &names {
        match exists(n) {
            Some(true) => {}
            Some(false) => return 0,
            None => return 1,
        }
    }
    0
}

fn first_pod(mut pods: Vec<Pod>) -> Pod {
    if pods.is_empty() {
        Pod::default()
    } else {
        pods.swap_remove(0)
    }
}

fn workload_name(pod: &Pod) -> String {
    pod.owner
        .as_ref()
        .map(|o| o.name.clone())
        .unwrap_or_default()
}

fn owned_by(pod: &Pod, kind: Kind, namespace: &str, name: &str) -> bool {
    pod.namespace == namespace
        && pod
            .owner
            .as_ref()
            .is_some_and(|o| o.kind == kind.as_str() && o.name == name)
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Value::Object(map) = target else {
        return;
    };
    for (k, v) in patch {
        if v.is_null() {
            map.remove(k);
        } else {
            merge_patch(map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_follows_rfc7386() {
        let mut v = serde_json::json!({"a": {"b": 1, "c": 2}, "d": [1]});
        merge_patch(
            &mut v,
            &serde_json::json!({"a": {"b": null, "e": 3}, "d": [2]}),
        );
        assert_eq!(v, serde_json::json!({"a": {"c": 2, "e": 3}, "d": [2]}));
    }
}
