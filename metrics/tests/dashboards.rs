//! The dashboards' list (`dashboards/karpenter-v1.15.txt`) names only what Karpenter v1.15.1
//! itself exports: every series is a family of `upstream/karpenter-v1.15.1.txt` (or its
//! histogram's `_bucket`/`_count`, or its summary's quantiles) and every label one of that
//! family's. Together with `upstream_parity.rs`, which holds our families to those
//! definitions, this keeps the list honest; the end-to-end test checks the live samples.

use std::collections::BTreeMap;

fn upstream() -> BTreeMap<String, (String, Vec<String>)> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("upstream/karpenter-v1.15.1.txt");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let labels = match cols[2] {
                "-" | "?" => Vec::new(),
                ls => ls.split(',').map(str::to_owned).collect(),
            };
            (cols[0].to_owned(), (cols[1].to_owned(), labels))
        })
        .collect()
}

#[test]
fn every_series_the_dashboards_read_is_a_karpenter_family() {
    let upstream = upstream();
    let wanted = karpenter_metrics::dashboards::wanted();
    assert!(wanted.len() > 20, "{} lines", wanted.len());
    for w in wanted {
        let (family, extra) = if let Some(f) = w.series.strip_suffix("_bucket") {
            (f, Some("le"))
        } else if let Some(f) = w.series.strip_suffix("_count") {
            (f, None)
        } else {
            (w.series.as_str(), Some("quantile"))
        };
        let (kind, labels) = upstream
            .get(family)
            .or_else(|| upstream.get(&w.series))
            .unwrap_or_else(|| panic!("{w}: no such Karpenter family"));
        for (name, _) in &w.labels {
            let by_type = match name.as_str() {
                "le" => kind == "histogram" && extra == Some("le"),
                "quantile" => kind == "summary",
                _ => false,
            };
            assert!(
                by_type || labels.contains(name),
                "{w}: {family} ({kind}) has no label {name}; its labels: {labels:?}"
            );
        }
    }
}
