//! controller-runtime's controller families (`controller_runtime_*`) and client-go's
//! leader-election slow-path counter, under the names, labels and buckets
//! controller-runtime v0.23.1 defines (`pkg/internal/controller/metrics`,
//! `pkg/metrics/leaderelection.go`), the version Karpenter v1.14.1 pins.
//!
//! karpenter-rs has no controller-runtime: one worker runs a pass whose stages stand for
//! upstream's controllers. A [`Reconcile`] is one run of one stage: it holds the stage's
//! `active_workers` at 1 while it runs and, when finished, counts its result and observes
//! its time as controller-runtime's `reconcileHandler` does. The work queue's families are
//! in [`workqueue`](crate::workqueue).

use crate::workqueue::{QueueFamilies, WorkQueue};
use crate::{ControllerLabels, HistogramFamily, LeaseLabels};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::{Duration, Instant};

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets (Karpenter's
/// `DurationBuckets` stop at 10 minutes; these stop at 60 s).
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// The stages of the controller's pass, each under the name of the upstream controller it
/// stands for (docs/operator.md, Metrics, has the mapping).
pub mod stage {
    /// Instance types and offerings refreshed from the provider (the AWS provider's
    /// `providers.instancetype`).
    pub const INSTANCE_TYPES: &str = "providers.instancetype";
    /// Drift asked of the provider for every launched NodeClaim (upstream's
    /// `nodeclaim.disruption`, which marks drift).
    pub const DRIFT: &str = "nodeclaim.disruption";
    /// The index fed from the watch stores (upstream's `state.*` cluster-state controllers,
    /// one queue for all kinds here).
    pub const STATE: &str = "state";
    /// One tick of the shared reconciler and its actions: provisioning, disruption, the
    /// NodeClaim lifecycle, termination, repair and pod events in one decision (no single
    /// upstream controller).
    pub const RECONCILER: &str = "reconciler";
    /// NodePool status: resources, conditions and hash annotations (upstream's
    /// `nodepool.counter`, with `nodepool.readiness` and `nodepool.hash`).
    pub const NODEPOOL_STATUS: &str = "nodepool.counter";
    /// The fake provider's kubelet (karpenter-rs only).
    pub const FAKE_KUBELET: &str = "fake.kubelet";
    /// Instances without NodeClaims and NodeClaims without instances (upstream's
    /// `nodeclaim.garbagecollection`).
    pub const GARBAGE_COLLECTION: &str = "nodeclaim.garbagecollection";
    /// Every stage, in pass order.
    pub const ALL: [&str; 7] = [
        INSTANCE_TYPES,
        DRIFT,
        STATE,
        RECONCILER,
        NODEPOOL_STATUS,
        FAKE_KUBELET,
        GARBAGE_COLLECTION,
    ];
}

/// The worker count of every controller: the pass runs its stages one after the other.
const WORKERS: i64 = 1;

/// `{controller, result}` of `controller_runtime_reconcile_total`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ResultLabels {
    /// The controller (stage) name.
    pub controller: String,
    /// `success`, `error`, `requeue` or `requeue_after`.
    pub result: String,
}

/// How one run of a stage ended, in controller-runtime's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Done; nothing to do until something changes.
    Success,
    /// Done, and the stage has timed work (a batch window, a poll): upstream's
    /// `RequeueAfter`.
    RequeueAfter,
    /// Failed; what failed is tried again on the next pass.
    Error,
    /// The stage panicked (counted as an error too, as controller-runtime's recovery does).
    Panic,
}

impl ReconcileResult {
    /// `Success` or `Error`, from whether anything in the stage failed.
    pub fn of(failed: bool) -> Self {
        if failed { Self::Error } else { Self::Success }
    }

    /// A run that failed (`Panic` when it panicked).
    pub fn failure(panicked: bool) -> Self {
        if panicked { Self::Panic } else { Self::Error }
    }

    /// `Error` when something failed, else `RequeueAfter` when the stage has timed work
    /// (`requeue_after`), else `Success`.
    pub fn after(failed: bool, requeue_after: bool) -> Self {
        match (failed, requeue_after) {
            (true, _) => Self::Error,
            (false, true) => Self::RequeueAfter,
            (false, false) => Self::Success,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::RequeueAfter => "requeue_after",
            Self::Error | Self::Panic => "error",
        }
    }
}

/// The `controller_runtime_*` families and `leader_election_slowpath_total`. Cheap to
/// clone; clones record into the same families.
///
/// `controller_runtime_conversion_webhook_panics_total` is exported at zero and never moves:
/// controller-runtime registers it (at zero) in every binary that links its builder, Karpenter
/// v1.14.1 included, although neither Karpenter nor karpenter-rs serves a conversion webhook.
/// Zero is the true count, and dashboards that read it find the series.
#[derive(Debug, Clone)]
pub struct RuntimeMetrics {
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    terminal_errors: Family<ControllerLabels, Counter>,
    panics: Family<ControllerLabels, Counter>,
    timeouts: Family<ControllerLabels, Counter>,
    reconcile_time: HistogramFamily<ControllerLabels>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    active_workers: Family<ControllerLabels, Gauge>,
    leader_slowpath: Family<LeaseLabels, Counter>,
    queues: QueueFamilies,
}

impl RuntimeMetrics {
    /// The families, registered in `r`.
    pub(crate) fn register(r: &mut Registry) -> Self {
        let m = Self {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            terminal_errors: Family::default(),
            panics: Family::default(),
            timeouts: Family::default(),
            reconcile_time: Family::new_with_constructor(|| Histogram::new(RECONCILE_BUCKETS)),
            max_concurrent: Family::default(),
            active_workers: Family::default(),
            leader_slowpath: Family::default(),
            queues: QueueFamilies::register(r),
        };
        // prometheus-client appends `_total` to counters.
        r.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            m.reconcile_total.clone(),
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            m.reconcile_errors.clone(),
        );
        r.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            m.terminal_errors.clone(),
        );
        r.register(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            m.panics.clone(),
        );
        r.register(
            "controller_runtime_reconcile_timeouts",
            "Total number of reconciliation timeouts per controller",
            m.timeouts.clone(),
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            m.reconcile_time.clone(),
        );
        r.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            m.max_concurrent.clone(),
        );
        r.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            m.active_workers.clone(),
        );
        r.register(
            "leader_election_slowpath",
            "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
            m.leader_slowpath.clone(),
        );
        r.register(
            "controller_runtime_conversion_webhook_panics",
            "Total number of conversion webhook panics",
            Counter::<u64>::default(),
        );
        m
    }

    /// Starts exporting `controller`'s series at zero, with its worker count, as
    /// controller-runtime does when a controller starts (so rates work from the first
    /// reconcile and an idle controller is visible).
    pub fn start_controller(&self, controller: &str) {
        let c = labels(controller);
        for result in ["success", "error", "requeue", "requeue_after"] {
            let r = ResultLabels {
                controller: controller.to_owned(),
                result: result.to_owned(),
            };
            drop(self.reconcile_total.get_or_create(&r));
        }
        for family in [
            &self.reconcile_errors,
            &self.terminal_errors,
            &self.panics,
            &self.timeouts,
        ] {
            drop(family.get_or_create(&c));
        }
        self.max_concurrent.get_or_create(&c).set(WORKERS);
        self.active_workers.get_or_create(&c).set(0);
    }

    /// One run of `controller` starting now: its worker is active until the run is finished
    /// or dropped (a pass abandoned at an await point, when leadership is lost, counts no
    /// result).
    pub fn begin(&self, controller: &'static str) -> Reconcile {
        self.active_workers
            .get_or_create(&labels(controller))
            .set(1);
        Reconcile {
            metrics: self.clone(),
            controller,
            started: Instant::now(),
        }
    }

    /// Runs `stage` as one reconcile of `controller`. The stage returns `None` when it had
    /// nothing due (a poll before its period): that counts nothing.
    pub async fn run<F>(&self, controller: &'static str, stage: F) -> Option<ReconcileResult>
    where
        F: Future<Output = Option<ReconcileResult>>,
    {
        let run = self.begin(controller);
        let outcome = stage.await;
        if let Some(outcome) = outcome {
            run.finish(outcome);
        }
        outcome
    }

    /// Runs `stage`, which always has work, as one reconcile of `controller`: an `Err` is an
    /// error, an `Ok` a success.
    pub async fn try_run<T, E, F>(&self, controller: &'static str, stage: F) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
    {
        let run = self.begin(controller);
        let result = stage.await;
        run.finish(ReconcileResult::of(result.is_err()));
        result
    }

    /// Starts every stage of the pass ([`stage::ALL`]; the fake kubelet only when it runs),
    /// as [`RuntimeMetrics::start_controller`].
    pub fn start_stages(&self, fake_kubelet: bool) {
        for c in stage::ALL {
            if fake_kubelet || c != stage::FAKE_KUBELET {
                self.start_controller(c);
            }
        }
    }

    /// A new, empty work queue named `name` (its `workqueue_*` series are exported from now
    /// on).
    pub fn work_queue<K: Ord + Clone>(&self, name: &str) -> WorkQueue<K> {
        self.queues.queue(name)
    }

    /// Counts one renewal of the Lease `lease` that had to read it first (client-go's slow
    /// path) because the optimistic update with the cached copy failed or was not possible.
    pub fn leader_slow_path(&self, lease: &str) {
        let l = LeaseLabels {
            name: lease.to_owned(),
        };
        self.leader_slowpath.get_or_create(&l).inc();
    }

    fn record(&self, controller: &str, outcome: ReconcileResult, took: Duration) {
        let c = labels(controller);
        let r = ResultLabels {
            controller: controller.to_owned(),
            result: outcome.label().to_owned(),
        };
        self.reconcile_total.get_or_create(&r).inc();
        if matches!(outcome, ReconcileResult::Error | ReconcileResult::Panic) {
            self.reconcile_errors.get_or_create(&c).inc();
        }
        if outcome == ReconcileResult::Panic {
            self.panics.get_or_create(&c).inc();
        }
        (self.reconcile_time.get_or_create(&c)).observe(took.as_secs_f64());
    }
}

fn labels(controller: &str) -> ControllerLabels {
    ControllerLabels {
        controller: controller.to_owned(),
    }
}

/// One run of one stage ([`RuntimeMetrics::begin`]).
#[must_use = "a run counts nothing until finished"]
pub struct Reconcile {
    metrics: RuntimeMetrics,
    controller: &'static str,
    started: Instant,
}

impl Reconcile {
    /// The run ended with `outcome`: counted, and its time since [`RuntimeMetrics::begin`]
    /// observed.
    pub fn finish(self, outcome: ReconcileResult) {
        let took = self.started.elapsed();
        self.metrics.record(self.controller, outcome, took);
    }
}

impl Drop for Reconcile {
    fn drop(&mut self) {
        let c = labels(self.controller);
        self.metrics.active_workers.get_or_create(&c).set(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Metrics;
    use crate::tests::lines;

    /// Asserts that every line of `want` is in `m`'s exposition.
    fn exposes(m: &Metrics, want: &[&str]) {
        let text = m.encode();
        for line in want {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn a_started_controller_exports_zeroes_and_one_worker() {
        let m = Metrics::new();
        assert!(lines(&m, "controller_runtime_reconcile_total{").is_empty());
        m.runtime.start_controller("disruption");
        let total = lines(&m, "controller_runtime_reconcile_total{");
        assert_eq!(total.len(), 4, "{total:?}");
        assert!(total.iter().all(|l| l.ends_with(" 0")), "{total:?}");
        assert_eq!(
            lines(&m, "controller_runtime_max_concurrent_reconciles{"),
            ["controller_runtime_max_concurrent_reconciles{controller=\"disruption\"} 1"]
        );
        for family in [
            "controller_runtime_reconcile_errors_total{",
            "controller_runtime_terminal_reconcile_errors_total{",
            "controller_runtime_reconcile_panics_total{",
            "controller_runtime_reconcile_timeouts_total{",
            "controller_runtime_active_workers{",
        ] {
            assert_eq!(
                lines(&m, family),
                [format!("{family}controller=\"disruption\"}} 0")]
            );
        }
    }

    #[test]
    fn a_run_is_active_until_finished_and_counts_its_result() {
        let m = Metrics::new();
        let run = m.runtime.begin("nodeclaim.disruption");
        assert_eq!(
            lines(&m, "controller_runtime_active_workers{"),
            ["controller_runtime_active_workers{controller=\"nodeclaim.disruption\"} 1"]
        );
        std::thread::sleep(Duration::from_millis(6));
        run.finish(ReconcileResult::Error);
        assert_eq!(
            lines(&m, "controller_runtime_active_workers{"),
            ["controller_runtime_active_workers{controller=\"nodeclaim.disruption\"} 0"]
        );
        exposes(
            &m,
            &[
                "controller_runtime_reconcile_total{controller=\"nodeclaim.disruption\",result=\"error\"} 1",
                "controller_runtime_reconcile_errors_total{controller=\"nodeclaim.disruption\"} 1",
                "controller_runtime_reconcile_time_seconds_count{controller=\"nodeclaim.disruption\"} 1",
                // 6 ms is above the first bucket (5 ms).
                "controller_runtime_reconcile_time_seconds_bucket{le=\"0.005\",controller=\"nodeclaim.disruption\"} 0",
                "controller_runtime_reconcile_time_seconds_bucket{le=\"60.0\",controller=\"nodeclaim.disruption\"} 1",
            ],
        );
        assert!(lines(&m, "controller_runtime_reconcile_panics_total{").is_empty());
    }

    #[test]
    fn a_panic_is_an_error_and_a_panic_and_requeue_after_is_not_an_error() {
        let m = Metrics::new();
        m.runtime.start_controller("reconciler");
        m.runtime.begin("reconciler").finish(ReconcileResult::Panic);
        m.runtime
            .begin("reconciler")
            .finish(ReconcileResult::RequeueAfter);
        m.runtime
            .begin("reconciler")
            .finish(ReconcileResult::of(false));
        exposes(
            &m,
            &[
                "controller_runtime_reconcile_total{controller=\"reconciler\",result=\"error\"} 1",
                "controller_runtime_reconcile_total{controller=\"reconciler\",result=\"requeue_after\"} 1",
                "controller_runtime_reconcile_total{controller=\"reconciler\",result=\"success\"} 1",
                "controller_runtime_reconcile_total{controller=\"reconciler\",result=\"requeue\"} 0",
                "controller_runtime_reconcile_errors_total{controller=\"reconciler\"} 1",
                "controller_runtime_reconcile_panics_total{controller=\"reconciler\"} 1",
                "controller_runtime_reconcile_time_seconds_count{controller=\"reconciler\"} 3",
            ],
        );
    }

    #[test]
    fn an_abandoned_run_frees_its_worker_and_counts_nothing() {
        let m = Metrics::new();
        drop(m.runtime.begin("provisioner"));
        assert_eq!(
            lines(&m, "controller_runtime_active_workers{"),
            ["controller_runtime_active_workers{controller=\"provisioner\"} 0"]
        );
        assert!(lines(&m, "controller_runtime_reconcile_total{").is_empty());
    }

    #[tokio::test]
    async fn a_stage_with_nothing_due_counts_nothing() {
        let m = Metrics::new();
        let rt = &m.runtime;
        assert_eq!(rt.run(stage::DRIFT, async { None }).await, None);
        assert!(lines(&m, "controller_runtime_reconcile_total{").is_empty());
        let done = rt.run(stage::DRIFT, async { Some(ReconcileResult::Success) });
        assert_eq!(done.await, Some(ReconcileResult::Success));
        assert_eq!(
            lines(&m, "controller_runtime_reconcile_total{"),
            [
                "controller_runtime_reconcile_total{controller=\"nodeclaim.disruption\",result=\"success\"} 1"
            ]
        );
    }

    #[tokio::test]
    async fn a_fallible_stage_is_an_error_or_a_success() {
        let m = Metrics::new();
        m.runtime.start_stages(false);
        assert!(
            lines(
                &m,
                "controller_runtime_max_concurrent_reconciles{controller=\"fake.kubelet\""
            )
            .is_empty()
        );
        assert_eq!(
            lines(&m, "controller_runtime_max_concurrent_reconciles{").len(),
            6
        );
        let failed = m
            .runtime
            .try_run(stage::FAKE_KUBELET, async { Err::<(), _>("no") });
        assert_eq!(failed.await, Err("no"));
        let ok = m
            .runtime
            .try_run(stage::FAKE_KUBELET, async { Ok::<_, ()>(3) });
        assert_eq!(ok.await, Ok(3));
        exposes(
            &m,
            &[
                "controller_runtime_reconcile_total{controller=\"fake.kubelet\",result=\"error\"} 1",
                "controller_runtime_reconcile_total{controller=\"fake.kubelet\",result=\"success\"} 1",
                "controller_runtime_reconcile_errors_total{controller=\"fake.kubelet\"} 1",
            ],
        );
    }

    #[test]
    fn slow_paths_are_counted_per_lease() {
        let m = Metrics::new();
        m.runtime.leader_slow_path("karpenter-leader-election");
        m.runtime.leader_slow_path("karpenter-leader-election");
        assert_eq!(
            lines(&m, "leader_election_slowpath_total{"),
            ["leader_election_slowpath_total{name=\"karpenter-leader-election\"} 2"]
        );
    }
}
