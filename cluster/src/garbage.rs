//! Garbage collection: NodeClaims and instances that lost each other.
//!
//! From one listing of the provider's instances, as upstream's two collectors decide:
//! - a NodeClaim that registered, is not being deleted, and whose instance the provider no
//!   longer lists is deleted, unless its Node still reports `Ready=True` (the kubelet is
//!   alive, whatever the cloud API says). Claims not yet registered are left to the
//!   registration timeout, so a slow or eventually consistent listing cannot delete them;
//! - an instance no NodeClaim names, older than [`MIN_INSTANCE_AGE_MS`] (its claim may not
//!   carry the provider ID yet), is terminated.
//!
//! Apart from that, a Node left deleting with Karpenter's termination finalizer after its
//! NodeClaim was removed out of band has nobody to finish its termination: its finalizer is
//! released ([`orphaned_node_finalizers`]).

use crate::ClusterState;
use k8s_openapi::api::core::v1::Node;
use karpenter_cloudprovider::NodeClaim;
use karpenter_cloudprovider::v1::{ConditionType, labels};
use karpenter_scheduling::model::Millis;
use std::collections::BTreeSet;

/// How often the provider's instances are listed for garbage collection.
pub const PERIOD_MS: Millis = 120_000;
/// Instances younger than this are never collected.
pub const MIN_INSTANCE_AGE_MS: Millis = 30_000;

/// One instance as the provider lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Its provider ID.
    pub provider_id: String,
    /// When it was created (Unix milliseconds); `None` when the provider does not say.
    pub created_at: Option<Millis>,
    /// The provider reports it shutting down or terminated.
    pub terminating: bool,
}

impl Instance {
    /// The provider's listing entry `instance` (a NodeClaim as the provider returns it).
    pub fn listed(instance: &NodeClaim) -> Self {
        Self {
            provider_id: instance.provider_id().to_owned(),
            created_at: instance
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_millisecond()),
            terminating: instance.is_deleting(),
        }
    }
}

/// What to collect.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Collect {
    /// NodeClaims whose instance is gone, by name.
    pub node_claims: Vec<String>,
    /// Provider IDs of instances no NodeClaim names.
    pub instances: Vec<String>,
}

fn node_ready(index: &ClusterState, claim: &str) -> bool {
    index.joined_node(claim).is_some_and(|r| {
        r.kubelet
            .conditions()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// Decides collection at `now` from `instances`, one listing of the provider.
pub fn decide(index: &ClusterState, instances: &[Instance], now: Millis) -> Collect {
    let listed: BTreeSet<&str> = instances
        .iter()
        .filter(|i| !i.terminating)
        .map(|i| i.provider_id.as_str())
        .collect();
    let claimed: BTreeSet<&str> = index
        .node_claims()
        .values()
        .map(|c| c.provider_id())
        .filter(|p| !p.is_empty())
        .collect();
    let node_claims = index
        .node_claims()
        .values()
        .filter(|c| {
            c.is(ConditionType::Registered)
                && !c.is_deleting()
                && !c.provider_id().is_empty()
                && !listed.contains(c.provider_id())
                && !node_ready(index, c.name())
        })
        .map(|c| c.name().to_owned())
        .collect();
    let instances = instances
        .iter()
        .filter(|i| {
            !i.terminating
                && !claimed.contains(i.provider_id.as_str())
                && i.created_at.is_some_and(|t| now - t >= MIN_INSTANCE_AGE_MS)
        })
        .map(|i| i.provider_id.clone())
        .collect();
    Collect {
        node_claims,
        instances,
    }
}

/// A Node's finalizers to write so that its deletion can finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalizerRelease {
    /// The Node's name.
    pub node: String,
    /// The resourceVersion it was read at, for an optimistic write.
    pub resource_version: Option<String>,
    /// Its finalizers without Karpenter's termination finalizer, in their order.
    pub finalizers: Vec<String>,
}

/// The Nodes being deleted that carry Karpenter's termination finalizer while no NodeClaim
/// among `claims` has their provider ID (the claim was deleted out of band, so no
/// termination will release them), with the finalizers to leave on each.
pub fn orphaned_node_finalizers<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    claims: impl IntoIterator<Item = &'a NodeClaim>,
) -> Vec<FinalizerRelease> {
    let known: BTreeSet<&str> = claims
        .into_iter()
        .map(NodeClaim::provider_id)
        .filter(|p| !p.is_empty())
        .collect();
    nodes
        .into_iter()
        .filter(|n| n.metadata.deletion_timestamp.is_some())
        .filter(|n| !known.contains(crate::node_provider_id(n)))
        .filter_map(|n| {
            let finalizers = n.metadata.finalizers.as_deref().unwrap_or_default();
            finalizers
                .iter()
                .any(|f| f == labels::TERMINATION_FINALIZER)
                .then(|| FinalizerRelease {
                    node: n.metadata.name.clone().unwrap_or_default(),
                    resource_version: n.metadata.resource_version.clone(),
                    finalizers: finalizers
                        .iter()
                        .filter(|f| *f != labels::TERMINATION_FINALIZER)
                        .cloned()
                        .collect(),
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Kubelet, NodeCondition, NodeRecord, Object};
    use karpenter_cloudprovider::NodeClaim;
    use karpenter_cloudprovider::v1::StatusConditions;

    fn claim(name: &str, registered: bool) -> NodeClaim {
        let mut c = karpenter_testing::api::node_claim(name);
        c.status.get_or_insert_with(Default::default).provider_id = format!("fake://z/{name}");
        c.set_true("Launched", crate::provisioner::time(0));
        if registered {
            c.set_true("Registered", crate::provisioner::time(0));
        }
        c
    }

    fn instance(name: &str, created_at: Millis) -> Instance {
        Instance {
            provider_id: format!("fake://z/{name}"),
            created_at: Some(created_at),
            terminating: false,
        }
    }

    fn node(claim: &str, ready: &str) -> NodeRecord {
        NodeRecord {
            node: karpenter_scheduling::model::Node {
                name: format!("ip-{claim}"),
                ..Default::default()
            },
            node_claim: Some(claim.into()),
            startup_taints: Vec::new(),
            deleting: false,
            kubelet: Kubelet::Joined {
                waiting_for: None,
                conditions: vec![NodeCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    reason: String::new(),
                    since: 0,
                }],
            },
        }
    }

    #[test]
    fn a_registered_claim_whose_instance_is_gone_is_collected_unless_its_node_is_ready() {
        let mut s = ClusterState::new();
        for (name, registered) in [("listed", true), ("gone", true), ("young", false)] {
            s.apply(Object::NodeClaim(Box::new(claim(name, registered))));
        }
        s.apply(Object::Node(Box::new(node("gone", "Unknown"))));
        let listed = [instance("listed", 0)];
        assert_eq!(decide(&s, &listed, 60_000).node_claims, ["gone"]);
        // The kubelet still reports Ready: the cloud listing is not trusted over it.
        s.apply(Object::Node(Box::new(node("gone", "True"))));
        assert!(decide(&s, &listed, 60_000).node_claims.is_empty());
        // A listing that reports the instance terminating does not keep its claim.
        let mut s2 = ClusterState::new();
        s2.apply(Object::NodeClaim(Box::new(claim("gone", true))));
        let terminating = [Instance {
            terminating: true,
            ..instance("gone", 0)
        }];
        assert_eq!(decide(&s2, &terminating, 60_000).node_claims, ["gone"]);
    }

    #[test]
    fn an_instance_no_claim_names_is_collected_once_old_enough() {
        let mut s = ClusterState::new();
        s.apply(Object::NodeClaim(Box::new(claim("owned", true))));
        let listed = [
            instance("owned", 0),
            instance("orphan", 0),
            instance("new", 50_000),
        ];
        assert_eq!(
            decide(&s, &listed, 60_000).instances,
            ["fake://z/orphan".to_owned()]
        );
        assert_eq!(decide(&s, &listed, 80_000).instances.len(), 2);
    }

    #[test]
    fn a_deleting_node_without_a_claim_loses_only_our_finalizer() {
        let node = |name: &str, deleting: bool, finalizers: &[&str]| {
            let mut n = karpenter_testing::api::registering_node(name, &format!("fake://z/{name}"));
            n.metadata.resource_version = Some("7".into());
            n.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
            n.metadata.deletion_timestamp = deleting.then(|| crate::provisioner::time(0));
            n
        };
        let ours = labels::TERMINATION_FINALIZER;
        let nodes = [
            node("orphan", true, &["example.com/keep", ours]),
            node("claimed", true, &[ours]),
            node("alive", false, &[ours]),
            node("foreign", true, &["example.com/keep"]),
        ];
        let claims = [claim("claimed", true)];
        assert_eq!(
            orphaned_node_finalizers(&nodes, &claims),
            [FinalizerRelease {
                node: "orphan".into(),
                resource_version: Some("7".into()),
                finalizers: vec!["example.com/keep".into()],
            }]
        );
    }

    #[test]
    fn a_listed_instance_keeps_its_creation_time_and_deletion() {
        let mut c = claim("i-1", true);
        c.metadata.creation_timestamp = Some(crate::provisioner::time(5_000));
        let i = Instance::listed(&c);
        assert_eq!((i.created_at, i.terminating), (Some(5_000), false));
        assert_eq!(i.provider_id, "fake://z/i-1");
    }
}
