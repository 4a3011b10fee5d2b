//! Turning manifests into the solver's inputs: workloads and pods become pending pods,
//! NodePools are validated and converted, NodeOverlays change the pools' instance types,
//! CapacityBuffers become virtual pods, DaemonSets become overhead, PDBs are kept for
//! disruption. Shared by `karpenter plan` and the simulator. Pure: documents in, typed
//! objects out.

use crate::api_objects::{replication_controller_selector, service_selector, workload_selector};
use crate::default_spread::DefaultSpread;
use crate::manifests::{Document, ManifestError, Origin};
use crate::scheduler_config::SchedulerConfig;
use k8s_openapi::api::{
    apps::v1 as apps, batch::v1 as batch, core::v1 as core, policy::v1 as policy,
};
use karpenter_cloudprovider::overlay::overlay_instance_types;
use karpenter_cloudprovider::{NodeOverlay, NodePool};
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
    /// NodeOverlays (`karpenter.sh/v1alpha1`), validated.
    pub node_overlays: Vec<NodeOverlay>,
    /// DaemonSets.
    pub daemon_sets: Vec<DaemonSet>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// Namespace labels.
    pub namespaces: BTreeMap<String, Labels>,
    /// CapacityBuffers, resolved against the manifests' PodTemplates and workloads; their
    /// virtual pods are planned after the pending pods, as the controller plans them with
    /// the CapacityBuffer gate on.
    pub capacity_buffers: Vec<crate::capacity_buffer::ResolvedBuffer>,
    /// Kinds that play no part in scheduling (EC2NodeClass, Service …), with how many of
    /// each, so callers can say what they skipped.
    pub ignored: BTreeMap<String, usize>,
    /// The selectors of Services and workloads, and the default spread constraints (none
    /// until [`configure_default_spread`](Self::configure_default_spread)).
    pub default_spread: DefaultSpread,
}

impl Inputs {
    /// Converts every document. Unknown kinds are recorded in `ignored`; a bad object is an
    /// error naming the file, document, object and field.
    pub fn from_documents(docs: &[Document]) -> Result<Self, ManifestError> {
        let mut inputs = Inputs::default();
        let mut pool_names = BTreeMap::new();
        let mut overlay_names = BTreeMap::new();
        // What buffers may reference, kept only when some document is a buffer.
        let mut referents = docs
            .iter()
            .any(|d| d.kind() == Some("CapacityBuffer"))
            .then(crate::capacity_buffer::ReferentMaps::default);
        let mut buffers = Vec::new();
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
                    inputs.add_selector(workload_selector(&w).map_err(convert)?);
                }
                "ReplicaSet" => {
                    let w: apps::ReplicaSet = doc.decode()?;
                    inputs
                        .pending_pods
                        .extend(pods_from_workload(&w).map_err(convert)?);
                    inputs.add_selector(workload_selector(&w).map_err(convert)?);
                }
                "StatefulSet" => {
                    let w: apps::StatefulSet = doc.decode()?;
                    inputs
                        .pending_pods
                        .extend(pods_from_workload(&w).map_err(convert)?);
                    inputs.add_selector(workload_selector(&w).map_err(convert)?);
                }
                // Counted as ignored too, unless default spread constraints read them.
                // (A ReplicationController's pods are not expanded: it stays ignored.)
                "Service" => {
                    let svc: core::Service = doc.decode()?;
                    inputs.add_selector(Some(service_selector(&svc)));
                    *inputs.ignored.entry(kind.to_owned()).or_default() += 1;
                }
                "ReplicationController" => {
                    let rc: core::ReplicationController = doc.decode()?;
                    inputs.add_selector(Some(replication_controller_selector(&rc)));
                    *inputs.ignored.entry(kind.to_owned()).or_default() += 1;
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
                "NodeOverlay" => {
                    let overlay = doc.decode_node_overlay()?;
                    let name = overlay.name().to_owned();
                    if let Some(first) = overlay_names.insert(name.clone(), Origin(doc).to_string())
                    {
                        return Err(doc.invalid(
                            "metadata.name",
                            format!("NodeOverlay {name:?} is already defined by {first}"),
                        ));
                    }
                    inputs.node_overlays.push(overlay);
                }
                "CapacityBuffer" => buffers.push(doc.decode_capacity_buffer()?),
                "PodTemplate" => {
                    let pt: core::PodTemplate = doc.decode()?;
                    karpenter_scheduling::k8s::pod_from_pod_template(&pt).map_err(convert)?;
                }
                other => *inputs.ignored.entry(other.to_string()).or_default() += 1,
            }
            // After the kind's own decoding, which names the field of a malformed object.
            if let Some(maps) = referents.as_mut() {
                let kind = doc.kind().unwrap_or_default();
                maps.insert_value(kind, &doc.value)
                    .map_err(|e| doc.invalid("(root)", e))?;
            }
        }
        if let Some(maps) = &referents {
            inputs.capacity_buffers = buffers
                .iter()
                .map(|b| {
                    crate::capacity_buffer::resolve(b, |ns, r| {
                        crate::capacity_buffer::lookup(maps, ns, r)
                    })
                })
                .collect();
        }
        for ns in inputs
            .pending_pods
            .iter()
            .chain(inputs.capacity_buffers.iter().flat_map(|b| &b.pods))
            .map(|p| p.namespace.clone())
            .collect::<Vec<_>>()
        {
            inputs.namespaces.entry(ns).or_default();
        }
        Ok(inputs)
    }

    fn add_selector(&mut self, source: Option<crate::default_spread::SelectorSource>) {
        if let Some(source) = source {
            self.default_spread.insert(source);
        }
    }

    /// Applies the default spread constraints of `config` to the pods the snapshot plans
    /// (see [`crate::default_spread`]). With constraints, Services play a part and are no
    /// longer counted as ignored.
    pub fn configure_default_spread(&mut self, config: Option<&SchedulerConfig>) {
        self.default_spread.configure(config);
        if self.default_spread.is_active() {
            self.ignored.remove("Service");
        }
    }

    /// Each NodePool's instance types: `instance_types` with the NodeOverlays applied (as
    /// Karpenter applies them with the NodeOverlay gate on), plus a warning for every overlay
    /// that is not applied and why (a conflict, or a failed validation).
    pub fn pool_instance_types(&self, instance_types: &[Arc<InstanceType>]) -> PoolTypes {
        let raw: BTreeMap<String, Vec<Arc<InstanceType>>> = self
            .node_pools
            .iter()
            .map(|p| (p.name().to_owned(), instance_types.to_vec()))
            .collect();
        if self.node_overlays.is_empty() {
            return PoolTypes {
                by_pool: raw,
                warnings: Vec::new(),
            };
        }
        let pools: Vec<&NodePool> = self.node_pools.iter().collect();
        let (by_pool, evaluation) = overlay_instance_types(&self.node_overlays, &pools, &raw);
        let warnings = evaluation
            .verdicts()
            .iter()
            .filter_map(|(name, verdict)| verdict.not_applied(name))
            .collect();
        PoolTypes { by_pool, warnings }
    }

    /// Likely mistakes in the NodePools' requirements, one line each, naming the pool: a
    /// requirement that no instance type offered to the pool meets (with the key it was
    /// probably meant for, as `instance-family In [c m r]` was meant for `instance-category`),
    /// and a key that is close to a well-known label but is not one (the nodes would carry it
    /// as a custom label and it would filter nothing). `by_pool` is
    /// [`pool_instance_types`](Self::pool_instance_types)'s.
    pub fn requirement_warnings(
        &self,
        by_pool: &BTreeMap<String, Vec<Arc<InstanceType>>>,
    ) -> Vec<String> {
        let mut warnings = Vec::new();
        for pool in &self.node_pools {
            let types = by_pool.get(pool.name()).map_or(&[][..], Vec::as_slice);
            warnings.extend(pool.requirement_hints(types, true));
        }
        warnings
    }

    /// One line per CapacityBuffer: what it adds to the plan, or why it adds nothing.
    pub fn buffer_notes(&self) -> Vec<String> {
        self.capacity_buffers
            .iter()
            .map(crate::capacity_buffer::ResolvedBuffer::plan_note)
            .collect()
    }

    /// A snapshot with every pending pod, no nodes yet, and each dynamic NodePool offered
    /// `instance_types` with the NodeOverlays applied (the solver keeps only those
    /// compatible with the pool). Static pools (`replicas`) take no pods from the
    /// scheduler, as in Karpenter.
    pub fn snapshot(
        &self,
        instance_types: &[Arc<InstanceType>],
    ) -> Result<Snapshot, karpenter_cloudprovider::ConversionError> {
        self.snapshot_for(&self.pool_instance_types(instance_types).by_pool)
    }

    /// [`snapshot`](Self::snapshot) with each pool's instance types given (from
    /// [`pool_instance_types`](Self::pool_instance_types)); a pool missing from `by_pool` is
    /// offered none.
    pub fn snapshot_for(
        &self,
        by_pool: &BTreeMap<String, Vec<Arc<InstanceType>>>,
    ) -> Result<Snapshot, karpenter_cloudprovider::ConversionError> {
        let node_pools = self
            .node_pools
            .iter()
            .filter(|p| !p.is_static())
            .map(|p| {
                let types = by_pool.get(p.name()).cloned().unwrap_or_default();
                p.to_model(types, Resources::default())
            })
            .collect::<Result<Vec<model::NodePool>, _>>()?;
        let mut pending_pods = self.pending_pods.clone();
        self.default_spread.apply(&mut pending_pods);
        pending_pods.extend(
            self.capacity_buffers
                .iter()
                .flat_map(|b| b.pods.iter().cloned()),
        );
        Ok(Snapshot {
            pending_pods,
            node_pools,
            daemon_sets: self.daemon_sets.clone(),
            namespaces: self.namespaces.clone(),
            ..Snapshot::default()
        })
    }
}

/// Each NodePool's instance types after NodeOverlays, and what could not be applied.
#[derive(Debug, Default)]
pub struct PoolTypes {
    /// Pool name → its instance types.
    pub by_pool: BTreeMap<String, Vec<Arc<InstanceType>>>,
    /// One line per overlay that is not applied, saying why.
    pub warnings: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifests::parse_str;
    use karpenter_scheduling::{SolveOptions, solve};
    use karpenter_testing::instance_types::InstanceTypeBuilder;
    use std::path::Path;

    const BASE: &str = "\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers:
  - name: c
    resources: {requests: {cpu: '1', example.com/fuse: '1'}}
";

    fn types() -> Vec<Arc<InstanceType>> {
        vec![
            InstanceTypeBuilder::new("small", 2, 4)
                .on_demand(0.10)
                .build(),
            InstanceTypeBuilder::new("medium", 4, 8)
                .on_demand(0.20)
                .build(),
        ]
    }

    #[test]
    fn requirement_warnings_name_the_pool_and_the_likely_key() {
        use karpenter_scheduling::requirements::{Operator, Requirement};
        let typed = |name: &str, family: &str, category: &str| {
            let mut t = (*InstanceTypeBuilder::new(name, 2, 4).on_demand(0.1).build()).clone();
            for (k, v) in [
                ("karpenter.k8s.aws/instance-family", family),
                ("karpenter.k8s.aws/instance-category", category),
            ] {
                t.requirements
                    .add(Requirement::new(k, Operator::In, [v]).unwrap());
            }
            Arc::new(t)
        };
        let yaml = "\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m, c, r]}
      - {key: topology.kubernetes.io/zones, operator: In, values: [us-east-1a]}
      - {key: example.com/team, operator: In, values: [a]}
";
        let docs = parse_str(Path::new("t.yaml"), yaml).unwrap();
        let inputs = Inputs::from_documents(&docs).unwrap();
        let offered = inputs.pool_instance_types(&[
            typed("m5.large", "m5", "m"),
            typed("c5.large", "c5", "c"),
            typed("r5.large", "r5", "r"),
        ]);
        assert_eq!(
            inputs.requirement_warnings(&offered.by_pool),
            vec![
                "NodePool \"default\": requirement karpenter.k8s.aws/instance-family In [c m r] \
                 matches no instance type of the catalogue; did you mean \
                 karpenter.k8s.aws/instance-category, whose values include all of them?",
                "NodePool \"default\": requirement key topology.kubernetes.io/zones is not a \
                 well-known label, so it filters no instance type and nodes carry it as a \
                 custom label; did you mean topology.kubernetes.io/zone?",
            ]
        );
        let fine = parse_str(Path::new("t.yaml"), BASE).unwrap();
        let fine = Inputs::from_documents(&fine).unwrap();
        let offered = fine.pool_instance_types(&types());
        assert!(fine.requirement_warnings(&offered.by_pool).is_empty());
    }

    fn plan(overlays: &str) -> (Vec<String>, Vec<String>) {
        let docs = parse_str(Path::new("t.yaml"), &format!("{BASE}{overlays}")).unwrap();
        let inputs = Inputs::from_documents(&docs).unwrap();
        let types = inputs.pool_instance_types(&types());
        let snapshot = inputs.snapshot_for(&types.by_pool).unwrap();
        let plan = solve(&snapshot, &SolveOptions::default());
        let chosen = plan
            .new_node_claims
            .iter()
            .map(|c| c.instance_type_options[0].name.to_string())
            .collect();
        (chosen, types.warnings)
    }

    #[test]
    fn overlays_in_the_manifests_change_capacity_and_prices() {
        // Without a capacity overlay nothing offers the extended resource.
        assert_eq!(plan("").0, Vec::<String>::new());
        let fuse = "---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: fuse}
spec:
  requirements: []
  capacity: {example.com/fuse: '1'}
";
        assert_eq!(plan(fuse).0, ["small"]);
        let dearer_small = "---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: dearer-small}
spec:
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [small]}
  priceAdjustment: '+200%'
";
        assert_eq!(plan(&format!("{fuse}{dearer_small}")).0, ["medium"]);
    }

    #[test]
    fn conflicting_overlays_are_named_and_invalid_ones_refused() {
        let conflict = "---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: a}
spec: {requirements: [], weight: 5, priceAdjustment: '+1'}
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: b}
spec:
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [small]}]
  weight: 5
  price: '0.01'
  capacity: {example.com/fuse: '1'}
";
        let (chosen, warnings) = plan(conflict);
        assert_eq!(chosen, ["small"]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with(
                "NodeOverlay \"a\" is not applied: it conflicts with NodeOverlay \"b\""
            ),
            "{warnings:?}"
        );

        let bad = "---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: bad}
spec: {requirements: [], capacity: {cpu: '1'}}
";
        let docs = parse_str(Path::new("t.yaml"), &format!("{BASE}{bad}")).unwrap();
        let err = Inputs::from_documents(&docs).unwrap_err().to_string();
        assert!(
            err.contains("NodeOverlay bad") && err.contains("spec.capacity[cpu]"),
            "{err}"
        );
        let wrong_version = bad.replace("v1alpha1", "v1");
        let docs = parse_str(Path::new("t.yaml"), &format!("{BASE}{wrong_version}")).unwrap();
        let err = Inputs::from_documents(&docs).unwrap_err().to_string();
        assert!(
            err.contains("NodeOverlay must be karpenter.sh/v1alpha1"),
            "{err}"
        );
    }

    #[test]
    fn capacity_buffers_in_the_manifests_become_virtual_pods_of_the_plan() {
        let buffers = "---
apiVersion: v1
kind: PodTemplate
metadata: {name: chunk, namespace: default}
template:
  spec:
    containers: [{name: c, resources: {requests: {cpu: '1'}}}]
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: by-template, namespace: default}
spec: {podTemplateRef: {name: chunk}, replicas: 2}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, resources: {requests: {cpu: 100m}}}]
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: by-workload, namespace: default}
spec: {scalableRef: {kind: Deployment, name: web}, percentage: 30}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: dangling, namespace: default}
spec: {podTemplateRef: {name: nowhere}, replicas: 1}
";
        let docs = parse_str(Path::new("t.yaml"), &format!("{BASE}{buffers}")).unwrap();
        let inputs = Inputs::from_documents(&docs).unwrap();
        assert_eq!(
            inputs.buffer_notes(),
            [
                "CapacityBuffer default/by-template planned as 2 virtual pod(s) (as the controller does with the CapacityBuffer feature gate on)",
                "CapacityBuffer default/by-workload planned as 3 virtual pod(s) (as the controller does with the CapacityBuffer feature gate on)",
                "CapacityBuffer default/dangling is not ready for provisioning (PodTemplateNotFound): podtemplates \"nowhere\" not found",
            ]
        );
        let snapshot = inputs.snapshot(&types()).unwrap();
        // One pod, ten web replicas, then 2 + 3 virtual pods.
        assert_eq!(snapshot.pending_pods.len(), 1 + 10 + 5);
        let virtual_cpu: i64 = snapshot
            .pending_pods
            .iter()
            .filter(|p| crate::capacity_buffer::is_virtual(p))
            .map(|p| p.requests.cpu_millis)
            .sum();
        assert_eq!(virtual_cpu, 2 * 1_000 + 3 * 100);
        // Without buffers, workloads are not kept twice.
        let docs = parse_str(Path::new("t.yaml"), BASE).unwrap();
        assert!(
            Inputs::from_documents(&docs)
                .unwrap()
                .capacity_buffers
                .is_empty()
        );
    }

    const WEB: &str = "\
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: c, resources: {requests: {cpu: 100m}}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: batch, namespace: shop}
spec:
  parallelism: 2
  template:
    metadata: {labels: {app: batch}}
    spec:
      restartPolicy: Never
      containers:
      - {name: c, resources: {requests: {cpu: 100m}}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {app: web}}
";

    /// The zones of the claims each app's pods are planned on.
    fn zones_by_app(
        config: Option<&str>,
    ) -> (BTreeMap<String, Vec<String>>, BTreeMap<String, usize>) {
        let base = BASE.split("---").next().unwrap();
        let docs = parse_str(Path::new("t.yaml"), &format!("{base}{WEB}")).unwrap();
        let mut inputs = Inputs::from_documents(&docs).unwrap();
        let config = config.map(|c| {
            crate::scheduler_config::parse_scheduler_config(c)
                .unwrap()
                .unwrap()
        });
        inputs.configure_default_spread(config.as_ref());
        let snapshot = inputs.snapshot(&types()).unwrap();
        let plan = solve(&snapshot, &SolveOptions::default());
        let mut zones: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for claim in &plan.new_node_claims {
            let zone = claim
                .requirements
                .get("topology.kubernetes.io/zone")
                .map(|r| r.values().collect::<Vec<_>>().join("|"))
                .unwrap_or_default();
            for pod in &claim.pods {
                let app = pod.name.split('-').next().unwrap().to_owned();
                zones.entry(app).or_default().push(zone.clone());
            }
        }
        for z in zones.values_mut() {
            z.sort();
            z.dedup();
        }
        (zones, inputs.ignored)
    }

    #[test]
    fn scheduler_config_spreads_pods_a_workload_or_service_selects() {
        let (zones, ignored) = zones_by_app(None);
        assert_eq!(zones["web"].len(), 1, "packed together: {zones:?}");
        assert_eq!(ignored.get("Service"), Some(&1));
        let config = "podTopologySpread: {defaultConstraints: [{maxSkew: 1, \
                      topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}]}";
        let (zones, ignored) = zones_by_app(Some(config));
        assert_eq!(zones["web"].len(), 3, "one zone each: {zones:?}");
        assert!(zones["web"].iter().all(|z| !z.contains('|')), "{zones:?}");
        // Nothing selects the Job's pods (no Service, and a Job's selector does not
        // count): they keep no constraint and share a node.
        assert_eq!(zones["batch"].len(), 1, "{zones:?}");
        assert_eq!(ignored.get("Service"), None, "the Service is read");
    }
}
