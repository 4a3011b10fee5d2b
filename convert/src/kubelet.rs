//! Kubelet settings, which v1 moved from the NodePool (v1alpha5 `kubeletConfiguration`,
//! v1beta1 `template.spec.kubelet`) to the EC2NodeClass (`spec.kubelet`).
//!
//! A class is shared by pools, so the move is decided over the whole input: when every pool
//! of a class has the same settings, they go onto the class; when pools of one class differ,
//! the class is copied once per distinct setting and the pools are pointed at their copy, as
//! the v1 migration guide ("Kubelet Configuration Migration") tells users to do by hand.

use crate::fields::{Fields, put};
use crate::nodeclass;
use crate::report::{Reporter, compact, join};
use crate::state::{Out, State};
use karpenter_cloudprovider::v1::kubelet::MANAGED_KUBELET_FIELDS;
use serde_json::{Map, Value};

/// The kubelet settings at `path` with the fields v1 keeps; `containerRuntime` (v1alpha5) is
/// dropped, silently lossless for containerd, the only runtime EKS 1.24+ runs. `None` when
/// nothing is set.
pub(crate) fn settings(value: Value, path: &str, report: &mut Reporter<'_>) -> Option<Value> {
    let mut f = Fields::of(value, path, report);
    let mut out = Map::new();
    // v1alpha5 had these plus `containerRuntime`.
    for key in MANAGED_KUBELET_FIELDS {
        put(&mut out, key, f.take(key));
    }
    if let Some(runtime) = f.take("containerRuntime") {
        let field = join(path, "containerRuntime");
        if runtime.as_str() == Some("containerd") {
            report.info(&field, "dropped in v1beta1: containerd is the only runtime");
        } else {
            report.lossy(
                &field,
                format!(
                    "dropped in v1beta1: only containerd is supported, not {}",
                    compact(&runtime)
                ),
            );
        }
    }
    f.finish("kubelet settings", report);
    (!out.is_empty()).then_some(Value::Object(out))
}

/// A pool's kubelet settings waiting for their class.
pub(crate) struct PoolKubelet {
    /// The pool in [`State::outs`].
    pub out: usize,
    /// The pool's input object, for messages.
    pub object: String,
    /// The pool's name.
    pub pool: String,
    /// The EC2NodeClass its `nodeClassRef` names.
    pub class: String,
    /// Its settings (`None`: it set none).
    pub kubelet: Option<Value>,
    /// Where they were in the input.
    pub field: String,
}

/// Puts every pool's kubelet settings on its EC2NodeClass, splitting classes whose pools
/// disagree. Runs after every object is converted.
pub(crate) fn place(state: &mut State) {
    let pools = std::mem::take(&mut state.pool_kubelets);
    // Classes in the order their first pool appears, each with its pools.
    let mut by_class: Vec<(String, Vec<&PoolKubelet>)> = Vec::new();
    for p in &pools {
        match by_class.iter_mut().find(|(c, _)| *c == p.class) {
            Some((_, members)) => members.push(p),
            None => by_class.push((p.class.clone(), vec![p])),
        }
    }
    for (class, members) in by_class {
        if members.iter().all(|m| m.kubelet.is_none()) {
            continue;
        }
        match state.find(nodeclass::API_VERSION, nodeclass::KIND, &class) {
            None => not_among_inputs(state, &class, &members),
            Some(i) if !state.outs[i].converted => onto_v1_class(state, i, &class, &members),
            Some(i) => onto_converted_class(state, i, &class, &members),
        }
    }
}

fn not_among_inputs(state: &mut State, class: &str, members: &[&PoolKubelet]) {
    for m in members {
        if let Some(k) = &m.kubelet {
            let mut r = Reporter::new(m.object.clone(), &mut state.issues);
            r.lossy(
                &m.field,
                format!(
                    "v1 keeps kubelet settings on the EC2NodeClass, and EC2NodeClass {class} is \
                     not among the inputs: add spec.kubelet {} to it (or to a copy for this \
                     NodePool)",
                    compact(k)
                ),
            );
        }
    }
}

fn onto_v1_class(state: &mut State, i: usize, class: &str, members: &[&PoolKubelet]) {
    let existing = state.outs[i].value.pointer("/spec/kubelet").cloned();
    for m in members {
        let Some(k) = &m.kubelet else { continue };
        let mut r = Reporter::new(m.object.clone(), &mut state.issues);
        if existing.as_ref() == Some(k) {
            r.info(
                &m.field,
                format!("EC2NodeClass {class} (already v1) carries the same kubelet settings"),
            );
        } else {
            r.lossy(
                &m.field,
                format!(
                    "EC2NodeClass {class} is already v1 and left as it is, with {}: set \
                     spec.kubelet {} on it (or on a copy for this NodePool)",
                    nodeclass::describe_kubelet(existing.as_ref()),
                    compact(k)
                ),
            );
        }
    }
}

fn onto_converted_class(state: &mut State, i: usize, class: &str, members: &[&PoolKubelet]) {
    // Distinct settings, in the order of the first pool that has them.
    let mut groups: Vec<(Option<&Value>, Vec<&PoolKubelet>)> = Vec::new();
    for m in members {
        match groups.iter_mut().find(|(k, _)| *k == m.kubelet.as_ref()) {
            Some((_, g)) => g.push(m),
            None => groups.push((m.kubelet.as_ref(), vec![m])),
        }
    }
    let names: Vec<&str> = members.iter().map(|m| m.pool.as_str()).collect();
    let shared = groups.len() > 1;
    for (n, (kubelet, group)) in groups.iter().enumerate() {
        let target = if n == 0 {
            i
        } else {
            let name = state.unique_name(
                nodeclass::API_VERSION,
                nodeclass::KIND,
                &format!("{class}-{}", group[0].pool),
            );
            let mut copy = state.outs[i].value.clone();
            copy["metadata"]["name"] = Value::from(name.as_str());
            let order = (state.outs[i].order.0, state.outs[i].order.1 + n);
            state.outs.push(Out {
                value: copy,
                object: state.outs[i].object.clone(),
                converted: true,
                order,
            });
            state.outs.len() - 1
        };
        let spec = &mut state.outs[target].value["spec"];
        match kubelet {
            Some(k) => spec["kubelet"] = (*k).clone(),
            None => {
                if let Some(map) = spec.as_object_mut() {
                    map.remove("kubelet");
                }
            }
        }
        let target_name = state.outs[target].value["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        for m in group {
            if n > 0 {
                state.outs[m.out].value["spec"]["template"]["spec"]["nodeClassRef"]["name"] =
                    Value::from(target_name.as_str());
            }
            let mut r = Reporter::new(m.object.clone(), &mut state.issues);
            let settings = nodeclass::describe_kubelet(*kubelet);
            if !shared {
                r.info(
                    &m.field,
                    format!("moved to EC2NodeClass {class} spec.kubelet"),
                );
            } else if n == 0 {
                r.info(
                    &m.field,
                    format!(
                        "NodePools {} share EC2NodeClass {class} with different kubelet \
                         settings, which v1 keeps on the class: {class} keeps this NodePool's \
                         ({settings})",
                        names.join(", ")
                    ),
                );
            } else {
                r.warning(
                    &m.field,
                    format!(
                        "NodePools {} share EC2NodeClass {class} with different kubelet \
                         settings, which v1 keeps on the class: this NodePool now uses \
                         EC2NodeClass {target_name}, a copy of {class} with its settings \
                         ({settings}); the changed nodeClassRef drifts its nodes",
                        names.join(", ")
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Severity;
    use crate::testing::{beta_class, beta_pool, message, object, raised, run};
    use serde_json::json;

    fn with_kubelet(name: &str, class: &str, kubelet: &str) -> String {
        beta_pool(name, class, &format!("      kubelet: {kubelet}\n"))
    }

    fn class_ref(c: &crate::Conversion, pool: &str) -> String {
        object(c, "NodePool", pool)["spec"]["template"]["spec"]["nodeClassRef"]["name"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn pools_that_agree_move_their_settings_onto_the_class_once() {
        let c = run(&format!(
            "{}---\n{}---\n{}",
            with_kubelet("a", "c", "{maxPods: 30}"),
            with_kubelet("b", "c", "{maxPods: 30}"),
            beta_class("c", "")
        ));
        assert_eq!(
            object(&c, "EC2NodeClass", "c")["spec"]["kubelet"],
            json!({"maxPods": 30})
        );
        assert_eq!(c.objects.len(), 3);
        assert_eq!(
            (class_ref(&c, "a"), class_ref(&c, "b")),
            ("c".into(), "c".into())
        );
        assert!(raised(&c, Severity::Warning).is_empty());
    }

    #[test]
    fn a_pool_without_settings_keeps_the_class_and_the_other_gets_a_copy() {
        let c = run(&format!(
            "{}---\n{}---\n{}---\n{}",
            beta_pool("a", "c", ""),
            with_kubelet("b", "c", "{maxPods: 30}"),
            beta_class("c", ""),
            // A class already named like the copy would be: the copy takes the next name.
            beta_class("c-b", "")
        ));
        assert!(
            object(&c, "EC2NodeClass", "c")["spec"]
                .get("kubelet")
                .is_none()
        );
        assert_eq!(class_ref(&c, "a"), "c");
        assert_eq!(class_ref(&c, "b"), "c-b-2");
        assert_eq!(
            object(&c, "EC2NodeClass", "c-b-2")["spec"]["kubelet"],
            json!({"maxPods": 30})
        );
        assert!(
            object(&c, "EC2NodeClass", "c-b")["spec"]
                .get("kubelet")
                .is_none()
        );
        // The copy sits right after its original.
        let names: Vec<_> = c
            .objects
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b", "c", "c-b-2", "c-b"]);
        assert_eq!(
            raised(&c, Severity::Warning),
            [(Severity::Warning, "spec.template.spec.kubelet".to_owned())]
        );
    }

    #[test]
    fn settings_without_a_converted_class_are_lossy() {
        let c = run(&with_kubelet("a", "missing", "{maxPods: 30}"));
        assert!(
            message(&c, Severity::Lossy, "spec.template.spec.kubelet").contains("{\"maxPods\":30}")
        );
        let v1 = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: v}\nspec: {kubelet: {maxPods: 30}}\n";
        let same = run(&format!(
            "{}---\n{v1}",
            with_kubelet("a", "v", "{maxPods: 30}")
        ));
        assert!(raised(&same, Severity::Lossy).is_empty());
        let differ = run(&format!(
            "{}---\n{v1}",
            with_kubelet("a", "v", "{maxPods: 40}")
        ));
        assert!(
            message(&differ, Severity::Lossy, "spec.template.spec.kubelet").contains("already v1")
        );
        // The v1 class is not changed.
        assert_eq!(
            object(&differ, "EC2NodeClass", "v")["spec"]["kubelet"],
            json!({"maxPods": 30})
        );
    }

    #[test]
    fn settings_of_a_pool_on_another_kind_of_class_are_lossy() {
        let c = run(
            "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  template:\n    spec:\n\
             \x20     requirements: []\n      kubelet: {maxPods: 5}\n      nodeClassRef: {apiVersion: example.com/v1, kind: Other, name: o}\n",
        );
        assert!(
            message(&c, Severity::Lossy, "spec.template.spec.kubelet")
                .contains("not an EC2NodeClass")
        );
    }
}
