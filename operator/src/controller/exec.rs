//! Carrying out [`Action`]s against the API server and the cloud provider, and the parts of
//! termination that are API mechanics rather than decisions (finalizers, node deletion,
//! VolumeAttachments).
//!
//! Every executor is idempotent: it reads the latest object from the stores, writes with
//! `resourceVersion` where a lost update would matter, and treats "already done" (404 on
//! delete, finalizer already gone) as success. A failure leaves the object as it was, and
//! the next pass decides again from the objects.

use super::api::{ErrorClass, classify, merge_patch, set_finalizers};
use super::{Ctx, ReconcileError, lifecycle, repair};
use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use karpenter_cloudprovider::v1::{ConditionType, NodeClaim, StatusConditions, labels as v1labels};
use karpenter_cluster::provisioner;
use karpenter_cluster::reconciler::conditions;
use karpenter_cluster::termination;
use karpenter_cluster::{Action, DeletionCause};
use karpenter_disruption::InterruptionKind;
use karpenter_metrics::{CreatedLabels, DisruptedLabels};
use karpenter_scheduling::model::PodKey;
use kube::api::{DeleteParams, EvictParams, PostParams};
use std::sync::Arc;

/// What executing one action did, for the caller's bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Executed {
    /// Done.
    Done,
    /// Refused for now (an eviction blocked by a PodDisruptionBudget: HTTP 429); retried on
    /// a later pass.
    Blocked,
    /// A launch found no capacity: its NodeClaim was deleted and the provider now reports
    /// the offerings it tried unavailable, so instance types must be read again before the
    /// next plan (or the pods would be planned onto the same offerings).
    NoCapacity,
}

/// Deletes a NodeClaim (404 is success): its finalizer keeps it until termination is done.
///
/// # Errors
/// Other API errors.
pub async fn delete_node_claim(ctx: &Ctx, name: &str) -> Result<(), ReconcileError> {
    let api = ctx.node_claims();
    // Deleting is idempotent, so transient failures and throttling are retried in place.
    let result = super::api::retry(4, || async {
        ctx.limiter.acquire().await;
        api.delete(name, &DeleteParams::default()).await
    })
    .await;
    ReconcileError::unless_gone(result, "deleting NodeClaim", name)
}

/// Sets NodeClaim `name`'s termination timestamp to now, so its drain waits no grace period
/// (failed EC2 status checks). 404 is success.
///
/// # Errors
/// Other API errors.
#[cfg(feature = "aws")]
pub async fn stamp_termination(ctx: &Ctx, name: &str) -> Result<(), ReconcileError> {
    stamp_termination_after(ctx, name, 0).await
}

/// Sets NodeClaim `name`'s `karpenter.sh/nodeclaim-termination-timestamp` to `after_ms`
/// from now: its drain ends then, whatever PodDisruptionBudgets and `do-not-disrupt` say.
///
/// # Errors
/// Other API errors.
pub async fn stamp_termination_after(
    ctx: &Ctx,
    name: &str,
    after_ms: karpenter_scheduling::model::Millis,
) -> Result<(), ReconcileError> {
    let at = karpenter_cluster::provisioner::time(ctx.now_time().0.as_millisecond() + after_ms);
    let stamp = at.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let annotations =
        serde_json::json!({ v1labels::NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION: stamp });
    ctx.limiter.acquire().await;
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    let res = merge_patch(&ctx.node_claims(), name, patch).await;
    ReconcileError::unless_gone(res, "stamping the termination timestamp of NodeClaim", name)
}

/// The Node named `name` in the watch cache.
pub(crate) fn node_of(ctx: &Ctx, name: &str) -> Option<Arc<Node>> {
    ctx.stores
        .nodes
        .get(&kube::runtime::reflector::ObjectRef::new(name))
}

/// The NodeClaim named `name` in the watch cache.
pub(crate) fn claim_of(ctx: &Ctx, name: &str) -> Option<Arc<NodeClaim>> {
    ctx.stores
        .node_claims
        .get(&kube::runtime::reflector::ObjectRef::new(name))
}

/// Adds (`on`) or removes the `karpenter.sh/disrupted:NoSchedule` taint, guarded by the
/// node's resourceVersion so a concurrent taint change is not overwritten.
///
/// # Errors
/// API errors (404 is success: the node is gone).
pub async fn set_disrupted_taint(ctx: &Ctx, node: &str, on: bool) -> Result<(), ReconcileError> {
    let Some(current) = node_of(ctx, node) else {
        return Ok(());
    };
    let current_taints = current.spec.as_ref().and_then(|s| s.taints.as_deref());
    let Some(taints) = termination::with_disrupted_taint(current_taints.unwrap_or_default(), on)
    else {
        return Ok(());
    };
    ctx.limiter.acquire().await;
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": current.metadata.resource_version},
        "spec": {"taints": taints},
    });
    let res = merge_patch(&ctx.nodes(), node, patch).await;
    ReconcileError::unless_gone(res, "tainting Node", node)
}

/// A step that completed is done.
fn done(step: Result<(), ReconcileError>) -> Result<Executed, ReconcileError> {
    step.map(|()| Executed::Done)
}

/// Executes one action.
///
/// # Errors
/// API or provider errors; the action is decided again on a later pass.
pub async fn execute(ctx: &Ctx, action: &Action) -> Result<Executed, ReconcileError> {
    match action {
        Action::LaunchNodeClaim { claim, plan } => {
            let name = claim.name().to_owned();
            let mut claim = NodeClaim::clone(claim);
            // The API server sets these.
            claim.metadata.creation_timestamp = None;
            ctx.limiter.acquire().await;
            match ctx
                .node_claims()
                .create(&PostParams::default(), &claim)
                .await
            {
                Ok(_) => {
                    ctx.metrics
                        .nodeclaims_created
                        .get_or_create(&CreatedLabels {
                            reason: "provisioning".into(),
                            nodepool: plan.node_pool.clone(),
                            min_values_relaxed: claim
                                .annotation(v1labels::NODECLAIM_MIN_VALUES_RELAXED_ANNOTATION)
                                .unwrap_or("false")
                                .to_owned(),
                        })
                        .inc();
                    tracing::info!(
                        nodeclaim = %name,
                        nodepool = %plan.node_pool,
                        pods = plan.pods.len(),
                        instance_types = plan.instance_type_options.len(),
                        price = plan.price,
                        "created nodeclaim"
                    );
                    for key in &plan.pods {
                        if let Some(pod) = pod_of(ctx, key) {
                            ctx.events.normal(
                                pod.as_ref(),
                                "Nominated",
                                format!("Pod should schedule on: nodeclaim/{name}"),
                            );
                        }
                    }
                    Ok(Executed::Done)
                }
                Err(e) => Err(ReconcileError::api("creating NodeClaim", &name)(e)),
            }
        }
        Action::AddTerminationFinalizer { node_claim } => {
            done(lifecycle::add_finalizer(ctx, node_claim).await)
        }
        Action::LaunchInstance { node_claim } => lifecycle::launch_instance(ctx, node_claim).await,
        Action::RegisterNode { node_claim, node } => {
            done(lifecycle::register(ctx, node_claim, node).await)
        }
        Action::InitializeNode { node_claim, node } => {
            done(lifecycle::initialize(ctx, node_claim, node).await)
        }
        Action::RepairNodeClaim {
            node_claim,
            node,
            condition,
            drain_bound,
            legacy,
        } => {
            let bound = repair::DrainBound {
                after: *drain_bound,
                legacy: *legacy,
            };
            done(repair::repair(ctx, node_claim, node, condition, bound).await)
        }
        Action::TaintDisrupted { node } => done(set_disrupted_taint(ctx, node, true).await),
        Action::UntaintDisrupted { node } => done(set_disrupted_taint(ctx, node, false).await),
        Action::DeleteNode { node } => {
            ctx.limiter.acquire().await;
            tracing::info!(node = %node, "deleting node of a deleting nodeclaim");
            let res = ctx.nodes().delete(node, &DeleteParams::default()).await;
            done(ReconcileError::unless_gone(res, "deleting Node", node))
        }
        Action::DeleteNodeClaim {
            node_claim,
            cause: DeletionCause::NodeDeleted,
        } => {
            tracing::info!(nodeclaim = %node_claim, "node is being deleted: deleting its nodeclaim");
            delete_node_claim(ctx, node_claim).await?;
            Ok(Executed::Done)
        }
        // A static pool's scale-down is the user's decision, not a disruption: upstream
        // deletes the claim without a disruption event or metric.
        Action::DeleteNodeClaim {
            node_claim,
            cause: DeletionCause::Overprovisioned,
        } => {
            tracing::info!(nodeclaim = %node_claim, "deleting nodeclaim: static nodepool over its replicas");
            delete_node_claim(ctx, node_claim).await?;
            Ok(Executed::Done)
        }
        // Any other deletion someone else decided (none reaches the operator today: a
        // deleted NodePool's claims go with the API server's garbage collector).
        Action::DeleteNodeClaim { node_claim, cause } if !cause.is_disruption() => {
            tracing::info!(nodeclaim = %node_claim, %cause, "deleting nodeclaim");
            delete_node_claim(ctx, node_claim).await?;
            Ok(Executed::Done)
        }
        Action::DeleteNodeClaim {
            node_claim,
            cause: DeletionCause::Interruption(kind),
        } => delete_interrupted(ctx, node_claim, *kind).await,
        Action::DeleteNodeClaim { node_claim, cause } => {
            let reason = cause.as_str();
            if let Some(claim) = claim_of(ctx, node_claim) {
                if claim.is_deleting() {
                    return Ok(Executed::Done);
                }
                record_disrupted(ctx, &claim, reason);
                ctx.events.normal(
                    claim.as_ref(),
                    "DisruptionTerminating",
                    format!("Disrupting NodeClaim: {reason}"),
                );
                if let Some(node) = ctx.stores.node_by_provider_id(claim.provider_id()) {
                    ctx.events.normal(
                        node.as_ref(),
                        "DisruptionTerminating",
                        format!("Disrupting Node: {reason}"),
                    );
                }
            }
            tracing::info!(nodeclaim = %node_claim, %reason, "deleting nodeclaim");
            delete_node_claim(ctx, node_claim).await?;
            Ok(Executed::Done)
        }
        Action::EvictPod { pod, node } => evict(ctx, pod, node).await,
        Action::DeletePod { pod, node } => {
            ctx.limiter.acquire().await;
            tracing::info!(pod = %pod, node = %node, "deleting pod: terminationGracePeriod elapsed");
            let (pods, params) = (ctx.pods(&pod.namespace), DeleteParams::default());
            let res = pods.delete(&pod.name, &params).await;
            done(ReconcileError::unless_gone(
                res,
                "deleting Pod",
                &pod.to_string(),
            ))
        }
        Action::TerminateInstance { node_claim, .. } => {
            done(terminate_instance(ctx, node_claim).await)
        }
        Action::SetClaimConditions {
            node_claim,
            changes,
        } => {
            let Some(claim) = claim_of(ctx, node_claim) else {
                return Ok(Executed::Done);
            };
            let mut updated = NodeClaim::clone(&claim);
            if conditions::apply(&mut updated, changes, ctx.now_time()) {
                lifecycle::patch_claim_status(ctx, &updated).await?;
            }
            Ok(Executed::Done)
        }
        Action::StampPodEvent { node_claim, at } => {
            // A merge patch without resourceVersion, as upstream's: a later stamp wins.
            let patch = serde_json::json!({"status": {"lastPodEventTime": provisioner::time(*at)}});
            ctx.limiter.acquire().await;
            let claims = ctx.node_claims();
            let res = super::api::merge_patch_status(&claims, node_claim, &patch).await;
            let what = "stamping NodeClaim lastPodEventTime";
            done(ReconcileError::unless_gone(res, what, node_claim))
        }
    }
}

/// Deletes a NodeClaim for disruption's interruption command as upstream's interruption
/// controller does, with `TerminatingOnInterruption` warnings on the claim and its Node
/// and `karpenter_nodeclaims_disrupted_total` counted under the message kind (no pods
/// counted, as upstream). A forceful kind's termination timestamp was stamped on receipt
/// (the provider's interruption sink), before the notice reached the index.
async fn delete_interrupted(
    ctx: &Ctx,
    node_claim: &str,
    kind: InterruptionKind,
) -> Result<Executed, ReconcileError> {
    let Some(claim) = claim_of(ctx, node_claim) else {
        return Ok(Executed::Done);
    };
    if claim.is_deleting() {
        return Ok(Executed::Done);
    }
    delete_node_claim(ctx, node_claim).await?;
    tracing::info!(
        nodeclaim = node_claim,
        kind = kind.as_str(),
        "initiating delete from interruption message"
    );
    let (reason, why) = (
        "TerminatingOnInterruption",
        "Interruption triggered termination for the NodeClaim",
    );
    ctx.events.warning(claim.as_ref(), reason, why.to_owned());
    if let Some(node) = ctx.stores.node_by_provider_id(claim.provider_id()) {
        ctx.events.warning(node.as_ref(), reason, why.to_owned());
    }
    let labels = DisruptedLabels::for_claim(kind.as_str(), &claim);
    ctx.metrics.record_disrupted(&labels, None);
    Ok(Executed::Done)
}

/// Records the disruption of `claim` for `reason` ([`DeletionCause::as_str`]: a disruption
/// reason as the API spells it, or a metric reason): `karpenter_nodeclaims_disrupted_total` with the pool's
/// consolidation policy for a consolidation, and the reschedulable pods on its node in
/// `karpenter_pods_disruption_initiated_total` where upstream counts them.
pub(super) fn record_disrupted(ctx: &Ctx, claim: &NodeClaim, reason: &str) {
    let reason = reason.to_lowercase();
    let mut labels = DisruptedLabels::for_claim(reason.as_str(), claim);
    if matches!(reason.as_str(), "empty" | "underutilized")
        && let Some(pool) = claim.node_pool().and_then(|p| {
            ctx.stores
                .node_pools
                .get(&kube::runtime::reflector::ObjectRef::new(p))
        })
    {
        labels = labels.consolidating(pool.spec.disruption.consolidation_policy);
    }
    let pods = karpenter_metrics::termination::counts_disrupted_pods(&reason).then(|| {
        let node = claim.node_name();
        if node.is_empty() {
            return 0;
        }
        ctx.stores
            .pods_on(node)
            .iter()
            .filter(|p| karpenter_metrics::termination::reschedulable_pod(p))
            .count()
    });
    ctx.metrics.record_disrupted(&labels, pods);
}

fn pod_of(ctx: &Ctx, key: &PodKey) -> Option<Arc<k8s_openapi::api::core::v1::Pod>> {
    ctx.stores
        .pods
        .get(&kube::runtime::reflector::ObjectRef::new(&key.name).within(&key.namespace))
}

/// Evicts a pod through the Eviction API. 429 (a PodDisruptionBudget refuses) is
/// [`Executed::Blocked`], not an error: the pod stays and is tried again on the next pass.
///
/// # Errors
/// Other API errors.
pub async fn evict(ctx: &Ctx, pod: &PodKey, node: &str) -> Result<Executed, ReconcileError> {
    ctx.limiter.acquire().await;
    let result = ctx
        .pods(&pod.namespace)
        .evict(&pod.name, &EvictParams::default())
        .await;
    let code = match &result {
        Ok(_) => "200".to_owned(),
        Err(kube::Error::Api(s)) => s.code.to_string(),
        Err(_) => "error".to_owned(),
    };
    (ctx.metrics).record_eviction(&code, node, &ctx.stores.node_claims.state());
    match result {
        Ok(_) => {
            tracing::info!(pod = %pod, node, "evicted pod");
            if let Some(p) = pod_of(ctx, pod) {
                ctx.events.normal(
                    p.as_ref(),
                    "Evicted",
                    format!("Evicted pod: draining node {node}"),
                );
            }
            Ok(Executed::Done)
        }
        Err(e) => match classify(&e) {
            ErrorClass::NotFound => Ok(Executed::Done),
            ErrorClass::TooManyRequests => {
                tracing::debug!(pod = %pod, node, "eviction blocked by a PodDisruptionBudget");
                Ok(Executed::Blocked)
            }
            _ => Err(ReconcileError::api("evicting Pod", &pod.to_string())(e)),
        },
    }
}

/// How many VolumeAttachments of persistent volumes still hold `node`. As upstream, an
/// attachment without a PersistentVolume name, or of a volume claimed by a pod that cannot
/// be drained (`termination::undrainable_claims`), does not.
pub async fn pending_volume_attachments(ctx: &Ctx, node: &str) -> usize {
    let attachments = ctx.stores.volume_attachments.state();
    let pvs = attachments.iter().filter(|va| va.spec.node_name == node);
    let pvs = pvs.filter_map(|va| va.spec.source.persistent_volume_name.as_deref());
    let pods = ctx.stores.pods_on(node);
    let claims = termination::undrainable_claims(pods.iter().map(AsRef::as_ref), ctx.now_ms());
    let volumes = kube::Api::<PersistentVolume>::all(ctx.client.clone());
    let mut pending = 0;
    for pv in pvs {
        let found = match claims.is_empty() {
            true => None,
            false => volumes.get_opt(pv).await.ok().flatten(),
        };
        pending += usize::from(!found.is_some_and(|v| termination::claimed_by(&v, &claims)));
    }
    pending
}

/// The last step of termination for a drained claim: wait for VolumeAttachments (unless the
/// grace period ran out), terminate the instance and, once a later delete finds it gone
/// (`NotFound`), remove the Node's and the NodeClaim's finalizers — in that order, so a
/// crash at any point is resumed by the next pass.
///
/// # Errors
/// API or provider errors.
pub async fn terminate_instance(ctx: &Ctx, name: &str) -> Result<(), ReconcileError> {
    let Some(claim) = claim_of(ctx, name) else {
        return Ok(());
    };
    if !claim.is_deleting() {
        return Ok(());
    }
    let now = ctx.now_ms();
    let node = ctx
        .stores
        .node_by_provider_id(claim.provider_id())
        .or_else(|| {
            (!claim.node_name().is_empty())
                .then(|| node_of(ctx, claim.node_name()))
                .flatten()
        });
    if let Some(node) = &node {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let pending = pending_volume_attachments(ctx, &node_name).await;
        let volumes = termination::Volumes::of(&claim, pending, now);
        let mut updated = NodeClaim::clone(&claim);
        if conditions::apply(&mut updated, &[volumes.condition()], ctx.now_time()) {
            lifecycle::patch_claim_status(ctx, &updated).await?;
        }
        if !volumes.proceed() {
            tracing::debug!(nodeclaim = name, node = %node_name, pending, "waiting for volume attachments");
            return Ok(());
        }
    }
    if !claim.provider_id().is_empty() {
        match ctx.provider.delete(&claim).await {
            // Shutting down: marked, and asked again later; the finalizers wait until it is gone.
            Ok(()) => {
                let mut updated = NodeClaim::clone(&claim);
                if updated.set_true(ConditionType::InstanceTerminating.as_str(), ctx.now_time()) {
                    lifecycle::patch_claim_status(ctx, &updated).await?;
                }
                return Ok(());
            }
            Err(source) if source.is_not_found() => ctx.metrics.record_instance_gone(&claim, now),
            Err(source) => {
                let object = name.to_owned();
                return Err(ReconcileError::Provider {
                    what: "terminating instance",
                    object,
                    source,
                });
            }
        }
    }
    if let Some(node) = &node {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        remove_finalizer_node(ctx, node).await?;
        ctx.metrics.record_node_terminated(&claim, node, now);
        tracing::info!(node = %node_name, "deleted node");
    }
    let finalizers: Vec<String> = claim
        .metadata
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != v1labels::TERMINATION_FINALIZER)
        .collect();
    ctx.limiter.acquire().await;
    match set_finalizers(
        &ctx.node_claims(),
        name,
        claim.metadata.resource_version.as_deref(),
        &finalizers,
    )
    .await
    {
        Ok(_) => {}
        Err(e) if classify(&e) == ErrorClass::NotFound => return Ok(()),
        Err(e) => return Err(ReconcileError::api("removing NodeClaim finalizer", name)(e)),
    }
    ctx.metrics.record_claim_terminated(&claim, now);
    tracing::info!(nodeclaim = name, "deleted nodeclaim");
    Ok(())
}

async fn remove_finalizer_node(ctx: &Ctx, node: &Node) -> Result<(), ReconcileError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let finalizers = node.metadata.finalizers.clone().unwrap_or_default();
    if !finalizers
        .iter()
        .any(|f| f == v1labels::TERMINATION_FINALIZER)
    {
        return Ok(());
    }
    let kept: Vec<String> = finalizers
        .into_iter()
        .filter(|f| f != v1labels::TERMINATION_FINALIZER)
        .collect();
    ctx.limiter.acquire().await;
    let res = set_finalizers(
        &ctx.nodes(),
        &name,
        node.metadata.resource_version.as_deref(),
        &kept,
    )
    .await;
    ReconcileError::unless_gone(res, "removing Node finalizer", &name)
}
