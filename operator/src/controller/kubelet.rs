//! With `--cloud-provider fake` there is no kubelet on the "instances", so the controller
//! plays it for the Nodes it created (those labelled
//! [`FAKE_NODE_LABEL`](karpenter_cloudprovider_fake::node_instances::FAKE_NODE_LABEL)): it reports them
//! Ready with a heartbeat (until the Node is gone, draining included), renews their Lease in
//! `kube-node-lease`, moves pods bound to them to Running/Ready, and finishes deleting pods
//! that were evicted or deleted from them once their grace period has passed.

use super::api::{ErrorClass, classify};
use super::{Ctx, ReconcileError};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use karpenter_cloudprovider_fake::node_instances::is_fake;
use karpenter_cluster::pod_transitions::pod_running_ready;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};

/// Namespace of node heartbeat Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// `leaseDurationSeconds` of the heartbeat Lease (the kubelet's default).
pub const NODE_LEASE_DURATION_SECS: i32 = 40;
/// How often the Ready condition's heartbeat is refreshed.
pub const HEARTBEAT_INTERVAL_MS: i64 = 10_000;

fn ready_heartbeat(node: &Node) -> Option<i64> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .and_then(|c| c.last_heartbeat_time.as_ref())
        .map(|t| t.0.as_millisecond())
}

/// The status patch that reports `node` Ready now (transition time kept when it already
/// was Ready).
pub fn ready_patch(node: &Node, now: jiff::Timestamp) -> serde_json::Value {
    let transition = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready" && c.status == "True"))
        .and_then(|c| c.last_transition_time.clone())
        .map_or(now, |t| t.0);
    let cond = |type_: &str, status: &str, reason: &str, message: &str, since: jiff::Timestamp| {
        serde_json::json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now.to_string(), "lastTransitionTime": since.to_string(),
        })
    };
    serde_json::json!({
        "status": {
            "conditions": [
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status (karpenter fake provider)", transition),
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "", transition),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "", transition),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "", transition),
            ],
            "nodeInfo": {
                "architecture": node.metadata.labels.as_ref().and_then(|l| l.get("kubernetes.io/arch")).cloned().unwrap_or_else(|| "amd64".into()),
                "operatingSystem": "linux",
                "kubeletVersion": "v1.37.0-karpenter-fake",
                "kubeProxyVersion": "",
                "bootID": "", "containerRuntimeVersion": "fake://1.0", "kernelVersion": "",
                "machineID": "", "osImage": "karpenter-rs fake node", "systemUUID": "",
            },
        }
    })
}

/// The status patch that makes a bound pod Running and Ready.
pub fn running_patch(now: jiff::Timestamp) -> serde_json::Value {
    let cond = |t: &str| serde_json::json!({"type": t, "status": "True", "lastTransitionTime": now.to_string()});
    serde_json::json!({
        "status": {
            "phase": "Running",
            "startTime": now.to_string(),
            "conditions": [cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")],
        }
    })
}

/// One pass over the fake nodes and their pods.
///
/// # Errors
/// The first API failure (the rest is done on the next pass).
pub async fn reconcile(ctx: &Ctx) -> Result<(), ReconcileError> {
    let now = (ctx.clock)();
    let now_ms = now.as_millisecond();
    let mut nodes = ctx.stores.nodes.state();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for node in nodes.iter().filter(|n| is_fake(n)) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let stale = ready_heartbeat(node).is_none_or(|t| now_ms - t >= HEARTBEAT_INTERVAL_MS);
        // A real kubelet keeps posting status while its Node drains, until the instance
        // under it is gone (the Node is deleted then): a draining Node stays Ready.
        if stale {
            ctx.limiter.acquire().await;
            match ctx
                .nodes()
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&ready_patch(node, now)),
                )
                .await
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
                match api
                    .delete(&pod_name, &DeleteParams::default().grace_period(0))
                    .await
                {
                    Ok(_) => {}
                    Err(e) if classify(&e) == ErrorClass::NotFound => {}
                    Err(e) => {
                        return Err(ReconcileError::api("removing deleted Pod", &pod_name)(e));
                    }
                }
            } else if !pod_running_ready(&pod) && node.metadata.deletion_timestamp.is_none() {
                ctx.limiter.acquire().await;
                match api
                    .patch_status(
                        &pod_name,
                        &PatchParams::default(),
                        &Patch::Merge(&running_patch(now)),
                    )
                    .await
                {
                    // The controller records the startup duration when it sees the pod
                    // running, as it does for pods on real kubelets.
                    Ok(_) => {}
                    Err(e) if classify(&e) == ErrorClass::NotFound => {}
                    Err(e) => return Err(ReconcileError::api("starting Pod", &pod_name)(e)),
                }
            }
        }
    }
    Ok(())
}

async fn renew_lease(ctx: &Ctx, node: &Node, now: jiff::Timestamp) -> Result<(), ReconcileError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let api: Api<Lease> = Api::namespaced(ctx.client.clone(), NODE_LEASE_NAMESPACE);
    let spec = LeaseSpec {
        holder_identity: Some(name.clone()),
        lease_duration_seconds: Some(NODE_LEASE_DURATION_SECS),
        renew_time: Some(MicroTime(now)),
        ..LeaseSpec::default()
    };
    ctx.limiter.acquire().await;
    let patch = serde_json::json!({"spec": spec});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if classify(&e) == ErrorClass::NotFound => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(NODE_LEASE_NAMESPACE.into()),
                    // The Lease goes with its Node, as the kubelet's does.
                    owner_references: node.metadata.uid.clone().map(|uid| {
                        vec![OwnerReference {
                            api_version: "v1".into(),
                            kind: "Node".into(),
                            name: name.clone(),
                            uid,
                            ..OwnerReference::default()
                        }]
                    }),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            ctx.limiter.acquire().await;
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(()),
                Err(e) if classify(&e) == ErrorClass::Conflict => Ok(()),
                Err(e) => Err(ReconcileError::api("creating node Lease", &name)(e)),
            }
        }
        Err(e) => Err(ReconcileError::api("renewing node Lease", &name)(e)),
    }
}
