//! `karpenter.sh/v1beta1` NodeClaim as `karpenter.sh/v1`, as upstream's v1 conversion
//! webhook did: the spec keeps its taints, requirements and resources, `nodeClassRef` gains
//! group and kind, `expireAfter` is copied from the claim's NodePool, and kubelet settings,
//! which a v1 claim does not carry, are reported against its EC2NodeClass. Metadata and
//! status are kept: a NodeClaim is a live object, not configuration.

use crate::fields::{Fields, put};
use crate::kubelet;
use crate::labels::{self, NODEPOOL_LABEL};
use crate::metadata::rename_in_metadata;
use crate::nodeclass;
use crate::nodepool::API_VERSION;
use crate::report::{Reporter, compact, index, join};
use crate::state::State;
use serde_json::{Map, Value, json};

/// A converted claim's links to other objects, settled after every object is converted.
pub(crate) struct ClaimLink {
    /// The claim in [`State::outs`].
    pub out: usize,
    /// Its input object, for messages.
    pub object: String,
    /// Its NodePool (label `karpenter.sh/nodepool`).
    pub pool: Option<String>,
    /// Its EC2NodeClass.
    pub class: Option<String>,
    /// Its kubelet settings, and where they were.
    pub kubelet: Option<(Value, String)>,
}

/// A converted claim, before [`link`].
pub(crate) struct Claim {
    /// The v1 NodeClaim.
    pub value: Value,
    /// Its NodePool.
    pub pool: Option<String>,
    /// Its EC2NodeClass.
    pub class: Option<String>,
    /// Its kubelet settings, and where they were.
    pub kubelet: Option<(Value, String)>,
}

/// A v1beta1 NodeClaim as v1.
pub(crate) fn convert(value: Value, report: &mut Reporter<'_>) -> Claim {
    let mut top = Fields::of(value, "", report);
    top.take("apiVersion");
    top.take("kind");
    let mut metadata = top.take("metadata").unwrap_or_else(|| json!({}));
    rename_in_metadata(&mut metadata, "metadata", report);
    if let Some(Value::Array(owners)) = metadata.get_mut("ownerReferences") {
        for (i, owner) in owners.iter_mut().enumerate() {
            if owner["apiVersion"] == "karpenter.sh/v1beta1" {
                owner["apiVersion"] = Value::from(API_VERSION);
                report.info(
                    &join(&index("metadata.ownerReferences", i), "apiVersion"),
                    format!("karpenter.sh/v1beta1 becomes {API_VERSION}"),
                );
            }
        }
    }
    let pool = metadata
        .pointer(&format!("/labels/{}", NODEPOOL_LABEL.replace('/', "~1")))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let status = top.take("status");
    let mut f = top.take_fields("spec", report);
    top.finish("a NodeClaim", report);

    let mut spec = Map::new();
    for key in [
        "taints",
        "startupTaints",
        "resources",
        "terminationGracePeriod",
    ] {
        put(&mut spec, key, f.take(key));
    }
    spec.insert(
        "requirements".into(),
        Value::Array(labels::take_requirements(&mut f, report)),
    );
    let ref_path = f.path_of("nodeClassRef");
    let mut reference = f.take_fields("nodeClassRef", report);
    let name = reference.take_str("name", report).unwrap_or_default();
    let kind = reference
        .take_str("kind", report)
        .unwrap_or_else(|| nodeclass::KIND.to_owned());
    let group = reference
        .take_str("apiVersion", report)
        .map(|v| v.split('/').next().unwrap_or_default().to_owned())
        .unwrap_or_else(|| nodeclass::GROUP.to_owned());
    reference.finish("a nodeClassRef", report);
    report.info(
        &ref_path,
        format!("becomes nodeClassRef {{group: {group}, kind: {kind}, name: {name}}}"),
    );
    let class = (kind == nodeclass::KIND && group == nodeclass::GROUP).then(|| name.clone());
    spec.insert(
        "nodeClassRef".into(),
        json!({"group": group, "kind": kind, "name": name}),
    );
    let kubelet_path = f.path_of("kubelet");
    let kubelet = f
        .take("kubelet")
        .and_then(|v| kubelet::settings(v, &kubelet_path, report))
        .map(|k| (k, kubelet_path));
    f.finish("a v1beta1 NodeClaim spec", report);

    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::from(API_VERSION));
    out.insert("kind".into(), Value::from("NodeClaim"));
    out.insert("metadata".into(), metadata);
    out.insert("spec".into(), Value::Object(spec));
    put(&mut out, "status", status);
    Claim {
        value: Value::Object(out),
        pool,
        class,
        kubelet,
    }
}

/// Settles each converted claim's `expireAfter` (its NodePool's, as upstream's webhook
/// copied it) and reports its kubelet settings against its EC2NodeClass.
pub(crate) fn link(state: &mut State) {
    let claims = std::mem::take(&mut state.claims);
    for c in claims {
        if let Some(pool) = &c.pool {
            match state.find(API_VERSION, "NodePool", pool) {
                Some(p) => {
                    let expire = state.outs[p]
                        .value
                        .pointer("/spec/template/spec/expireAfter")
                        .cloned();
                    if let Some(expire) = expire {
                        let text = expire.as_str().unwrap_or_default().to_owned();
                        state.outs[c.out].value["spec"]["expireAfter"] = expire;
                        Reporter::new(c.object.clone(), &mut state.issues).info(
                            "spec",
                            format!("expireAfter {text} copied from NodePool {pool}"),
                        );
                    }
                }
                None => Reporter::new(c.object.clone(), &mut state.issues).warning(
                    "spec",
                    format!(
                        "a v1 NodeClaim has its NodePool's expireAfter, and NodePool {pool} is \
                         not among the inputs: v1's default 720h applies"
                    ),
                ),
            }
        }
        let Some((kubelet, field)) = &c.kubelet else {
            continue;
        };
        let class_kubelet = c
            .class
            .as_deref()
            .and_then(|name| state.find(nodeclass::API_VERSION, nodeclass::KIND, name))
            .and_then(|i| state.outs[i].value.pointer("/spec/kubelet").cloned());
        let class = c.class.as_deref().unwrap_or("(none)");
        let mut r = Reporter::new(c.object.clone(), &mut state.issues);
        if class_kubelet.as_ref() == Some(kubelet) {
            r.info(
                field,
                format!(
                    "a v1 NodeClaim carries no kubelet settings; EC2NodeClass {class} has the same"
                ),
            );
        } else {
            r.warning(
                field,
                format!(
                    "a v1 NodeClaim carries no kubelet settings (they live on the EC2NodeClass): \
                     the running node keeps {}, while EC2NodeClass {class} has {}",
                    compact(kubelet),
                    nodeclass::describe_kubelet(class_kubelet.as_ref())
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Severity;
    use crate::testing::{beta_class, beta_pool, message, object, run};
    use serde_json::json;

    fn claim(kubelet: &str) -> String {
        format!(
            "apiVersion: karpenter.sh/v1beta1\nkind: NodeClaim\nmetadata:\n  name: claim\n  labels: {{karpenter.sh/nodepool: p}}\n\
             spec:\n  requirements: []\n  nodeClassRef: {{name: c}}\n  kubelet: {kubelet}\n"
        )
    }

    #[test]
    fn claim_kubelet_settings_are_compared_with_its_class() {
        let pool = beta_pool("p", "c", "      kubelet: {maxPods: 20}\n");
        let class = beta_class("c", "");
        let same = run(&format!(
            "{}---\n{pool}---\n{class}",
            claim("{maxPods: 20}")
        ));
        assert!(message(&same, Severity::Info, "spec.kubelet").contains("has the same"));
        let differ = run(&format!(
            "{}---\n{pool}---\n{class}",
            claim("{maxPods: 10}")
        ));
        assert!(message(&differ, Severity::Warning, "spec.kubelet").contains("{\"maxPods\":20}"));
        let c = object(&differ, "NodeClaim", "claim");
        assert!(c["spec"].get("kubelet").is_none());
        assert_eq!(
            c["spec"]["nodeClassRef"],
            json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"})
        );
    }

    #[test]
    fn claims_take_their_pools_expiry() {
        let pool = format!(
            "{}  disruption: {{expireAfter: 48h}}\n",
            beta_pool("p", "c", "")
        );
        let c = run(&format!("{}---\n{pool}", claim("{}")));
        assert_eq!(
            object(&c, "NodeClaim", "claim")["spec"]["expireAfter"],
            "48h"
        );
        assert!(message(&c, Severity::Info, "spec").contains("copied from NodePool p"));
    }
}
