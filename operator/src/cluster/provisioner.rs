//! Provisioning: Karpenter's pending-pod batching windows, and turning a [`Plan`]'s new
//! claims into NodeClaims to launch.

use super::Action;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use karpenter_cloudprovider::NODEPOOL_HASH_VERSION;
use karpenter_cloudprovider::v1::{
    NodeClaim, NodeClaimSpec, NodePool, NodeSelectorOperator, NodeSelectorRequirementWithMinValues,
    ResourceRequirements, labels as v1labels,
};
use karpenter_scheduling::Plan;
use karpenter_scheduling::labels::INSTANCE_TYPE;
use karpenter_scheduling::model::Millis;
use karpenter_scheduling::plan::NewNodeClaim;
use karpenter_scheduling::requirements::Operator;
use std::collections::{BTreeMap, BTreeSet};

/// Karpenter's `BATCH_IDLE_DURATION` default: 1 s.
pub const DEFAULT_BATCH_IDLE_MS: Millis = 1_000;
/// Karpenter's `BATCH_MAX_DURATION` default: 10 s.
pub const DEFAULT_BATCH_MAX_MS: Millis = 10_000;

/// Upstream's `MaxInstanceTypes`: the most instance types a NodeClaim's requirements list.
pub const MAX_INSTANCE_TYPES: usize = 60;

/// Karpenter's batcher: a batch opens at the first trigger (a new pending pod) and closes
/// once no trigger came for `idle`, or `max` after it opened, whichever is first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batcher {
    idle: Millis,
    max: Millis,
    window: Option<(Millis, Millis)>,
}

impl Batcher {
    /// A batcher with the given windows.
    pub fn new(idle: Millis, max: Millis) -> Self {
        Self {
            idle,
            max,
            window: None,
        }
    }

    /// Records a trigger at `now`: opens a window or extends its idle deadline.
    pub fn trigger(&mut self, now: Millis) {
        self.window = Some(match self.window {
            None => (now, now),
            Some((opened, _)) => (opened, now),
        });
    }

    /// When the open window closes, if one is open.
    pub fn deadline(&self) -> Option<Millis> {
        self.window
            .map(|(opened, last)| (last + self.idle).min(opened + self.max))
    }

    /// Closes the window and returns true when it is due at `now`.
    pub fn take_ready(&mut self, now: Millis) -> bool {
        if self.deadline().is_some_and(|d| d <= now) {
            self.window = None;
            true
        } else {
            false
        }
    }
}

/// Names NodeClaims the way Karpenter does (`<nodepool>-<5 characters>`), deterministically:
/// the suffix is derived from a counter, skipping names already taken.
#[derive(Debug, Clone, Default)]
pub struct NameGenerator {
    counter: u64,
}

impl NameGenerator {
    /// The next free name for `pool`.
    pub fn next(&mut self, pool: &str, taken: &dyn Fn(&str) -> bool) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        loop {
            self.counter += 1;
            // A multiplicative hash spreads consecutive counters over the alphabet.
            let mut h = self.counter.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut suffix = String::with_capacity(5);
            for _ in 0..5 {
                suffix.push(ALPHABET[(h % ALPHABET.len() as u64) as usize] as char);
                h /= ALPHABET.len() as u64;
            }
            let name = format!("{pool}-{suffix}");
            if !taken(&name) {
                return name;
            }
        }
    }
}

fn operator(op: Operator) -> NodeSelectorOperator {
    match op {
        Operator::In => NodeSelectorOperator::In,
        Operator::NotIn => NodeSelectorOperator::NotIn,
        Operator::Exists => NodeSelectorOperator::Exists,
        Operator::DoesNotExist => NodeSelectorOperator::DoesNotExist,
        Operator::Gt => NodeSelectorOperator::Gt,
        Operator::Lt => NodeSelectorOperator::Lt,
        Operator::Gte => NodeSelectorOperator::Gte,
        Operator::Lte => NodeSelectorOperator::Lte,
    }
}

/// The NodeClaim Karpenter creates for one planned claim (upstream's `NodeClaimTemplate`
/// `ToNodeClaim`): the pool's template spec and labels, the plan's narrowed requirements
/// with the instance types restricted to the plan's options, resource requests of its pods
/// plus DaemonSet overhead, the pool's template hash annotations, and owner label.
pub fn node_claim_for(
    name: &str,
    pool: &NodePool,
    planned: &NewNodeClaim,
    now: Millis,
) -> NodeClaim {
    let mut spec: NodeClaimSpec = pool.spec.template.to_node_claim_spec();
    let mut requirements: Vec<NodeSelectorRequirementWithMinValues> = planned
        .requirements
        .to_node_selector()
        .into_iter()
        .filter(|r| r.key != INSTANCE_TYPE)
        .map(|r| NodeSelectorRequirementWithMinValues {
            key: r.key,
            operator: operator(r.operator),
            values: r.values,
            min_values: r.min_values.map(i64::from),
        })
        .collect();
    // Options are cheapest first; like upstream, a NodeClaim carries at most 60 of them.
    let types: BTreeSet<&str> = planned
        .instance_type_options
        .iter()
        .take(MAX_INSTANCE_TYPES)
        .map(|o| o.name.as_str())
        .collect();
    requirements.push(NodeSelectorRequirementWithMinValues::new(
        INSTANCE_TYPE,
        NodeSelectorOperator::In,
        types,
    ));
    spec.requirements = requirements;
    spec.resources = ResourceRequirements {
        requests: planned
            .requests
            .to_quantities()
            .into_iter()
            .map(|(k, q)| (k, K8sQuantity(q.to_string())))
            .collect(),
    };
    let mut labels = pool.spec.template.metadata.labels.clone();
    labels.insert(v1labels::NODEPOOL.to_owned(), pool.name().to_owned());
    let mut annotations = pool.spec.template.metadata.annotations.clone();
    annotations.insert(v1labels::NODEPOOL_HASH_ANNOTATION.to_owned(), pool.hash());
    annotations.insert(
        v1labels::NODEPOOL_HASH_VERSION_ANNOTATION.to_owned(),
        NODEPOOL_HASH_VERSION.to_owned(),
    );
    NodeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels),
            annotations: Some(annotations),
            creation_timestamp: Some(time(now)),
            finalizers: Some(vec![v1labels::TERMINATION_FINALIZER.to_owned()]),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

/// A Kubernetes timestamp for `now` (milliseconds since the epoch); out-of-range values
/// clamp to the epoch, which no simulation reaches.
pub fn time(now: Millis) -> Time {
    Time(
        k8s_openapi::jiff::Timestamp::from_millisecond(now)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

/// The launches a plan asks for: one [`Action::LaunchNodeClaim`] per new claim whose pool
/// still exists, named by `names`. `taken` says which names exist already.
pub fn launch_actions(
    plan: &Plan,
    pools: &BTreeMap<String, NodePool>,
    names: &mut NameGenerator,
    taken: &dyn Fn(&str) -> bool,
    now: Millis,
) -> Vec<Action> {
    let mut chosen: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for planned in &plan.new_node_claims {
        let Some(pool) = pools.get(&planned.node_pool) else {
            continue;
        };
        let name = names.next(pool.name(), &|n| taken(n) || chosen.contains(n));
        chosen.insert(name.clone());
        out.push(Action::LaunchNodeClaim {
            claim: Box::new(node_claim_for(&name, pool, planned, now)),
            plan: Box::new(planned.clone()),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_closes_after_idle_or_max() {
        let mut b = Batcher::new(1_000, 10_000);
        assert_eq!(b.deadline(), None);
        b.trigger(0);
        assert_eq!(b.deadline(), Some(1_000));
        b.trigger(800);
        assert_eq!(b.deadline(), Some(1_800));
        assert!(!b.take_ready(1_700));
        // Triggers every 900 ms keep it open until the 10 s cap.
        for t in (1_700..12_000).step_by(900) {
            b.trigger(t);
        }
        assert_eq!(b.deadline(), Some(10_000));
        assert!(b.take_ready(10_000));
        assert_eq!(b.deadline(), None);
    }

    #[test]
    fn names_are_deterministic_and_unique() {
        let mut a = NameGenerator::default();
        let mut b = NameGenerator::default();
        let first = a.next("default", &|_| false);
        assert_eq!(first, b.next("default", &|_| false));
        assert!(first.starts_with("default-") && first.len() == "default-".len() + 5);
        let second = a.next("default", &|n| n == first);
        assert_ne!(first, second);
    }
}
