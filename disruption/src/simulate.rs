//! Scheduling simulation (upstream's `SimulateScheduling`): remove candidate nodes, make
//! their pods pending, re-run [`solve`], and say whether every pod that must move found a
//! place.
//!
//! One working [`Snapshot`] is built per pass and edited in place for each simulation: the
//! candidates' nodes are moved out of `nodes` (which makes the solver ignore their bound
//! pods) and copies of the pods that must move are appended to `pending_pods`; afterwards the
//! copies are dropped and the nodes moved back into the canonical order. Only the moving
//! pods are cloned, and what the solver derives from nodes and pools (label requirements,
//! templates) is built once per pass.

use crate::candidate::{Candidate, do_not_disrupt_active, is_reschedulable, pool_of};
use crate::command::Hold;
use crate::input::DisruptionInput;
use karpenter_scheduling::model::{Millis, Node, NodeState, Pod, PodKey, Snapshot};
use karpenter_scheduling::plan::{NewNodeClaim, Plan};
use karpenter_scheduling::resources::Resources;
use karpenter_scheduling::solver::{
    OptimizerOptions, ReservedOfferingMode, SolveCache, SolveOptions, solve_cached,
};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// What a simulation found.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// The first pod that must move but cannot, and why.
    pub failure: Option<Hold>,
    /// New NodeClaims holding at least one pod that must move or a CapacityBuffer's virtual
    /// pod (claims only for real pods that were pending anyway are left to provisioning).
    pub claims: Vec<NewNodeClaim>,
}

/// Whether `p` is a CapacityBuffer's virtual pod (the annotation the cluster crate stamps).
fn is_buffer_pod(p: &Pod) -> bool {
    p.annotations
        .get(karpenter_cloudprovider::autoscaling::v1beta1::FAKE_POD_ANNOTATION)
        .is_some_and(|v| v == "true")
}

fn bound_key(p: &Pod) -> (&str, &str, &str) {
    (
        p.node_name.as_deref().unwrap_or(""),
        p.namespace.as_str(),
        p.name.as_str(),
    )
}

/// How a simulation packs the pods that need new nodes.
#[derive(Debug, Clone, Copy)]
enum Packing {
    /// Drift's: as provisioning does, greedy, then the optimiser (when enabled).
    Full,
    /// Consolidation's: greedy alone, unless it needs more than one new node. The moving
    /// pods are marked, so nodes under consolidateAfter refuse them.
    GreedyFirst,
    /// Re-pack consolidation's: greedy, then the optimiser (when enabled), the moving pods
    /// marked as for consolidation.
    Repack,
    /// A scheduler's first fit: the greedy alone, the moving pods marked as for
    /// consolidation.
    FirstFit,
}

/// The pass's working snapshot and simulation counter.
pub(crate) struct Simulator<'c> {
    snap: Snapshot,
    options: SolveOptions,
    /// `options` with the optimiser off: Karpenter's own scheduling simulation.
    greedy: SolveOptions,
    /// Where each node's pods are in `snap.bound_pods` (sorted by node, never edited after
    /// [`Simulator::new`]).
    bound_on: BTreeMap<String, Range<usize>>,
    /// Pods of nodes already going away: they must schedule too.
    deleting_pods: BTreeSet<PodKey>,
    /// CapacityBuffers' virtual pods (pending in every simulation): a new node they need
    /// counts as a replacement, so removing a node does not take a buffer's room away for
    /// free; a virtual pod that fits nowhere does not block the move, as upstream.
    buffer_pods: BTreeSet<PodKey>,
    /// Nodes a moving pod may not land on: not yet initialized.
    uninitialized: BTreeSet<String>,
    /// Free capacity (never negative) of each ready node not under consolidateAfter, for the
    /// cheap pre-filter.
    free: BTreeMap<String, Resources>,
    total_free: Resources,
    /// (allocatable, cheapest available price) of every instance type of every pool.
    shapes: Vec<(Resources, f64)>,
    /// What the solver derives from the working snapshot's nodes and pools: built once for
    /// all the simulations, and kept by the caller for the next pass.
    cache: &'c mut SolveCache,
    /// Simulations run.
    pub runs: usize,
    limit: usize,
}

impl<'c> Simulator<'c> {
    /// The working copy of `input.cluster` with the nodes in `gone` (and nodes deleting or
    /// queued) removed and their reschedulable pods pending. `cache` forgets the nodes the
    /// copy does not have.
    pub fn new(
        input: &DisruptionInput,
        gone: &BTreeSet<String>,
        now: Millis,
        cache: &'c mut SolveCache,
    ) -> Self {
        let mut snap = input.cluster.clone();
        let leaving = |n: &Node| {
            n.state == NodeState::Deleting
                || gone.contains(&n.name)
                || input.disrupting.contains(&n.name)
                || input.nodes.get(&n.name).is_some_and(|i| i.deleting)
        };
        let leaving_names: BTreeSet<String> = snap
            .nodes
            .iter()
            .filter(|n| leaving(n))
            .map(|n| n.name.clone())
            .collect();
        snap.nodes.retain(|n| !leaving_names.contains(&n.name));
        // Karpenter v1.14: a node still inside its pool's consolidateAfter window receives no
        // pod a consolidation moves (only consolidation marks its pods, see `run`).
        for n in &mut snap.nodes {
            n.under_consolidate_after = input.nodes.get(&n.name).is_some_and(|info| {
                pool_of(n)
                    .and_then(|p| input.node_pools.get(p))
                    .is_some_and(|pool| info.under_consolidate_after(pool, now))
            });
        }
        let bound = std::mem::take(&mut snap.bound_pods);
        let mut deleting_pods = BTreeSet::new();
        let mut moved = Vec::new();
        for mut p in bound {
            let on_leaving = p
                .node_name
                .as_deref()
                .is_some_and(|n| leaving_names.contains(n));
            if !on_leaving {
                snap.bound_pods.push(p);
                continue;
            }
            let fully_blocked = input.pdbs.iter().any(|b| b.fully_blocking && b.matches(&p));
            if is_reschedulable(&p) && !do_not_disrupt_active(&p, now) && !fully_blocked {
                p.node_name = None;
                deleting_pods.insert(p.key());
                moved.push(p);
            }
        }
        moved.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let buffer_pods = snap
            .pending_pods
            .iter()
            .filter(|p| is_buffer_pod(p))
            .map(Pod::key)
            .collect();
        snap.pending_pods.extend(moved);
        snap.nodes.sort_by(|a, b| a.name.cmp(&b.name));
        cache.retain_nodes(|name| {
            snap.nodes
                .binary_search_by(|n| n.name.as_str().cmp(name))
                .is_ok()
        });
        snap.bound_pods
            .sort_by(|a, b| bound_key(a).cmp(&bound_key(b)));
        let mut bound_on: BTreeMap<String, Range<usize>> = BTreeMap::new();
        for (i, p) in snap.bound_pods.iter().enumerate() {
            if let Some(n) = &p.node_name {
                match bound_on.get_mut(n) {
                    Some(r) => r.end = i + 1,
                    None => {
                        bound_on.insert(n.clone(), i..i + 1);
                    }
                }
            }
        }

        let uninitialized = snap
            .nodes
            .iter()
            .filter(|n| {
                n.state != NodeState::Ready
                    || input.nodes.get(&n.name).is_some_and(|i| !i.initialized)
            })
            .map(|n| n.name.clone())
            .collect();

        let mut used: BTreeMap<&str, Resources> = BTreeMap::new();
        for p in snap.bound_pods.iter().filter(|p| !p.terminating) {
            if let Some(n) = p.node_name.as_deref() {
                used.entry(n).or_default().add_assign(&p.requests);
            }
        }
        let mut free = BTreeMap::new();
        let mut total_free = Resources::default();
        // Only consolidation asks for the bound (`replacement_lower_bound`), and its moving
        // pods cannot use a node under consolidateAfter.
        let open = |n: &&Node| n.state == NodeState::Ready && !n.under_consolidate_after;
        for n in snap.nodes.iter().filter(open) {
            let mut f = n.allocatable.clone();
            if let Some(u) = used.get(n.name.as_str()) {
                f.sub_assign(u);
            }
            let f = f.max(&Resources::default());
            total_free.add_assign(&f);
            free.insert(n.name.clone(), f);
        }
        let mut shapes: Vec<(Resources, f64)> = snap
            .node_pools
            .iter()
            .flat_map(|p| p.instance_types.iter())
            .filter_map(|it| {
                let price = it
                    .offerings
                    .iter()
                    .filter(|o| o.available && o.price.is_finite())
                    .map(|o| o.price)
                    .reduce(f64::min)?;
                Some((it.allocatable(), price))
            })
            .collect();
        shapes.sort_by(|a, b| a.1.total_cmp(&b.1));

        Self {
            snap,
            bound_on,
            // Upstream's disruption simulations let a pod whose reserved offerings are all
            // promised fall back to another capacity type (the provisioner defers it).
            options: SolveOptions {
                reserved_offering_mode: ReservedOfferingMode::Fallback,
                ..input.options.solve.clone()
            },
            greedy: SolveOptions {
                optimizer: OptimizerOptions {
                    enabled: false,
                    ..input.options.solve.optimizer.clone()
                },
                reserved_offering_mode: ReservedOfferingMode::Fallback,
                ..input.options.solve.clone()
            },
            deleting_pods,
            buffer_pods,
            uninitialized,
            free,
            total_free,
            shapes,
            cache,
            runs: 0,
            limit: input.options.max_simulations,
        }
    }

    /// Whether another simulation fits in the pass's work budget.
    pub fn has_budget(&self) -> bool {
        self.runs < self.limit
    }

    /// Whether no pod of a node already going away (deleting, or another command's) needs
    /// a place: the simulations then plan only the pods they move and the pending ones.
    pub fn settled(&self) -> bool {
        self.deleting_pods.is_empty()
    }

    /// Grants `more` simulations from now on, whatever earlier methods spent: a method with
    /// its own allowance (re-packing) runs even after Karpenter's spent theirs.
    pub fn allow_more(&mut self, more: usize) {
        self.limit = self.runs.saturating_add(more);
    }

    /// A lower bound on what replacing `cands` must cost per hour, or `None` when their pods
    /// might all fit on free capacity (a delete may be possible). Sound: whatever does not
    /// fit in the total free capacity of the other ready nodes that may receive moved pods
    /// (not under consolidateAfter) needs a new node at least that large, ignoring DaemonSet
    /// overhead.
    pub fn replacement_lower_bound(&self, cands: &[&Candidate]) -> Option<f64> {
        let rest = self.beyond_free_capacity(cands)?;
        Some(
            self.shapes
                .iter()
                .find(|(alloc, _)| rest.fits(alloc))
                .map_or(f64::INFINITY, |(_, p)| *p),
        )
    }

    /// A lower bound on what any number of new nodes holding the pods of `cands` costs
    /// per hour, or `None` when those pods might all fit on free capacity. Sound: what the
    /// free capacity of the other ready nodes that may receive moved pods cannot hold must
    /// be bought, and each resource of it costs at least its amount times the least price
    /// per unit of that resource over every instance type (DaemonSet overhead ignored).
    pub fn new_capacity_lower_bound(&self, cands: &[&Candidate]) -> Option<f64> {
        let rest = self.beyond_free_capacity(cands)?;
        Some(
            rest.iter()
                .map(|(name, amount)| {
                    let per_unit = self
                        .shapes
                        .iter()
                        .filter_map(|(alloc, price)| {
                            let a = alloc.get(name);
                            (a > 0).then(|| price / a as f64)
                        })
                        .fold(f64::INFINITY, f64::min);
                    amount as f64 * per_unit
                })
                .fold(0.0, f64::max),
        )
    }

    /// What the pods of `cands` request beyond the free capacity of the other ready nodes
    /// that may receive moved pods, or `None` when nothing is beyond it.
    fn beyond_free_capacity(&self, cands: &[&Candidate]) -> Option<Resources> {
        let mut free = self.total_free.clone();
        let mut need = Resources::default();
        for c in cands {
            if let Some(f) = self.free.get(&c.node) {
                free.sub_assign(f);
            }
            need.add_assign(&c.pod_requests);
        }
        let mut rest = need.clone();
        rest.sub_assign(&free);
        let rest = rest.max(&Resources::default());
        (!rest.is_zero()).then_some(rest)
    }

    /// Simulates removing `cands`, packing new capacity as provisioning would (optimiser
    /// included), for moves whose replacements are launched as planned (drift). `None` when
    /// the work budget is spent.
    pub fn simulate(&mut self, cands: &[&Candidate]) -> Option<Outcome> {
        self.run(cands, Packing::Full, Vec::new())
    }

    /// Simulates consolidating `cands`: Karpenter's greedy scheduling simulation first, and
    /// the optimiser only when the greedy needs more than one new node. Consolidation takes
    /// no move with more than one replacement, so only then can re-packing turn a refusal
    /// into a move; the pods the greedy cannot place, those it places on existing nodes, and
    /// a single replacement (ranked cheapest first) are what Karpenter's simulation decides
    /// on. `None` when the work budget is spent.
    pub fn simulate_consolidation(&mut self, cands: &[&Candidate]) -> Option<Outcome> {
        self.run(cands, Packing::GreedyFirst, Vec::new())
    }

    /// Simulates re-packing `cands`: their pods (and the pending ones) planned as
    /// provisioning plans them, greedy then optimiser, with consolidation's rule that nodes
    /// under consolidateAfter refuse moved pods. `None` when the work budget is spent.
    pub fn simulate_repack(&mut self, cands: &[&Candidate]) -> Option<Outcome> {
        self.run(cands, Packing::Repack, Vec::new())
    }

    /// Simulates removing `cands` with `extra` ready nodes added (replacements as they will
    /// be), placing the pods as a scheduler's first fit does: the greedy pass alone, in its
    /// order of pods and nodes, with consolidation's rule that nodes under consolidateAfter
    /// refuse moved pods. New claims in the outcome hold what first fit could not place on
    /// the nodes. `None` when the work budget is spent.
    pub fn simulate_first_fit(
        &mut self,
        cands: &[&Candidate],
        extra: Vec<Node>,
    ) -> Option<Outcome> {
        self.run(cands, Packing::FirstFit, extra)
    }

    fn run(&mut self, cands: &[&Candidate], packing: Packing, extra: Vec<Node>) -> Option<Outcome> {
        if !self.has_budget() {
            return None;
        }
        self.runs += 1;
        let names: BTreeSet<&str> = cands.iter().map(|c| c.node.as_str()).collect();
        let must: BTreeSet<&PodKey> = cands.iter().flat_map(|c| c.pods.iter()).collect();
        // Upstream enforces consolidateAfter on destinations in consolidation simulations
        // (and their validation) only, not in drift's.
        let consolidating = !matches!(packing, Packing::Full);

        let nodes = std::mem::take(&mut self.snap.nodes);
        let (removed_nodes, kept_nodes): (Vec<Node>, Vec<Node>) = nodes
            .into_iter()
            .partition(|n| names.contains(n.name.as_str()));
        self.snap.nodes = kept_nodes;
        let kept = self.snap.nodes.len();
        self.snap.nodes.extend(extra);
        // The candidates' bound pods stay where they are: with their nodes gone the solver
        // ignores them (see `Snapshot::bound_pods`). Those that must move are pending copies.
        let base = self.snap.pending_pods.len();
        for name in &names {
            let Some(range) = self.bound_on.get(*name) else {
                continue;
            };
            for p in &self.snap.bound_pods[range.clone()] {
                if must.contains(&p.key()) {
                    let mut moving = p.clone();
                    moving.node_name = None;
                    moving.moved_by_consolidation = consolidating;
                    self.snap.pending_pods.push(moving);
                }
            }
        }

        let outcome = match packing {
            Packing::Full | Packing::Repack => self.solve(&must, true),
            Packing::FirstFit => self.solve(&must, false),
            Packing::GreedyFirst => {
                let greedy = self.solve(&must, false);
                if greedy.failure.is_none()
                    && greedy.claims.len() > 1
                    && self.options.optimizer.enabled
                    && self.one_node_might_hold(&greedy.claims, &must)
                {
                    self.solve(&must, true)
                } else {
                    greedy
                }
            }
        };

        self.snap.pending_pods.truncate(base);
        self.snap.nodes.truncate(kept);
        self.snap.nodes.extend(removed_nodes);
        self.snap.nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Some(outcome)
    }

    /// Whether the pods of `claims` that need a place (they must move, or their node is
    /// going away) might fit one new node: their summed requests fit some instance type's
    /// allocatable. The optimiser never moves a pod onto an existing node nor packs a node
    /// beyond its allocatable, so when this is false it cannot turn `claims` into the single
    /// replacement consolidation needs.
    fn one_node_might_hold(&self, claims: &[NewNodeClaim], must: &BTreeSet<&PodKey>) -> bool {
        let placed: BTreeSet<&PodKey> = claims
            .iter()
            .flat_map(|c| c.pods.iter())
            .filter(|k| {
                must.contains(k) || self.deleting_pods.contains(k) || self.buffer_pods.contains(k)
            })
            .collect();
        let mut need = Resources::default();
        for p in &self.snap.pending_pods {
            if placed.contains(&p.key()) {
                // As the solver counts a pod: its requests and one pod slot.
                let mut r = p.requests.clone();
                r.pods = 1;
                need.add_assign(&r);
            }
        }
        self.shapes.iter().any(|(alloc, _)| need.fits(alloc))
    }

    fn solve(&mut self, must: &BTreeSet<&PodKey>, optimise: bool) -> Outcome {
        let options = if optimise {
            &self.options
        } else {
            &self.greedy
        };
        let plan = solve_cached(&self.snap, options, self.cache);
        self.judge(plan, must)
    }

    fn judge(&self, plan: Plan, must: &BTreeSet<&PodKey>) -> Outcome {
        let needs_place = |k: &PodKey| must.contains(k) || self.deleting_pods.contains(k);
        let mut failure = plan
            .unschedulable
            .iter()
            .find(|u| needs_place(&u.pod))
            .map(|u| Hold::WouldNotFit {
                pod: u.pod.clone(),
                reason: u.reason.clone(),
            });
        if failure.is_none() {
            failure = plan
                .existing
                .iter()
                .filter(|e| self.uninitialized.contains(&e.node))
                .find_map(|e| {
                    e.pods
                        .iter()
                        .find(|k| must.contains(k))
                        .map(|k| Hold::WouldNotFit {
                            pod: k.clone(),
                            reason: format!("would schedule against uninitialized node {}", e.node),
                        })
                });
        }
        let claims = plan
            .new_node_claims
            .into_iter()
            .filter(|c| {
                c.pods
                    .iter()
                    .any(|k| needs_place(k) || self.buffer_pods.contains(k))
            })
            .collect();
        Outcome { failure, claims }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidate::evaluate;
    use karpenter_scheduling::model::{InstanceType, NodePool, Offering, Overhead};
    use karpenter_scheduling::requirements::Requirements;
    use std::sync::Arc;

    /// The pool `p`, launching one instance type of four cores and ten pods at 1.0 an hour.
    fn four_core_pool() -> NodePool {
        NodePool {
            name: "p".into(),
            instance_types: vec![Arc::new(InstanceType {
                devices: Vec::new(),
                name: "four-cores".into(),
                requirements: Requirements::new(),
                capacity: Resources {
                    cpu_millis: 4000,
                    pods: 10,
                    ..Resources::default()
                },
                overhead: Overhead::default(),
                offerings: vec![Offering {
                    zone: "z".into(),
                    capacity_type: "on-demand".into(),
                    price: 1.0,
                    available: true,
                    reservation: None,
                }],
            })],
            ..NodePool::default()
        }
    }

    /// The pod `ns/{node}-pod`, bound to `node`, requesting one core and one pod slot.
    fn one_core_pod(node: &str) -> Pod {
        Pod {
            namespace: "ns".into(),
            name: format!("{node}-pod"),
            node_name: Some(node.into()),
            requests: Resources {
                cpu_millis: 1000,
                pods: 1,
                ..Resources::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn simulation_restores_the_working_snapshot_exactly() {
        let mut input = DisruptionInput::default();
        input.cluster.node_pools.push(NodePool {
            name: "p".into(),
            ..NodePool::default()
        });
        input
            .node_pools
            .insert("p".into(), crate::input::PoolDisruption::default());
        for n in ["b", "a"] {
            input.cluster.nodes.push(Node {
                name: n.into(),
                node_pool: Some("p".into()),
                allocatable: Resources {
                    cpu_millis: 4000,
                    pods: 10,
                    ..Resources::default()
                },
                ..Node::default()
            });
            input.nodes.insert(
                n.into(),
                crate::input::NodeInfo {
                    initialized: true,
                    ready: true,
                    ..Default::default()
                },
            );
            input.cluster.bound_pods.push(one_core_pod(n));
        }
        let gone = BTreeSet::new();
        let eval = evaluate(&input, 0, &gone);
        let mut cache = SolveCache::new();
        let mut sim = Simulator::new(&input, &gone, 0, &mut cache);
        let before = sim.snap.clone();
        let a: Vec<&Candidate> = eval.candidates.iter().filter(|c| c.node == "a").collect();
        let out = sim.simulate(&a).expect("budget");
        // a's pod fits on b.
        assert!(out.failure.is_none(), "{:?}", out.failure);
        assert!(out.claims.is_empty());
        assert_eq!(sim.snap, before);
        assert_eq!(sim.runs, 1);
        // Without a pool that can launch, both at once cannot move.
        let both: Vec<&Candidate> = eval.candidates.iter().collect();
        let out = sim.simulate(&both).expect("budget");
        assert!(matches!(out.failure, Some(Hold::WouldNotFit { .. })));
        assert_eq!(sim.snap, before);
        // Free capacity: each node has 3 cpu spare, so one node's pod needs no new node.
        assert_eq!(sim.replacement_lower_bound(&a), None);
    }

    #[test]
    fn only_consolidation_keeps_moved_pods_off_nodes_under_consolidate_after() {
        let now = 36_000_000;
        let mut input = DisruptionInput::default();
        input.cluster.node_pools.push(four_core_pool());
        input.node_pools.insert(
            "p".into(),
            crate::input::PoolDisruption {
                consolidate_after: Some(60_000),
                ..Default::default()
            },
        );
        // `a-dest` took a pod a second ago; `b-cand` is the candidate; `c-going` is already
        // being disrupted by an earlier command.
        for (n, last_pod_event_at) in [
            ("a-dest", Some(now - 1_000)),
            ("b-cand", None),
            ("c-going", None),
        ] {
            input.cluster.nodes.push(Node {
                name: n.into(),
                node_pool: Some("p".into()),
                allocatable: Resources {
                    cpu_millis: 4000,
                    pods: 10,
                    ..Resources::default()
                },
                ..Node::default()
            });
            input.nodes.insert(
                n.into(),
                crate::input::NodeInfo {
                    initialized: true,
                    initialized_at: Some(0),
                    last_pod_event_at,
                    ready: true,
                    ..Default::default()
                },
            );
            if n != "a-dest" {
                input.cluster.bound_pods.push(one_core_pod(n));
            }
        }
        input.disrupting.insert("c-going".into());
        let gone = BTreeSet::new();
        let eval = evaluate(&input, now, &gone);
        let cand: Vec<&Candidate> = eval
            .candidates
            .iter()
            .filter(|c| c.node == "b-cand")
            .collect();
        assert_eq!(cand.len(), 1);
        let mut cache = SolveCache::new();
        let mut sim = Simulator::new(&input, &gone, now, &mut cache);
        // Consolidation: the moved pod needs a new node; the pod of the node already going
        // away is exempt and lands on `a-dest`.
        let out = sim.simulate_consolidation(&cand).expect("budget");
        assert!(out.failure.is_none(), "{:?}", out.failure);
        let placed: Vec<&str> = out
            .claims
            .iter()
            .flat_map(|c| c.pods.iter().map(|k| k.name.as_str()))
            .collect();
        assert_eq!(placed, ["b-cand-pod"]);
        // The lower bound does not count `a-dest`'s free capacity either.
        assert_eq!(sim.replacement_lower_bound(&cand), Some(1.0));
        // Drift's simulation does not enforce the window: both pods go to `a-dest`.
        let out = sim.simulate(&cand).expect("budget");
        assert!(out.failure.is_none() && out.claims.is_empty(), "{out:?}");
    }

    #[test]
    fn one_new_node_might_hold_only_what_fits_the_largest_type() {
        let mut input = DisruptionInput::default();
        input.cluster.node_pools.push(four_core_pool());
        let mut cache = SolveCache::new();
        let mut sim = Simulator::new(&input, &BTreeSet::new(), 0, &mut cache);
        for name in ["a", "b"] {
            sim.snap.pending_pods.push(Pod {
                namespace: "ns".into(),
                name: name.into(),
                requests: Resources {
                    cpu_millis: 3000,
                    ..Resources::default()
                },
                ..Pod::default()
            });
        }
        let keys: Vec<PodKey> = sim.snap.pending_pods.iter().map(Pod::key).collect();
        let claims: Vec<NewNodeClaim> = keys
            .iter()
            .map(|k| NewNodeClaim {
                node_pool: "p".into(),
                requirements: Requirements::new(),
                instance_type_options: Arc::default(),
                pods: vec![k.clone()],
                requests: Resources::default(),
                daemon_overhead: Resources::default(),
                price: 1.0,
            })
            .collect();
        // Six cores of pods that must move: no four-core node holds them, so re-packing the
        // two claims cannot give the single replacement consolidation needs.
        let both: BTreeSet<&PodKey> = keys.iter().collect();
        assert!(!sim.one_node_might_hold(&claims, &both));
        // Only `a` must move (`b` was pending anyway): one node might do.
        let a: BTreeSet<&PodKey> = keys[..1].iter().collect();
        assert!(sim.one_node_might_hold(&claims, &a));
    }
}
