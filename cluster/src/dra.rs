//! Dynamic resource allocation in the index (`--ignore-dra-requests=false`): the
//! ResourceClaims, ResourceClaimTemplates and DeviceClasses the controller watches, and the
//! claim references of pods that have any. A pod's [`device_claims`](Pod::device_claims) are
//! resolved when a snapshot is taken, not when the pod is converted, so a claim, template or
//! class that arrives after its pod (watches are not ordered across kinds) is still seen.
//!
//! Nodes' devices are their instance type's (see [`instance_devices`]): ResourceSlices are
//! not read, so a node Karpenter did not launch offers no devices to the simulation.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::resource::v1 as resource;
use karpenter_scheduling::devices::Device;
use karpenter_scheduling::k8s::{DraObjects, device_claims_from_k8s};
use karpenter_scheduling::model::{self, InstanceType, Pod, PodKey};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The kinds of DRA object the index keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DraKind {
    /// A ResourceClaim (namespaced).
    ResourceClaim,
    /// A ResourceClaimTemplate (namespaced).
    ResourceClaimTemplate,
    /// A DeviceClass (cluster-scoped: its namespace is empty).
    DeviceClass,
    /// A pod's `spec.resourceClaims` and `status.resourceClaimStatuses`, keyed like the pod.
    PodClaims,
}

/// One DRA object for [`ClusterState::apply`](crate::ClusterState::apply).
#[derive(Debug, Clone)]
#[allow(
    clippy::large_enum_variant,
    reason = "it travels boxed in `Object::Dra` and is unpacked into maps"
)]
pub enum DraObject {
    /// A ResourceClaim.
    ResourceClaim(resource::ResourceClaim),
    /// A ResourceClaimTemplate.
    ResourceClaimTemplate(resource::ResourceClaimTemplate),
    /// A DeviceClass.
    DeviceClass(resource::DeviceClass),
    /// A pod's claim references, as [`pod_claims`] strips them.
    PodClaims(core::Pod),
}

impl DraObject {
    /// The object's kind, namespace (empty for a DeviceClass) and name.
    pub fn key(&self) -> (DraKind, String, String) {
        let (kind, meta) = match self {
            Self::ResourceClaim(o) => (DraKind::ResourceClaim, &o.metadata),
            Self::ResourceClaimTemplate(o) => (DraKind::ResourceClaimTemplate, &o.metadata),
            Self::DeviceClass(o) => (DraKind::DeviceClass, &o.metadata),
            Self::PodClaims(o) => (DraKind::PodClaims, &o.metadata),
        };
        (
            kind,
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        )
    }
}

/// What a pod's claims are resolved from: `None` when the pod has no `spec.resourceClaims`,
/// else a copy of the pod holding only its namespace, name, claims and claim statuses.
pub fn pod_claims(pod: &core::Pod) -> Option<core::Pod> {
    let claims = pod.spec.as_ref()?.resource_claims.clone()?;
    if claims.is_empty() {
        return None;
    }
    Some(core::Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            ..Default::default()
        },
        spec: Some(core::PodSpec {
            resource_claims: Some(claims),
            ..Default::default()
        }),
        status: Some(core::PodStatus {
            resource_claim_statuses: pod
                .status
                .as_ref()
                .and_then(|s| s.resource_claim_statuses.clone()),
            ..Default::default()
        }),
    })
}

/// The DRA objects of the cluster and the pods that refer to them. Off (the default), it
/// holds nothing and changes no pod.
#[derive(Debug, Clone, Default)]
pub struct Dra {
    enabled: bool,
    claims: BTreeMap<(String, String), resource::ResourceClaim>,
    templates: BTreeMap<(String, String), resource::ResourceClaimTemplate>,
    classes: BTreeMap<String, resource::DeviceClass>,
    pods: BTreeMap<PodKey, core::Pod>,
}

impl Dra {
    /// Turns claim simulation on or off (`--ignore-dra-requests=false` turns it on).
    pub fn set_enabled(&mut self, enabled: bool) {
        self.enabled = enabled;
    }

    /// Whether pods' claims are simulated.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Records (or replaces) an object; ignored while off.
    pub fn insert(&mut self, object: DraObject) {
        if !self.enabled {
            return;
        }
        let (_, namespace, name) = object.key();
        match object {
            DraObject::ResourceClaim(o) => {
                self.claims.insert((namespace, name), o);
            }
            DraObject::ResourceClaimTemplate(o) => {
                self.templates.insert((namespace, name), o);
            }
            DraObject::DeviceClass(o) => {
                self.classes.insert(name, o);
            }
            DraObject::PodClaims(o) => {
                self.pods.insert(PodKey::new(namespace, name), o);
            }
        }
    }

    /// Forgets an object; returns whether it was known.
    pub fn remove(&mut self, kind: DraKind, namespace: &str, name: &str) -> bool {
        let key = (namespace.to_owned(), name.to_owned());
        match kind {
            DraKind::ResourceClaim => self.claims.remove(&key).is_some(),
            DraKind::ResourceClaimTemplate => self.templates.remove(&key).is_some(),
            DraKind::DeviceClass => self.classes.remove(name).is_some(),
            DraKind::PodClaims => self.pods.remove(&PodKey::new(key.0, key.1)).is_some(),
        }
    }

    /// Forgets every object; whether claims are simulated stays.
    pub fn clear_objects(&mut self) {
        *self = Self {
            enabled: self.enabled,
            ..Self::default()
        };
    }

    /// Sets each pod's [`device_claims`](Pod::device_claims) from its recorded claim
    /// references and the objects they name. A pod without recorded claims is untouched.
    pub fn apply<'p>(&self, pods: impl IntoIterator<Item = &'p mut Pod>) {
        if self.pods.is_empty() {
            return;
        }
        for pod in pods {
            if let Some(k8s) = self.pods.get(&pod.key()) {
                pod.device_claims = device_claims_from_k8s(k8s, self);
            }
        }
    }
}

impl DraObjects for Dra {
    fn resource_claim(&self, namespace: &str, name: &str) -> Option<&resource::ResourceClaim> {
        self.claims.get(&(namespace.to_owned(), name.to_owned()))
    }

    fn resource_claim_template(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<&resource::ResourceClaimTemplate> {
        self.templates.get(&(namespace.to_owned(), name.to_owned()))
    }

    fn device_class(&self, name: &str) -> Option<&resource::DeviceClass> {
        self.classes.get(name)
    }
}

/// The devices `node` offers the simulation: those its instance type publishes (found by
/// its NodePool and instance-type label in `instance_types`), with the node's name as their
/// pool as a driver publishing one ResourceSlice per node names it. None when the type is
/// unknown.
pub fn instance_devices(
    node: &model::Node,
    instance_types: &BTreeMap<String, Vec<Arc<InstanceType>>>,
) -> Vec<Device> {
    let (Some(pool), Some(name)) = (node.node_pool.as_deref(), node.instance_type()) else {
        return Vec::new();
    };
    instance_types
        .get(pool)
        .into_iter()
        .flatten()
        .find(|it| it.name == name)
        .map(|it| {
            it.devices
                .iter()
                .map(|d| Device {
                    pool: node.name.clone(),
                    ..d.clone()
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use crate::feed::{ApiObjects, Changes, Feed, Lookup};
    use crate::{ClusterState, ObjectKey, Scope};
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate};
    use karpenter_cloudprovider::NodeClaim;
    use karpenter_scheduling::devices::DeviceCount;
    use karpenter_scheduling::model::PodKey;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    struct NoLookup;
    impl Lookup for NoLookup {
        fn node(&self, _: &str) -> Option<Arc<Node>> {
            None
        }
        fn node_claim(&self, _: &str) -> Option<Arc<NodeClaim>> {
            None
        }
    }

    fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Arc<T> {
        Arc::new(serde_json::from_value(v).unwrap())
    }

    fn gpu_pod() -> Arc<Pod> {
        from_json(serde_json::json!({
            "metadata": {"name": "train", "namespace": "ml", "uid": "u", "resourceVersion": "1"},
            "spec": {
                "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
            },
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        }))
    }

    fn template() -> Arc<ResourceClaimTemplate> {
        from_json(serde_json::json!({
            "metadata": {"name": "one-gpu", "namespace": "ml", "resourceVersion": "2"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}
            ]}}}
        }))
    }

    fn class() -> Arc<DeviceClass> {
        from_json(serde_json::json!({
            "metadata": {"name": "gpu", "resourceVersion": "3"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.fake.karpenter.sh\""}}]}
        }))
    }

    fn claims_of_pending(state: &ClusterState) -> Vec<karpenter_scheduling::devices::DeviceClaim> {
        let snapshot = state.snapshot(0, Scope::Provisioner);
        assert_eq!(snapshot.pending_pods.len(), 1);
        snapshot.pending_pods[0].device_claims.clone()
    }

    /// The index fed the GPU pod, its template and the class, with DRA simulated or not;
    /// and how many objects the sync applied.
    fn fed(dra: bool) -> (ClusterState, Feed, usize) {
        let pods = [gpu_pod()];
        let templates = [template()];
        let classes = [class()];
        let objects = ApiObjects {
            pods: &pods,
            resource_claim_templates: &templates,
            device_classes: &classes,
            ..ApiObjects::default()
        };
        let mut state = ClusterState::new();
        state.set_dra_enabled(dra);
        let mut feed = Feed::default();
        let changes = feed.sync(&mut state, &objects, &BTreeMap::new(), 0).changes;
        (state, feed, changes)
    }

    #[test]
    fn a_pods_claims_are_resolved_from_the_fed_objects() {
        let (mut state, mut feed, _) = fed(true);
        let claims = claims_of_pending(&state);
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].key, "ml/train/gpu");
        assert_eq!(claims[0].unsupported, None);
        let request = &claims[0].requests[0];
        assert_eq!(request.device_class, "gpu");
        assert_eq!(request.count, DeviceCount::ExactCount(2));
        assert_eq!(
            request.selectors,
            ["device.driver == \"gpu.fake.karpenter.sh\""]
        );

        // The pod leaves: its claims are forgotten with it.
        let deleted = [ObjectKey::Pod(PodKey::new("ml", "train"))];
        let changes = Changes {
            deleted: &deleted,
            ..Changes::default()
        };
        feed.sync_changes(&mut state, &changes, &NoLookup, &BTreeMap::new());
        assert!(state.dra().pods.is_empty());
    }

    #[test]
    fn a_node_offers_its_instance_types_devices_in_a_pool_of_its_own() {
        use karpenter_scheduling::devices::Device;
        use karpenter_scheduling::model::Node;
        use karpenter_testing::instance_types::InstanceTypeBuilder;
        let gpu = Device {
            driver: "gpu.fake.karpenter.sh".into(),
            name: "gpu-0".into(),
            ..Device::default()
        };
        let types = BTreeMap::from([(
            "default".to_owned(),
            vec![{
                let mut it = InstanceTypeBuilder::new("g1", 4, 16).on_demand(1.0).build();
                Arc::make_mut(&mut it).devices = vec![gpu];
                it
            }],
        )]);
        let mut node = Node {
            name: "n1".into(),
            node_pool: Some("default".into()),
            ..Node::default()
        };
        node.labels.insert(
            karpenter_scheduling::labels::INSTANCE_TYPE.into(),
            "g1".into(),
        );
        let devices = super::instance_devices(&node, &types);
        assert_eq!(devices.len(), 1);
        assert_eq!(
            (devices[0].pool.as_str(), devices[0].name.as_str()),
            ("n1", "gpu-0")
        );
        node.labels.insert(
            karpenter_scheduling::labels::INSTANCE_TYPE.into(),
            "m5.large".into(),
        );
        assert!(super::instance_devices(&node, &types).is_empty());
    }

    #[test]
    fn a_template_seen_after_its_pod_is_still_used() {
        let pods = [gpu_pod()];
        let mut state = ClusterState::new();
        state.set_dra_enabled(true);
        let mut feed = Feed::default();
        let objects = ApiObjects {
            pods: &pods,
            ..ApiObjects::default()
        };
        feed.sync(&mut state, &objects, &BTreeMap::new(), 0);
        let claims = claims_of_pending(&state);
        assert_eq!(
            claims[0].unsupported.as_deref(),
            Some("the ResourceClaimTemplate ml/one-gpu does not exist")
        );
        let templates = [template()];
        let classes = [class()];
        let changes = Changes {
            present: ApiObjects {
                resource_claim_templates: &templates,
                device_classes: &classes,
                ..ApiObjects::default()
            },
            deleted: &[],
        };
        feed.sync_changes(&mut state, &changes, &NoLookup, &BTreeMap::new());
        let claims = claims_of_pending(&state);
        assert_eq!(claims[0].unsupported, None);
        assert_eq!(claims[0].requests.len(), 1);
    }

    #[test]
    fn ignoring_dra_requests_leaves_pods_and_the_index_untouched() {
        let (state, _, changes) = fed(false);
        assert_eq!(changes, 1, "only the pod is indexed");
        assert!(claims_of_pending(&state).is_empty());
    }
}
