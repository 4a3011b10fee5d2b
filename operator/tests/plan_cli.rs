//! `karpenter plan` and `karpenter crds` as a user runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn karpenter(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("run karpenter")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn plans_the_bundled_inflate_example() {
    let out = karpenter(&["plan", "examples/inflate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("NODE "), "{text}");
    assert!(text.contains("10 pod(s) placed, 0 unschedulable"), "{text}");
    assert!(text.contains("on-demand"), "{text}");
}

#[test]
fn json_output_is_the_plan() {
    let out = karpenter(&["plan", "examples/inflate", "--output", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let claims = plan["newNodeClaims"].as_array().unwrap();
    let pods: usize = claims
        .iter()
        .map(|c| c["pods"].as_array().unwrap().len())
        .sum();
    assert_eq!(pods, 10);
    for claim in claims {
        assert_eq!(claim["nodePool"], "default");
        // Every option respects the pool: on-demand c/m/r of generation > 2.
        for option in claim["instanceTypeOptions"].as_array().unwrap() {
            assert_eq!(option["capacityType"], "on-demand");
            let name = option["name"].as_str().unwrap();
            assert!(name.starts_with(['c', 'm', 'r']), "{name}");
        }
        let reqs = claim["requirements"].as_array().unwrap();
        assert!(reqs.iter().any(|r| r["key"] == "karpenter.sh/capacity-type"
            && r["operator"] == "In"
            && r["values"] == serde_json::json!(["on-demand"])));
    }
    let total = plan["totalPrice"].as_f64().unwrap();
    let sum: f64 = claims.iter().map(|c| c["price"].as_f64().unwrap()).sum();
    assert!((total - sum).abs() < 1e-9);
}

#[test]
fn json_lists_the_options_a_nodeclaim_carries_unless_asked_for_all() {
    let cut = karpenter(&["plan", "examples/inflate", "-o", "json"]);
    assert!(cut.status.success(), "{}", stderr(&cut));
    let all = karpenter(&[
        "plan",
        "examples/inflate",
        "-o",
        "json",
        "--all-instance-types",
    ]);
    assert!(all.status.success(), "{}", stderr(&all));
    let cut: serde_json::Value = serde_json::from_slice(&cut.stdout).unwrap();
    let all: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    let claims = |plan: &serde_json::Value| plan["newNodeClaims"].as_array().unwrap().clone();
    let (cut, all) = (claims(&cut), claims(&all));
    assert_eq!(cut.len(), all.len());
    for (c, a) in cut.iter().zip(&all) {
        let (listed, every) = (
            c["instanceTypeOptions"].as_array().unwrap(),
            a["instanceTypeOptions"].as_array().unwrap(),
        );
        // The inflate pool allows far more than 60 types for these pods.
        assert!(every.len() > 60, "{} options", every.len());
        assert_eq!(listed.as_slice(), &every[..60], "the cheapest 60, in order");
        assert_eq!(c["instanceTypeOptionsTotal"], every.len());
        assert!(a.get("instanceTypeOptionsTotal").is_none());
        assert_eq!(c["price"], a["price"]);
    }
    let table = karpenter(&["plan", "examples/inflate", "--all-instance-types"]);
    assert!(!table.status.success());
    assert!(stderr(&table).contains("add -o json"), "{}", stderr(&table));
}

#[test]
fn unschedulable_pods_are_listed_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo_root().join("examples/inflate/nodepool.yaml"),
        dir.path().join("pool.yaml"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("huge.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: huge, namespace: ml}\nspec:\n  containers:\n  - name: c\n    image: x\n    resources: {requests: {cpu: \"4000\"}}\n",
    )
    .unwrap();
    let out = karpenter(&["plan", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("UNSCHEDULABLE POD"), "{text}");
    assert!(text.contains("ml/huge"), "{text}");
    assert!(text.contains("NodePool \"default\""), "{text}");
    assert!(text.contains("0 pod(s) placed, 1 unschedulable"), "{text}");
}

#[test]
fn bad_manifests_name_file_object_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - name: c\n        image: x\n        resources: {requests: {cpu: lots}}\n",
    )
    .unwrap();
    let pool = repo_root().join("examples/inflate/nodepool.yaml");
    let out = karpenter(&["plan", file.to_str().unwrap(), pool.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("bad.yaml (document 1, Deployment shop/web)"),
        "{err}"
    );
    assert!(
        err.contains("spec.template.spec.containers[0].resources.requests.cpu"),
        "{err}"
    );

    std::fs::write(&file, "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements:\n      - {key: karpenter.sh/capacity-type, operator: In}\n").unwrap();
    let out = karpenter(&["plan", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("NodePool p"), "{err}");
    assert!(err.contains("requirements[0]"), "{err}");
}

#[test]
fn a_plan_needs_a_node_pool() {
    let out = karpenter(&["plan", "examples/inflate/workload.yaml"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no NodePool"), "{}", stderr(&out));
}

#[test]
fn custom_catalogue_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let catalogue = dir.path().join("catalogue.json");
    std::fs::write(
        &catalogue,
        r#"{"region":"us-east-1","instance_types":[{"name":"m5.large","vcpu":2,"memory_mib":8192,"architecture":"amd64","max_network_interfaces":3,"ipv4_per_interface":10,"usage_classes":["on-demand"],"on_demand_price_per_hour_usd":0.096,"zones":["us-east-1a"]}]}"#,
    )
    .unwrap();
    let out = karpenter(&[
        "plan",
        "examples/inflate",
        "--catalogue",
        catalogue.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("m5.large"), "{text}");
    assert!(!text.contains("c6a"), "{text}");
}

#[test]
fn crds_are_printed() {
    let out = karpenter(&["crds"]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("name: nodepools.karpenter.sh"), "{text}");
    assert!(text.contains("name: nodeclaims.karpenter.sh"), "{text}");
    assert!(text.contains("name: nodeoverlays.karpenter.sh"), "{text}");
    assert!(
        text.contains("name: capacitybuffers.autoscaling.x-k8s.io"),
        "{text}"
    );
}

/// NodeOverlays among the manifests change the plan: a fee on everything but the r family
/// leaves only r types among the options; a conflicting overlay is named on stderr.
#[test]
fn node_overlays_in_the_manifests_are_applied() {
    let first_option = |extra: &[&str]| -> (String, String) {
        let mut args = vec!["plan", "examples/inflate", "--output", "json"];
        args.extend_from_slice(extra);
        let out = karpenter(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let name = plan["newNodeClaims"][0]["instanceTypeOptions"][0]["name"]
            .as_str()
            .unwrap()
            .to_owned();
        (name, stderr(&out))
    };
    let (before, _) = first_option(&[]);
    assert!(!before.starts_with('r'), "{before}");
    let dir = tempfile::tempdir().unwrap();
    let overlays = dir.path().join("overlays.yaml");
    std::fs::write(
        &overlays,
        "apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: fee}
spec:
  requirements: [{key: karpenter.k8s.aws/instance-category, operator: NotIn, values: [r]}]
  priceAdjustment: '+1000%'
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: another-fee}
spec:
  requirements: [{key: karpenter.k8s.aws/instance-category, operator: In, values: [c]}]
  priceAdjustment: '+5%'
",
    )
    .unwrap();
    let (after, warnings) = first_option(&[overlays.to_str().unwrap()]);
    assert!(after.starts_with('r'), "{after}");
    assert!(
        warnings.contains(
            "NodeOverlay \"another-fee\" is not applied: it conflicts with NodeOverlay \"fee\""
        ),
        "{warnings}"
    );
}

#[test]
fn optimizer_work_zero_gives_the_greedy_plan() {
    let json = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["plan", "examples/inflate", "--output", "json"];
        args.extend_from_slice(extra);
        let out = karpenter(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let greedy = json(&["--optimizer-work", "0"]);
    assert!(greedy.get("optimizer").is_none(), "{greedy}");
    assert!(greedy.get("lowerBound").is_none(), "{greedy}");
    let optimised = json(&["--optimizer-work", "1000000000"]);
    assert!(optimised["optimizer"].is_object(), "{optimised}");
    let price = |p: &serde_json::Value| p["totalPrice"].as_f64().unwrap();
    assert!(price(&optimised) <= price(&greedy) + 1e-9);
}

#[test]
fn from_cluster_without_a_cluster_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .args(["plan", "--from-cluster"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("run karpenter");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("connecting to the cluster"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn from_cluster_and_paths_are_exclusive() {
    let out = karpenter(&["plan", "examples/inflate", "--from-cluster"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
    let out = karpenter(&["plan"]);
    assert!(
        !out.status.success(),
        "a path or --from-cluster is required"
    );
}

#[test]
fn a_static_pool_is_named_as_not_acted_on_and_takes_no_pods() {
    let dir = tempfile::tempdir().unwrap();
    let pool = |name: &str, extra: &str| {
        format!(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n{extra}  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n      requirements: []\n"
        )
    };
    let manifests = format!(
        "{}---\n{}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: web, namespace: default}}\nspec:\n  containers: [{{name: c, image: pause, resources: {{requests: {{cpu: '1'}}}}}}]\n",
        // Named to come first among pools of equal weight.
        pool("aaa-static", "  replicas: 2\n"),
        pool("zzz-dynamic", "")
    );
    let path = dir.path().join("m.yaml");
    std::fs::write(&path, manifests).unwrap();
    let out = karpenter(&["plan", path.to_str().unwrap(), "-o", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: NodePool aaa-static: spec.replicas is not acted on"),
        "{}",
        stderr(&out)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pools: Vec<&str> = plan["newNodeClaims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["nodePool"].as_str().unwrap())
        .collect();
    assert_eq!(
        pools,
        ["zzz-dynamic"],
        "the static pool takes no pods, as in Karpenter"
    );
}

#[test]
fn a_missing_file_is_reported_with_its_cause_once() {
    let out = karpenter(&["plan", "no/such/manifest.yaml"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.starts_with("error: no/such/manifest.yaml: "), "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
}

#[test]
fn label_mistakes_name_the_likely_fix() {
    let dir = tempfile::tempdir().unwrap();
    let pool = |requirements: &str| {
        format!(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: p}}\nspec:\n  \
             template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: \
             EC2NodeClass, name: default}}\n      requirements:\n{requirements}"
        )
    };
    let file = dir.path().join("pool.yaml");
    // A restricted key: refused, with the well-known key it was meant to be.
    std::fs::write(
        &file,
        pool("      - {key: karpenter.k8s.aws/capacity-type, operator: In, values: [spot]}\n"),
    )
    .unwrap();
    let out = karpenter(&["plan", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("did you mean karpenter.sh/capacity-type?"),
        "{err}"
    );
    assert!(
        !err.contains("topology.k8s.aws/zone-id"),
        "a short list: {err}"
    );
    // Families where categories were meant, and a misspelled zone key: warnings, and the
    // plan is still printed.
    std::fs::write(
        &file,
        pool(
            "      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m, c, r]}\n\
             \x20     - {key: topology.kubernetes.io/zones, operator: In, values: [us-east-1a]}\n",
        ),
    )
    .unwrap();
    let out = karpenter(&[
        "plan",
        file.to_str().unwrap(),
        "examples/inflate/workload.yaml",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "warning: NodePool \"p\": requirement karpenter.k8s.aws/instance-family In [c m r] \
             matches no instance type of the catalogue; did you mean \
             karpenter.k8s.aws/instance-category"
        ),
        "{err}"
    );
    assert!(
        err.contains("did you mean topology.kubernetes.io/zone?"),
        "{err}"
    );
    assert!(
        stdout(&out).contains("0 new node(s), 0.0000 $/hour"),
        "{}",
        stdout(&out)
    );
}

/// CapacityBuffers among the manifests are planned as their virtual pods, and each is named
/// on stderr; one the manifests cannot resolve adds nothing and says why.
#[test]
fn capacity_buffers_in_the_manifests_are_planned() {
    let dir = tempfile::tempdir().unwrap();
    let buffers = dir.path().join("buffers.yaml");
    std::fs::write(
        &buffers,
        "apiVersion: v1
kind: PodTemplate
metadata: {name: chunk, namespace: default}
template:
  spec:
    containers: [{name: c, resources: {requests: {cpu: '1', memory: 1Gi}}}]
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: headroom, namespace: default}
spec: {podTemplateRef: {name: chunk}, replicas: 3}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: dangling, namespace: default}
spec: {scalableRef: {kind: Deployment, name: nowhere}, replicas: 1}
",
    )
    .unwrap();
    let out = karpenter(&["plan", "examples/inflate", buffers.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("13 pod(s) placed, 0 unschedulable"),
        "{}",
        stdout(&out)
    );
    let warnings = stderr(&out);
    assert!(
        warnings.contains("CapacityBuffer default/headroom planned as 3 virtual pod(s)"),
        "{warnings}"
    );
    assert!(
        warnings.contains(
            "CapacityBuffer default/dangling is not ready for provisioning (ScalableRefNotFound)"
        ),
        "{warnings}"
    );
}

#[test]
fn scheduler_config_spreads_pods_that_declare_no_constraint() {
    let zones = |extra: &[&str]| {
        let mut args = vec!["plan", "examples/inflate", "-o", "json"];
        args.extend_from_slice(extra);
        let out = karpenter(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut zones: Vec<String> = plan["newNodeClaims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let reqs = c["requirements"].as_array().unwrap();
                reqs.iter()
                    .find(|r| r["key"] == "topology.kubernetes.io/zone")
                    .map(|r| r["values"].to_string())
                    .unwrap_or_default()
            })
            .collect();
        zones.sort();
        zones.dedup();
        zones
    };
    let config = "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    \
                  topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: DoNotSchedule\n";
    let spread = zones(&["--scheduler-config", config]);
    assert!(spread.len() >= 3, "one claim per zone at least: {spread:?}");
    assert!(zones(&[]).len() < spread.len());

    let out = karpenter(&[
        "plan",
        "examples/inflate",
        "--scheduler-config",
        "podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: zone}]}",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("--scheduler-config (SCHEDULER_CONFIG)")
            && err.contains("podTopologySpread.defaultConstraints[0].whenUnsatisfiable"),
        "{err}"
    );
}
