//! Existing nodes and in-flight NodeClaims (`existingnode.go`): what is left of their
//! allocatable after bound pods and the DaemonSets that would still run there, their labels
//! as requirements, taints and bound host ports.

use crate::labels::HOSTNAME;
use crate::model::{Node, NodeState, Pod};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::Resources;
use crate::solver::arith;
use crate::solver::daemons::Daemon;
use crate::solver::hostports::{self, HostPortUsage};
use crate::solver::pods::PodData;
use crate::solver::topology::Topology;
use crate::taints::first_untolerated;

/// A node pods can still be placed on.
#[derive(Debug, Clone)]
pub(crate) struct ExistingNode<'a> {
    /// The node.
    pub node: &'a Node,
    /// Label requirements plus hostname, narrowed by placed pods.
    pub reqs: Requirements,
    /// Allocatable minus bound pods minus DaemonSet pods not yet running.
    pub remaining: Resources,
    /// Bound host ports.
    pub ports: HostPortUsage,
    /// Pods placed by this solve.
    pub pods: Vec<usize>,
}

/// The node's hostname label, or its name.
pub(crate) fn hostname(node: &Node) -> &str {
    node.labels
        .get(HOSTNAME)
        .map_or(node.name.as_str(), String::as_str)
}

impl<'a> ExistingNode<'a> {
    /// Builds the node's state from its bound pods.
    pub(crate) fn new(node: &'a Node, bound: &[&Pod], daemons: &[Daemon<'_>]) -> Self {
        let mut reqs = Requirements::from_labels(node.labels.iter());
        let mut remaining = node.allocatable.clone();
        let mut ports = HostPortUsage::default();
        let mut running_daemons = Resources::default();
        for pod in bound {
            let mut r = pod.requests.clone();
            r.pods = 1;
            arith::sub_from(&mut remaining, &r);
            if pod.is_daemon() {
                arith::add_into(&mut running_daemons, &r);
            }
            ports.add(&pod.host_ports);
        }
        let mut daemon_need = Resources::default();
        for d in daemons.iter().filter(|d| d.runs_on_node(node, &reqs)) {
            arith::add_into(&mut daemon_need, &d.requests);
        }
        arith::sub_from(&mut daemon_need, &running_daemons);
        arith::clamp_non_negative(&mut daemon_need);
        arith::sub_from(&mut remaining, &daemon_need);
        if let Ok(r) = Requirement::new(HOSTNAME, Operator::In, [hostname(node)]) {
            reqs.add(r);
        }
        ExistingNode {
            node,
            reqs,
            remaining,
            ports,
            pods: Vec::new(),
        }
    }

    /// Whether the node is initialized (tried before in-flight ones).
    pub(crate) fn ready(&self) -> bool {
        self.node.state == NodeState::Ready
    }

    /// `ExistingNode.CanAdd`: the node's narrowed requirements if pod `p` can go here.
    pub(crate) fn can_add(
        &self,
        p: usize,
        pod: &Pod,
        data: &PodData,
        topology: &Topology,
    ) -> Result<Requirements, String> {
        if let Some(t) = first_untolerated(&self.node.taints, &pod.tolerations, !data.tolerate_pns)
        {
            return Err(format!(
                "node {} has untolerated taint {}",
                self.node.name,
                crate::solver::reasons::taint(t)
            ));
        }
        if let Some((new, _)) = self.ports.conflict(&pod.host_ports) {
            return Err(format!(
                "host port {} is already bound on node {}",
                hostports::describe(new),
                self.node.name
            ));
        }
        if !arith::fits(&data.requests, &self.remaining) {
            return Err(format!(
                "node {} does not have enough resources left",
                self.node.name
            ));
        }
        self.reqs
            .compatible(&data.requirements, false)
            .map_err(|e| e.message)?;
        let mut reqs = self.reqs.clone();
        reqs.add_all(&data.requirements);
        if !data.volume.is_empty() {
            reqs.compatible(&data.volume, false)
                .map_err(|e| format!("incompatible volume requirements, {}", e.message))?;
            reqs.add_all(&data.volume);
        }
        // The caller discards the reason, so topology does not build one.
        let topo =
            topology.requirements(p, pod, &self.node.taints, &data.strict, &reqs, false, false)?;
        if !topo.is_empty() {
            reqs.compatible(&topo, false).map_err(|e| e.message)?;
            reqs.add_all(&topo);
        }
        Ok(reqs)
    }

    /// `ExistingNode.Add`.
    pub(crate) fn add(
        &mut self,
        p: usize,
        pod: &Pod,
        data: &PodData,
        reqs: Requirements,
        topology: &mut Topology,
    ) {
        self.pods.push(p);
        arith::sub_from(&mut self.remaining, &data.requests);
        topology.record(p, pod, &self.node.taints, &reqs, false);
        self.reqs = reqs;
        self.ports.add(&pod.host_ports);
    }
}
