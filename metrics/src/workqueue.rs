//! The controller's work queue and client-go's `workqueue_*` families, with the labels and
//! buckets controller-runtime v0.23.1 registers them with (`pkg/internal/metrics/
//! workqueue.go`).
//!
//! Watches [`add`](WorkQueue::add) the keys of changed objects; a pass
//! [`take`](WorkQueue::take)s every waiting key at once and is their processor until it is
//! [`done`](WorkQueue::done). So, in client-go's terms: `adds` counts keys that were not
//! already waiting, `depth` is the keys waiting, `queue_duration` is each key's time from its
//! first add to the pass that takes it, `work_duration` is each taken key's time in that pass
//! (the pass's time, once per key), `unfinished_work` sums the in-progress keys' elapsed
//! times and `longest_running_processor` is the running pass's elapsed time (both computed
//! when scraped), and `retries` counts keys added again because acting on them failed.

use crate::HistogramFamily;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// `{name, controller}`: controller-runtime names a controller's queue after it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct QueueLabels {
    /// The queue's name.
    pub name: String,
    /// The controller it feeds (the same name).
    pub controller: String,
}

/// `{name, controller, priority}` of `workqueue_depth` (`priority` is empty: the queue has
/// no priorities).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DepthLabels {
    /// The queue's name.
    pub name: String,
    /// The controller it feeds.
    pub controller: String,
    /// Always empty.
    pub priority: String,
}

/// controller-runtime's `ExponentialBuckets(10e-9, 10, 12)`: 10 ns … 1000 s by tens, as
/// decimal literals (a running product drifts in the last digits).
const QUEUE_BUCKETS: [f64; 12] = [
    1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0, 1000.0,
];

fn queue_histogram() -> Histogram {
    Histogram::new(QUEUE_BUCKETS)
}

/// The `workqueue_*` families.
#[derive(Debug, Clone)]
pub(crate) struct QueueFamilies {
    depth: Family<DepthLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    retries: Family<QueueLabels, Counter>,
    queue_duration: HistogramFamily<QueueLabels>,
    work_duration: HistogramFamily<QueueLabels>,
    in_flight: InFlight,
}

impl QueueFamilies {
    pub(crate) fn register(r: &mut Registry) -> Self {
        let m = Self {
            depth: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            queue_duration: Family::new_with_constructor(queue_histogram),
            work_duration: Family::new_with_constructor(queue_histogram),
            in_flight: InFlight::default(),
        };
        r.register(
            "workqueue_depth",
            "Current depth of workqueue by workqueue and priority",
            m.depth.clone(),
        );
        r.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            m.adds.clone(),
        );
        r.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            m.queue_duration.clone(),
        );
        r.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            m.work_duration.clone(),
        );
        r.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
            InFlightGauge {
                queues: m.in_flight.clone(),
                longest: false,
            },
        );
        r.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            InFlightGauge {
                queues: m.in_flight.clone(),
                longest: true,
            },
        );
        r.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            m.retries.clone(),
        );
        m
    }

    /// A new, empty queue named `name`, exporting its series from now on.
    pub(crate) fn queue<K: Ord + Clone>(&self, name: &str) -> WorkQueue<K> {
        let labels = QueueLabels {
            name: name.to_owned(),
            controller: name.to_owned(),
        };
        let depth = DepthLabels {
            name: name.to_owned(),
            controller: name.to_owned(),
            priority: String::new(),
        };
        let processing = Arc::new(Mutex::new(None));
        lock(&self.in_flight.0).push((labels.clone(), processing.clone()));
        WorkQueue {
            state: Arc::new(Mutex::new(State {
                relisted: false,
                waiting: BTreeMap::new(),
            })),
            processing,
            depth: self.depth.get_or_create(&depth).clone(),
            adds: self.adds.get_or_create(&labels).clone(),
            retries: self.retries.get_or_create(&labels).clone(),
            queue_duration: self.queue_duration.get_or_create(&labels).clone(),
            work_duration: self.work_duration.get_or_create(&labels).clone(),
        }
    }
}

/// When the running pass took its keys, and how many.
type Processing = Arc<Mutex<Option<(Instant, usize)>>>;

/// Every queue's running pass, read when scraped.
#[derive(Debug, Clone, Default)]
struct InFlight(Arc<Mutex<Vec<(QueueLabels, Processing)>>>);

/// `workqueue_unfinished_work_seconds` or (`longest`) `..._longest_running_processor_seconds`.
#[derive(Debug)]
struct InFlightGauge {
    queues: InFlight,
    longest: bool,
}

impl EncodeMetric for InFlightGauge {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let now = Instant::now();
        for (labels, processing) in lock(&self.queues.0).iter() {
            let (elapsed, keys) = lock(processing).map_or((0.0, 0), |(started, keys)| {
                (now.duration_since(started).as_secs_f64(), keys)
            });
            let value = if self.longest {
                elapsed
            } else {
                elapsed * keys as f64
            };
            encoder.encode_family(labels)?.encode_gauge(&value)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

#[derive(Debug)]
struct State<K> {
    relisted: bool,
    /// Each waiting key and when it was first added.
    waiting: BTreeMap<K, Instant>,
}

/// The keys of changed objects waiting for the next pass, and whether a watch (re)listed
/// (then deletions while it was away are invisible and everything must be read). Cheap to
/// clone; clones share the queue.
#[derive(Debug, Clone)]
pub struct WorkQueue<K> {
    state: Arc<Mutex<State<K>>>,
    processing: Processing,
    depth: Gauge,
    adds: Counter,
    retries: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
}

impl<K: Ord + Clone> WorkQueue<K> {
    /// Marks `key` changed now.
    pub fn add(&self, key: K) {
        self.add_at(key, Instant::now());
    }

    /// Marks `key` changed at `now`; a key already waiting keeps its first time and is not
    /// counted again.
    pub fn add_at(&self, key: K, now: Instant) {
        let mut state = lock(&self.state);
        if let std::collections::btree_map::Entry::Vacant(e) = state.waiting.entry(key) {
            e.insert(now);
            self.adds.inc();
            self.depth.set(state.waiting.len() as i64);
        }
    }

    /// Adds `key` again because acting on it failed.
    pub fn retry(&self, key: K) {
        self.retries.inc();
        self.add(key);
    }

    /// Records that a watch (re)listed.
    pub fn relist(&self) {
        lock(&self.state).relisted = true;
    }

    /// Takes everything waiting now (see [`WorkQueue::take_at`]).
    pub fn take(&self) -> (bool, BTreeSet<K>) {
        self.take_at(Instant::now())
    }

    /// Takes whether a watch relisted and every waiting key, at `now`: each key's wait is
    /// observed and the taken keys are in progress until [`WorkQueue::done_at`].
    pub fn take_at(&self, now: Instant) -> (bool, BTreeSet<K>) {
        let mut state = lock(&self.state);
        let waiting = std::mem::take(&mut state.waiting);
        for added in waiting.values() {
            (self.queue_duration).observe(now.saturating_duration_since(*added).as_secs_f64());
        }
        self.depth.set(0);
        let keys: BTreeSet<K> = waiting.into_keys().collect();
        *lock(&self.processing) = (!keys.is_empty()).then_some((now, keys.len()));
        (std::mem::take(&mut state.relisted), keys)
    }

    /// The pass that took the keys is over (see [`WorkQueue::done_at`]).
    pub fn done(&self) {
        self.done_at(Instant::now());
    }

    /// The pass that took the keys ended at `now`: each key's processing time is observed.
    pub fn done_at(&self, now: Instant) {
        if let Some((started, keys)) = lock(&self.processing).take() {
            let took = now.saturating_duration_since(started).as_secs_f64();
            (0..keys).for_each(|_| self.work_duration.observe(took));
        }
    }

    /// How many keys are waiting.
    pub fn len(&self) -> usize {
        lock(&self.state).waiting.len()
    }

    /// Whether no key is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use crate::Metrics;
    use crate::tests::lines;
    use std::time::Duration;

    fn value(m: &Metrics, prefix: &str) -> f64 {
        let l = lines(m, prefix);
        assert_eq!(l.len(), 1, "{prefix}: {l:?}");
        l[0].rsplit_once(' ').unwrap().1.parse().unwrap()
    }

    #[test]
    fn keys_wait_from_their_first_add_to_the_take() {
        let m = Metrics::new();
        let q = m.runtime.work_queue::<String>("stores");
        let t0 = std::time::Instant::now();
        q.add_at("a".into(), t0);
        q.add_at("a".into(), t0 + Duration::from_millis(50));
        q.add_at("b".into(), t0 + Duration::from_millis(90));
        assert_eq!(
            value(&m, "workqueue_adds_total{"),
            2.0,
            "a second add of a is not one"
        );
        assert_eq!(
            lines(&m, "workqueue_depth{"),
            ["workqueue_depth{name=\"stores\",controller=\"stores\",priority=\"\"} 2"]
        );
        q.relist();
        let (relisted, keys) = q.take_at(t0 + Duration::from_millis(100));
        assert!(relisted);
        assert_eq!(keys.into_iter().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(value(&m, "workqueue_depth{"), 0.0);
        // a waited 100 ms (from its first add), b 10 ms.
        assert_eq!(
            value(&m, "workqueue_queue_duration_seconds_sum{"),
            0.1 + 0.01
        );
        let text = m.encode();
        assert!(
            text.contains("workqueue_queue_duration_seconds_bucket{le=\"0.01\",name=\"stores\",controller=\"stores\"} 1"),
            "{text}"
        );
        assert!(!q.take().0, "the relist was taken once");
        assert!(q.is_empty());
    }

    #[test]
    fn a_pass_is_the_processor_of_the_keys_it_took() {
        let m = Metrics::new();
        let q = m.runtime.work_queue::<u32>("stores");
        assert_eq!(
            value(&m, "workqueue_longest_running_processor_seconds{"),
            0.0
        );
        let started = std::time::Instant::now() - Duration::from_secs(2);
        q.add_at(1, started);
        q.add_at(2, started);
        q.take_at(started);
        let longest = value(&m, "workqueue_longest_running_processor_seconds{");
        assert!((2.0..3.0).contains(&longest), "{longest}");
        let unfinished = value(&m, "workqueue_unfinished_work_seconds{");
        assert!(
            (4.0..6.0).contains(&unfinished),
            "two keys for 2 s: {unfinished}"
        );
        q.done_at(started + Duration::from_secs(3));
        assert_eq!(value(&m, "workqueue_work_duration_seconds_count{"), 2.0);
        assert_eq!(value(&m, "workqueue_work_duration_seconds_sum{"), 6.0);
        assert_eq!(value(&m, "workqueue_unfinished_work_seconds{"), 0.0);
        assert_eq!(
            value(&m, "workqueue_longest_running_processor_seconds{"),
            0.0
        );
        q.done();
        assert_eq!(
            value(&m, "workqueue_work_duration_seconds_count{"),
            2.0,
            "done once"
        );
    }

    #[test]
    fn retries_add_the_key_again() {
        let m = Metrics::new();
        let q = m.runtime.work_queue::<u32>("stores");
        q.retry(7);
        assert_eq!(value(&m, "workqueue_retries_total{"), 1.0);
        assert_eq!(value(&m, "workqueue_adds_total{"), 1.0);
        assert_eq!(q.take().1.into_iter().collect::<Vec<_>>(), [7]);
    }
}
