//! The peer benchmark: the same waves of pods, on a fresh control plane, once with upstream
//! Karpenter (its kwok build, `scripts/upstream-karpenter.sh`) and once with
//! `karpenter controller --cloud-provider fake`, measured the same way. `scripts/peer-bench.sh`
//! builds and starts everything and calls this program:
//!
//! - `kwok-catalogue --out FILE`: our catalogue in the kwok provider's format, for the peer;
//! - `run …`: one controller through the sequence; writes a JSON result;
//! - `table FILE…`: the comparison table of several results (markdown).
//!
//! Not part of `cargo test`'s end-to-end suite: a full run takes hours. See
//! docs/benchmarks.md ("Side by side with upstream Karpenter").

#![forbid(unsafe_code)]

mod audit;
mod catalogue;
mod observe;
mod prom;
mod report;
mod workload;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use observe::now_ms;
use report::{PhaseResult, ProcWindow, RunResult, StageStats, Totals};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use workload::{Kind, Peer, Phase, Scale, Step};

#[derive(Parser)]
#[command(about = "Side by side with upstream Karpenter on the same control plane")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write our instance types in the format of upstream's kwok provider.
    KwokCatalogue {
        #[arg(long)]
        out: PathBuf,
    },
    /// Run one controller through the sequence (the controller must already run).
    Run(Box<RunArgs>),
    /// Print the comparison table of results written by `run`.
    Table { results: Vec<PathBuf> },
}

#[derive(clap::Args)]
struct RunArgs {
    /// `upstream` or `karpenter-rs` (which NodeClass the NodePool names).
    #[arg(long)]
    peer: String,
    /// `peers` (upstream's scenarios and the fleet) or `controller-scale`.
    #[arg(long, default_value = "peers")]
    suite: String,
    /// A tenth of the pods and shorter quiet windows.
    #[arg(long)]
    quick: bool,
    /// Only these scenarios (comma-separated), for `peers`.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Admin kubeconfig of the control plane.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The control plane's audit log.
    #[arg(long)]
    audit_log: PathBuf,
    /// `name=pid` of each process to sample (`controller`, `kwok`).
    #[arg(long = "pid", value_parser = parse_pair)]
    pids: Vec<(String, String)>,
    /// `actor=user name` of each client to count in the audit log.
    #[arg(long = "actor", value_parser = parse_pair)]
    actors: Vec<(String, String)>,
    /// The controller's `/metrics` URL (stage times).
    #[arg(long)]
    metrics_url: Option<String>,
    /// The controller's client budget, to check its requests against.
    #[arg(long, default_value_t = 200.0)]
    qps: f64,
    #[arg(long, default_value_t = 300.0)]
    burst: f64,
    #[arg(long, default_value = "peer-bench")]
    namespace: String,
    #[arg(long)]
    out: PathBuf,
}

fn parse_pair(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .ok_or_else(|| format!("expected name=value, got {s:?}"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    match Cli::parse().command {
        Command::KwokCatalogue { out } => {
            let json = catalogue::kwok_instance_types(karpenter_catalog::default_instance_types());
            std::fs::write(&out, serde_json::to_vec(&json)?)
                .with_context(|| format!("writing {}", out.display()))?;
            Ok(())
        }
        Command::Run(args) => run(*args).await,
        Command::Table { results } => {
            let mut runs = Vec::new();
            for path in results {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                let run: RunResult = serde_json::from_str(&text)
                    .with_context(|| format!("parsing {}", path.display()))?;
                runs.push(run);
            }
            // The peer first, then ours.
            runs.sort_by_key(|r| r.peer != "upstream");
            print!("{}", report::render(&runs));
            Ok(())
        }
    }
}

async fn client_for(path: &std::path::Path) -> anyhow::Result<kube::Client> {
    let kc = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

fn node_pools(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "nodepools"),
    )
}

fn apply_params() -> PatchParams {
    PatchParams::apply("peer-bench").force()
}

struct Bench {
    client: kube::Client,
    namespace: String,
    peer: Peer,
    max_cpu: u32,
    drift: u32,
}

impl Bench {
    async fn apply_pool(&self) -> anyhow::Result<()> {
        let pool = workload::node_pool(self.peer, self.drift, self.max_cpu);
        node_pools(&self.client)
            .patch(workload::NODE_POOL, &apply_params(), &Patch::Apply(&pool))
            .await
            .context("applying the NodePool")?;
        Ok(())
    }

    async fn step(&mut self, step: &Step) -> anyhow::Result<()> {
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), &self.namespace);
        match step {
            Step::Scale(sizes) => {
                for (w, n) in sizes {
                    let d = w.deployment(&self.namespace, *n);
                    deployments
                        .patch(&w.name, &apply_params(), &Patch::Apply(&d))
                        .await
                        .with_context(|| format!("applying Deployment {}", w.name))?;
                }
            }
            Step::Drift => {
                self.drift += 1;
                self.apply_pool().await?;
            }
            Step::Reset => {
                deployments
                    .delete_collection(&DeleteParams::background(), &ListParams::default())
                    .await
                    .context("deleting the Deployments")?;
                let _ = node_pools(&self.client)
                    .delete(workload::NODE_POOL, &DeleteParams::default())
                    .await;
            }
        }
        Ok(())
    }
}

async fn ensure_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let ns =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    Api::<Namespace>::all(client.clone())
        .patch(name, &apply_params(), &Patch::Apply(&ns))
        .await
        .context("creating the namespace")?;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    for _ in 0..240 {
        if sas.get_opt("default").await?.is_some() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    anyhow::bail!("namespace {name} got no default ServiceAccount")
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default()
}

/// Waits until `phase` is done; returns (all pods running since, timed out).
async fn wait_phase(
    phase: &Phase,
    world: &observe::Shared,
    start: i64,
    quiet_ms: i64,
    nodes_before: &std::collections::BTreeSet<String>,
) -> (Option<i64>, bool) {
    let mut ok_since: Option<i64> = None;
    let deadline = start + phase.timeout.as_millis() as i64;
    let mut last_report = start;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let s = observe::snapshot(world);
        let now = now_ms();
        let expected = phase.pods as usize;
        let pods_ok = s.live_pods == expected && s.ready_pods == expected;
        match (pods_ok, ok_since) {
            (true, None) => ok_since = Some(now),
            (false, Some(_)) => ok_since = None,
            _ => {}
        }
        let quiet = s.disrupting == 0
            && s.claims == s.nodes
            && now - s.last_change_ms.max(ok_since.unwrap_or(now)) >= quiet_ms;
        let done = match phase.kind {
            Kind::ScaleOut => pods_ok,
            Kind::Consolidation => pods_ok && quiet,
            Kind::Drift => {
                let world = observe::lock(world);
                let replaced = nodes_before
                    .iter()
                    .all(|n| world.nodes.get(n).is_none_or(|r| r.gone_ms.is_some()));
                drop(world);
                pods_ok && quiet && replaced
            }
            Kind::Reset => s.live_pods == 0 && s.nodes == 0 && s.claims == 0,
            Kind::Hold => now - start >= phase.timeout.as_millis() as i64,
        };
        if done {
            return (ok_since, false);
        }
        if phase.kind != Kind::Hold && now >= deadline {
            eprintln!("peer-bench: {} timed out: {s:?}", phase.name);
            return (ok_since, true);
        }
        if now - last_report >= 30_000 {
            last_report = now;
            eprintln!(
                "peer-bench: {} +{:.0}s: {}/{} pods running, {} nodes ({} disrupting), {} claims, ${:.2}/h",
                phase.name,
                (now - start) as f64 / 1000.0,
                s.ready_pods,
                s.live_pods,
                s.nodes,
                s.disrupting,
                s.claims,
                s.price
            );
        }
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn proc_windows(
    samples: &observe::Samples,
    names: &[String],
    from: i64,
    to: i64,
) -> BTreeMap<String, ProcWindow> {
    names
        .iter()
        .map(|name| {
            let (cpu, peak, p95) = observe::proc_window(samples, name, from, to);
            let secs = ((to - from) as f64 / 1000.0).max(0.001);
            (
                name.clone(),
                ProcWindow {
                    cpu_secs: cpu,
                    avg_cores: cpu / secs,
                    peak_rss_mib: mib(peak),
                    p95_rss_mib: mib(p95),
                },
            )
        })
        .collect()
}

const STAGE_FAMILY: &str = "controller_runtime_reconcile_time_seconds";

async fn stage_histograms(url: Option<&str>) -> BTreeMap<String, prom::Histogram> {
    match url {
        Some(u) => prom::histograms(&prom::scrape(u).await, STAGE_FAMILY, "controller"),
        None => BTreeMap::new(),
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let peer = match args.peer.as_str() {
        "upstream" => Peer::Upstream,
        "karpenter-rs" => Peer::KarpenterRs,
        other => anyhow::bail!("--peer: expected upstream or karpenter-rs, got {other:?}"),
    };
    let scale = Scale {
        factor: if args.quick { 0.1 } else { 1.0 },
    };
    for o in &args.only {
        anyhow::ensure!(
            workload::SCENARIOS.contains(&o.as_str()),
            "--only: unknown scenario {o:?} (known: {})",
            workload::SCENARIOS.join(", ")
        );
    }
    let (phases, max_cpu) = match args.suite.as_str() {
        "peers" => (workload::plan(scale, &args.only), 32),
        "controller-scale" => (workload::controller_scale(args.quick), 9),
        other => anyhow::bail!("--suite: expected peers or controller-scale, got {other:?}"),
    };
    let quiet_ms = if args.quick { 60_000 } else { 180_000 };
    let client = client_for(&args.kubeconfig).await?;
    ensure_namespace(&client, &args.namespace).await?;
    let mut bench = Bench {
        client: client.clone(),
        namespace: args.namespace.clone(),
        peer,
        max_cpu,
        drift: 0,
    };
    bench.apply_pool().await?;
    let world = observe::watch(client.clone(), &args.namespace).await;
    let mut pids = Vec::new();
    for (name, pid) in &args.pids {
        let pid: u32 = pid
            .parse()
            .with_context(|| format!("--pid {name}: not a process id: {pid:?}"))?;
        pids.push((name.clone(), pid));
    }
    let proc_names: Vec<String> = pids.iter().map(|(n, _)| n.clone()).collect();
    let samples = observe::sample_processes(pids);
    let load_before = load_average();
    let started = jiff::Timestamp::now().to_string();
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut results: Vec<PhaseResult> = Vec::new();
    let mut start = now_ms();
    for phase in &phases {
        eprintln!(
            "peer-bench: {}: {} ({} pods)",
            args.peer, phase.name, phase.pods
        );
        let counters = {
            let w = observe::lock(&world);
            (w.claims_created, w.nodes_deleted)
        };
        let stages_before = stage_histograms(args.metrics_url.as_deref()).await;
        let nodes_before = observe::nodes_at(&world, start);
        bench.step(&phase.step).await?;
        let (ok_since, timed_out) = wait_phase(phase, &world, start, quiet_ms, &nodes_before).await;
        if phase.kind == Kind::Reset {
            bench.apply_pool().await?;
        }
        let end = now_ms();
        let s = observe::snapshot(&world);
        let (pending, never_ran) = observe::pending_times(&world, start, end);
        let (claims_created, nodes_deleted) = {
            let w = observe::lock(&world);
            (w.claims_created, w.nodes_deleted)
        };
        let stages_after = stage_histograms(args.metrics_url.as_deref()).await;
        let stages = stages_after
            .iter()
            .map(|(name, h)| {
                let d = h.since(stages_before.get(name));
                let ms = |v: Option<f64>| v.map(|v| v * 1000.0);
                (
                    name.clone(),
                    StageStats {
                        count: d.count,
                        mean_ms: ms(d.mean()),
                        p50_ms: ms(d.quantile(0.5)),
                        p99_ms: ms(d.quantile(0.99)),
                    },
                )
            })
            .filter(|(_, s)| s.count > 0.0)
            .collect();
        let secs = |ms: i64| ms as f64 / 1000.0;
        let running = ok_since.map(|t| secs(t - start));
        let settled = s
            .last_change_ms
            .max(ok_since.unwrap_or(start))
            .max(start)
            .min(end);
        let result = PhaseResult {
            name: phase.name.clone(),
            kind: phase.kind,
            pods: phase.pods,
            start_ms: start,
            end_ms: end,
            running_secs: running,
            settled_secs: secs(settled - start),
            total_secs: secs(end - start),
            timed_out,
            pending_p50_secs: observe::quantile(&pending, 0.5).map(secs),
            pending_p99_secs: observe::quantile(&pending, 0.99).map(secs),
            never_ran,
            nodes: s.nodes,
            price_per_hour: s.price,
            dollar_hours: observe::dollar_hours(&world, start, end),
            cpu_util: s.cpu_util,
            memory_util: s.memory_util,
            launches: claims_created - counters.0,
            nodes_removed: nodes_deleted - counters.1,
            procs: proc_windows(&samples, &proc_names, start, end),
            api: BTreeMap::new(),
            stages,
            thresholds: phase.thresholds,
        };
        eprintln!(
            "peer-bench: {}: {} done in {:.0} s (running after {}), {} nodes, ${:.2}/h",
            args.peer,
            phase.name,
            result.total_secs,
            running.map_or_else(|| "never".to_owned(), |r| format!("{r:.0} s")),
            result.nodes,
            result.price_per_hour
        );
        results.push(result);
        start = end;
    }
    let end = start;
    let first = results.first().map_or(end, |p| p.start_ms);
    // Let the last requests reach the audit log.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let actors: BTreeMap<String, String> = args.actors.iter().cloned().collect();
    let windows: Vec<(i64, i64)> = results.iter().map(|p| (p.start_ms, p.end_ms)).collect();
    let audit = audit::read(&args.audit_log, &actors, &windows)
        .with_context(|| format!("reading {}", args.audit_log.display()))?;
    let mut api_total: BTreeMap<String, audit::ApiCounts> = BTreeMap::new();
    for (p, counts) in results.iter_mut().zip(&audit.counts) {
        p.api = counts.clone();
        for (actor, c) in counts {
            api_total.entry(actor.clone()).or_default().add(c);
        }
    }
    let budget = audit.times.get("controller").map(|t| {
        let in_run: Vec<i64> = t
            .iter()
            .copied()
            .filter(|t| *t >= first && *t < end)
            .collect();
        audit::budget(&in_run, args.qps, args.burst)
    });
    let result = RunResult {
        peer: args.peer.clone(),
        suite: args.suite.clone(),
        quick: args.quick,
        started,
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
        load_before,
        load_after: load_average(),
        totals: Totals {
            wall_secs: (end - first) as f64 / 1000.0,
            dollar_hours: observe::dollar_hours(&world, first, end),
            procs: proc_windows(&samples, &proc_names, first, end),
            api: api_total,
            budget,
        },
        phases: results,
    };
    std::fs::write(&args.out, serde_json::to_vec_pretty(&result)?)
        .with_context(|| format!("writing {}", args.out.display()))?;
    if args.suite == "controller-scale" {
        print!("{}", report::scale_table(&result));
    } else {
        print!("{}", report::render(std::slice::from_ref(&result)));
    }
    Ok(())
}
