//! `karpenter_scheduler_unfinished_work_seconds` and `karpenter_scheduler_queue_depth`: what
//! the provisioning simulation running now has done. The reconciler reports a simulation's
//! start and end through [`ProviderFacts::solving`](karpenter_cluster::reconciler::ProviderFacts)
//! while its tick runs on another thread; the unfinished work is computed when scraped, so it
//! grows while a long simulation runs and nothing else is recorded.

use karpenter_cluster::reconciler::SolveProgress;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The only controller whose simulations are reported (upstream also reports the disruption
/// controller's; ours are not incremental enough to time from outside).
const PROVISIONER: &str = "provisioner";

/// `{controller, scheduling_id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct SchedulingLabels {
    /// `provisioner`.
    pub controller: String,
    /// The simulation's id, unique within this process and across restarts.
    pub scheduling_id: String,
}

#[derive(Debug)]
struct Running {
    id: String,
    since: Instant,
}

#[derive(Debug)]
struct State {
    /// Distinguishes this process's ids from an earlier replica's: its start, Unix ms.
    epoch: u128,
    /// Simulations started so far.
    started: u64,
    /// The simulation running now, with its labels.
    running: Option<Running>,
    /// The id of the latest simulation, running or not.
    latest: Option<String>,
}

/// The progress of provisioning simulations, shared between the thread that runs them and
/// the `/metrics` encoder. Cloning shares it.
#[derive(Debug, Clone)]
pub struct SolveTracker {
    state: Arc<Mutex<State>>,
    queue_depth: Family<SchedulingLabels, Gauge>,
}

impl SolveTracker {
    pub(crate) fn new(queue_depth: Family<SchedulingLabels, Gauge>) -> Self {
        let epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        Self {
            state: Arc::new(Mutex::new(State {
                epoch,
                started: 0,
                running: None,
                latest: None,
            })),
            queue_depth,
        }
    }

    fn labels(id: &str) -> SchedulingLabels {
        SchedulingLabels {
            controller: PROVISIONER.into(),
            scheduling_id: id.to_owned(),
        }
    }

    /// Records `progress`: a start gives the simulation a new id, starts its clock and
    /// replaces the queue depth of earlier simulations with its queue; an end stops the
    /// clock and leaves the pods it could not place as its queue depth, as upstream's
    /// scheduler leaves them.
    pub fn report(&self, progress: SolveProgress) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let depth = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        match progress {
            SolveProgress::Started { pods } => {
                s.started += 1;
                let id = format!("{:x}-{}", s.epoch, s.started);
                self.queue_depth.clear();
                self.queue_depth
                    .get_or_create(&Self::labels(&id))
                    .set(depth(pods));
                s.running = Some(Running {
                    id: id.clone(),
                    since: Instant::now(),
                });
                s.latest = Some(id);
            }
            SolveProgress::Finished { unplaced } => {
                s.running = None;
                if let Some(id) = &s.latest {
                    self.queue_depth
                        .get_or_create(&Self::labels(id))
                        .set(depth(unplaced));
                }
            }
        }
    }

    /// Forgets a simulation that will not report its end (its thread failed): its unfinished
    /// work stops being reported; its queue depth stays until the next simulation.
    pub fn abandon(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.running = None;
    }

    /// The id and running time of the simulation in progress, if one is.
    fn unfinished(&self) -> Option<(String, f64)> {
        let s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let r = s.running.as_ref()?;
        Some((r.id.clone(), r.since.elapsed().as_secs_f64()))
    }
}

/// `karpenter_scheduler_unfinished_work_seconds`: one series while a simulation runs, none
/// between simulations (upstream deletes the series when its simulation ends).
#[derive(Debug, Clone)]
pub(crate) struct UnfinishedWork(pub(crate) SolveTracker);

impl EncodeMetric for UnfinishedWork {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        if let Some((id, seconds)) = self.0.unfinished() {
            let labels = SolveTracker::labels(&id);
            encoder.encode_family(&labels)?.encode_gauge(&seconds)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

#[cfg(test)]
mod tests {
    use crate::Metrics;
    use crate::tests::lines;
    use karpenter_cluster::reconciler::SolveProgress;

    fn value(line: &str) -> f64 {
        line.rsplit_once(' ').unwrap().1.parse().unwrap()
    }

    fn id(line: &str) -> &str {
        line.split("scheduling_id=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
    }

    #[test]
    fn unfinished_work_grows_while_a_simulation_runs_and_goes_when_it_ends() {
        let m = Metrics::new();
        let tracker = m.solve_tracker();
        assert!(lines(&m, "karpenter_scheduler_unfinished_work_seconds{").is_empty());
        tracker.report(SolveProgress::Started { pods: 7 });
        std::thread::sleep(std::time::Duration::from_millis(30));
        let running = lines(&m, "karpenter_scheduler_unfinished_work_seconds{");
        assert_eq!(running.len(), 1, "{running:?}");
        assert!(running[0].starts_with(
            "karpenter_scheduler_unfinished_work_seconds{controller=\"provisioner\",scheduling_id=\""
        ));
        assert!(value(&running[0]) >= 0.03, "{running:?}");
        let depth = lines(&m, "karpenter_scheduler_queue_depth{");
        assert_eq!(depth.len(), 1);
        assert_eq!(id(&depth[0]), id(&running[0]), "one simulation, one id");
        assert_eq!(value(&depth[0]), 7.0);

        tracker.report(SolveProgress::Finished { unplaced: 2 });
        assert!(lines(&m, "karpenter_scheduler_unfinished_work_seconds{").is_empty());
        let left = lines(&m, "karpenter_scheduler_queue_depth{");
        assert_eq!((left.len(), value(&left[0])), (1, 2.0), "{left:?}");

        tracker.report(SolveProgress::Started { pods: 1 });
        tracker.abandon();
        assert!(
            lines(&m, "karpenter_scheduler_unfinished_work_seconds{").is_empty(),
            "a failed simulation is not running"
        );
        let next = lines(&m, "karpenter_scheduler_queue_depth{");
        assert_eq!(
            next.len(),
            1,
            "an earlier simulation's depth is dropped: {next:?}"
        );
        assert_ne!(id(&next[0]), id(&left[0]), "each simulation has its own id");
    }
}
