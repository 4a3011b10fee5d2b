//! `karpenter plan --from-cluster`: the solver's input read from a live cluster. The objects
//! are listed once through a client that can only read, indexed by the same feed the
//! controller's watches drive, and taken as the provisioner sees them, so the plan is the
//! one `karpenter controller` would compute for the pods pending now.

use crate::controller::dry_run;
use anyhow::{Context, Result};
use karpenter_cloudprovider::ignored::node_pool_warnings;
use karpenter_cloudprovider::overlay::overlay_instance_types;
use karpenter_cloudprovider::{NodeClaim, NodeOverlay, NodePool};
use karpenter_cluster::feed::{ApiObjects, Feed};
use karpenter_cluster::{ClusterState, Scope};
use karpenter_scheduling::model::{InstanceType, Snapshot};
use kube::Resource;
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Every object of kind `K` in the cluster.
async fn list<K>(client: &kube::Client) -> Result<Vec<Arc<K>>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let items = api
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing {}", K::plural(&())))?;
    Ok(items.items.into_iter().map(Arc::new).collect())
}

/// The cluster's NodeOverlays; none when their CRD is not installed.
async fn node_overlays(client: &kube::Client) -> Result<Vec<NodeOverlay>> {
    let api: Api<NodeOverlay> = Api::all(client.clone());
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e).context("listing nodeoverlays"),
    }
}

/// The provisioner's snapshot of the cluster, each NodePool offered `instance_types` with the
/// cluster's NodeOverlays applied, and warnings: objects the scheduling model could not
/// represent, NodePool fields not acted on, and NodeOverlays applied or not.
///
/// # Errors
/// No cluster configuration, or a list request failed (for example forbidden).
pub fn snapshot(instance_types: &[Arc<InstanceType>]) -> Result<(Snapshot, Vec<String>)> {
    crate::cli::install_crypto_provider();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // `plan` serves no metrics; its requests go through an unread registry.
        let metrics = karpenter_metrics::Metrics::new().kube_client_layer();
        let client = dry_run::client(true, metrics)
            .await
            .context("connecting to the cluster (in-cluster config or KUBECONFIG)")?;
        let node_pools = list::<NodePool>(&client).await?;
        let mut node_claims = list::<NodeClaim>(&client).await?;
        node_claims.sort_by(|a, b| a.name().cmp(b.name()));
        let nodes = list(&client).await?;
        let pods = list(&client).await?;
        let daemon_sets = list(&client).await?;
        let pdbs = list(&client).await?;
        let namespaces = list(&client).await?;
        let objects = ApiObjects {
            node_pools: &node_pools,
            node_claims: &node_claims,
            nodes: &nodes,
            pods: &pods,
            daemon_sets: &daemon_sets,
            pdbs: &pdbs,
            namespaces: &namespaces,
        };
        let raw: BTreeMap<String, Vec<Arc<InstanceType>>> = node_pools
            .iter()
            .map(|p| (p.name().to_owned(), instance_types.to_vec()))
            .collect();
        let overlays = node_overlays(&client).await?;
        let pools: Vec<&NodePool> = node_pools.iter().map(AsRef::as_ref).collect();
        let (types, evaluation) = overlay_instance_types(&overlays, &pools, &raw);
        let mut state = ClusterState::new();
        let synced = Feed::default().sync(&mut state, &objects, &types, 1);
        let mut warnings: Vec<String> = synced
            .skipped
            .into_iter()
            .map(|(key, why)| format!("{key:?} left out of the plan: {why}"))
            .collect();
        // The controller applies them only with the NodeOverlay gate, which a plan cannot see.
        warnings.extend(evaluation.verdicts().iter().map(|(name, verdict)| {
            verdict.not_applied(name).unwrap_or_else(|| {
                format!("NodeOverlay {name:?} applied (as the controller does with the NodeOverlay feature gate on)")
            })
        }));
        warnings.extend(node_pool_warnings(
            node_pools.iter().map(|p| p.as_ref()),
            karpenter_cloudprovider::ignored::STATIC_CAPACITY_DEFAULT,
        ));
        let now = jiff::Timestamp::now().as_millisecond();
        Ok((state.snapshot(now, Scope::Provisioner), warnings))
    })
}
