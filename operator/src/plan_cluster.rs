//! `karpenter plan --from-cluster`: the objects of a live cluster, listed once through a
//! client that can only read; [`provisioner_snapshot`] turns them into the solver's input as
//! the controller's provisioner would see them.

use crate::controller::dry_run;
use anyhow::{Context, Result};
use karpenter_cloudprovider::NodeOverlay;
use karpenter_cluster::object_set::ObjectSet;
use karpenter_cluster::plan_snapshot::provisioner_snapshot;
use karpenter_cluster::scheduler_config::SchedulerConfig;
use karpenter_scheduling::model::{InstanceType, Snapshot};
use kube::Resource;
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;
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
/// represent, NodePool fields not acted on, and NodeOverlays applied or not. With
/// `scheduler_config`'s default spread constraints, Services, ReplicaSets, StatefulSets and
/// ReplicationControllers are listed too, for the selectors they deduce.
///
/// # Errors
/// No cluster configuration, or a list request failed (for example forbidden).
pub fn snapshot(
    instance_types: &[Arc<InstanceType>],
    scheduler_config: Option<&SchedulerConfig>,
) -> Result<(Snapshot, Vec<String>)> {
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
        let mut objects = ObjectSet {
            node_pools: list(&client).await?,
            node_claims: list(&client).await?,
            nodes: list(&client).await?,
            pods: list(&client).await?,
            daemon_sets: list(&client).await?,
            pdbs: list(&client).await?,
            namespaces: list(&client).await?,
            ..ObjectSet::default()
        };
        if scheduler_config.is_some_and(SchedulerConfig::is_active) {
            objects.services = list(&client).await?;
            objects.replica_sets = list(&client).await?;
            objects.stateful_sets = list(&client).await?;
            objects.replication_controllers = list(&client).await?;
        }
        objects.node_claims.sort_by(|a, b| a.name().cmp(b.name()));
        let overlays = node_overlays(&client).await?;
        let now = jiff::Timestamp::now().as_millisecond();
        Ok(provisioner_snapshot(
            &objects.view(),
            &overlays,
            instance_types,
            scheduler_config,
            now,
        ))
    })
}
