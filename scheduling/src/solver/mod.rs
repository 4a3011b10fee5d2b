//! The packing solver: Karpenter-compatible greedy scheduling simulation over existing nodes,
//! in-flight claims and new NodeClaims.
//!
//! The flow follows upstream's `scheduler.go`: pods are queued largest first (module
//! `queue`); each is tried on existing nodes (initialized first, then by name), then on the
//! claims this solve already opened (fewest pods first), then on a new claim from the first
//! NodePool by weight that can take it. A pod that fits nowhere has its preferences relaxed
//! one at a time (module `preferences`) and is retried; if it still fails it is requeued,
//! and the loop ends when a whole pass over the queue places nothing.
//!
//! Per-pool data (template requirements, compatible instance types, their allocatable and
//! DaemonSet overhead groups) and per-pod data (`pods::PodData`) are computed once and
//! reused, so a later optimisation pass can re-pack the same pods with the same
//! compatibility answers.

mod alloc_table;
mod arith;
mod cache;
mod daemons;
mod effective_zone;
mod existing;
mod headroom;
mod hostports;
pub mod launch;
mod limits;
mod nodeclaim;
mod optimize;
mod pods;
mod preferences;
mod queue;
mod reasons;
mod reservations;
mod topology;

use crate::labels::{HOSTNAME, NODE_INITIALIZED, NODE_REGISTERED, ZONE};
use crate::model::{NodeState, Pod, Snapshot};
use crate::plan::{NewNodeClaim, NodePlacement, Plan, UnschedulablePod};
use crate::requirements::{Operator, Requirements};
use crate::resources::Resources;
use crate::taints::{TaintEffect, first_untolerated};
use daemons::Daemon;
use existing::ExistingNode;
use limits::{LimitMode, Remaining};
use nodeclaim::{Claim, ClaimUpdate, Template};
use pods::PodData;
use preferences::Relaxed;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::rc::Rc;
use std::sync::Arc;
use topology::{Cluster, ClusterNode, DomainGroups, Topology};

pub use cache::SolveCache;
pub use optimize::OptimizerOptions;

/// What to do with preferences (preferred affinities, ScheduleAnyway spreads,
/// PreferNoSchedule taints) — Karpenter's `--preference-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PreferencePolicy {
    /// Treat preferences as requirements, relaxing them one at a time when a pod cannot be
    /// placed (Karpenter's default).
    #[default]
    Respect,
    /// Ignore preferences entirely.
    Ignore,
}

/// What to do when a claim cannot keep `minValues` distinct values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum MinValuesPolicy {
    /// The pod is unschedulable on that pool (Karpenter's default).
    #[default]
    Strict,
    /// Keep as many values as possible.
    BestEffort,
}

/// What to do with a pod whose only compatible reserved offerings are already promised to
/// other claims of the solve (upstream's `ReservedOfferingMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ReservedOfferingMode {
    /// Leave the pod unplaced for a later round (by then the provider reports the
    /// reservation used up, and the pod falls back), and never take away a claim's last
    /// reservation. Upstream's provisioner runs this way.
    #[default]
    Strict,
    /// Place the pod on a claim launched as another capacity type the pool allows.
    /// Upstream's disruption simulations run this way.
    Fallback,
}

/// Options for [`solve`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SolveOptions {
    /// Preference handling.
    #[serde(default)]
    pub preference_policy: PreferencePolicy,
    /// minValues handling.
    #[serde(default)]
    pub min_values_policy: MinValuesPolicy,
    /// The packing optimiser that improves the greedy plan.
    #[serde(default)]
    pub optimizer: OptimizerOptions,
    /// Karpenter's `ReservedCapacity` feature gate (default on): claims hold reservations
    /// and launch into them. Off, no claim is launched as reserved capacity.
    #[serde(default = "enabled")]
    pub reserved_capacity: bool,
    /// Strict for provisioning (the default), fallback for disruption simulations.
    #[serde(default)]
    pub reserved_offering_mode: ReservedOfferingMode,
}

fn enabled() -> bool {
    true
}

impl Default for SolveOptions {
    fn default() -> Self {
        Self {
            preference_policy: PreferencePolicy::default(),
            min_values_policy: MinValuesPolicy::default(),
            optimizer: OptimizerOptions::default(),
            reserved_capacity: true,
            reserved_offering_mode: ReservedOfferingMode::default(),
        }
    }
}

/// Decides where every pending pod of `snapshot` goes. Deterministic: the same snapshot and
/// options give the same plan.
///
/// Pending pods owned by a DaemonSet are left out (their controller places them). Every
/// other pending pod is either placed on an existing node, placed in a new claim, or listed
/// as unschedulable with a reason naming each NodePool and why it refused the pod.
///
/// The greedy pass (Karpenter's own algorithm) runs first; then, unless
/// [`OptimizerOptions::enabled`] is false, the optimiser re-packs interchangeable new-claim
/// pods onto cheaper instance-type mixes within its deterministic work budget. The plan's
/// `total_price` is never above its `greedy_price`, and `lower_bound` (when computed) is at
/// most the price of any plan putting the same pods on new capacity.
///
/// # Examples
///
/// The inputs here come from `karpenter-testing`'s builders (a pool over a small catalogue of
/// 2- to 16-core types in three zones); the [crate documentation](crate) builds them by hand.
///
/// ```
/// use karpenter_scheduling::labels::ZONE;
/// use karpenter_scheduling::{SolveOptions, solve};
/// use karpenter_testing::{GI, pod, pool, snapshot};
///
/// let mut pinned = pod("pinned", 500, GI);
/// pinned.node_selector.insert(ZONE.into(), "zone-b".into());
/// let mut nowhere = pod("nowhere", 500, GI);
/// nowhere.node_selector.insert(ZONE.into(), "zone-x".into());
/// let s = snapshot(
///     vec![pod("a", 1500, 2 * GI), pod("b", 1500, 2 * GI), pinned, nowhere],
///     vec![pool("default")],
/// );
///
/// let plan = solve(&s, &SolveOptions::default());
/// // Every pod is placed or explained, naming the NodePool that refused it.
/// assert_eq!(plan.placed_pods(), 3);
/// assert_eq!(plan.unschedulable.len(), 1);
/// assert_eq!(plan.unschedulable[0].pod.name, "nowhere");
/// assert!(plan.unschedulable[0].reason.contains(r#"NodePool "default""#));
/// // The pod pinned to zone-b is on a claim whose requirements pin that zone.
/// let claim = plan
///     .new_node_claims
///     .iter()
///     .find(|c| c.pods.iter().any(|p| p.name == "pinned"))
///     .unwrap();
/// assert!(claim.requirements.get(ZONE).unwrap().has("zone-b"));
/// // Never above Karpenter's greedy packing, and the same plan every time.
/// assert!(plan.total_price <= plan.greedy_price.unwrap() + 1e-9);
/// assert_eq!(plan, solve(&s, &SolveOptions::default()));
/// ```
pub fn solve(snapshot: &Snapshot, options: &SolveOptions) -> Plan {
    solve_with_deadline(snapshot, options, None)
}

/// [`solve`], with a deadline: the optimiser polls `deadline` now and then and, once it
/// returns true, stops and keeps the best plan found so far (never worse than the greedy
/// one). The greedy pass always completes. The callback is the only way to make a solve
/// depend on anything but its inputs (e.g. a wall clock): without one, or with one that
/// never fires, the result is deterministic.
///
/// # Examples
///
/// A deadline that has already passed: the greedy plan is complete and the optimiser says it
/// stopped early.
///
/// ```
/// use karpenter_scheduling::{SolveOptions, solve_with_deadline};
/// use karpenter_testing::synthetic_snapshot;
///
/// let s = synthetic_snapshot(200, 0);
/// let plan = solve_with_deadline(&s, &SolveOptions::default(), Some(&|| true));
/// assert!(plan.unschedulable.is_empty());
/// assert_eq!(plan.placed_pods(), 200);
/// assert!(plan.total_price <= plan.greedy_price.unwrap() + 1e-9);
/// assert!(plan.optimizer.unwrap().budget_exhausted);
/// ```
pub fn solve_with_deadline(
    snapshot: &Snapshot,
    options: &SolveOptions,
    deadline: Option<&dyn Fn() -> bool>,
) -> Plan {
    plan_with(snapshot, options, &mut SolveCache::new(), deadline)
}

/// [`solve`], reusing what `cache` derived from nodes and NodePools that have not changed
/// since it saw them (and remembering the others). For callers that solve many snapshots
/// over the same nodes and pools, such as a disruption pass's simulations; the plan is the
/// one [`solve`] gives.
pub fn solve_cached(snapshot: &Snapshot, options: &SolveOptions, cache: &mut SolveCache) -> Plan {
    plan_with(snapshot, options, cache, None)
}

/// The greedy pass, then the optimiser. When the optimiser may run and a NodePool's limits
/// kept pods out of the greedy plan only because every claim counted its largest option
/// (see [`limits`]), those pools are planned again: first, when the pending pods' requests
/// fit what their limits leave, with the greedy pass ignoring the limits and the optimiser
/// bringing the plan within them ([`LimitMode::Unbounded`]; the plan is kept only if it
/// does); otherwise, or if it does not, with every claim counting the least it may be
/// narrowed to ([`LimitMode::Least`]). The pass that places the most pods is optimised.
fn plan_with(
    snapshot: &Snapshot,
    options: &SolveOptions,
    cache: &mut SolveCache,
    deadline: Option<&dyn Fn() -> bool>,
) -> Plan {
    let node_reqs: Vec<_> = snapshot.nodes.iter().map(|n| cache.node(n)).collect();
    let entries = cache.pools(&snapshot.node_pools);
    let mut first = Scheduler::new(snapshot, options, &node_reqs, entries);
    // Counted before any pod is placed, as upstream counts them.
    let by_zone = first.pending_by_effective_zone();
    let errors = first.greedy();
    let left_out = |errors: &[Option<Rejection>]| {
        errors
            .iter()
            .filter(|e| e.as_ref().is_some_and(|e| !e.deferred))
            .count()
    };
    let deferrable = first.deferrable_limits();
    if !options.optimizer.enabled || left_out(&errors) == 0 || !deferrable.iter().any(|&d| d) {
        let mut plan = first.optimize_and_finish(errors, deadline);
        plan.pending_by_effective_zone = by_zone;
        return plan;
    }
    let again = |mode: LimitMode| {
        let mut s = Scheduler::new(snapshot, options, &node_reqs, entries);
        let modes = deferrable
            .iter()
            .map(|&d| if d { mode } else { LimitMode::Largest })
            .collect();
        s.set_limit_modes(modes);
        let errors = s.greedy();
        (s, errors)
    };
    if first.requests_fit_limits(&deferrable) {
        let (unbounded, unbounded_errors) = again(LimitMode::Unbounded);
        if left_out(&unbounded_errors) < left_out(&errors) {
            let optimized = optimize::optimize(&unbounded, &options.optimizer, deadline);
            if optimized.within_limits {
                let mut plan = unbounded.finish_optimized(unbounded_errors, optimized);
                plan.pending_by_effective_zone = by_zone;
                return plan;
            }
        }
    }
    let least = first
        .counted_beyond_price(&deferrable)
        .then(|| again(LimitMode::Least))
        .filter(|(_, again_errors)| left_out(again_errors) < left_out(&errors));
    let mut plan = match least {
        Some((least, again_errors)) => least.optimize_and_finish(again_errors, deadline),
        None => first.optimize_and_finish(errors, deadline),
    };
    plan.pending_by_effective_zone = by_zone;
    plan
}

struct Scheduler<'a> {
    options: &'a SolveOptions,
    pods: &'a [Pod],
    cluster: Cluster<'a>,
    topology: Topology,
    templates: Vec<Template<'a>>,
    skipped: Vec<(String, String)>,
    remaining: Vec<Remaining>,
    /// Per template, whether its limits kept some instance type from a new claim or some
    /// pod from the pool (the greedy's "limit reached").
    limit_hit: Vec<bool>,
    /// Per template, how its claims count against its limits.
    modes: Vec<LimitMode>,
    /// Per template in [`LimitMode::Least`], its instance types' charges.
    charge_tables: Vec<Option<limits::Charges>>,
    /// Per claim of a template in [`LimitMode::Least`], its cheapest option and what it
    /// counts against the limits now; `(None, [])` for the others.
    charges: Vec<(Option<u32>, Vec<i64>)>,
    existing: Vec<ExistingNode<'a>>,
    claims: Vec<Claim>,
    /// Each claim's [`headroom::Headroom`], kept in step with `claims`.
    headroom: Vec<headroom::Headroom>,
    claim_order: Vec<usize>,
    base: Rc<Vec<Result<PodData, String>>>,
    tolerate_pns_step: bool,
    next_host: u32,
    /// A number below 64 for each zone some claim was pinned to, for [`Claim::zone_mask`].
    zone_ids: HashMap<String, u32>,
    /// Capacity reservations left for this solve's claims.
    reservations: reservations::Reservations,
    /// Per pending pod, whether it was placed with a preferred node-affinity term in force
    /// (not relaxed away, nor ignored by the policy).
    prefers_node: Vec<bool>,
}

/// Why a pod could not be placed; `deferred` when only reserved capacity promised to other
/// claims stood in its way (upstream's `ReservedOfferingError`): its preferences are not
/// relaxed and lower-weight pools are not tried.
struct Rejection {
    reason: String,
    deferred: bool,
}

impl Rejection {
    fn plain(reason: String) -> Self {
        Self {
            reason,
            deferred: false,
        }
    }
}

/// The bit set of the zones an `In` requirement allows, numbering new zones in `ids`;
/// `None` for other operators or once more than 64 zones are known.
fn zone_mask(
    ids: &mut HashMap<String, u32>,
    r: Option<&crate::requirements::Requirement>,
) -> Option<u64> {
    let r = r.filter(|r| r.operator() == Operator::In)?;
    let mut mask = 0u64;
    for v in r.values() {
        let id = match ids.get(v) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(ids.len()).ok().filter(|&n| n < 64)?;
                ids.insert(v.to_string(), id);
                id
            }
        };
        mask |= 1u64 << id;
    }
    Some(mask)
}

/// For each bound pod of `snapshot`, the index of its node in `snapshot.nodes`, or `None` when
/// the snapshot does not have that node (the pod is then ignored).
fn bound_node_indices(snapshot: &Snapshot) -> Vec<Option<usize>> {
    let index: HashMap<&str, usize> = snapshot
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    // Bound pods usually come grouped by node: one comparison instead of a hash per pod.
    let mut last: Option<(&str, Option<usize>)> = None;
    snapshot
        .bound_pods
        .iter()
        .map(|p| {
            let name = p.node_name.as_deref()?;
            if let Some((n, i)) = last
                && n == name
            {
                return i;
            }
            let i = index.get(name).copied();
            last = Some((name, i));
            i
        })
        .collect()
}

/// Every topology key a group of this solve can be keyed on: groups come only from the
/// spread constraints and pod (anti-)affinity terms of pending pods, and the required
/// anti-affinity of pods bound to the snapshot's nodes (`bound_nodes`, see
/// [`bound_node_indices`]).
fn topology_keys<'s>(snapshot: &'s Snapshot, bound_nodes: &[Option<usize>]) -> BTreeSet<&'s str> {
    let mut keys = BTreeSet::new();
    let bound = snapshot
        .bound_pods
        .iter()
        .zip(bound_nodes)
        .filter_map(|(p, n)| n.map(|_| p));
    for pod in snapshot.pending_pods.iter().chain(bound) {
        let spreads = pod.topology_spread_constraints.iter();
        keys.extend(spreads.map(|t| t.topology_key.as_str()));
        for terms in [&pod.affinity.pod_affinity, &pod.affinity.pod_anti_affinity] {
            keys.extend(terms.required.iter().map(|t| t.topology_key.as_str()));
            keys.extend(terms.preferred.iter().map(|w| w.term.topology_key.as_str()));
        }
    }
    keys
}

/// The domains each pool can create, for the topology keys some group can use: only those
/// keys are ever asked for, and instance types carry many others (one instance-type name
/// each, for a start).
fn domain_groups(snapshot: &Snapshot, bound_nodes: &[Option<usize>]) -> DomainGroups {
    let mut groups = DomainGroups::default();
    let keys = topology_keys(snapshot, bound_nodes);
    if keys.is_empty() {
        return groups;
    }
    let wanted = |r: &&crate::requirements::Requirement| keys.contains(r.key());
    for pool in &snapshot.node_pools {
        let mut base = pool.requirements.clone();
        base.add_all(&Requirements::from_labels(pool.labels.iter()));
        // The domains of `base ∩ it.requirements` for every instance type, without building
        // that intersection per type: only keys both define need one. Most pairs (zone, arch,
        // os) repeat from type to type, and inserting a pair again with the same taints
        // changes nothing `DomainGroups` answers, so each borrowed pair goes in once.
        let mut seen: BTreeSet<(&str, &str)> = BTreeSet::new();
        for it in &pool.instance_types {
            for req in base.iter().filter(wanted) {
                match it.requirements.get(req.key()) {
                    Some(other) => {
                        for v in other.intersection(req).values() {
                            groups.insert(req.key(), v, &pool.taints);
                        }
                    }
                    None => {
                        for v in req.values() {
                            if seen.insert((req.key(), v)) {
                                groups.insert(req.key(), v, &pool.taints);
                            }
                        }
                    }
                }
            }
            let own = it.requirements.iter().filter(wanted);
            for req in own.filter(|r| !base.has(r.key())) {
                for v in req.values() {
                    if seen.insert((req.key(), v)) {
                        groups.insert(req.key(), v, &pool.taints);
                    }
                }
            }
        }
        let fixed = base.iter().filter(wanted);
        for req in fixed.filter(|r| r.operator() == Operator::In) {
            for v in req.values() {
                groups.insert(req.key(), v, &pool.taints);
            }
        }
    }
    groups
}

impl<'a> Scheduler<'a> {
    fn new(
        snapshot: &'a Snapshot,
        options: &'a SolveOptions,
        node_reqs: &[cache::NodeRequirements],
        entries: &'a [cache::PoolEntry],
    ) -> Self {
        let policy = options.preference_policy;
        let pods = snapshot.pending_pods.as_slice();

        let bound_nodes = bound_node_indices(snapshot);
        let mut bound_by_node: Vec<Vec<&Pod>> = vec![Vec::new(); snapshot.nodes.len()];
        let mut bound = Vec::new();
        for (pod, n) in snapshot.bound_pods.iter().zip(&bound_nodes) {
            let Some(n) = *n else {
                continue;
            };
            bound_by_node[n].push(pod);
            if !pod.terminating {
                bound.push((pod, n));
            }
        }
        let cluster = Cluster {
            nodes: snapshot
                .nodes
                .iter()
                .zip(node_reqs)
                .map(|(node, reqs)| ClusterNode {
                    node,
                    reqs: Arc::clone(&reqs.labels),
                    deleting: node.state == NodeState::Deleting,
                })
                .collect(),
            bound,
            namespaces: &snapshot.namespaces,
        };

        let mut daemon_sets: Vec<_> = snapshot.daemon_sets.iter().collect();
        daemon_sets.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let daemons: Vec<Daemon<'_>> = daemon_sets.into_iter().map(Daemon::new).collect();

        let mut pools: Vec<_> = snapshot.node_pools.iter().enumerate().collect();
        pools.sort_by(|(_, a), (_, b)| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
        let mut templates = Vec::new();
        let mut skipped = Vec::new();
        let mut remaining = Vec::new();
        for (i, pool) in pools {
            let entry = &entries[i];
            let template = Template::new(
                pool,
                entry.reqs.clone(),
                &entry.compatible,
                &entry.memo,
                &daemons,
                options.min_values_policy,
            );
            match template {
                Ok(t) => {
                    templates.push(t);
                    remaining.push(Remaining::new(pool));
                }
                Err(e) => skipped.push((pool.name.clone(), e)),
            }
        }
        let tolerate_pns_step = snapshot.node_pools.iter().any(|p| {
            p.taints
                .iter()
                .any(|t| t.effect == TaintEffect::PreferNoSchedule)
        });

        let mut topology = Topology::new(policy, domain_groups(snapshot, &bound_nodes), pods.len());
        topology.add_running_anti_affinities(&cluster);
        let mut base = Vec::with_capacity(pods.len());
        for (p, pod) in pods.iter().enumerate() {
            let r = Relaxed::new(pod, policy);
            if !pod.is_daemon() {
                topology.update(p, &r, &cluster);
            }
            base.push(PodData::new(&r));
        }

        let mut existing: Vec<ExistingNode<'_>> = snapshot
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.state != NodeState::Deleting)
            .map(|(i, n)| ExistingNode::new(n, &node_reqs[i], &bound_by_node[i], &daemons))
            .collect();
        existing.sort_by(|a, b| {
            b.ready()
                .cmp(&a.ready())
                .then_with(|| a.node.name.cmp(&b.node.name))
        });
        for n in &existing {
            topology.register(HOSTNAME, existing::hostname(n.node));
        }

        let reservations = reservations::Reservations::new(&templates, options.reserved_capacity);
        Scheduler {
            options,
            pods,
            cluster,
            topology,
            templates,
            skipped,
            limit_hit: vec![false; remaining.len()],
            modes: vec![LimitMode::Largest; remaining.len()],
            charge_tables: vec![None; remaining.len()],
            remaining,
            charges: Vec::new(),
            existing,
            claims: Vec::new(),
            headroom: Vec::new(),
            claim_order: Vec::new(),
            base: Rc::new(base),
            tolerate_pns_step,
            next_host: 0,
            zone_ids: HashMap::new(),
            reservations,
            prefers_node: vec![false; pods.len()],
        }
    }

    /// The greedy pass (Karpenter's) over every pending pod but DaemonSet pods; returns each
    /// pod's last rejection (`None` for the pods it placed).
    fn greedy(&mut self) -> Vec<Option<Rejection>> {
        let candidates: Vec<usize> = (0..self.pods.len())
            .filter(|&p| !self.pods[p].is_daemon())
            .collect();
        let mut errors: Vec<Option<Rejection>> = std::iter::repeat_with(|| None)
            .take(self.pods.len())
            .collect();
        self.drain(candidates, &mut errors);
        self.topology.settle();
        errors
    }

    /// Runs the optimiser (when enabled) over the greedy pass's claims and builds the plan.
    fn optimize_and_finish(
        self,
        errors: Vec<Option<Rejection>>,
        deadline: Option<&dyn Fn() -> bool>,
    ) -> Plan {
        if !self.options.optimizer.enabled {
            return self.finish(errors);
        }
        let optimized = optimize::optimize(&self, &self.options.optimizer, deadline);
        self.finish_optimized(errors, optimized)
    }

    /// The plan with the optimiser's claims and figures.
    fn finish_optimized(
        mut self,
        errors: Vec<Option<Rejection>>,
        optimized: optimize::Optimized,
    ) -> Plan {
        if let Some(claims) = optimized.claims {
            self.claims = claims;
        }
        let mut plan = self.finish(errors);
        plan.greedy_price = Some(optimized.greedy_price);
        plan.lower_bound = optimized.lower_bound;
        plan.optimizer = Some(optimized.stats);
        plan
    }

    /// Places the `pods` in queue order until a whole pass over those left places nothing,
    /// recording each one's last rejection in `errors` (cleared once placed).
    fn drain(&mut self, pods: Vec<usize>, errors: &mut [Option<Rejection>]) {
        let mut queue = queue::Queue::new(self.pods, pods);
        while let Some(p) = queue.pop() {
            match self.try_schedule(p) {
                Ok(()) => errors[p] = None,
                Err((e, relaxed)) => {
                    errors[p] = Some(e);
                    if relaxed {
                        // Each attempt starts from the pod as written.
                        let r = Relaxed::new(&self.pods[p], self.options.preference_policy);
                        self.topology.update(p, &r, &self.cluster);
                    }
                    queue.push(p);
                }
            }
        }
    }

    /// The pools whose limits stood in this greedy pass's way ("limit reached", or types
    /// left out of a claim) and that hold no reservations (whose claims keep the options
    /// the greedy chose for them): planned again in another [`LimitMode`] when that pass
    /// left pods out (see [`plan_with`]).
    fn deferrable_limits(&self) -> Vec<bool> {
        self.templates
            .iter()
            .zip(&self.limit_hit)
            .map(|(t, &hit)| hit && !t.has_reserved)
            .collect()
    }

    /// Whether the pending pods' requests of every resource the `pools` limit fit what
    /// those limits leave (a pool that leaves the resource unlimited takes any amount):
    /// only then can a plan within the limits place them all.
    fn requests_fit_limits(&self, pools: &[bool]) -> bool {
        let mut total = Resources::default();
        for pod in self.pods.iter().filter(|p| !p.is_daemon()) {
            arith::add_into(&mut total, &pod.requests);
        }
        let mut room: BTreeMap<&str, i64> = BTreeMap::new();
        for (t, _) in self.templates.iter().zip(pools).filter(|(_, p)| **p) {
            // `Remaining` keeps the pool's limits in their (sorted) order.
            let left = Remaining::new(t.pool).left();
            for (name, left) in t.pool.limits.keys().zip(left) {
                *room.entry(name.as_str()).or_default() += left.max(0);
            }
        }
        let unlimited_elsewhere = |name: &str| {
            self.templates
                .iter()
                .zip(pools)
                .any(|(t, p)| !p && !t.pool.limits.contains_key(name))
        };
        room.iter().all(|(&name, &left)| {
            name == limits::NODES || unlimited_elsewhere(name) || arith::get(&total, name) <= left
        })
    }

    /// Whether, in one of the `pools`, what its limits still leave plus what its claims
    /// count at their largest options beyond the types they are priced at makes at least a
    /// node's worth (the smallest type's capacity) in every limited resource: only then may
    /// counting each claim at the latter place more pods. A pass whose claims are full at
    /// their largest options (a limit that binds for real) would only be repeated.
    fn counted_beyond_price(&self, pools: &[bool]) -> bool {
        self.templates.iter().enumerate().any(|(ti, t)| {
            if !pools[ti] {
                return false;
            }
            let remaining = Remaining::new(t.pool);
            let charges = limits::Charges::new(&remaining, t);
            let mut beyond = charges.zero();
            for claim in self.claims.iter().filter(|c| c.template == ti) {
                let cheapest = limits::cheapest_option(&charges, t, &claim.options, &claim.reqs);
                let least =
                    limits::least_charge(&charges, t, &claim.options, &claim.reqs, cheapest);
                for ((b, most), least) in beyond
                    .iter_mut()
                    .zip(charges.largest(&claim.options))
                    .zip(least)
                {
                    *b += most - least;
                }
            }
            let all: Vec<u32> = (0..t.its.len() as u32).collect();
            let smallest = charges.smallest(&all);
            let left = self.remaining[ti].left();
            remaining
                .names()
                .zip(beyond.iter().zip(&left).zip(&smallest))
                .all(|(name, ((b, l), s))| name == limits::NODES || b + l.max(&0) >= *s)
        })
    }

    /// Sets how each template's claims count against its limits, before the greedy pass.
    fn set_limit_modes(&mut self, modes: Vec<LimitMode>) {
        for (ti, &mode) in modes.iter().enumerate() {
            match mode {
                LimitMode::Largest => {}
                LimitMode::Least => {
                    self.charge_tables[ti] = Some(limits::Charges::new(
                        &self.remaining[ti],
                        &self.templates[ti],
                    ));
                }
                LimitMode::Unbounded => self.remaining[ti] = self.remaining[ti].nodes_only(),
            }
        }
        self.modes = modes;
    }

    /// The cheapest option and least charge of a claim of template `ti` in
    /// [`LimitMode::Least`] with these `options` and `reqs`, given its `before` (the same
    /// when its cheapest option stays and its requirements and minValues do not change it);
    /// `None` for other templates.
    fn least_of(
        &self,
        ti: usize,
        options: &[u32],
        reqs: &Requirements,
        reqs_changed: bool,
        before: Option<&(Option<u32>, Vec<i64>)>,
    ) -> Option<(Option<u32>, Vec<i64>)> {
        let charges = self.charge_tables[ti].as_ref()?;
        if let Some((Some(cheapest), least)) = before
            && !reqs_changed
            && !reqs.has_min_values()
            && options.binary_search(cheapest).is_ok()
        {
            return Some((Some(*cheapest), least.clone()));
        }
        let t = &self.templates[ti];
        let cheapest = limits::cheapest_option(charges, t, options, reqs);
        Some((
            cheapest,
            limits::least_charge(charges, t, options, reqs, cheapest),
        ))
    }

    /// Drops the options of claim `c` (of a template in [`LimitMode::Least`]) that need
    /// more than what remains of the limits on top of its least charge. They could never
    /// launch (what remains only shrinks), and without them the claim scan's first check
    /// turns away the pods that would have outgrown what remains, instead of pricing every
    /// option again for each of them. Its cheapest option (and those minValues needs) stay.
    fn trim_to_limits(&mut self, c: usize) {
        let ti = self.claims[c].template;
        let Some(charges) = self.charge_tables[ti].as_ref() else {
            return;
        };
        let cap: Vec<i64> = self.charges[c]
            .1
            .iter()
            .zip(self.remaining[ti].left())
            .map(|(l, r)| l + r.max(0))
            .collect();
        let t = &self.templates[ti];
        let claim = &mut self.claims[c];
        if claim.options.iter().all(|&i| charges.within(i, &cap)) {
            return;
        }
        claim.retain_options(t, |&i| charges.within(i, &cap));
        self.headroom[c] = headroom::Headroom::of(claim, t);
    }

    /// Tries pod `p`, relaxing preferences until it fits or nothing is left to relax.
    /// The error carries whether any relaxation happened.
    fn try_schedule(&mut self, p: usize) -> Result<(), (Rejection, bool)> {
        let pod = &self.pods[p];
        let all = Rc::clone(&self.base);
        let base = match &all[p] {
            Ok(d) => d,
            Err(e) => {
                let why = format!("invalid pod constraints: {e}");
                return Err((Rejection::plain(why), false));
            }
        };
        let mut relaxed = Relaxed::new(pod, self.options.preference_policy);
        let mut data: Cow<'_, PodData> = Cow::Borrowed(base);
        let mut changed = false;
        loop {
            let err = match self.add(p, &data) {
                Ok(()) => {
                    self.prefers_node[p] = !relaxed.preferred_node.is_empty();
                    return Ok(());
                }
                Err(e) if e.deferred => return Err((e, changed)),
                Err(e) => e,
            };
            if !relaxed.relax(self.tolerate_pns_step) {
                return Err((err, changed));
            }
            changed = true;
            self.topology.update(p, &relaxed, &self.cluster);
            data = Cow::Owned(PodData::new(&relaxed).map_err(|e| (Rejection::plain(e), true))?);
        }
    }

    fn add(&mut self, p: usize, data: &PodData) -> Result<(), Rejection> {
        let pod = &self.pods[p];
        for n in &mut self.existing {
            if let Some(reqs) = n.can_add(p, pod, data, &self.topology) {
                n.add(p, pod, data, reqs, &mut self.topology);
                return Ok(());
            }
        }

        // `claim_order` is kept sorted by pod count (see `commit_in_order`), in exactly the
        // order a stable sort by pod count before every pod would give.
        debug_assert!(
            self.claim_order
                .windows(2)
                .all(|w| self.claims[w[0]].pods.len() <= self.claims[w[1]].pods.len())
        );
        // Domain counts stay fixed until this pod is placed: decide once which zones (or
        // other non-hostname domains) its own groups still allow.
        let mut allowed = self.topology.allowed_domains(p, pod, &data.strict);
        // Zone groups are checked on bit sets; a zone no claim was ever pinned to has no
        // number and cannot intersect any claim's set.
        let zone_masks: Vec<u64> = allowed
            .iter()
            .filter(|(key, _)| *key == ZONE)
            .map(|(_, domains)| {
                domains
                    .iter()
                    .filter_map(|d| self.zone_ids.get(*d))
                    .fold(0u64, |m, &id| m | (1u64 << id))
            })
            .collect();
        allowed.retain(|(key, _)| *key != ZONE);
        let mut found = None;
        let mut outgrown = Vec::new();
        for (i, &c) in self.claim_order.iter().enumerate() {
            let claim = &self.claims[c];
            let ask = || claim.might_fit(&self.templates[claim.template], &data.requests);
            let fits = self.headroom[c]
                .might_fit(&data.requests)
                .unwrap_or_else(ask);
            debug_assert_eq!(fits, ask());
            if !fits
                || self
                    .topology
                    .hostname_blocked(p, pod, &claim.hostname, claim.host_number)
                || claim
                    .zone_mask
                    .is_some_and(|z| zone_masks.iter().any(|&m| z & m == 0))
                || topology::domains_blocked(&allowed, &claim.reqs)
            {
                continue;
            }
            if let Ok(update) = self.claim_can_add(claim, p, data, false) {
                let ti = claim.template;
                let reqs = update.reqs.as_ref().unwrap_or(&claim.reqs);
                let least = self.least_of(
                    ti,
                    &update.options,
                    reqs,
                    update.reqs.is_some(),
                    Some(&self.charges[c]),
                );
                if let Some((_, least)) = &least {
                    let growth: Vec<i64> = least
                        .iter()
                        .zip(&self.charges[c].1)
                        .map(|(n, o)| n - o)
                        .collect();
                    if !self.remaining[ti].admits(&growth) {
                        outgrown.push(c);
                        continue;
                    }
                }
                found = Some((i, c, update, least));
                break;
            }
        }
        for c in outgrown {
            self.trim_to_limits(c);
        }
        if let Some((i, c, update, least)) = found {
            self.commit(c, p, data, update);
            if let Some(least) = least {
                let growth: Vec<i64> = least
                    .1
                    .iter()
                    .zip(&self.charges[c].1)
                    .map(|(n, o)| n - o)
                    .collect();
                self.remaining[self.claims[c].template].subtract(&growth);
                self.charges[c] = least;
            }
            // A stable re-sort would move the claim, now one pod fuller, past the claims
            // that still have its old count and before those that already had the new one.
            let n = self.claims[c].pods.len();
            let claims = &self.claims;
            let end =
                i + 1 + self.claim_order[i + 1..].partition_point(|&x| claims[x].pods.len() < n);
            self.claim_order[i..end].rotate_left(1);
            return Ok(());
        }

        let mut rejections = Vec::new();
        for ti in 0..self.templates.len() {
            let t = &self.templates[ti];
            let pool = t.pool.name.clone();
            if self.remaining[ti].nodes_exhausted() {
                self.limit_hit[ti] = true;
                rejections.push((pool, "limit of nodes reached".to_string()));
                continue;
            }
            let mut exceeded = BTreeSet::new();
            // Limits rarely bind: when even the largest capacity fits, every type does.
            let options: Vec<u32> = if self.remaining[ti]
                .exceeded_by_capacity(&t.max_capacity)
                .is_empty()
            {
                (0..t.its.len() as u32).collect()
            } else {
                (0..t.its.len() as u32)
                    .filter(|&i| {
                        let over = self.remaining[ti].exceeded_by(t.its[i as usize]);
                        exceeded.extend(over.iter().map(|s| s.to_string()));
                        over.is_empty()
                    })
                    .collect()
            };
            if !exceeded.is_empty() {
                self.limit_hit[ti] = true;
            }
            if options.is_empty() {
                let names: Vec<String> = exceeded.into_iter().collect();
                rejections.push((pool, format!("limit of {} reached", names.join(", "))));
                continue;
            }
            self.next_host += 1;
            let claim = Claim::new(
                ti,
                t,
                format!("{}{:04}", topology::PLACEHOLDER_PREFIX, self.next_host),
                options,
            );
            match self.claim_can_add(&claim, p, data, true) {
                Ok(update) => {
                    self.headroom.push(headroom::Headroom::of(&claim, t));
                    self.claims.push(claim);
                    let c = self.claims.len() - 1;
                    self.commit(c, p, data, update);
                    // Appended and stably re-sorted, a new claim lands after every claim
                    // with as many pods.
                    let n = self.claims[c].pods.len();
                    let claims = &self.claims;
                    let at = self
                        .claim_order
                        .partition_point(|&x| claims[x].pods.len() <= n);
                    self.claim_order.insert(at, c);
                    let claim = &self.claims[c];
                    match self.least_of(ti, &claim.options, &claim.reqs, true, None) {
                        Some(least) => {
                            // Within what remains: every option is, so its cheapest is.
                            self.remaining[ti].subtract(&least.1);
                            self.charges.push(least);
                        }
                        None => {
                            let t = &self.templates[ti];
                            let its = claim.options.iter().map(|&i| t.its[i as usize]);
                            self.remaining[ti].subtract_claim(its);
                            self.charges.push((None, Vec::new()));
                        }
                    }
                    return Ok(());
                }
                Err(e) if e.deferred => {
                    // Upstream: a pool with reserved offerings this pod could use, all
                    // promised, is not passed over for a lower-weight pool.
                    rejections.push((pool, e.reason));
                    return Err(Rejection {
                        reason: reasons::per_pool(&rejections),
                        deferred: true,
                    });
                }
                Err(e) if exceeded.is_empty() => rejections.push((pool, e.reason)),
                Err(e) => {
                    let names: Vec<String> = exceeded.into_iter().collect();
                    rejections.push((
                        pool,
                        format!(
                            "{} (limit of {} reached for larger instance types)",
                            e.reason,
                            names.join(", ")
                        ),
                    ));
                }
            }
        }
        rejections.extend(self.skipped.iter().cloned());
        Err(Rejection::plain(reasons::per_pool(&rejections)))
    }

    /// `NodeClaim.CanAdd`.
    fn claim_can_add(
        &self,
        claim: &Claim,
        p: usize,
        data: &PodData,
        explain: bool,
    ) -> Result<ClaimUpdate, Rejection> {
        self.claim_update(claim, p, data, explain)
            .map_err(Rejection::plain)
            .and_then(|mut update| {
                let t = &self.templates[claim.template];
                let reqs = update.reqs.as_ref().unwrap_or(&claim.reqs);
                let decision = self
                    .reservations
                    .to_reserve(
                        t,
                        &claim.reserved,
                        &update.options,
                        reqs,
                        self.options.reserved_offering_mode,
                    )
                    .map_err(|why| Rejection {
                        reason: if explain {
                            why.to_string()
                        } else {
                            String::new()
                        },
                        deferred: why == reservations::DEFERRED,
                    })?;
                if let Some(options) = decision.options {
                    update.options = options;
                }
                update.reserved = decision.held;
                Ok(update)
            })
    }

    /// `NodeClaim.CanAdd` up to the instance types that remain, before reservations.
    fn claim_update(
        &self,
        claim: &Claim,
        p: usize,
        data: &PodData,
        explain: bool,
    ) -> Result<ClaimUpdate, String> {
        // Without `explain` the caller discards the reason: fail with an empty one.
        let why = |f: &dyn Fn() -> String| if explain { f() } else { String::new() };
        let pod = &self.pods[p];
        let t = &self.templates[claim.template];
        if let Some(taint) = first_untolerated(&t.pool.taints, &pod.tolerations, !data.tolerate_pns)
        {
            return Err(why(&|| {
                format!("did not tolerate taint {}", reasons::taint(taint))
            }));
        }
        let compatible = |reqs: &Requirements, other: &Requirements, what: &str| {
            if explain {
                reqs.compatible(other, true)
                    .map_err(|e| format!("{what}, {}", e.message))
            } else if nodeclaim::compatible_ok(reqs, other, true) {
                Ok(())
            } else {
                Err(String::new())
            }
        };
        compatible(&claim.reqs, &data.requirements, "incompatible requirements")?;
        // Most pods narrow nothing on a claim that already holds similar pods: borrow the
        // claim's requirements until some key really changes.
        let mut reqs: Cow<'_, Requirements> = Cow::Borrowed(&claim.reqs);
        let mut delta = Requirements::new();
        nodeclaim::merge(&mut reqs, &data.requirements, &mut delta);
        if !data.volume.is_empty() {
            compatible(&reqs, &data.volume, "incompatible volume requirements")?;
            nodeclaim::merge(&mut reqs, &data.volume, &mut delta);
        }
        let topo = self.topology.requirements(
            p,
            pod,
            &t.pool.taints,
            &data.strict,
            &reqs,
            true,
            explain,
        )?;
        if !topo.is_empty() {
            compatible(&reqs, &topo, "incompatible topology requirements")?;
            nodeclaim::merge(&mut reqs, &topo, &mut delta);
        }
        let changed = matches!(reqs, Cow::Owned(_));
        let (options, lowered) = claim.filter(
            t,
            &reqs,
            changed.then_some(&delta),
            &data.requests,
            &pod.host_ports,
            self.options.min_values_policy,
            explain,
        )?;
        let options = if data.devices.is_empty() {
            options
        } else {
            self.device_options(claim, data, options, explain)?
        };
        let reqs = match reqs {
            Cow::Owned(r) => Some(r),
            Cow::Borrowed(_) => None,
        };
        Ok(ClaimUpdate {
            reqs: lowered.or(reqs),
            options,
            reserved: Default::default(),
        })
    }

    /// The options whose devices serve the claims of the claim's pods and of the new pod
    /// at once (Karpenter's DRA allocation against the instance types' device templates).
    fn device_options(
        &self,
        claim: &Claim,
        data: &PodData,
        options: Vec<u32>,
        explain: bool,
    ) -> Result<Vec<u32>, String> {
        let t = &self.templates[claim.template];
        let placed = claim
            .pods
            .iter()
            .filter_map(|&q| self.base[q].as_ref().ok())
            .flat_map(|d| &d.devices);
        let mut first_err = None;
        let kept: Vec<u32> = options
            .into_iter()
            .filter(|&i| {
                let devices = &t.its[i as usize].devices;
                match crate::devices::allocate(devices, placed.clone().chain(&data.devices)) {
                    Ok(()) => true,
                    Err(e) => {
                        if explain && first_err.is_none() {
                            first_err = Some(e);
                        }
                        false
                    }
                }
            })
            .collect();
        if kept.is_empty() {
            return Err(first_err
                .map(|e| format!("allocating dynamic resources, no instance type can serve {e}"))
                .unwrap_or_default());
        }
        Ok(kept)
    }

    fn commit(&mut self, c: usize, p: usize, data: &PodData, update: ClaimUpdate) {
        let pod = &self.pods[p];
        let claim = &mut self.claims[c];
        let t = &self.templates[claim.template];
        let reqs_changed = update.reqs.is_some();
        self.reservations.update(&claim.reserved, &update.reserved);
        claim.apply(t, p, &data.requests, &pod.host_ports, update);
        if reqs_changed || claim.pods.len() == 1 {
            claim.zone_mask = zone_mask(&mut self.zone_ids, claim.reqs.get(ZONE));
        }
        claim.registered =
            self.topology
                .register_since(HOSTNAME, &claim.hostname, claim.registered);
        self.headroom[c] = headroom::Headroom::of(claim, t);
        self.topology
            .record(p, pod, &t.pool.taints, &claim.reqs, true);
    }

    fn finish(self, errors: Vec<Option<Rejection>>) -> Plan {
        let key = |p: usize| self.pods[p].key();
        let existing = self
            .existing
            .iter()
            .filter(|n| !n.pods.is_empty())
            .map(|n| NodePlacement {
                node: n.node.name.clone(),
                pods: n.pods.iter().map(|&p| key(p)).collect(),
            })
            .collect();
        let mut new_node_claims: Vec<NewNodeClaim> = Vec::with_capacity(self.claims.len());
        // Re-packed claims often share requirements and options: rank each set once and copy
        // the first claim's list. Keyed by a hash of the requirements, with the indices of
        // the claims already built under that key (equal requirements compared there), so
        // neither a hit nor a miss clones anything the plan does not keep.
        let mut ranked: HashMap<(usize, &[u32], u64), Vec<usize>> = HashMap::new();
        for claim in &self.claims {
            let t = &self.templates[claim.template];
            let mut requirements = Requirements::new();
            for r in claim.reqs.iter() {
                if ![HOSTNAME, NODE_REGISTERED, NODE_INITIALIZED].contains(&r.key()) {
                    requirements.add(r.clone());
                }
            }
            self.reservations
                .pin_requirements(t, &claim.reserved, &mut requirements);
            let same = ranked
                .entry((claim.template, claim.options.as_slice(), {
                    let mut h = DefaultHasher::new();
                    requirements.hash(&mut h);
                    h.finish()
                }))
                .or_default();
            let instance_type_options = match same
                .iter()
                .find(|&&c| new_node_claims[c].requirements == requirements)
            {
                Some(&c) => new_node_claims[c].instance_type_options.clone(),
                None => {
                    same.push(new_node_claims.len());
                    Arc::new(nodeclaim::ranked_options(t, &claim.options, &requirements))
                }
            };
            let mut groups: Vec<usize> = claim
                .options
                .iter()
                .map(|&i| t.group_of[i as usize])
                .collect();
            groups.sort_unstable();
            groups.dedup();
            let daemon_overhead = groups
                .iter()
                .map(|&g| t.groups[g].overhead.clone())
                .reduce(|a, b| arith::min(&a, &b))
                .unwrap_or_default();
            let requests: Resources = arith::sum(&claim.requests, &daemon_overhead);
            let price = instance_type_options.first().map_or(0.0, |o| o.price);
            new_node_claims.push(NewNodeClaim {
                node_pool: t.pool.name.clone(),
                requirements,
                instance_type_options,
                pods: claim.pods.iter().map(|&p| key(p)).collect(),
                requests,
                daemon_overhead,
                price,
            });
        }
        let mut unschedulable: Vec<UnschedulablePod> = errors
            .into_iter()
            .enumerate()
            .filter_map(|(p, e)| {
                e.map(|e| UnschedulablePod {
                    pod: key(p),
                    reason: e.reason,
                    deferred: e.deferred,
                })
            })
            .collect();
        unschedulable.sort_by(|a, b| a.pod.cmp(&b.pod));
        // An empty f64 sum is -0.0, which prints as "-0.0000 $/hour"; adding 0.0 makes it +0.0.
        let total_price = new_node_claims.iter().map(|c| c.price).sum::<f64>() + 0.0;
        Plan {
            existing,
            new_node_claims,
            unschedulable,
            total_price,
            lower_bound: None,
            greedy_price: None,
            optimizer: None,
            pending_by_effective_zone: Default::default(),
        }
    }
}
