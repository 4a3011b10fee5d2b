//! What Karpenter's two capacity-reservation controllers do, as decisions over the cluster's
//! NodeClaims and Nodes and EC2's view of the instances (the operator applies them):
//!
//! - **capacity type**: when a reservation ends (an on-demand capacity reservation expires or
//!   is cancelled), its instances keep running as on-demand instances. A NodeClaim still
//!   labelled `reserved` whose instance EC2 now reports on-demand is relabelled
//!   `on-demand` and loses the reservation labels, and so is each registered Node of it;
//! - **expiration**: a capacity block ends with its instances. A NodeClaim launched into a
//!   block that is `expiring` (within 40 minutes of its end) is deleted, so its pods are
//!   drained onto other capacity before EC2 reclaims the instance.

use crate::instance::Ec2Instance;
use k8s_openapi::api::core::v1::Node;
use karpenter_cloudprovider::v1::NodeClaim;
use karpenter_scheduling::labels;
use std::collections::{BTreeMap, BTreeSet};

/// The changes one pass makes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReservationSync {
    /// NodeClaims to relabel on-demand ([`relabel_patch`]).
    pub relabel_claims: Vec<String>,
    /// Nodes to relabel on-demand ([`relabel_patch`]).
    pub relabel_nodes: Vec<String>,
    /// NodeClaims to delete, with the expiring capacity block each is in.
    pub delete_claims: Vec<(String, String)>,
}

impl ReservationSync {
    /// The objects to relabel with [`ReservationSync::patch`]: `(is a Node, name)`, the
    /// NodeClaims first.
    pub fn relabel(&self) -> impl Iterator<Item = (bool, &str)> {
        let claims = self.relabel_claims.iter().map(|n| (false, n.as_str()));
        claims.chain(self.relabel_nodes.iter().map(|n| (true, n.as_str())))
    }

    /// The merge patch that makes a reserved NodeClaim or Node on-demand.
    pub fn patch(&self) -> serde_json::Value {
        relabel_patch()
    }
}

/// The reservation ids the claims were launched into (the expiration check lists these).
pub fn reservation_ids<'a>(claims: impl IntoIterator<Item = &'a NodeClaim>) -> BTreeSet<String> {
    claims
        .into_iter()
        .filter_map(|c| c.label(labels::AWS_CAPACITY_RESERVATION_ID))
        .map(str::to_owned)
        .collect()
}

/// The merge patch that makes a reserved NodeClaim or Node on-demand.
pub fn relabel_patch() -> serde_json::Value {
    let mut labels_patch = serde_json::Map::new();
    labels_patch.insert(
        labels::CAPACITY_TYPE.into(),
        labels::CAPACITY_TYPE_ON_DEMAND.into(),
    );
    for key in [
        labels::AWS_CAPACITY_RESERVATION_ID,
        labels::AWS_CAPACITY_RESERVATION_TYPE,
        labels::AWS_CAPACITY_RESERVATION_INTERRUPTIBLE,
    ] {
        labels_patch.insert(key.into(), serde_json::Value::Null);
    }
    serde_json::json!({ "metadata": { "labels": labels_patch } })
}

fn label<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

/// The pass over `claims` and `nodes`, given the provider's `instances` and the
/// `expiring` reservation ids. Claims and nodes being deleted are left alone; only claims
/// whose instance EC2 lists can be relabelled (an instance it no longer lists says nothing
/// about its capacity type).
pub fn plan<'a>(
    claims: impl IntoIterator<Item = &'a NodeClaim>,
    nodes: impl IntoIterator<Item = &'a Node>,
    instances: &[Ec2Instance],
    expiring: &BTreeSet<String>,
) -> ReservationSync {
    let capacity_type: BTreeMap<String, &str> = instances
        .iter()
        .map(|i| (i.provider_id(), i.capacity_type.as_str()))
        .collect();
    let mut nodes_of: BTreeMap<&str, Vec<&Node>> = BTreeMap::new();
    for n in nodes {
        if let Some(pid) = n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
            nodes_of.entry(pid).or_default().push(n);
        }
    }
    let mut out = ReservationSync::default();
    for c in claims {
        if c.is_deleting() {
            continue;
        }
        if let Some(id) = c.label(labels::AWS_CAPACITY_RESERVATION_ID)
            && expiring.contains(id)
        {
            out.delete_claims.push((c.name().to_owned(), id.to_owned()));
            continue;
        }
        if capacity_type.get(c.provider_id()) != Some(&labels::CAPACITY_TYPE_ON_DEMAND) {
            continue;
        }
        if c.label(labels::CAPACITY_TYPE) == Some(labels::CAPACITY_TYPE_RESERVED) {
            out.relabel_claims.push(c.name().to_owned());
        }
        for n in nodes_of.get(c.provider_id()).into_iter().flatten() {
            let meta = &n.metadata;
            if meta.deletion_timestamp.is_none()
                && label(meta, labels::NODE_REGISTERED) == Some("true")
                && label(meta, labels::CAPACITY_TYPE) == Some(labels::CAPACITY_TYPE_RESERVED)
            {
                out.relabel_nodes
                    .push(meta.name.clone().unwrap_or_default());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::ReservationDetails;
    use k8s_openapi::api::core::v1::NodeSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn instance(id: &str, capacity_type: &str) -> Ec2Instance {
        Ec2Instance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            subnet_id: String::new(),
            image_id: String::new(),
            security_group_ids: Vec::new(),
            capacity_type: capacity_type.into(),
            capacity_reservation: (capacity_type == "reserved").then(|| ReservationDetails {
                id: "cr-1".into(),
                reservation_type: "default".into(),
                interruptible: false,
            }),
            state: "running".into(),
            launch_time: None,
            tags: BTreeMap::new(),
        }
    }

    fn reserved_labels(id: &str) -> BTreeMap<String, String> {
        [
            (labels::CAPACITY_TYPE, "reserved"),
            (labels::AWS_CAPACITY_RESERVATION_ID, id),
            (labels::AWS_CAPACITY_RESERVATION_TYPE, "default"),
            (labels::NODE_REGISTERED, "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    fn claim(name: &str, instance_id: &str, id: &str) -> NodeClaim {
        let mut c: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": format!("aws:///us-east-1a/{instance_id}")}
        }))
        .expect("claim");
        c.metadata.labels = Some(reserved_labels(id));
        c
    }

    fn node(name: &str, instance_id: &str, id: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(reserved_labels(id)),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(format!("aws:///us-east-1a/{instance_id}")),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn ended_reservations_make_their_claims_and_nodes_on_demand() {
        let claims = [claim("a", "i-a", "cr-1"), claim("b", "i-b", "cr-1")];
        let mut deleting = node("node-b2", "i-b", "cr-1");
        deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let nodes = [
            node("node-a", "i-a", "cr-1"),
            node("node-b", "i-b", "cr-1"),
            deleting,
        ];
        // i-a still runs in its reservation; i-b's reservation ended.
        let instances = [instance("i-a", "reserved"), instance("i-b", "on-demand")];
        let sync = plan(&claims, &nodes, &instances, &BTreeSet::new());
        assert_eq!(sync.relabel_claims, ["b"]);
        assert_eq!(sync.relabel_nodes, ["node-b"]);
        assert!(sync.delete_claims.is_empty());
        let patch = relabel_patch();
        let l = &patch["metadata"]["labels"];
        assert_eq!(l[labels::CAPACITY_TYPE], "on-demand");
        assert!(l[labels::AWS_CAPACITY_RESERVATION_ID].is_null());
    }

    #[test]
    fn claims_in_expiring_capacity_blocks_are_deleted() {
        let mut gone = claim("c", "i-c", "cr-block");
        gone.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let claims = [
            claim("a", "i-a", "cr-block"),
            claim("b", "i-b", "cr-1"),
            gone,
        ];
        assert_eq!(
            reservation_ids(&claims),
            BTreeSet::from(["cr-1".to_owned(), "cr-block".to_owned()])
        );
        let instances = [instance("i-a", "reserved"), instance("i-b", "reserved")];
        let sync = plan(
            &claims,
            &[],
            &instances,
            &BTreeSet::from(["cr-block".to_owned()]),
        );
        assert_eq!(
            sync.delete_claims,
            [("a".to_owned(), "cr-block".to_owned())]
        );
        assert!(sync.relabel_claims.is_empty());
    }
}
