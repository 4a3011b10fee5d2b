//! `karpenter convert` as a user runs it, on manifests from Karpenter's docs, and `plan` and
//! `simulate` pointing at it for older API versions.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn fixture(name: &str) -> String {
    format!("convert/tests/fixtures/{name}")
}

fn karpenter(args: &[&str]) -> Output {
    karpenter_with_stdin(args, "")
}

fn karpenter_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run karpenter");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `(apiVersion, kind, name)` of each document of `yaml`.
fn documents(yaml: &str) -> Vec<(String, String, String)> {
    karpenter_cluster::manifests::parse_str(Path::new("out.yaml"), yaml)
        .unwrap()
        .iter()
        .map(|d| {
            (
                d.api_version().unwrap_or_default().to_owned(),
                d.kind().unwrap_or_default().to_owned(),
                d.name().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn doc(api: &str, kind: &str, name: &str) -> (String, String, String) {
    (api.into(), kind.into(), name.into())
}

#[test]
fn converts_the_v0_32_getting_started_manifests_to_v1() {
    let out = karpenter(&["convert", &fixture("v0.32-getting-started.yaml")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        documents(&stdout(&out)),
        [
            doc("karpenter.sh/v1", "NodePool", "default"),
            doc("karpenter.k8s.aws/v1", "EC2NodeClass", "default"),
        ]
    );
    let report = stderr(&out);
    assert!(
        report.contains(
            "info    convert/tests/fixtures/v0.32-getting-started.yaml (document 1, NodePool \
             default): spec.disruption.consolidationPolicy: WhenUnderutilized is renamed \
             WhenEmptyOrUnderutilized"
        ),
        "{report}"
    );
    assert!(
        report.ends_with("2 object(s) written; 4 info, 1 warning(s), 0 lossy, 0 error(s)\n"),
        "{report}"
    );
}

#[test]
fn reads_standard_input_and_directories() {
    let text =
        std::fs::read_to_string(repo_root().join(fixture("v0.31-getting-started.yaml"))).unwrap();
    let out = karpenter_with_stdin(&["convert", "-"], &text);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        documents(&stdout(&out)),
        [
            doc("karpenter.sh/v1", "NodePool", "default"),
            doc("karpenter.k8s.aws/v1", "EC2NodeClass", "default"),
        ]
    );
    assert!(stderr(&out).contains("stdin (document 2, AWSNodeTemplate default)"));

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), &text).unwrap();
    std::fs::copy(
        repo_root().join("examples/inflate/workload.yaml"),
        dir.path().join("b.yaml"),
    )
    .unwrap();
    let out = karpenter(&["convert", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Objects that are not Karpenter's pass through.
    assert_eq!(
        documents(&stdout(&out)),
        [
            doc("karpenter.sh/v1", "NodePool", "default"),
            doc("karpenter.k8s.aws/v1", "EC2NodeClass", "default"),
            doc("apps/v1", "Deployment", "inflate"),
        ]
    );
}

#[test]
fn ignore_defaults_leaves_the_webhook_requirements_out() {
    let with = karpenter(&["convert", &fixture("v0.31-getting-started.yaml")]);
    let without = karpenter(&[
        "convert",
        "--ignore-defaults",
        &fixture("v0.31-getting-started.yaml"),
    ]);
    assert!(with.status.success() && without.status.success());
    assert!(stdout(&with).contains("kubernetes.io/os"));
    assert!(!stdout(&without).contains("kubernetes.io/os"));
}

#[test]
fn a_lossy_conversion_prints_nothing_unless_allowed() {
    let file = fixture("v0.37-nodepool-reference.yaml");
    let out = karpenter(&["convert", &file]);
    assert!(!out.status.success());
    assert_eq!(stdout(&out), "");
    let report = stderr(&out);
    assert!(
        report.contains("lossy   convert/tests/fixtures/v0.37-nodepool-reference.yaml (document 1, NodePool default): spec.template.spec.kubelet: "),
        "{report}"
    );
    assert!(report.contains("rerun with --allow-lossy"), "{report}");

    let out = karpenter(&["convert", "--allow-lossy", &file]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        documents(&stdout(&out)),
        [doc("karpenter.sh/v1", "NodePool", "default")]
    );
    assert!(
        stderr(&out).contains("1 object(s) written; 2 info, 0 warning(s), 1 lossy, 0 error(s)")
    );
}

#[test]
fn invalid_input_fails_even_when_lossy_output_is_allowed() {
    // The v0.31 reference Provisioner sets consolidation and ttlSecondsAfterEmpty together.
    let out = karpenter(&[
        "convert",
        "--allow-lossy",
        &fixture("v0.31-provisioner-reference.yaml"),
    ]);
    assert!(!out.status.success());
    assert!(stdout(&out).contains("kind: NodePool"));
    let report = stderr(&out);
    assert!(report.contains("error   "), "{report}");
    assert!(report.contains("spec.ttlSecondsAfterEmpty"), "{report}");
    assert!(report.contains("error(s) in the input"), "{report}");
}

#[test]
fn converted_manifests_are_planned() {
    let converted = karpenter(&["convert", &fixture("v0.32-getting-started.yaml")]);
    assert!(converted.status.success(), "{}", stderr(&converted));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("karpenter.yaml"), stdout(&converted)).unwrap();
    std::fs::copy(
        repo_root().join("examples/inflate/workload.yaml"),
        dir.path().join("workload.yaml"),
    )
    .unwrap();
    let out = karpenter(&["plan", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("10 pod(s) placed, 0 unschedulable"), "{text}");
    // The pool keeps its spot requirement.
    assert!(text.contains(" spot "), "{text}");
}

#[test]
fn plan_and_simulate_point_older_apis_at_karpenter_convert() {
    let out = karpenter(&["plan", &fixture("v0.32-getting-started.yaml")]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "(document 1, NodePool default): field apiVersion: NodePool must be karpenter.sh/v1, \
             found \"karpenter.sh/v1beta1\": `karpenter convert` turns it into a karpenter.sh/v1 \
             NodePool"
        ),
        "{}",
        stderr(&out)
    );
    let out = karpenter(&["plan", &fixture("v0.31-getting-started.yaml")]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "Provisioner (karpenter.sh/v1alpha5) is an older Karpenter API that karpenter-rs \
             does not read: `karpenter convert`"
        ),
        "{}",
        stderr(&out)
    );

    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(
        &scenario,
        format!(
            "apiVersion: karpenter-rs/v1alpha1\nkind: Scenario\nmetadata: {{name: old}}\n\
             spec:\n  duration: 1m\n  manifests:\n    - file: {}\n",
            repo_root()
                .join(fixture("v1beta1-nodeclaim.yaml"))
                .display()
        ),
    )
    .unwrap();
    let out = karpenter(&["simulate", scenario.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "NodeClaim must be karpenter.sh/v1, found \"karpenter.sh/v1beta1\": `karpenter \
             convert` turns it into a karpenter.sh/v1 NodeClaim"
        ),
        "{}",
        stderr(&out)
    );
}
