//! `--cloud-provider fake` on a real cluster: the in-memory [`FakeCloudProvider`] chooses the
//! instance type, zone and capacity type, and the "instance" is a Node object the controller
//! creates itself, as Karpenter's kwok provider does. Because the instances *are* Nodes, a
//! restarted or failed-over controller finds every instance again by listing them; nothing
//! lives only in memory.

use k8s_openapi::api::core::v1::Node;
use karpenter_cloudprovider::v1::labels as v1labels;
use karpenter_cloudprovider::{
    CloudProvider, CloudProviderError, DriftReason, NodeClaim, NodePool, RepairPolicy,
};
use karpenter_cloudprovider_fake::FakeCloudProvider;
use karpenter_cloudprovider_fake::node_instances::{
    FAKE_NODE_LABEL, claim_for, is_fake, launched_as, node_for, node_name_of, provider_id,
    reservations_in_use,
};
use karpenter_scheduling::InstanceType;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use std::sync::Arc;

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

impl ClusterFakeProvider {
    /// The instances are Nodes: what each reservation holds is counted from them.
    async fn count_reservations(&self) -> Result<(), CloudProviderError> {
        if self.inner.has_reservations() {
            let used = reservations_in_use(&self.fake_nodes().await?);
            self.inner.set_reservations_held_elsewhere(used);
        }
        Ok(())
    }

    async fn fake_nodes(&self) -> Result<Vec<Node>, CloudProviderError> {
        let fake = ListParams::default().labels(&format!("{FAKE_NODE_LABEL}=true"));
        let nodes = self.nodes.list(&fake).await;
        Ok(nodes
            .map_err(|e| api_error("listing fake nodes", &e))?
            .items)
    }
}

fn api_error(what: &str, e: &kube::Error) -> CloudProviderError {
    CloudProviderError::Other(format!("{what}: {e}"))
}

#[async_trait::async_trait]
impl CloudProvider for ClusterFakeProvider {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let node_name = node_claim.name().to_owned();
        // A launch that crashed after creating the Node is finished, not repeated: the Node
        // name is the claim name, so it is found again.
        match self.nodes.get_opt(&node_name).await {
            Ok(Some(existing)) if is_fake(&existing) => {
                return Ok(launched_as(node_claim, &existing));
            }
            Ok(_) => {}
            Err(e) => return Err(api_error("looking up fake node", &e)),
        }
        self.count_reservations().await?;
        let mut launched = self.inner.create(node_claim).await?;
        // The in-memory copy is not the source of truth; the Node is.
        let _ = self.inner.delete(&launched).await;
        // A slow launch (`--fake-launch-delay`): the instance appears only after it.
        let delay = self.inner.launch_delay_of(&launched);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
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
            Ok(Some(node)) if is_fake(&node) && node.metadata.deletion_timestamp.is_none() => {
                match self.nodes.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 404 => Err(not_found()),
                    Err(e) => Err(api_error("deleting fake node", &e)),
                }
            }
            // A fake instance is gone once its Node is being deleted (the Node object waits
            // for its finalizer, which goes once the instance is reported gone).
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
        let mut claims: Vec<NodeClaim> = self.fake_nodes().await?.iter().map(claim_for).collect();
        claims.sort_by(|a, b| a.provider_id().cmp(b.provider_id()));
        Ok(claims)
    }

    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        self.count_reservations().await?;
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
