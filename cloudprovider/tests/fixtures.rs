//! Published NodePool manifests parse unchanged, get upstream's defaults and validate; invalid
//! manifests are rejected at the expected field path.

use karpenter_cloudprovider::NodePool;
use karpenter_cloudprovider::v1::{ConsolidationPolicy, DisruptionReason, NodeSelectorOperator};
use std::path::{Path, PathBuf};

fn dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(sub)
}

fn load(path: &Path) -> (String, NodePool) {
    let text = std::fs::read_to_string(path).expect("fixture readable");
    let pool: NodePool = serde_saphyr::from_str(&text)
        .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
    (text, pool)
}

fn yaml_files(sub: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir(sub))
        .expect("fixture dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn published_manifests_parse_and_validate() {
    let files = yaml_files("valid");
    assert!(
        files.len() >= 8,
        "expected the docs fixtures, found {}",
        files.len()
    );
    for path in files {
        let (_, pool) = load(&path);
        if let Err(e) = pool.validate() {
            panic!("{} should be valid: {e}", path.display());
        }
        // Round trip: what we write back parses to the same object.
        let json = serde_json::to_value(&pool).expect("serialises");
        let again: NodePool = serde_json::from_value(json).expect("re-parses");
        assert_eq!(again.spec, pool.spec, "{}", path.display());
    }
}

#[test]
fn defaults_are_applied_like_the_api_server() {
    let (_, pool) = load(&dir("valid").join("gpu.yaml"));
    let d = &pool.spec.disruption;
    assert_eq!(d.consolidation_policy, ConsolidationPolicy::WhenEmpty);
    assert_eq!(d.consolidate_after.as_str(), "1m");
    assert_eq!(d.budgets.len(), 1);
    assert_eq!(d.budgets[0].nodes, "10%");
    assert_eq!(pool.spec.template.spec.expire_after.as_str(), "720h");
    assert_eq!(pool.weight(), 0);

    let (_, hyperpod) = load(&dir("valid").join("hyperpod-never.yaml"));
    assert!(hyperpod.spec.template.spec.expire_after.is_never());
    assert_eq!(hyperpod.spec.disruption.consolidate_after.as_str(), "0s");
    assert_eq!(
        hyperpod.spec.disruption.consolidation_policy,
        ConsolidationPolicy::WhenEmptyOrUnderutilized
    );
}

#[test]
fn fields_are_read_as_written() {
    let (_, budgets) = load(&dir("valid").join("budgets.yaml"));
    let b = &budgets.spec.disruption.budgets;
    assert_eq!(b.len(), 3);
    assert_eq!(
        b[0].reasons,
        vec![DisruptionReason::Empty, DisruptionReason::Drifted]
    );
    assert_eq!(b[2].schedule.as_deref(), Some("@daily"));
    assert_eq!(b[2].duration.as_ref().map(|d| d.as_str()), Some("10m"));

    let (_, repair) = load(&dir("valid").join("v1-15-repair-budget.yaml"));
    let d = &repair.spec.disruption;
    assert_eq!(d.consolidate_after.as_str(), "0s");
    assert_eq!(d.budgets[0].reasons, vec![DisruptionReason::Unhealthy]);

    let (_, weighted) = load(&dir("valid").join("weighted.yaml"));
    assert_eq!(weighted.weight(), 50);
    assert_eq!(weighted.spec.limits["cpu"].0, "1000");
    assert_eq!(weighted.spec.limits["memory"].0, "1000Gi");
    assert_eq!(
        weighted.spec.template.metadata.labels["billing-team"],
        "my-team"
    );
    assert_eq!(
        weighted
            .spec
            .template
            .spec
            .termination_grace_period
            .as_ref()
            .map(|d| d.as_str()),
        Some("48h")
    );
    assert!(weighted.spec.template.spec.expire_after.is_never());
    assert_eq!(
        weighted.spec.template.spec.startup_taints[0].key,
        "example.com/another-taint"
    );

    let (_, default) = load(&dir("valid").join("default.yaml"));
    assert_eq!(
        default.spec.limits["cpu"].0, "1000",
        "an integer limit is kept as a quantity"
    );

    let (_, mv) = load(&dir("valid").join("min-values-multiple-keys.yaml"));
    let r = &mv.spec.template.spec.requirements;
    assert_eq!(r[3].min_values, Some(2));
    assert_eq!(r[4].operator, NodeSelectorOperator::Exists);
    assert_eq!(r[4].min_values, Some(5));
    assert_eq!(r[6].operator, NodeSelectorOperator::Gt);
}

#[test]
fn invalid_manifests_are_rejected_at_the_field() {
    let files = yaml_files("invalid");
    assert!(files.len() >= 15);
    for path in files {
        let (text, pool) = load(&path);
        let expected = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("# expect: ")
                    .or_else(|| l.strip_prefix("# expect-runtime: "))
            })
            .unwrap_or_else(|| panic!("{} lacks '# expect:'", path.display()))
            .trim();
        match pool.validate() {
            Ok(()) => panic!("{} should be invalid", path.display()),
            Err(e) => assert!(
                e.has_path(expected),
                "{}: expected an error at {expected}, got: {e}",
                path.display()
            ),
        }
    }
}

#[test]
fn enum_values_outside_the_schema_do_not_parse() {
    for (field, bad) in [
        ("operator: In", "operator: Within"),
        ("effect: NoSchedule", "effect: Sometimes"),
        (
            "consolidationPolicy: WhenEmpty",
            "consolidationPolicy: Never",
        ),
        ("1m", "1d"),
    ] {
        let text = std::fs::read_to_string(dir("valid").join("gpu.yaml")).unwrap();
        assert!(text.contains(field), "{field}");
        let broken = text.replacen(field, bad, 1);
        assert!(
            serde_saphyr::from_str::<NodePool>(&broken).is_err(),
            "{bad} should not parse"
        );
    }
}
