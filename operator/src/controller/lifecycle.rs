//! NodeClaim lifecycle on a real cluster, carried out: [`next_step`] (from
//! [`karpenter_cluster::registration`]) decides from the claim, its Node and `now`;
//! [`reconcile`] adds the finalizer, launches through the provider, syncs the Node on
//! registration and sets the conditions. Expiry is not decided here: it is a forceful command
//! of `karpenter_disruption`, executed by the disruption loop.

use super::api::{merge_patch, set_finalizers};
use super::{Ctx, ReconcileError};
use k8s_openapi::api::core::v1::Node;
use karpenter_cloudprovider::CloudProviderError;
use karpenter_cloudprovider::v1::{
    ConditionType, NodeClaim, NodeClaimStatus, StatusConditions, labels as v1labels,
};
pub use karpenter_cluster::registration::{
    INITIALIZED_LABEL, Step, next_step, registered_node_patch,
};

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
    ctx.node_claims()
        .patch_status(
            updated.name(),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map_err(ReconcileError::api(
            "patching NodeClaim status",
            updated.name(),
        ))?;
    Ok(())
}

/// Carries out [`next_step`] for `claim`.
///
/// # Errors
/// API or provider failures; the caller retries on the next pass from fresh state.
pub async fn reconcile(ctx: &Ctx, claim: &NodeClaim) -> Result<Step, ReconcileError> {
    let node = ctx.stores.node_by_provider_id(claim.provider_id());
    let now = ctx.now_ms();
    let step = next_step(claim, node.as_deref(), now);
    let name = claim.name();
    match &step {
        Step::Wait => {}
        Step::AddFinalizer => {
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
        }
        Step::Launch => launch(ctx, claim).await?,
        Step::Register { node: node_name } => {
            let Some(node) = node else {
                return Ok(Step::Wait);
            };
            register(ctx, claim, &node).await?;
            let updated = with_condition(claim, |c| {
                let status = c.status.get_or_insert_with(NodeClaimStatus::default);
                status.node_name = node_name.clone();
                c.set_true(ConditionType::Registered.as_str(), ctx.now_time());
            });
            patch_claim_status(ctx, &updated).await?;
            ctx.metrics
                .nodes_created
                .get_or_create(&crate::metrics::NodePoolLabels {
                    nodepool: claim.node_pool().unwrap_or_default().to_owned(),
                })
                .inc();
            tracing::info!(nodeclaim = name, node = %node_name, "registered node");
        }
        Step::Initialize { node: node_name } => {
            ctx.limiter.acquire().await;
            merge_patch(
                &ctx.nodes(),
                node_name,
                serde_json::json!({"metadata": {"labels": {INITIALIZED_LABEL: "true"}}}),
            )
            .await
            .map_err(ReconcileError::api("labelling Node initialized", node_name))?;
            let updated = with_condition(claim, |c| {
                c.set_true(ConditionType::Initialized.as_str(), ctx.now_time());
            });
            patch_claim_status(ctx, &updated).await?;
            tracing::info!(nodeclaim = name, node = %node_name, "initialized node");
        }
        Step::Delete { reason, message } => {
            ctx.events.warning(claim, reason, message.clone());
            tracing::warn!(nodeclaim = name, reason, "{message}");
            super::exec::delete_node_claim(ctx, name).await?;
        }
    }
    Ok(step)
}

async fn launch(ctx: &Ctx, claim: &NodeClaim) -> Result<(), ReconcileError> {
    match ctx.provider.create(claim).await {
        Ok(launched) => {
            // Labels the provider resolved (instance type, zone, capacity type …) go on
            // the claim first, so a crash between the two patches leaves a claim that
            // launches again idempotently rather than one with a status and no labels.
            let mut labels = claim.metadata.labels.clone().unwrap_or_default();
            labels.extend(launched.metadata.labels.clone().unwrap_or_default());
            ctx.limiter.acquire().await;
            let patched = merge_patch(
                &ctx.node_claims(),
                claim.name(),
                serde_json::json!({"metadata": {"labels": labels}}),
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
            Ok(())
        }
        Err(e) => {
            let (reason, delete) = match &e {
                CloudProviderError::InsufficientCapacity { .. } => ("InsufficientCapacity", true),
                CloudProviderError::NodeClassNotReady { .. } => ("NodeClassNotReady", false),
                CloudProviderError::Create { .. } => ("LaunchFailed", false),
                _ => ("LaunchFailed", false),
            };
            let updated = with_condition(claim, |c| {
                c.set_false(
                    ConditionType::Launched.as_str(),
                    reason,
                    &e.to_string(),
                    ctx.now_time(),
                );
            });
            if updated.status != claim.status {
                patch_claim_status(ctx, &updated).await?;
            }
            ctx.events
                .warning(claim, reason, format!("launching NodeClaim failed: {e}"));
            if delete {
                // Upstream deletes the claim so the pods are planned again with the
                // offering marked unavailable.
                super::exec::delete_node_claim(ctx, claim.name()).await?;
                return Ok(());
            }
            Err(ReconcileError::Provider {
                what: "creating instance",
                object: claim.name().to_owned(),
                source: e,
            })
        }
    }
}

async fn register(ctx: &Ctx, claim: &NodeClaim, node: &Node) -> Result<(), ReconcileError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    ctx.limiter.acquire().await;
    merge_patch(&ctx.nodes(), &name, registered_node_patch(claim, node))
        .await
        .map_err(ReconcileError::api("registering Node", &name))?;
    Ok(())
}
