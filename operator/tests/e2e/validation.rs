//! Differential validation: every NodePool, NodeClaim and EC2NodeClass fixture in the
//! repository gets the same admission verdict from the real API server (our CRDs' schemas and
//! CEL rules) as from our Rust validation, and both name the rejected field.
//!
//! Fixtures say what they expect in their first line:
//! - `# expect: PATH`: rejected at admission; the API server names PATH or the ancestor its
//!   CEL rule sits on (`spec.limits.cpu` for `spec.limits[cpu]`, `spec.requirements` for a
//!   list-level rule), and Rust names PATH exactly.
//! - `# expect-runtime: PATH`: admitted, as upstream's CRD admits it, and rejected by the
//!   checks upstream runs after admission (`RuntimeValidate`: duplicate taints, well-known
//!   label values, cron syntax), which our validation also runs and the controller reports as
//!   `ValidationSucceeded=False`.
//! - no line: valid everywhere.

use crate::harness;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use std::path::{Path, PathBuf};

#[derive(Debug, PartialEq)]
enum Expect {
    Valid,
    Admission(String),
    Runtime(String),
}

fn expectation(text: &str) -> Expect {
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("# expect: ") {
            return Expect::Admission(p.trim().to_owned());
        }
        if let Some(p) = line.strip_prefix("# expect-runtime: ") {
            return Expect::Runtime(p.trim().to_owned());
        }
    }
    Expect::Valid
}

fn fixtures(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    out.sort();
    out
}

/// Our verdict: `Ok` or the field paths our validation names.
fn rust_verdict(kind: &str, text: &str) -> Result<(), Vec<String>> {
    let paths = |e: karpenter_cloudprovider::validation::ValidationErrors| {
        e.errors.into_iter().map(|e| e.path).collect::<Vec<_>>()
    };
    match kind {
        "NodePool" => serde_saphyr::from_str::<karpenter_cloudprovider::NodePool>(text)
            .map_err(|e| vec![format!("parse: {e}")])?
            .validate()
            .map_err(paths),
        "NodeClaim" => serde_saphyr::from_str::<karpenter_cloudprovider::NodeClaim>(text)
            .map_err(|e| vec![format!("parse: {e}")])?
            .validate()
            .map_err(paths),
        #[cfg(feature = "aws")]
        "EC2NodeClass" => karpenter_cloudprovider_aws::nodeclass::from_yaml(text)
            .map_err(|e| vec![format!("parse: {e}")])?
            .validate()
            .map_err(paths),
        other => panic!("no Rust validation for {other}"),
    }
}

/// The API server's verdict on a dry-run create: `Ok` or the fields its causes name.
async fn api_verdict(client: &kube::Client, doc: serde_json::Value) -> Result<(), Vec<String>> {
    let api_version = doc["apiVersion"].as_str().expect("apiVersion");
    let (group, version) = api_version.split_once('/').expect("group/version");
    let gvk = GroupVersionKind::gvk(group, version, doc["kind"].as_str().expect("kind"));
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .expect("discovery");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let obj: DynamicObject = serde_json::from_value(doc).expect("object");
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match api.create(&params, &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => {
            let fields: Vec<String> = status
                .details
                .map(|d| d.causes.into_iter().map(|c| c.field).collect())
                .unwrap_or_default();
            Err(if fields.is_empty() {
                vec![status.message]
            } else {
                fields
            })
        }
        Err(e) => panic!("dry-run create: {e}"),
    }
}

/// `spec.limits[cpu]` → `spec.limits.cpu` (how the API server writes map keys).
fn api_style(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('[') {
        let close = rest[open..].find(']').map_or(rest.len(), |c| open + c);
        out.push_str(&rest[..open]);
        // Rust quotes map keys that contain dots or slashes; the API server never does.
        let key = rest[open + 1..close].trim_matches('"');
        if key.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&rest[open..=close.min(rest.len() - 1)]);
        } else {
            out.push('.');
            out.push_str(key);
        }
        rest = rest.get(close + 1..).unwrap_or_default();
    }
    out.push_str(rest);
    out
}

/// Whether the API server's `field` is `expected` or an ancestor of it.
fn names(field: &str, expected: &str) -> bool {
    let expected = api_style(expected);
    expected == field
        || expected
            .strip_prefix(field)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

#[tokio::test]
async fn fixtures_get_the_same_verdict_from_the_api_server_and_from_rust() {
    let Some(cluster) = harness::cluster("validation").await else {
        return;
    };
    // The EC2NodeClass CRD comes from the chart.
    let crd = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/karpenter-rs/crds/karpenter.k8s.aws_ec2nodeclasses.yaml");
    harness::apply_crds(&cluster.client, &std::fs::read_to_string(crd).unwrap()).await;
    let mut dirs = vec![
        "cloudprovider/tests/fixtures/valid",
        "cloudprovider/tests/fixtures/invalid",
        "cloudprovider/tests/fixtures/nodeclaims/valid",
        "cloudprovider/tests/fixtures/nodeclaims/invalid",
    ];
    if cfg!(feature = "aws") {
        dirs.extend([
            "cloudprovider-aws/tests/fixtures",
            "cloudprovider-aws/tests/fixtures/invalid",
        ]);
    }
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for dir in dirs {
        for path in fixtures(dir) {
            let text = std::fs::read_to_string(&path).expect("fixture");
            let expect = expectation(&text);
            for doc in harness::documents(&text) {
                let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
                if !matches!(kind.as_str(), "NodePool" | "NodeClaim" | "EC2NodeClass") {
                    continue;
                }
                let doc_text = serde_json::to_string(&doc).expect("json");
                let ours = rust_verdict(&kind, &doc_text);
                let theirs = api_verdict(&cluster.client, doc).await;
                checked += 1;
                let name = format!("{} ({kind})", path.display());
                let ok = match (&expect, &ours, &theirs) {
                    (Expect::Valid, Ok(()), Ok(())) => true,
                    (Expect::Admission(p), Err(o), Err(t)) => {
                        o.iter().any(|f| names(&api_style(p), f)) && t.iter().any(|f| names(f, p))
                    }
                    (Expect::Runtime(p), Err(o), Ok(())) => {
                        o.iter().any(|f| names(&api_style(p), f))
                    }
                    _ => false,
                };
                if !ok {
                    mismatches.push(format!(
                        "{name}: expected {expect:?}; Rust said {ours:?}; the API server said {theirs:?}"
                    ));
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} fixtures checked");
    assert!(
        mismatches.is_empty(),
        "verdicts differ:\n{}",
        mismatches.join("\n")
    );
}

#[test]
fn api_paths_and_ours_are_compared_by_field() {
    assert_eq!(api_style("spec.limits[cpu]"), "spec.limits.cpu");
    assert_eq!(
        api_style("spec.requirements[0].values"),
        "spec.requirements[0].values"
    );
    assert!(names("spec.limits.cpu", "spec.limits[cpu]"));
    assert!(names(
        "spec.template.spec.requirements",
        "spec.template.spec.requirements[1].values"
    ));
    assert!(names("spec", "spec"));
    assert!(!names("spec.weight", "spec.limits[cpu]"));
    assert!(!names("spec.tag", "spec.tags"));
}
