//! `karpenter plan --from-cluster`: the objects of a live cluster, listed once through a
//! client that can only read; [`provisioner_snapshot`] turns them into the solver's input as
//! the controller's provisioner would see them.

use crate::controller::dry_run;
use anyhow::{Context, Result};
use karpenter_cloudprovider::{CapacityBuffer, NodeOverlay};
use karpenter_cluster::capacity_buffer::{ReferentMaps, namespaced_key};
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

/// The cluster's CapacityBuffers (none when their CRD is not installed) and, when there are
/// any, the objects they may reference.
async fn capacity_buffers(client: &kube::Client) -> Result<(Vec<CapacityBuffer>, ReferentMaps)> {
    let api: Api<CapacityBuffer> = Api::all(client.clone());
    let buffers = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
        Err(e) => return Err(e).context("listing capacitybuffers"),
    };
    let mut referents = ReferentMaps::default();
    if buffers.is_empty() {
        return Ok((buffers, referents));
    }
    fn keyed<K: Resource<DynamicType = ()>>(
        items: Vec<Arc<K>>,
    ) -> std::collections::BTreeMap<(String, String), Arc<K>> {
        items
            .into_iter()
            .map(|o| (namespaced_key(o.meta()), o))
            .collect()
    }
    referents.pod_templates = keyed(list(client).await?);
    referents.deployments = keyed(list(client).await?);
    referents.stateful_sets = keyed(list(client).await?);
    referents.replica_sets = keyed(list(client).await?);
    Ok((buffers, referents))
}

/// The provisioner's snapshot of the cluster, each NodePool offered `instance_types` with the
/// cluster's NodeOverlays applied and its CapacityBuffers as virtual pods, and warnings:
/// objects the scheduling model could not represent, NodePool fields not acted on,
/// NodeOverlays applied or not, and each buffer planned or why not. With
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
        let (buffers, referents) = capacity_buffers(&client).await?;
        let now = jiff::Timestamp::now().as_millisecond();
        Ok(provisioner_snapshot(
            &objects.view(),
            &overlays,
            &buffers,
            &referents,
            instance_types,
            scheduler_config,
            now,
        ))
    })
}
