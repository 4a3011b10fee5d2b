//! NodeClaim lifecycle on a real cluster, carried out. The shared reconciler decides each
//! claim's next step ([`karpenter_cluster::registration::next_step`]) and returns it as an
//! action; here the finalizer is added, the instance launched through the provider, the
//! Node synced on registration and the conditions set.

use super::api::{merge_patch, set_finalizers};
use super::exec::{Executed, claim_of, node_of};
use super::{Ctx, ReconcileError};
use karpenter_cloudprovider::v1::{
    ConditionStatus, ConditionType, NodeClaim, NodeClaimStatus, StatusConditions,
    labels as v1labels,
};
use karpenter_cluster::launch_failure::{
    AfterLaunchFailure, LaunchErrorKind, after_launch_failure,
};
use karpenter_cluster::registration::{INITIALIZED_LABEL, registered_node_patch};

fn with_condition(claim: &NodeClaim, f: impl FnOnce(&mut NodeClaim)) -> NodeClaim {
    let mut c = claim.clone();
    f(&mut c);
    c
}

pub(super) async fn patch_claim_status(
    ctx: &Ctx,
    updated: &NodeClaim,
) -> Result<(), ReconcileError> {
    ctx.limiter.acquire().await;
    let patch = serde_json::json!({
        "metadata": { "resourceVersion": updated.metadata.resource_version },
        "status": updated.status.clone().unwrap_or_default(),
    });
    super::api::merge_patch_status(&ctx.node_claims(), updated.name(), &patch)
        .await
        .map_err(ReconcileError::api(
            "patching NodeClaim status",
            updated.name(),
        ))?;
    Ok(())
}

/// Adds the `karpenter.sh/termination` finalizer to NodeClaim `name`.
///
/// # Errors
/// API failures; the reconciler decides the step again on the next pass.
pub async fn add_finalizer(ctx: &Ctx, name: &str) -> Result<(), ReconcileError> {
    let Some(claim) = claim_of(ctx, name) else {
        return Ok(());
    };
    let mut f = claim.metadata.finalizers.clone().unwrap_or_default();
    f.push(v1labels::TERMINATION_FINALIZER.to_owned());
    ctx.limiter.acquire().await;
    set_finalizers(
        &ctx.node_claims(),
        name,
        claim.metadata.resource_version.as_deref(),
        &f,
    )
    .await
    .map_err(ReconcileError::api("adding NodeClaim finalizer", name))?;
    Ok(())
}

/// Launches NodeClaim `name`'s instance through the provider. A failure is handled as
/// [`after_launch_failure`] decides: [`Executed::NoCapacity`] when there was no capacity
/// and [`Executed::Done`] when the NodeClass was not ready (the claim is deleted in both).
///
/// # Errors
/// API failures, and provider failures that are retried (`Launched=Unknown` is set first).
pub async fn launch_instance(ctx: &Ctx, name: &str) -> Result<Executed, ReconcileError> {
    match claim_of(ctx, name) {
        Some(claim) => launch(ctx, &claim).await,
        None => Ok(Executed::Done),
    }
}

/// Registers Node `node` for NodeClaim `name`: the claim's labels, taints, finalizer and
/// owner go onto the Node, and the claim gets `Registered`.
///
/// # Errors
/// API failures.
pub async fn register(ctx: &Ctx, name: &str, node_name: &str) -> Result<(), ReconcileError> {
    let (Some(claim), Some(node)) = (claim_of(ctx, name), node_of(ctx, node_name)) else {
        return Ok(());
    };
    ctx.limiter.acquire().await;
    merge_patch(
        &ctx.nodes(),
        node_name,
        registered_node_patch(&claim, &node),
    )
    .await
    .map_err(ReconcileError::api("registering Node", node_name))?;
    let updated = with_condition(&claim, |c| {
        let status = c.status.get_or_insert_with(NodeClaimStatus::default);
        status.node_name = node_name.to_owned();
        c.set_true(ConditionType::Registered.as_str(), ctx.now_time());
    });
    patch_claim_status(ctx, &updated).await?;
    ctx.metrics
        .nodes_created
        .get_or_create(&karpenter_metrics::NodePoolZoneLabels {
            nodepool: claim.node_pool().unwrap_or_default().to_owned(),
            zone: claim.label(v1labels::ZONE).unwrap_or_default().to_owned(),
        })
        .inc();
    tracing::info!(nodeclaim = name, node = %node_name, "registered node");
    Ok(())
}

/// Labels Node `node` initialized and sets NodeClaim `name`'s `Initialized`.
///
/// # Errors
/// API failures.
pub async fn initialize(ctx: &Ctx, name: &str, node_name: &str) -> Result<(), ReconcileError> {
    let Some(claim) = claim_of(ctx, name) else {
        return Ok(());
    };
    ctx.limiter.acquire().await;
    merge_patch(
        &ctx.nodes(),
        node_name,
        serde_json::json!({"metadata": {"labels": {INITIALIZED_LABEL: "true"}}}),
    )
    .await
    .map_err(ReconcileError::api("labelling Node initialized", node_name))?;
    let updated = with_condition(&claim, |c| {
        c.set_true(ConditionType::Initialized.as_str(), ctx.now_time());
    });
    patch_claim_status(ctx, &updated).await?;
    tracing::info!(nodeclaim = name, node = %node_name, "initialized node");
    Ok(())
}

async fn launch(ctx: &Ctx, claim: &NodeClaim) -> Result<Executed, ReconcileError> {
    match ctx.provider.create(claim).await {
        Ok(launched) => {
            // Labels the provider resolved (instance type, zone, capacity type …) go on
            // the claim first, so a crash between the two patches leaves a claim that
            // launches again idempotently rather than one with a status and no labels.
            // Its annotations (aws: class hash, instance profile) are merged as upstream does.
            let mut labels = claim.metadata.labels.clone().unwrap_or_default();
            labels.extend(launched.metadata.labels.clone().unwrap_or_default());
            let annotations = launched.metadata.annotations.clone().unwrap_or_default();
            ctx.limiter.acquire().await;
            let patched = merge_patch(
                &ctx.node_claims(),
                claim.name(),
                serde_json::json!({"metadata": {"labels": labels, "annotations": annotations}}),
            )
            .await
            .map_err(ReconcileError::api(
                "labelling launched NodeClaim",
                claim.name(),
            ))?;
            let updated = with_condition(&patched, |c| {
                let src = launched.status.clone().unwrap_or_default();
                let status = c.status.get_or_insert_with(NodeClaimStatus::default);
                status.provider_id = src.provider_id;
                status.image_id = src.image_id;
                status.capacity = src.capacity;
                status.allocatable = src.allocatable;
                c.set_true(ConditionType::Launched.as_str(), ctx.now_time());
            });
            patch_claim_status(ctx, &updated).await?;
            tracing::info!(
                nodeclaim = claim.name(),
                provider_id = updated.provider_id(),
                instance_type = launched.label(v1labels::INSTANCE_TYPE).unwrap_or_default(),
                zone = launched.label(v1labels::ZONE).unwrap_or_default(),
                capacity_type = launched.label(v1labels::CAPACITY_TYPE).unwrap_or_default(),
                "launched nodeclaim"
            );
            Ok(Executed::Done)
        }
        Err(e) => {
            let step = after_launch_failure(&LaunchErrorKind::of(&e));
            ctx.events.warning(
                claim,
                step.event_reason(),
                format!("launching NodeClaim failed: {e}"),
            );
            match step {
                AfterLaunchFailure::DeleteClaim(cause) => {
                    // The pods are planned again; after no capacity, with the offerings
                    // tried reported unavailable.
                    tracing::info!(
                        nodeclaim = claim.name(),
                        reason = cause.event_reason(),
                        error = %e,
                        "launch failed; deleting nodeclaim"
                    );
                    super::exec::delete_node_claim(ctx, claim.name()).await?;
                    super::exec::record_disrupted(ctx, claim, cause.metric_reason());
                    Ok(if cause.offerings_changed() {
                        Executed::NoCapacity
                    } else {
                        Executed::Done
                    })
                }
                AfterLaunchFailure::Retry { condition_reason } => {
                    let updated = with_condition(claim, |c| {
                        c.set_condition(
                            ConditionType::Launched.as_str(),
                            ConditionStatus::Unknown,
                            &condition_reason,
                            &e.to_string(),
                            ctx.now_time(),
                        );
                    });
                    if updated.status != claim.status {
                        patch_claim_status(ctx, &updated).await?;
                    }
                    Err(ReconcileError::Provider {
                        what: "creating instance",
                        object: claim.name().to_owned(),
                        source: e,
                    })
                }
            }
        }
    }
}
