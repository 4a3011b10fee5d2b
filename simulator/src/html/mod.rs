//! The report as one self-contained HTML page, what `karpenter simulate --report FILE.html`
//! writes: charts over virtual time (cost per hour; nodes by instance type, capacity type
//! and zone; pending pods; disruptions by reason), drawn from each run's
//! [`Timeline`](crate::timeline::Timeline), and the text report's tables. Two runs (the
//! optimiser's and the greedy first fit's, `--compare`) share every chart's axes.
//!
//! Self-contained: inline SVG, inline CSS and a short inline script (values under the
//! pointer); no fonts, images, scripts or styles are fetched, and the page's
//! Content-Security-Policy forbids any fetch, so a future edit that adds one fails in the
//! browser (and in the test that opens the page) rather than leaking. Every string that comes
//! from the scenario is escaped ([`escape`]). The same reports give the same page, byte for
//! byte: it holds no wall-clock time.

mod axis;
mod chart;
mod escape;
mod tables;

use crate::metrics::Report;
use crate::timeline::Timeline;
use crate::{clock, saving_percent};
use axis::Unit;
use chart::{Chart, Frame, Key, Kind, Series, Step, Swatch};
use escape::{script_json, text};
use karpenter_scheduling::model::Millis;
use std::collections::BTreeMap;

/// The runs' colours (lines of single-series charts), in run order.
const RUN_COLORS: [&str; 2] = ["#2563eb", "#ea580c"];
/// The legend colour that stands for "either run" (a line or bar style).
const NEUTRAL: &str = "#4b5563";
/// Category colours, in rank order.
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#17becf",
];
/// The colour of the hourly lower bound on the cost chart.
const BOUND_COLOR: &str = "#059669";
/// The colour of the categories folded into "other".
const OTHER_COLOR: &str = "#a8a29e";
/// Categories drawn on their own; beyond one more, the rest are folded into "other".
const MOST_CATEGORIES: usize = 8;

const CSS: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");
/// Inline styles and scripts, `data:` images (the empty favicon) and nothing else.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:";

/// The page's charts by id, in page order: each is a `<figure id="chart-{id}">` holding an
/// `<svg id="chart-{id}-svg">`.
pub const CHARTS: [&str; 6] = [
    "cost",
    "instance-types",
    "capacity-types",
    "zones",
    "pending",
    "disruptions",
];

/// A run on the page: its report and what the page calls it.
pub(crate) struct Run<'a> {
    pub label: &'static str,
    pub report: &'a Report,
}

/// The page of one run, labelled by how it packed (`karpenter-rs`, or `greedy first fit`
/// when the optimiser was off).
pub fn render_html(report: &Report) -> String {
    let label = if report.optimizer {
        "karpenter-rs"
    } else {
        "greedy first fit"
    };
    page(&[Run { label, report }])
}

/// The page of two runs of one scenario on shared axes: `optimized` (solid lines, labelled
/// `karpenter-rs`) and `greedy` (dashed lines and hatched bars, `greedy first fit`).
pub fn render_html_comparison(optimized: &Report, greedy: &Report) -> String {
    page(&[
        Run {
            label: "karpenter-rs",
            report: optimized,
        },
        Run {
            label: "greedy first fit",
            report: greedy,
        },
    ])
}

fn page(runs: &[Run]) -> String {
    let frame = frame(runs);
    let charts = charts(runs, &frame);
    let first = runs[0].report;
    let style = axis::time_ticks(frame.span).style;
    let hover: serde_json::Map<String, serde_json::Value> = charts
        .iter()
        .filter_map(|c| Some((c.id.to_owned(), c.hover_data()?)))
        .collect();
    let data = serde_json::json!({
        "t": frame.at.iter().map(|&at| at as f64 / 1000.0).collect::<Vec<_>>(),
        "style": style.code(),
        "charts": hover,
    });
    let runs_text = match runs {
        [one] => format!("run: {}", one.label),
        _ => "runs: karpenter-rs (packing optimiser, solid) and greedy first fit \
              (Karpenter-equivalent, dashed)"
            .to_owned(),
    };
    let saving = match runs {
        [optimized, greedy] => saving_percent(optimized.report, greedy.report)
            .map(|s| {
                format!(r#"<p class="saving">karpenter-rs saves {s:.1}% of the greedy cost</p>"#)
            })
            .unwrap_or_default(),
        _ => String::new(),
    };
    let bound = runs
        .iter()
        .find_map(|r| r.report.lower_bound.as_ref())
        .map(|b| {
            let of: Vec<String> = runs
                .iter()
                .filter(|_| b.total > 0.0)
                .map(|r| format!("{} {:.2}×", r.label, r.report.cost.total / b.total))
                .collect();
            let of = if of.is_empty() {
                String::new()
            } else {
                format!("; cost over the bound: {}", of.join(", "))
            };
            format!(
                r#"<p class="bound">hourly lower bound: ${:.4}/h on average{}</p>"#,
                b.average_per_hour,
                text(&of)
            )
        })
        .unwrap_or_default();
    let description = if first.description.trim().is_empty() {
        String::new()
    } else {
        format!(
            r#"<p class="description">{}</p>"#,
            text(first.description.trim())
        )
    };
    let charts_html: String = charts.iter().map(|c| c.render(&frame)).collect();
    format!(
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>karpenter simulate — {name}</title>
<link rel="icon" href="data:,">
<style>
{CSS}</style>
</head>
<body>
<main>
<header>
<h1>karpenter simulate — <span class="scenario">{name}</span></h1>
{description}<p class="meta">{duration} simulated · {runs_text}</p>
{saving}{bound}</header>
<section id="charts">
<h2>Over time</h2>
<div class="charts">
{charts_html}
</div>
</section>
<section id="summary">
<h2>Summary</h2>
<div class="tables">
{summary}
</div>
</section>
<section id="details">
<h2>Details</h2>
<div class="tables">
{details}
</div>
</section>
</main>
<script type="application/json" id="report-data">{data}</script>
<script>
{SCRIPT}</script>
</body>
</html>
"#,
        csp = CONTENT_SECURITY_POLICY,
        name = text(&first.scenario),
        duration = clock((first.duration_seconds * 1000.0) as i64),
        summary = tables::summary(runs),
        details = tables::details(runs),
        data = script_json(&data),
    )
}

/// The samples of the run with the most (runs of one scenario have the same).
fn frame(runs: &[Run]) -> Frame {
    let timeline = runs
        .iter()
        .map(|r| &r.report.timeline)
        .max_by_key(|t| t.at_seconds.len())
        .cloned()
        .unwrap_or_default();
    let at: Vec<Millis> = timeline
        .at_seconds
        .iter()
        .map(|s| (s * 1000.0).round() as Millis)
        .collect();
    Frame {
        span: at.last().copied().unwrap_or(0),
        interval: (timeline.interval_seconds * 1000.0).round() as Millis,
        at,
    }
}

/// `120000` → `2-minute`: a span as an adjective.
fn span_words(ms: Millis) -> String {
    let s = ms / 1000;
    if s % 86_400 == 0 && s > 0 {
        format!("{}-day", s / 86_400)
    } else if s % 3600 == 0 && s > 0 {
        format!("{}-hour", s / 3600)
    } else if s % 60 == 0 && s > 0 {
        format!("{}-minute", s / 60)
    } else {
        format!("{s}-second")
    }
}

fn charts(runs: &[Run], frame: &Frame) -> Vec<Chart> {
    let every = span_words(frame.interval);
    let bars = span_words(chart::bar_span(frame));
    vec![
        with_bound(
            runs,
            frame,
            per_run(
                runs,
                Chart {
                    id: "cost",
                    title: "Cost per hour".into(),
                    note: format!(
                        "$/h of every node, in flight and deleting ones included, at each \
                         {every} sample"
                    ),
                    unit: Unit::Dollars,
                    axis_title: "$/h",
                    step: Step::After,
                    ..blank()
                },
                |t| t.cost_per_hour.clone(),
            ),
        ),
        nodes_by(runs, "instance-types", "instance type", &every, |t| {
            &t.nodes_by_instance_type
        }),
        nodes_by(runs, "capacity-types", "capacity type", &every, |t| {
            &t.nodes_by_capacity_type
        }),
        nodes_by(runs, "zones", "zone", &every, |t| &t.nodes_by_zone),
        per_run(
            runs,
            Chart {
                id: "pending",
                title: "Pending pods".into(),
                note: format!("the most pods waiting for a node at once in each {every} interval"),
                axis_title: "pods",
                step: Step::Before,
                ..blank()
            },
            |t| t.pending_pods_peak.iter().map(|&n| n as f64).collect(),
        ),
        by_category(
            runs,
            Chart {
                id: "disruptions",
                title: "Disruptions by reason".into(),
                note: format!(
                    "nodes disrupted in each {bars} interval{}; hover a bar for its count",
                    if runs.len() > 1 {
                        " (left bar karpenter-rs, right bar greedy first fit)"
                    } else {
                        ""
                    }
                ),
                axis_title: "nodes disrupted",
                kind: Kind::Bars,
                step: Step::Before,
                ..blank()
            },
            |t| &t.disruptions,
        ),
    ]
}

/// The cost chart with the hourly lower bound (of the first run that has one) drawn as a
/// dotted step line: at each sample, the bound of the hour it falls in.
fn with_bound(runs: &[Run], frame: &Frame, mut chart: Chart) -> Chart {
    let Some(bound) = runs.iter().find_map(|r| r.report.lower_bound.as_ref()) else {
        return chart;
    };
    let values = frame
        .at
        .iter()
        .map(|&at| {
            let t = at as f64 / 1000.0;
            bound
                .hourly
                .iter()
                .find(|h| h.start_seconds <= t && t < h.end_seconds)
                .or(bound.hourly.last())
                .map_or(0.0, |h| h.per_hour)
        })
        .collect();
    let name = "hourly lower bound".to_owned();
    chart.series.push(Series {
        name: name.clone(),
        run: 0,
        color: BOUND_COLOR,
        values,
        reference: true,
    });
    chart.legend.push(Key {
        label: name,
        color: BOUND_COLOR,
        swatch: Swatch::Dotted,
    });
    chart.note.push_str(
        "; the dotted line is each hour's lower bound (that hour's wanted pods planned from \
         scratch)",
    );
    chart
}

/// Nodes by one of their labels, at each sample.
fn nodes_by(
    runs: &[Run],
    id: &'static str,
    label: &str,
    every: &str,
    of: fn(&Timeline) -> &BTreeMap<String, Vec<usize>>,
) -> Chart {
    let chart = Chart {
        id,
        title: format!("Nodes by {label}"),
        note: format!("nodes at each {every} sample"),
        axis_title: "nodes",
        ..blank()
    };
    by_category(runs, chart, of)
}

/// A chart with nothing in it yet: whole counts in step lines.
fn blank() -> Chart {
    Chart {
        id: "",
        title: String::new(),
        note: String::new(),
        unit: Unit::Count,
        axis_title: "",
        kind: Kind::Lines,
        step: Step::After,
        series: Vec::new(),
        legend: Vec::new(),
        runs: Vec::new(),
    }
}

fn run_labels(runs: &[Run]) -> Vec<String> {
    runs.iter().map(|r| r.label.to_owned()).collect()
}

/// One series per run, coloured by run (the second one dashed).
fn per_run(runs: &[Run], chart: Chart, values: impl Fn(&Timeline) -> Vec<f64>) -> Chart {
    let series = runs
        .iter()
        .enumerate()
        .map(|(i, r)| Series {
            name: r.label.to_owned(),
            run: i,
            color: RUN_COLORS[i % RUN_COLORS.len()],
            values: values(&r.report.timeline),
            reference: false,
        })
        .collect();
    let legend = runs
        .iter()
        .enumerate()
        .map(|(i, r)| Key {
            label: r.label.to_owned(),
            color: RUN_COLORS[i % RUN_COLORS.len()],
            swatch: if i == 0 { Swatch::Line } else { Swatch::Dashed },
        })
        .collect();
    Chart {
        series,
        legend,
        runs: run_labels(runs),
        ..chart
    }
}

/// One series per category and run, coloured by category: the most common categories over
/// all runs, the rest summed as `other`. One run's lines are stacked into areas; bars stay
/// bars; two runs are drawn as lines, the second dashed.
fn by_category(
    runs: &[Run],
    chart: Chart,
    of: impl Fn(&Timeline) -> &BTreeMap<String, Vec<usize>>,
) -> Chart {
    let mut totals: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs {
        for (key, values) in of(&r.report.timeline) {
            *totals.entry(key.as_str()).or_default() += values.iter().sum::<usize>();
        }
    }
    let mut ranked: Vec<(&str, usize)> = totals.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown = if ranked.len() > MOST_CATEGORIES + 1 {
        MOST_CATEGORIES
    } else {
        ranked.len()
    };
    let mut groups: Vec<(String, &'static str, Vec<&str>)> = ranked[..shown]
        .iter()
        .enumerate()
        .map(|(i, (key, _))| ((*key).to_owned(), PALETTE[i % PALETTE.len()], vec![*key]))
        .collect();
    if shown < ranked.len() {
        let rest = ranked[shown..].iter().map(|(k, _)| *k).collect();
        groups.push((
            format!("other ({} more)", ranked.len() - shown),
            OTHER_COLOR,
            rest,
        ));
    }
    let mut series = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let by_key = of(&r.report.timeline);
        let len = r.report.timeline.at_seconds.len();
        for (name, color, members) in &groups {
            let values = (0..len)
                .map(|k| {
                    members
                        .iter()
                        .filter_map(|m| by_key.get(*m).and_then(|v| v.get(k)))
                        .sum::<usize>() as f64
                })
                .collect();
            series.push(Series {
                name: name.clone(),
                run: i,
                color,
                values,
                reference: false,
            });
        }
    }
    let mut legend: Vec<Key> = groups
        .iter()
        .map(|(name, color, _)| Key {
            label: name.clone(),
            color,
            swatch: Swatch::Box,
        })
        .collect();
    if runs.len() > 1 {
        let bars = chart.kind == Kind::Bars;
        legend.extend(runs.iter().enumerate().map(|(i, r)| Key {
            label: r.label.to_owned(),
            color: NEUTRAL,
            swatch: match (bars, i) {
                (true, 0) => Swatch::Box,
                (true, _) => Swatch::Hatched,
                (false, 0) => Swatch::Line,
                (false, _) => Swatch::Dashed,
            },
        }));
    }
    let kind = match chart.kind {
        Kind::Lines if runs.len() == 1 => Kind::Stacked,
        kind => kind,
    };
    let note = if groups.is_empty() {
        format!("{} — none over the run", chart.note)
    } else {
        chart.note.clone()
    };
    Chart {
        kind,
        note,
        series,
        legend,
        runs: run_labels(runs),
        ..chart
    }
}

#[cfg(test)]
mod tests;
