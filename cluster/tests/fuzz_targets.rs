//! The stable equivalent of the `manifests` fuzz target: every committed corpus file and
//! crash replayed through its entry function, and proptests that feed it arbitrary bytes,
//! YAML built from anchors, aliases, merge keys and deep nesting, and JSON `List`s of many
//! pods with quantities near the grammar's edges.

use karpenter_cluster::fuzzing;
use karpenter_testing::fuzz::replay_corpus;
use proptest::prelude::*;
use serde_json::json;

#[test]
fn manifests_corpus() {
    replay_corpus("manifests", fuzzing::manifests);
}

/// A quantity, valid or not, as a manifest may hold it (string or number).
fn quantity() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        prop::sample::select(vec![
            "100m",
            "1.5",
            "2Gi",
            "1e3",
            "-1",
            "0",
            "-0",
            "1e100",
            "9Ei",
            "1n",
            "Mi",
            "",
            "1.5.0",
            "9223372036854775807",
            "99999999999999999999Ei",
        ])
        .prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
    ]
}

fn pod(
    i: usize,
    cpu: serde_json::Value,
    memory: serde_json::Value,
    zone: bool,
) -> serde_json::Value {
    let mut spec = json!({
        "containers": [{"name": "c", "image": "x",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    });
    if zone {
        spec["topologySpreadConstraints"] = json!([{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "p"}}
        }]);
    }
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": format!("p{i}"), "namespace": "default", "labels": {"app": "p"}},
           "spec": spec})
}

const NODE_POOL: &str = r#"{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"default"},"spec":{"template":{"spec":{"requirements":[{"key":"kubernetes.io/arch","operator":"In","values":["amd64","arm64"]}],"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"}}},"limits":{"cpu":"64"}}}"#;

/// YAML whose documents reuse anchored pieces (aliases, merge keys), possibly nested deeper
/// than the parser allows.
fn anchored_yaml() -> impl Strategy<Value = String> {
    (1usize..6, 0usize..80, 0usize..4, any::<bool>()).prop_map(|(copies, depth, chain, merge)| {
        let mut text = String::from("base: &r0 {requests: {cpu: 250m, memory: 256Mi}}\n");
        // A chain of anchors, each a list of the previous one twice: 2^chain replays.
        for i in 1..=chain {
            text.push_str(&format!("l{i}: &r{i} [*r{p}, *r{p}]\n", p = i - 1));
        }
        text.push_str(&format!("deep: {}{}\n", "[".repeat(depth), "]".repeat(depth)));
        for i in 0..copies {
            text.push_str("---\napiVersion: v1\nkind: Pod\n");
            text.push_str(&format!("metadata: &m{i} {{name: p{i}, namespace: default}}\n"));
            if merge {
                text.push_str(
                    "spec:\n  containers:\n  - &c {name: c, image: x, resources: *r0}\n  - <<: *c\n    name: d\n",
                );
            } else {
                text.push_str("spec: {containers: [{name: c, image: x, resources: *r0}]}\n");
            }
        }
        text
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn manifests_from_any_bytes(data in prop::collection::vec(any::<u8>(), 0..256)) {
        fuzzing::manifests(&data);
    }

    #[test]
    fn manifests_from_any_text(text in "\\PC{0,200}") {
        fuzzing::manifests(text.as_bytes());
    }

    #[test]
    fn yaml_with_anchors_aliases_and_nesting(text in anchored_yaml()) {
        fuzzing::manifests(text.as_bytes());
    }

    #[test]
    fn json_lists_of_many_pods(
        pods in prop::collection::vec((quantity(), quantity(), any::<bool>()), 0..120),
        with_pool in any::<bool>(),
    ) {
        let items: Vec<_> = pods
            .into_iter()
            .enumerate()
            .map(|(i, (cpu, memory, zone))| pod(i, cpu, memory, zone))
            .collect();
        let mut text = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
        if with_pool {
            text.push('\n');
            text.push_str(NODE_POOL);
        }
        fuzzing::manifests(text.as_bytes());
    }
}
