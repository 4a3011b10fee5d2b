//! The controller process: connect, serve metrics and probes, watch, elect a leader, and
//! while leader run reconcile passes ([`Controller::pass`]).

use super::events::{EventSink, publish_loop};
use super::exec;
use super::explain::Explainer;
use super::leader::{self, LeaderGate};
use super::provider::ProviderHooks;
use super::retry_log::RetryLog;
use super::static_pools;
use super::{
    Ctx, capacity_buffer, consolidation, dry_run, ignored, kubelet, logging, nodeoverlay, nodepool,
    provider, repair, state, system_clock,
};
use crate::http::{self, Health};
use crate::settings::{ControllerArgs, ProviderKind, Settings};
use anyhow::Context as _;
use karpenter_cloudprovider::poll;
use karpenter_cloudprovider::reserved::reserved_claims;
use karpenter_cluster::default_spread;
use karpenter_cluster::feed::{Feed, Synced};
use karpenter_cluster::garbage;
use karpenter_cluster::orchestration::Outcome;
use karpenter_cluster::provisioner::NameGenerator;
use karpenter_cluster::reconciler::{Event, ProviderFacts, Reconciler, ReconcilerSettings};
use karpenter_cluster::{Action, ClusterState, ObjectKey};
use karpenter_disruption::DisruptionOptions;
use karpenter_metrics::Metrics;
use karpenter_metrics::index::IndexMetrics;
use karpenter_metrics::pods::PodMetrics;
use karpenter_metrics::runtime::ReconcileResult;
use karpenter_metrics::runtime::stage::*;
use karpenter_scheduling::SolveOptions;
use karpenter_scheduling::model::{InstanceType, Millis, PodKey};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// How often instance types are refreshed from the provider.
pub const INSTANCE_TYPES_TTL_MS: Millis = 60_000;
/// How often drift is asked of the provider.
pub const DRIFT_POLL_MS: Millis = 60_000;
/// How often NodePool status is recomputed with no pool or claim changed.
pub const NODEPOOL_STATUS_PERIOD_MS: Millis = 30_000;

/// The retry log's name for the CapacityBuffer status writes.
const CAPACITY_BUFFER_STATUS: &str = "capacitybuffer.status";
/// The work name under which NodeOverlay status failures are logged.
const NODE_OVERLAY_STATUS: &str = "nodeoverlay.status";
/// How often node utilisation is recomputed.
pub const UTILIZATION_PERIOD_MS: Millis = 10_000;
/// How often the index is fed from every store even without a re-list.
pub const RESYNC_PERIOD_MS: Millis = 5 * 60_000;

/// The controller's in-memory bookkeeping between passes. Nothing here is needed for
/// correctness after a restart: it only paces work (batch windows, polls) and remembers
/// which events were already sent.
pub struct Controller {
    ctx: Ctx,
    /// The index and the reconciler travel to a blocking thread for each tick (solving
    /// and disruption passes are CPU-heavy) and back; they are `None` only meanwhile.
    core: Option<(ClusterState, Reconciler)>,
    instance_types: BTreeMap<String, Vec<Arc<InstanceType>>>,
    instance_types_at: Option<Millis>,
    /// The claims in capacity reservations at the last refresh, and whether each launched.
    reserved_claims: BTreeSet<(String, bool)>,
    drift: BTreeMap<String, String>,
    drift_at: Option<Millis>,
    /// Bumped when the provider's facts (instance types, drift) are refreshed.
    facts_version: u64,
    /// Bumped when instance types are refreshed (their prices go into the index).
    types_version: u64,
    feed: Feed,
    last_gc: Option<Millis>,
    /// When NodePool status was last brought up to date (`None`: it failed or never ran).
    nodepools_at: Option<Millis>,
    /// When the index is next fed from every store rather than from the changes.
    resync_at: Option<Millis>,
    hooks: Option<Arc<dyn ProviderHooks>>,
    pod_metrics: PodMetrics,
    index_metrics: IndexMetrics,
    /// When node utilisation was last computed (a scan of every managed node).
    utilization_at: Option<Millis>,
    explainer: Explainer,
    /// NodePools whose ignored fields were told, by generation.
    told: ignored::Told,
    /// `--dry-run`: what was already reported; `None` when the controller acts.
    shadow: Option<dry_run::Reporter>,
    /// NodeOverlays (with the NodeOverlay gate on), applied to refreshed instance types.
    overlays: Option<nodeoverlay::Overlays>,
    /// CapacityBuffers (with the CapacityBuffer gate on), resolved into the index every pass.
    buffers: Option<capacity_buffer::Buffers>,
    /// The buffers as last resolved, for their status.
    resolved_buffers: Vec<(
        Arc<karpenter_cloudprovider::CapacityBuffer>,
        karpenter_cluster::capacity_buffer::ResolvedBuffer,
    )>,
    /// Buffers whose unknown provisioning strategy was told, by generation.
    buffers_told: capacity_buffer::Told,
    /// With the CapacityBuffer gate off: the buffers, each told as ignored.
    ignored_buffers: Option<capacity_buffer::IgnoredBuffers>,
    /// Failed work, logged at debug while a retry may still fix it.
    retries: RetryLog,
}

impl Controller {
    /// A controller with empty bookkeeping.
    pub fn new(ctx: Ctx) -> Self {
        Self {
            core: Some(fresh_core(&ctx)),
            instance_types: BTreeMap::new(),
            instance_types_at: None,
            reserved_claims: BTreeSet::new(),
            drift: BTreeMap::new(),
            drift_at: None,
            facts_version: 0,
            types_version: 0,
            feed: Feed::default(),
            last_gc: None,
            resync_at: None,
            nodepools_at: None,
            hooks: None,
            pod_metrics: PodMetrics::default(),
            index_metrics: IndexMetrics::default(),
            utilization_at: None,
            explainer: Explainer::default(),
            told: ignored::Told::default(),
            shadow: ctx.settings.dry_run.then(dry_run::Reporter::default),
            overlays: None,
            buffers: None,
            resolved_buffers: Vec::new(),
            buffers_told: capacity_buffer::Told::default(),
            ignored_buffers: None,
            retries: RetryLog::default(),
            ctx,
        }
    }

    /// The index and reconciler; fresh ones when a tick was cancelled or panicked on its
    /// thread (a fresh reconciler decides again from the objects, as a restarted replica).
    fn take_core(&mut self) -> (ClusterState, Reconciler) {
        self.core.take().unwrap_or_else(|| {
            tracing::warn!("reconciler state lost; starting afresh");
            self.feed = Feed::default();
            fresh_core(&self.ctx)
        })
    }

    /// Adds the provider's hooks, called at the start of every pass.
    pub fn with_hooks(mut self, hooks: Option<Arc<dyn ProviderHooks>>) -> Self {
        self.hooks = hooks;
        self
    }

    /// Adds CapacityBuffers, resolved into the index at every pass.
    pub fn with_buffers(mut self, buffers: Option<capacity_buffer::Buffers>) -> Self {
        self.buffers = buffers;
        self
    }

    /// Adds the CapacityBuffers told as ignored every pass (the gate is off).
    pub fn with_ignored_buffers(
        mut self,
        ignored: Option<capacity_buffer::IgnoredBuffers>,
    ) -> Self {
        self.ignored_buffers = ignored;
        self
    }

    /// Adds NodeOverlays, applied to the instance types of every refresh.
    pub fn with_overlays(mut self, overlays: Option<nodeoverlay::Overlays>) -> Self {
        self.overlays = overlays;
        self
    }

    async fn refresh_instance_types(&mut self, now: Millis) -> Option<ReconcileResult> {
        let pools = self.ctx.stores.node_pools.state();
        // A launch into a reservation, or a reserved claim's end, changes what it can take.
        let claims = self.ctx.stores.node_claims.state();
        let reserved = reserved_claims(claims.iter().map(AsRef::as_ref));
        let stale = reserved != self.reserved_claims
            || self
                .instance_types_at
                .is_none_or(|t| now - t >= INSTANCE_TYPES_TTL_MS)
            || pools
                .iter()
                .any(|p| !self.instance_types.contains_key(p.name()))
            || self.overlays.as_ref().is_some_and(|o| o.stale(&pools));
        if !stale {
            return None;
        }
        let (mut fresh, errors) = poll::instance_types_of(self.ctx.provider.as_ref(), &pools).await;
        let mut failed = !errors.is_empty();
        for (pool, e) in &errors {
            let work = format!("instance types of NodePool {pool}");
            self.retries
                .failed(&work, e, "listing instance types failed");
        }
        if let Some(overlays) = &mut self.overlays {
            let (overlaid, evaluation) = overlays.apply(&pools, fresh);
            fresh = overlaid;
            if self.shadow.is_none() {
                match overlays.write_status(&self.ctx, &evaluation).await {
                    Ok(()) => self.retries.succeeded(NODE_OVERLAY_STATUS),
                    Err(e) => {
                        failed = true;
                        let what = "nodeoverlay status update failed";
                        self.retries.failed(NODE_OVERLAY_STATUS, &e, what);
                    }
                }
            }
        }
        (self.instance_types_at, self.reserved_claims) = (Some(now), reserved);
        // Unchanged offerings keep the versions, so the index is not re-fed from every store
        // and the disruption pass is not re-run for nothing.
        if fresh != self.instance_types {
            self.instance_types = fresh;
            self.facts_version += 1;
            self.types_version += 1;
        }
        Some(ReconcileResult::of(failed))
    }

    /// Carries `actions` out; whether one failed (its object is queued again), and whether
    /// a launch found no capacity.
    async fn run_actions(&self, actions: &[Action]) -> (bool, bool) {
        if self.shadow.is_some() {
            actions.iter().for_each(dry_run::Reporter::action);
            return (false, false);
        }
        use futures::StreamExt as _;
        use karpenter_cluster::concurrency::{MAX_CONCURRENT, steps};
        let (failed, ctx) = (&std::sync::atomic::AtomicBool::new(false), &self.ctx);
        let no_capacity = &std::sync::atomic::AtomicBool::new(false);
        let retries = &self.retries;
        let run = |i: usize| async move {
            let action = &actions[i];
            let work = format!("{:?}", action.object());
            match exec::execute(ctx, action).await {
                Ok(done) => {
                    retries.succeeded(&work);
                    if done == exec::Executed::NoCapacity {
                        no_capacity.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                Err(e) => {
                    retries.failed(&work, &e, "action failed; retrying on the next pass");
                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    ctx.stores.dirty.retry(action.object());
                }
            }
        };
        // Each step's actions run together (so the provider can batch launches and
        // terminations, and a thousand-node drain is not one request after another); a step
        // holds only actions that need no order among themselves.
        for step in steps(actions) {
            let all = futures::stream::iter(step.into_iter().map(run));
            all.for_each_concurrent(MAX_CONCURRENT, |f| f).await;
        }
        let load = |b: &std::sync::atomic::AtomicBool| b.load(std::sync::atomic::Ordering::Relaxed);
        (load(failed), load(no_capacity))
    }

    /// One reconcile pass at the clock's `now`: rebuild the index, then lifecycle,
    /// termination, provisioning, disruption, NodePool status and garbage collection (the
    /// fake kubelet runs beside the passes, [`kubelet::spawn`]). Errors are logged and the affected objects retried on the next pass.
    pub async fn pass(&mut self) {
        let (now, rt) = (self.ctx.now_ms(), self.ctx.metrics.runtime.clone());
        if let Some(hooks) = &self.hooks {
            hooks.reconcile(&self.ctx).await;
        }
        rt.run(INSTANCE_TYPES, self.refresh_instance_types(now))
            .await;
        rt.run(DRIFT, self.refresh_drift(now)).await;
        let (mut state, reconciler) = self.take_core();
        let fed = rt.begin(STATE);
        let (synced, full) = self.feed_index(&mut state, now);
        let claims = &self.ctx.stores.node_claims;
        let exists = |c: &str| claims.get(&ObjectRef::new(c)).is_some();
        self.ctx.interruptions.feed(&mut state, exists);
        fed.finish(ReconcileResult::of(!synced.skipped.is_empty()));
        if let Some(hooks) = &self.hooks {
            state.set_node_classes(hooks.node_classes());
        }
        if let Some(buffers) = &self.buffers {
            self.resolved_buffers = buffers.feed(&self.ctx, &mut self.buffers_told, &mut state);
        }
        if let Some(ignored) = &mut self.ignored_buffers {
            ignored.tell(&self.ctx);
        }
        let (stores, m, touched) = (&self.ctx.stores, &self.ctx.metrics, &synced.touched);
        let pod = |k: &PodKey| {
            stores
                .pods
                .get(&ObjectRef::new(&k.name).within(&k.namespace))
        };
        // Upstream's cluster-state observability controllers: pod metrics and the status
        // conditions of NodeClaims, NodePools and Nodes.
        if !self.ctx.settings.disable_cluster_state_observability {
            self.pod_metrics.record(touched, full, pod, &state, now, m);
            let node = |n: &str| stores.nodes.get(&ObjectRef::new(n));
            m.record_status(touched, full, node, &state, now);
        }
        let pools_changed = full
            || synced
                .touched
                .iter()
                .any(|k| matches!(k, ObjectKey::NodePool(_) | ObjectKey::NodeClaim(_)));
        // Ignored fields can only change with a NodePool; `told` keeps each to once per
        // generation.
        if pools_changed {
            for pool in self.ctx.stores.node_pools.state() {
                self.told.tell(&self.ctx, pool.as_ref(), || {
                    pool.ignored_fields(self.ctx.settings.feature_gates.static_capacity)
                });
            }
        }
        self.ctx.metrics.set_ignored_pods(synced.ignored_pods);
        for (key, why) in synced.skipped {
            tracing::debug!(object = ?key, error = %why, "not indexed");
        }
        self.core = Some((state, reconciler));

        rt.run(RECONCILER, self.reconcile(now)).await;
        if self.shadow.is_some() {
            // Status and garbage collection write.
            self.record_metrics(now);
            return;
        }
        // NodePool status is a function of the pools and their claims: recomputed when one
        // changed, after a failure, and every NODEPOOL_STATUS_PERIOD_MS for its conditions.
        if let Some((state, reconciler)) = &self.core
            && (pools_changed
                || self
                    .nodepools_at
                    .is_none_or(|t| now - t >= NODEPOOL_STATUS_PERIOD_MS))
        {
            let status = nodepool::reconcile_all(&self.ctx, state, reconciler);
            match rt.try_run(NODEPOOL_STATUS, status).await {
                Ok(()) => {
                    self.nodepools_at = Some(now);
                    self.retries.succeeded(NODEPOOL_STATUS);
                }
                Err(e) => {
                    self.nodepools_at = None;
                    let what = "nodepool status update failed";
                    self.retries.failed(NODEPOOL_STATUS, &e, what);
                }
            }
        }
        if let Some((_, reconciler)) = &self.core {
            let written = capacity_buffer::write_status(
                &self.ctx,
                &mut self.buffers_told,
                &self.resolved_buffers,
                reconciler.capacity_buffer_placements(),
            )
            .await;
            // A conflict is a buffer changed under the write: the next pass recomputes, so
            // the retry log keeps it at debug like every other retried write.
            match written {
                Ok(()) => self.retries.succeeded(CAPACITY_BUFFER_STATUS),
                Err(e) => {
                    let what = "capacitybuffer status update failed";
                    self.retries.failed(CAPACITY_BUFFER_STATUS, &e, what);
                }
            }
        }
        rt.run(GARBAGE_COLLECTION, self.garbage_collect(now)).await;
        self.retries.forget_stale();
        self.record_metrics(now);
    }

    /// Applies to the index what the watches reported changed since the last pass; reads
    /// every store only after a (re)list, an instance-type change, a lost index, or once per
    /// [`RESYNC_PERIOD_MS`] as a safety net (an informer's resync).
    /// Returns what changed and whether every store was read.
    fn feed_index(&mut self, state: &mut ClusterState, now: Millis) -> (Synced, bool) {
        let stores = &self.ctx.stores;
        let (relisted, keys) = stores.dirty.take();
        if relisted
            || self.feed.needs_full_sync(self.types_version)
            || self.resync_at.is_none_or(|t| now >= t)
        {
            self.resync_at = Some(now + RESYNC_PERIOD_MS);
            let objects = stores.api_objects();
            let synced = self.feed.sync(
                state,
                &objects.view(),
                &self.instance_types,
                self.types_version,
            );
            return (synced, true);
        }
        let changes = stores.changes(&keys);
        let synced = self
            .feed
            .sync_changes(state, &changes.view(), stores, &self.instance_types);
        (synced, false)
    }

    /// One tick of the shared reconciler on a blocking thread, then its events and actions.
    async fn reconcile(&mut self, now: Millis) -> Option<ReconcileResult> {
        let (state, mut reconciler) = self.take_core();
        let drift = self.drift.clone();
        let version = self.facts_version;
        let repair_policies = if self.ctx.settings.feature_gates.node_repair {
            self.ctx.provider.repair_policies()
        } else {
            Vec::new()
        };
        let solves = self.ctx.metrics.solve_tracker();
        let joined = tokio::task::spawn_blocking(move || {
            let origin = std::time::Instant::now();
            let seconds = move || origin.elapsed().as_secs_f64();
            let facts = ProviderFacts {
                drift: &drift,
                version,
                repair_policies: &repair_policies,
                seconds: &seconds,
                solving: &|p| solves.report(p),
            };
            let tick = reconciler.tick(&state, &facts, now);
            (state, reconciler, tick)
        })
        .await;
        let (state, reconciler, mut tick) = match joined {
            Ok(done) => done,
            Err(e) => {
                // A panic in the decision code: the bookkeeping is lost, so start afresh
                // from the objects, as a restarted replica would.
                tracing::error!(error = %e, "reconcile pass failed");
                self.ctx.metrics.solve_tracker().abandon();
                return Some(ReconcileResult::failure(e.is_panic()));
            }
        };
        let provisionable = state.provisionable_pods().count() + state.displaced_pod_count();
        self.core = Some((state, reconciler));
        if provisionable == 0
            && let Some(shadow) = &mut self.shadow
        {
            shadow.nothing_pending(&self.ctx.metrics);
        }
        for event in tick.events {
            self.record(event).await;
        }
        if let Some(overlays) = &self.overlays {
            overlays.annotate(&mut tick.actions);
        }
        let (failed, no_capacity) = self.run_actions(&tick.actions).await;
        if no_capacity {
            // The provider learnt offerings without capacity: read instance types again at
            // the next pass, as upstream's scheduler reads its unavailable-offerings cache
            // at every plan, rather than planning onto them until the refresh period ends.
            self.instance_types_at = None;
        }
        Some(ReconcileResult::after(failed, tick.next_wakeup.is_some()))
    }

    /// Logs, publishes and counts what the reconciler reports.
    async fn record(&mut self, event: Event) {
        self.ctx.metrics.observe(&event);
        // A store lookup by name: a plan can nominate thousands of pods.
        let pod_ref = |key: &PodKey| {
            self.ctx
                .stores
                .pods
                .get(&ObjectRef::new(&key.name).within(&key.namespace))
        };
        match event {
            Event::Planned { pods, plan, .. } => {
                tracing::info!(
                    pods,
                    nodeclaims = plan.new_node_claims.len(),
                    existing = plan.existing.len(),
                    unschedulable = plan.unschedulable.len(),
                    price = plan.total_price,
                    "computed new nodeclaim(s) to fit pod(s)"
                );
                if let Some(shadow) = &mut self.shadow {
                    shadow.planned(&plan, &self.ctx.metrics);
                }
            }
            Event::Nominated { pod, node } => {
                if let Some(p) = pod_ref(&pod) {
                    self.ctx.events.normal(
                        p.as_ref(),
                        "Nominated",
                        format!("Pod should schedule on: node/{node}"),
                    );
                }
            }
            Event::FailedScheduling { pod, reason } => {
                tracing::warn!(pod = %pod, reason = %reason, "could not schedule pod");
                if let Some(p) = pod_ref(&pod) {
                    self.ctx.events.warning(
                        p.as_ref(),
                        "FailedScheduling",
                        format!("Failed to schedule pod, {reason}"),
                    );
                }
            }
            Event::DisruptionPass { result, .. } => {
                if let Some(shadow) = &mut self.shadow {
                    shadow.pass_done(&self.ctx.metrics);
                }
                self.explainer.publish(&self.ctx, &result.explanations);
                consolidation::publish(&self.ctx, &result.scored_moves);
            }
            Event::DisruptionDecided(command) => {
                if let Some(shadow) = &mut self.shadow {
                    shadow.decided(&command, &self.ctx.metrics);
                }
                tracing::info!(
                    reason = command.reason.as_str(),
                    consolidation_type = command.consolidation_type(),
                    decision = ?command.decision,
                    nodes = ?command.node_names(),
                    replacements = command.replacements.len(),
                    "disruption command"
                );
            }
            Event::Disruption(outcome) => match outcome {
                Outcome::Started(c) => {
                    tracing::info!(
                        reason = c.reason.as_str(),
                        consolidation_type = c.consolidation_type(),
                        nodes = ?c.node_names(),
                        replacements = c.replacements.len(),
                        "disrupting nodes"
                    )
                }
                Outcome::Invalidated { command, reason } => {
                    tracing::info!(nodes = ?command.node_names(), %reason, "abandoning disruption command: no longer valid")
                }
                Outcome::Completed(c) => {
                    tracing::info!(nodes = ?c.node_names(), "replacements ready; deleting disrupted nodeclaims")
                }
                Outcome::Abandoned {
                    command,
                    node_claim,
                } => {
                    tracing::warn!(nodes = ?command.node_names(), %node_claim, "replacement failed; untainting nodes")
                }
            },
            Event::StaticCapacity {
                node_pool,
                current,
                desired,
                change,
            } => static_pools::report(&node_pool, current, desired, &change),
            Event::OrphanTaint { node } => {
                tracing::info!(node = %node, "removing disrupted taint left by an earlier leader");
            }
            Event::CapacityBuffer {
                buffer,
                replicas,
                placement,
            } => tracing::info!(
                capacitybuffer = %buffer,
                "{}",
                placement.describe(&buffer, replicas)
            ),
            Event::RepairBlocked {
                node,
                node_claim,
                node_pool,
            } => repair::report_blocked(&self.ctx, &node, &node_claim, &node_pool),
            Event::LifecycleTimeout {
                node_claim,
                reason,
                message,
            } => {
                tracing::warn!(nodeclaim = %node_claim, reason, "{message}");
                if let Some(claim) = exec::claim_of(&self.ctx, &node_claim) {
                    self.ctx.events.warning(claim.as_ref(), reason, message);
                }
            }
        }
    }

    async fn refresh_drift(&mut self, now: Millis) -> Option<ReconcileResult> {
        if self.drift_at.is_some_and(|t| now - t < DRIFT_POLL_MS) {
            return None;
        }
        self.drift_at = Some(now);
        let claims = self.ctx.stores.node_claims_sorted();
        let (drift, errors) = poll::drift_of(self.ctx.provider.as_ref(), &claims).await;
        let failed = !errors.is_empty();
        for (claim, e) in errors {
            tracing::debug!(nodeclaim = claim, error = %e, "drift check failed");
        }
        if drift != self.drift {
            self.facts_version += 1;
        }
        self.drift = drift;
        Some(ReconcileResult::of(failed))
    }

    async fn garbage_collect(&mut self, now: Millis) -> Option<ReconcileResult> {
        if self.last_gc.is_some_and(|t| now - t < garbage::PERIOD_MS) {
            return None;
        }
        self.last_gc = Some(now);
        // Without a listing nothing can be judged missing: collect nothing this time, but
        // still release orphaned Nodes below.
        let instances = match self.ctx.provider.list().await {
            Ok(instances) => {
                self.retries.succeeded(GARBAGE_COLLECTION);
                Some(instances)
            }
            Err(e) => {
                let what = "listing instances for garbage collection failed";
                self.retries.failed(GARBAGE_COLLECTION, &e, what);
                None
            }
        };
        let (listing_ok, mut failed) = (instances.is_some(), instances.is_none());
        let instances = instances.unwrap_or_default();
        let listed: Vec<garbage::Instance> =
            instances.iter().map(garbage::Instance::listed).collect();
        let collect = match self.core.as_ref() {
            Some((state, _)) if listing_ok => garbage::decide(state, &listed, now),
            _ => garbage::Collect::default(),
        };
        for id in &collect.instances {
            tracing::info!(
                provider_id = id,
                "garbage-collecting instance without a nodeclaim"
            );
        }
        let gone = instances
            .iter()
            .filter(|i| collect.instances.contains(&i.provider_id().into()));
        let errors = poll::delete_all(self.ctx.provider.as_ref(), gone).await;
        failed |= !errors.is_empty();
        for (id, e) in errors {
            let work = format!("garbage collection of {id}");
            self.retries.failed(&work, &e, "garbage collection failed");
        }
        for name in collect.node_claims {
            if let Some(claim) = exec::claim_of(&self.ctx, &name) {
                self.ctx.events.warning(
                    claim.as_ref(),
                    "InstanceNotFound",
                    "instance no longer exists".into(),
                );
            }
            let delete = Action::DeleteNodeClaim {
                node_claim: name.clone(),
                cause: karpenter_cluster::DeletionCause::GarbageCollected,
            };
            if let Err(e) = exec::execute(&self.ctx, &delete).await {
                failed = true;
                let work = format!("garbage collection of NodeClaim {name}");
                self.retries.failed(&work, &e, "garbage collection failed");
            }
        }
        let nodes = self.ctx.stores.nodes.state();
        let claims = self.ctx.stores.node_claims.state();
        let orphaned = garbage::orphaned_node_finalizers(
            nodes.iter().map(AsRef::as_ref),
            claims.iter().map(AsRef::as_ref),
        );
        for release in orphaned {
            let rv = release.resource_version.as_deref();
            let nodes = self.ctx.nodes();
            if let Err(e) =
                super::api::set_finalizers(&nodes, &release.node, rv, &release.finalizers).await
            {
                failed = true;
                let work = format!("finalizer of orphaned Node {}", release.node);
                let what = "removing finalizer of orphaned node failed";
                self.retries.failed(&work, &e, what);
            }
        }
        Some(ReconcileResult::of(failed))
    }

    /// The gauges read from the whole index: the node count, and every
    /// [`UTILIZATION_PERIOD_MS`] the utilisation of Karpenter-managed nodes, a scan of every
    /// node and its pods.
    fn record_metrics(&mut self, now: Millis) {
        let Some((state, _)) = self.core.as_ref() else {
            return;
        };
        let m = &self.ctx.metrics;
        m.cluster_state_node_count.set(state.nodes().len() as i64);
        let types = &self.instance_types;
        (self.index_metrics).record_instance_types(types, self.types_version, m);
        if self
            .utilization_at
            .is_some_and(|t| now - t < UTILIZATION_PERIOD_MS)
        {
            return;
        }
        self.utilization_at = Some(now);
        // Upstream's node and NodePool metrics controllers.
        if !self.ctx.settings.disable_cluster_state_observability {
            self.index_metrics.record_nodes(state, now, m);
        }
    }
}

/// An empty index and a reconciler paced by the controller's settings.
pub(super) fn fresh_core(ctx: &Ctx) -> (ClusterState, Reconciler) {
    let s = &ctx.settings;
    let solve = SolveOptions {
        preference_policy: s.preference_policy,
        min_values_policy: s.min_values_policy,
        reserved_capacity: s.feature_gates.reserved_capacity,
        ..SolveOptions::default()
    };
    let settings = ReconcilerSettings {
        batch_idle: s.batch_idle_duration.as_millis() as Millis,
        batch_max: s.batch_max_duration.as_millis() as Millis,
        disruption: DisruptionOptions {
            spot_to_spot_consolidation: s.feature_gates.spot_to_spot_consolidation,
            node_repair: s.feature_gates.node_repair && !s.legacy_node_repair,
            repack: s.repack.clone(),
            solve: solve.clone(),
            ..DisruptionOptions::default()
        },
        solve,
        observe_only: s.dry_run,
        static_capacity: s.feature_gates.static_capacity,
        ..ReconcilerSettings::default()
    };
    let names = NameGenerator::starting_at(name_seed());
    let mut state = ClusterState::new();
    state.set_scheduler_config(s.scheduler_config.as_ref());
    state.set_dra_enabled(!s.ignore_dra_requests);
    (state, Reconciler::new(settings, names))
}

/// Where this process's NodeClaim names start: names must not repeat those of an earlier
/// process (a reused name mixes two claims' events and audit trails), so the sequence starts
/// at a point drawn from the clock and the process ID.
fn name_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

fn identity() -> String {
    std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("karpenter-{}", std::process::id()))
}

/// `karpenter controller`: runs until SIGTERM/Ctrl-C (Ok) or until leadership is lost or a
/// watch dies (Err, so the container restarts and a fresh replica takes over from the
/// objects' state).
///
/// # Errors
/// Invalid settings, no cluster to connect to, a port that cannot be bound, the first
/// request for the Lease refused, lost leadership.
pub async fn run(args: &ControllerArgs) -> anyhow::Result<()> {
    let settings = Settings::from_args(args)?;
    logging::init(&settings).map_err(|e| anyhow::anyhow!("initialising logging: {e}"))?;
    let env = |k: &str| std::env::var(k).ok();
    for s in karpenter_cluster::upstream_settings::ignored_settings(env, &args.feature_gates) {
        tracing::warn!(setting = %s.name, value = %s.value, "not acted on: {}", s.why);
    }
    let metrics = Metrics::new();
    if settings.dry_run {
        tracing::info!("dry-run: decisions are reported, nothing is written; no leader election");
    }
    let client = dry_run::client(settings.dry_run, metrics.kube_client_layer())
        .await
        .context("connecting to the cluster (in-cluster config or KUBECONFIG)")?;
    let health = Health::default();
    let metrics_port = settings.metrics_port;
    let health_port = settings.health_probe_port;
    let metrics_server = tokio::spawn(http::serve(
        http::metrics_router(metrics.clone()),
        metrics_port,
    ));
    let health_server = tokio::spawn(http::serve(
        http::health_router(health.clone()),
        health_port,
    ));

    let spreads = settings.scheduler_config.as_ref();
    if let Some(config) = spreads.filter(|c| c.is_active()) {
        let constraints = default_spread::describe(&config.default_constraints);
        tracing::info!(default_topology_spread_constraints = %constraints, "scheduler-config is set: applying these default topology spread constraints during scheduling to pods that declare none of their own");
    }
    if spreads.is_some_and(|c| c.system_defaulting) {
        tracing::info!(
            "scheduler-config: defaultingType System; the kube-scheduler's built-in soft spreads are not applied in scheduling simulations (as Karpenter's are not)"
        );
    }
    let watch_selectors = spreads.is_some_and(|c| c.is_active());
    if !settings.ignore_dra_requests {
        tracing::info!(
            "ignore-dra-requests is false: pods' ResourceClaims are simulated; ResourceClaims, ResourceClaimTemplates and DeviceClasses are watched"
        );
    }
    let (stores, writers) = state::stores(
        metrics.runtime.work_queue(STATE),
        watch_selectors,
        !settings.ignore_dra_requests,
    );
    let changed = Arc::new(Notify::new());
    if settings.feature_gates.capacity_buffer {
        capacity_buffer::check_served(&client).await?;
    }
    let mut watchers = state::spawn_watchers(&client, writers, changed.clone());
    let overlays = settings.feature_gates.node_overlay.then(|| {
        let (overlays, task) = nodeoverlay::spawn(&client, changed.clone());
        watchers.push(task);
        overlays
    });
    if overlays.is_none() {
        nodeoverlay::warn_if_ignored(&client).await;
    }
    let buffers = settings.feature_gates.capacity_buffer.then(|| {
        let (buffers, tasks) = capacity_buffer::spawn(&client, changed.clone());
        watchers.extend(tasks);
        buffers
    });
    let ignored_buffers = match buffers {
        Some(_) => None,
        None => capacity_buffer::watch_ignored(&client, changed.clone())
            .await
            .map(|(ignored, task)| {
                watchers.push(task);
                ignored
            }),
    };
    let published = overlays.as_ref().map(nodeoverlay::Overlays::published);
    let published = published.unwrap_or_default();
    let built = provider::build(&settings, &client, &metrics, changed.clone(), published).await?;
    watchers.extend(built.watchers);
    let watch_health = health.clone();
    let abort: Vec<_> = watchers.iter().map(|w| w.abort_handle()).collect();
    let monitor = tokio::spawn(async move {
        // A watch task only ends on a bug or a panic; the probe then restarts the pod.
        let _ = futures::future::select_all(watchers).await;
        tracing::error!("a watch task stopped");
        watch_health.set_failed();
    });
    let id = identity();
    let (events, rx) = EventSink::channel();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "karpenter".into(),
            instance: Some(id.clone()),
        },
    );
    if settings.dry_run {
        tokio::spawn(dry_run::log_events(rx));
    } else {
        tokio::spawn(publish_loop(recorder, rx));
    }
    let provider = built.provider;
    tracing::info!(
        provider = provider.name(),
        cluster = %settings.cluster_name,
        identity = %id,
        "starting controller"
    );
    let ctx = Ctx {
        client: client.clone(),
        provider,
        limiter: super::api::RateLimiter::new(settings.kube_client_qps, settings.kube_client_burst),
        settings: settings.clone(),
        metrics: metrics.clone(),
        stores: stores.clone(),
        events,
        clock: system_clock(),
        interruptions: super::interruptions::InterruptionInbox::new(changed.clone()),
    };

    let synced = async {
        stores.wait_until_ready().await?;
        match &overlays {
            Some(o) => o.wait_until_ready().await,
            None => Ok(()),
        }
        .map_err(|e| anyhow::anyhow!("a watch stopped before listing: {e}"))?;
        match &buffers {
            Some(b) => b.wait_until_ready().await,
            None => Ok(()),
        }
        .map_err(|e| anyhow::anyhow!("a watch stopped before listing: {e}"))
    };
    tokio::select! {
        r = synced => r?,
        r = metrics_server => return Err(anyhow::anyhow!("metrics server on :{metrics_port} stopped: {r:?}")),
        r = health_server => return Err(anyhow::anyhow!("health server on :{health_port} stopped: {r:?}")),
    }
    health.set_ready(true);
    metrics.set_synced(true);
    tracing::info!("caches synced");

    let (mut gate, election) = if settings.disable_leader_election {
        (LeaderGate::always(), None)
    } else {
        let (gate, election) = leader::elect(
            client.clone(),
            &settings.leader_election_namespace,
            &settings.leader_election_name,
            &id,
            metrics.runtime.clone(),
        )
        .await?;
        (gate, Some(election))
    };
    // Stopping: the watch monitor goes first so the watches it guards can end without an
    // error, then the Lease is released so a standby takes over at once.
    let stop = |election: Option<leader::Election>| async move {
        monitor.abort();
        for w in abort {
            w.abort();
        }
        if let Some(election) = election {
            election.release().await;
        }
    };
    // One signal handler for the whole run: a SIGTERM between two terms of leadership is
    // not missed.
    let mut signal = std::pin::pin!(shutdown());
    let hooks = built.hooks;
    let mut controller = Controller::new(ctx.clone())
        .with_hooks(hooks.clone())
        .with_overlays(overlays)
        .with_buffers(buffers)
        .with_ignored_buffers(ignored_buffers);
    // Losing the Lease (it could not be renewed in time, for example while the API server
    // was unreachable) ends the process, as client-go's leader election does: a second term
    // in the same process did no work in the fault tests, and a fresh process competes again.
    let result = run_term(&mut controller, &mut gate, &changed, &mut signal, || {
        metrics.set_leader(&settings.leader_election_name, true);
        (metrics.runtime).start_stages(settings.provider == ProviderKind::Fake);
        tracing::info!(identity = %id, "acquired leadership");
        let (stop_tasks, tasks_stopped) = tokio::sync::watch::channel(false);
        match &hooks {
            Some(_) if settings.dry_run => {
                tracing::info!(
                    "dry-run: the provider's background tasks (interruption queue) are not started"
                );
            }
            Some(hooks) => hooks.start_leader_tasks(&ctx, tasks_stopped.clone()),
            None => {}
        }
        if settings.provider == ProviderKind::Fake && !settings.dry_run {
            kubelet::spawn(ctx.clone(), changed.clone(), tasks_stopped);
        }
        stop_tasks
    })
    .await;
    metrics.set_leader(&settings.leader_election_name, false);
    stop(election).await;
    result
}

/// Waits for leadership (or a shutdown signal while standing by), calls `started` once the
/// Lease is held, and runs the term; the sender `started` returns stops the leader's
/// background tasks when the term ends.
///
/// # Errors
/// Lost leadership, or installing the signal handler failed.
async fn run_term<S>(
    controller: &mut Controller,
    gate: &mut LeaderGate,
    changed: &Notify,
    signal: &mut std::pin::Pin<&mut S>,
    started: impl FnOnce() -> tokio::sync::watch::Sender<bool>,
) -> anyhow::Result<()>
where
    S: std::future::Future<Output = anyhow::Result<()>>,
{
    tokio::select! {
        () = gate.wait_for_leadership() => {}
        r = signal.as_mut() => {
            if r.is_ok() {
                tracing::info!("shut down while standing by");
            }
            return r;
        }
    }
    let stop_tasks = started();
    let ended = run_leader(controller, gate, changed, signal).await;
    let _ = stop_tasks.send(true);
    match ended? {
        Term::Shutdown => {
            tracing::info!("shut down");
            Ok(())
        }
        Term::LostLeadership => {
            tracing::error!("lost leadership; exiting so a fresh replica takes over");
            Err(anyhow::anyhow!("leader election lost"))
        }
    }
}

/// How a term of leadership ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Term {
    /// SIGTERM or Ctrl-C: the process exits.
    Shutdown,
    /// The Lease was lost: the process exits and a fresh replica competes.
    LostLeadership,
}

/// Runs passes until `signal` resolves (shutdown) or leadership is lost. A pass in progress
/// when the Lease is lost is abandoned at its next await point: every write it had made is
/// complete and recorded in the objects, and the next leader (maybe this replica again)
/// decides again from them.
///
/// # Errors
/// Installing the signal handler failed.
pub async fn run_leader<S>(
    controller: &mut Controller,
    gate: &mut LeaderGate,
    changed: &Notify,
    signal: &mut std::pin::Pin<&mut S>,
) -> anyhow::Result<Term>
where
    S: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut lost = gate.clone();
    loop {
        tokio::select! {
            () = lost.lost() => {
                tracing::debug!("the leader election Lease was lost");
                return Ok(Term::LostLeadership);
            }
            r = signal.as_mut() => { r?; tracing::info!("shutting down"); return Ok(Term::Shutdown); }
            () = controller.pass(), if gate.is_leader() => controller.ctx.stores.dirty.done(),
        }
        // Wake on any watch event, at most every 200 ms and at least every second.
        tokio::select! {
            () = changed.notified() => tokio::time::sleep(Duration::from_millis(200)).await,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

async fn shutdown() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing SIGTERM handler")?;
        tokio::select! {
            _ = term.recv() => {}
            r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}
