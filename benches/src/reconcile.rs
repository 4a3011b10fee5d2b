//! A cluster index at a given size, for the reconciler benchmark: one NodePool over the
//! embedded catalogue, `nodes` initialized m5.2xlarge nodes (NodeClaims Launched, Registered
//! and Initialized) spread over three zones, each running `pods_per_node` Ready ReplicaSet
//! pods of 500m cpu and 1 GiB (so every node is a consolidation candidate).

use karpenter_catalog::default_instance_types;
use karpenter_cloudprovider::v1::{ConditionType, NodeClaim, NodePool, StatusConditions};
use karpenter_cluster::provisioner::time;
use karpenter_cluster::{ClusterState, Kubelet, NodeRecord, Object, PodRecord};
use karpenter_scheduling::labels;
use karpenter_scheduling::model::{Node, NodeState, OwnerRef, Pod};
use karpenter_testing::resources::res;
use std::sync::Arc;

/// How big the index is.
#[derive(Debug, Clone, Copy)]
pub struct ClusterSize {
    /// Nodes (each with its NodeClaim).
    pub nodes: usize,
    /// Bound pods on each node.
    pub pods_per_node: usize,
}

const GI: i64 = 1 << 30;
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
const TYPE: &str = "m5.2xlarge";

fn node_pool() -> NodePool {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                ]}},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
        }
    }))
    .expect("a valid NodePool")
}

fn node_claim(name: &str) -> NodeClaim {
    let mut claim: NodeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "finalizers": ["karpenter.sh/termination"], "labels": {
            "karpenter.sh/nodepool": "default",
            "node.kubernetes.io/instance-type": TYPE
        }},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []
        }
    }))
    .expect("a valid NodeClaim");
    for t in [
        ConditionType::Launched,
        ConditionType::Registered,
        ConditionType::Initialized,
    ] {
        claim.set_true(t.as_str(), time(0));
    }
    claim
}

/// The index described in the module docs.
///
/// # Panics
/// If the embedded catalogue lacks m5.2xlarge.
pub fn indexed_cluster(size: ClusterSize) -> ClusterState {
    let types = default_instance_types().to_vec();
    let it = types
        .iter()
        .find(|t| t.name == TYPE)
        .expect("m5.2xlarge in the catalogue")
        .clone();
    let mut state = ClusterState::new();
    state.apply(Object::NodePool(Box::new(node_pool())));
    state.set_instance_types("default", types);
    for n in 0..size.nodes {
        let name = format!("node-{n:05}");
        let zone = ZONES[n % ZONES.len()];
        let node_labels = [
            (labels::HOSTNAME, name.as_str()),
            (labels::ZONE, zone),
            (labels::INSTANCE_TYPE, TYPE),
            (labels::CAPACITY_TYPE, "on-demand"),
            (labels::ARCH, "amd64"),
            (labels::NODEPOOL, "default"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        state.apply(Object::NodeClaim(Box::new(node_claim(&name))));
        state.apply(Object::Node(Box::new(NodeRecord {
            node: Node {
                name: name.clone(),
                node_pool: Some("default".into()),
                labels: node_labels,
                allocatable: it.allocatable(),
                capacity: it.capacity.clone(),
                state: NodeState::Ready,
                price: it.offering_price(Some(zone), "on-demand").unwrap_or(0.0),
                ..Node::default()
            },
            node_claim: Some(name.clone()),
            startup_taints: Vec::new(),
            deleting: false,
            kubelet: Kubelet::ready(),
        })));
        for p in 0..size.pods_per_node {
            let pod_name = format!("web-{n:05}-{p:02}");
            state.apply(Object::Pod(Box::new(PodRecord {
                pod: Pod {
                    namespace: "default".into(),
                    uid: pod_name.clone(),
                    name: pod_name,
                    labels: [("app".to_owned(), "web".to_owned())].into(),
                    owner: Some(OwnerRef {
                        kind: "ReplicaSet".into(),
                        name: "web".into(),
                        uid: "web".into(),
                    }),
                    requests: res(500, GI),
                    node_name: Some(name.clone()),
                    ..Pod::default()
                },
                ready_at: Some(0),
                deleting_at: None,
                unschedulable: false,
            })));
        }
    }
    state
}

/// The same cluster as the API server would hold it, for the controller's feed: NodeClaims,
/// Ready Nodes with their provider IDs, and bound Running pods, each with resourceVersion 1.
pub struct ApiCluster {
    /// NodePools.
    pub node_pools: Vec<Arc<NodePool>>,
    /// NodeClaims, in name order.
    pub node_claims: Vec<Arc<NodeClaim>>,
    /// Nodes.
    pub nodes: Vec<Arc<k8s_openapi::api::core::v1::Node>>,
    /// Pods.
    pub pods: Vec<Arc<k8s_openapi::api::core::v1::Pod>>,
}

impl ApiCluster {
    /// The objects as the feed reads them.
    pub fn view(&self) -> karpenter_cluster::feed::ApiObjects<'_> {
        karpenter_cluster::feed::ApiObjects {
            node_pools: &self.node_pools,
            node_claims: &self.node_claims,
            nodes: &self.nodes,
            pods: &self.pods,
            ..Default::default()
        }
    }
}

/// [`indexed_cluster`]'s cluster as API objects.
///
/// # Panics
/// Never: the objects are literals.
pub fn api_cluster(size: ClusterSize) -> ApiCluster {
    let mut out = ApiCluster {
        node_pools: vec![Arc::new(node_pool())],
        node_claims: Vec::new(),
        nodes: Vec::new(),
        pods: Vec::new(),
    };
    for n in 0..size.nodes {
        let name = format!("node-{n:05}");
        let zone = ZONES[n % ZONES.len()];
        let provider_id = format!("fake://{zone}/{name}");
        let mut claim = node_claim(&name);
        claim.metadata.resource_version = Some("1".into());
        claim
            .status
            .get_or_insert_with(Default::default)
            .provider_id = provider_id.clone();
        out.node_claims.push(Arc::new(claim));
        let node = serde_json::json!({
            "metadata": {"name": name, "resourceVersion": "1", "labels": {
                labels::HOSTNAME: name, labels::ZONE: zone, labels::INSTANCE_TYPE: TYPE,
                labels::CAPACITY_TYPE: "on-demand", labels::ARCH: "amd64",
                labels::NODEPOOL: "default", "karpenter.sh/initialized": "true"}},
            "spec": {"providerID": provider_id},
            "status": {"allocatable": {"cpu": "7910m", "memory": "29Gi", "pods": "58"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        });
        out.nodes.push(Arc::new(
            serde_json::from_value(node).expect("a valid Node"),
        ));
        for p in 0..size.pods_per_node {
            let pod = serde_json::json!({
                "metadata": {"name": format!("web-{n:05}-{p:02}"), "namespace": "default",
                             "uid": format!("web-{n:05}-{p:02}"), "resourceVersion": "1",
                             "labels": {"app": "web"},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                  "name": "web", "uid": "web", "controller": true}]},
                "spec": {"nodeName": name, "containers": [{"name": "c", "image": "nginx",
                         "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]},
                "status": {"phase": "Running",
                           "conditions": [{"type": "Ready", "status": "True"}]}
            });
            out.pods
                .push(Arc::new(serde_json::from_value(pod).expect("a valid Pod")));
        }
    }
    out
}

impl karpenter_cluster::feed::Lookup for ApiCluster {
    // A scan: the benches change pods, which need no lookup.
    fn node(&self, name: &str) -> Option<Arc<k8s_openapi::api::core::v1::Node>> {
        self.nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
            .cloned()
    }
    fn node_claim(&self, name: &str) -> Option<Arc<NodeClaim>> {
        self.node_claims.iter().find(|c| c.name() == name).cloned()
    }
}
