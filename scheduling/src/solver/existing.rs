//! Existing nodes and in-flight NodeClaims (`existingnode.go`): what is left of their
//! allocatable after bound pods and the DaemonSets that would still run there, their labels
//! as requirements, taints and bound host ports.

use crate::devices::{CompiledClaim, allocate, compile_claims};
use crate::labels::HOSTNAME;
use crate::model::{Node, NodeState, Pod};
use crate::requirements::Requirements;
use crate::resources::Resources;
use crate::solver::arith;
use crate::solver::cache::NodeRequirements;
use crate::solver::daemons::Daemon;
use crate::solver::hostports::HostPortUsage;
use crate::solver::nodeclaim::{compatible_ok, merge};
use crate::solver::pods::PodData;
use crate::solver::topology::Topology;
use crate::taints::first_untolerated;
use std::borrow::Cow;
use std::sync::Arc;

/// A node pods can still be placed on.
#[derive(Debug, Clone)]
pub(crate) struct ExistingNode<'a> {
    /// The node.
    pub node: &'a Node,
    /// Label requirements plus hostname, narrowed by placed pods. Shared with the
    /// [`crate::solver::SolveCache`] until a pod lands here.
    pub reqs: Arc<Requirements>,
    /// Allocatable minus bound pods minus DaemonSet pods not yet running.
    pub remaining: Resources,
    /// Bound host ports.
    pub ports: HostPortUsage,
    /// Pods placed by this solve.
    pub pods: Vec<usize>,
    /// The ResourceClaims of its bound and placed pods, whose devices are taken; `None` when
    /// a bound pod's claim cannot be simulated, so no device is known to be free.
    pub claims: Option<Vec<CompiledClaim>>,
}

/// The node's hostname label, or its name.
pub(crate) fn hostname(node: &Node) -> &str {
    node.labels
        .get(HOSTNAME)
        .map_or(node.name.as_str(), String::as_str)
}

impl<'a> ExistingNode<'a> {
    /// Builds the node's state from its labels' requirements and its bound pods.
    pub(crate) fn new(
        node: &'a Node,
        labels: &NodeRequirements,
        bound: &[&Pod],
        daemons: &[Daemon<'_>],
    ) -> Self {
        let mut remaining = node.allocatable.clone();
        let mut ports = HostPortUsage::default();
        let mut running_daemons = Resources::default();
        let mut claims = Some(Vec::new());
        for pod in bound {
            match (compile_claims(&pod.device_claims), &mut claims) {
                (Ok(c), Some(all)) => all.extend(c),
                (Err(_), _) => claims = None,
                (Ok(_), None) => {}
            }
            let mut r = pod.requests.clone();
            r.pods = 1;
            arith::sub_from(&mut remaining, &r);
            if pod.is_daemon() {
                arith::add_into(&mut running_daemons, &r);
            }
            ports.add(&pod.host_ports);
        }
        let mut daemon_need = Resources::default();
        for d in daemons
            .iter()
            .filter(|d| d.runs_on_node(node, &labels.labels))
        {
            arith::add_into(&mut daemon_need, &d.requests);
        }
        arith::sub_from(&mut daemon_need, &running_daemons);
        arith::clamp_non_negative(&mut daemon_need);
        arith::sub_from(&mut remaining, &daemon_need);
        ExistingNode {
            node,
            reqs: Arc::clone(&labels.with_hostname),
            remaining,
            ports,
            pods: Vec::new(),
            claims,
        }
    }

    /// Whether the node is initialized (tried before in-flight ones).
    pub(crate) fn ready(&self) -> bool {
        self.node.state == NodeState::Ready
    }

    /// `ExistingNode.CanAdd` (with the scheduler's consolidateAfter check before it: a node
    /// [`Node::under_consolidate_after`] refuses pods [`Pod::moved_by_consolidation`]):
    /// whether pod `p` can go here and, if so, the node's narrowed
    /// requirements (`None` inside when the pod narrows nothing, the common case). The
    /// solver tries every node for every pod and only wants the first that fits, so a
    /// refusal carries no reason (building one per node and pod was a tenth of a solve) and
    /// the node's requirements are copied only when a key really changes.
    pub(crate) fn can_add(
        &self,
        p: usize,
        pod: &Pod,
        data: &PodData,
        topology: &Topology,
    ) -> Option<Option<Requirements>> {
        if (self.node.under_consolidate_after && pod.moved_by_consolidation)
            || first_untolerated(&self.node.taints, &pod.tolerations, !data.tolerate_pns).is_some()
            || self.ports.conflict(&pod.host_ports).is_some()
            || !arith::fits(&data.requests, &self.remaining)
            || !compatible_ok(&self.reqs, &data.requirements, false)
            || !self.devices_serve(data)
        {
            return None;
        }
        let mut reqs: Cow<'_, Requirements> = Cow::Borrowed(&self.reqs);
        // What changed is of no use here; `merge` records it anyway.
        let mut delta = Requirements::new();
        merge(&mut reqs, &data.requirements, &mut delta);
        if !data.volume.is_empty() {
            if !compatible_ok(&reqs, &data.volume, false) {
                return None;
            }
            merge(&mut reqs, &data.volume, &mut delta);
        }
        let topo = topology
            .requirements(p, pod, &self.node.taints, &data.strict, &reqs, false, false)
            .ok()?;
        if !topo.is_empty() {
            if !compatible_ok(&reqs, &topo, false) {
                return None;
            }
            merge(&mut reqs, &topo, &mut delta);
        }
        Some(match reqs {
            Cow::Owned(r) => Some(r),
            Cow::Borrowed(_) => None,
        })
    }

    /// Whether the node's devices serve the pod's claims on top of those already there.
    fn devices_serve(&self, data: &PodData) -> bool {
        if data.devices.is_empty() {
            return true;
        }
        self.claims.as_ref().is_some_and(|taken| {
            allocate(&self.node.devices, taken.iter().chain(&data.devices)).is_ok()
        })
    }

    /// `ExistingNode.Add`, with what [`ExistingNode::can_add`] said.
    pub(crate) fn add(
        &mut self,
        p: usize,
        pod: &Pod,
        data: &PodData,
        narrowed: Option<Requirements>,
        topology: &mut Topology,
    ) {
        self.pods.push(p);
        arith::sub_from(&mut self.remaining, &data.requests);
        if let Some(reqs) = narrowed {
            self.reqs = Arc::new(reqs);
        }
        topology.record(p, pod, &self.node.taints, &self.reqs, false);
        self.ports.add(&pod.host_ports);
        if let Some(claims) = &mut self.claims {
            claims.extend(data.devices.iter().cloned());
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{Node, Pod, Snapshot};
    use crate::plan::Plan;
    use crate::resources::Resources;
    use crate::solver::{SolveOptions, solve};

    fn node(name: &str, under_consolidate_after: bool) -> Node {
        Node {
            name: name.into(),
            allocatable: Resources {
                cpu_millis: 4000,
                pods: 10,
                ..Resources::default()
            },
            under_consolidate_after,
            ..Node::default()
        }
    }

    fn pod(name: &str, moved_by_consolidation: bool) -> Pod {
        Pod {
            namespace: "ns".into(),
            name: name.into(),
            requests: Resources {
                cpu_millis: 1000,
                ..Resources::default()
            },
            moved_by_consolidation,
            ..Pod::default()
        }
    }

    fn node_of<'p>(plan: &'p Plan, pod: &str) -> Option<&'p str> {
        plan.existing
            .iter()
            .find(|e| e.pods.iter().any(|k| k.name == pod))
            .map(|e| e.node.as_str())
    }

    #[test]
    fn a_node_under_consolidate_after_refuses_only_moved_pods() {
        // No NodePool: a pod no existing node takes is unschedulable.
        let mut snap = Snapshot {
            nodes: vec![node("a-protected", true)],
            pending_pods: vec![
                pod("moved", true),
                pod("pending", false),
                // A pod of a node already being deleted is pending like any other: unmarked.
                pod("from-deleting-node", false),
            ],
            ..Snapshot::default()
        };
        let plan = solve(&snap, &SolveOptions::default());
        assert_eq!(node_of(&plan, "pending"), Some("a-protected"));
        assert_eq!(node_of(&plan, "from-deleting-node"), Some("a-protected"));
        assert_eq!(node_of(&plan, "moved"), None);
        assert_eq!(plan.unschedulable.len(), 1, "{plan:#?}");
        assert_eq!(plan.unschedulable[0].pod.name, "moved");

        // The moved pod skips the protected node (tried first: nodes go by name) and takes
        // the next one that fits.
        snap.nodes.push(node("b-open", false));
        let plan = solve(&snap, &SolveOptions::default());
        assert_eq!(node_of(&plan, "moved"), Some("b-open"));
        assert_eq!(node_of(&plan, "pending"), Some("a-protected"));
        assert!(plan.unschedulable.is_empty(), "{plan:#?}");

        // Outside a consolidation simulation nothing is protected.
        snap.nodes.truncate(1);
        snap.nodes[0].under_consolidate_after = false;
        let plan = solve(&snap, &SolveOptions::default());
        assert_eq!(node_of(&plan, "moved"), Some("a-protected"));
    }
}
