//! `karpenter_cluster_state_synced` and `karpenter_cluster_state_unsynced_time_seconds`:
//! whether the index has every watched object, and for how long it has not. The unsynced
//! time is computed when scraped, so it moves while a list is in flight and nothing else is
//! recorded.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Seconds since the index stopped being synced, 0 while it is synced.
#[derive(Debug, Clone)]
pub struct UnsyncedTime {
    since: Arc<Mutex<Option<Instant>>>,
}

impl UnsyncedTime {
    /// Unsynced from now on (a new controller has listed nothing yet).
    pub(crate) fn starting_now() -> Self {
        Self {
            since: Arc::new(Mutex::new(Some(Instant::now()))),
        }
    }

    /// Records that the index is (`true`) or is not synced; the unsynced time counts from
    /// the first report of a run of unsynced ones, as upstream's.
    pub(crate) fn set(&self, synced: bool) {
        let mut since = self.since.lock().unwrap_or_else(PoisonError::into_inner);
        match (synced, *since) {
            (true, _) => *since = None,
            (false, None) => *since = Some(Instant::now()),
            (false, Some(_)) => {}
        }
    }

    fn seconds(&self) -> f64 {
        let since = self.since.lock().unwrap_or_else(PoisonError::into_inner);
        since.map_or(0.0, |t| t.elapsed().as_secs_f64())
    }
}

impl EncodeMetric for UnsyncedTime {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.seconds())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

impl crate::Metrics {
    /// Records whether the index holds every watched object: after the watches' first list
    /// (`true`), or while one lists again (`false`).
    pub fn set_synced(&self, synced: bool) {
        self.cluster_state_synced.set(i64::from(synced));
        self.cluster_state_unsynced_time.set(synced);
    }
}

#[cfg(test)]
mod tests {
    use crate::Metrics;
    use crate::tests::lines;

    fn unsynced(m: &Metrics) -> f64 {
        let line = lines(m, "karpenter_cluster_state_unsynced_time_seconds ");
        line[0].rsplit_once(' ').unwrap().1.parse().unwrap()
    }

    #[test]
    fn unsynced_time_runs_until_synced() {
        let m = Metrics::new();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(
            unsynced(&m) >= 0.02,
            "unsynced since the controller started"
        );
        assert_eq!(
            lines(&m, "karpenter_cluster_state_synced "),
            ["karpenter_cluster_state_synced 0"]
        );
        m.set_synced(true);
        assert_eq!(unsynced(&m), 0.0);
        assert_eq!(
            lines(&m, "karpenter_cluster_state_synced "),
            ["karpenter_cluster_state_synced 1"]
        );
        m.set_synced(false);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let first = unsynced(&m);
        m.set_synced(false);
        assert!(unsynced(&m) >= first, "a second report keeps the start");
    }
}
