//! `karpenter plan`: what would karpenter-rs launch for these pods and NodePools, and at
//! what price — without a cluster.

use crate::manifests;
use anyhow::{Context, Result, bail};
use karpenter_catalog::{Catalogue, CatalogueOptions, default_instance_types};
use karpenter_cloudprovider::ignored::node_pool_warnings;
use karpenter_cluster::inputs::Inputs;
use karpenter_cluster::scheduler_config::parse_scheduler_config;
use karpenter_scheduling::model::InstanceType;
use karpenter_scheduling::solver::{MinValuesPolicy, PreferencePolicy};
use karpenter_scheduling::{SolveOptions, solve};
use karpenter_simulator::plan_table::render_plan;
use std::borrow::Cow;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Arguments of `karpenter plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Manifest files or directories (YAML or JSON; multi-document and `kind: List` allowed):
    /// Pods, Deployments, ReplicaSets, StatefulSets, Jobs, DaemonSets, NodePools, NodeOverlays,
    /// CapacityBuffers (with their PodTemplates), Namespaces (and Services, with
    /// `--scheduler-config`).
    #[arg(
        required_unless_present = "from_cluster",
        conflicts_with = "from_cluster"
    )]
    pub paths: Vec<PathBuf>,
    /// Plan for the live cluster of the current kubeconfig (or the in-cluster config)
    /// instead of files: its pending pods, Nodes and the pods bound to them, NodeClaims in
    /// flight, NodePools, DaemonSets, PodDisruptionBudgets, Namespaces, NodeOverlays and
    /// CapacityBuffers (with what they reference), read with list requests only (any other
    /// request is refused by the client).
    #[arg(long)]
    pub from_cluster: bool,
    /// Instance-type catalogue (JSON, the format documented in docs/reference.md). Default:
    /// the bundled real EC2 catalogue with us-east-1 prices.
    #[arg(long, value_name = "FILE")]
    pub catalogue: Option<PathBuf>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// With `-o json`, list every instance-type option of each claim. By default a claim
    /// lists the cheapest 60, the ones its NodeClaim would carry, and
    /// `instanceTypeOptionsTotal` counts them all.
    #[arg(long)]
    pub all_instance_types: bool,
    /// How preferences (preferred affinities, ScheduleAnyway spreads, PreferNoSchedule) are
    /// treated, like Karpenter's PREFERENCE_POLICY.
    #[arg(long, value_enum, default_value_t = Preference::Respect)]
    pub preference_policy: Preference,
    /// What to do when a claim cannot keep a requirement's minValues, like Karpenter's
    /// MIN_VALUES_POLICY.
    #[arg(long, value_enum, default_value_t = MinValues::Strict)]
    pub min_values_policy: MinValues,
    /// Work budget of the packing optimiser, in its deterministic units (default 150
    /// million). Each pod gets budget/7,500 units of it (20,000 by default), so the time
    /// grows with the batch up to the whole budget at 7,500 pods. A larger budget may find
    /// cheaper plans; 0 gives the greedy (Karpenter-equivalent) plan with no bound.
    #[arg(long, value_name = "UNITS")]
    pub optimizer_work: Option<u64>,
    /// The kube-scheduler settings to mirror, as the controller's SCHEDULER_CONFIG: a YAML or
    /// JSON document (Karpenter's `podTopologySpread: {defaultConstraints: [...]}` or a
    /// KubeSchedulerConfiguration). Pods that declare no topology spread constraint get the
    /// defaults, with the selector of the Services and workloads in the manifests (or the
    /// cluster) that select them.
    #[arg(
        long,
        env = "SCHEDULER_CONFIG",
        default_value = "",
        value_name = "DOCUMENT"
    )]
    pub scheduler_config: String,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Human-readable tables.
    Table,
    /// The plan as JSON.
    Json,
}

/// `--preference-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Preference {
    /// Honour preferences, relaxing them one at a time when a pod cannot be placed.
    Respect,
    /// Ignore preferences.
    Ignore,
}

/// `--min-values-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MinValues {
    /// A pod whose claim cannot keep minValues is unschedulable on that pool.
    Strict,
    /// Keep as many values as possible.
    BestEffort,
}

/// The embedded catalogue's instance types, or those of the catalogue file `path`.
fn load_catalogue(path: Option<&Path>) -> Result<Cow<'static, [Arc<InstanceType>]>> {
    let Some(path) = path else {
        return Ok(Cow::Borrowed(default_instance_types()));
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading catalogue {}", path.display()))?;
    let catalogue =
        Catalogue::from_json(&text).with_context(|| format!("catalogue {}", path.display()))?;
    let types = catalogue
        .instance_types(&CatalogueOptions::default())
        .with_context(|| format!("catalogue {}", path.display()))?;
    Ok(Cow::Owned(types))
}

/// Runs the subcommand, writing to `out`.
pub fn run(args: &PlanArgs, out: &mut dyn std::io::Write) -> Result<()> {
    if args.all_instance_types && args.output != OutputFormat::Json {
        bail!("--all-instance-types changes only the JSON plan: add -o json");
    }
    // A JSON plan runs to megabytes, one write per line unbuffered.
    let mut out = std::io::BufWriter::new(out);
    let out: &mut dyn std::io::Write = &mut out;
    let scheduler_config = parse_scheduler_config(&args.scheduler_config)
        .context("--scheduler-config (SCHEDULER_CONFIG)")?;
    if args.from_cluster {
        let instance_types = load_catalogue(args.catalogue.as_deref())?;
        let (snapshot, warnings) =
            crate::plan_cluster::snapshot(&instance_types, scheduler_config.as_ref())?;
        warn(&warnings);
        let plan = solve(&snapshot, &solve_options(args));
        return write_plan(&plan, args, &[], out);
    }
    // Building the catalogue's instance types takes about as long as reading a thousand pods
    // (tens of milliseconds for the embedded 1,340 types), so the two run side by side.
    let (docs, instance_types) = std::thread::scope(|scope| {
        let catalogue = scope.spawn(|| load_catalogue(args.catalogue.as_deref()));
        let docs = manifests::load_paths(&args.paths);
        let catalogue = catalogue
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (docs, catalogue)
    });
    let docs = docs?;
    let mut inputs = Inputs::from_documents(&docs)?;
    inputs.configure_default_spread(scheduler_config.as_ref());
    // The documents are decoded; their heap (several times the input's size) is what the
    // solver should allocate from next, rather than growing the process by page faults.
    drop(docs);
    // `plan` predicts dynamic provisioning; static pools keep Karpenter's default gate.
    warn(&node_pool_warnings(
        &inputs.node_pools,
        karpenter_cloudprovider::ignored::STATIC_CAPACITY_DEFAULT,
    ));
    if inputs.node_pools.is_empty() {
        bail!(
            "no NodePool (karpenter.sh/v1) found in {}",
            display_paths(&args.paths)
        );
    }
    let instance_types = instance_types?;
    // CapacityBuffers and NodeOverlays in the manifests apply as with their gates on:
    // whoever passes them asks for their capacity and prices.
    warn(&inputs.buffer_notes());
    let types = inputs.pool_instance_types(&instance_types);
    warn(&types.warnings);
    warn(&inputs.requirement_warnings(&types.by_pool));
    let snapshot = inputs.snapshot_for(&types.by_pool)?;
    let ignored: Vec<String> = inputs
        .ignored
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    // The snapshot owns copies of the pods and pools; the same goes for these as for the
    // documents above.
    drop((inputs, types));
    let plan = solve(&snapshot, &solve_options(args));
    write_plan(&plan, args, &ignored, out)
}

/// Prints warnings on stderr, best effort: a closed stderr must not stop the plan.
fn warn(warnings: &[String]) {
    let mut stderr = std::io::stderr();
    for w in warnings {
        let _ = writeln!(stderr, "warning: {w}");
    }
}

fn solve_options(args: &PlanArgs) -> SolveOptions {
    let mut options = SolveOptions {
        preference_policy: match args.preference_policy {
            Preference::Respect => PreferencePolicy::Respect,
            Preference::Ignore => PreferencePolicy::Ignore,
        },
        min_values_policy: match args.min_values_policy {
            MinValues::Strict => MinValuesPolicy::Strict,
            MinValues::BestEffort => MinValuesPolicy::BestEffort,
        },
        ..SolveOptions::default()
    };
    if let Some(work) = args.optimizer_work {
        options.optimizer.max_work = work;
        options.optimizer.enabled = work > 0;
    }
    options
}

/// Prints `plan` in the format `args` ask for; `ignored` names the kinds of documents that
/// played no part.
fn write_plan(
    plan: &karpenter_scheduling::Plan,
    args: &PlanArgs,
    ignored: &[String],
    out: &mut dyn std::io::Write,
) -> Result<()> {
    match args.output {
        OutputFormat::Json => {
            // What the controller would put on each NodeClaim, unless asked for everything.
            let max_options = (!args.all_instance_types)
                .then_some(karpenter_cluster::provisioner::MAX_INSTANCE_TYPES);
            karpenter_simulator::plan_json::write_plan_json(plan, max_options, &mut *out)?;
            writeln!(out)?;
        }
        OutputFormat::Table => {
            write!(out, "{}", render_plan(plan))?;
            if !ignored.is_empty() {
                writeln!(out, "\nnot used for planning: {}", ignored.join(", "))?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

fn display_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
