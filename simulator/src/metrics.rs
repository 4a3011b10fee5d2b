//! What a run measures, accumulated step by step, and the final [`Report`].

use crate::timeline::{Recorder, Timeline, Totals};
use karpenter_cloudprovider_fake::FakeReservation;
use karpenter_cluster::ClusterState;
use karpenter_scheduling::model::{Millis, PodKey};
use karpenter_scheduling::{Node, Resources};
use serde::Serialize;
use std::collections::BTreeMap;

/// The report of one run.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// What the scenario shows.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Simulated seconds.
    pub duration_seconds: f64,
    /// Whether the packing optimiser ran (false: Karpenter-equivalent greedy).
    pub optimizer: bool,
    /// Nodes.
    pub nodes: NodesReport,
    /// Cost.
    pub cost: CostReport,
    /// Time-weighted share of node allocatable requested by bound pods.
    pub utilization: Utilization,
    /// Pods.
    pub pods: PodsReport,
    /// Nodes disrupted, by reason (`Empty`, `Underutilized`, `Drifted`, `Expired`,
    /// `Interrupted` …).
    pub disruptions: BTreeMap<String, usize>,
    /// Controller activity.
    pub activity: Activity,
    /// Manifest kinds the simulator does not model, with counts.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub ignored_kinds: BTreeMap<String, usize>,
    /// The scenario's capacity reservations and the nodes launched into them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<ReservationRow>,
    /// Cost, nodes, pending pods and disruptions over time, sampled on the virtual clock.
    pub timeline: Timeline,
    /// The hourly lower bound ([`crate::lower_bound`]), when the run computed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<crate::lower_bound::LowerBoundReport>,
}

/// Node counts.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodesReport {
    /// Nodes launched by Karpenter.
    pub launched: usize,
    /// Nodes terminated.
    pub terminated: usize,
    /// Nodes at the end.
    pub at_end: usize,
    /// Most nodes at once.
    pub peak: usize,
    /// Per instance type and capacity type, sorted.
    pub by_type: Vec<TypeRow>,
    /// Nodes launched (or present at the start) per zone.
    pub by_zone: BTreeMap<String, usize>,
    /// Nodes launched (or present at the start) per NodePool (`-` for unmanaged nodes).
    pub by_node_pool: BTreeMap<String, usize>,
}

/// One instance type / capacity type.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TypeRow {
    /// Instance type.
    pub instance_type: String,
    /// Capacity type.
    pub capacity_type: String,
    /// Nodes launched (or present at the start).
    pub launched: usize,
    /// Nodes at the end.
    pub at_end: usize,
    /// Node-hours.
    pub node_hours: f64,
    /// Cost in dollars.
    pub cost: f64,
}

/// One capacity reservation.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReservationRow {
    /// Its id.
    pub id: String,
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Instances it holds.
    pub count: u32,
    /// Nodes launched into it over the run.
    pub launched: usize,
    /// Its instances running at the end.
    pub in_use_at_end: u32,
}

/// Cost.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CostReport {
    /// Dollars spent over the run.
    pub total: f64,
    /// Average dollars per hour.
    pub average_per_hour: f64,
    /// Highest $/hour.
    pub peak_per_hour: f64,
    /// $/hour at the end.
    pub at_end_per_hour: f64,
    /// $/hour at regular instants (24 samples over the run, at least a minute apart).
    pub over_time: Vec<CostPoint>,
}

/// $/hour at an instant.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CostPoint {
    /// Seconds since the start.
    pub at_seconds: f64,
    /// $/hour.
    pub per_hour: f64,
    /// Nodes.
    pub nodes: usize,
}

/// Utilisation, 0–1.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Utilization {
    /// CPU requested / allocatable.
    pub cpu: f64,
    /// Memory requested / allocatable.
    pub memory: f64,
}

/// Pods.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodsReport {
    /// Pods created (including replacements of evicted ones).
    pub created: usize,
    /// Pods bound to a node.
    pub scheduled: usize,
    /// Pods evicted or deleted by termination.
    pub evicted: usize,
    /// Job pods that ran to completion.
    pub completed: usize,
    /// Time from creation to binding, in seconds.
    pub pending_seconds: Percentiles,
    /// Pods pending at the end, with why.
    pub never_scheduled: Vec<Unscheduled>,
}

/// Nearest-rank percentiles.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

/// A pod still pending at the end.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Unscheduled {
    /// `namespace/name`.
    pub pod: String,
    /// Seconds it has waited.
    pub pending_seconds: f64,
    /// The provisioner's reason, or what it is waiting for.
    pub reason: String,
}

/// Controller activity.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Activity {
    /// Provisioning solves.
    pub provisioning_solves: usize,
    /// NodeClaims created.
    pub node_claims_created: usize,
    /// Launches that failed (insufficient capacity …).
    pub launch_failures: usize,
    /// Disruption passes evaluated.
    pub disruption_passes: usize,
    /// Disruption commands that failed validation.
    pub invalidated_commands: usize,
    /// Most nodes being disrupted at once (queued commands and draining nodes).
    pub peak_disrupting: usize,
    /// Longest drain: NodeClaim deletion to instance termination, in seconds.
    pub longest_drain_seconds: f64,
}

#[derive(Debug, Clone)]
struct NodeLife {
    zone: String,
    node_pool: String,
    instance_type: String,
    capacity_type: String,
    price: f64,
    started: Millis,
    stopped: Option<Millis>,
    launched: bool,
}

/// Accumulates measurements during a run.
#[derive(Debug, Clone)]
pub struct Metrics {
    duration: Millis,
    optimizer: bool,
    /// Pods created.
    pub pods_created: usize,
    /// Pods evicted or force-deleted.
    pub evictions: usize,
    /// Provisioning solves.
    pub solves: usize,
    /// NodeClaims created.
    pub node_claims_created: usize,
    /// Failed launches.
    pub launch_failures: usize,
    /// Disruption passes.
    pub disruption_passes: usize,
    /// Invalidated commands.
    pub invalidated_commands: usize,
    /// Nodes launched into each capacity reservation, by id.
    pub reserved_launches: BTreeMap<String, usize>,
    disruptions: BTreeMap<String, usize>,
    /// Ignored manifest kinds.
    pub ignored_kinds: BTreeMap<String, usize>,
    /// Job pods completed.
    pub completed: usize,
    peak_disrupting: usize,
    drains: BTreeMap<String, Millis>,
    longest_drain: Millis,
    pending_ms: Vec<Millis>,
    nodes: BTreeMap<String, Vec<NodeLife>>,
    price: f64,
    node_count: usize,
    pending: usize,
    requested: Resources,
    allocatable: Resources,
    cost: f64,
    cpu_req: f64,
    cpu_alloc: f64,
    mem_req: f64,
    mem_alloc: f64,
    peak_nodes: usize,
    peak_price: f64,
    series: Vec<CostPoint>,
    next_sample: Millis,
    sample_every: Millis,
    timeline: Recorder,
    /// The report, once the run finished.
    pub report: Option<Report>,
}

impl Metrics {
    /// Empty measurements for a run of `duration`.
    pub fn new(duration: Millis, optimizer: bool) -> Self {
        Self {
            duration,
            optimizer,
            pods_created: 0,
            evictions: 0,
            solves: 0,
            node_claims_created: 0,
            launch_failures: 0,
            disruption_passes: 0,
            invalidated_commands: 0,
            reserved_launches: BTreeMap::new(),
            disruptions: BTreeMap::new(),
            ignored_kinds: BTreeMap::new(),
            completed: 0,
            peak_disrupting: 0,
            drains: BTreeMap::new(),
            longest_drain: 0,
            pending_ms: Vec::new(),
            nodes: BTreeMap::new(),
            price: 0.0,
            node_count: 0,
            pending: 0,
            requested: Resources::default(),
            allocatable: Resources::default(),
            cost: 0.0,
            cpu_req: 0.0,
            cpu_alloc: 0.0,
            mem_req: 0.0,
            mem_alloc: 0.0,
            peak_nodes: 0,
            peak_price: 0.0,
            series: Vec::new(),
            next_sample: 0,
            sample_every: (duration / 24).max(60_000),
            timeline: Recorder::new(duration),
            report: None,
        }
    }

    /// A node appeared (launched by Karpenter when `launched`).
    pub fn node_started(&mut self, node: &Node, now: Millis, launched: bool) {
        self.nodes
            .entry(node.name.clone())
            .or_default()
            .push(NodeLife {
                zone: node.zone().unwrap_or("unknown").to_owned(),
                node_pool: node.node_pool.clone().unwrap_or_else(|| "-".to_owned()),
                instance_type: node.instance_type().unwrap_or("unknown").to_owned(),
                capacity_type: node.capacity_type().unwrap_or("on-demand").to_owned(),
                price: node.price,
                started: now,
                stopped: None,
                launched,
            });
    }

    /// A node went away.
    pub fn node_stopped(&mut self, name: &str, now: Millis) {
        if let Some(life) = self
            .nodes
            .get_mut(name)
            .and_then(|v| v.iter_mut().rev().find(|l| l.stopped.is_none()))
        {
            life.stopped = Some(now);
        }
    }

    /// `count` nodes were disrupted for `reason` at `now`.
    pub fn disrupted(&mut self, reason: &str, count: usize, now: Millis) {
        *self.disruptions.entry(reason.to_owned()).or_default() += count;
        self.timeline.disrupted(reason, count, now);
    }

    /// Records how many nodes are being disrupted now.
    pub fn disrupting(&mut self, count: usize) {
        self.peak_disrupting = self.peak_disrupting.max(count);
    }

    /// A NodeClaim's deletion began.
    pub fn drain_started(&mut self, node_claim: &str, now: Millis) {
        self.drains.entry(node_claim.to_owned()).or_insert(now);
    }

    /// A NodeClaim's instance was terminated.
    pub fn drain_finished(&mut self, node_claim: &str, now: Millis) {
        if let Some(start) = self.drains.remove(node_claim) {
            self.longest_drain = self.longest_drain.max(now - start);
        }
    }

    /// A pod was bound after waiting `pending` milliseconds.
    pub fn pod_bound(&mut self, pending: Millis) {
        self.pending_ms.push(pending.max(0));
    }

    /// Recomputes the current rates from the state (after a step at `now`).
    pub fn sample(&mut self, now: Millis, state: &ClusterState) {
        // `+ 0.0` turns the empty sum's -0.0 into 0.0.
        self.price = state.nodes().values().map(|r| r.node.price).sum::<f64>() + 0.0;
        self.node_count = state.nodes().len();
        let mut allocatable = Resources::default();
        for r in state.nodes().values() {
            allocatable.add_assign(&r.node.allocatable);
        }
        let mut requested = Resources::default();
        let mut pending = 0;
        for p in state.pods().values() {
            if p.pod.node_name.is_some() {
                requested.add_assign(&p.pod.requests);
            } else if !p.pod.is_daemon() && !p.pod.terminating {
                // What `ClusterState::pending_pods` lists, counted in the pass over every pod
                // this method makes anyway.
                pending += 1;
            }
        }
        self.allocatable = allocatable;
        self.requested = requested;
        self.pending = pending;
        self.peak_nodes = self.peak_nodes.max(self.node_count);
        self.peak_price = self.peak_price.max(self.price);
        while self.next_sample <= now && self.next_sample <= self.duration {
            self.series.push(CostPoint {
                at_seconds: self.next_sample as f64 / 1000.0,
                per_hour: round4(self.price),
                nodes: self.node_count,
            });
            self.next_sample += self.sample_every;
        }
    }

    /// Accounts for the interval `[from, to)` at the current rates, over which `state` (the
    /// state last sampled) holds.
    pub fn integrate(&mut self, from: Millis, to: Millis, state: &ClusterState) {
        self.timeline.hold(from, to, state, self.totals());
        let dt = (to - from).max(0) as f64;
        self.cost += self.price * dt / 3_600_000.0;
        self.cpu_req += self.requested.cpu_millis as f64 * dt;
        self.cpu_alloc += self.allocatable.cpu_millis as f64 * dt;
        self.mem_req += self.requested.memory as f64 * dt;
        self.mem_alloc += self.allocatable.memory as f64 * dt;
    }

    fn totals(&self) -> Totals {
        Totals {
            price: self.price,
            nodes: self.node_count,
            pending: self.pending,
        }
    }

    /// Builds the report at the end of the run.
    pub fn finish(
        &mut self,
        now: Millis,
        state: &ClusterState,
        unschedulable: &BTreeMap<PodKey, String>,
    ) {
        self.timeline.hold(now, now, state, self.totals());
        let mut by_type: BTreeMap<(String, String), TypeRow> = BTreeMap::new();
        let mut launched = 0;
        let mut terminated = 0;
        let mut by_zone: BTreeMap<String, usize> = BTreeMap::new();
        let mut by_node_pool: BTreeMap<String, usize> = BTreeMap::new();
        for life in self.nodes.values().flatten() {
            *by_zone.entry(life.zone.clone()).or_default() += 1;
            *by_node_pool.entry(life.node_pool.clone()).or_default() += 1;
            let row = by_type
                .entry((life.instance_type.clone(), life.capacity_type.clone()))
                .or_insert_with(|| TypeRow {
                    instance_type: life.instance_type.clone(),
                    capacity_type: life.capacity_type.clone(),
                    ..TypeRow::default()
                });
            row.launched += 1;
            let end = life.stopped.unwrap_or(now);
            let hours = (end - life.started).max(0) as f64 / 3_600_000.0;
            row.node_hours += hours;
            row.cost += hours * life.price;
            if life.stopped.is_none() {
                row.at_end += 1;
            } else {
                terminated += 1;
            }
            if life.launched {
                launched += 1;
            }
        }
        let mut by_type: Vec<TypeRow> = by_type.into_values().collect();
        for row in &mut by_type {
            row.node_hours = round4(row.node_hours);
            row.cost = round4(row.cost);
        }
        let mut pending = self.pending_ms.clone();
        pending.sort_unstable();
        let pct = |p: f64| -> f64 {
            if pending.is_empty() {
                return 0.0;
            }
            let rank = ((p * pending.len() as f64).ceil() as usize).clamp(1, pending.len());
            pending[rank - 1] as f64 / 1000.0
        };
        let never_scheduled = state
            .pending_pods()
            .map(|p| Unscheduled {
                pod: p.pod.key().to_string(),
                pending_seconds: (now - p.pod.created_at) as f64 / 1000.0,
                reason: unschedulable.get(&p.pod.key()).cloned().unwrap_or_else(|| {
                    "waiting for capacity being launched or for the next batch".to_owned()
                }),
            })
            .collect();
        let hours = now as f64 / 3_600_000.0;
        let ratio = |a: f64, b: f64| if b > 0.0 { round4(a / b) } else { 0.0 };
        self.report = Some(Report {
            scenario: String::new(),
            description: String::new(),
            duration_seconds: now as f64 / 1000.0,
            optimizer: self.optimizer,
            nodes: NodesReport {
                launched,
                terminated,
                at_end: state.nodes().len(),
                peak: self.peak_nodes,
                by_type,
                by_zone,
                by_node_pool,
            },
            cost: CostReport {
                total: round4(self.cost),
                average_per_hour: if hours > 0.0 {
                    round4(self.cost / hours)
                } else {
                    0.0
                },
                peak_per_hour: round4(self.peak_price),
                at_end_per_hour: round4(self.price),
                over_time: self.series.clone(),
            },
            utilization: Utilization {
                cpu: ratio(self.cpu_req, self.cpu_alloc),
                memory: ratio(self.mem_req, self.mem_alloc),
            },
            pods: PodsReport {
                created: self.pods_created,
                scheduled: self.pending_ms.len(),
                evicted: self.evictions,
                completed: self.completed,
                pending_seconds: Percentiles {
                    p50: pct(0.50),
                    p90: pct(0.90),
                    p99: pct(0.99),
                    max: pct(1.0),
                },
                never_scheduled,
            },
            disruptions: self.disruptions.clone(),
            activity: Activity {
                provisioning_solves: self.solves,
                node_claims_created: self.node_claims_created,
                launch_failures: self.launch_failures,
                disruption_passes: self.disruption_passes,
                invalidated_commands: self.invalidated_commands,
                peak_disrupting: self.peak_disrupting,
                longest_drain_seconds: self.longest_drain as f64 / 1000.0,
            },
            ignored_kinds: self.ignored_kinds.clone(),
            reservations: Vec::new(),
            timeline: self.timeline.timeline(),
            lower_bound: None,
        });
    }

    /// Adds the reservations (each with the instances it has left) to the report.
    pub fn finish_reservations(&mut self, reservations: &[(FakeReservation, u32)]) {
        let rows = reservations
            .iter()
            .map(|(r, left)| ReservationRow {
                id: r.id.clone(),
                instance_type: r.instance_type.clone(),
                zone: r.zone.clone(),
                count: r.count,
                launched: self.reserved_launches.get(&r.id).copied().unwrap_or(0),
                in_use_at_end: r.count.saturating_sub(*left),
            })
            .collect();
        if let Some(report) = &mut self.report {
            report.reservations = rows;
        }
    }
}

/// Rounds to 4 decimals, as the report's dollar figures are.
pub(crate) fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}
