//! `--cloud-provider fake` on a real cluster: the in-memory [`FakeCloudProvider`] chooses the
//! instance type, zone and capacity type, and the "instance" is a Node object the controller
//! creates itself, as Karpenter's kwok provider does. Because the instances *are* Nodes, a
//! restarted or failed-over controller finds every instance again by listing them; nothing
//! lives only in memory.

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint as K8sTaint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_cloudprovider::v1::labels as v1labels;
use karpenter_cloudprovider::v1::{NodeClaimStatus, Taint};
use karpenter_cloudprovider::{
    CloudProvider, CloudProviderError, DriftReason, NodeClaim, NodePool, RepairPolicy,
};
use karpenter_cloudprovider_fake::FakeCloudProvider;
use karpenter_scheduling::InstanceType;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Label on every Node the fake provider created; `list` selects on it.
pub const FAKE_NODE_LABEL: &str = "karpenter-rs.sh/fake-node";
/// Scheme of fake provider IDs: `fake://<zone>/<node name>`.
pub const PROVIDER_ID_SCHEME: &str = "fake://";

/// The fake provider backed by Node objects.
pub struct ClusterFakeProvider {
    inner: FakeCloudProvider,
    nodes: Api<Node>,
}

impl ClusterFakeProvider {
    /// Chooses offerings with `inner` and keeps instances as Nodes through `nodes`.
    pub fn new(inner: FakeCloudProvider, nodes: Api<Node>) -> Self {
        Self { inner, nodes }
    }
}

/// The provider ID of the fake instance for `node_name` in `zone`.
pub fn provider_id(zone: &str, node_name: &str) -> String {
    format!("{PROVIDER_ID_SCHEME}{zone}/{node_name}")
}

/// The node name inside a fake provider ID, if it is one.
pub fn node_name_of(provider_id: &str) -> Option<&str> {
    let rest = provider_id.strip_prefix(PROVIDER_ID_SCHEME)?;
    let (_, name) = rest.rsplit_once('/')?;
    (!name.is_empty()).then_some(name)
}

fn api_error(what: &str, e: &kube::Error) -> CloudProviderError {
    CloudProviderError::Other(format!("{what}: {e}"))
}

fn k8s_taint(t: &Taint) -> K8sTaint {
    K8sTaint {
        key: t.key.clone(),
        value: (!t.value.is_empty()).then(|| t.value.clone()),
        effect: t.effect.as_str().to_owned(),
        time_added: None,
    }
}

/// The Node a launched claim becomes: the claim's and instance type's labels, the taints a
/// kubelet registers with (taints, startup taints and `karpenter.sh/unregistered`), and the
/// claim's capacity. The Ready condition is left to the fake kubelet.
pub fn node_for(launched: &NodeClaim, node_name: &str, provider_id: &str) -> Node {
    let mut labels: BTreeMap<String, String> = launched.metadata.labels.clone().unwrap_or_default();
    labels.insert(v1labels::HOSTNAME.to_owned(), node_name.to_owned());
    labels.insert(FAKE_NODE_LABEL.to_owned(), "true".to_owned());
    labels
        .entry(v1labels::OS.to_owned())
        .or_insert_with(|| "linux".to_owned());
    let mut taints: Vec<K8sTaint> = launched.spec.taints.iter().map(k8s_taint).collect();
    taints.extend(launched.spec.startup_taints.iter().map(k8s_taint));
    taints.push(k8s_taint(&v1labels::unregistered_no_execute_taint()));
    let status = launched.status.clone().unwrap_or_default();
    Node {
        metadata: ObjectMeta {
            name: Some(node_name.to_owned()),
            labels: Some(labels),
            annotations: launched.metadata.annotations.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider_id.to_owned()),
            taints: Some(taints),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(status.capacity.clone()),
            allocatable: Some(status.allocatable.clone()),
            ..NodeStatus::default()
        }),
    }
}

/// A fake Node seen as the provider's instance (what `get` and `list` return).
pub fn claim_for(node: &Node) -> NodeClaim {
    let name = node.metadata.name.clone().unwrap_or_default();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let claim_name = labels
        .get(v1labels::NODECLAIM_LABEL)
        .cloned()
        .unwrap_or_else(|| name.clone());
    let status = node.status.clone().unwrap_or_default();
    let quantities = |q: Option<BTreeMap<String, Quantity>>| q.unwrap_or_default();
    let mut claim = NodeClaim::new(
        &claim_name,
        karpenter_cloudprovider::v1::NodeClaimSpec {
            taints: Vec::new(),
            startup_taints: Vec::new(),
            requirements: Vec::new(),
            resources: Default::default(),
            node_class_ref: Default::default(),
            termination_grace_period: None,
            expire_after: karpenter_cloudprovider::v1::default_expire_after(),
        },
    );
    claim.metadata.labels = Some(labels);
    claim.metadata.creation_timestamp = node.metadata.creation_timestamp.clone();
    claim.metadata.deletion_timestamp = node.metadata.deletion_timestamp.clone();
    claim.status = Some(NodeClaimStatus {
        node_name: name,
        provider_id: node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default(),
        image_id: karpenter_cloudprovider_fake::provider::FAKE_IMAGE_ID.to_owned(),
        capacity: quantities(status.capacity),
        allocatable: quantities(status.allocatable),
        ..NodeClaimStatus::default()
    });
    claim
}

fn is_fake(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(FAKE_NODE_LABEL))
        .is_some_and(|v| v == "true")
}

#[async_trait::async_trait]
impl CloudProvider for ClusterFakeProvider {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let node_name = node_claim.name().to_owned();
        // A launch that crashed after creating the Node is finished, not repeated: the Node
        // name is the claim name, so it is found again.
        match self.nodes.get_opt(&node_name).await {
            Ok(Some(existing)) if is_fake(&existing) => {
                let mut claim = node_claim.clone();
                let found = claim_for(&existing);
                let mut labels = claim.metadata.labels.take().unwrap_or_default();
                labels.extend(found.metadata.labels.clone().unwrap_or_default());
                labels.remove(FAKE_NODE_LABEL);
                labels.remove(v1labels::HOSTNAME);
                claim.metadata.labels = Some(labels);
                claim.status = found.status;
                return Ok(claim);
            }
            Ok(_) => {}
            Err(e) => return Err(api_error("looking up fake node", &e)),
        }
        let mut launched = self.inner.create(node_claim).await?;
        // The in-memory copy is not the source of truth; the Node is.
        let _ = self.inner.delete(&launched).await;
        let zone = launched
            .label(v1labels::ZONE)
            .unwrap_or_default()
            .to_owned();
        let id = provider_id(&zone, &node_name);
        if let Some(s) = launched.status.as_mut() {
            s.provider_id = id.clone();
        }
        let mut node = node_for(&launched, &node_name, &id);
        if let Some(labels) = node.metadata.labels.as_mut() {
            labels.insert(v1labels::NODECLAIM_LABEL.to_owned(), node_name.clone());
        }
        match self.nodes.create(&PostParams::default(), &node).await {
            Ok(_) => Ok(launched),
            // Created concurrently by another attempt: the instance exists, which is what
            // the caller asked for.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(launched),
            Err(e) => Err(api_error("creating fake node", &e)),
        }
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let name = node_name_of(node_claim.provider_id())
            .map(str::to_owned)
            .unwrap_or_else(|| node_claim.name().to_owned());
        let not_found = || CloudProviderError::NotFound {
            provider_id: if node_claim.provider_id().is_empty() {
                node_claim.name().to_owned()
            } else {
                node_claim.provider_id().to_owned()
            },
        };
        match self.nodes.get_opt(&name).await {
            Ok(Some(node)) if is_fake(&node) => {
                if node.metadata.deletion_timestamp.is_none() {
                    match self.nodes.delete(&name, &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 404 => return Err(not_found()),
                        Err(e) => return Err(api_error("deleting fake node", &e)),
                    }
                }
                // Terminating: the Node goes once its finalizers are removed.
                Ok(())
            }
            Ok(_) => Err(not_found()),
            Err(e) => Err(api_error("looking up fake node", &e)),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        let not_found = || CloudProviderError::NotFound {
            provider_id: provider_id.to_owned(),
        };
        let name = node_name_of(provider_id).ok_or_else(not_found)?;
        match self.nodes.get_opt(name).await {
            Ok(Some(node)) if is_fake(&node) => Ok(claim_for(&node)),
            Ok(_) => Err(not_found()),
            Err(e) => Err(api_error("getting fake node", &e)),
        }
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        let nodes = self
            .nodes
            .list(&ListParams::default().labels(&format!("{FAKE_NODE_LABEL}=true")))
            .await
            .map_err(|e| api_error("listing fake nodes", &e))?;
        let mut claims: Vec<NodeClaim> = nodes.items.iter().map(claim_for).collect();
        claims.sort_by(|a, b| a.provider_id().cmp(b.provider_id()));
        Ok(claims)
    }

    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        self.inner.instance_types(node_pool).await
    }

    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<DriftReason>, CloudProviderError> {
        self.inner.is_drifted(node_claim).await
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        self.inner.repair_policies()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_round_trip() {
        let id = provider_id("us-east-1a", "default-abcde");
        assert_eq!(id, "fake://us-east-1a/default-abcde");
        assert_eq!(node_name_of(&id), Some("default-abcde"));
        assert_eq!(node_name_of("aws:///us-east-1a/i-123"), None);
        assert_eq!(node_name_of("fake://us-east-1a/"), None);
    }
}
