//! Histograms from a controller's Prometheus text (`/metrics`): the time of each stage of the
//! pass (`controller_runtime_reconcile_time_seconds`), diffed between two scrapes.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One histogram series: cumulative bucket counts by upper bound, sum and count.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub buckets: Vec<(f64, f64)>,
    pub sum: f64,
    pub count: f64,
}

impl Histogram {
    /// `self - earlier`: what was observed between the two scrapes.
    pub fn since(&self, earlier: Option<&Histogram>) -> Histogram {
        let Some(e) = earlier else {
            return self.clone();
        };
        let before = |le: f64| {
            e.buckets
                .iter()
                .find(|(l, _)| (*l - le).abs() < 1e-12 || (l.is_infinite() && le.is_infinite()))
                .map_or(0.0, |(_, c)| *c)
        };
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|(le, c)| (*le, c - before(*le)))
                .collect(),
            sum: self.sum - e.sum,
            count: self.count - e.count,
        }
    }

    /// The upper bound of the bucket holding quantile `q` (an upper estimate).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count <= 0.0 {
            return None;
        }
        let want = q * self.count;
        self.buckets
            .iter()
            .find(|(_, c)| *c >= want)
            .map(|(le, _)| *le)
    }

    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }
}

fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    let start = labels.find(&format!("{key}=\""))? + key.len() + 2;
    let end = labels[start..].find('"')? + start;
    Some(&labels[start..end])
}

/// The series of histogram `family`, keyed by the value of label `by`.
pub fn histograms(text: &str, family: &str, by: &str) -> BTreeMap<String, Histogram> {
    let mut out: BTreeMap<String, Histogram> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(family) else {
            continue;
        };
        let (kind, rest) = if let Some(r) = rest.strip_prefix("_bucket") {
            ("bucket", r)
        } else if let Some(r) = rest.strip_prefix("_sum") {
            ("sum", r)
        } else if let Some(r) = rest.strip_prefix("_count") {
            ("count", r)
        } else {
            continue;
        };
        let Some(close) = rest.rfind('}') else {
            continue;
        };
        let labels = &rest[..close];
        let Some(value) = rest[close + 1..]
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        let Some(key) = label(labels, by) else {
            continue;
        };
        let h = out.entry(key.to_owned()).or_default();
        match kind {
            "bucket" => {
                let le = match label(labels, "le") {
                    Some("+Inf") => f64::INFINITY,
                    Some(v) => v.parse().unwrap_or(f64::INFINITY),
                    None => continue,
                };
                h.buckets.push((le, value));
            }
            "sum" => h.sum = value,
            _ => h.count = value,
        }
    }
    for h in out.values_mut() {
        h.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// The `/metrics` text at `url` (plain HTTP on loopback); empty when it cannot be read.
pub async fn scrape(url: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Some(rest) = url.strip_prefix("http://") else {
        return String::new();
    };
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let Ok(mut stream) = tokio::net::TcpStream::connect(host).await else {
        return String::new();
    };
    let request = format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = stream.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return String::new();
    };
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return dechunk(body);
    }
    body.to_owned()
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# TYPE controller_runtime_reconcile_time_seconds histogram
controller_runtime_reconcile_time_seconds_bucket{controller="reconciler",le="0.005"} 2
controller_runtime_reconcile_time_seconds_bucket{controller="reconciler",le="0.1"} 9
controller_runtime_reconcile_time_seconds_bucket{controller="reconciler",le="+Inf"} 10
controller_runtime_reconcile_time_seconds_sum{controller="reconciler"} 1.5
controller_runtime_reconcile_time_seconds_count{controller="reconciler"} 10
controller_runtime_reconcile_time_seconds_count{controller="state"} 4
"#;

    #[test]
    fn histograms_parse_and_diff() {
        let h = histograms(
            TEXT,
            "controller_runtime_reconcile_time_seconds",
            "controller",
        );
        let r = &h["reconciler"];
        assert_eq!(r.count, 10.0);
        assert_eq!(r.quantile(0.5), Some(0.1));
        assert_eq!(r.quantile(0.1), Some(0.005));
        assert_eq!(r.quantile(1.0), Some(f64::INFINITY));
        assert_eq!(h["state"].count, 4.0);
        let earlier = Histogram {
            buckets: vec![(0.005, 2.0), (0.1, 2.0), (f64::INFINITY, 2.0)],
            sum: 0.01,
            count: 2.0,
        };
        let d = r.since(Some(&earlier));
        assert_eq!(d.count, 8.0);
        assert_eq!(d.quantile(0.5), Some(0.1));
    }

    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(
            dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "hello world"
        );
    }
}
