//! The hourly lower bound: what the scenario's pods would cost at least, hour by hour, if
//! every hour's pods were planned from scratch (`karpenter plan` of the pods the workloads
//! want, on an empty cluster, and its `lowerBound`). A run's cost against the sum of these
//! bounds says how much is lost in timing, batching and consolidation rather than in the
//! packing's own optimality gap.
//!
//! The pods the workloads want (their replicas, a Job its parallelism up to the completions
//! left, plus bare Pods) are sampled every [`SAMPLE_INTERVAL_MS`] on the virtual clock; each
//! distinct set is planned once. An hour's bound is the lowest of its samples: the cluster
//! has to hold at least that set's pods during the hour, whichever sample it is, so the
//! hour cannot cost less (transitions aside: a pod waiting for its node is not held).

use karpenter_scheduling::model::Millis;
use serde::Serialize;
use std::collections::BTreeMap;

/// How often the wanted pods are sampled.
pub const SAMPLE_INTERVAL_MS: Millis = 10 * 60_000;

const HOUR_MS: Millis = 3_600_000;

/// The hourly lower bounds of a run.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LowerBoundReport {
    /// Dollars over the run: each hour's bound times the hour's length (the last hour may
    /// be shorter).
    pub total: f64,
    /// `total` over the run's hours: comparable to `cost.averagePerHour`.
    pub average_per_hour: f64,
    /// One entry per hour of the run.
    pub hourly: Vec<HourBound>,
    /// Distinct pod sets planned.
    pub plans: usize,
    /// Plans that reported no lower bound (their price was taken instead, which bounds
    /// nothing): 0 when every hour's figure is a bound.
    pub plans_without_bound: usize,
    /// The most pods one from-scratch plan could not place (a bound covers only the pods
    /// its plan places): 0 when every hour's figure covers every wanted pod.
    pub unplaced_pods: usize,
}

/// One hour's bound.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HourBound {
    /// Seconds since the start when the hour starts.
    pub start_seconds: f64,
    /// Seconds since the start when it ends (the run's end for a last, shorter hour).
    pub end_seconds: f64,
    /// Its bound in $/hour.
    pub per_hour: f64,
}

/// Samples the wanted pods on the virtual clock and plans each distinct set once.
/// `F` identifies a set of wanted pods: equal fingerprints, equal sets.
#[derive(Debug, Clone)]
pub(crate) struct BoundRecorder<F: Ord> {
    next: Millis,
    /// Each distinct set's $/h.
    planned: BTreeMap<F, f64>,
    /// `(instant, $/h)`.
    samples: Vec<(Millis, f64)>,
    without_bound: usize,
}

impl<F: Ord> Default for BoundRecorder<F> {
    fn default() -> Self {
        Self {
            next: 0,
            planned: BTreeMap::new(),
            samples: Vec::new(),
            without_bound: 0,
        }
    }
}

impl<F: Ord> BoundRecorder<F> {
    /// Records the samples due in `[now, until)`, during which the wanted pods stay the
    /// ones `fingerprint` identifies; `plan` returns a set's bound in $/h (or `Err(price)`
    /// when the plan reported none) and is called once per distinct set. The caller
    /// records every stretch of the run, in order.
    pub(crate) fn record(
        &mut self,
        now: Millis,
        until: Millis,
        fingerprint: impl FnOnce() -> F,
        plan: impl FnOnce() -> Result<f64, f64>,
    ) {
        if self.next >= until {
            return;
        }
        let key = fingerprint();
        let per_hour = match self.planned.get(&key) {
            Some(v) => *v,
            None => {
                let v = plan().unwrap_or_else(|price| {
                    self.without_bound += 1;
                    price
                });
                self.planned.insert(key, v);
                v
            }
        };
        while self.next < until {
            if self.next >= now {
                self.samples.push((self.next, per_hour));
            }
            self.next += SAMPLE_INTERVAL_MS;
        }
    }

    /// The report over a run of `duration` ms: each hour's lowest sample.
    pub(crate) fn report(&self, duration: Millis) -> LowerBoundReport {
        let mut hourly: Vec<HourBound> = Vec::new();
        let mut start = 0;
        while start < duration {
            let end = (start + HOUR_MS).min(duration);
            let lowest = self
                .samples
                .iter()
                .filter(|(at, _)| *at >= start && *at < end)
                .map(|(_, v)| *v)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))));
            hourly.push(HourBound {
                start_seconds: start as f64 / 1000.0,
                end_seconds: end as f64 / 1000.0,
                per_hour: lowest.unwrap_or(0.0),
            });
            start = end;
        }
        let total: f64 = hourly
            .iter()
            .map(|h| h.per_hour * (h.end_seconds - h.start_seconds) / 3600.0)
            .sum();
        let hours = duration as f64 / HOUR_MS as f64;
        LowerBoundReport {
            total,
            average_per_hour: if hours > 0.0 { total / hours } else { 0.0 },
            hourly,
            plans: self.planned.len(),
            plans_without_bound: self.without_bound,
            unplaced_pods: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_hour_takes_its_lowest_sample_and_each_set_is_planned_once() {
        let mut r: BoundRecorder<u32> = BoundRecorder::default();
        let mut plans = 0;
        // Set 1 ($2/h) for 90 minutes, then set 2 ($1/h) to 2h30, then set 1 again.
        for (now, until, set, bound) in [
            (0, 5_400_000, 1, 2.0),
            (5_400_000, 9_000_000, 2, 1.0),
            (9_000_000, 10_800_000, 1, 2.0),
        ] {
            r.record(
                now,
                until,
                || set,
                || {
                    plans += 1;
                    Ok(bound)
                },
            );
        }
        assert_eq!(plans, 2);
        let report = r.report(10_800_000);
        let hourly: Vec<f64> = report.hourly.iter().map(|h| h.per_hour).collect();
        assert_eq!(hourly, [2.0, 1.0, 1.0]);
        assert!((report.total - 4.0).abs() < 1e-9);
        assert!((report.average_per_hour - 4.0 / 3.0).abs() < 1e-9);
        assert_eq!((report.plans, report.plans_without_bound), (2, 0));
    }

    #[test]
    fn a_short_last_hour_counts_for_its_length_and_a_plan_without_bound_is_counted() {
        let mut r: BoundRecorder<u32> = BoundRecorder::default();
        r.record(0, 5_400_000, || 7, || Err(3.0));
        let report = r.report(5_400_000);
        assert_eq!(report.hourly.len(), 2);
        assert_eq!(report.hourly[1].end_seconds, 5_400.0);
        assert!((report.total - 4.5).abs() < 1e-9);
        assert_eq!(report.plans_without_bound, 1);
        // Stretches with no sample instant in them plan nothing.
        let mut r: BoundRecorder<u32> = BoundRecorder::default();
        r.record(0, 1, || 1, || Ok(1.0));
        r.record(1, 2, || 2, || panic!("no sample falls in [1, 2)"));
    }
}
