//! Prometheus summaries, which `prometheus-client` has no type for: upstream exports
//! `karpenter_pods_startup_duration_seconds` and `karpenter_nodes_termination_duration_seconds`
//! as summaries with the quantiles 0, 0.5, 0.9, 0.99 and 1 over client_golang's default
//! 10-minute window, and `_sum` and `_count` over the whole run. [`crate::Metrics::encode`]
//! appends them to the registry's exposition.
//!
//! client_golang estimates the quantiles within ε = 0.01 and ages observations out in five
//! two-minute steps; here the observations of the last 10 minutes are kept and the quantiles
//! are exact (nearest rank), which is within upstream's error bound.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Upstream's objectives (`metrics.SummaryObjectives`).
pub const QUANTILES: [f64; 5] = [0.0, 0.5, 0.9, 0.99, 1.0];

/// How long an observation counts towards the quantiles (client_golang's `DefMaxAge`).
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// The most observations one series keeps in its window; beyond, the oldest go first. A
/// window this full (over 160 a second for 10 minutes) still gives its quantiles from the
/// latest observations.
const MAX_SAMPLES: usize = 100_000;

#[derive(Debug, Default)]
struct Series {
    window: VecDeque<(Instant, f64)>,
    sum: f64,
    count: u64,
}

impl Series {
    fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.window.front() {
            if now.saturating_duration_since(*at) <= MAX_AGE && self.window.len() <= MAX_SAMPLES {
                break;
            }
            self.window.pop_front();
        }
    }

    /// The nearest-rank quantiles of the window; NaN when it is empty, as client_golang.
    fn quantiles(&self) -> [f64; QUANTILES.len()] {
        let mut values: Vec<f64> = self.window.iter().map(|(_, v)| *v).collect();
        values.sort_by(f64::total_cmp);
        QUANTILES.map(|q| {
            if values.is_empty() {
                return f64::NAN;
            }
            let rank = (q * values.len() as f64).ceil() as usize;
            values[rank.clamp(1, values.len()) - 1]
        })
    }
}

/// One summary family with fixed label names. Cloning shares it.
#[derive(Debug, Clone)]
pub struct Summary {
    name: &'static str,
    help: &'static str,
    label_names: &'static [&'static str],
    series: Arc<Mutex<BTreeMap<Vec<String>, Series>>>,
}

fn number(v: f64) -> String {
    match v {
        v if v.is_nan() => "NaN".to_owned(),
        v if v == f64::INFINITY => "+Inf".to_owned(),
        v if v == f64::NEG_INFINITY => "-Inf".to_owned(),
        v => format!("{v:?}"),
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Summary {
    /// A summary `name` whose series carry `label_names`.
    pub fn new(
        name: &'static str,
        help: &'static str,
        label_names: &'static [&'static str],
    ) -> Self {
        Self {
            name,
            help,
            label_names,
            series: Arc::default(),
        }
    }

    /// Records `value` for the series with `label_values` (one per label name) at `now`.
    pub fn observe_at(&self, label_values: &[&str], value: f64, now: Instant) {
        let key: Vec<String> = label_values.iter().map(|v| (*v).to_owned()).collect();
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        let s = series.entry(key).or_default();
        s.sum += value;
        s.count += 1;
        s.window.push_back((now, value));
        s.expire(now);
    }

    /// Records `value` for the series with `label_values` now.
    pub fn observe(&self, label_values: &[&str], value: f64) {
        self.observe_at(label_values, value, Instant::now());
    }

    /// Appends the family in the text exposition format, its quantiles as of `now`.
    pub(crate) fn encode_at(&self, out: &mut String, now: Instant) {
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        // Like the registry's families, printed from the first observation on.
        if series.is_empty() {
            return;
        }
        let help = self.help.replace('\\', "\\\\").replace('\n', "\\n");
        // Writing to a String cannot fail.
        let _ = writeln!(out, "# HELP {} {help}", self.name);
        let _ = writeln!(out, "# TYPE {} summary", self.name);
        for (values, s) in series.iter_mut() {
            s.expire(now);
            let labels: Vec<String> = (self.label_names.iter().zip(values))
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            let with = |extra: Option<String>| {
                let all: Vec<&String> = labels.iter().chain(extra.as_ref()).collect();
                match all.is_empty() {
                    true => String::new(),
                    false => format!(
                        "{{{}}}",
                        all.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")
                    ),
                }
            };
            for (q, v) in QUANTILES.iter().zip(s.quantiles()) {
                let set = with(Some(format!("quantile=\"{q}\"")));
                let _ = writeln!(out, "{}{set} {}", self.name, number(v));
            }
            let plain = with(None);
            let _ = writeln!(out, "{}_sum{plain} {}", self.name, number(s.sum));
            let _ = writeln!(out, "{}_count{plain} {}", self.name, s.count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_cover_the_window_and_sum_and_count_the_run() {
        let s = Summary::new("d_seconds", "Help.", &["nodepool"]);
        let t0 = Instant::now();
        for v in 1..=100 {
            s.observe_at(&["a\"b"], f64::from(v), t0);
        }
        let mut out = String::new();
        s.encode_at(&mut out, t0);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                "# HELP d_seconds Help.",
                "# TYPE d_seconds summary",
                r#"d_seconds{nodepool="a\"b",quantile="0"} 1.0"#,
                r#"d_seconds{nodepool="a\"b",quantile="0.5"} 50.0"#,
                r#"d_seconds{nodepool="a\"b",quantile="0.9"} 90.0"#,
                r#"d_seconds{nodepool="a\"b",quantile="0.99"} 99.0"#,
                r#"d_seconds{nodepool="a\"b",quantile="1"} 100.0"#,
                r#"d_seconds_sum{nodepool="a\"b"} 5050.0"#,
                r#"d_seconds_count{nodepool="a\"b"} 100"#,
            ]
        );
        // Past the window only the newer observation counts; sum and count keep all.
        let later = t0 + MAX_AGE + Duration::from_secs(1);
        s.observe_at(&["a\"b"], 7.0, later);
        let mut out = String::new();
        s.encode_at(&mut out, later);
        assert!(
            out.contains(r#"d_seconds{nodepool="a\"b",quantile="0"} 7.0"#),
            "{out}"
        );
        assert!(
            out.contains(r#"d_seconds{nodepool="a\"b",quantile="1"} 7.0"#),
            "{out}"
        );
        assert!(
            out.contains(r#"d_seconds_count{nodepool="a\"b"} 101"#),
            "{out}"
        );
        // With nothing left in the window the quantiles are NaN, as client_golang's.
        let mut out = String::new();
        s.encode_at(&mut out, later + MAX_AGE + Duration::from_secs(1));
        assert!(out.contains(r#"quantile="0.5"} NaN"#), "{out}");
    }

    #[test]
    fn a_summary_without_labels_has_bare_sum_and_count() {
        let s = Summary::new("p_seconds", "Help.", &[]);
        s.observe(&[], 2.5);
        let mut out = String::new();
        s.encode_at(&mut out, Instant::now());
        assert!(out.contains("\np_seconds{quantile=\"0.5\"} 2.5\n"), "{out}");
        assert!(
            out.contains("\np_seconds_sum 2.5\np_seconds_count 1\n"),
            "{out}"
        );
    }
}
