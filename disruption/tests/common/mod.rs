//! Hand-built clusters for the disruption scenario tests and properties.
#![allow(dead_code)]

use karpenter_cloudprovider::v1::Budget;
use karpenter_disruption::{DisruptionInput, NodeInfo, PoolDisruption};
use karpenter_scheduling::labels::{ARCH, CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, NODEPOOL, ZONE};
use karpenter_scheduling::model::{InstanceType, Node, NodePool, Offering, OwnerRef, Pod};
use karpenter_scheduling::pdb::PodDisruptionBudget;
use karpenter_scheduling::requirements::{NodeSelectorRequirement, Operator, Requirements};
use karpenter_scheduling::resources::Resources;
use karpenter_scheduling::selector::LabelSelector;
use std::sync::Arc;

pub const GI: i64 = 1 << 30;
pub const ZONE_A: &str = "zone-a";
pub const POOL: &str = "default";
pub const HOUR: i64 = 3_600_000;

pub fn nsr(key: &str, op: Operator, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op,
        values: values.iter().map(|v| v.to_string()).collect(),
        min_values: None,
    }
}

/// An instance type in zone-a with one offering per capacity type in `cts`.
pub fn instance_type(
    name: &str,
    cpu: i64,
    mem_gi: i64,
    price: f64,
    cts: &[&str],
) -> Arc<InstanceType> {
    let offerings = cts
        .iter()
        .map(|ct| Offering {
            zone: ZONE_A.into(),
            capacity_type: ct.to_string(),
            price: if *ct == "spot" { price * 0.5 } else { price },
            available: true,
        })
        .collect();
    Arc::new(InstanceType {
        name: name.into(),
        requirements: Requirements::from_node_selector(&[
            nsr(INSTANCE_TYPE, Operator::In, &[name]),
            nsr(ZONE, Operator::In, &[ZONE_A]),
            nsr(CAPACITY_TYPE, Operator::In, cts),
            nsr(ARCH, Operator::In, &["amd64"]),
        ])
        .expect("valid"),
        capacity: Resources {
            cpu_millis: cpu * 1000,
            memory: mem_gi * GI,
            pods: 110,
            ..Resources::default()
        },
        overhead: Default::default(),
        offerings,
    })
}

/// small 2/4 $0.10, medium 4/8 $0.20, large 8/16 $0.40, xlarge 16/32 $0.80 (on-demand).
pub fn catalogue() -> Vec<Arc<InstanceType>> {
    vec![
        instance_type("small", 2, 4, 0.10, &["on-demand"]),
        instance_type("medium", 4, 8, 0.20, &["on-demand"]),
        instance_type("large", 8, 16, 0.40, &["on-demand"]),
        instance_type("xlarge", 16, 32, 0.80, &["on-demand"]),
    ]
}

/// `n` spot types `spot-{i}` with i+1 cpu, 2(i+1) GiB, spot price 0.05(i+1).
pub fn spot_catalogue(n: usize) -> Vec<Arc<InstanceType>> {
    (0..n)
        .map(|i| {
            let k = i as i64 + 1;
            instance_type(&format!("spot-{i:02}"), k, 2 * k, 0.1 * k as f64, &["spot"])
        })
        .collect()
}

pub struct World {
    pub input: DisruptionInput,
    pub now: i64,
}

impl World {
    /// One pool `default` (on-demand, the catalogue, budget 100%, consolidateAfter 0).
    pub fn new() -> Self {
        let mut w = World {
            input: DisruptionInput::default(),
            now: 10 * HOUR,
        };
        w.add_pool(POOL, catalogue(), "on-demand");
        w
    }

    pub fn add_pool(&mut self, name: &str, its: Vec<Arc<InstanceType>>, ct: &str) {
        self.input.cluster.node_pools.push(NodePool {
            name: name.into(),
            requirements: Requirements::from_node_selector(&[nsr(
                CAPACITY_TYPE,
                Operator::In,
                &[ct],
            )])
            .expect("valid"),
            instance_types: its,
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

    /// A managed, initialized, ready node of `pool` on instance type `it`.
    pub fn node_in(&mut self, pool: &str, name: &str, it: &str, ct: &str) -> &mut Node {
        let t = self.instance(pool, it);
        let price = t
            .offerings
            .iter()
            .find(|o| o.capacity_type == ct)
            .map_or(0.0, |o| o.price);
        let labels = [
            (INSTANCE_TYPE, it),
            (ZONE, ZONE_A),
            (CAPACITY_TYPE, ct),
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

    pub fn node(&mut self, name: &str, it: &str) -> &mut Node {
        self.node_in(POOL, name, it, "on-demand")
    }

    pub fn info(&mut self, node: &str) -> &mut NodeInfo {
        self.input.nodes.get_mut(node).expect("node info")
    }

    /// A ReplicaSet pod bound to `node`.
    pub fn pod(&mut self, node: &str, name: &str, cpu_millis: i64) -> &mut Pod {
        self.input.cluster.bound_pods.push(Pod {
            namespace: "default".into(),
            name: name.into(),
            uid: name.into(),
            owner: Some(OwnerRef {
                kind: "ReplicaSet".into(),
                name: "rs".into(),
                uid: String::new(),
            }),
            requests: Resources {
                cpu_millis,
                memory: GI / 4,
                pods: 1,
                ..Resources::default()
            },
            node_name: Some(node.into()),
            started_at: Some(0),
            ..Pod::default()
        });
        self.input
            .cluster
            .bound_pods
            .last_mut()
            .expect("just pushed")
    }

    /// A DaemonSet pod bound to `node`.
    pub fn daemon(&mut self, node: &str, name: &str) -> &mut Pod {
        let p = self.pod(node, name, 100);
        p.owner = Some(OwnerRef {
            kind: "DaemonSet".into(),
            name: "ds".into(),
            uid: String::new(),
        });
        p
    }

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
}

pub fn label(p: &mut Pod, k: &str, v: &str) {
    p.labels.insert(k.into(), v.into());
}
