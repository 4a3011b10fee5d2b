//! With `--cloud-provider fake` there is no kubelet on the "instances", so the controller
//! plays it for the Nodes it created (those labelled
//! [`FAKE_NODE_LABEL`](karpenter_cloudprovider_fake::node_instances::FAKE_NODE_LABEL)): it reports them
//! Ready with a heartbeat (until the Node is gone, draining included), renews their Lease in
//! `kube-node-lease`, moves pods bound to them to Running/Ready, and finishes deleting pods
//! that were evicted or deleted from them once their grace period has passed. With
//! `--ignore-dra-requests=false` it also plays the fake GPU driver: a Node with GPUs gets a
//! ResourceSlice of its devices (owned by the Node, so it is collected with it), which the
//! kube-scheduler allocates pods' ResourceClaims from.
//!
//! It runs as a task of its own ([`spawn`]), as a kubelet runs beside the control plane: a
//! pass of the controller that waits on the API server (an etcd restart, throttling) must not
//! stop the heartbeats, or the node lifecycle controller marks every Node unreachable and
//! the pods on them not Ready.

use super::api::{ErrorClass, classify};
use super::retry_log::RetryLog;
use super::{Ctx, ReconcileError};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use karpenter_cloudprovider_fake::kubelet::{
    NODE_LEASE_NAMESPACE, heartbeat_due, lease, lease_spec, ready_patch, resource_slice,
    running_patch,
};
use karpenter_cloudprovider_fake::node_instances::is_fake;
use karpenter_cluster::pod_transitions::pod_running_ready;
use karpenter_metrics::runtime::stage::FAKE_KUBELET;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// The longest wait between two passes when no watch reports a change: well inside the
/// heartbeat interval, and the longest a pod bound to a fake Node waits to run when its
/// binding's event was missed.
const PERIOD: Duration = Duration::from_secs(1);

/// Plays the kubelet in the background until `stop` turns true (or its sender is gone): a
/// pass at once, then whenever a watch reports a change (`changed`) and at least every
/// [`PERIOD`]. Failed passes are logged through a [`RetryLog`] of its own and retried.
pub fn spawn(
    ctx: Ctx,
    changed: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let retries = RetryLog::default();
        let rt = ctx.metrics.runtime.clone();
        let mut sliced = BTreeSet::new();
        while !*stop.borrow() {
            // Registered before the pass, so a change reported during it is not missed.
            let notified = changed.notified();
            match rt.try_run(FAKE_KUBELET, reconcile(&ctx, &mut sliced)).await {
                Ok(()) => retries.succeeded(FAKE_KUBELET),
                Err(e) => retries.failed(FAKE_KUBELET, &e, "fake kubelet pass failed"),
            }
            retries.forget_stale();
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep(PERIOD) => {}
                r = stop.changed() => if r.is_err() { break },
            }
        }
    })
}

/// One pass over the fake nodes and their pods. `sliced` holds the Nodes (by UID) whose
/// ResourceSlice was published, so each is created once.
///
/// # Errors
/// The first API failure (the rest is done on the next pass).
pub async fn reconcile(ctx: &Ctx, sliced: &mut BTreeSet<String>) -> Result<(), ReconcileError> {
    let now = (ctx.clock)();
    let now_ms = now.as_millisecond();
    let mut nodes = ctx.stores.nodes.state();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let publish_slices = !ctx.settings.ignore_dra_requests;
    if publish_slices {
        // Nodes gone took their slices with them (ownerReferences).
        let live: BTreeSet<&str> = nodes
            .iter()
            .filter_map(|n| n.metadata.uid.as_deref())
            .collect();
        sliced.retain(|uid| live.contains(uid.as_str()));
    }
    for node in nodes.iter().filter(|n| is_fake(n)) {
        let name = node.metadata.name.clone().unwrap_or_default();
        if publish_slices && node.metadata.deletion_timestamp.is_none() {
            publish_slice(ctx, node, sliced).await?;
        }
        let stale = heartbeat_due(node, now_ms);
        // A real kubelet keeps posting status while its Node drains, until the instance
        // under it is gone (the Node is deleted then): a draining Node stays Ready.
        if stale {
            ctx.limiter.acquire().await;
            match super::api::merge_patch_status(&ctx.nodes(), &name, &ready_patch(node, now)).await
            {
                Ok(_) => {}
                Err(e) if classify(&e) == ErrorClass::NotFound => continue,
                Err(e) => return Err(ReconcileError::api("reporting fake Node ready", &name)(e)),
            }
            renew_lease(ctx, node, now).await?;
        }
        for pod in ctx.stores.pods_on(&name) {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let pod_name = pod.metadata.name.clone().unwrap_or_default();
            let api = ctx.pods(&ns);
            if let Some(deadline) = &pod.metadata.deletion_timestamp {
                // The kubelet's half of a graceful delete. The fake containers take their
                // whole grace period to stop (the API server set the deletion timestamp to
                // its end), the slowest a real workload may take.
                if now_ms < deadline.0.as_millisecond() {
                    continue;
                }
                ctx.limiter.acquire().await;
                let now_params = DeleteParams::default().grace_period(0);
                let res = api.delete(&pod_name, &now_params).await;
                ReconcileError::unless_gone(res, "removing deleted Pod", &pod_name)?;
            } else if !pod_running_ready(&pod) {
                // Draining Nodes included: a kubelet runs what is bound to it until the
                // instance is gone, and a pod that never starts there would count against
                // its PodDisruptionBudget and block the drain for good.
                ctx.limiter.acquire().await;
                // The controller records the startup duration when it sees the pod
                // running, as it does for pods on real kubelets.
                let patch = running_patch(now);
                let res = super::api::merge_patch_status(&api, &pod_name, &patch).await;
                ReconcileError::unless_gone(res, "starting Pod", &pod_name)?;
            }
        }
    }
    Ok(())
}

/// Creates `node`'s ResourceSlice unless it has none or it was published already.
async fn publish_slice(
    ctx: &Ctx,
    node: &Node,
    sliced: &mut BTreeSet<String>,
) -> Result<(), ReconcileError> {
    let Some(uid) = node.metadata.uid.clone() else {
        return Ok(());
    };
    if sliced.contains(&uid) {
        return Ok(());
    }
    let Some(slice) = resource_slice(node) else {
        sliced.insert(uid);
        return Ok(());
    };
    let name = slice.metadata.name.clone().unwrap_or_default();
    let api: Api<ResourceSlice> = Api::all(ctx.client.clone());
    ctx.limiter.acquire().await;
    match api.create(&PostParams::default(), &slice).await {
        Ok(_) => {}
        // Published by an earlier process: the same devices.
        Err(e) if classify(&e) == ErrorClass::Conflict => {}
        Err(e) => return Err(ReconcileError::api("publishing ResourceSlice", &name)(e)),
    }
    sliced.insert(uid);
    Ok(())
}

async fn renew_lease(ctx: &Ctx, node: &Node, now: jiff::Timestamp) -> Result<(), ReconcileError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let api: Api<Lease> = Api::namespaced(ctx.client.clone(), NODE_LEASE_NAMESPACE);
    ctx.limiter.acquire().await;
    let patch = serde_json::json!({"spec": lease_spec(node, now)});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if classify(&e) == ErrorClass::NotFound => {
            ctx.limiter.acquire().await;
            match api.create(&PostParams::default(), &lease(node, now)).await {
                Ok(_) => Ok(()),
                Err(e) if classify(&e) == ErrorClass::Conflict => Ok(()),
                Err(e) => Err(ReconcileError::api("creating node Lease", &name)(e)),
            }
        }
        Err(e) => Err(ReconcileError::api("renewing node Lease", &name)(e)),
    }
}
