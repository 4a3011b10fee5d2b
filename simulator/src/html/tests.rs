use super::*;
use crate::metrics::{TypeRow, Unscheduled};

/// A 20-minute run in 5-second samples (241) whose names try to break out of the page.
fn report(optimizer: bool, nodes: usize) -> Report {
    let hostile = r#"<script>alert("x")</script>"#;
    let len = 241;
    let mut timeline = Timeline {
        interval_seconds: 5.0,
        at_seconds: (0..len).map(|k| k as f64 * 5.0).collect(),
        cost_per_hour: (0..len)
            .map(|k| if k > 10 { 0.25 * nodes as f64 } else { 0.0 })
            .collect(),
        nodes: (0..len).map(|k| if k > 10 { nodes } else { 0 }).collect(),
        pending_pods: vec![0; len],
        pending_pods_peak: (0..len)
            .map(|k| if (2..=10).contains(&k) { 4 } else { 0 })
            .collect(),
        ..Timeline::default()
    };
    let on = |k: usize| if k > 10 { nodes } else { 0 };
    timeline
        .nodes_by_instance_type
        .insert(format!("m5.large{hostile}"), (0..len).map(on).collect());
    timeline
        .nodes_by_capacity_type
        .insert("spot".into(), (0..len).map(on).collect());
    timeline
        .nodes_by_zone
        .insert(r#"zone"onmouseover="x"#.into(), (0..len).map(on).collect());
    let mut disrupted = vec![0; len];
    disrupted[200] = 1;
    timeline.disruptions.insert("Empty".into(), disrupted);
    Report {
        scenario: format!("name{hostile}"),
        description: "a & b 'quoted' </p>".into(),
        duration_seconds: 1200.0,
        optimizer,
        timeline,
        nodes: crate::metrics::NodesReport {
            by_type: vec![TypeRow {
                instance_type: format!("m5.large{hostile}"),
                capacity_type: "spot".into(),
                launched: nodes,
                ..TypeRow::default()
            }],
            ..Default::default()
        },
        pods: crate::metrics::PodsReport {
            never_scheduled: vec![Unscheduled {
                pod: "default/web-0</td>".into(),
                pending_seconds: 60.0,
                reason: "no NodePool <fits>".into(),
            }],
            ..Default::default()
        },
        disruptions: [("Empty".to_owned(), 1)].into(),
        cost: crate::metrics::CostReport {
            // 0.25 $/h a node over the last 19 of 20 minutes.
            total: 0.25 * nodes as f64 * 19.0 / 60.0,
            ..Default::default()
        },
        ..Report::default()
    }
}

#[test]
fn every_scenario_string_is_escaped() {
    let page = render_html(&report(true, 2));
    assert!(
        !page.contains("<script>alert"),
        "raw markup from the scenario"
    );
    assert!(!page.contains(r#"zone"onmouseover"#));
    assert!(!page.contains("</td>\""));
    assert!(page.contains("name&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"));
    assert!(page.contains(r#"data-series="zone&quot;onmouseover=&quot;x""#));
    assert!(page.contains("a &amp; b &#39;quoted&#39; &lt;/p&gt;"));
    assert!(page.contains("default/web-0&lt;/td&gt;"));
    assert!(page.contains("no NodePool &lt;fits&gt;"));
    // The hover data names the instance type too, as JSON that cannot end its script.
    assert!(page.contains(r#"m5.large\u003cscript\u003ealert(\"x\")\u003c/script\u003e"#));
    // Only the page's own two scripts.
    assert_eq!(page.matches("<script").count(), 2);
    assert_eq!(page.matches("</script>").count(), 2);
}

#[test]
fn the_page_fetches_nothing() {
    let page = render_html_comparison(&report(true, 2), &report(false, 3));
    assert!(page.contains(&format!(
        r#"<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">"#
    )));
    for needle in ["http:", "https:", "url(", "@import", "//"] {
        let outside_script = page.replace(SCRIPT, "");
        assert!(!outside_script.contains(needle), "{needle} in the page");
    }
    for attribute in ["src=\"", "href=\""] {
        for (i, _) in page.match_indices(attribute) {
            let value = &page[i + attribute.len()..];
            assert!(value.starts_with("data:"), "{attribute}{}", &value[..40]);
        }
    }
}

/// The `<figure>` of chart `id`, up to its end.
fn figure_of<'a>(page: &'a str, id: &str) -> &'a str {
    let head = format!(r#"class="chart" id="chart-{id}""#);
    let figure = page
        .split("<figure ")
        .find(|f| f.starts_with(&head))
        .unwrap_or_else(|| panic!("chart {id}"));
    figure.split("</figure>").next().unwrap_or_default()
}

/// The series elements of chart `id`: `(data-series, data-run)` of each.
fn series_of(page: &str, id: &str) -> Vec<(String, String)> {
    let figure = figure_of(page, id);
    let attribute = |rest: &str, name: &str| -> String {
        let from = rest.find(&format!(r#"{name}=""#)).unwrap() + name.len() + 2;
        rest[from..from + rest[from..].find('"').unwrap()].to_owned()
    };
    figure
        .match_indices(r#"class="series "#)
        .map(|(i, _)| {
            let rest = &figure[i..];
            (attribute(rest, "data-series"), attribute(rest, "data-run"))
        })
        .collect()
}

#[test]
fn a_single_run_stacks_its_categories() {
    let page = render_html(&report(true, 2));
    assert_eq!(
        series_of(&page, "cost"),
        [("karpenter-rs".to_owned(), "karpenter-rs".to_owned())]
    );
    assert!(page.contains(r#"<path class="series area" data-series="spot""#));
    assert_eq!(series_of(&page, "disruptions").len(), 1, "one bar");
    let greedy = render_html(&report(false, 2));
    assert!(greedy.contains("run: greedy first fit"));
    assert!(!greedy.contains("karpenter-rs saves"));
}

#[test]
fn a_comparison_draws_both_runs_on_every_chart() {
    let (optimized, greedy) = (report(true, 2), report(false, 3));
    let page = render_html_comparison(&optimized, &greedy);
    for id in CHARTS {
        let runs: Vec<String> = series_of(&page, id).into_iter().map(|(_, r)| r).collect();
        for label in ["karpenter-rs", "greedy first fit"] {
            assert!(
                runs.iter().any(|r| r == label),
                "{id}: no {label} series in {runs:?}"
            );
        }
    }
    // Same axes: the greedy run's 3 nodes set the top of the node charts for both runs.
    for id in ["instance-types", "capacity-types", "zones"] {
        let figure = figure_of(&page, id);
        let top = figure.rfind(r#"text-anchor="end">"#).unwrap();
        assert!(
            figure[top..].starts_with(r#"text-anchor="end">3</text>"#),
            "{id}"
        );
    }
    assert!(page.contains(
        r#"<path class="series line dashed" data-series="spot" data-run="greedy first fit""#
    ));
    assert!(page.contains(r#"class="series bar hatched""#));
    // The summary has a column per run, and each run its instance-type table.
    assert!(
        page.contains(r#"<th class="num">karpenter-rs</th><th class="num">greedy first fit</th>"#)
    );
    assert!(
        page.contains(r#"id="table-instance-types-0""#)
            && page.contains(r#"id="table-instance-types-1""#)
    );
    // 2 nodes cost a third less than 3.
    assert!(
        page.contains("karpenter-rs saves 33.3% of the greedy cost"),
        "no saving line"
    );
    assert_eq!(
        page,
        render_html_comparison(&optimized, &greedy),
        "same page twice"
    );
}

#[test]
fn many_categories_fold_into_other() {
    let mut r = report(true, 1);
    let len = r.timeline.at_seconds.len();
    r.timeline.nodes_by_instance_type.clear();
    for i in 0..12 {
        r.timeline
            .nodes_by_instance_type
            .insert(format!("t{i:02}"), vec![i; len]);
    }
    let page = render_html(&r);
    let names: Vec<String> = series_of(&page, "instance-types")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names.len(), MOST_CATEGORIES + 1);
    // The largest first; the 4 smallest (t00 to t03) summed.
    assert_eq!(names[0], "t11");
    assert_eq!(names[MOST_CATEGORIES], "other (4 more)");
}

#[test]
fn the_page_draws_its_charts_in_order() {
    let r = report(true, 1);
    let runs = [Run {
        label: "karpenter-rs",
        report: &r,
    }];
    let drawn = charts(&runs, &frame(&runs));
    let ids: Vec<&str> = drawn.iter().map(|c| c.id).collect();
    assert_eq!(ids, CHARTS);
}

#[test]
fn spans_read_as_words() {
    assert_eq!(span_words(120_000), "2-minute");
    assert_eq!(span_words(5_000), "5-second");
    assert_eq!(span_words(3_600_000), "1-hour");
    assert_eq!(span_words(2 * 86_400_000), "2-day");
}

/// [`report`] with a fleet of `types` instance types, the dearest first, each with its own
/// series on the instance-type chart.
fn fleet(optimizer: bool, types: usize) -> Report {
    let mut r = report(optimizer, 2);
    let len = r.timeline.at_seconds.len();
    r.timeline.nodes_by_instance_type.clear();
    r.nodes.by_type = (0..types)
        .map(|i| {
            let name = format!("type-{i:02}");
            r.timeline
                .nodes_by_instance_type
                .insert(name.clone(), vec![1; len]);
            TypeRow {
                instance_type: name,
                capacity_type: "on-demand".into(),
                launched: 1,
                at_end: 1,
                node_hours: 1.0,
                // Types 0 to 3 carry 4 × 20 = 80 % of 100 $; the rest share 20 $.
                cost: if i < 4 {
                    20.0
                } else {
                    20.0 / (types - 4) as f64
                },
            }
        })
        .collect();
    r
}

/// The hourly bound of [`report`]'s 20 minutes: 0.4 $/h.
fn with_bound(mut r: Report) -> Report {
    r.lower_bound = Some(crate::lower_bound::LowerBoundReport {
        total: 0.4 / 3.0,
        average_per_hour: 0.4,
        hourly: vec![crate::lower_bound::HourBound {
            start_seconds: 0.0,
            end_seconds: 1200.0,
            per_hour: 0.4,
        }],
        plans: 2,
        ..Default::default()
    });
    r
}

#[test]
fn the_charts_come_before_every_table() {
    let page = render_html_comparison(&fleet(true, 50), &fleet(false, 50));
    let first_chart = page
        .find(r#"<figure class="chart" id="chart-cost""#)
        .unwrap();
    let last_chart = page.rfind("</figure>").unwrap();
    let first_table = page.find("<table").unwrap();
    assert!(first_chart < last_chart && last_chart < first_table);
    // Only the header (title, description, what ran, the saving) is above the cost chart.
    let header_end = page.find("</header>").unwrap();
    assert!(header_end < first_chart);
    assert!(!page[..first_chart].contains("<table"));
}

#[test]
fn a_fleet_of_50_types_shows_the_rows_that_carry_most_of_the_cost() {
    let page = render_html_comparison(&fleet(true, 50), &fleet(false, 50));
    for run in 0..2 {
        let id = format!(r#"<table id="table-instance-types-{run}">"#);
        let table = &page[page.find(&id).unwrap()..];
        let (shown, rest) = table.split_once("</table>").unwrap();
        // The four dearest carry 80 %: the minimum of five rows is shown, dearest first.
        assert_eq!(shown.matches("<tr><td>").count(), 5, "{shown}");
        assert!(shown.find("type-00").unwrap() < shown.find("type-03").unwrap());
        assert!(shown.contains("type-04") && !shown.contains("type-05"));
        // The other 45 are one click away, no script needed.
        let more = format!(r#"<details class="more" id="more-instance-types-{run}"><summary>"#);
        assert!(rest.starts_with(&more), "{}", &rest[..200]);
        let folded = &rest[..rest.find("</details>").unwrap()];
        assert!(folded.contains(
            "<summary>45 more instance type row(s): $19.5652, 19.6% of the cost</summary>"
        ));
        assert_eq!(folded.matches("<tr><td>").count(), 45);
        assert!(folded.contains("type-05") && folded.contains("type-49"));
    }
    // The chart names the 8 biggest and sums the rest.
    assert!(page.contains(r#"data-series="other (42 more)""#));
}

#[test]
fn the_bound_is_drawn_on_the_cost_chart_only_when_it_was_computed() {
    let dotted =
        r#"<path class="series line dotted" data-series="hourly lower bound" data-run="reference""#;
    for page in [
        render_html(&with_bound(report(true, 2))),
        render_html_comparison(&with_bound(report(true, 2)), &report(false, 3)),
    ] {
        let cost = figure_of(&page, "cost");
        assert!(cost.contains(dotted), "{cost}");
        assert!(cost.contains("</svg>hourly lower bound</li>"));
        assert!(cost.contains("the dotted line is each hour&#39;s lower bound"));
        // The line is at 0.4 $/h, drawn to the same scale as the runs.
        assert!(
            series_of(&page, "cost")
                .iter()
                .any(|(s, r)| s == "hourly lower bound" && r == "reference")
        );
        assert!(page.contains("hourly lower bound: $0.4000/h on average"));
        // No other chart has it.
        for id in CHARTS.iter().filter(|id| **id != "cost") {
            assert!(!figure_of(&page, id).contains("lower bound"), "{id}");
        }
    }
    for page in [
        render_html(&report(true, 2)),
        render_html_comparison(&report(true, 2), &report(false, 3)),
    ] {
        assert!(
            !page.contains("lower bound"),
            "a bound that was not computed"
        );
        assert!(!page.contains("series line dotted"));
    }
}
