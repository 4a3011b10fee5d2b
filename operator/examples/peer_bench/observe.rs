//! What the benchmark watches while a phase runs: the benchmark's pods (when each appeared
//! and when it first ran), every Node (when it came and went, its price, whether it is being
//! disrupted) and NodeClaim, and the controller's processes in `/proc` (CPU time, RSS).
//! Times are wall-clock milliseconds since the Unix epoch, the clock the audit log uses.

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kube::runtime::{WatchStreamExt as _, watcher};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// One benchmark pod.
#[derive(Debug, Clone, Default)]
pub struct PodRecord {
    /// When the watch first saw it.
    pub seen_ms: i64,
    /// When the watch first saw it Running and Ready.
    pub ready_ms: Option<i64>,
    /// Running and Ready now.
    pub ready: bool,
    /// Deleting or gone.
    pub gone: bool,
}

/// One Node.
#[derive(Debug, Clone, Default)]
pub struct NodeRecord {
    /// $/h of its offering in our catalogue (both controllers price by it).
    pub price: f64,
    pub seen_ms: i64,
    pub gone_ms: Option<i64>,
    /// Tainted `karpenter.sh/disrupted` or deleting.
    pub disrupting: bool,
    /// Allocatable CPU (millicores) and memory (bytes), for utilisation.
    pub cpu_millis: i64,
    pub memory: i64,
}

/// Everything watched, shared with the watch tasks.
#[derive(Debug, Default)]
pub struct World {
    /// By pod UID.
    pub pods: BTreeMap<String, PodRecord>,
    /// Pod name → (cpu millis, memory bytes, node) of bound benchmark pods.
    pub requests: BTreeMap<String, (i64, i64, String)>,
    /// By node name (a name is never reused: both controllers name nodes after claims).
    pub nodes: BTreeMap<String, NodeRecord>,
    pub claims: BTreeSet<String>,
    /// Last time a Node or NodeClaim came, went, or started or stopped being disrupted.
    pub last_change_ms: i64,
    /// NodeClaims ever seen (launches) and Nodes that went (disruptions of any kind).
    pub claims_created: u64,
    pub nodes_deleted: u64,
}

pub type Shared = Arc<Mutex<World>>;

pub fn lock(w: &Shared) -> std::sync::MutexGuard<'_, World> {
    w.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Prices by (instance type, zone, capacity type).
pub type Prices = BTreeMap<(String, String, String), f64>;

/// Our catalogue's prices.
pub fn prices() -> Prices {
    let mut out = Prices::new();
    for t in karpenter_catalog::default_instance_types() {
        for o in &t.offerings {
            out.insert(
                (t.name.clone(), o.zone.clone(), o.capacity_type.clone()),
                o.price,
            );
        }
    }
    out
}

fn running_ready(pod: &Pod) -> bool {
    let Some(status) = &pod.status else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn quantity(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>, cpu: bool) -> i64 {
    q.and_then(|q| karpenter_scheduling::Quantity::parse(&q.0).ok())
        .map_or(0, |q| if cpu { q.milli_value() } else { q.value() })
}

fn pod_requests(pod: &Pod) -> (i64, i64) {
    let mut cpu = 0;
    let mut memory = 0;
    for c in pod.spec.iter().flat_map(|s| &s.containers) {
        let r = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        cpu += quantity(r.and_then(|r| r.get("cpu")), true);
        memory += quantity(r.and_then(|r| r.get("memory")), false);
    }
    (cpu, memory)
}

fn apply_pod(world: &mut World, pod: &Pod, now: i64) {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ready = running_ready(pod) && pod.metadata.deletion_timestamp.is_none();
    let gone = pod.metadata.deletion_timestamp.is_some();
    let rec = world.pods.entry(uid).or_insert_with(|| PodRecord {
        seen_ms: now,
        ..PodRecord::default()
    });
    rec.ready = ready;
    rec.gone = gone;
    if ready && rec.ready_ms.is_none() {
        rec.ready_ms = Some(now);
    }
    match pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
        Some(node) if !gone => {
            let (cpu, memory) = pod_requests(pod);
            world.requests.insert(name, (cpu, memory, node));
        }
        _ => {
            world.requests.remove(&name);
        }
    }
}

fn delete_pod(world: &mut World, pod: &Pod) {
    if let Some(rec) = world
        .pods
        .get_mut(pod.metadata.uid.as_deref().unwrap_or_default())
    {
        rec.gone = true;
        rec.ready = false;
    }
    world
        .requests
        .remove(pod.metadata.name.as_deref().unwrap_or_default());
}

fn label(node: &Node, key: &str) -> String {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .cloned()
        .unwrap_or_default()
}

fn apply_node(world: &mut World, prices: &Prices, node: &Node, now: i64) {
    let name = node.metadata.name.clone().unwrap_or_default();
    let disrupting = node.metadata.deletion_timestamp.is_some()
        || node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == "karpenter.sh/disrupted"));
    let alloc = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    if let Some(rec) = world.nodes.get_mut(&name)
        && rec.gone_ms.is_none()
    {
        if rec.disrupting != disrupting {
            rec.disrupting = disrupting;
            world.last_change_ms = now;
        }
        return;
    }
    let instance_type = label(node, "node.kubernetes.io/instance-type");
    let zone = label(node, "topology.kubernetes.io/zone");
    let capacity_type = label(node, "karpenter.sh/capacity-type");
    let price = prices
        .get(&(instance_type.clone(), zone.clone(), capacity_type.clone()))
        .copied();
    if price.is_none() {
        eprintln!(
            "peer-bench: node {name}: no price for {instance_type:?} in {zone:?} ({capacity_type:?}); counted as free"
        );
    }
    world.nodes.insert(
        name,
        NodeRecord {
            price: price.unwrap_or(0.0),
            seen_ms: now,
            gone_ms: None,
            disrupting,
            cpu_millis: quantity(alloc.and_then(|a| a.get("cpu")), true),
            memory: quantity(alloc.and_then(|a| a.get("memory")), false),
        },
    );
    world.last_change_ms = now;
}

fn delete_node(world: &mut World, name: &str, now: i64) {
    if let Some(rec) = world.nodes.get_mut(name)
        && rec.gone_ms.is_none()
    {
        rec.gone_ms = Some(now);
        rec.disrupting = false;
        world.nodes_deleted += 1;
        world.last_change_ms = now;
    }
}

/// Starts the watches; returns once each has listed.
pub async fn watch(client: kube::Client, namespace: &str) -> Shared {
    let world: Shared = Arc::new(Mutex::new(World {
        last_change_ms: now_ms(),
        ..World::default()
    }));
    let prices = Arc::new(prices());
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let nodes: Api<Node> = Api::all(client.clone());
    let gvk = GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim");
    let claims: Api<DynamicObject> = Api::all_with(
        client,
        &ApiResource::from_gvk_with_plural(&gvk, "nodeclaims"),
    );
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(3);

    let w = world.clone();
    let ready = tx.clone();
    tokio::spawn(async move {
        let config =
            watcher::Config::default().labels(&format!("{}=true", super::workload::BENCH_LABEL));
        let mut stream = std::pin::pin!(watcher(pods, config).default_backoff());
        let mut listed: Option<BTreeSet<String>> = None;
        while let Some(ev) = stream.next().await {
            let now = now_ms();
            let mut world = lock(&w);
            match ev {
                Ok(watcher::Event::Init) => listed = Some(BTreeSet::new()),
                Ok(watcher::Event::InitApply(pod)) => {
                    if let Some(l) = listed.as_mut() {
                        l.insert(pod.metadata.uid.clone().unwrap_or_default());
                    }
                    apply_pod(&mut world, &pod, now);
                }
                Ok(watcher::Event::InitDone) => {
                    // Pods that went while the watch was re-listing.
                    let seen = listed.take().unwrap_or_default();
                    for (uid, rec) in &mut world.pods {
                        if !seen.contains(uid) {
                            rec.gone = true;
                            rec.ready = false;
                        }
                    }
                    let _ = ready.try_send(());
                }
                Ok(watcher::Event::Apply(pod)) => apply_pod(&mut world, &pod, now),
                Ok(watcher::Event::Delete(pod)) => delete_pod(&mut world, &pod),
                Err(e) => eprintln!("peer-bench: pod watch: {e}"),
            }
        }
    });

    let w = world.clone();
    let ready = tx.clone();
    tokio::spawn(async move {
        let mut stream =
            std::pin::pin!(watcher(nodes, watcher::Config::default()).default_backoff());
        let mut listed: Option<BTreeSet<String>> = None;
        while let Some(ev) = stream.next().await {
            let now = now_ms();
            let mut world = lock(&w);
            match ev {
                Ok(watcher::Event::Init) => listed = Some(BTreeSet::new()),
                Ok(watcher::Event::InitApply(node)) => {
                    if let Some(l) = listed.as_mut() {
                        l.insert(node.metadata.name.clone().unwrap_or_default());
                    }
                    apply_node(&mut world, &prices, &node, now);
                }
                Ok(watcher::Event::InitDone) => {
                    let seen = listed.take().unwrap_or_default();
                    let gone: Vec<String> = world
                        .nodes
                        .iter()
                        .filter(|(n, r)| r.gone_ms.is_none() && !seen.contains(*n))
                        .map(|(n, _)| n.clone())
                        .collect();
                    for n in gone {
                        delete_node(&mut world, &n, now);
                    }
                    let _ = ready.try_send(());
                }
                Ok(watcher::Event::Apply(node)) => apply_node(&mut world, &prices, &node, now),
                Ok(watcher::Event::Delete(node)) => {
                    delete_node(
                        &mut world,
                        node.metadata.name.as_deref().unwrap_or_default(),
                        now,
                    );
                }
                Err(e) => eprintln!("peer-bench: node watch: {e}"),
            }
        }
    });

    let w = world.clone();
    tokio::spawn(async move {
        let mut stream =
            std::pin::pin!(watcher(claims, watcher::Config::default()).default_backoff());
        let mut listed: Option<BTreeSet<String>> = None;
        while let Some(ev) = stream.next().await {
            let now = now_ms();
            let mut world = lock(&w);
            let add = |world: &mut World, name: String| {
                if world.claims.insert(name) {
                    world.claims_created += 1;
                    world.last_change_ms = now;
                }
            };
            match ev {
                Ok(watcher::Event::Init) => listed = Some(BTreeSet::new()),
                Ok(watcher::Event::InitApply(c)) => {
                    let name = c.metadata.name.clone().unwrap_or_default();
                    if let Some(l) = listed.as_mut() {
                        l.insert(name.clone());
                    }
                    add(&mut world, name);
                }
                Ok(watcher::Event::InitDone) => {
                    let seen = listed.take().unwrap_or_default();
                    let before = world.claims.len();
                    world.claims.retain(|c| seen.contains(c));
                    if world.claims.len() != before {
                        world.last_change_ms = now;
                    }
                    let _ = tx.try_send(());
                }
                Ok(watcher::Event::Apply(c)) => {
                    add(&mut world, c.metadata.name.clone().unwrap_or_default())
                }
                Ok(watcher::Event::Delete(c)) => {
                    if world
                        .claims
                        .remove(c.metadata.name.as_deref().unwrap_or_default())
                    {
                        world.last_change_ms = now;
                    }
                }
                Err(e) => eprintln!("peer-bench: nodeclaim watch: {e}"),
            }
        }
    });
    for _ in 0..3 {
        let _ = rx.recv().await;
    }
    world
}

/// A point in time of the world, for deciding whether a phase is done.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Benchmark pods not deleting.
    pub live_pods: usize,
    /// Of which Running and Ready.
    pub ready_pods: usize,
    pub nodes: usize,
    pub claims: usize,
    pub disrupting: usize,
    pub last_change_ms: i64,
    /// $/h of the nodes now.
    pub price: f64,
    /// Requested over allocatable, over all nodes (cpu, memory).
    pub cpu_util: f64,
    pub memory_util: f64,
}

pub fn snapshot(world: &Shared) -> Snapshot {
    let w = lock(world);
    let live: Vec<&PodRecord> = w.pods.values().filter(|p| !p.gone).collect();
    let nodes: Vec<&NodeRecord> = w.nodes.values().filter(|n| n.gone_ms.is_none()).collect();
    let (mut cpu_alloc, mut mem_alloc) = (0_i64, 0_i64);
    for n in &nodes {
        cpu_alloc += n.cpu_millis;
        mem_alloc += n.memory;
    }
    let (mut cpu_req, mut mem_req) = (0_i64, 0_i64);
    for (cpu, mem, node) in w.requests.values() {
        if w.nodes.get(node).is_some_and(|n| n.gone_ms.is_none()) {
            cpu_req += cpu;
            mem_req += mem;
        }
    }
    let ratio = |a: i64, b: i64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
    Snapshot {
        live_pods: live.len(),
        ready_pods: live.iter().filter(|p| p.ready).count(),
        nodes: nodes.len(),
        claims: w.claims.len(),
        disrupting: nodes.iter().filter(|n| n.disrupting).count(),
        last_change_ms: w.last_change_ms,
        // `+ 0.0`: an empty float sum is -0.0.
        price: nodes.iter().map(|n| n.price).sum::<f64>() + 0.0,
        cpu_util: ratio(cpu_req, cpu_alloc),
        memory_util: ratio(mem_req, mem_alloc),
    }
}

/// $·h the nodes cost between `from` and `to` (ms).
pub fn dollar_hours(world: &Shared, from: i64, to: i64) -> f64 {
    let w = lock(world);
    w.nodes
        .values()
        .map(|n| {
            let start = n.seen_ms.max(from);
            let end = n.gone_ms.unwrap_or(to).min(to);
            if end > start {
                n.price * (end - start) as f64 / 3_600_000.0
            } else {
                0.0
            }
        })
        .sum()
}

/// Nodes alive at `at` (ms).
pub fn nodes_at(world: &Shared, at: i64) -> BTreeSet<String> {
    lock(world)
        .nodes
        .iter()
        .filter(|(_, n)| n.seen_ms <= at && n.gone_ms.is_none_or(|g| g > at))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Pending times (ms, appearance to first Running and Ready) of pods that appeared in
/// `[from, to]`, sorted; and how many of those never ran.
pub fn pending_times(world: &Shared, from: i64, to: i64) -> (Vec<i64>, usize) {
    let w = lock(world);
    let mut out = Vec::new();
    let mut never = 0;
    for p in w
        .pods
        .values()
        .filter(|p| p.seen_ms >= from && p.seen_ms <= to)
    {
        match p.ready_ms {
            Some(r) => out.push(r - p.seen_ms),
            None if !p.gone => never += 1,
            None => {}
        }
    }
    out.sort_unstable();
    (out, never)
}

/// The `q` quantile (0..=1) of sorted `values`, nearest rank.
pub fn quantile(values: &[i64], q: f64) -> Option<i64> {
    if values.is_empty() {
        return None;
    }
    let rank = (q * values.len() as f64).ceil() as usize;
    Some(values[rank.clamp(1, values.len()) - 1])
}

/// One `/proc` sample of a process.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct ProcSample {
    pub at_ms: i64,
    /// utime + stime, seconds.
    pub cpu_secs: f64,
    pub rss_bytes: u64,
}

/// `/proc/<pid>`'s CPU time and RSS; `None` once the process is gone.
pub fn read_proc(pid: u32, ticks_per_sec: f64) -> Option<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 here.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Some(ProcSample {
        at_ms: now_ms(),
        cpu_secs: (utime + stime) / ticks_per_sec,
        rss_bytes: rss_kb * 1024,
    })
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux when it cannot be asked).
pub fn ticks_per_sec() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Samples of each named process, every second.
pub type Samples = Arc<Mutex<BTreeMap<String, Vec<ProcSample>>>>;

pub fn sample_processes(pids: Vec<(String, u32)>) -> Samples {
    let samples: Samples = Arc::default();
    let out = samples.clone();
    let ticks = ticks_per_sec();
    tokio::spawn(async move {
        loop {
            for (name, pid) in &pids {
                if let Some(s) = read_proc(*pid, ticks) {
                    out.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(name.clone())
                        .or_default()
                        .push(s);
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    samples
}

/// CPU seconds, peak and p95 RSS of `name` in `[from, to]`.
pub fn proc_window(samples: &Samples, name: &str, from: i64, to: i64) -> (f64, u64, u64) {
    let all = samples.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(list) = all.get(name) else {
        return (0.0, 0, 0);
    };
    // CPU: from the last sample at or before `from` to the last at or before `to`.
    let before = list.iter().rev().find(|s| s.at_ms <= from).or(list.first());
    let end = list.iter().rev().find(|s| s.at_ms <= to).or(list.last());
    let cpu = match (before, end) {
        (Some(a), Some(b)) => (b.cpu_secs - a.cpu_secs).max(0.0),
        _ => 0.0,
    };
    let mut rss: Vec<i64> = list
        .iter()
        .filter(|s| s.at_ms >= from && s.at_ms <= to)
        .map(|s| s.rss_bytes as i64)
        .collect();
    rss.sort_unstable();
    let peak = rss.last().copied().unwrap_or(0) as u64;
    let p95 = quantile(&rss, 0.95).unwrap_or(0) as u64;
    (cpu, peak, p95)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), Some(50));
        assert_eq!(quantile(&v, 0.99), Some(99));
        assert_eq!(quantile(&v, 1.0), Some(100));
        assert_eq!(quantile(&[7], 0.5), Some(7));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn this_process_can_be_sampled() {
        let s = read_proc(std::process::id(), ticks_per_sec()).expect("own /proc");
        assert!(s.rss_bytes > 0);
        assert!(s.cpu_secs >= 0.0);
    }

    #[test]
    fn dollar_hours_count_only_the_window() {
        let world: Shared = Arc::default();
        lock(&world).nodes.insert(
            "a".into(),
            NodeRecord {
                price: 2.0,
                seen_ms: 0,
                gone_ms: Some(3_600_000),
                ..NodeRecord::default()
            },
        );
        assert!((dollar_hours(&world, 0, 7_200_000) - 2.0).abs() < 1e-9);
        assert!((dollar_hours(&world, 1_800_000, 7_200_000) - 1.0).abs() < 1e-9);
        assert_eq!(nodes_at(&world, 100).len(), 1);
        assert!(nodes_at(&world, 3_600_001).is_empty());
    }
}
