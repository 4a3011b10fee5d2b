//! Writes the benchmark workloads as Kubernetes manifests for timing `karpenter plan` end to
//! end: a `kind: List` of one NodePool (no requirements, so every type of the embedded AWS
//! catalogue is allowed) and the pods, in JSON or YAML.
//!
//! `cargo run --release -p karpenter-benches --example plan_inputs -- MIX COUNT FORMAT [SEED]`
//! with MIX `unconstrained` or `diverse` (Karpenter's `makeDiversePods`), FORMAT `json` or
//! `yaml`; the manifest goes to standard output.

use karpenter_benches::{karpenter_workload, unconstrained_workload};
use karpenter_scheduling::model::{Pod, PodAffinityTerm, TopologySpreadConstraint};
use serde_json::{Value, json};

fn selector(term: Option<&karpenter_scheduling::selector::LabelSelector>) -> Value {
    term.map_or(Value::Null, |s| json!({ "matchLabels": s.match_labels }))
}

fn affinity_term(t: &PodAffinityTerm) -> Value {
    json!({ "labelSelector": selector(t.label_selector.as_ref()), "topologyKey": t.topology_key })
}

fn spread(c: &TopologySpreadConstraint) -> Value {
    json!({
        "maxSkew": c.max_skew,
        "topologyKey": c.topology_key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": selector(c.label_selector.as_ref()),
    })
}

fn manifest(pod: &Pod) -> Value {
    let mut spec = json!({
        "containers": [{
            "name": "app",
            "image": "registry.k8s.io/pause:3.10",
            "resources": { "requests": {
                "cpu": format!("{}m", pod.requests.cpu_millis),
                "memory": format!("{}Mi", pod.requests.memory >> 20),
            }},
        }],
    });
    if !pod.topology_spread_constraints.is_empty() {
        spec["topologySpreadConstraints"] =
            pod.topology_spread_constraints.iter().map(spread).collect();
    }
    let affinity = &pod.affinity;
    if !affinity.pod_affinity.required.is_empty() {
        spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
            affinity
                .pod_affinity
                .required
                .iter()
                .map(affinity_term)
                .collect();
    }
    if !affinity.pod_anti_affinity.required.is_empty() {
        spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
            affinity
                .pod_anti_affinity
                .required
                .iter()
                .map(affinity_term)
                .collect();
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": pod.name, "namespace": pod.namespace, "labels": pod.labels },
        "spec": spec,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: plan_inputs unconstrained|diverse COUNT json|yaml [SEED]";
    let [mix, count, format, rest @ ..] = args.as_slice() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let count: usize = count.parse().expect("COUNT is a number");
    let seed: u64 = rest
        .first()
        .map_or(1, |s| s.parse().expect("SEED is a number"));
    let pods = match mix.as_str() {
        "unconstrained" => unconstrained_workload(count, seed),
        "diverse" => karpenter_workload(count, seed),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let pool = json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": { "name": "default" },
        "spec": { "template": { "spec": {
            "nodeClassRef": { "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default" },
            "requirements": [],
        }}},
    });
    let items: Vec<Value> = std::iter::once(pool)
        .chain(pods.iter().map(manifest))
        .collect();
    let list = json!({ "apiVersion": "v1", "kind": "List", "items": items });
    let text = match format.as_str() {
        "json" => serde_json::to_string(&list).expect("JSON"),
        "yaml" => serde_saphyr::to_string(&list).expect("YAML"),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    println!("{text}");
}
