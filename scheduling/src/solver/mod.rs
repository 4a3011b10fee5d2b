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
use limits::Remaining;
use nodeclaim::{Claim, ClaimUpdate, Template};
use pods::PodData;
use preferences::Relaxed;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
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
    Scheduler::new(snapshot, options, &mut SolveCache::new()).run(deadline)
}

/// [`solve`], reusing what `cache` derived from nodes and NodePools that have not changed
/// since it saw them (and remembering the others). For callers that solve many snapshots
/// over the same nodes and pools, such as a disruption pass's simulations; the plan is the
/// one [`solve`] gives.
pub fn solve_cached(snapshot: &Snapshot, options: &SolveOptions, cache: &mut SolveCache) -> Plan {
    Scheduler::new(snapshot, options, cache).run(None)
}

struct Scheduler<'a> {
    options: &'a SolveOptions,
    pods: &'a [Pod],
    cluster: Cluster<'a>,
    topology: Topology,
    templates: Vec<Template<'a>>,
    skipped: Vec<(String, String)>,
    remaining: Vec<Remaining>,
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
    fn new(snapshot: &'a Snapshot, options: &'a SolveOptions, cache: &'a mut SolveCache) -> Self {
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
        let node_reqs: Vec<_> = snapshot.nodes.iter().map(|n| cache.node(n)).collect();
        let entries = cache.pools(&snapshot.node_pools);
        let cluster = Cluster {
            nodes: snapshot
                .nodes
                .iter()
                .zip(&node_reqs)
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
            remaining,
            existing,
            claims: Vec::new(),
            headroom: Vec::new(),
            claim_order: Vec::new(),
            base: Rc::new(base),
            tolerate_pns_step,
            next_host: 0,
            zone_ids: HashMap::new(),
            reservations,
        }
    }

    fn run(self, deadline: Option<&dyn Fn() -> bool>) -> Plan {
        // Counted before any pod is placed, as upstream counts them.
        let by_zone = self.pending_by_effective_zone();
        let mut plan = self.place(deadline);
        plan.pending_by_effective_zone = by_zone;
        plan
    }

    fn place(mut self, deadline: Option<&dyn Fn() -> bool>) -> Plan {
        let candidates: Vec<usize> = (0..self.pods.len())
            .filter(|&p| !self.pods[p].is_daemon())
            .collect();
        let mut queue = queue::Queue::new(self.pods, candidates);
        let mut errors: Vec<Option<Rejection>> = std::iter::repeat_with(|| None)
            .take(self.pods.len())
            .collect();
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
        if !self.options.optimizer.enabled {
            return self.finish(errors);
        }
        let optimized = optimize::optimize(&self, &self.options.optimizer, deadline);
        if let Some(claims) = optimized.claims {
            self.claims = claims;
        }
        let mut plan = self.finish(errors);
        plan.greedy_price = Some(optimized.greedy_price);
        plan.lower_bound = optimized.lower_bound;
        plan.optimizer = Some(optimized.stats);
        plan
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
                Ok(()) => return Ok(()),
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
                found = Some((i, c, update));
                break;
            }
        }
        if let Some((i, c, update)) = found {
            self.commit(c, p, data, update);
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
                    let t = &self.templates[ti];
                    let its = self.claims[c].options.iter().map(|&i| t.its[i as usize]);
                    self.remaining[ti].subtract_claim(its);
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
