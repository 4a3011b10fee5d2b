//! The gauges read from the whole index rather than from events: per node (allocatable,
//! pod and DaemonSet requests, system overhead, age) and per instance type and offering.
//! Each refresh replaces a family's series, so nodes and offerings that are gone lose theirs.

use crate::{
    DynamicLabels, FloatGauge, InstanceTypeLabels, Metrics, NodePoolLabels, OfferingLabels,
    ResourceTypeLabels,
};
use karpenter_cluster::{ClusterState, NodeRecord};
use karpenter_scheduling::model::{InstanceType, Millis};
use karpenter_scheduling::resources::Resources;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::Hash;

/// Node labels every node series carries, under upstream's metric label names: Karpenter's
/// well-known labels and the AWS provider's. A node without one gets an empty value.
pub const WELL_KNOWN_NODE_LABELS: [&str; 36] = [
    "karpenter.sh/nodepool",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "karpenter.sh/capacity-type",
    "node.kubernetes.io/windows-build",
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "topology.k8s.aws/zone-id",
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
];

/// `topology.kubernetes.io/zone` → `zone`: the part after the `/`, lower case, `-` as `_`.
fn metric_label(key: &str) -> String {
    let name = key.rsplit_once('/').map_or(key, |(_, n)| n);
    name.to_lowercase().replace('-', "_")
}

/// A resource name as a label value: lower case, `-` as `_` (`ephemeral_storage`).
fn resource_label(name: &str) -> String {
    name.to_lowercase().replace('-', "_")
}

/// A quantity as upstream reports it: CPU in cores, everything else in units.
fn value(resource: &str, amount: i64) -> f64 {
    if resource == "cpu" {
        amount as f64 / 1000.0
    } else {
        amount as f64
    }
}

/// The series last written to one family, so that the next refresh can remove the ones
/// that no longer exist.
#[derive(Debug)]
struct Series<L> {
    written: HashSet<L>,
}

impl<L> Default for Series<L> {
    fn default() -> Self {
        Self {
            written: HashSet::new(),
        }
    }
}

impl<L: Clone + Eq + Hash + EncodeLabelSet + std::fmt::Debug> Series<L> {
    fn replace(&mut self, family: &Family<L, FloatGauge>, now: Vec<(L, f64)>) {
        let keep: HashSet<L> = now.iter().map(|(l, _)| l.clone()).collect();
        for gone in self.written.difference(&keep) {
            family.remove(gone);
        }
        for (labels, v) in now {
            family.get_or_create(&labels).set(v);
        }
        self.written = keep;
    }
}

/// Keeps the node and instance-type gauges in line with the index.
#[derive(Debug, Default)]
pub struct IndexMetrics {
    allocatable: Series<DynamicLabels>,
    pod_requests: Series<DynamicLabels>,
    daemon_requests: Series<DynamicLabels>,
    pod_limits: Series<DynamicLabels>,
    daemon_limits: Series<DynamicLabels>,
    overhead: Series<DynamicLabels>,
    lifetime: Series<DynamicLabels>,
    cpu_cores: Series<InstanceTypeLabels>,
    memory_bytes: Series<InstanceTypeLabels>,
    available: Series<OfferingLabels>,
    price: Series<OfferingLabels>,
    types_seen: Option<u64>,
    /// Offering prices per NodePool, from the latest instance types.
    prices: BTreeMap<String, BTreeMap<(String, String, String), f64>>,
    cost: Series<NodePoolLabels>,
    /// NodeClaims already counted in `karpenter_nodepools_cost_tracker_errors_total`.
    untracked: BTreeSet<String>,
}

fn node_labels(record: &NodeRecord) -> DynamicLabels {
    let mut labels: DynamicLabels = WELL_KNOWN_NODE_LABELS
        .iter()
        .map(|k| {
            let v = record.node.labels.get(*k).cloned().unwrap_or_default();
            (metric_label(k), v)
        })
        .collect();
    labels.push(("node_name".into(), record.node.name.clone()));
    // A Node's status.phase is deprecated and empty on every current kubelet.
    labels.push(("phase".into(), String::new()));
    labels.push(("managed".into(), record.node_claim.is_some().to_string()));
    labels
}

fn per_resource(labels: &DynamicLabels, r: &Resources) -> Vec<(DynamicLabels, f64)> {
    r.iter()
        .map(|(name, amount)| {
            let mut l = labels.clone();
            l.push(("resource_type".into(), resource_label(name)));
            (l, value(name, amount))
        })
        .collect()
}

impl IndexMetrics {
    /// Sets the node gauges from every Node in `state` at `now` (in-flight claims without a
    /// Node have none, as upstream's), and `karpenter_cluster_utilization_percent`.
    pub fn record_nodes(&mut self, state: &ClusterState, now: Millis, m: &Metrics) {
        let mut allocatable = Vec::new();
        let mut pod_requests = Vec::new();
        let mut daemon_requests = Vec::new();
        let (mut pod_limits, mut daemon_limits) = (Vec::new(), Vec::new());
        let limits = m.pod_limits.lock().unwrap_or_else(|e| e.into_inner());
        let mut overhead = Vec::new();
        let mut lifetime = Vec::new();
        for (name, record) in state.nodes() {
            if matches!(record.kubelet, karpenter_cluster::Kubelet::NotJoined) {
                continue;
            }
            let labels = node_labels(record);
            let mut pods = Resources::default();
            let mut daemons = Resources::default();
            let (mut pods_limits, mut daemons_limits) =
                (Resources::default(), Resources::default());
            let (mut pod_count, mut daemon_count) = (0, 0);
            for p in state.pods_on(name) {
                let limit = limits.get(&p.pod.key());
                pods.add_assign(&p.pod.requests);
                pods_limits.add_assign(limit.unwrap_or(&Resources::default()));
                pod_count += 1;
                if p.pod.is_daemon() {
                    daemons.add_assign(&p.pod.requests);
                    daemons_limits.add_assign(limit.unwrap_or(&Resources::default()));
                    daemon_count += 1;
                }
            }
            // Upstream's requests count each pod as one `pods` (RequestsForPods), which the
            // capacity dashboard's pod-density panel divides by allocatable pods; the model's
            // requests leave it out.
            pods.set(karpenter_scheduling::resources::PODS, pod_count);
            daemons.set(karpenter_scheduling::resources::PODS, daemon_count);
            let reserved = record
                .node
                .capacity
                .checked_sub(&record.node.allocatable)
                .unwrap_or_default();
            allocatable.extend(per_resource(&labels, &record.node.allocatable));
            pod_requests.extend(per_resource(&labels, &pods));
            daemon_requests.extend(per_resource(&labels, &daemons));
            pod_limits.extend(per_resource(&labels, &pods_limits));
            daemon_limits.extend(per_resource(&labels, &daemons_limits));
            overhead.extend(per_resource(&labels, &reserved));
            let age = (now - record.node.created_at).max(0) as f64 / 1000.0;
            lifetime.push((labels, age));
        }
        self.allocatable.replace(&m.nodes_allocatable, allocatable);
        self.pod_requests
            .replace(&m.nodes_total_pod_requests, pod_requests);
        self.daemon_requests
            .replace(&m.nodes_total_daemon_requests, daemon_requests);
        drop(limits);
        self.pod_limits
            .replace(&m.nodes_total_pod_limits, pod_limits);
        self.daemon_limits
            .replace(&m.nodes_total_daemon_limits, daemon_limits);
        self.overhead.replace(&m.nodes_system_overhead, overhead);
        self.lifetime.replace(&m.nodes_current_lifetime, lifetime);
        self.record_cost(state, m);
        for (resource, percent) in state.utilization_percent() {
            m.cluster_utilization
                .get_or_create(&ResourceTypeLabels {
                    resource_type: resource,
                })
                .set(percent);
        }
    }

    /// Sets `karpenter_nodepools_cost_total` as upstream's cost tracker keeps it: for every
    /// NodePool, the sum of its NodeClaims' offering prices (instance type, zone and capacity
    /// type from their labels; claims without them are not counted yet) in the pool's latest
    /// instance types, overlays included. A claim whose NodePool or instance types are
    /// unknown is counted once in `karpenter_nodepools_cost_tracker_errors_total`.
    fn record_cost(&mut self, state: &ClusterState, m: &Metrics) {
        use karpenter_cloudprovider::v1::labels as l;
        let mut cost: BTreeMap<&str, f64> = state
            .node_pools()
            .keys()
            .map(|p| (p.as_str(), 0.0))
            .collect();
        for (name, claim) in state.node_claims() {
            let label = |k| claim.label(k).map(str::to_owned);
            let (Some(pool), Some(it), Some(zone), Some(ct)) = (
                claim.node_pool(),
                label(l::INSTANCE_TYPE),
                label(l::ZONE),
                label(l::CAPACITY_TYPE),
            ) else {
                continue;
            };
            let (Some(total), Some(prices)) = (cost.get_mut(pool), self.prices.get(pool)) else {
                if self.untracked.insert(name.clone()) {
                    let nodepool = pool.to_owned();
                    m.nodepools_cost_tracker_errors
                        .get_or_create(&NodePoolLabels { nodepool })
                        .inc();
                }
                continue;
            };
            // An offering no longer listed counts 0, as upstream's unknown price.
            *total += prices.get(&(it, zone, ct)).copied().unwrap_or(0.0);
        }
        self.untracked
            .retain(|c| state.node_claims().contains_key(c));
        let series = cost
            .into_iter()
            .map(|(pool, c)| {
                (
                    NodePoolLabels {
                        nodepool: pool.to_owned(),
                    },
                    c,
                )
            })
            .collect();
        self.cost.replace(&m.nodepools_cost, series);
    }

    /// Sets the instance-type and offering gauges from `types` (every pool's, a type listed
    /// by several pools counted once), unless `version` says they are unchanged since the
    /// last call.
    pub fn record_instance_types(
        &mut self,
        types: &BTreeMap<String, Vec<std::sync::Arc<InstanceType>>>,
        version: u64,
        m: &Metrics,
    ) {
        if self.types_seen == Some(version) {
            return;
        }
        self.types_seen = Some(version);
        self.prices = types
            .iter()
            .map(|(pool, types)| {
                let prices = types.iter().flat_map(|it| {
                    it.offerings.iter().map(|o| {
                        let key = (it.name.clone(), o.zone.clone(), o.capacity_type.clone());
                        (key, o.price)
                    })
                });
                (pool.clone(), prices.collect())
            })
            .collect();
        let mut seen = BTreeSet::new();
        let (mut cpu, mut memory, mut available, mut price) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for it in types.values().flatten() {
            if !seen.insert(it.name.as_str()) {
                continue;
            }
            let labels = InstanceTypeLabels {
                instance_type: it.name.clone(),
            };
            cpu.push((labels.clone(), it.capacity.cpu_millis as f64 / 1000.0));
            memory.push((labels, it.capacity.memory as f64));
            for o in &it.offerings {
                let labels = OfferingLabels {
                    instance_type: it.name.clone(),
                    capacity_type: o.capacity_type.clone(),
                    zone: o.zone.clone(),
                };
                available.push((labels.clone(), if o.available { 1.0 } else { 0.0 }));
                price.push((labels, o.price));
            }
        }
        self.cpu_cores.replace(&m.instance_type_cpu_cores, cpu);
        self.memory_bytes
            .replace(&m.instance_type_memory_bytes, memory);
        self.available.replace(&m.offering_available, available);
        self.price.replace(&m.offering_price_estimate, price);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cluster::Object;

    use crate::tests::lines;

    #[test]
    fn label_names_follow_upstream() {
        assert_eq!(metric_label("topology.kubernetes.io/zone"), "zone");
        assert_eq!(
            metric_label("karpenter.k8s.aws/instance-cpu-manufacturer"),
            "instance_cpu_manufacturer"
        );
        assert_eq!(resource_label("ephemeral-storage"), "ephemeral_storage");
    }

    #[test]
    fn node_series_follow_the_nodes() {
        let m = Metrics::new();
        let mut im = IndexMetrics::default();
        let mut state = ClusterState::new();
        let node = karpenter_testing::api::ready(karpenter_testing::api::registering_node(
            "n1",
            "fake://z/n1",
        ));
        let mut node = node;
        let status = node.status.get_or_insert_with(Default::default);
        let q = |v: &str| k8s_openapi::apimachinery::pkg::api::resource::Quantity(v.into());
        status.capacity = Some([("cpu".into(), q("4")), ("memory".into(), q("16Gi"))].into());
        status.allocatable =
            Some([("cpu".into(), q("3920m")), ("memory".into(), q("15Gi"))].into());
        node.metadata.labels = Some([("topology.kubernetes.io/zone".into(), "z".into())].into());
        node.metadata.creation_timestamp = Some(karpenter_cluster::provisioner::time(10_000));
        let record = karpenter_cluster::api_objects::node_record(&node, None).unwrap();
        state.apply(Object::Node(Box::new(record)));
        im.record_nodes(&state, 70_000, &m);
        let alloc = lines(&m, "karpenter_nodes_allocatable{");
        assert_eq!(alloc.len(), 2, "{alloc:?}");
        let cpu = alloc
            .iter()
            .find(|l| l.contains("resource_type=\"cpu\""))
            .unwrap();
        assert!(cpu.ends_with(" 3.92"), "{cpu}");
        assert!(
            cpu.contains("zone=\"z\"") && cpu.contains("node_name=\"n1\""),
            "{cpu}"
        );
        assert!(cpu.contains("managed=\"false\""), "{cpu}");
        let overhead = lines(&m, "karpenter_nodes_system_overhead{");
        assert!(
            overhead
                .iter()
                .any(|l| l.contains("\"memory\"") && l.ends_with(" 1073741824.0")),
            "{overhead:?}"
        );
        let age = lines(&m, "karpenter_nodes_current_lifetime_seconds{");
        assert!(age[0].ends_with(" 60.0"), "{age:?}");
        state.delete(&karpenter_cluster::ObjectKey::Node("n1".into()));
        im.record_nodes(&state, 80_000, &m);
        assert!(
            lines(&m, "karpenter_nodes_allocatable{").is_empty(),
            "a gone node's series go"
        );
    }

    #[test]
    fn offerings_are_listed_once_per_type() {
        let m = Metrics::new();
        let mut im = IndexMetrics::default();
        let types = karpenter_testing::instance_types::catalogue();
        let by_pool: BTreeMap<String, Vec<_>> =
            [("a".into(), types.clone()), ("b".into(), types.clone())].into();
        im.record_instance_types(&by_pool, 1, &m);
        let offerings: usize = types.iter().map(|t| t.offerings.len()).sum();
        assert_eq!(
            lines(
                &m,
                "karpenter_cloudprovider_instance_type_offering_price_estimate{"
            )
            .len(),
            offerings
        );
        assert_eq!(
            lines(&m, "karpenter_cloudprovider_instance_type_cpu_cores{").len(),
            types.len()
        );
        im.record_instance_types(&BTreeMap::new(), 2, &m);
        assert!(lines(&m, "karpenter_cloudprovider_instance_type_cpu_cores{").is_empty());
    }

    #[test]
    fn limit_gauges_sum_the_pods_limits_per_node() {
        use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let m = Metrics::new();
        let mut state = ClusterState::new();
        let node = karpenter_testing::api::ready(karpenter_testing::api::registering_node(
            "n1",
            "fake://z/n1",
        ));
        let record = karpenter_cluster::api_objects::node_record(&node, None).unwrap();
        state.apply(Object::Node(Box::new(record)));
        let pod = |name: &str, cpu: &str, daemon: bool| {
            let mut p = karpenter_testing::api::pod_with_conditions(Some("n1"), Some(0), Some(0));
            p.metadata.name = Some(name.into());
            if daemon {
                p.metadata.owner_references = Some(vec![OwnerReference {
                    kind: "DaemonSet".into(),
                    name: "agent".into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]);
            }
            p.spec.as_mut().unwrap().containers = vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    limits: Some([("cpu".into(), Quantity(cpu.into()))].into()),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }];
            std::sync::Arc::new(p)
        };
        let pods = [pod("web", "1500m", false), pod("agent", "250m", true)];
        let mut keys = Vec::new();
        for p in &pods {
            let record = karpenter_cluster::api_objects::pod_record(p)
                .unwrap()
                .unwrap();
            keys.push(karpenter_cluster::ObjectKey::Pod(record.pod.key()));
            state.apply(Object::Pod(Box::new(record)));
        }
        let mut pm = crate::pods::PodMetrics::default();
        let lookup = |k: &karpenter_scheduling::model::PodKey| {
            pods.iter()
                .find(|p| p.metadata.name.as_deref() == Some(&k.name))
                .cloned()
        };
        pm.record(&keys, false, lookup, &state, 0, &m);
        let mut im = IndexMetrics::default();
        im.record_nodes(&state, 0, &m);
        let value = |family: &str, resource: &str| {
            lines(&m, &format!("{family}{{"))
                .into_iter()
                .find(|l| l.contains(&format!("resource_type=\"{resource}\"")))
                .and_then(|l| l.rsplit_once(' ').map(|(_, v)| v.to_owned()))
        };
        assert_eq!(
            value("karpenter_nodes_total_pod_limits", "cpu").as_deref(),
            Some("1.75")
        );
        assert_eq!(
            value("karpenter_nodes_total_pod_limits", "pods").as_deref(),
            Some("2.0")
        );
        assert_eq!(
            value("karpenter_nodes_total_daemon_limits", "cpu").as_deref(),
            Some("0.25")
        );
        // Each pod counts as one `pods` in the requests too, as upstream's RequestsForPods.
        assert_eq!(
            value("karpenter_nodes_total_pod_requests", "pods").as_deref(),
            Some("2.0")
        );
        assert_eq!(
            value("karpenter_nodes_total_daemon_requests", "pods").as_deref(),
            Some("1.0")
        );
        // The daemon pod goes: its limits leave both sums.
        state.delete(&keys[1]);
        pm.record(&keys[1..], false, |_| None, &state, 0, &m);
        im.record_nodes(&state, 0, &m);
        assert_eq!(
            value("karpenter_nodes_total_pod_limits", "cpu").as_deref(),
            Some("1.5")
        );
        assert_eq!(value("karpenter_nodes_total_daemon_limits", "cpu"), None);
        assert_eq!(value("karpenter_nodes_total_daemon_requests", "pods"), None);
    }

    #[test]
    fn nodepool_cost_sums_its_claims_offering_prices() {
        use karpenter_cloudprovider::v1::labels as l;
        let m = Metrics::new();
        let mut im = IndexMetrics::default();
        let mut state = ClusterState::new();
        let pool: karpenter_cloudprovider::v1::NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"requirements": [], "nodeClassRef":
                {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}
        }))
        .unwrap();
        state.apply(Object::NodePool(Box::new(pool)));
        let types = karpenter_testing::instance_types::catalogue();
        let (it, o) = (&types[0], &types[0].offerings[0]);
        let claim = |name: &str, pool: &str| {
            let mut c = karpenter_testing::api::node_claim(name);
            let labels = c.metadata.labels.get_or_insert_with(Default::default);
            labels.insert(l::NODEPOOL.into(), pool.into());
            labels.insert(l::INSTANCE_TYPE.into(), it.name.clone());
            labels.insert(l::ZONE.into(), o.zone.clone());
            labels.insert(l::CAPACITY_TYPE.into(), o.capacity_type.clone());
            Object::NodeClaim(Box::new(c))
        };
        state.apply(claim("c1", "default"));
        state.apply(claim("c2", "default"));
        state.apply(claim("c3", "gone"));
        // Not launched yet: no instance-type label, not counted.
        state.apply(Object::NodeClaim(Box::new(
            karpenter_testing::api::node_claim("c4"),
        )));
        let by_pool = BTreeMap::from([("default".to_owned(), types.clone())]);
        im.record_instance_types(&by_pool, 1, &m);
        im.record_nodes(&state, 0, &m);
        im.record_nodes(&state, 10_000, &m);
        let cost = lines(&m, "karpenter_nodepools_cost_total{");
        assert_eq!(cost.len(), 1, "{cost:?}");
        let value: f64 = cost[0].rsplit_once(' ').unwrap().1.parse().unwrap();
        assert!((value - 2.0 * o.price).abs() < 1e-9, "{cost:?}");
        assert_eq!(
            lines(&m, "karpenter_nodepools_cost_tracker_errors_total"),
            [r#"karpenter_nodepools_cost_tracker_errors_total{nodepool="gone"} 1"#],
            "a claim of an unknown pool is counted once"
        );
        state.delete(&karpenter_cluster::ObjectKey::NodePool("default".into()));
        im.record_nodes(&state, 20_000, &m);
        assert!(lines(&m, "karpenter_nodepools_cost_total{").is_empty());
    }
}
