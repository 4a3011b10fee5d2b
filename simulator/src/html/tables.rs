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
        self.table(&self.id, &self.rows)
    }

    /// The first `shown` rows, then the others in a `<details>` element (open with a click,
    /// no script needed) whose summary line is `more`; all rows when `shown` leaves none.
    fn render_folded(&self, shown: usize, more: &str) -> String {
        if shown >= self.rows.len() {
            return self.render();
        }
        let (head, rest) = self.rows.split_at(shown);
        format!(
            r#"{}<details class="more" id="more-{}"><summary>{}</summary>{}</details>"#,
            self.table(&self.id, head),
            self.id,
            text(more),
            self.table(&format!("{}-more", self.id), rest)
        )
    }

    fn table(&self, id: &str, rows: &[Vec<String>]) -> String {
        let class = |i: usize| {
            if self.numeric.get(i).copied().unwrap_or(false) {
                r#" class="num""#
            } else {
                ""
            }
        };
        let mut out = format!(r#"<table id="table-{id}"><thead><tr>"#);
        for (i, h) in self.header.iter().enumerate() {
            let _ = write!(out, "<th{}>{}</th>", class(i), text(h));
        }
        out.push_str("</tr></thead><tbody>");
        for row in rows {
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

/// Tables of at most this many rows are shown whole.
const FOLD_ABOVE: usize = 12;
/// A folded table shows the rows that carry this share of its total…
const SHOWN_SHARE: f64 = 0.8;
/// …but at least this many…
const MIN_SHOWN: usize = 5;
/// …and at most this many.
const MAX_SHOWN: usize = 10;

/// How many of `weights` (largest first) a table shows before folding the rest: all of a
/// short table, else the fewest that reach [`SHOWN_SHARE`] of the total, within
/// [`MIN_SHOWN`] and [`MAX_SHOWN`].
fn shown_rows(weights: &[f64]) -> usize {
    if weights.len() <= FOLD_ABOVE {
        return weights.len();
    }
    let total: f64 = weights.iter().sum();
    let mut sum = 0.0;
    let mut n = 0;
    for w in weights {
        if n >= MIN_SHOWN && sum >= SHOWN_SHARE * total {
            break;
        }
        sum += w;
        n += 1;
    }
    n.clamp(MIN_SHOWN, MAX_SHOWN)
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

/// The figures runs are compared on (one column per run), then each run's instance types,
/// dearest first, folded to the types that carry most of the cost.
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
        let mut by_cost: Vec<&crate::metrics::TypeRow> = run.report.nodes.by_type.iter().collect();
        by_cost.sort_by(|a, b| {
            b.cost
                .total_cmp(&a.cost)
                .then_with(|| a.instance_type.cmp(&b.instance_type))
                .then_with(|| a.capacity_type.cmp(&b.capacity_type))
        });
        t.rows = by_cost.iter().map(|r| type_cells(r)).collect();
        let costs: Vec<f64> = by_cost.iter().map(|r| r.cost).collect();
        let shown = shown_rows(&costs);
        let rest: f64 = costs[shown..].iter().sum();
        let total: f64 = costs.iter().sum();
        let more = format!(
            "{} more instance type row(s): ${rest:.4}, {:.1}% of the cost",
            costs.len() - shown,
            if total > 0.0 {
                rest / total * 100.0
            } else {
                0.0
            }
        );
        let title = if runs.len() > 1 {
            format!("Instance types — {}", run.label)
        } else {
            "Instance types".to_owned()
        };
        out.push_str(&block(&title, &t.render_folded(shown, &more)));
    }
    out
}

/// Everything below the summary.
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
        let shown = if never.len() <= FOLD_ABOVE {
            never.len()
        } else {
            MAX_SHOWN
        };
        let more = format!("{} more pod(s) never scheduled", never.len() - shown);
        out.push_str(&block(&title, &t.render_folded(shown, &more)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_tables_stay_whole_and_long_ones_show_what_carries_most() {
        assert_eq!(shown_rows(&[5.0; 12]), 12);
        // 50 rows, the first three carry 90 %: the minimum of five is shown.
        let mut weights = vec![30.0, 30.0, 30.0];
        weights.extend(std::iter::repeat_n(10.0 / 47.0, 47));
        assert_eq!(shown_rows(&weights), MIN_SHOWN);
        // 50 equal rows: 80 % would take 40, the maximum of ten is shown.
        assert_eq!(shown_rows(&[1.0; 50]), MAX_SHOWN);
        // In between: 7 rows reach 80 %.
        let mut weights = vec![12.0; 7];
        weights.extend(std::iter::repeat_n(16.0 / 13.0, 13));
        assert_eq!(shown_rows(&weights), 7);
    }

    #[test]
    fn folded_rows_are_one_click_away_in_details() {
        let mut t = HtmlTable::new("t", vec!["A".into()], vec![false]);
        t.rows = (0..20).map(|i| vec![format!("row<{i}>")]).collect();
        let html = t.render_folded(5, "15 more & then some");
        let (head, rest) = html.split_once("<details").expect("folded");
        assert_eq!(head.matches("<tr><td>").count(), 5);
        assert_eq!(rest.matches("<tr><td>").count(), 15);
        assert!(
            rest.contains("<summary>15 more &amp; then some</summary>"),
            "{rest}"
        );
        assert!(html.contains(r#"<table id="table-t-more">"#));
        assert!(html.contains("row&lt;19&gt;"));
        assert_eq!(t.render_folded(20, "none"), t.render());
    }
}
