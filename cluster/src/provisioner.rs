//! Provisioning: Karpenter's pending-pod batching windows, and turning a [`Plan`]'s new
//! claims into NodeClaims to launch.

use super::Action;
use crate::ClusterState;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use karpenter_cloudprovider::NODEPOOL_HASH_VERSION;
use karpenter_cloudprovider::v1::{
    NodeClaim, NodeClaimSpec, NodePool, NodeSelectorOperator, NodeSelectorRequirementWithMinValues,
    ResourceRequirements, labels as v1labels,
};
use karpenter_scheduling::Plan;
use karpenter_scheduling::labels::INSTANCE_TYPE;
use karpenter_scheduling::model::{InstanceType, Millis, PodKey};
use karpenter_scheduling::plan::{NewNodeClaim, UnschedulablePod};
use karpenter_scheduling::requirements::Operator;
use karpenter_scheduling::solver::MinValuesPolicy;
use karpenter_scheduling::solver::launch::{LaunchCut, LaunchCutError, launch_cut};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Karpenter's `BATCH_IDLE_DURATION` default: 1 s.
pub const DEFAULT_BATCH_IDLE_MS: Millis = 1_000;
/// Karpenter's `BATCH_MAX_DURATION` default: 10 s.
pub const DEFAULT_BATCH_MAX_MS: Millis = 10_000;

/// The most instance types a NodeClaim's requirements list (upstream's launch cut).
pub use karpenter_scheduling::solver::launch::MAX_INSTANCE_TYPES;

/// The instance types of the pools a plan launches from, by name, to cut its claims
/// ([`launch_cut`]) as upstream does when it launches them. A pool's index is built the
/// first time one of its claims is cut.
pub struct LaunchTypes<'a> {
    state: &'a ClusterState,
    by_pool: RefCell<BTreeMap<&'a str, HashMap<&'a str, &'a InstanceType>>>,
    policy: MinValuesPolicy,
}

impl<'a> LaunchTypes<'a> {
    /// The types `state` holds for every pool, checked under `policy`.
    pub fn new(state: &'a ClusterState, policy: MinValuesPolicy) -> Self {
        Self {
            state,
            by_pool: RefCell::new(BTreeMap::new()),
            policy,
        }
    }

    /// The cut of `planned`.
    pub fn cut(&self, planned: &NewNodeClaim) -> Result<LaunchCut, LaunchCutError> {
        let mut by_pool = self.by_pool.borrow_mut();
        let types = match by_pool.get(planned.node_pool.as_str()) {
            Some(types) => types,
            None => {
                let Some((pool, _)) = self.state.node_pools().get_key_value(&planned.node_pool)
                else {
                    return launch_cut(planned, |_| None, MAX_INSTANCE_TYPES, self.policy);
                };
                let types = self
                    .state
                    .instance_types_of(pool)
                    .iter()
                    .map(|t| (t.name.as_str(), t.as_ref()))
                    .collect();
                by_pool.entry(pool.as_str()).or_insert(types)
            }
        };
        launch_cut(
            planned,
            |name| types.get(name).copied(),
            MAX_INSTANCE_TYPES,
            self.policy,
        )
    }

    /// Removes from `plan` the claims whose cut is refused, and reports their pods as
    /// unschedulable with the reason: upstream's launch of such a claim fails, and the pods
    /// are planned again.
    pub fn refuse_short_claims(&self, plan: &mut Plan) {
        let mut refused = Vec::new();
        plan.new_node_claims.retain(|c| match self.cut(c) {
            Ok(_) => true,
            Err(e) => {
                refused.extend(c.pods.iter().map(|pod| UnschedulablePod {
                    pod: pod.clone(),
                    reason: format!("nodepool {:?}: {e}", c.node_pool),
                    deferred: false,
                }));
                false
            }
        });
        if !refused.is_empty() {
            plan.total_price = plan.new_node_claims.iter().map(|c| c.price).sum();
            plan.unschedulable.extend(refused);
        }
    }
}

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

/// When the provisioner plans: a batch opens when a pod becomes provisionable that was not
/// in an earlier batch, and closes by the [`Batcher`]'s rules. Pods still pending
/// `resolve_after` after they were last planned open one new batch; they never hold a window
/// open by themselves, so the first batch after a quiet spell closes after the idle window,
/// not the maximum.
#[derive(Debug, Clone)]
pub struct ProvisionQueue {
    batcher: Batcher,
    batched: BTreeSet<PodKey>,
    last_solve: Option<Millis>,
    resolve_after: Millis,
}

impl ProvisionQueue {
    /// A queue batching with `batcher` and re-planning pods left pending `resolve_after`.
    pub fn new(batcher: Batcher, resolve_after: Millis) -> Self {
        Self {
            batcher,
            batched: BTreeSet::new(),
            last_solve: None,
            resolve_after,
        }
    }

    /// Records the pods provisionable at `now`; true when a batch closes with pods to plan
    /// (the caller plans them all).
    pub fn ready(&mut self, provisionable: &BTreeSet<PodKey>, now: Millis) -> bool {
        self.batched.retain(|k| provisionable.contains(k));
        let new = provisionable.iter().any(|k| !self.batched.contains(k));
        let stale = !provisionable.is_empty()
            && self.batcher.deadline().is_none()
            && self
                .last_solve
                .is_some_and(|t| now - t >= self.resolve_after);
        if new || stale {
            self.batcher.trigger(now);
            self.batched.extend(provisionable.iter().cloned());
        }
        if !self.batcher.take_ready(now) || provisionable.is_empty() {
            return false;
        }
        self.last_solve = Some(now);
        true
    }

    /// Opens (or extends) a batch at `now` for every provisionable pod, as when capacity
    /// changed under them: a launch failed or a node initialized with pods still pending.
    pub fn trigger(&mut self, now: Millis) {
        self.batcher.trigger(now);
    }

    /// When [`ready`](Self::ready) next has something to do for `pending` provisionable
    /// pods: the open batch's deadline, or the re-plan of pods left pending.
    pub fn next_due(&self, pending: bool) -> Option<Millis> {
        self.batcher.deadline().or_else(|| {
            pending
                .then_some(self.last_solve.map(|t| t + self.resolve_after))
                .flatten()
        })
    }
}

/// Names NodeClaims the way Karpenter does (`<nodepool>-<5 characters>`), deterministically:
/// the suffix is derived from a counter, skipping names already taken.
#[derive(Debug, Clone, Default)]
pub struct NameGenerator {
    counter: u64,
}

impl NameGenerator {
    /// A generator whose sequence starts at `seed` instead of zero. Two generators with
    /// different seeds yield different sequences, so a restarted controller does not reuse
    /// the names of claims its predecessor created (and that may since have been deleted).
    pub fn starting_at(seed: u64) -> Self {
        Self { counter: seed }
    }

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
/// with the instance types restricted to the `cut` of the plan's options and the capacity
/// types to those the cut offers, resource requests of its pods plus DaemonSet overhead, the
/// pool's template hash annotations, and owner label.
pub fn node_claim_for(
    name: &str,
    pool: &NodePool,
    planned: &NewNodeClaim,
    cut: &LaunchCut,
    now: Millis,
) -> NodeClaim {
    let mut spec: NodeClaimSpec = pool.spec.template.to_node_claim_spec();
    let mut narrowed = planned.requirements.clone();
    if let Some(capacity_types) = cut.capacity_type_requirement() {
        // Intersects with what the plan allowed: never widens it.
        narrowed.add(capacity_types);
    }
    let mut requirements: Vec<NodeSelectorRequirementWithMinValues> = narrowed
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
    let types: BTreeSet<&str> = cut.instance_types.iter().map(|n| n.as_ref()).collect();
    // The list replaces the pool's instance-type requirement but keeps its minValues, as
    // upstream's ToNodeClaim does: the flexibility the pool asked for stays on the claim.
    let mut instance_types =
        NodeSelectorRequirementWithMinValues::new(INSTANCE_TYPE, NodeSelectorOperator::In, types);
    instance_types.min_values = planned
        .requirements
        .get(INSTANCE_TYPE)
        .and_then(|r| r.min_values())
        .map(i64::from);
    requirements.push(instance_types);
    spec.requirements = requirements;
    spec.resources = ResourceRequirements {
        requests: planned
            .requests
            .to_quantities()
            .into_iter()
            .map(|(k, q)| (k, K8sQuantity(q.to_string())))
            .collect(),
    };
    NodeClaim {
        metadata: claim_metadata(name, pool, now),
        spec,
        status: None,
    }
}

/// The NodeClaim Karpenter creates for a static NodePool (`spec.replicas`): upstream builds
/// it from the template alone, so it carries the template's requirements plus one `In`
/// requirement per template label and the `karpenter.sh/nodepool` label (keys the template's
/// requirements already constrain are left to them), no instance-type list and no resource
/// requests. The cloud provider picks the cheapest offering the requirements allow.
pub fn static_node_claim(name: &str, pool: &NodePool, now: Millis) -> NodeClaim {
    let mut spec: NodeClaimSpec = pool.spec.template.to_node_claim_spec();
    let mut labels = pool.spec.template.metadata.labels.clone();
    labels.insert(v1labels::NODEPOOL.to_owned(), pool.name().to_owned());
    for (key, value) in labels {
        if !spec.requirements.iter().any(|r| r.key == key) {
            spec.requirements
                .push(NodeSelectorRequirementWithMinValues::new(
                    key,
                    NodeSelectorOperator::In,
                    [value],
                ));
        }
    }
    NodeClaim {
        metadata: claim_metadata(name, pool, now),
        spec,
        status: None,
    }
}

/// Metadata shared by every NodeClaim launched from `pool`: the template's labels plus the
/// pool's, its annotations plus the template hash, the termination finalizer and the owner.
fn claim_metadata(name: &str, pool: &NodePool, now: Millis) -> ObjectMeta {
    let mut labels = pool.spec.template.metadata.labels.clone();
    labels.insert(v1labels::NODEPOOL.to_owned(), pool.name().to_owned());
    let mut annotations = pool.spec.template.metadata.annotations.clone();
    annotations.insert(v1labels::NODEPOOL_HASH_ANNOTATION.to_owned(), pool.hash());
    annotations.insert(
        v1labels::NODEPOOL_HASH_VERSION_ANNOTATION.to_owned(),
        NODEPOOL_HASH_VERSION.to_owned(),
    );
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(labels),
        annotations: Some(annotations),
        creation_timestamp: Some(time(now)),
        finalizers: Some(vec![v1labels::TERMINATION_FINALIZER.to_owned()]),
        owner_references: owner_reference(pool).map(|r| vec![r]),
        ..ObjectMeta::default()
    }
}

/// The reference that makes a NodeClaim its NodePool's dependent, as upstream sets it: the
/// garbage collector deletes the claims of a deleted pool, and `blockOwnerDeletion` keeps a
/// foreground deletion of the pool waiting for them. `None` for a pool without a UID (one
/// read from a file rather than the API server).
pub fn owner_reference(pool: &NodePool) -> Option<OwnerReference> {
    let uid = pool.metadata.uid.clone().filter(|u| !u.is_empty())?;
    Some(OwnerReference {
        api_version: "karpenter.sh/v1".into(),
        kind: "NodePool".into(),
        name: pool.name().to_owned(),
        uid,
        block_owner_deletion: Some(true),
        controller: None,
    })
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
/// still exists and whose cut `types` accepts (see [`LaunchTypes::refuse_short_claims`]),
/// named by `names`. `taken` says which names exist already.
pub fn launch_actions(
    plan: &Plan,
    pools: &BTreeMap<String, NodePool>,
    types: &LaunchTypes<'_>,
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
        let Ok(cut) = types.cut(planned) else {
            continue;
        };
        let name = names.next(pool.name(), &|n| taken(n) || chosen.contains(n));
        chosen.insert(name.clone());
        out.push(Action::LaunchNodeClaim {
            claim: Box::new(node_claim_for(&name, pool, planned, &cut, now)),
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

    fn keys(names: &[&str]) -> BTreeSet<PodKey> {
        names.iter().map(|n| PodKey::new("default", *n)).collect()
    }

    /// Passes every 200 ms from `from` to `to`; the times at which a batch closed.
    fn closes(
        q: &mut ProvisionQueue,
        pods: &BTreeSet<PodKey>,
        from: Millis,
        to: Millis,
    ) -> Vec<Millis> {
        (from..to)
            .step_by(200)
            .filter(|t| q.ready(pods, *t))
            .collect()
    }

    #[test]
    fn the_first_batch_closes_after_the_idle_window_and_pending_pods_are_replanned_once() {
        let mut q = ProvisionQueue::new(Batcher::new(1_000, 10_000), 30_000);
        let pods = keys(&["a", "b"]);
        assert_eq!(closes(&mut q, &pods, 0, 5_000), vec![1_000]);
        // Still pending: planned again 30 s after the last plan, after one idle window.
        assert_eq!(closes(&mut q, &pods, 5_000, 40_000), vec![32_000]);
        // A new pod opens a batch at once, and its window is the idle one.
        let more = keys(&["a", "b", "c"]);
        assert_eq!(closes(&mut q, &more, 40_000, 45_000), vec![41_000]);
        // Nothing pending: nothing closes.
        assert!(closes(&mut q, &BTreeSet::new(), 45_000, 120_000).is_empty());
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

    #[test]
    fn generators_with_different_seeds_do_not_share_names() {
        let mut a = NameGenerator::default();
        let mut b = NameGenerator::starting_at(1_764_000_000_123_456_789);
        let from_a: BTreeSet<String> = (0..1_000).map(|_| a.next("p", &|_| false)).collect();
        let from_b: BTreeSet<String> = (0..1_000).map(|_| b.next("p", &|_| false)).collect();
        assert_eq!(from_a.len(), 1_000);
        assert!(from_a.is_disjoint(&from_b));
    }

    #[test]
    fn the_instance_type_list_keeps_the_pools_min_values() {
        use karpenter_scheduling::plan::InstanceTypeOption;
        use karpenter_scheduling::{Requirement, Requirements};
        let pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}
        }))
        .unwrap();
        let names: Vec<String> = (0..70).map(|i| format!("m{i}.large")).collect();
        let options: Vec<InstanceTypeOption> = names
            .iter()
            .enumerate()
            .map(|(i, name)| InstanceTypeOption {
                name: name.as_str().into(),
                price: 0.01 * (i + 1) as f64,
                zone: "us-east-1a".into(),
                capacity_type: "on-demand".into(),
            })
            .collect();
        let claim = |min_values: Option<u32>| {
            let mut requirements = Requirements::new();
            requirements.add(
                Requirement::new(
                    INSTANCE_TYPE,
                    Operator::In,
                    names.iter().map(String::as_str),
                )
                .unwrap()
                .with_min_values(min_values),
            );
            NewNodeClaim {
                node_pool: "default".into(),
                requirements,
                instance_type_options: std::sync::Arc::new(options.clone()),
                pods: Vec::new(),
                requests: Default::default(),
                daemon_overhead: Default::default(),
                price: 0.01,
            }
        };
        let listed = |min_values| {
            let planned = claim(min_values);
            // Names alone (BestEffort, so unknown types cannot fail minValues): the cut lists
            // the cheapest 60.
            let cut = launch_cut(
                &planned,
                |_| None,
                MAX_INSTANCE_TYPES,
                MinValuesPolicy::BestEffort,
            )
            .unwrap();
            let made = node_claim_for("default-abcde", &pool, &planned, &cut, 0);
            let mut it = made
                .spec
                .requirements
                .into_iter()
                .filter(|r| r.key == INSTANCE_TYPE);
            let only = it.next().expect("an instance-type requirement");
            assert!(it.next().is_none(), "exactly one");
            only
        };
        let with = listed(Some(20));
        assert_eq!(with.min_values, Some(20));
        assert_eq!(with.values.len(), MAX_INSTANCE_TYPES, "the cheapest 60");
        assert!(with.values.contains(&"m0.large".to_owned()));
        assert!(!with.values.contains(&"m69.large".to_owned()));
        assert_eq!(listed(None).min_values, None);
    }

    #[test]
    fn claims_of_a_pool_with_a_uid_are_owned_by_it() {
        let mut pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}
        }))
        .unwrap();
        assert!(owner_reference(&pool).is_none());
        pool.metadata.uid = Some("u-1".into());
        let owner = owner_reference(&pool).unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("NodePool", "default", "u-1")
        );
        assert_eq!(owner.api_version, "karpenter.sh/v1");
        assert_eq!(owner.block_owner_deletion, Some(true));
    }
}
