//! The report page's tables: the text report's summary, instance types, nodes by zone and
//! NodePool, disruptions, controller activity and pods never scheduled, one column per run
//! (or one table per run where the rows differ between runs).

use super::Run;
use super::escape::text;
use crate::metrics::Report;
use crate::{TYPE_COLUMNS, summary_rows, type_cells};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// An HTML table under construction; every cell is escaped when rendered.
struct HtmlTable {
    id: String,
    header: Vec<String>,
    /// Per column: right-aligned figures.
    numeric: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl HtmlTable {
    fn new(id: impl Into<String>, header: Vec<String>, numeric: Vec<bool>) -> Self {
        Self {
            id: id.into(),
            header,
            numeric,
            rows: Vec::new(),
        }
    }

    fn render(&self) -> String {
        let class = |i: usize| {
            if self.numeric.get(i).copied().unwrap_or(false) {
                r#" class="num""#
            } else {
                ""
            }
        };
        let mut out = format!(r#"<table id="table-{}"><thead><tr>"#, self.id);
        for (i, h) in self.header.iter().enumerate() {
            let _ = write!(out, "<th{}>{}</th>", class(i), text(h));
        }
        out.push_str("</tr></thead><tbody>");
        for row in &self.rows {
            out.push_str("<tr>");
            for (i, cell) in row.iter().enumerate() {
                let _ = write!(out, "<td{}>{}</td>", class(i), text(cell));
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table>");
        out
    }
}

/// A block of the page: a heading and what follows it.
fn block(title: &str, body: &str) -> String {
    format!(r#"<div class="block"><h3>{}</h3>{body}</div>"#, text(title))
}

/// A table with the first column `first` and one figure column per run.
fn per_run(id: &'static str, first: &str, runs: &[Run]) -> HtmlTable {
    let mut header = vec![first.to_owned()];
    header.extend(runs.iter().map(|r| r.label.to_owned()));
    let mut numeric = vec![false];
    numeric.extend(runs.iter().map(|_| true));
    HtmlTable::new(id, header, numeric)
}

/// The top of the page: the figures runs are compared on (one column per run), then each
/// run's instance types.
pub fn summary(runs: &[Run]) -> String {
    let mut out = block(
        "Cost, nodes and pods",
        &figures("summary", runs, summary_rows),
    );
    for (i, run) in runs.iter().enumerate() {
        let mut t = HtmlTable::new(
            format!("instance-types-{i}"),
            TYPE_COLUMNS.iter().map(|c| (*c).to_owned()).collect(),
            vec![false, false, true, true, true, true],
        );
        t.rows = run.report.nodes.by_type.iter().map(type_cells).collect();
        let title = if runs.len() > 1 {
            format!("Instance types — {}", run.label)
        } else {
            "Instance types".to_owned()
        };
        out.push_str(&block(&title, &t.render()));
    }
    out
}

/// Everything below the charts.
pub fn details(runs: &[Run]) -> String {
    let mut out = String::new();
    out.push_str(&block(
        "Nodes by zone (launched or present at the start)",
        &counts("zones", "ZONE", runs, |r| &r.report.nodes.by_zone),
    ));
    out.push_str(&block(
        "Nodes by NodePool (launched or present at the start)",
        &counts("node-pools", "NODEPOOL", runs, |r| {
            &r.report.nodes.by_node_pool
        }),
    ));
    out.push_str(&block(
        "Disruptions (nodes)",
        &counts("disruptions", "REASON", runs, |r| &r.report.disruptions),
    ));
    out.push_str(&block(
        "Controller activity",
        &figures("activity", runs, activity_rows),
    ));
    for (i, run) in runs.iter().enumerate() {
        let never = &run.report.pods.never_scheduled;
        if never.is_empty() {
            continue;
        }
        let mut t = HtmlTable::new(
            format!("never-scheduled-{i}"),
            vec!["POD".into(), "WAITED".into(), "REASON".into()],
            vec![false, true, false],
        );
        for u in never {
            t.rows.push(vec![
                u.pod.clone(),
                format!("{:.0}s", u.pending_seconds),
                u.reason.clone(),
            ]);
        }
        let title = format!("Pods never scheduled — {}", run.label);
        out.push_str(&block(&title, &t.render()));
    }
    if runs.iter().any(|r| !r.report.ignored_kinds.is_empty()) {
        out.push_str(&block(
            "Not simulated (manifest kinds)",
            &counts("not-simulated", "KIND", runs, |r| &r.report.ignored_kinds),
        ));
    }
    out
}

/// Named figures (`rows` of each run's report), one column per run.
fn figures(
    id: &'static str,
    runs: &[Run],
    rows: fn(&Report) -> Vec<(&'static str, String)>,
) -> String {
    let mut t = per_run(id, "", runs);
    let columns: Vec<Vec<(&str, String)>> = runs.iter().map(|r| rows(r.report)).collect();
    for (i, (name, _)) in columns[0].iter().enumerate() {
        let mut row = vec![(*name).to_owned()];
        row.extend(columns.iter().map(|c| c[i].1.clone()));
        t.rows.push(row);
    }
    t.render()
}

/// Counts by key, one column per run; `none` when no run has any.
fn counts<'a>(
    id: &'static str,
    key: &str,
    runs: &[Run<'a>],
    of: impl Fn(&Run<'a>) -> &'a BTreeMap<String, usize>,
) -> String {
    let keys: BTreeSet<&String> = runs.iter().flat_map(|r| of(r).keys()).collect();
    if keys.is_empty() {
        return r#"<p class="none">none</p>"#.to_owned();
    }
    let mut t = per_run(id, key, runs);
    for k in keys {
        let mut row = vec![k.clone()];
        row.extend(
            runs.iter()
                .map(|r| of(r).get(k).copied().unwrap_or(0).to_string()),
        );
        t.rows.push(row);
    }
    t.render()
}

/// Controller activity, named, as [`figures`] wants it.
fn activity_rows(r: &Report) -> Vec<(&'static str, String)> {
    let a = &r.activity;
    vec![
        ("pods created", r.pods.created.to_string()),
        ("pods completed (Jobs)", r.pods.completed.to_string()),
        ("provisioning solves", a.provisioning_solves.to_string()),
        ("nodeclaims created", a.node_claims_created.to_string()),
        ("launch failures", a.launch_failures.to_string()),
        ("disruption passes", a.disruption_passes.to_string()),
        ("commands invalidated", a.invalidated_commands.to_string()),
        (
            "most nodes disrupting at once",
            a.peak_disrupting.to_string(),
        ),
        ("longest drain", format!("{:.0}s", a.longest_drain_seconds)),
    ]
}
