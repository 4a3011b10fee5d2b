//! Node repair (feature gate `NodeRepair`): a Karpenter node whose condition has matched one
//! of the provider's repair policies (`Ready=False` for 30 minutes …) for the policy's
//! toleration is replaced — its NodeClaim gets a termination timestamp of "now", so the
//! drain does not wait on budgets, and is deleted. As upstream, repair stops while more than
//! 20% (rounded up) of the NodePool's nodes are unhealthy, since a wide outage is better
//! left alone than amplified.

use crate::{ClusterState, Kubelet, NodeCondition, NodeRecord};
use karpenter_cloudprovider::RepairPolicy;
use karpenter_cloudprovider::v1::ConditionStatus;
use karpenter_scheduling::model::Millis;
use std::collections::BTreeMap;

/// Share of a NodePool's nodes (rounded up) that may be unhealthy while repair goes on.
pub const ALLOWED_UNHEALTHY_PERCENT: usize = 20;

/// What repair decides for one unhealthy node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Replace it.
    Repair {
        /// Node name.
        node: String,
        /// Its NodeClaim.
        node_claim: String,
        /// The condition type that made it unhealthy.
        condition: String,
    },
    /// It is due, but too many nodes of its pool (or of the cluster, for a claim without
    /// pool) are unhealthy.
    Blocked {
        /// Node name.
        node: String,
        /// Its NodeClaim.
        node_claim: String,
        /// The NodePool, empty for the cluster.
        node_pool: String,
    },
}

fn status_text(s: ConditionStatus) -> &'static str {
    match s {
        ConditionStatus::True => "True",
        ConditionStatus::False => "False",
        ConditionStatus::Unknown => "Unknown",
    }
}

fn matches<'a>(record: &'a NodeRecord, policy: &RepairPolicy) -> Option<&'a NodeCondition> {
    record
        .kubelet
        .conditions()
        .iter()
        .find(|c| c.type_ == policy.condition_type)
        .filter(|c| c.status == status_text(policy.condition_status))
}

fn unhealthy(record: &NodeRecord, policies: &[RepairPolicy]) -> bool {
    policies.iter().any(|p| matches(record, p).is_some())
}

/// The matching condition whose toleration ends first, and when it ends.
fn due(record: &NodeRecord, policies: &[RepairPolicy]) -> Option<(String, Millis)> {
    policies
        .iter()
        .filter_map(|p| {
            let c = matches(record, p)?;
            let tolerate = i64::try_from(p.toleration_duration.as_millis()).unwrap_or(i64::MAX);
            Some((c.type_.clone(), c.since.saturating_add(tolerate)))
        })
        .min_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)))
}

/// Decides repair for every joined node owned by a NodeClaim at `now`, in node-name order.
/// Also returns the earliest later instant at which a matching condition's toleration ends
/// (the decision cannot change before it unless the index does).
pub fn decide(
    index: &ClusterState,
    policies: &[RepairPolicy],
    now: Millis,
) -> (Vec<Verdict>, Option<Millis>) {
    let joined = || {
        index
            .nodes()
            .values()
            .filter(|r| matches!(r.kubelet, Kubelet::Joined { .. }))
    };
    // (total, unhealthy) per pool; "" is the whole cluster.
    let mut health: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in joined() {
        let bad = usize::from(unhealthy(r, policies));
        for scope in [r.node.node_pool.as_deref(), Some("")]
            .into_iter()
            .flatten()
        {
            let e = health.entry(scope).or_default();
            e.0 += 1;
            e.1 += bad;
        }
    }
    let healthy = |scope: &str| {
        let (total, bad) = health.get(scope).copied().unwrap_or_default();
        bad <= (total * ALLOWED_UNHEALTHY_PERCENT).div_ceil(100)
    };
    let mut out = Vec::new();
    let mut next: Option<Millis> = None;
    for r in joined() {
        let Some(claim) = r
            .node_claim
            .as_ref()
            .and_then(|c| index.node_claims().get(c))
        else {
            continue;
        };
        if claim.is_deleting() {
            continue;
        }
        let Some((condition, at)) = due(r, policies) else {
            continue;
        };
        if now < at {
            next = Some(next.map_or(at, |n| n.min(at)));
            continue;
        }
        let node = r.node.name.clone();
        let node_claim = claim.name().to_owned();
        let pool = claim.node_pool().unwrap_or_default().to_owned();
        if healthy(&pool) {
            out.push(Verdict::Repair {
                node,
                node_claim,
                condition,
            });
        } else {
            out.push(Verdict::Blocked {
                node,
                node_claim,
                node_pool: pool,
            });
        }
    }
    (out, next)
}

/// The message of a `NodeRepairBlocked` event: the unhealthy share of `node_pool`'s nodes
/// (of the cluster's, when `node_pool` is empty) is over [`ALLOWED_UNHEALTHY_PERCENT`].
pub fn blocked_message(node_pool: &str) -> String {
    let scope = if node_pool.is_empty() {
        "the cluster".to_owned()
    } else {
        format!("nodepool {node_pool}")
    };
    format!(
        "Cannot repair unhealthy node: more than {ALLOWED_UNHEALTHY_PERCENT}% of the nodes in {scope} are unhealthy"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Object;
    use crate::api_objects::node_record;
    use k8s_openapi::api::core::v1::{Node, NodeCondition};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use karpenter_cloudprovider::NodeClaim;
    use karpenter_cloudprovider::v1::labels as v1labels;
    use karpenter_testing::api::{node_claim, ready, registering_node};
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_blocked_repair_names_the_pool_or_the_cluster() {
        assert_eq!(
            blocked_message("gpu"),
            "Cannot repair unhealthy node: more than 20% of the nodes in nodepool gpu are unhealthy"
        );
        assert!(blocked_message("").contains("of the nodes in the cluster are unhealthy"));
    }

    const MIN: Millis = 60_000;

    fn policies() -> Vec<RepairPolicy> {
        vec![
            RepairPolicy::replace(
                "Ready",
                ConditionStatus::False,
                Duration::from_secs(30 * 60),
            ),
            RepairPolicy::replace(
                "KernelReady",
                ConditionStatus::False,
                Duration::from_secs(10 * 60),
            ),
        ]
    }

    /// Node `name` in pool `default` with condition `type_` False since `since`, or Ready.
    fn pair(name: &str, bad: Option<(&str, Millis)>) -> (Arc<Node>, Arc<NodeClaim>) {
        let pid = format!("fake://us-east-1a/{name}");
        let mut n = ready(registering_node(name, &pid));
        n.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(v1labels::NODEPOOL.into(), "default".into());
        if let Some((type_, since)) = bad {
            let conditions = n
                .status
                .as_mut()
                .and_then(|s| s.conditions.as_mut())
                .unwrap();
            conditions.retain(|c| c.type_ != type_);
            conditions.push(NodeCondition {
                type_: type_.into(),
                status: "False".into(),
                last_transition_time: Some(Time(jiff::Timestamp::from_millisecond(since).unwrap())),
                ..NodeCondition::default()
            });
        }
        let mut c = node_claim(name);
        c.status.get_or_insert_with(Default::default).provider_id = pid;
        (Arc::new(n), Arc::new(c))
    }

    fn cluster(specs: &[(&str, Option<(&str, Millis)>)]) -> (Vec<Arc<Node>>, Vec<Arc<NodeClaim>>) {
        specs.iter().map(|(n, b)| pair(n, *b)).unzip()
    }

    /// The verdicts at `now` on the index the controller's feed would build from `nodes` and
    /// `claims`.
    fn decide(
        nodes: &[Arc<Node>],
        claims: &[Arc<NodeClaim>],
        policies: &[RepairPolicy],
        now: Millis,
    ) -> Vec<Verdict> {
        let mut index = ClusterState::new();
        for c in claims {
            index.apply(Object::NodeClaim(Box::new(NodeClaim::clone(c))));
        }
        for n in nodes {
            let claim = claims
                .iter()
                .find(|c| c.provider_id() == crate::node_provider_id(n));
            let record = node_record(n, claim.map(|c| c.as_ref())).unwrap();
            index.apply(Object::Node(Box::new(record)));
        }
        super::decide(&index, policies, now).0
    }

    #[test]
    fn repairs_after_the_toleration_and_not_before() {
        let (nodes, claims) = cluster(&[
            ("a", Some(("KernelReady", 0))),
            ("b", None),
            ("c", None),
            ("d", None),
            ("e", None),
        ]);
        assert!(decide(&nodes, &claims, &policies(), 10 * MIN - 1).is_empty());
        assert_eq!(
            decide(&nodes, &claims, &policies(), 10 * MIN),
            [Verdict::Repair {
                node: "a".into(),
                node_claim: "a".into(),
                condition: "KernelReady".into()
            }]
        );
    }

    #[test]
    fn more_than_twenty_percent_unhealthy_blocks_repair() {
        // 1 of 3 unhealthy: ceil(20% × 3) = 1 may be, so repair proceeds.
        let (nodes, claims) = cluster(&[("a", Some(("Ready", 0))), ("b", None), ("c", None)]);
        assert!(matches!(
            decide(&nodes, &claims, &policies(), 30 * MIN)[..],
            [Verdict::Repair { .. }]
        ));
        // 2 of 3: blocked, both reported.
        let (nodes, claims) = cluster(&[
            ("a", Some(("Ready", 0))),
            ("b", Some(("Ready", 0))),
            ("c", None),
        ]);
        let v = decide(&nodes, &claims, &policies(), 30 * MIN);
        assert_eq!(v.len(), 2);
        assert!(
            v.iter()
                .all(|v| matches!(v, Verdict::Blocked { node_pool, .. } if node_pool == "default"))
        );
    }

    #[test]
    fn healthy_conditions_unowned_and_deleting_nodes_are_left_alone() {
        let (mut nodes, mut claims) = cluster(&[("a", Some(("Ready", 0))), ("b", None)]);
        // Ready=True does not match a False policy.
        assert!(decide(&nodes[1..], &claims, &policies(), 60 * MIN).is_empty());
        // A node without a NodeClaim is not Karpenter's.
        assert!(decide(&nodes, &claims[1..], &policies(), 60 * MIN).is_empty());
        let mut deleting = (*claims[0]).clone();
        deleting.metadata.deletion_timestamp = Some(crate::provisioner::time(1));
        claims[0] = Arc::new(deleting);
        assert!(decide(&nodes, &claims, &policies(), 60 * MIN).is_empty());
        nodes.clear();
        assert!(decide(&nodes, &claims, &policies(), 60 * MIN).is_empty());
    }
}
