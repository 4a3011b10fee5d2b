//! The Helm chart under `charts/karpenter-rs/` renders to valid Kubernetes objects.
//!
//! With `helm` on PATH the chart is rendered by `helm template` (default values and with the
//! ServiceMonitor enabled). Without it, every template is rendered by a small substitute:
//! `.Values.*`, `.Chart.*` and `.Release.*` references are resolved against `values.yaml`
//! (a reference to a missing value fails the test), `include`/`toYaml` blocks become a
//! placeholder mapping at their `nindent`, and control lines (`if`/`with`/`end`) are checked
//! for balance and dropped. Either way every document must parse as YAML and carry
//! `apiVersion`, `kind` and `metadata.name`.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("charts/karpenter-rs")
}

fn parse_docs(text: &str, origin: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, doc) in text.split("\n---").enumerate() {
        let body: String = doc
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        if body.trim().is_empty() || body.trim() == "---" {
            continue;
        }
        let v: Value = serde_saphyr::from_str(&body)
            .unwrap_or_else(|e| panic!("{origin} document {i}: invalid YAML: {e}\n{body}"));
        out.push(v);
    }
    out
}

fn lookup<'a>(values: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .try_fold(values, |v, key| v.get(key))
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Renders one `{{ … }}` expression to text.
fn expr(e: &str, values: &Value, file: &str) -> String {
    let e = e
        .trim()
        .trim_start_matches('-')
        .trim_end_matches('-')
        .trim();
    let parts: Vec<&str> = e.split('|').map(str::trim).collect();
    let head = parts[0];
    let mut value = if let Some(path) = head.strip_prefix(".Values.") {
        let v = lookup(values, path)
            .unwrap_or_else(|| panic!("{file}: .Values.{path} is not defined in values.yaml"));
        scalar(v)
    } else if head.starts_with(".Chart.") {
        "karpenter-rs".into()
    } else if head == ".Release.Namespace" {
        "karpenter".into()
    } else if head.starts_with(".Release.") {
        "release".into()
    } else if head.starts_with("include") {
        "karpenter-rs".into()
    } else {
        panic!("{file}: unsupported template expression {{{{ {e} }}}}")
    };
    for f in &parts[1..] {
        if *f == "quote" {
            value = format!("{value:?}");
        } else if let Some(fallback) = f.strip_prefix("default ")
            && value.is_empty()
        {
            value = expr(fallback, values, file);
        }
    }
    value
}

fn render_template(text: &str, values: &Value, file: &str) -> String {
    let mut depth = 0i32;
    let mut placeholders = 0;
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("{{") && t.ends_with("}}") && t.matches("{{").count() == 1 {
            let inner = t
                .trim_start_matches("{{")
                .trim_end_matches("}}")
                .trim()
                .trim_start_matches('-')
                .trim();
            let word = inner.split_whitespace().next().unwrap_or("");
            match word {
                "if" | "with" | "range" | "define" => {
                    depth += 1;
                    continue;
                }
                "end" => {
                    depth -= 1;
                    assert!(depth >= 0, "{file}: unbalanced {{{{ end }}}}");
                    continue;
                }
                "else" => continue,
                "include" | "toYaml" => {
                    let indent: usize = inner
                        .rsplit("nindent")
                        .next()
                        .and_then(|n| n.trim().parse().ok())
                        .unwrap_or(0);
                    placeholders += 1;
                    out.push_str(&format!(
                        "{}rendered-{placeholders}: placeholder\n",
                        " ".repeat(indent)
                    ));
                    continue;
                }
                _ => {}
            }
        }
        let mut rendered = String::new();
        let mut rest = line;
        while let Some(start) = rest.find("{{") {
            rendered.push_str(&rest[..start]);
            let end = rest[start..]
                .find("}}")
                .unwrap_or_else(|| panic!("{file}: unterminated {{{{ in {line:?}"));
            rendered.push_str(&expr(&rest[start + 2..start + end], values, file));
            rest = &rest[start + end + 2..];
        }
        rendered.push_str(rest);
        out.push_str(&rendered);
        out.push('\n');
    }
    assert_eq!(depth, 0, "{file}: unbalanced if/with/range/end");
    out
}

fn check_objects(docs: &[Value], origin: &str) {
    assert!(!docs.is_empty(), "{origin}: no documents");
    for d in docs {
        for key in ["apiVersion", "kind"] {
            assert!(
                d.get(key).and_then(Value::as_str).is_some(),
                "{origin}: missing {key} in {d}"
            );
        }
        assert!(
            d.pointer("/metadata/name")
                .and_then(Value::as_str)
                .is_some(),
            "{origin}: missing metadata.name in {d}"
        );
    }
}

/// Every gate under `settings.featureGates` reaches the controller's `FEATURE_GATES` with its
/// value (a gate missing from the template would silently stay at its default).
fn check_feature_gates(docs: &[Value], values: &Value, origin: &str) {
    let Some(deployment) = docs.iter().find(|d| d["kind"] == "Deployment") else {
        return;
    };
    let env = deployment
        .pointer("/spec/template/spec/containers/0/env")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("{origin}: Deployment has no env"));
    let gates = env
        .iter()
        .find(|e| e["name"] == "FEATURE_GATES")
        .and_then(|e| e["value"].as_str())
        .unwrap_or_else(|| panic!("{origin}: no FEATURE_GATES"));
    let rendered: Vec<(&str, &str)> = gates
        .split(',')
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
        .collect();
    let wanted = values["settings"]["featureGates"]
        .as_object()
        .expect("settings.featureGates");
    assert!(
        wanted.contains_key("capacityBuffer"),
        "no capacityBuffer gate"
    );
    for (key, value) in wanted {
        let mut chars = key.chars();
        let first = chars.next().unwrap().to_ascii_uppercase();
        let name = format!("{first}{}", chars.as_str());
        assert!(
            rendered
                .iter()
                .any(|(k, v)| *k == name && *v == scalar(value)),
            "{origin}: FEATURE_GATES {gates:?} lacks {name}={}",
            scalar(value)
        );
    }
}

/// The ClusterRole lets the controller read CapacityBuffers and write their status.
fn check_capacity_buffer_rbac(docs: &[Value], origin: &str) {
    let Some(role) = docs.iter().find(|d| d["kind"] == "ClusterRole") else {
        return;
    };
    let rules = role["rules"].as_array().expect("ClusterRole rules");
    let grants = |resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r["apiGroups"]
                .as_array()
                .is_some_and(|g| g.iter().any(|g| g == "autoscaling.x-k8s.io"))
                && r["resources"]
                    .as_array()
                    .is_some_and(|rs| rs.iter().any(|x| x == resource))
                && r["verbs"]
                    .as_array()
                    .is_some_and(|vs| vs.iter().any(|x| x == verb))
        })
    };
    for verb in ["get", "list", "watch"] {
        assert!(
            grants("capacitybuffers", verb),
            "{origin}: capacitybuffers {verb}"
        );
    }
    assert!(
        grants("capacitybuffers/status", "patch"),
        "{origin}: capacitybuffers/status patch"
    );
}

fn helm_available() -> bool {
    Command::new("helm")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn chart_renders_to_valid_objects() {
    let dir = chart_dir();
    let values_text = std::fs::read_to_string(dir.join("values.yaml")).expect("values.yaml");
    let values: Value = serde_saphyr::from_str(&values_text).expect("values.yaml is YAML");
    let chart: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("Chart.yaml")).unwrap()).unwrap();
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["name"], "karpenter-rs");
    // Karpenter's defaults, as `settings.*`.
    assert_eq!(values["replicas"], 2);
    assert_eq!(values["settings"]["batchMaxDuration"], "10s");
    assert_eq!(values["settings"]["batchIdleDuration"], "1s");
    assert_eq!(
        values["settings"]["featureGates"]["spotToSpotConsolidation"],
        false
    );

    let mut kinds = Vec::new();
    if helm_available() {
        for extra in [&[][..], &["--set", "serviceMonitor.enabled=true"][..]] {
            let out = Command::new("helm")
                .args([
                    "template",
                    "karpenter",
                    dir.to_str().unwrap(),
                    "--namespace",
                    "karpenter",
                    "--include-crds",
                ])
                .args(extra)
                .output()
                .expect("helm template");
            assert!(
                out.status.success(),
                "helm template failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let docs = parse_docs(&String::from_utf8_lossy(&out.stdout), "helm template");
            check_objects(&docs, "helm template");
            check_feature_gates(&docs, &values, "helm template");
            check_capacity_buffer_rbac(&docs, "helm template");
            kinds.extend(
                docs.iter()
                    .filter_map(|d| d["kind"].as_str().map(str::to_owned)),
            );
        }
    } else {
        let mut entries: Vec<_> = std::fs::read_dir(dir.join("templates"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            if !file.ends_with(".yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let rendered = render_template(&text, &values, &file);
            let docs = parse_docs(&rendered, &file);
            check_objects(&docs, &file);
            check_feature_gates(&docs, &values, &file);
            check_capacity_buffer_rbac(&docs, &file);
            kinds.extend(
                docs.iter()
                    .filter_map(|d| d["kind"].as_str().map(str::to_owned)),
            );
        }
    }
    for want in [
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "PodDisruptionBudget",
        "Service",
        "ServiceMonitor",
    ] {
        assert!(
            kinds.iter().any(|k| k == want),
            "chart has no {want}: {kinds:?}"
        );
    }
}

#[test]
fn chart_ships_the_crds() {
    let dir = chart_dir().join("crds");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("charts/karpenter-rs/crds") {
        let path = entry.unwrap().path();
        let docs = parse_docs(
            &std::fs::read_to_string(&path).unwrap(),
            &path.display().to_string(),
        );
        check_objects(&docs, &path.display().to_string());
        names.extend(docs.iter().filter_map(|d| {
            d.pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_owned)
        }));
    }
    assert!(
        names.iter().any(|n| n == "nodepools.karpenter.sh"),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n == "nodeclaims.karpenter.sh"),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n == "nodeoverlays.karpenter.sh"),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .any(|n| n == "capacitybuffers.autoscaling.x-k8s.io"),
        "{names:?}"
    );
}

#[test]
fn substitute_renderer_rejects_a_broken_template() {
    let values: Value = serde_saphyr::from_str("a: 1\n").unwrap();
    let missing =
        std::panic::catch_unwind(|| render_template("x: {{ .Values.b }}\n", &values, "t.yaml"));
    assert!(missing.is_err(), "a missing value must fail");
    let unbalanced = std::panic::catch_unwind(|| {
        render_template("{{- if .Values.a }}\nx: 1\n", &values, "t.yaml")
    });
    assert!(unbalanced.is_err(), "an unclosed if must fail");
    let rendered = render_template("x: {{ .Values.a | quote }}\n", &values, "t.yaml");
    assert_eq!(rendered, "x: \"1\"\n");
}
