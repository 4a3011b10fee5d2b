//! Node repair (feature gate `NodeRepair`): a Karpenter node whose condition has matched one
//! of the provider's repair policies (`Ready=False` for 30 minutes …) for the policy's
//! toleration is replaced — its NodeClaim gets a termination timestamp of "now", so the
//! drain does not wait on budgets, and is deleted. As upstream, repair stops while more than
//! 20% (rounded up) of the NodePool's nodes are unhealthy, since a wide outage is better
//! left alone than amplified.

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use karpenter_cloudprovider::v1::ConditionStatus;
use karpenter_cloudprovider::v1::labels as v1labels;
use karpenter_cloudprovider::{NodeClaim, RepairPolicy};
use karpenter_scheduling::model::Millis;
use std::collections::BTreeMap;
use std::sync::Arc;

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

fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn matches<'a>(node: &'a Node, policy: &RepairPolicy) -> Option<&'a NodeCondition> {
    condition(node, &policy.condition_type)
        .filter(|c| c.status == status_text(policy.condition_status))
}

fn unhealthy(node: &Node, policies: &[RepairPolicy]) -> bool {
    policies.iter().any(|p| matches(node, p).is_some())
}

/// The matching condition whose toleration ends first, and when it ends.
fn due(node: &Node, policies: &[RepairPolicy]) -> Option<(String, Millis)> {
    policies
        .iter()
        .filter_map(|p| {
            let c = matches(node, p)?;
            let since = c
                .last_transition_time
                .as_ref()
                .map_or(0, |t| t.0.as_millisecond());
            let tolerate = i64::try_from(p.toleration_duration.as_millis()).unwrap_or(i64::MAX);
            Some((c.type_.clone(), since.saturating_add(tolerate)))
        })
        .min_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)))
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// Decides repair for every node owned by a NodeClaim at `now`, in node-name order.
pub fn decide(
    nodes: &[Arc<Node>],
    claims: &[Arc<NodeClaim>],
    policies: &[RepairPolicy],
    now: Millis,
) -> Vec<Verdict> {
    let by_provider_id: BTreeMap<&str, &NodeClaim> = claims
        .iter()
        .filter(|c| !c.provider_id().is_empty())
        .map(|c| (c.provider_id(), c.as_ref()))
        .collect();
    // (total, unhealthy) per pool; "" is the whole cluster.
    let mut health: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for n in nodes {
        let bad = usize::from(unhealthy(n, policies));
        for scope in [label(n, v1labels::NODEPOOL), Some("")]
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
    let mut sorted: Vec<&Arc<Node>> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut out = Vec::new();
    for n in sorted {
        let Some(claim) = by_provider_id.get(super::node_provider_id(n)) else {
            continue;
        };
        if claim.is_deleting() {
            continue;
        }
        let Some((condition, at)) = due(n, policies) else {
            continue;
        };
        if now < at {
            continue;
        }
        let node = n.metadata.name.clone().unwrap_or_default();
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
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use karpenter_testing::api::{node_claim, ready, registering_node};
    use std::time::Duration;

    const MIN: Millis = 60_000;

    fn policies() -> Vec<RepairPolicy> {
        vec![
            RepairPolicy {
                condition_type: "Ready".into(),
                condition_status: ConditionStatus::False,
                toleration_duration: Duration::from_secs(30 * 60),
            },
            RepairPolicy {
                condition_type: "KernelReady".into(),
                condition_status: ConditionStatus::False,
                toleration_duration: Duration::from_secs(10 * 60),
            },
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
