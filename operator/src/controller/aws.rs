//! The `aws` provider inside the controller: EC2NodeClasses are watched, resolved against
//! EC2 and SSM, and their status and finalizer kept ([`AwsHooks::reconcile`]); the SQS
//! interruption queue is polled by the leader, and every message about a cluster's instance
//! becomes a notice for the index ([`InterruptionHandler`]): disruption's forceful path then
//! deletes the NodeClaim of a spot interruption, scheduled change or stop/terminate, and
//! the termination path cordons, drains and deletes it. EC2 status check failures and
//! scheduled events of the cluster's instances take the same path.

use super::api::{self, ErrorClass, classify};
use super::provider::ProviderHooks;
use super::{Ctx, exec, state};
use crate::settings::Settings;
use anyhow::Context as _;
use base64::Engine as _;
use karpenter_cloudprovider::OfferingRef;
use karpenter_cloudprovider::overlay::Published;
use karpenter_cloudprovider::v1::labels as v1labels;
use karpenter_cloudprovider_aws::capacity_reservation::Availability;
use karpenter_cloudprovider_aws::instance::parse_provider_id;
use karpenter_cloudprovider_aws::interruption::{self, InterruptionSink, SinkError};
use karpenter_cloudprovider_aws::settings::{ca_bundle_from_der, kubernetes_version};
use karpenter_cloudprovider_aws::tagging::{self, TagTarget};
use karpenter_cloudprovider_aws::{
    AwsClients, AwsCloudProvider, AwsSettings, EC2NodeClass, InterruptionEvent, InterruptionKind,
    NodeClaimInterruption, UnavailableOfferings,
};
use karpenter_metrics::MessageTypeLabels;
use karpenter_scheduling::model::Millis;
use kube::runtime::reflector::{self, Store};
use kube::{Api, Client};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{Notify, watch};

/// Finalizer Karpenter puts on EC2NodeClasses: one is deleted only once no NodeClaim uses it.
pub const NODE_CLASS_FINALIZER: &str = "karpenter.k8s.aws/termination";
/// How often capacity reservations are checked (upstream's capacity-type and expiration
/// controllers run once a minute).
pub const NODE_CLASS_RESYNC_MS: Millis = 60_000;
/// The in-cluster CA a pod's service account trusts.
const SERVICE_ACCOUNT_CA: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

/// The pieces [`build`] returns.
pub struct AwsBuilt {
    /// The provider.
    pub provider: Arc<AwsCloudProvider>,
    /// Its controller hooks.
    pub hooks: Arc<dyn ProviderHooks>,
    /// The EC2NodeClass watch.
    pub watcher: tokio::task::JoinHandle<()>,
}

async fn default_ca_bundle() -> Option<String> {
    if let Ok(pem) = tokio::fs::read(SERVICE_ACCOUNT_CA).await {
        return Some(base64::engine::general_purpose::STANDARD.encode(pem));
    }
    let config = kube::Config::infer().await.ok()?;
    config.root_cert.as_deref().map(ca_bundle_from_der)
}

/// The provider's settings from the controller's.
pub fn aws_settings(
    settings: &Settings,
    region: &str,
    kubernetes_version: Option<String>,
    ca_bundle: Option<String>,
) -> AwsSettings {
    let o = &settings.aws;
    let mut s = AwsSettings::new(&settings.cluster_name, region);
    s.cluster_endpoint = o.cluster_endpoint.clone();
    let flag_ca_bundle = Some(o.cluster_ca_bundle.clone()).filter(|b| !b.is_empty());
    s.cluster_ca_bundle = flag_ca_bundle.or(ca_bundle);
    if let Some(v) = kubernetes_version {
        s.kubernetes_version = v;
    }
    s.interruption_queue = (!o.interruption_queue.is_empty()).then(|| o.interruption_queue.clone());
    s.vm_memory_overhead_percent = o.vm_memory_overhead_percent;
    s.reserved_enis = o.reserved_enis;
    s.pricing_api = !o.isolated_vpc;
    s.reserved_capacity = settings.feature_gates.reserved_capacity;
    s.node_class_cel = o.node_class_cel;
    s.subnet_ttl = o.subnet_refresh_interval;
    s.security_group_ttl = o.security_group_refresh_interval;
    s.ami_ttl = o.ami_refresh_interval;
    (s.isolated_vpc, s.manage_instance_profiles) = (o.isolated_vpc, !settings.dry_run);
    s
}

/// Connects to AWS with the default credential chain and starts watching EC2NodeClasses.
///
/// # Errors
/// No AWS region could be resolved.
pub async fn build(
    settings: &Settings,
    client: &Client,
    changed: Arc<Notify>,
    overlays: Published,
) -> anyhow::Result<AwsBuilt> {
    let (clients, region) = AwsClients::from_default_chain().await;
    let region = region.context(
        "--cloud-provider aws: no AWS region (set AWS_REGION, or run where instance metadata is reachable)",
    )?;
    let version = match client.apiserver_version().await {
        Ok(info) => kubernetes_version(&info.major, &info.minor),
        Err(e) => {
            tracing::warn!(error = %e, "reading the API server version failed; AMI aliases use the default version");
            None
        }
    };
    let aws = aws_settings(settings, &region, version, default_ca_bundle().await);
    tracing::info!(
        region,
        kubernetes_version = aws.kubernetes_version,
        interruption_queue = aws.interruption_queue.as_deref().unwrap_or(""),
        "aws provider"
    );
    let provider = Arc::new(AwsCloudProvider::new(clients.clone(), aws).with_overlays(overlays));
    let (store, writer) = reflector::store();
    // EC2NodeClasses are not indexed: no change keys to record.
    let watcher = state::spawn_one(
        Api::<EC2NodeClass>::all(client.clone()),
        writer,
        changed,
        None,
        |nc| karpenter_cluster::ObjectKey::NodePool(nc.metadata.name.clone().unwrap_or_default()),
    );
    let hooks = AwsHooks::new(provider.clone(), store, clients);
    Ok(AwsBuilt {
        provider,
        hooks: Arc::new(hooks),
        watcher,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Resolved {
    at: Millis,
    generation: Option<i64>,
}

/// The controller's hooks for the `aws` provider.
pub struct AwsHooks {
    provider: Arc<AwsCloudProvider>,
    node_classes: Store<EC2NodeClass>,
    clients: AwsClients,
    resolved: Mutex<BTreeMap<String, Resolved>>,
    told: Mutex<super::ignored::Told>,
    reservations_synced: std::sync::atomic::AtomicI64,
}

impl AwsHooks {
    /// Hooks over `provider`, reading EC2NodeClasses from `node_classes`.
    pub fn new(
        provider: Arc<AwsCloudProvider>,
        node_classes: Store<EC2NodeClass>,
        clients: AwsClients,
    ) -> Self {
        Self {
            provider,
            node_classes,
            clients,
            resolved: Mutex::new(BTreeMap::new()),
            told: Mutex::new(super::ignored::Told::default()),
            reservations_synced: std::sync::atomic::AtomicI64::new(Millis::MIN),
        }
    }

    /// Upstream's capacity-type and expiration controllers, once a minute (see
    /// `karpenter_cloudprovider_aws::reservation_sync`).
    async fn sync_reservations(&self, ctx: &Ctx, now: Millis) {
        use std::sync::atomic::Ordering::Relaxed;
        let last = self.reservations_synced.load(Relaxed);
        if now.saturating_sub(last) < NODE_CLASS_RESYNC_MS || ctx.settings.dry_run {
            return;
        }
        self.reservations_synced.store(now, Relaxed);
        let (claims, nodes) = (ctx.stores.node_claims.state(), ctx.stores.nodes.state());
        let (claims, nodes) = (claims.iter().map(AsRef::as_ref), nodes.iter());
        let plan = match self
            .provider
            .reservation_sync(claims, nodes.map(AsRef::as_ref))
            .await
        {
            Ok(plan) => plan,
            Err(e) => return tracing::warn!(error = %e, "checking capacity reservations failed"),
        };
        let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(ctx.client.clone());
        for (node, name) in plan.relabel() {
            ctx.limiter.acquire().await;
            let res = match node {
                true => api::merge_patch(&nodes, name, plan.patch()).await.map(drop),
                false => api::merge_patch(&ctx.node_claims(), name, plan.patch())
                    .await
                    .map(drop),
            };
            tracing::info!(name, ok = res.is_ok(), "reservation ended: now on-demand");
        }
        for (name, id) in &plan.delete_claims {
            tracing::info!(nodeclaim = name, id, "capacity block expiring: deleting");
            if let Err(e) = exec::delete_node_claim(ctx, name).await {
                tracing::warn!(nodeclaim = name, error = %e, "deleting nodeclaim failed");
            }
        }
    }

    /// How often a NodeClass is resolved again: its soonest refresh interval (subnets,
    /// security groups, AMIs; each cached for its own).
    fn refresh_ms(&self) -> Millis {
        let s = self.provider.settings();
        let soonest = s.subnet_ttl.min(s.security_group_ttl).min(s.ami_ttl);
        Millis::try_from(soonest.as_millis()).unwrap_or(Millis::MAX)
    }

    fn due(&self, nc: &EC2NodeClass, now: Millis) -> bool {
        let resolved = self.resolved.lock().unwrap_or_else(PoisonError::into_inner);
        resolved.get(nc.name()).is_none_or(|r| {
            r.generation != nc.metadata.generation || now - r.at >= self.refresh_ms()
        })
    }

    /// Resolves `nc`, hands the result to the provider and writes its status back.
    async fn resolve(&self, ctx: &Ctx, nc: &EC2NodeClass, now: Millis) {
        let fresh = self.provider.reconcile_node_class(nc).await;
        self.provider.apply_node_class(fresh.clone());
        let (at, generation) = (now, nc.metadata.generation);
        self.resolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(nc.name().to_owned(), Resolved { at, generation });
        if fresh.status == nc.status || ctx.settings.dry_run {
            return;
        }
        let api: Api<EC2NodeClass> = Api::all(ctx.client.clone());
        let patch = serde_json::json!({ "status": fresh.status });
        ctx.limiter.acquire().await;
        if let Err(e) = api::merge_patch_status(&api, nc.name(), &patch).await
            && classify(&e) != ErrorClass::NotFound
        {
            tracing::warn!(ec2nodeclass = nc.name(), error = %e, "updating EC2NodeClass status failed");
        }
    }

    /// Upstream's hash controller: NodeClaims of `nc` whose hash another hash version wrote
    /// get the current version (and hash), rather than drifting on an incomparable hash.
    async fn update_hash_versions(&self, ctx: &Ctx, nc: &EC2NodeClass) {
        use karpenter_cloudprovider_aws::instance::hash_version_update;
        for claim in ctx.stores.node_claims_sorted() {
            if claim.spec.node_class_ref.kind != karpenter_cloudprovider_aws::nodeclass::KIND
                || claim.spec.node_class_ref.name != nc.name()
                || claim.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            let Some(annotations) = hash_version_update(&claim, nc) else {
                continue;
            };
            let patch = serde_json::json!({ "metadata": { "annotations": annotations } });
            ctx.limiter.acquire().await;
            match api::merge_patch(&ctx.node_claims(), claim.name(), patch).await {
                Ok(_) => {
                    tracing::debug!(nodeclaim = claim.name(), "nodeclaim hash version updated")
                }
                Err(e) if classify(&e) == ErrorClass::NotFound => {}
                Err(e) => {
                    tracing::warn!(nodeclaim = claim.name(), error = %e, "updating the nodeclaim hash version failed")
                }
            }
        }
    }

    /// A deleted NodeClass keeps its finalizer while any NodeClaim still uses it, so no
    /// instance is left without the launch configuration it was created from.
    async fn finalize(&self, ctx: &Ctx, nc: &EC2NodeClass) {
        let in_use: Vec<String> = ctx
            .stores
            .node_claims_sorted()
            .iter()
            .filter(|c| {
                c.spec.node_class_ref.kind == karpenter_cloudprovider_aws::nodeclass::KIND
                    && c.spec.node_class_ref.name == nc.name()
            })
            .map(|c| c.name().to_owned())
            .collect();
        if !in_use.is_empty() {
            tracing::debug!(ec2nodeclass = nc.name(), nodeclaims = ?in_use, "waiting on nodeclaims before removing the finalizer");
            return;
        }
        let finalizers = nc.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == NODE_CLASS_FINALIZER) {
            return;
        }
        if let Err(e) = self.provider.instance_profiles().finalize(nc).await {
            return tracing::warn!(ec2nodeclass = nc.name(), error = %e, "deleting instance profiles failed");
        }
        let mut kept = finalizers;
        kept.retain(|f| f != NODE_CLASS_FINALIZER);
        ctx.limiter.acquire().await;
        match api::set_finalizers(
            &Api::<EC2NodeClass>::all(ctx.client.clone()),
            nc.name(),
            nc.metadata.resource_version.as_deref(),
            &kept,
        )
        .await
        {
            Ok(_) => {
                self.provider.delete_node_class(nc.name());
                tracing::info!(ec2nodeclass = nc.name(), "deleted ec2nodeclass");
            }
            Err(e) if classify(&e) == ErrorClass::NotFound => {}
            Err(e) => {
                tracing::warn!(ec2nodeclass = nc.name(), error = %e, "removing the EC2NodeClass finalizer failed")
            }
        }
    }

    async fn add_finalizer(&self, ctx: &Ctx, nc: &EC2NodeClass) {
        let mut finalizers = nc.metadata.finalizers.clone().unwrap_or_default();
        if finalizers.iter().any(|f| f == NODE_CLASS_FINALIZER) {
            return;
        }
        finalizers.push(NODE_CLASS_FINALIZER.to_owned());
        ctx.limiter.acquire().await;
        if let Err(e) = api::set_finalizers(
            &Api::<EC2NodeClass>::all(ctx.client.clone()),
            nc.name(),
            nc.metadata.resource_version.as_deref(),
            &finalizers,
        )
        .await
            && classify(&e) != ErrorClass::NotFound
        {
            tracing::warn!(ec2nodeclass = nc.name(), error = %e, "adding the EC2NodeClass finalizer failed");
        }
    }
}

#[async_trait::async_trait]
impl ProviderHooks for AwsHooks {
    fn node_classes(&self) -> karpenter_cluster::node_class::NodeClasses {
        use karpenter_cloudprovider_aws::nodeclass::{GROUP, KIND};
        let classes = self.node_classes.state();
        let objects = classes.iter().map(|c| (&c.metadata, c.as_ref()));
        karpenter_cluster::node_class::NodeClasses::of_kind(GROUP, KIND, objects)
    }

    async fn reconcile(&self, ctx: &Ctx) {
        let now = ctx.now_ms();
        let mut classes = self.node_classes.state();
        classes.sort_by(|a, b| a.name().cmp(b.name()));
        let live: BTreeSet<&str> = classes.iter().map(|c| c.name()).collect();
        use karpenter_cloudprovider::v1::StatusConditions as _;
        use karpenter_metrics::conditions::{ObjectStatus, StatusKind};
        let statuses = classes
            .iter()
            .map(|c| ObjectStatus::of(&c.metadata, c.conditions()));
        ctx.metrics
            .record_statuses(StatusKind::Ec2NodeClass, statuses, now);
        let gone: Vec<String> = {
            let mut resolved = self.resolved.lock().unwrap_or_else(PoisonError::into_inner);
            let (kept, gone): (BTreeMap<_, _>, BTreeMap<_, _>) = std::mem::take(&mut *resolved)
                .into_iter()
                .partition(|(k, _)| live.contains(k.as_str()));
            *resolved = kept;
            gone.into_keys().collect()
        };
        for name in gone {
            self.provider.delete_node_class(&name);
        }
        let profiles = self.provider.instance_profiles();
        let gc = profiles.collect_garbage_if_due(&classes, || ctx.stores.node_claims.state());
        if let Err(e) = gc.await {
            tracing::warn!(error = %e, "garbage-collecting instance profiles failed");
        }
        for nc in classes {
            // The shadow mode resolves classes (pools need their instance types) but
            // writes neither finalizers nor status.
            let dry_run = ctx.settings.dry_run;
            if nc.metadata.deletion_timestamp.is_some() {
                if !dry_run {
                    self.finalize(ctx, &nc).await;
                }
                continue;
            }
            if !dry_run {
                self.add_finalizer(ctx, &nc).await;
            }
            self.told
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .tell(ctx, nc.as_ref(), || nc.ignored_fields());
            if self.due(&nc, now) {
                self.resolve(ctx, &nc, now).await;
            }
            if !dry_run {
                self.update_hash_versions(ctx, &nc).await;
            }
        }
        if self.provider.settings().reserved_capacity {
            self.sync_reservations(ctx, now).await;
        }
    }

    fn start_leader_tasks(&self, ctx: &Ctx, shutdown: watch::Receiver<bool>) {
        let sink = Arc::new(InterruptionHandler {
            ctx: ctx.clone(),
            unavailable: self.provider.unavailable_offerings().clone(),
            reservations: self.provider.reservation_availability().clone(),
        });
        let queue = self.provider.settings().interruption_queue.clone();
        let dry_run = ctx.settings.dry_run;
        if !dry_run {
            let target = Arc::new(ClaimTagger(ctx.clone()));
            tokio::spawn(tagging::run(
                self.provider.clone(),
                target,
                shutdown.clone(),
            ));
        }
        interruption::spawn_sources(&self.clients, queue, sink, dry_run, shutdown);
    }
}

/// Upstream's tagging controller's view of the cluster: claims from the stores, the
/// tagged annotations written through the API.
pub struct ClaimTagger(pub Ctx);

#[async_trait::async_trait]
impl TagTarget for ClaimTagger {
    fn claims(&self) -> Vec<Arc<karpenter_cloudprovider::NodeClaim>> {
        self.0.stores.node_claims.state()
    }

    async fn mark_tagged(&self, name: &str) -> Result<(), String> {
        self.0.limiter.acquire().await;
        let claims = self.0.node_claims();
        let patched = api::merge_patch(&claims, name, tagging::tagged_patch()).await;
        patched.map(drop).map_err(|e| e.to_string())
    }
}

/// Receives interruptions the way Karpenter's interruption controller does: an event on
/// the NodeClaim and its Node; for a spot interruption the offering is marked unavailable
/// (so the replacement avoids it), for a reservation's the reservation counted full; a
/// failed status check stamps the termination timestamp. Then the notice goes to the
/// index ([`Ctx::interruptions`]): for anything but a rebalance recommendation the next
/// tick's disruption pass deletes the NodeClaim, which cordons, drains and terminates the
/// node through the termination finalizer.
pub struct InterruptionHandler {
    /// Writes go through it.
    pub ctx: Ctx,
    /// Interrupted spot offerings are marked here.
    pub unavailable: Arc<UnavailableOfferings>,
    /// Interrupted reservations are counted full here.
    pub reservations: Arc<Availability>,
}

#[async_trait::async_trait]
impl InterruptionSink for InterruptionHandler {
    fn node_claim_for(&self, instance_id: &str) -> Option<String> {
        self.ctx
            .stores
            .node_claims
            .state()
            .iter()
            .find(|c| parse_provider_id(c.provider_id()) == Some(instance_id))
            .map(|c| c.name().to_owned())
    }

    async fn deliver(&self, interruption: NodeClaimInterruption) -> Result<(), SinkError> {
        let kind = interruption.event.kind;
        // Gone since the lookup: nothing left to act on.
        let Some(claim) = exec::claim_of(&self.ctx, &interruption.node_claim) else {
            return Ok(());
        };
        let node = self.ctx.stores.node_by_provider_id(claim.provider_id());
        let reason = kind.event_reason();
        let message = format!(
            "{} for instance {}",
            kind.as_str(),
            interruption.event.instance_id
        );
        self.ctx
            .events
            .warning(claim.as_ref(), reason, message.clone());
        if let Some(n) = &node {
            self.ctx.events.warning(n.as_ref(), reason, message);
        }
        if kind == InterruptionKind::SpotInterruption
            && let Some(instance_type) = claim.label(v1labels::INSTANCE_TYPE)
            && let Some(zone) = claim.label(v1labels::ZONE)
            && !instance_type.is_empty()
            && !zone.is_empty()
        {
            self.unavailable.mark_unavailable(OfferingRef {
                instance_type: instance_type.to_owned(),
                zone: zone.to_owned(),
                capacity_type: v1labels::CAPACITY_TYPE_SPOT.to_owned(),
            });
        }
        if kind == InterruptionKind::CapacityReservationInterruption
            && let Some(id) = claim.label(karpenter_scheduling::labels::AWS_CAPACITY_RESERVATION_ID)
        {
            self.reservations.exhausted(id);
        }
        let stamped = claim.annotation(v1labels::NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION);
        if kind.forceful() && stamped.is_none() {
            let stamp = exec::stamp_termination(&self.ctx, claim.name()).await;
            stamp.map_err(|e| SinkError::new(claim.name(), e))?;
        }
        // The deletion is disruption's: the notice goes to the index, whose next tick
        // deletes the claim through the forceful interruption path (`exec` announces it).
        let now = self.ctx.now_ms();
        self.ctx.interruptions.deliver(claim.name(), kind, now);
        Ok(())
    }

    fn observe(&self, event: &InterruptionEvent) {
        let m = &self.ctx.metrics;
        m.interruption_received
            .get_or_create(&MessageTypeLabels {
                message_type: event.kind.as_str().to_owned(),
            })
            .inc();
        let now = (self.ctx.clock)();
        let at = jiff::Timestamp::try_from(event.time).unwrap_or(now);
        let secs = now.duration_since(at).as_secs_f64().max(0.0);
        m.interruption_queue_duration.observe(secs);
    }

    fn deleted(&self) {
        self.ctx.metrics.interruption_deleted.inc();
    }
}
