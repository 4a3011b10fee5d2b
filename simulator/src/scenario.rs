//! The scenario format (`apiVersion: karpenter-rs/v1alpha1`, `kind: Scenario`): settings,
//! manifests (inline or files) and a timeline of events. Unknown fields and bad values are
//! errors naming the file, the document and the field. See docs/simulator.md.

use crate::Files;
use karpenter_cloudprovider::duration::parse_go_duration;
use karpenter_cluster::manifests::{Document, ManifestError};
use karpenter_cluster::provisioner::{DEFAULT_BATCH_IDLE_MS, DEFAULT_BATCH_MAX_MS};
use karpenter_cluster::scheduler_config::{SchedulerConfig, parse_scheduler_config};
use karpenter_scheduling::model::Millis;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The scenario API version.
pub const API_VERSION: &str = "karpenter-rs/v1alpha1";

/// The longest duration a scenario may write: Go's (`2562047h47m16.854775807s`, the most
/// nanoseconds an `i64` holds), in milliseconds. Bare seconds are held to it too, so sums of
/// a few durations (the virtual clock plus a latency) stay far from the `i64` limit.
pub const MAX_DURATION_MS: Millis = i64::MAX / 1_000_000;

/// A Go-style duration (`30s`, `1h30m`) or whole seconds, in milliseconds; negative values
/// and values above [`MAX_DURATION_MS`] are rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Millis);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let ms = match Value::deserialize(d)? {
            Value::String(text) => {
                let nanos = parse_go_duration(&text).map_err(serde::de::Error::custom)?;
                if nanos < 0 {
                    return Err(serde::de::Error::custom(format!(
                        "duration {text:?} is negative"
                    )));
                }
                nanos / 1_000_000
            }
            Value::Number(n) => {
                let seconds = n.as_u64().ok_or_else(|| {
                    serde::de::Error::custom(format!("{n} is not a whole number of seconds"))
                })?;
                i64::try_from(seconds)
                    .ok()
                    .and_then(|s| s.checked_mul(1000))
                    .filter(|ms| *ms <= MAX_DURATION_MS)
                    .ok_or_else(|| {
                        serde::de::Error::custom(format!(
                            "{n} seconds is longer than the longest duration, \
                             2562047h47m16s ({} seconds)",
                            MAX_DURATION_MS / 1000
                        ))
                    })?
            }
            other => {
                return Err(serde::de::Error::custom(format!(
                    "expected a duration such as \"30s\" or \"1h30m\", found {other}"
                )));
            }
        };
        Ok(Dur(ms))
    }
}

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScenarioFile {
    /// Must be [`API_VERSION`].
    pub api_version: String,
    /// Must be `Scenario`.
    pub kind: String,
    /// Name and description.
    #[serde(default)]
    pub metadata: Metadata,
    /// The scenario.
    pub spec: Spec,
}

/// `metadata`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Metadata {
    /// Name, shown in the report.
    #[serde(default)]
    pub name: String,
    /// What the scenario shows.
    #[serde(default)]
    pub description: String,
}

/// `spec`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Spec {
    /// How much cluster time to simulate (default: the last event plus 15 minutes).
    #[serde(default)]
    pub duration: Option<Dur>,
    /// Timings and switches.
    #[serde(default)]
    pub settings: Settings,
    /// Manifests present at time 0: inline objects or `{file: path}` (relative to the
    /// scenario; a directory reads every YAML/JSON file in it).
    #[serde(default)]
    pub manifests: Vec<Value>,
    /// Events, in time order.
    #[serde(default)]
    pub timeline: Vec<Event>,
}

fn d(ms: Millis) -> Dur {
    Dur(ms)
}

/// `spec.settings`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Settings {
    /// Karpenter's BATCH_IDLE_DURATION (default 1s).
    pub batch_idle_duration: Dur,
    /// Karpenter's BATCH_MAX_DURATION (default 10s).
    pub batch_max_duration: Dur,
    /// Provider launch latency: NodeClaim launched → Node registered (default 30s).
    pub launch_latency: Dur,
    /// Node registered → initialized, startup taints removed (default 10s).
    pub initialization_delay: Dur,
    /// Pod bound → Ready (default 5s).
    pub pod_startup_time: Dur,
    /// How long a Job pod runs once Ready, unless the Job is annotated
    /// `karpenter-rs/simulated-run-time` (default 5m).
    pub job_run_time: Dur,
    /// How often the disruption controller runs (default 10s).
    pub disruption_interval: Dur,
    /// Delay before a consolidation command is validated (default 15s).
    pub validation_delay: Dur,
    /// Notice between a spot interruption warning and the instance's reclamation (2m).
    pub interruption_notice: Dur,
    /// The SpotToSpotConsolidation feature gate (default false).
    pub spot_to_spot_consolidation: bool,
    /// Re-pack consolidation, karpenter-rs's own method (default true, as the controller's
    /// `--repack-consolidation`); the Karpenter-equivalent run of `--compare` never uses it.
    pub repack_consolidation: bool,
    /// The least share of the replaced nodes' price a re-pack must save, in [0, 1)
    /// (default 0.1, as the controller's `--repack-price-improvement-threshold`).
    pub repack_price_improvement_threshold: f64,
    /// How long after launch a node is left out of re-packing, from 0s to 24h (default 10m,
    /// as the controller's `--repack-min-node-age`).
    pub repack_min_node_age: Dur,
    /// The least score a re-pack must reach in each pool it touches (savings share over
    /// disruption share, as `Balanced` scores), from 0 to 100 (default 0: off, as the
    /// controller's `--repack-min-score`).
    pub repack_min_score: f64,
    /// The NodeOverlay feature gate (default false, as Karpenter's): NodeOverlays in the
    /// manifests change the pools' instance types only when it is on.
    pub node_overlay: bool,
    /// The StaticCapacity feature gate (default false, as in Karpenter): static NodePools
    /// (`spec.replicas`) are kept at their size.
    pub static_capacity: bool,
    /// The CapacityBuffer feature gate (default false, as in Karpenter): CapacityBuffers
    /// (`autoscaling.x-k8s.io/v1beta1`) in the manifests keep spare capacity.
    pub capacity_buffer: bool,
    /// Whether the packing optimiser improves greedy plans (default true; `--compare`
    /// runs both).
    pub optimizer: bool,
    /// Instance-type catalogue (JSON, relative to the scenario); default the embedded one.
    pub catalogue: Option<PathBuf>,
    /// The ReservedCapacity feature gate (default true, as in Karpenter): off, the
    /// reservations below are neither offered nor launched into.
    pub reserved_capacity: bool,
    /// Capacity reservations the simulated cloud holds (EC2 On-Demand Capacity
    /// Reservations or Capacity Blocks): NodePools that allow `reserved` launch into them
    /// first.
    pub capacity_reservations: Vec<CapacityReservation>,
    /// How fast the kube-controller-manager's workload controllers create pods.
    pub kube_controller_manager: ControllerManagerSettings,
    /// How fast the kube-scheduler marks pods unschedulable and binds them.
    pub kube_scheduler: SchedulerSettings,
    /// Karpenter's SCHEDULER_CONFIG, inline (an object) or as the text of the document:
    /// default topology spread constraints for pods that declare none, applied by the
    /// simulated provisioner and kube-scheduler alike.
    pub scheduler_config: SchedulerConfigSetting,
}

/// `spec.settings.kubeControllerManager`: the kube-controller-manager's flags that set how
/// fast Deployments, ReplicaSets, StatefulSets and Jobs create pods (its defaults).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControllerManagerSettings {
    /// `--kube-api-qps` (20): requests a second of each controller's client.
    #[serde(rename = "kubeAPIQPS")]
    pub kube_api_qps: f64,
    /// `--kube-api-burst` (30): requests a client may send at once.
    #[serde(rename = "kubeAPIBurst")]
    pub kube_api_burst: u32,
    /// `--concurrent-replicaset-syncs` (5): ReplicaSets (so Deployments) synced at once.
    #[serde(rename = "concurrentReplicaSetSyncs")]
    pub concurrent_replica_set_syncs: u32,
    /// `--concurrent-statefulset-syncs` (5).
    #[serde(rename = "concurrentStatefulSetSyncs")]
    pub concurrent_stateful_set_syncs: u32,
    /// `--concurrent-job-syncs` (5).
    #[serde(rename = "concurrentJobSyncs")]
    pub concurrent_job_syncs: u32,
}

impl Default for ControllerManagerSettings {
    fn default() -> Self {
        Self {
            kube_api_qps: 20.0,
            kube_api_burst: 30,
            concurrent_replica_set_syncs: 5,
            concurrent_stateful_set_syncs: 5,
            concurrent_job_syncs: 5,
        }
    }
}

/// `spec.settings.kubeScheduler`: the kube-scheduler's client rate
/// (`clientConnection.qps` / `burst` of its configuration), which paces its status updates
/// (`PodScheduled=False`, what the provisioner waits for) and its bindings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerSettings {
    /// `clientConnection.qps` (50).
    #[serde(rename = "kubeAPIQPS")]
    pub kube_api_qps: f64,
    /// `clientConnection.burst` (100).
    #[serde(rename = "kubeAPIBurst")]
    pub kube_api_burst: u32,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self {
            kube_api_qps: 50.0,
            kube_api_burst: 100,
        }
    }
}

/// The most requests a second a client rate may be set to: far above any real control
/// plane's, and low enough that a token is never shorter than the virtual clock can tell
/// apart from the next by rounding alone.
pub const MAX_CLIENT_QPS: f64 = 1_000_000.0;

/// Checks a client's rate: `qps` in (0, [`MAX_CLIENT_QPS`]], `burst` at least 1;
/// `Err((field, message))` names the field under `prefix`.
fn check_client_rate(prefix: &str, qps: f64, burst: u32) -> Result<(), (String, String)> {
    if !(qps.is_finite() && qps > 0.0 && qps <= MAX_CLIENT_QPS) {
        return Err((
            format!("{prefix}.kubeAPIQPS"),
            format!(
                "must be a number of requests a second above 0 and at most {MAX_CLIENT_QPS}, found {qps}"
            ),
        ));
    }
    if burst == 0 {
        return Err((
            format!("{prefix}.kubeAPIBurst"),
            "must be at least 1".to_owned(),
        ));
    }
    Ok(())
}

impl Settings {
    /// Checks the values serde cannot: positive batch and disruption intervals, client
    /// rates in range, at least one worker per controller. `Err((field, message))` names
    /// the field under `spec.settings`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.batch_idle_duration.0 <= 0 || self.batch_max_duration.0 <= 0 {
            return Err((
                "spec.settings".to_owned(),
                "batch durations must be positive".to_owned(),
            ));
        }
        if self.disruption_interval.0 <= 0 {
            return Err((
                "spec.settings.disruptionInterval".to_owned(),
                "must be positive".to_owned(),
            ));
        }
        let cm = &self.kube_controller_manager;
        let prefix = "spec.settings.kubeControllerManager";
        check_client_rate(prefix, cm.kube_api_qps, cm.kube_api_burst)?;
        for (field, workers) in [
            ("concurrentReplicaSetSyncs", cm.concurrent_replica_set_syncs),
            (
                "concurrentStatefulSetSyncs",
                cm.concurrent_stateful_set_syncs,
            ),
            ("concurrentJobSyncs", cm.concurrent_job_syncs),
        ] {
            if workers == 0 {
                return Err((format!("{prefix}.{field}"), "must be at least 1".to_owned()));
            }
        }
        let s = &self.kube_scheduler;
        check_client_rate(
            "spec.settings.kubeScheduler",
            s.kube_api_qps,
            s.kube_api_burst,
        )
    }
}

/// `spec.settings.schedulerConfig`, parsed and validated as the controller's
/// `--scheduler-config` (see [`karpenter_cluster::scheduler_config`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedulerConfigSetting(pub Option<SchedulerConfig>);

impl<'de> Deserialize<'de> for SchedulerConfigSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = match Value::deserialize(d)? {
            Value::Null => return Ok(Self(None)),
            Value::String(text) => text,
            other => other.to_string(),
        };
        parse_scheduler_config(&text)
            .map(Self)
            .map_err(serde::de::Error::custom)
    }
}

/// One entry of `spec.settings.capacityReservations`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapacityReservation {
    /// Its id (`cr-0123456789abcdef0`).
    pub id: String,
    /// The instance type it holds.
    pub instance_type: String,
    /// Its zone.
    pub zone: String,
    /// How many instances it holds.
    pub count: u32,
    /// `default` (an On-Demand Capacity Reservation, the default) or `capacity-block`.
    #[serde(default = "default_reservation_type", rename = "type")]
    pub reservation_type: String,
    /// Whether its instances may be interrupted (default false).
    #[serde(default)]
    pub interruptible: bool,
}

fn default_reservation_type() -> String {
    "default".to_owned()
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            batch_idle_duration: d(DEFAULT_BATCH_IDLE_MS),
            batch_max_duration: d(DEFAULT_BATCH_MAX_MS),
            launch_latency: d(30_000),
            initialization_delay: d(10_000),
            pod_startup_time: d(5_000),
            job_run_time: d(300_000),
            disruption_interval: d(10_000),
            validation_delay: d(15_000),
            interruption_notice: d(120_000),
            spot_to_spot_consolidation: false,
            repack_consolidation: true,
            repack_price_improvement_threshold:
                karpenter_disruption::input::DEFAULT_PRICE_IMPROVEMENT_THRESHOLD,
            repack_min_node_age: d(karpenter_disruption::input::DEFAULT_REPACK_MIN_NODE_AGE_MS),
            repack_min_score: karpenter_disruption::input::DEFAULT_REPACK_MIN_SCORE,
            node_overlay: false,
            static_capacity: false,
            capacity_buffer: false,
            optimizer: true,
            catalogue: None,
            reserved_capacity: true,
            capacity_reservations: Vec::new(),
            kube_controller_manager: ControllerManagerSettings::default(),
            kube_scheduler: SchedulerSettings::default(),
            scheduler_config: SchedulerConfigSetting::default(),
        }
    }
}

/// One timeline entry: when (`at` from the start, or `after` the previous entry), and at
/// most one action. An entry with no action only advances time.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Event {
    /// Time since the start.
    #[serde(default)]
    pub at: Option<Dur>,
    /// Time since the previous entry.
    #[serde(default)]
    pub after: Option<Dur>,
    /// A note printed in the log.
    #[serde(default)]
    pub note: Option<String>,
    /// Create or replace a manifest (inline or `{file: path}`).
    #[serde(default)]
    pub apply: Option<Value>,
    /// Delete an object.
    #[serde(default)]
    pub delete: Option<ObjectRef>,
    /// Scale a workload.
    #[serde(default)]
    pub scale: Option<Scale>,
    /// JSON-merge-patch a NodePool (changing its template makes its nodes drift).
    #[serde(default)]
    pub update_node_pool: Option<NodePoolUpdate>,
    /// Make the provider report drift (e.g. a new AMI) for a pool's current NodeClaims.
    #[serde(default)]
    pub drift: Option<Drift>,
    /// Spot interruption warning for nodes.
    #[serde(default)]
    pub interrupt: Option<Interrupt>,
    /// Make offerings fail with insufficient capacity.
    #[serde(default)]
    pub insufficient_capacity: Option<Offerings>,
    /// Restore capacity for every offering (and forget learnt unavailability).
    #[serde(default)]
    pub restore_capacity: Option<Empty>,
    /// Make the next launches fail with an error that is neither capacity nor NodeClass
    /// (an EC2 API error): the controller keeps such a claim and launches it again.
    #[serde(default)]
    pub fail_launches: Option<FailLaunches>,
}

/// `failLaunches`: the next `count` launches fail with `reason`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FailLaunches {
    /// How many launches fail (positive).
    pub count: u32,
    /// The provider's reason, set on the claim's `Launched` condition (default
    /// `LaunchFailed`).
    #[serde(default)]
    pub reason: Option<String>,
}

/// `{}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `delete`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectRef {
    /// Kind (`Deployment`, `Job`, `Pod`, `NodePool`, `PodDisruptionBudget`, `DaemonSet` …).
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace (default `default`; ignored for cluster-scoped kinds).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `scale`: exactly one of the workload fields.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scale {
    /// Deployment name.
    #[serde(default)]
    pub deployment: Option<String>,
    /// ReplicaSet name.
    #[serde(default)]
    pub replica_set: Option<String>,
    /// StatefulSet name.
    #[serde(default)]
    pub stateful_set: Option<String>,
    /// Job name (sets its parallelism).
    #[serde(default)]
    pub job: Option<String>,
    /// Namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The new replica count.
    pub replicas: i32,
}

/// `updateNodePool`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodePoolUpdate {
    /// NodePool name.
    pub name: String,
    /// A JSON merge patch (RFC 7386) applied to the whole object.
    pub patch: Value,
}

/// `drift`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Drift {
    /// The pool whose current NodeClaims drift.
    pub node_pool: String,
    /// The provider's reason (default `AMIDrift`).
    #[serde(default)]
    pub reason: Option<String>,
}

/// `interrupt`: one node by name, or `count` nodes (oldest first) matching the filters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Interrupt {
    /// A node name.
    #[serde(default)]
    pub node: Option<String>,
    /// Only nodes of this pool.
    #[serde(default)]
    pub node_pool: Option<String>,
    /// Only nodes of this capacity type (default `spot`).
    #[serde(default)]
    pub capacity_type: Option<String>,
    /// How many (default 1).
    #[serde(default)]
    pub count: Option<usize>,
}

/// `insufficientCapacity`: every offering matching the given fields (absent = any).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Offerings {
    /// Instance type.
    #[serde(default)]
    pub instance_type: Option<String>,
    /// Zone.
    #[serde(default)]
    pub zone: Option<String>,
    /// Capacity type.
    #[serde(default)]
    pub capacity_type: Option<String>,
}

/// What an event does.
#[derive(Debug, Clone)]
pub enum Action {
    /// Only advance time.
    Advance,
    /// Create or replace these documents.
    Apply(Vec<Document>),
    /// Delete an object.
    Delete(ObjectRef),
    /// Scale a workload: kind, namespace, name, replicas.
    Scale {
        /// `Deployment`, `ReplicaSet`, `StatefulSet` or `Job`.
        kind: &'static str,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Replicas (parallelism for a Job).
        replicas: i32,
    },
    /// Patch a NodePool.
    UpdateNodePool(NodePoolUpdate),
    /// Provider drift.
    Drift(Drift),
    /// Spot interruption.
    Interrupt(Interrupt),
    /// Insufficient capacity.
    InsufficientCapacity(Offerings),
    /// Capacity back.
    RestoreCapacity,
    /// Failing launches.
    FailLaunches(FailLaunches),
}

/// A timeline entry resolved to an absolute time.
#[derive(Debug, Clone)]
pub struct TimedAction {
    /// Milliseconds since the start.
    pub at: Millis,
    /// Where it is written (`file: spec.timeline[3]`).
    pub origin: String,
    /// A note to log.
    pub note: Option<String>,
    /// What to do.
    pub action: Action,
}

/// A loaded scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name (metadata.name or the file stem).
    pub name: String,
    /// Description.
    pub description: String,
    /// Simulated time.
    pub duration: Millis,
    /// Settings.
    pub settings: Settings,
    /// Documents present at time 0.
    pub manifests: Vec<Document>,
    /// Timeline, sorted by time (stable).
    pub timeline: Vec<TimedAction>,
}

/// Why a scenario cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Reading or decoding failed.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The file holds no Scenario document, or several.
    #[error("{path}: expected exactly one document of kind Scenario, found {found}")]
    NotOneScenario {
        /// The file.
        path: String,
        /// How many documents it has.
        found: usize,
    },
}

fn base_dir(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Resolves an inline object or a `{file: path}` reference found at `field`.
fn documents(
    files: &dyn Files,
    scenario: &Document,
    field: &str,
    value: &Value,
) -> Result<Vec<Document>, ManifestError> {
    match value {
        Value::Object(map) if map.contains_key("kind") => {
            let doc = Document {
                file: PathBuf::from(format!("{}#{field}", scenario.file.display())),
                index: 1,
                value: value.clone(),
            };
            Ok(vec![doc])
        }
        Value::Object(map) if map.len() == 1 && map.contains_key("file") => {
            let Some(file) = map.get("file").and_then(Value::as_str) else {
                return Err(scenario.invalid(format!("{field}.file"), "expected a path string"));
            };
            let path = base_dir(&scenario.file).join(file);
            files.manifests(&path)
        }
        _ => Err(scenario.invalid(
            field,
            "expected a Kubernetes object (with `kind`) or `{file: path}`",
        )),
    }
}

impl Scenario {
    /// Reads and validates the scenario file at `path`, with the manifest files it names,
    /// through `files` (`{file: path}` references and the catalogue are resolved against the
    /// scenario's directory). A scenario that loads has one action per timeline entry, in
    /// time order, a positive duration and positive batch and disruption intervals.
    ///
    /// # Errors
    ///
    /// A file that cannot be read or parsed, a field with a bad value (naming the file, the
    /// document and the field), or a file that is not exactly one Scenario document.
    pub fn load(path: &Path, files: &dyn Files) -> Result<Self, ScenarioError> {
        let docs = crate::manifest_file(files, path)?;
        if docs.len() != 1 {
            return Err(ScenarioError::NotOneScenario {
                path: path.display().to_string(),
                found: docs.len(),
            });
        }
        let doc = &docs[0];
        let file: ScenarioFile = doc.decode()?;
        if file.api_version != API_VERSION {
            return Err(doc
                .invalid(
                    "apiVersion",
                    format!("expected {API_VERSION:?}, found {:?}", file.api_version),
                )
                .into());
        }
        if file.kind != "Scenario" {
            return Err(doc
                .invalid(
                    "kind",
                    format!("expected \"Scenario\", found {:?}", file.kind),
                )
                .into());
        }
        let spec = file.spec;
        let mut manifests = Vec::new();
        for (i, m) in spec.manifests.iter().enumerate() {
            manifests.extend(documents(files, doc, &format!("spec.manifests[{i}]"), m)?);
        }
        let mut timeline = Vec::new();
        let mut previous: Millis = 0;
        for (i, e) in spec.timeline.iter().enumerate() {
            let field = format!("spec.timeline[{i}]");
            let at = match (e.at, e.after) {
                (Some(at), None) => at.0,
                (None, Some(after)) => previous.checked_add(after.0).ok_or_else(|| {
                    doc.invalid(
                        format!("{field}.after"),
                        "the event's time since the start is too large to represent",
                    )
                })?,
                _ => {
                    return Err(doc
                        .invalid(&field, "exactly one of `at` and `after` is required")
                        .into());
                }
            };
            if at < previous {
                return Err(doc
                    .invalid(
                        format!("{field}.at"),
                        "events must be in time order (this one is earlier than the previous)",
                    )
                    .into());
            }
            previous = at;
            let mut actions = Vec::new();
            if let Some(v) = &e.apply {
                actions.push(Action::Apply(documents(
                    files,
                    doc,
                    &format!("{field}.apply"),
                    v,
                )?));
            }
            if let Some(r) = &e.delete {
                actions.push(Action::Delete(r.clone()));
            }
            if let Some(s) = &e.scale {
                actions.push(scale(doc, &field, s)?);
            }
            if let Some(u) = &e.update_node_pool {
                if !u.patch.is_object() {
                    return Err(doc
                        .invalid(
                            format!("{field}.updateNodePool.patch"),
                            "expected a mapping",
                        )
                        .into());
                }
                actions.push(Action::UpdateNodePool(u.clone()));
            }
            if let Some(x) = &e.drift {
                actions.push(Action::Drift(x.clone()));
            }
            if let Some(x) = &e.interrupt {
                if x.node.is_some() && (x.node_pool.is_some() || x.count.is_some()) {
                    return Err(doc
                        .invalid(
                            format!("{field}.interrupt"),
                            "`node` cannot be combined with `nodePool` or `count`",
                        )
                        .into());
                }
                actions.push(Action::Interrupt(x.clone()));
            }
            if let Some(x) = &e.insufficient_capacity {
                actions.push(Action::InsufficientCapacity(x.clone()));
            }
            if e.restore_capacity.is_some() {
                actions.push(Action::RestoreCapacity);
            }
            if let Some(x) = &e.fail_launches {
                if x.count == 0 {
                    return Err(doc
                        .invalid(format!("{field}.failLaunches.count"), "must be positive")
                        .into());
                }
                actions.push(Action::FailLaunches(x.clone()));
            }
            if actions.len() > 1 {
                return Err(doc
                    .invalid(
                        &field,
                        "an event has at most one action; split it into several entries",
                    )
                    .into());
            }
            timeline.push(TimedAction {
                at,
                origin: format!("{}: {field}", path.display()),
                note: e.note.clone(),
                action: actions.pop().unwrap_or(Action::Advance),
            });
        }
        let duration = match spec.duration {
            Some(d) => d.0,
            None => previous.checked_add(15 * 60_000).ok_or_else(|| {
                doc.invalid(
                    "spec.duration",
                    "the default (the last event plus 15 minutes) is too large to represent; \
                     set a duration",
                )
            })?,
        };
        if duration <= 0 {
            return Err(doc.invalid("spec.duration", "must be positive").into());
        }
        let mut settings = spec.settings;
        settings
            .validate()
            .map_err(|(field, message)| doc.invalid(field, message))?;
        if let Some(c) = &settings.catalogue {
            settings.catalogue = Some(base_dir(path).join(c));
        }
        let name = if file.metadata.name.is_empty() {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            file.metadata.name
        };
        Ok(Self {
            name,
            description: file.metadata.description,
            duration,
            settings,
            manifests,
            timeline,
        })
    }
}

fn scale(doc: &Document, field: &str, s: &Scale) -> Result<Action, ManifestError> {
    let named = [
        ("Deployment", &s.deployment),
        ("ReplicaSet", &s.replica_set),
        ("StatefulSet", &s.stateful_set),
        ("Job", &s.job),
    ];
    let set: Vec<_> = named
        .iter()
        .filter_map(|(k, n)| n.as_ref().map(|n| (*k, n.clone())))
        .collect();
    let [(kind, name)] = set.as_slice() else {
        return Err(doc.invalid(
            format!("{field}.scale"),
            "exactly one of deployment, replicaSet, statefulSet, job is required",
        ));
    };
    if s.replicas < 0 {
        return Err(doc.invalid(format!("{field}.scale.replicas"), "must not be negative"));
    }
    Ok(Action::Scale {
        kind,
        namespace: s.namespace.clone().unwrap_or_else(|| "default".into()),
        name: name.clone(),
        replicas: s.replicas,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The disk, for scenarios written to a temporary directory.
    struct Disk;

    impl Files for Disk {
        fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
            std::fs::read_to_string(path)
        }
    }

    fn load(text: &str) -> Result<Scenario, ScenarioError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.yaml");
        std::fs::write(&path, text).unwrap();
        Scenario::load(&path, &Disk)
    }

    const HEAD: &str = "apiVersion: karpenter-rs/v1alpha1\nkind: Scenario\nmetadata: {name: t}\n";

    #[test]
    fn timeline_resolves_at_and_after() {
        let s = load(&format!(
            "{HEAD}spec:\n  timeline:\n  - at: 30s\n    scale: {{deployment: web, replicas: 3}}\n  - after: 1m\n  - after: 90\n    restoreCapacity: {{}}\n"
        ))
        .unwrap();
        let at: Vec<_> = s.timeline.iter().map(|t| t.at).collect();
        assert_eq!(at, [30_000, 90_000, 180_000]);
        assert_eq!(s.duration, 180_000 + 15 * 60_000);
        assert!(matches!(
            &s.timeline[0].action,
            Action::Scale {
                kind: "Deployment",
                replicas: 3,
                ..
            }
        ));
        assert!(matches!(s.timeline[1].action, Action::Advance));
    }

    #[test]
    fn errors_name_file_document_and_field() {
        let err = load(&format!("{HEAD}spec:\n  settings:\n    batchIdle: 1s\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("s.yaml (document 1, Scenario t): field spec.settings"),
            "{err}"
        );
        assert!(err.contains("batchIdle"), "{err}");
        let err = load(&format!("{HEAD}spec:\n  duration: soon\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("field spec.duration"), "{err}");
        let err = load(&format!(
            "{HEAD}spec:\n  timeline:\n  - at: 1m\n  - at: 30s\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("spec.timeline[1].at"), "{err}");
        let err = load(&format!(
            "{HEAD}spec:\n  timeline:\n  - at: 1m\n    scale: {{deployment: a, job: b, replicas: 1}}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("spec.timeline[0].scale"), "{err}");
        let err = load("apiVersion: v1\nkind: Scenario\nspec: {}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("field apiVersion"), "{err}");
    }

    #[test]
    fn bad_client_rates_are_rejected_naming_the_field() {
        let cases = [
            (
                "kubeControllerManager: {kubeAPIQPS: 0}",
                "spec.settings.kubeControllerManager.kubeAPIQPS",
            ),
            (
                "kubeControllerManager: {kubeAPIQPS: -5}",
                "spec.settings.kubeControllerManager.kubeAPIQPS",
            ),
            (
                "kubeControllerManager: {kubeAPIQPS: 2000000}",
                "spec.settings.kubeControllerManager.kubeAPIQPS",
            ),
            (
                "kubeControllerManager: {kubeAPIBurst: 0}",
                "spec.settings.kubeControllerManager.kubeAPIBurst",
            ),
            (
                "kubeControllerManager: {concurrentJobSyncs: 0}",
                "spec.settings.kubeControllerManager.concurrentJobSyncs",
            ),
            (
                "kubeScheduler: {kubeAPIQPS: 0}",
                "spec.settings.kubeScheduler.kubeAPIQPS",
            ),
            (
                "kubeScheduler: {kubeAPIBurst: 0}",
                "spec.settings.kubeScheduler.kubeAPIBurst",
            ),
        ];
        for (setting, field) in cases {
            let err = load(&format!("{HEAD}spec:\n  settings: {{{setting}}}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(&format!("field {field}")), "{setting}: {err}");
        }
        let ok = load(&format!(
            "{HEAD}spec:\n  settings: {{kubeControllerManager: {{kubeAPIQPS: 50, kubeAPIBurst: 100}}}}\n"
        ))
        .unwrap();
        assert_eq!(ok.settings.kube_controller_manager.kube_api_qps, 50.0);
        assert_eq!(
            Settings::default().kube_controller_manager,
            ControllerManagerSettings {
                kube_api_qps: 20.0,
                kube_api_burst: 30,
                concurrent_replica_set_syncs: 5,
                concurrent_stateful_set_syncs: 5,
                concurrent_job_syncs: 5,
            }
        );
    }

    /// Found by the `scenario` fuzz target (and its proptest): bare seconds near the `i64`
    /// millisecond limit overflowed when an `after` was added to the previous event, when 15
    /// minutes were added to the last event for the default duration, and in the engine when
    /// a latency setting was added to the virtual clock. Durations are now held to Go's
    /// range, and the timeline's sums are checked (about a million `after`s of the longest duration
    /// would still add up past the limit).
    #[test]
    fn durations_beyond_go_range_are_errors() {
        let too_long = i64::MAX / 1000;
        for field in ["duration", "settings:\n    launchLatency"] {
            let err = load(&format!("{HEAD}spec:\n  {field}: {too_long}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("longer than the longest duration"), "{err}");
        }
        let err = load(&format!("{HEAD}spec:\n  timeline:\n  - at: {too_long}\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("field spec.timeline[0].at"), "{err}");
        // The longest duration is accepted, and Go's spelling of it means the same.
        let max_seconds = MAX_DURATION_MS / 1000;
        let s = load(&format!(
            "{HEAD}spec:\n  duration: 2562047h47m16s\n  timeline:\n  - at: {max_seconds}\n"
        ))
        .unwrap();
        assert_eq!(s.timeline[0].at, s.duration);
    }

    #[test]
    fn inline_and_file_manifests() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("pods.yaml"),
            "kind: Pod\nmetadata: {name: a}\n---\nkind: Pod\nmetadata: {name: b}\n",
        )
        .unwrap();
        let path = dir.path().join("s.yaml");
        std::fs::write(
            &path,
            format!("{HEAD}spec:\n  manifests:\n  - file: pods.yaml\n  - {{kind: Pod, metadata: {{name: c}}}}\n  - {{nope: 1}}\n"),
        )
        .unwrap();
        let err = Scenario::load(&path, &Disk).unwrap_err().to_string();
        assert!(err.contains("field spec.manifests[2]"), "{err}");
        std::fs::write(
            &path,
            format!("{HEAD}spec:\n  manifests:\n  - file: pods.yaml\n  - {{kind: Pod, metadata: {{name: c}}}}\n"),
        )
        .unwrap();
        let s = Scenario::load(&path, &Disk).unwrap();
        let names: Vec<_> = s.manifests.iter().map(|d| d.name().unwrap()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(
            s.manifests[2]
                .file
                .display()
                .to_string()
                .ends_with("s.yaml#spec.manifests[1]")
        );
    }
}
