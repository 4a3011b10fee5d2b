//! Which nodes may be disrupted, what evicting their pods costs, and why the others may not.
//!
//! Follows upstream's `NewCandidate` / `ValidateNodeDisruptable` / `ValidatePodsDisruptable`
//! and `pkg/utils/disruption`: a candidate is a Karpenter-managed, initialized node of a known
//! NodePool that is not deleting, not queued, not nominated and not annotated
//! `karpenter.sh/do-not-disrupt: "true"`; its pods must not carry an active `do-not-disrupt`
//! and must be evictable under their PodDisruptionBudget (a pod under several budgets blocks,
//! as the eviction API refuses it).

use crate::command::Hold;
use crate::input::{DisruptionInput, NodeInfo, PoolDisruption};
use karpenter_cloudprovider::duration::parse_go_duration;
use karpenter_cloudprovider::v1::labels as v1labels;
use karpenter_scheduling::labels::{DO_NOT_DISRUPT, NODEPOOL};
use karpenter_scheduling::model::{Millis, Node, NodeState, Pod, PodKey};
use karpenter_scheduling::requirements::Requirements;
use karpenter_scheduling::resources::Resources;
use karpenter_scheduling::taints::{Taint, TaintEffect};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// `controller.kubernetes.io/pod-deletion-cost`.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Upstream's `PerNodeBaseDisruptionCost`.
pub const PER_NODE_BASE_DISRUPTION_COST: f64 = 1.0;

/// `karpenter.sh/disruption-cost` (Karpenter v1.15): a user's int32 cost of evicting the pod,
/// read before [`POD_DELETION_COST`].
pub const DISRUPTION_COST: &str = "karpenter.sh/disruption-cost";

/// Upstream's `EvictionCost` (v1.15): 1, plus the pod's cost annotation scaled by 2⁻²⁷, plus
/// the priority scaled by 2⁻²⁵, clamped to [-10, 10]. The cost annotation is
/// `karpenter.sh/disruption-cost` when the pod has it (even with a value that does not parse),
/// else `controller.kubernetes.io/pod-deletion-cost`; either must be a decimal int32 as Go's
/// `strconv.ParseInt(s, 10, 32)` reads it, and a value that is not is ignored.
pub fn eviction_cost(pod: &Pod) -> f64 {
    let mut cost = 1.0;
    let annotation = pod
        .annotations
        .get(DISRUPTION_COST)
        .or_else(|| pod.annotations.get(POD_DELETION_COST));
    if let Some(c) = annotation.and_then(|v| v.parse::<i32>().ok()) {
        cost += f64::from(c) / 2f64.powi(27);
    }
    cost += f64::from(pod.priority) / 2f64.powi(25);
    cost.clamp(-10.0, 10.0)
}

/// Upstream's `RescheduleDisruptionCost` of a node whose evicted pods are `pods`: the
/// per-node base cost plus each pod's eviction cost, negative costs counting as 0. Always at
/// least [`PER_NODE_BASE_DISRUPTION_COST`].
pub fn node_disruption_cost<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> f64 {
    pods.into_iter()
        .fold(PER_NODE_BASE_DISRUPTION_COST, |cost, p| {
            cost + eviction_cost(p).max(0.0)
        })
}

/// Upstream's `LifetimeRemaining`: the fraction of `expire_after` still ahead of a node
/// created at `created_at`, in [0, 1]; 1 without expiry.
pub fn lifetime_remaining(created_at: Millis, expire_after: Option<Millis>, now: Millis) -> f64 {
    match expire_after {
        Some(total) if total > 0 => {
            let left = (total - (now - created_at)) as f64 / total as f64;
            left.clamp(0.0, 1.0)
        }
        _ => 1.0,
    }
}

/// Whether the pod's `karpenter.sh/do-not-disrupt` annotation blocks disruption at `now`:
/// `"true"`, or a positive Go duration not yet elapsed since the pod started (a pod whose
/// start time is unknown stays protected). An invalid value is ignored, as upstream does.
/// Terminating pods never block.
pub fn do_not_disrupt_active(pod: &Pod, now: Millis) -> bool {
    if pod.terminating {
        return false;
    }
    let Some(value) = pod.annotations.get(DO_NOT_DISRUPT) else {
        return false;
    };
    if value == "true" {
        return true;
    }
    let Ok(nanos) = parse_go_duration(value) else {
        return false;
    };
    if nanos <= 0 {
        return false;
    }
    match pod.started_at {
        None => true,
        Some(start) => (now - start).saturating_mul(1_000_000) < nanos,
    }
}

fn owner_kind(pod: &Pod) -> Option<&str> {
    pod.owner.as_ref().map(|o| o.kind.as_str())
}

/// Upstream's `IsReschedulable`: active (or a terminating StatefulSet pod, which must be
/// replaced before its successor starts), not a DaemonSet pod, not a mirror (static) pod.
pub fn is_reschedulable(pod: &Pod) -> bool {
    (!pod.terminating || owner_kind(pod) == Some("StatefulSet"))
        && !pod.is_daemon()
        && owner_kind(pod) != Some("Node")
}

fn disrupted_taint() -> Taint {
    Taint::new(v1labels::DISRUPTED_TAINT_KEY, "", TaintEffect::NoSchedule)
}

/// Upstream's `IsEvictable`: the terminator will call the eviction API for it (active, not a
/// mirror pod, not tolerating the `karpenter.sh/disrupted` taint, no active do-not-disrupt).
pub fn is_evictable(pod: &Pod, now: Millis) -> bool {
    let taint = disrupted_taint();
    !pod.terminating
        && owner_kind(pod) != Some("Node")
        && !pod.tolerations.iter().any(|t| t.tolerates(&taint))
        && !do_not_disrupt_active(pod, now)
}

/// A node that passed the node-level checks, with what the disruption methods need.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Node name.
    pub node: String,
    /// Index of the node in `input.cluster.nodes`.
    pub index: usize,
    /// NodeClaim name.
    pub node_claim: String,
    /// NodePool name.
    pub node_pool: String,
    /// Price per hour (0 when unknown).
    pub price: f64,
    /// Instance type label.
    pub instance_type: Option<String>,
    /// Capacity type label.
    pub capacity_type: Option<String>,
    /// Zone label.
    pub zone: Option<String>,
    /// Pods to reschedule (sorted).
    pub pods: Vec<PodKey>,
    /// Sum of their requests.
    pub pod_requests: Resources,
    /// Upstream's `DisruptionCost`: eviction cost of every pod × lifetime remaining.
    pub disruption_cost: f64,
    /// Upstream's `RescheduleDisruptionCost`: 1 + Σ max(0, eviction cost) of the pods to
    /// reschedule.
    pub reschedule_cost: f64,
    /// Evictable pods per PDB index (into `input.pdbs`).
    pub pdb_usage: BTreeMap<usize, u32>,
    /// A pod-level block (do-not-disrupt pod, PDB): graceful methods skip the node; drift of
    /// a NodeClaim with a `terminationGracePeriod` may proceed.
    pub pod_block: Option<Hold>,
    /// Why it drifted, if it did.
    pub drift: Option<String>,
    /// `Ok` once `consolidateAfter` has passed; otherwise why not.
    pub consolidatable: Result<(), Hold>,
    /// The pool is static.
    pub static_pool: bool,
    /// `terminationGracePeriod` is set on the claim.
    pub has_termination_grace_period: bool,
    /// NodeClaim creation time.
    pub created_at: Millis,
    /// CapacityBuffer virtual pods the provisioner placed on it ([`NodeInfo::buffer_pods`]).
    pub buffer_pods: usize,
}

impl Candidate {
    /// No pods to reschedule and no CapacityBuffer capacity held: emptiness may delete it.
    /// A node holding only a buffer's virtual pods is not empty (upstream's `HasBufferPods`);
    /// consolidation may still delete or replace it when the buffer keeps its room elsewhere.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.buffer_pods == 0
    }

    /// No pods to reschedule, but CapacityBuffer virtual pods placed on it.
    pub fn holds_only_buffer_pods(&self) -> bool {
        self.pods.is_empty() && self.buffer_pods > 0
    }

    /// Upstream's `SavingsRatio`: price per unit of rescheduling disruption.
    pub fn savings_ratio(&self) -> f64 {
        self.price / self.reschedule_cost
    }

    /// Price, zone and capacity type are known (upstream refuses to consolidate otherwise).
    pub fn price_known(&self) -> bool {
        self.price > 0.0 && self.capacity_type.is_some() && self.zone.is_some()
    }
}

/// The outcome of evaluating every node.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    /// Candidates, sorted by node name.
    pub candidates: Vec<Candidate>,
    /// Nodes only node repair may take (not initialized yet, or annotated
    /// `karpenter.sh/do-not-disrupt`), sorted by node name; their holds are in `holds`.
    pub repair_only: Vec<Candidate>,
    /// Node-level reasons for the nodes that are not candidates.
    pub holds: BTreeMap<String, Vec<Hold>>,
}

/// Upstream's drift checks, cheapest first: static drift (template hash, same hash version
/// on both sides), requirement drift (the pool's requirements no longer admit the node's
/// labels), then the provider's verdict.
pub fn drift_reason(
    node: &Node,
    info: &NodeInfo,
    settings: &PoolDisruption,
    pool_requirements: Option<&Requirements>,
) -> Option<String> {
    if let (Some(ph), Some(pv), Some(ch), Some(cv)) = (
        &settings.template_hash,
        &settings.hash_version,
        &info.template_hash,
        &info.hash_version,
    ) && pv == cv
        && ph != ch
    {
        return Some("NodePoolDrifted".to_owned());
    }
    if let Some(reqs) = pool_requirements {
        let labels = Requirements::from_labels(node.labels.iter());
        if labels.compatible(reqs, false).is_err() {
            return Some("RequirementsDrifted".to_owned());
        }
    }
    info.provider_drift.clone()
}

/// The node's NodePool: the model's field, else the `karpenter.sh/nodepool` label.
pub(crate) fn pool_of(node: &Node) -> Option<&str> {
    node.node_pool
        .as_deref()
        .or_else(|| node.labels.get(NODEPOOL).map(String::as_str))
}

/// Pods bound to each node, by node name (terminating pods included).
pub(crate) fn pods_by_node(pods: &[Pod]) -> HashMap<&str, Vec<&Pod>> {
    let mut m: HashMap<&str, Vec<&Pod>> = HashMap::new();
    for p in pods {
        if let Some(n) = p.node_name.as_deref() {
            m.entry(n).or_default().push(p);
        }
    }
    m
}

/// The PDB-level verdict for one pod: which budget it uses, or why it is blocked.
fn pdb_check(input: &DisruptionInput, pod: &Pod, now: Millis) -> Result<Option<usize>, Hold> {
    if !is_evictable(pod, now) {
        return Ok(None);
    }
    let matching: Vec<usize> = input
        .pdbs
        .iter()
        .enumerate()
        .filter(|(_, b)| b.matches(pod))
        .map(|(i, _)| i)
        .collect();
    match matching.as_slice() {
        [] => Ok(None),
        [i] => {
            let b = &input.pdbs[*i];
            let unhealthy_ok =
                b.always_allow_unhealthy && input.unhealthy_pods.contains(&pod.key());
            if b.disruptions_allowed <= 0 && !unhealthy_ok {
                Err(Hold::PdbBlocked {
                    pod: pod.key(),
                    pdb: b.key(),
                })
            } else if unhealthy_ok {
                Ok(None)
            } else {
                Ok(Some(*i))
            }
        }
        many => {
            let mut pdbs: Vec<String> = many.iter().map(|&i| input.pdbs[i].key()).collect();
            pdbs.sort();
            Err(Hold::MultiplePdbs {
                pod: pod.key(),
                pdbs,
            })
        }
    }
}

/// Each NodePool's requirements in the scheduling model, by pool name.
/// Each pool's requirements: the snapshot's (dynamic) pools', and static pools' from their
/// settings.
fn pool_requirements(input: &DisruptionInput) -> HashMap<&str, &Requirements> {
    let statics = input.node_pools.iter().filter_map(|(name, p)| {
        p.static_capacity
            .as_ref()
            .map(|s| (name.as_str(), &s.requirements))
    });
    input
        .cluster
        .node_pools
        .iter()
        .map(|p| (p.name.as_str(), &p.requirements))
        .chain(statics)
        .collect()
}

/// The drift of every initialized Karpenter-managed node of `input` whose pool exists, by
/// NodeClaim name: what upstream's NodeClaim disruption controller records as the claim's
/// `Drifted` condition (with the reason), whether or not the node can be disrupted now.
pub fn drifted(input: &DisruptionInput) -> BTreeMap<String, String> {
    let model_pools = pool_requirements(input);
    let mut out = BTreeMap::new();
    for node in &input.cluster.nodes {
        let Some(info) = input.nodes.get(&node.name) else {
            continue;
        };
        let pool_name = pool_of(node).unwrap_or("");
        let Some(settings) = input.node_pools.get(pool_name) else {
            continue;
        };
        if !info.initialized || node.state == NodeState::InFlight {
            continue;
        }
        if let Some(reason) =
            drift_reason(node, info, settings, model_pools.get(pool_name).copied())
        {
            out.insert(info.node_claim.clone(), reason);
        }
    }
    out
}

/// Evaluates every node of `input.cluster`; `gone` lists nodes this pass already removes
/// (forceful commands), which are held as already disrupting.
pub fn evaluate(input: &DisruptionInput, now: Millis, gone: &BTreeSet<String>) -> Evaluation {
    let by_node = pods_by_node(&input.cluster.bound_pods);
    let model_pools = pool_requirements(input);
    let mut order: Vec<usize> = (0..input.cluster.nodes.len()).collect();
    order.sort_by(|&a, &b| {
        input.cluster.nodes[a]
            .name
            .cmp(&input.cluster.nodes[b].name)
    });
    let mut out = Evaluation::default();
    for index in order {
        let node = &input.cluster.nodes[index];
        let mut holds = Vec::new();
        let Some(info) = input.nodes.get(&node.name) else {
            out.holds.insert(node.name.clone(), vec![Hold::NotManaged]);
            continue;
        };
        let pool_name = pool_of(node).unwrap_or("");
        let settings = input.node_pools.get(pool_name);
        if settings.is_none() {
            holds.push(Hold::NodePoolNotFound {
                node_pool: pool_name.to_owned(),
            });
        }
        if !info.initialized || node.state == NodeState::InFlight {
            holds.push(Hold::NotInitialized);
        }
        if info.deleting || node.state == NodeState::Deleting {
            holds.push(Hold::Deleting);
        }
        if input.disrupting.contains(&node.name) || gone.contains(&node.name) {
            holds.push(Hold::AlreadyDisrupting);
        }
        if info.nominated {
            holds.push(Hold::Nominated);
        }
        if node
            .annotations
            .get(DO_NOT_DISRUPT)
            .is_some_and(|v| v == "true")
        {
            holds.push(Hold::DoNotDisruptNode);
        }
        // Node repair may take a node that only repair can take (upstream's repair class
        // ignores the node-level do-not-disrupt and a registered node's initialization).
        let repair_only = info.repair.is_some()
            && node.state != NodeState::InFlight
            && !holds.is_empty()
            && holds
                .iter()
                .all(|h| matches!(h, Hold::NotInitialized | Hold::DoNotDisruptNode));
        let Some(settings) = settings.filter(|_| holds.is_empty() || repair_only) else {
            out.holds.insert(node.name.clone(), holds);
            continue;
        };
        let pods = by_node
            .get(node.name.as_str())
            .map_or(&[][..], Vec::as_slice);
        let candidate = build(input, node, index, info, settings, pods, &model_pools, now);
        if repair_only {
            out.holds.insert(node.name.clone(), holds);
            out.repair_only.push(candidate);
        } else {
            out.candidates.push(candidate);
        }
    }
    out
}

/// The candidate for `node` (whose node-level checks passed): its pods' blocks, PDB use and
/// costs, its drift and consolidation window.
#[allow(clippy::too_many_arguments)]
fn build(
    input: &DisruptionInput,
    node: &Node,
    index: usize,
    info: &NodeInfo,
    settings: &PoolDisruption,
    pods: &[&Pod],
    model_pools: &HashMap<&str, &Requirements>,
    now: Millis,
) -> Candidate {
    let pool_name = pool_of(node).unwrap_or("");
    let mut pod_block = None;
    let mut pdb_usage: BTreeMap<usize, u32> = BTreeMap::new();
    let mut resched: Vec<&Pod> = Vec::new();
    let mut all_cost = 0.0;
    for pod in pods {
        all_cost += eviction_cost(pod);
        if pod_block.is_none() && do_not_disrupt_active(pod, now) {
            pod_block = Some(Hold::DoNotDisruptPod { pod: pod.key() });
        }
        match pdb_check(input, pod, now) {
            Ok(Some(i)) => *pdb_usage.entry(i).or_default() += 1,
            Ok(None) => {}
            Err(h) => {
                if pod_block.is_none() {
                    pod_block = Some(h);
                }
            }
        }
        if is_reschedulable(pod) {
            resched.push(pod);
        }
    }
    resched.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let mut pod_requests = Resources::default();
    for p in &resched {
        pod_requests.add_assign(&p.requests);
    }
    let reschedule_cost = node_disruption_cost(resched.iter().copied());
    let consolidatable = match info.consolidate_after_remaining(settings, now) {
        None => Err(Hold::ConsolidationDisabled),
        Some(0) => Ok(()),
        Some(remaining_ms) => Err(Hold::ConsolidateAfter { remaining_ms }),
    };
    Candidate {
        node: node.name.clone(),
        index,
        node_claim: info.node_claim.clone(),
        node_pool: pool_name.to_owned(),
        price: if node.price.is_finite() {
            node.price
        } else {
            0.0
        },
        instance_type: node.instance_type().map(str::to_owned),
        capacity_type: node.capacity_type().map(str::to_owned),
        zone: node.zone().map(str::to_owned),
        pods: resched.iter().map(|p| p.key()).collect(),
        pod_requests,
        disruption_cost: all_cost * lifetime_remaining(info.created_at, info.expire_after, now),
        reschedule_cost,
        pdb_usage,
        pod_block,
        drift: drift_reason(node, info, settings, model_pools.get(pool_name).copied()),
        consolidatable,
        static_pool: settings.is_static,
        has_termination_grace_period: info.termination_grace_period.is_some(),
        created_at: info.created_at,
        buffer_pods: info.buffer_pods,
    }
}

/// Tracks PDB evictions a multi-node command would make, so that together its candidates
/// never evict more pods under one budget than the budget allows. (Upstream checks each node
/// alone; a lone node is always allowed as long as each of its budgets allows one eviction,
/// because the terminator evicts one pod at a time.)
#[derive(Debug, Clone, Default)]
pub struct PdbLedger {
    used: BTreeMap<usize, u32>,
    nodes: usize,
}

impl PdbLedger {
    /// Adds `c` if the ledger stays within every budget (the first node always fits);
    /// otherwise returns the exhausted budget and leaves the ledger unchanged.
    pub fn try_add(&mut self, input: &DisruptionInput, c: &Candidate) -> Result<(), Hold> {
        if self.nodes > 0 {
            for (&i, &n) in &c.pdb_usage {
                let allowed = u32::try_from(input.pdbs[i].disruptions_allowed.max(0)).unwrap_or(0);
                if self.used.get(&i).copied().unwrap_or(0) + n > allowed {
                    return Err(Hold::PdbExhaustedByCommand {
                        pdb: input.pdbs[i].key(),
                    });
                }
            }
        }
        for (&i, &n) in &c.pdb_usage {
            *self.used.entry(i).or_default() += n;
        }
        self.nodes += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::model::OwnerRef;

    fn pod() -> Pod {
        Pod {
            namespace: "ns".into(),
            name: "p".into(),
            ..Pod::default()
        }
    }

    #[test]
    fn eviction_cost_table() {
        let mut p = pod();
        assert_eq!(eviction_cost(&p), 1.0);
        p.annotations
            .insert(POD_DELETION_COST.into(), (1i64 << 27).to_string());
        assert_eq!(eviction_cost(&p), 2.0);
        p.annotations
            .insert(POD_DELETION_COST.into(), "junk".into());
        assert_eq!(eviction_cost(&p), 1.0);
        // Like the ReplicaSet controller (and upstream since v1.15), only decimal int32s count.
        for not_int32 in ["1.5", " 5", "2147483648", "0x10"] {
            p.annotations
                .insert(POD_DELETION_COST.into(), not_int32.into());
            assert_eq!(eviction_cost(&p), 1.0, "{not_int32}");
        }
        // karpenter.sh/disruption-cost wins over pod-deletion-cost, even when it is junk.
        p.annotations
            .insert(POD_DELETION_COST.into(), (1i64 << 27).to_string());
        p.annotations
            .insert(DISRUPTION_COST.into(), (-(1i64 << 27)).to_string());
        assert_eq!(eviction_cost(&p), 0.0);
        p.annotations.insert(DISRUPTION_COST.into(), "junk".into());
        assert_eq!(eviction_cost(&p), 1.0);
        p.annotations.clear();
        p.priority = 1 << 25;
        assert_eq!(eviction_cost(&p), 2.0);
        p.priority = 1_000_000_000;
        assert_eq!(eviction_cost(&p), 10.0);
        p.priority = i32::MIN;
        assert_eq!(eviction_cost(&p), -10.0);
    }

    #[test]
    fn lifetime_remaining_scales_down_towards_expiry() {
        assert_eq!(lifetime_remaining(0, None, 10), 1.0);
        assert_eq!(lifetime_remaining(0, Some(100), 25), 0.75);
        assert_eq!(lifetime_remaining(0, Some(100), 250), 0.0);
        assert_eq!(lifetime_remaining(100, Some(100), 0), 1.0);
    }

    #[test]
    fn do_not_disrupt_table() {
        let with = |v: &str, started: Option<Millis>| {
            let mut p = pod();
            p.annotations.insert(DO_NOT_DISRUPT.into(), v.into());
            p.started_at = started;
            p
        };
        assert!(!do_not_disrupt_active(&pod(), 0));
        assert!(do_not_disrupt_active(&with("true", None), 0));
        assert!(!do_not_disrupt_active(&with("false", None), 0));
        assert!(!do_not_disrupt_active(&with("junk", None), 0));
        assert!(!do_not_disrupt_active(&with("-5m", Some(0)), 0));
        assert!(do_not_disrupt_active(&with("5m", None), 1_000_000));
        assert!(do_not_disrupt_active(&with("5m", Some(0)), 299_999));
        assert!(!do_not_disrupt_active(&with("5m", Some(0)), 300_000));
        let mut t = with("true", None);
        t.terminating = true;
        assert!(!do_not_disrupt_active(&t, 0));
    }

    #[test]
    fn reschedulable_and_evictable_table() {
        let owned = |kind: &str| {
            let mut p = pod();
            p.owner = Some(OwnerRef {
                kind: kind.into(),
                name: "o".into(),
                uid: String::new(),
            });
            p
        };
        assert!(is_reschedulable(&pod()));
        assert!(!is_reschedulable(&owned("DaemonSet")));
        assert!(!is_reschedulable(&owned("Node")));
        let mut term = owned("ReplicaSet");
        term.terminating = true;
        assert!(!is_reschedulable(&term));
        let mut sts = owned("StatefulSet");
        sts.terminating = true;
        assert!(is_reschedulable(&sts));

        assert!(is_evictable(&owned("DaemonSet"), 0));
        assert!(!is_evictable(&owned("Node"), 0));
        let mut tol = pod();
        tol.tolerations
            .push(karpenter_scheduling::taints::Toleration {
                operator: karpenter_scheduling::taints::TolerationOperator::Exists,
                ..Default::default()
            });
        assert!(!is_evictable(&tol, 0));
    }
}
