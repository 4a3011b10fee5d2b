//! What Karpenter's published Grafana dashboards read from `/metrics`: the series and labels
//! their queries select, group by and template on (`dashboards/karpenter-v1.15.txt`, our own
//! list), and which of them an exposition lacks. A test on a real control plane scrapes the
//! controller and requires every one, so the dashboards users already run keep working.

/// The list, one `series labels` line each (its header says how to read it).
pub const QUERIES: &str = include_str!("../dashboards/karpenter-v1.15.txt");

/// One series a dashboard query needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The sample name as exposed (`controller_runtime_reconcile_time_seconds_bucket`).
    pub series: String,
    /// Label names the sample must carry, each with the value a query selects, if any.
    pub labels: Vec<(String, Option<String>)>,
    /// What the cluster needs for such a sample to exist (`daemonsets`), if anything.
    pub when: Option<String>,
}

impl std::fmt::Display for Wanted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.series)?;
        f.write_str("{")?;
        for (i, (name, value)) in self.labels.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match value {
                Some(v) => write!(f, "{name}={v:?}")?,
                None => f.write_str(name)?,
            }
        }
        f.write_str("}")
    }
}

/// Every line of [`QUERIES`].
pub fn wanted() -> Vec<Wanted> {
    QUERIES
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut cols = l.split_whitespace();
            let series = cols.next().unwrap_or_default();
            let labels = cols.next().unwrap_or("-");
            let when = cols.next().map(str::to_owned);
            let labels = match labels {
                "-" => Vec::new(),
                ls => ls
                    .split(',')
                    .map(|item| match item.split_once('=') {
                        Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
                        None => (item.to_owned(), None),
                    })
                    .collect(),
            };
            Wanted {
                series: series.to_owned(),
                labels,
                when,
            }
        })
        .collect()
}

/// The wanted series that no sample of `exposition` (Prometheus or OpenMetrics text)
/// satisfies: a sample of that name carrying every listed label, with the listed value where
/// one is given. A series whose condition is not among `present` (the conditions the scraped
/// cluster meets, e.g. `daemonsets`) is not required.
pub fn missing(exposition: &str, present: &[&str]) -> Vec<Wanted> {
    let samples: Vec<(&str, Vec<(String, String)>)> = exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(sample)
        .collect();
    wanted()
        .into_iter()
        .filter(|w| w.when.as_deref().is_none_or(|c| present.contains(&c)))
        .filter(|w| {
            !samples.iter().any(|(name, labels)| {
                *name == w.series
                    && w.labels.iter().all(|(n, v)| {
                        labels
                            .iter()
                            .any(|(ln, lv)| ln == n && v.as_ref().is_none_or(|v| v == lv))
                    })
            })
        })
        .collect()
}

/// A sample line's name and labels; `None` for a line that is not one.
fn sample(line: &str) -> Option<(&str, Vec<(String, String)>)> {
    let end = line.find(['{', ' '])?;
    let name = &line[..end];
    if !line[end..].starts_with('{') {
        return Some((name, Vec::new()));
    }
    let mut labels = Vec::new();
    let mut rest = &line[end + 1..];
    loop {
        rest = rest.trim_start_matches(',');
        if rest.starts_with('}') {
            return Some((name, labels));
        }
        let (label, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let close = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        labels.push((label.to_owned(), value));
        rest = &after[close + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_parsed_with_escaped_values() {
        assert_eq!(
            sample(r#"a_total{x="1",y="q\"uo\\te"} 3"#),
            Some((
                "a_total",
                vec![
                    ("x".to_owned(), "1".to_owned()),
                    ("y".to_owned(), r#"q"uo\te"#.to_owned())
                ]
            ))
        );
        assert_eq!(sample("up 1"), Some(("up", Vec::new())));
        assert_eq!(sample("a{} 1"), Some(("a", Vec::new())));
        assert_eq!(sample("garbage"), None);
    }

    #[test]
    fn a_series_needs_every_label_and_each_selected_value() {
        let all: String = wanted()
            .iter()
            .map(|w| {
                let labels: Vec<String> = w
                    .labels
                    .iter()
                    .map(|(n, v)| format!("{n}=\"{}\"", v.as_deref().unwrap_or("x")))
                    .collect();
                format!("{}{{{}}} 1\n", w.series, labels.join(","))
            })
            .collect();
        assert!(
            missing(&all, &["daemonsets"]).is_empty(),
            "{:?}",
            missing(&all, &["daemonsets"])
        );
        // Drop the zone label from the allocatable samples: every line naming it misses.
        let no_zone = all.replace(",zone=\"x\"", "");
        let lacking: Vec<String> = missing(&no_zone, &[])
            .iter()
            .map(|w| w.to_string())
            .collect();
        assert!(
            lacking.contains(
                &"karpenter_nodes_allocatable{resource_type=\"cpu\",arch,capacity_type,\
                  instance_type,nodepool,zone}"
                    .to_owned()
            ),
            "{lacking:?}"
        );
        assert!(!lacking.iter().any(|l| l.starts_with("controller_runtime")));
        // Without DaemonSets their requests are not required.
        assert!(!lacking.iter().any(|l| l.contains("daemon")), "{lacking:?}");
        assert!(
            missing(&no_zone, &["daemonsets"])
                .iter()
                .any(|w| w.series == "karpenter_nodes_total_daemon_requests")
        );
        // A selected value must match: memory samples do not serve a cpu query.
        let memory_only = all.replace("resource_type=\"cpu\"", "resource_type=\"memory\"");
        assert!(
            missing(&memory_only, &[])
                .iter()
                .any(|w| w.series == "karpenter_nodepools_limit")
        );
    }
}
