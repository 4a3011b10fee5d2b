//! NodeClasses as the core sees them: a provider that has NodeClass kinds (the AWS
//! provider's `EC2NodeClass`) reports each object's generation, deletion and `Ready`
//! condition; the index answers, for a NodePool, what upstream's readiness controller writes
//! into its `NodeClassReady` condition, and provisioning uses only pools whose NodeClass is
//! ready (upstream's provisioner skips NodePools that are not `Ready`).

use crate::ClusterState;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_cloudprovider::NodePool;
use karpenter_cloudprovider::v1::{CONDITION_READY, ConditionStatus, StatusConditions};
use std::collections::{BTreeMap, BTreeSet};

/// A NodeClass object's identity: API group, kind and name.
pub type NodeClassKey = (String, String, String);

/// What the core needs of one NodeClass object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeClassRecord {
    /// `metadata.generation` (NodePools reset `NodeRegistrationHealthy` when it changes).
    pub generation: i64,
    /// Whether it has a deletion timestamp.
    pub deleting: bool,
    /// Its `Ready` condition: status, reason and message; `None` before the provider wrote
    /// one.
    pub ready: Option<(ConditionStatus, String, String)>,
}

/// Every NodeClass object of the kinds a provider supports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeClasses {
    /// The (group, kind) pairs the provider supports; a NodePool referring to another kind
    /// is not managed by it.
    pub kinds: BTreeSet<(String, String)>,
    /// The objects, by group, kind and name.
    pub objects: BTreeMap<NodeClassKey, NodeClassRecord>,
}

/// What a NodePool's NodeClass says about the pool, as upstream's NodePool readiness
/// controller reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeClassReadiness {
    /// The provider has no NodeClass kinds (the fake provider): nothing to wait for.
    NoNodeClasses,
    /// The pool refers to a kind the provider does not support.
    Unsupported,
    /// No such object.
    NotFound,
    /// The object is being deleted.
    Terminating,
    /// The object's `Ready` condition is absent or `Unknown`.
    Unknown {
        /// The object's generation.
        generation: i64,
    },
    /// The object's `Ready` condition is `False`.
    NotReady {
        /// Its reason.
        reason: String,
        /// Its message.
        message: String,
        /// The object's generation.
        generation: i64,
    },
    /// The object is `Ready`.
    Ready {
        /// The object's generation.
        generation: i64,
    },
}

impl NodeClassReadiness {
    /// Whether the pool may launch nodes (its `NodeClassReady` is, or would be, `True`).
    pub fn usable(&self) -> bool {
        matches!(self, Self::NoNodeClasses | Self::Ready { .. })
    }

    /// The NodeClass generation, when the object exists.
    pub fn generation(&self) -> Option<i64> {
        match self {
            Self::Unknown { generation }
            | Self::NotReady { generation, .. }
            | Self::Ready { generation } => Some(*generation),
            _ => None,
        }
    }

    /// The `NodeClassReady` condition upstream writes: status, reason and message; `None`
    /// for a pool upstream's readiness controller leaves alone (an unsupported kind).
    pub fn condition(&self) -> Option<(ConditionStatus, &str, &str)> {
        Some(match self {
            Self::NoNodeClasses | Self::Ready { .. } => {
                (ConditionStatus::True, "NodeClassReady", "")
            }
            Self::Unsupported => return None,
            Self::NotFound => (
                ConditionStatus::False,
                "NodeClassNotFound",
                "NodeClass not found on cluster",
            ),
            Self::Terminating => (
                ConditionStatus::False,
                "NodeClassTerminating",
                "NodeClass is Terminating",
            ),
            Self::Unknown { .. } => (
                ConditionStatus::False,
                "NodeClassReadinessUnknown",
                "Node Class Readiness Unknown",
            ),
            Self::NotReady {
                reason, message, ..
            } => (ConditionStatus::False, reason.as_str(), message.as_str()),
        })
    }
}

impl NodeClassRecord {
    /// The record of a NodeClass object with `metadata` and status conditions `object`.
    pub fn of<T: StatusConditions>(metadata: &ObjectMeta, object: &T) -> Self {
        Self {
            generation: metadata.generation.unwrap_or_default(),
            deleting: metadata.deletion_timestamp.is_some(),
            ready: object
                .condition(CONDITION_READY)
                .map(|c| (c.status, c.reason.clone(), c.message.clone())),
        }
    }
}

impl NodeClasses {
    /// The NodeClasses of a provider with the one kind `group`/`kind`: `objects` are each
    /// one's name, metadata and conditions.
    pub fn of_kind<'a, T: StatusConditions + 'a>(
        group: &str,
        kind: &str,
        objects: impl IntoIterator<Item = (&'a ObjectMeta, &'a T)>,
    ) -> Self {
        let key = |name: &str| (group.to_owned(), kind.to_owned(), name.to_owned());
        Self {
            kinds: [(group.to_owned(), kind.to_owned())].into(),
            objects: objects
                .into_iter()
                .map(|(meta, o)| {
                    let name = meta.name.as_deref().unwrap_or_default();
                    (key(name), NodeClassRecord::of(meta, o))
                })
                .collect(),
        }
    }
}

impl ClusterState {
    /// Replaces the provider's NodeClasses. A provider without NodeClass kinds never calls
    /// this. When they changed, pools count as changed, so their status and what
    /// provisioning may use are decided again.
    pub fn set_node_classes(&mut self, classes: NodeClasses) {
        if self.node_classes.as_ref() == Some(&classes) {
            return;
        }
        self.generation += 1;
        self.pools_changed_at = self.generation;
        self.node_classes = Some(classes);
    }

    /// What `pool`'s NodeClass says about it.
    pub fn node_class_readiness(&self, pool: &NodePool) -> NodeClassReadiness {
        let Some(classes) = &self.node_classes else {
            return NodeClassReadiness::NoNodeClasses;
        };
        let r = &pool.spec.template.spec.node_class_ref;
        if !classes.kinds.contains(&(r.group.clone(), r.kind.clone())) {
            return NodeClassReadiness::Unsupported;
        }
        let Some(object) = classes
            .objects
            .get(&(r.group.clone(), r.kind.clone(), r.name.clone()))
        else {
            return NodeClassReadiness::NotFound;
        };
        let generation = object.generation;
        if object.deleting {
            return NodeClassReadiness::Terminating;
        }
        match &object.ready {
            Some((ConditionStatus::True, _, _)) => NodeClassReadiness::Ready { generation },
            Some((ConditionStatus::False, reason, message)) => NodeClassReadiness::NotReady {
                reason: reason.clone(),
                message: message.clone(),
                generation,
            },
            _ => NodeClassReadiness::Unknown { generation },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Object;

    fn pool(kind: &str, class: &str) -> NodePool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": kind, "name": class},
                "requirements": []}}}
        }))
        .unwrap()
    }

    fn classes(ready: Option<ConditionStatus>, deleting: bool) -> NodeClasses {
        let key = |n: &str| {
            (
                "karpenter.k8s.aws".to_owned(),
                "EC2NodeClass".to_owned(),
                n.to_owned(),
            )
        };
        NodeClasses {
            kinds: [("karpenter.k8s.aws".to_owned(), "EC2NodeClass".to_owned())].into(),
            objects: [(
                key("default"),
                NodeClassRecord {
                    generation: 3,
                    deleting,
                    ready: ready.map(|s| (s, "SubnetsNotFound".into(), "no subnets".into())),
                },
            )]
            .into(),
        }
    }

    #[test]
    fn each_state_of_the_node_class_gives_upstreams_condition() {
        let mut state = ClusterState::new();
        let p = pool("EC2NodeClass", "default");
        assert_eq!(
            state.node_class_readiness(&p),
            NodeClassReadiness::NoNodeClasses
        );
        let cases = [
            (
                Some(ConditionStatus::True),
                false,
                ConditionStatus::True,
                "NodeClassReady",
            ),
            (
                Some(ConditionStatus::False),
                false,
                ConditionStatus::False,
                "SubnetsNotFound",
            ),
            (
                Some(ConditionStatus::Unknown),
                false,
                ConditionStatus::False,
                "NodeClassReadinessUnknown",
            ),
            (
                None,
                false,
                ConditionStatus::False,
                "NodeClassReadinessUnknown",
            ),
            (
                Some(ConditionStatus::True),
                true,
                ConditionStatus::False,
                "NodeClassTerminating",
            ),
        ];
        for (ready, deleting, status, reason) in cases {
            state.set_node_classes(classes(ready, deleting));
            let readiness = state.node_class_readiness(&p);
            let (s, r, _) = readiness.condition().unwrap();
            assert_eq!((s, r), (status, reason), "{ready:?} deleting={deleting}");
            assert_eq!(readiness.usable(), status == ConditionStatus::True);
        }
        let missing = pool("EC2NodeClass", "gpu");
        assert_eq!(
            state.node_class_readiness(&missing),
            NodeClassReadiness::NotFound
        );
        let other = pool("KWOKNodeClass", "default");
        assert_eq!(
            state.node_class_readiness(&other),
            NodeClassReadiness::Unsupported
        );
        assert_eq!(NodeClassReadiness::Unsupported.condition(), None);
    }

    #[test]
    fn a_pool_whose_node_class_is_not_ready_takes_no_pods() {
        let mut state = ClusterState::new();
        state.apply(Object::NodePool(Box::new(pool("EC2NodeClass", "default"))));
        assert_eq!(state.model_pools().len(), 1, "no node classes: usable");
        state.set_node_classes(classes(Some(ConditionStatus::False), false));
        assert!(state.model_pools().is_empty());
        let before = state.generation();
        state.set_node_classes(classes(Some(ConditionStatus::True), false));
        assert!(state.generation() > before, "a change is a pool change");
        assert_eq!(state.model_pools().len(), 1);
    }
}
