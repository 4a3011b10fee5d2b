//! Turning manifests into the solver's inputs: workloads and pods become pending pods,
//! NodePools are validated and converted, DaemonSets become overhead, PDBs are kept for
//! disruption. Shared by `karpenter plan` and the simulator. Pure: documents in, typed
//! objects out.

use crate::manifests::{Document, ManifestError, Origin};
use k8s_openapi::api::{
    apps::v1 as apps, batch::v1 as batch, core::v1 as core, policy::v1 as policy,
};
use karpenter_cloudprovider::NodePool;
use karpenter_scheduling::Resources;
use karpenter_scheduling::k8s::{
    daemonset_from_k8s, pdb_from_k8s, pod_from_k8s, pods_from_workload,
};
use karpenter_scheduling::model::{self, DaemonSet, InstanceType, Labels, Pod, Snapshot};
use karpenter_scheduling::pdb::PodDisruptionBudget;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Objects read from manifests, converted and validated.
#[derive(Debug, Default)]
pub struct Inputs {
    /// Pods not bound to a node, from Pods and workloads, in document order.
    pub pending_pods: Vec<Pod>,
    /// NodePools, validated (defaults applied while parsing).
    pub node_pools: Vec<NodePool>,
    /// DaemonSets.
    pub daemon_sets: Vec<DaemonSet>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// Namespace labels.
    pub namespaces: BTreeMap<String, Labels>,
    /// Kinds that play no part in scheduling (EC2NodeClass, Service …), with how many of
    /// each, so callers can say what they skipped.
    pub ignored: BTreeMap<String, usize>,
}

impl Inputs {
    /// Converts every document. Unknown kinds are recorded in `ignored`; a bad object is an
    /// error naming the file, document, object and field.
    pub fn from_documents(docs: &[Document]) -> Result<Self, ManifestError> {
        let mut inputs = Inputs::default();
        let mut pool_names = BTreeMap::new();
        for doc in docs {
            doc.refuse_older_karpenter_api()?;
            let kind = doc.kind().unwrap_or_default();
            let convert =
                |e: karpenter_scheduling::k8s::ConversionError| doc.invalid(e.field, e.reason);
            match kind {
                "Pod" => {
                    let pod: core::Pod = doc.decode()?;
                    let converted = pod_from_k8s(&pod).map_err(convert)?;
                    if converted.node_name.is_none() && !converted.is_daemon() {
                        inputs.pending_pods.push(converted);
                    }
                }
                "Deployment" => {
                    let w: apps::Deployment = doc.decode()?;
                    inputs
                        .pending_pods
                        .extend(pods_from_workload(&w).map_err(convert)?);
                }
                "ReplicaSet" => {
                    let w: apps::ReplicaSet = doc.decode()?;
                    inputs
                        .pending_pods
                        .extend(pods_from_workload(&w).map_err(convert)?);
                }
                "StatefulSet" => {
                    let w: apps::StatefulSet = doc.decode()?;
                    inputs
                        .pending_pods
                        .extend(pods_from_workload(&w).map_err(convert)?);
                }
                "Job" => {
                    let w: batch::Job = doc.decode()?;
                    inputs
                        .pending_pods
                        .extend(pods_from_workload(&w).map_err(convert)?);
                }
                "DaemonSet" => {
                    let ds: apps::DaemonSet = doc.decode()?;
                    inputs
                        .daemon_sets
                        .push(daemonset_from_k8s(&ds).map_err(convert)?);
                }
                "PodDisruptionBudget" => {
                    let pdb: policy::PodDisruptionBudget = doc.decode()?;
                    inputs.pdbs.push(pdb_from_k8s(&pdb).map_err(convert)?);
                }
                "Namespace" => {
                    let ns: core::Namespace = doc.decode()?;
                    let name = ns.metadata.name.clone().unwrap_or_default();
                    inputs
                        .namespaces
                        .insert(name, ns.metadata.labels.clone().unwrap_or_default());
                }
                "NodePool" => {
                    let pool: NodePool = doc.decode_node_pool()?;
                    pool.validate()
                        .map_err(|e| doc.invalid("spec", e.to_string()))?;
                    let name = pool.metadata.name.clone().unwrap_or_default();
                    if let Some(first) = pool_names.insert(name.clone(), Origin(doc).to_string()) {
                        return Err(doc.invalid(
                            "metadata.name",
                            format!("NodePool {name:?} is already defined by {first}"),
                        ));
                    }
                    inputs.node_pools.push(pool);
                }
                other => *inputs.ignored.entry(other.to_string()).or_default() += 1,
            }
        }
        for ns in inputs
            .pending_pods
            .iter()
            .map(|p| p.namespace.clone())
            .collect::<Vec<_>>()
        {
            inputs.namespaces.entry(ns).or_default();
        }
        Ok(inputs)
    }

    /// A snapshot with every pending pod, no nodes yet, and each dynamic NodePool offered
    /// `instance_types` (the solver keeps only those compatible with the pool). Static pools
    /// (`replicas`) take no pods from the scheduler, as in Karpenter.
    pub fn snapshot(
        &self,
        instance_types: &[Arc<InstanceType>],
    ) -> Result<Snapshot, karpenter_cloudprovider::ConversionError> {
        let node_pools = self
            .node_pools
            .iter()
            .filter(|p| !p.is_static())
            .map(|p| p.to_model(instance_types.to_vec(), Resources::default()))
            .collect::<Result<Vec<model::NodePool>, _>>()?;
        Ok(Snapshot {
            pending_pods: self.pending_pods.clone(),
            node_pools,
            daemon_sets: self.daemon_sets.clone(),
            namespaces: self.namespaces.clone(),
            ..Snapshot::default()
        })
    }
}
