//! Clusters for disruption tests: a [`DisruptionInput`] built node by node, and a strategy
//! for random nodes.

use crate::instance_types::{GENERAL_PURPOSE, ZONES, on_demand_catalogue};
use crate::pods::pod;
use crate::requirements::{nsr, reqs};
use crate::resources::GI;
use karpenter_cloudprovider::v1::Budget;
use karpenter_disruption::candidate::is_evictable;
use karpenter_disruption::{Command, DisruptionInput, NodeInfo, PoolDisruption};
use karpenter_scheduling::labels::{
    ARCH, CAPACITY_TYPE, DO_NOT_DISRUPT, HOSTNAME, INSTANCE_TYPE, NODEPOOL, ZONE,
};
use karpenter_scheduling::model::{InstanceType, Node, NodePool, OwnerRef, Pod};
use karpenter_scheduling::pdb::PodDisruptionBudget;
use karpenter_scheduling::requirements::Operator;
use karpenter_scheduling::selector::LabelSelector;
use proptest::prelude::*;
use std::sync::Arc;

/// The pool [`Cluster::new`] creates.
pub const POOL: &str = "default";

/// An hour in milliseconds, the unit of `now`.
pub const HOUR: i64 = 3_600_000;

/// The zone every node of a [`Cluster`] is in.
pub const ZONE_A: &str = ZONES[0];

/// A cluster for disruption tests: `input` is what `compute_pass` and `validate` read, `now`
/// the time to pass them (10 h, so that every node and pod created at 0 is old enough for
/// any consolidateAfter the tests use).
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The disruption input under construction.
    pub input: DisruptionInput,
    /// The time of the pass, in milliseconds.
    pub now: i64,
}

impl Default for Cluster {
    fn default() -> Self {
        Self::new()
    }
}

impl Cluster {
    /// One pool [`POOL`] over [`on_demand_catalogue`] in [`ZONE_A`], on demand only, with a
    /// budget of 100 % and the default disruption settings (consolidateAfter 0); no node.
    pub fn new() -> Self {
        let mut c = Cluster {
            input: DisruptionInput::default(),
            now: 10 * HOUR,
        };
        c.add_pool(POOL, on_demand_catalogue(ZONE_A), "on-demand");
        c
    }

    /// Adds the pool `name` over `types`, requiring the capacity type `capacity_type`, with a
    /// budget of 100 % and the default disruption settings.
    pub fn add_pool(&mut self, name: &str, types: Vec<Arc<InstanceType>>, capacity_type: &str) {
        self.input.cluster.node_pools.push(NodePool {
            name: name.into(),
            requirements: reqs(&[nsr(CAPACITY_TYPE, Operator::In, &[capacity_type])]),
            instance_types: types,
            ..NodePool::default()
        });
        self.input.node_pools.insert(
            name.into(),
            PoolDisruption {
                budgets: vec![Budget::nodes("100%")],
                ..PoolDisruption::default()
            },
        );
    }

    /// The disruption settings of `pool`.
    ///
    /// # Panics
    ///
    /// When there is no such pool.
    pub fn settings(&mut self, pool: &str) -> &mut PoolDisruption {
        self.input.node_pools.get_mut(pool).expect("pool")
    }

    fn instance(&self, pool: &str, it: &str) -> Arc<InstanceType> {
        self.input
            .cluster
            .node_pools
            .iter()
            .find(|p| p.name == pool)
            .and_then(|p| p.instance_types.iter().find(|t| t.name == it))
            .cloned()
            .unwrap_or_else(|| panic!("no instance type {it} in {pool}"))
    }

    /// Adds a managed node `name` (NodeClaim `{name}-claim`) of `pool` on the instance type
    /// `it` bought as `capacity_type`, in [`ZONE_A`]: created at 0, initialized and ready,
    /// priced at its offering, with the type's capacity and allocatable.
    ///
    /// # Panics
    ///
    /// When `pool` has no type `it`.
    pub fn node_in(&mut self, pool: &str, name: &str, it: &str, capacity_type: &str) -> &mut Node {
        let t = self.instance(pool, it);
        let price = t
            .offerings
            .iter()
            .find(|o| o.capacity_type == capacity_type)
            .map_or(0.0, |o| o.price);
        let labels = [
            (INSTANCE_TYPE, it),
            (ZONE, ZONE_A),
            (CAPACITY_TYPE, capacity_type),
            (NODEPOOL, pool),
            (HOSTNAME, name),
            (ARCH, "amd64"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        self.input.nodes.insert(
            name.into(),
            NodeInfo {
                node_claim: format!("{name}-claim"),
                initialized: true,
                initialized_at: Some(0),
                ready: true,
                created_at: 0,
                ..NodeInfo::default()
            },
        );
        self.input.cluster.nodes.push(Node {
            name: name.into(),
            node_pool: Some(pool.into()),
            labels,
            allocatable: t.allocatable(),
            capacity: t.capacity.clone(),
            price,
            ..Node::default()
        });
        self.input.cluster.nodes.last_mut().expect("just pushed")
    }

    /// [`node_in`](Self::node_in) the pool [`POOL`], on demand.
    pub fn node(&mut self, name: &str, it: &str) -> &mut Node {
        self.node_in(POOL, name, it, "on-demand")
    }

    /// What the controller knows of `node` beyond the model (claim, readiness, drift …).
    ///
    /// # Panics
    ///
    /// When there is no such node.
    pub fn info(&mut self, node: &str) -> &mut NodeInfo {
        self.input.nodes.get_mut(node).expect("node info")
    }

    /// Binds a running pod `name` of a ReplicaSet to `node`, requesting `cpu_millis`, a
    /// quarter GiB and one pod slot, started at 0.
    pub fn pod(&mut self, node: &str, name: &str, cpu_millis: i64) -> &mut Pod {
        let mut p = pod(name, cpu_millis, GI / 4);
        p.requests.pods = 1;
        p.owner = Some(OwnerRef {
            kind: "ReplicaSet".into(),
            name: "rs".into(),
            uid: String::new(),
        });
        p.node_name = Some(node.into());
        p.started_at = Some(0);
        self.input.cluster.bound_pods.push(p);
        self.input
            .cluster
            .bound_pods
            .last_mut()
            .expect("just pushed")
    }

    /// Adds a CapacityBuffer's virtual pod `default/capacity-buffer-{buffer}-{i}`, pending as
    /// the provisioner's snapshot lists it, requesting `cpu_millis`, a quarter GiB and one
    /// pod slot; with `on`, the last provisioning plan put it on that node (counted in its
    /// [`NodeInfo::buffer_pods`]).
    ///
    /// # Panics
    ///
    /// When `on` names no node.
    pub fn buffer_pod(
        &mut self,
        buffer: &str,
        i: usize,
        cpu_millis: i64,
        on: Option<&str>,
    ) -> &mut Pod {
        use karpenter_cloudprovider::autoscaling::v1beta1::{
            BUFFER_NAME_ANNOTATION, BUFFER_NAMESPACE_ANNOTATION, FAKE_POD_ANNOTATION,
        };
        let mut p = pod(&format!("capacity-buffer-{buffer}-{i}"), cpu_millis, GI / 4);
        p.requests.pods = 1;
        p.priority = i32::MIN;
        p.annotations = [
            (FAKE_POD_ANNOTATION, "true"),
            (BUFFER_NAME_ANNOTATION, buffer),
            (BUFFER_NAMESPACE_ANNOTATION, "default"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        if let Some(node) = on {
            self.info(node).buffer_pods += 1;
        }
        self.input.cluster.pending_pods.push(p);
        self.input
            .cluster
            .pending_pods
            .last_mut()
            .expect("just pushed")
    }

    /// Binds a DaemonSet pod `name` (100m) to `node`.
    pub fn daemon(&mut self, node: &str, name: &str) -> &mut Pod {
        let p = self.pod(node, name, 100);
        p.owner = Some(OwnerRef {
            kind: "DaemonSet".into(),
            name: "ds".into(),
            uid: String::new(),
        });
        p
    }

    /// Adds the PodDisruptionBudget `default/name` over the pods labelled `app=app`, allowing
    /// `allowed` disruptions.
    pub fn pdb(&mut self, name: &str, app: &str, allowed: i32) {
        self.input.pdbs.push(PodDisruptionBudget {
            namespace: "default".into(),
            name: name.into(),
            selector: Some(LabelSelector {
                match_labels: [("app".to_string(), app.to_string())].into(),
                match_expressions: vec![],
            }),
            disruptions_allowed: allowed,
            ..PodDisruptionBudget::default()
        });
    }

    /// Adds the node `name` that `spec` describes to the pool [`POOL`]: its pods (named
    /// `{name}-p{j}`) are added in order while they fit the type's cpu, the first that does
    /// not fit and every later one left out.
    pub fn add_node(&mut self, name: &str, spec: &NodeSpec) {
        let (it, cores, _, _) = GENERAL_PURPOSE[spec.instance_type];
        let node = self.node(name, it);
        if spec.do_not_disrupt {
            node.annotations
                .insert(DO_NOT_DISRUPT.into(), "true".into());
        }
        if spec.disrupting {
            self.input.disrupting.insert(name.into());
        }
        if spec.drifted {
            self.info(name).provider_drift = Some("Test".into());
        }
        let mut used = 0;
        for (j, p) in spec.pods.iter().enumerate() {
            if used + p.cpu_millis > cores * 1000 {
                break;
            }
            used += p.cpu_millis;
            let pod = self.pod(name, &format!("{name}-p{j}"), p.cpu_millis);
            if p.do_not_disrupt {
                pod.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
            }
            if p.web {
                pod.labels.insert("app".into(), "web".into());
            }
        }
    }
}

/// The first PodDisruptionBudget of `input` that `cmd` would exceed at `now`, by name: its
/// candidates together evict more of its pods than it allows, unless a single candidate
/// holds them all and it allows at least one (the terminator evicts one pod at a time, so a
/// lone node is always drained within the budget, as upstream checks). `None` when every
/// budget holds.
pub fn exceeded_pdb(input: &DisruptionInput, now: i64, cmd: &Command) -> Option<String> {
    input.pdbs.iter().find_map(|pdb| {
        let per_node: Vec<usize> = cmd
            .candidates
            .iter()
            .map(|c| {
                input
                    .cluster
                    .bound_pods
                    .iter()
                    .filter(|p| p.node_name.as_deref() == Some(c.node.as_str()))
                    .filter(|p| is_evictable(p, now) && pdb.matches(p))
                    .count()
            })
            .collect();
        let total: usize = per_node.iter().sum();
        let users = per_node.iter().filter(|&&n| n > 0).count();
        let within = total as i64 <= i64::from(pdb.disruptions_allowed)
            || (users == 1 && pdb.disruptions_allowed >= 1);
        (!within).then(|| pdb.key())
    })
}

/// What `cmd`'s replacements cost per hour if each launched as its dearest option.
pub fn dearest_replacement_price(cmd: &Command) -> f64 {
    cmd.replacements
        .iter()
        .map(|r| {
            r.instance_type_options
                .iter()
                .map(|o| o.price)
                .fold(r.price, f64::max)
        })
        .sum()
}

/// One generated pod of a [`NodeSpec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundPodSpec {
    /// Cpu request in millicores.
    pub cpu_millis: i64,
    /// Annotated `karpenter.sh/do-not-disrupt`.
    pub do_not_disrupt: bool,
    /// Labelled `app=web`.
    pub web: bool,
}

/// One generated node; [`Cluster::add_node`] adds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Index into [`GENERAL_PURPOSE`].
    pub instance_type: usize,
    /// Its pods, before those that do not fit are dropped.
    pub pods: Vec<BoundPodSpec>,
    /// Annotated `karpenter.sh/do-not-disrupt`.
    pub do_not_disrupt: bool,
    /// Already being disrupted.
    pub disrupting: bool,
    /// Drifted by the provider.
    pub drifted: bool,
}

/// Nodes of any [`GENERAL_PURPOSE`] type with up to three pods of 100m–1.5 cpu (a tenth
/// do-not-disrupt, three in ten `app=web`); a tenth of the nodes do-not-disrupt, a tenth
/// already disrupting and 15 % drifted.
pub fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        0..GENERAL_PURPOSE.len(),
        prop::collection::vec(
            (
                prop::sample::select(vec![100i64, 300, 700, 1500]),
                prop::bool::weighted(0.1),
                prop::bool::weighted(0.3),
            )
                .prop_map(|(cpu_millis, do_not_disrupt, web)| BoundPodSpec {
                    cpu_millis,
                    do_not_disrupt,
                    web,
                }),
            0..4,
        ),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.15),
    )
        .prop_map(
            |(instance_type, pods, do_not_disrupt, disrupting, drifted)| NodeSpec {
                instance_type,
                pods,
                do_not_disrupt,
                disrupting,
                drifted,
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_take_their_type_price_and_pods_that_fit() {
        let mut c = Cluster::new();
        let small = BoundPodSpec {
            cpu_millis: 1500,
            do_not_disrupt: false,
            web: true,
        };
        c.add_node(
            "n0",
            &NodeSpec {
                instance_type: 0,
                pods: vec![small.clone(), small.clone(), small],
                do_not_disrupt: true,
                disrupting: false,
                drifted: true,
            },
        );
        let node = &c.input.cluster.nodes[0];
        assert!((node.price - 0.10).abs() < 1e-12);
        assert_eq!(node.labels[INSTANCE_TYPE], "small");
        assert!(node.annotations.contains_key(DO_NOT_DISRUPT));
        // 2 cores hold one pod of 1.5 cpu.
        assert_eq!(c.input.cluster.bound_pods.len(), 1);
        assert_eq!(c.input.cluster.bound_pods[0].labels["app"], "web");
        assert_eq!(c.info("n0").provider_drift.as_deref(), Some("Test"));
    }
}
