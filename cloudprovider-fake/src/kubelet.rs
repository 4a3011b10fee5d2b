//! What the kubelet of a fake instance reports, as API objects and patches: with
//! `--cloud-provider fake` on a real cluster there is no kubelet, so the controller posts
//! these for the Nodes the fake provider created (a Ready condition with a heartbeat, a
//! renewed Lease in [`NODE_LEASE_NAMESPACE`], pods moved to Running). The values are pure
//! functions of the objects and the caller's `now`.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;

/// Namespace of node heartbeat Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// `leaseDurationSeconds` of the heartbeat Lease (the kubelet's default).
pub const NODE_LEASE_DURATION_SECS: i32 = 40;
/// How often the Ready condition's heartbeat is refreshed.
pub const HEARTBEAT_INTERVAL_MS: i64 = 10_000;

/// `node`'s `Ready=True` condition, if it has one.
fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
}

/// Whether `node`'s Ready heartbeat is missing or at least [`HEARTBEAT_INTERVAL_MS`] old at
/// `now_ms`, so the kubelet would post status (and renew its Lease) now.
pub fn heartbeat_due(node: &Node, now_ms: i64) -> bool {
    let heartbeat = ready_condition(node)
        .and_then(|c| c.last_heartbeat_time.as_ref())
        .map(|t| t.0.as_millisecond());
    heartbeat.is_none_or(|t| now_ms - t >= HEARTBEAT_INTERVAL_MS)
}

/// The status patch that reports `node` Ready at `now`, with no memory, disk or PID
/// pressure; the transition time is kept when the node already was Ready.
pub fn ready_patch(node: &Node, now: Timestamp) -> serde_json::Value {
    let transition = ready_condition(node)
        .and_then(|c| c.last_transition_time.clone())
        .map_or(now, |t| t.0);
    let cond = |type_: &str, status: &str, reason: &str, message: &str, since: Timestamp| {
        serde_json::json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now.to_string(), "lastTransitionTime": since.to_string(),
        })
    };
    let arch = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("kubernetes.io/arch"))
        .cloned()
        .unwrap_or_else(|| "amd64".into());
    serde_json::json!({
        "status": {
            "conditions": [
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status (karpenter fake provider)", transition),
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "", transition),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "", transition),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "", transition),
            ],
            "nodeInfo": {
                "architecture": arch,
                "operatingSystem": "linux",
                "kubeletVersion": "v1.37.0-karpenter-fake",
                "kubeProxyVersion": "",
                "bootID": "", "containerRuntimeVersion": "fake://1.0", "kernelVersion": "",
                "machineID": "", "osImage": "karpenter-rs fake node", "systemUUID": "",
            },
        }
    })
}

/// The status patch that makes a bound pod Running and Ready at `now`.
pub fn running_patch(now: Timestamp) -> serde_json::Value {
    let cond = |t: &str| serde_json::json!({"type": t, "status": "True", "lastTransitionTime": now.to_string()});
    serde_json::json!({
        "status": {
            "phase": "Running",
            "startTime": now.to_string(),
            "conditions": [cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")],
        }
    })
}

/// The heartbeat Lease spec of `node` renewed at `now`.
pub fn lease_spec(node: &Node, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: node.metadata.name.clone(),
        lease_duration_seconds: Some(NODE_LEASE_DURATION_SECS),
        renew_time: Some(MicroTime(now)),
        ..LeaseSpec::default()
    }
}

/// The heartbeat Lease of `node` as first created at `now`: named after the Node in
/// [`NODE_LEASE_NAMESPACE`] and owned by it, so it goes with the Node, as the kubelet's does.
pub fn lease(node: &Node, now: Timestamp) -> Lease {
    let name = node.metadata.name.clone().unwrap_or_default();
    Lease {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(NODE_LEASE_NAMESPACE.into()),
            owner_references: node.metadata.uid.clone().map(|uid| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name,
                    uid,
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        },
        spec: Some(lease_spec(node, now)),
    }
}

/// The name of the ResourceSlice the fake GPU driver publishes for `node`.
pub fn resource_slice_name(node: &str) -> String {
    format!("{node}-{}", crate::devices::GPU_DRIVER)
}

/// The ResourceSlice the fake GPU driver publishes for `node`: its devices
/// ([`node_gpu_devices`](crate::devices::node_gpu_devices)) in one pool named after the node,
/// with `nodeName` set so the kube-scheduler allocates them to pods bound there, and owned by
/// the Node so it goes with it (as a real driver's slices do). `None` when the node has no
/// GPU.
pub fn resource_slice(node: &Node) -> Option<ResourceSlice> {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let devices = crate::devices::node_gpu_devices(&labels);
    if devices.is_empty() {
        return None;
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    let devices: Vec<serde_json::Value> = devices
        .iter()
        .map(|d| {
            let capacity: serde_json::Map<String, serde_json::Value> = d
                .capacity
                .iter()
                .map(|(k, q)| (k.clone(), serde_json::json!({"value": q.to_string()})))
                .collect();
            serde_json::json!({
                "name": d.name,
                "attributes": d.attributes,
                "capacity": capacity,
            })
        })
        .collect();
    let slice = serde_json::json!({
        "metadata": {
            "name": resource_slice_name(&name),
            "ownerReferences": node.metadata.uid.as_ref().map(|uid| vec![serde_json::json!({
                "apiVersion": "v1", "kind": "Node", "name": name, "uid": uid,
            })]),
        },
        "spec": {
            "driver": crate::devices::GPU_DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        }
    });
    serde_json::from_value(slice).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(ms).unwrap()
    }

    fn ready_since(transition: i64, heartbeat: i64) -> Node {
        let mut node = Node::default();
        node.metadata.name = Some("n1".into());
        node.metadata.uid = Some("uid-n1".into());
        node.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(Time(at(transition))),
                last_heartbeat_time: Some(Time(at(heartbeat))),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        });
        node
    }

    #[test]
    fn heartbeats_are_posted_every_interval() {
        assert!(heartbeat_due(&Node::default(), 0), "never reported");
        let node = ready_since(0, 50_000);
        assert!(!heartbeat_due(&node, 50_000 + HEARTBEAT_INTERVAL_MS - 1));
        assert!(heartbeat_due(&node, 50_000 + HEARTBEAT_INTERVAL_MS));
    }

    #[test]
    fn ready_keeps_its_transition_time_and_refreshes_the_heartbeat() {
        let patch = ready_patch(&ready_since(5_000, 50_000), at(90_000));
        let ready = &patch["status"]["conditions"][0];
        assert_eq!(ready["type"], "Ready");
        assert_eq!(ready["lastTransitionTime"], at(5_000).to_string());
        assert_eq!(ready["lastHeartbeatTime"], at(90_000).to_string());
        let first = ready_patch(&Node::default(), at(90_000));
        assert_eq!(
            first["status"]["conditions"][0]["lastTransitionTime"],
            at(90_000).to_string(),
            "a node becoming Ready transitions now"
        );
        assert_eq!(first["status"]["nodeInfo"]["architecture"], "amd64");
    }

    #[test]
    fn the_lease_is_owned_by_its_node() {
        let lease = lease(&ready_since(0, 0), at(7_000));
        assert_eq!(
            lease.metadata.namespace.as_deref(),
            Some(NODE_LEASE_NAMESPACE)
        );
        let owner = &lease.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Node", "uid-n1")
        );
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("n1"));
        assert_eq!(spec.renew_time, Some(MicroTime(at(7_000))));
    }

    #[test]
    fn a_gpu_node_publishes_its_devices_in_a_slice_it_owns() {
        let mut node = ready_since(0, 0);
        assert!(resource_slice(&node).is_none(), "no GPU, no slice");
        node.metadata.labels = Some(
            [
                (karpenter_scheduling::labels::AWS_INSTANCE_GPU_COUNT, "2"),
                (karpenter_scheduling::labels::AWS_INSTANCE_GPU_NAME, "t4"),
                (
                    karpenter_scheduling::labels::AWS_INSTANCE_GPU_MEMORY,
                    "16384",
                ),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        );
        let slice = resource_slice(&node).unwrap();
        assert_eq!(
            slice.metadata.name.as_deref(),
            Some("n1-gpu.fake.karpenter.sh")
        );
        assert_eq!(slice.metadata.owner_references.unwrap()[0].uid, "uid-n1");
        let spec = slice.spec;
        assert_eq!(spec.driver, crate::devices::GPU_DRIVER);
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(spec.pool.name, "n1");
        let devices = spec.devices.unwrap();
        assert_eq!(devices.len(), 2);
        assert_eq!(devices[1].name, "gpu-1");
        let attrs = devices[1].attributes.as_ref().unwrap();
        assert_eq!(attrs["model"].string.as_deref(), Some("t4"));
        assert_eq!(attrs["memory"].int, Some(16384));
        let capacity = devices[1].capacity.as_ref().unwrap();
        assert_eq!(capacity["memory"].value.0, "16Gi");
    }

    #[test]
    fn a_started_pod_is_running_and_ready() {
        let patch = running_patch(at(1_000));
        assert_eq!(patch["status"]["phase"], "Running");
        let types: Vec<&str> = patch["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            ["PodScheduled", "Initialized", "ContainersReady", "Ready"]
        );
    }
}
