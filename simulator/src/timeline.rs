//! The run over time: cost, nodes (by instance type, capacity type and zone), pending pods and
//! disruptions, sampled on the virtual clock. This is what the HTML report charts
//! ([`crate::html`]) and what the JSON report holds under `timeline`.
//!
//! Samples are taken at fixed virtual instants — every [`Timeline::interval_seconds`] from
//! the start, plus the end — so a run of any length keeps at most [`MAX_INTERVALS`] + 1
//! samples per series: a week costs no more memory than a day. What a fixed instant would
//! miss is kept per interval instead: the most pods pending at once and the nodes disrupted
//! between two samples.

use crate::metrics::round4;
use karpenter_cluster::ClusterState;
use karpenter_scheduling::model::Millis;
use serde::Serialize;
use std::collections::BTreeMap;

/// The most intervals a run is cut into.
pub const MAX_INTERVALS: i64 = 720;

pub(crate) const SECOND: Millis = 1000;
pub(crate) const MINUTE: Millis = 60 * SECOND;
pub(crate) const HOUR: Millis = 60 * MINUTE;
pub(crate) const DAY: Millis = 24 * HOUR;

/// Round spans of time, shortest first: sampling intervals (so that samples fall on the
/// clock's minutes and hours), and the charts' tick and bar spans.
pub(crate) const ROUND_SPANS: [Millis; 22] = [
    SECOND,
    2 * SECOND,
    5 * SECOND,
    10 * SECOND,
    15 * SECOND,
    30 * SECOND,
    MINUTE,
    2 * MINUTE,
    5 * MINUTE,
    10 * MINUTE,
    15 * MINUTE,
    30 * MINUTE,
    HOUR,
    2 * HOUR,
    3 * HOUR,
    6 * HOUR,
    12 * HOUR,
    DAY,
    2 * DAY,
    7 * DAY,
    14 * DAY,
    28 * DAY,
];

/// The sampling interval for a run of `duration`: the shortest round span that cuts it into
/// at most [`MAX_INTERVALS`] (whole days beyond 4 weeks' worth).
pub fn interval_for(duration: Millis) -> Millis {
    let wanted = ceil_div(duration.max(0), MAX_INTERVALS).max(1);
    ROUND_SPANS
        .iter()
        .copied()
        .find(|&i| i >= wanted)
        .unwrap_or_else(|| ceil_div(wanted, DAY) * DAY)
}

fn ceil_div(a: Millis, b: Millis) -> Millis {
    (a + b - 1) / b
}

/// The run over time. Sample `k` is taken at `atSeconds[k]`: every `intervalSeconds` from 0,
/// and last at the end of the run. Every series has one value per sample.
///
/// Two kinds of series: *instant* ones hold the cluster's state at the sample's instant
/// (after everything that happened at that instant); *interval* ones describe the interval
/// that ends at the sample, `(atSeconds[k-1], atSeconds[k]]` (for sample 0, the instant 0).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// Seconds between two samples (the last interval may be shorter).
    pub interval_seconds: f64,
    /// When each sample was taken, in seconds since the start.
    pub at_seconds: Vec<f64>,
    /// Instant: dollars per hour of every node, in flight and deleting ones included.
    pub cost_per_hour: Vec<f64>,
    /// Instant: nodes.
    pub nodes: Vec<usize>,
    /// Instant: pods waiting for a node (DaemonSet and terminating pods excluded).
    pub pending_pods: Vec<usize>,
    /// Interval: the most pods waiting for a node at once.
    pub pending_pods_peak: Vec<usize>,
    /// Instant: nodes per instance type (`unknown` without the label).
    pub nodes_by_instance_type: BTreeMap<String, Vec<usize>>,
    /// Instant: nodes per capacity type (`on-demand` without the label).
    pub nodes_by_capacity_type: BTreeMap<String, Vec<usize>>,
    /// Instant: nodes per zone (`unknown` without the label).
    pub nodes_by_zone: BTreeMap<String, Vec<usize>>,
    /// Interval: nodes disrupted, per reason (the reasons of the report's `disruptions`).
    pub disruptions: BTreeMap<String, Vec<usize>>,
}

/// The cluster-wide figures of one moment, which the run's metrics compute at every step.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    /// Dollars per hour.
    pub price: f64,
    /// Nodes.
    pub nodes: usize,
    /// Pods waiting for a node.
    pub pending: usize,
}

/// Builds a [`Timeline`] as the run goes: told which state holds over which span of virtual
/// time ([`Recorder::hold`]) and when nodes are disrupted ([`Recorder::disrupted`]).
#[derive(Debug, Clone)]
pub struct Recorder {
    interval: Millis,
    end: Millis,
    len: usize,
    timeline: Timeline,
}

impl Recorder {
    /// A recorder for a run from 0 to `duration`.
    pub fn new(duration: Millis) -> Self {
        let end = duration.max(0);
        let interval = interval_for(end);
        let len = usize::try_from(ceil_div(end, interval) + 1).unwrap_or(1);
        let at_seconds = (0..len)
            .map(|k| (k as Millis * interval).min(end) as f64 / 1000.0)
            .collect();
        Self {
            interval,
            end,
            len,
            timeline: Timeline {
                interval_seconds: interval as f64 / 1000.0,
                at_seconds,
                pending_pods_peak: vec![0; len],
                cost_per_hour: Vec::with_capacity(len),
                nodes: Vec::with_capacity(len),
                pending_pods: Vec::with_capacity(len),
                ..Timeline::default()
            },
        }
    }

    /// The sample whose interval holds the instant `at`.
    fn sample_of(&self, at: Millis) -> usize {
        let k = usize::try_from(ceil_div(at.clamp(0, self.end), self.interval)).unwrap_or(0);
        k.min(self.len - 1)
    }

    /// The instant of sample `k`.
    fn instant(&self, k: usize) -> Millis {
        (k as Millis * self.interval).min(self.end)
    }

    /// `state`, whose figures are `totals`, holds from `from` until just before `to`; at the
    /// end of the run, `to == from` says it is the final state. Spans must follow each other
    /// from 0 without gaps. The state is only broken down (by instance type, capacity type,
    /// zone) when a sample falls in the span.
    pub fn hold(&mut self, from: Millis, to: Millis, state: &ClusterState, totals: Totals) {
        let last = if to > from { to - 1 } else { from };
        for k in self.sample_of(from)..=self.sample_of(last) {
            let peak = &mut self.timeline.pending_pods_peak[k];
            *peak = (*peak).max(totals.pending);
        }
        let first = self.timeline.nodes.len();
        let due = (first..self.len)
            .take_while(|&k| self.instant(k) <= last)
            .count();
        if due == 0 {
            return;
        }
        let mut by_type: BTreeMap<&str, usize> = BTreeMap::new();
        let mut by_capacity: BTreeMap<&str, usize> = BTreeMap::new();
        let mut by_zone: BTreeMap<&str, usize> = BTreeMap::new();
        for record in state.nodes().values() {
            let node = &record.node;
            *by_type
                .entry(node.instance_type().unwrap_or("unknown"))
                .or_default() += 1;
            *by_capacity
                .entry(node.capacity_type().unwrap_or("on-demand"))
                .or_default() += 1;
            *by_zone.entry(node.zone().unwrap_or("unknown")).or_default() += 1;
        }
        let t = &mut self.timeline;
        for _ in 0..due {
            t.cost_per_hour.push(round4(totals.price));
            t.nodes.push(totals.nodes);
            t.pending_pods.push(totals.pending);
            push_counts(&mut t.nodes_by_instance_type, &by_type, first);
            push_counts(&mut t.nodes_by_capacity_type, &by_capacity, first);
            push_counts(&mut t.nodes_by_zone, &by_zone, first);
        }
    }

    /// `count` nodes were disrupted for `reason` at `at`.
    pub fn disrupted(&mut self, reason: &str, count: usize, at: Millis) {
        let k = self.sample_of(at);
        let len = self.len;
        let series = self
            .timeline
            .disruptions
            .entry(reason.to_owned())
            .or_insert_with(|| vec![0; len]);
        series[k] += count;
    }

    /// The timeline so far. Complete once the final state was held (`hold(end, end, …)`);
    /// instants never held are left out of the instant series.
    pub fn timeline(&self) -> Timeline {
        self.timeline.clone()
    }
}

/// Appends one sample to every series of `series`: the count in `now`, or 0. A series seen
/// for the first time gets zeros for the `filled` samples before.
fn push_counts(
    series: &mut BTreeMap<String, Vec<usize>>,
    now: &BTreeMap<&str, usize>,
    filled: usize,
) {
    for key in now.keys() {
        if !series.contains_key(*key) {
            series.insert((*key).to_owned(), vec![0; filled]);
        }
    }
    for (key, values) in series.iter_mut() {
        // Each call adds one sample, so a series is as long as the samples taken before.
        values.push(now.get(key.as_str()).copied().unwrap_or(0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_round_and_bounded() {
        assert_eq!(interval_for(0), SECOND);
        assert_eq!(interval_for(30 * MINUTE), 5 * SECOND);
        assert_eq!(interval_for(DAY), 2 * MINUTE);
        assert_eq!(interval_for(7 * DAY), 15 * MINUTE);
        assert_eq!(interval_for(1000 * DAY), 2 * DAY);
        assert_eq!(interval_for(100_000 * DAY), 139 * DAY);
        for duration in [1, 59_999, HOUR + 1, 3 * DAY + 7, 400 * DAY, 50_000 * DAY] {
            let i = interval_for(duration);
            assert!(ceil_div(duration, i) <= MAX_INTERVALS, "{duration}: {i}");
        }
    }

    #[test]
    fn samples_fall_on_the_interval_and_the_end() {
        let r = Recorder::new(5 * MINUTE + 3 * SECOND);
        assert_eq!(r.interval, SECOND);
        assert_eq!(r.len, 304);
        assert_eq!(r.timeline.at_seconds[303], 303.0);
        // 1201 s: 2-second samples, the last one a second after the one before.
        let r = Recorder::new(1201 * SECOND);
        assert_eq!(r.interval, 2 * SECOND);
        assert_eq!(r.len, 602);
        assert_eq!(r.timeline.at_seconds[600..], [1200.0, 1201.0]);
        let r = Recorder::new(1202 * SECOND);
        assert_eq!(r.len, 602);
        assert_eq!(r.timeline.at_seconds[600..], [1200.0, 1202.0]);
    }

    fn totals(price: f64, pending: usize) -> Totals {
        Totals {
            price,
            nodes: 0,
            pending,
        }
    }

    /// Spans of state on a 10-second run sampled every second: instants take the state
    /// holding at them, the peak keeps the most pending over the interval before each
    /// sample, disruptions land in the interval that holds them.
    #[test]
    fn holds_become_instants_peaks_and_buckets() {
        let state = ClusterState::new();
        let mut r = Recorder::new(10 * SECOND);
        r.hold(0, 2500, &state, totals(0.0, 0));
        r.hold(2500, 2600, &state, totals(1.0, 7)); // between samples 2 and 3
        r.hold(2600, 4000, &state, totals(1.25, 3));
        r.hold(4000, 10_000, &state, totals(0.5, 0));
        r.disrupted("Empty", 2, 4000);
        r.disrupted("Empty", 1, 4001);
        r.disrupted("Drifted", 1, 0);
        r.hold(10_000, 10_000, &state, totals(0.0, 1));
        let t = r.timeline();
        assert_eq!(t.at_seconds.len(), 11);
        assert_eq!(
            t.cost_per_hour,
            [0.0, 0.0, 0.0, 1.25, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.0]
        );
        assert_eq!(t.pending_pods, [0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 1]);
        // (2, 3] saw 7 then 3; (3, 4] saw 3 until 4000, where 0 took over.
        assert_eq!(t.pending_pods_peak, [0, 0, 0, 7, 3, 0, 0, 0, 0, 0, 1]);
        assert_eq!(t.disruptions["Empty"], [0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0]);
        assert_eq!(t.disruptions["Drifted"][0], 1);
        assert!(t.nodes_by_zone.is_empty());
    }

    #[test]
    fn a_run_of_no_time_has_one_sample() {
        let state = ClusterState::new();
        let mut r = Recorder::new(0);
        r.hold(0, 0, &state, totals(2.0, 4));
        let t = r.timeline();
        assert_eq!(t.at_seconds, [0.0]);
        assert_eq!(t.cost_per_hour, [2.0]);
        assert_eq!(t.pending_pods_peak, [4]);
    }
}
