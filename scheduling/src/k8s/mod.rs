//! Conversions from k8s-openapi objects into the scheduling model.
//!
//! Every conversion is a pure function of the objects it is given. Anything the model cannot
//! represent (an unknown operator or effect, a malformed quantity, a negative request) is a
//! [`ConversionError`] that names the object, the field path and the reason; nothing here
//! panics on user input.
//!
//! This module does not choose a Kubernetes version: the binary that embeds the crate enables
//! one of k8s-openapi's `v1_*` features.

mod daemonset;
mod dra;
mod node;
mod pdb;
mod pod;
mod volume;
mod workload;

pub use daemonset::daemonset_from_k8s;
pub use dra::{DraObjects, device_claims_from_k8s};
pub use node::{EPHEMERAL_TAINT_KEY_PREFIXES, ephemeral_taints, is_ephemeral_taint, node_from_k8s};
pub use pdb::pdb_from_k8s;
pub use pod::pod_from_k8s;
pub use volume::{fill_volume_requirements, volume_requirements};
pub use workload::{MAX_PODS, Workload, pod_from_pod_template, pods_from_workload};

use crate::model::{Labels, Millis};
use crate::quantity::Quantity;
use crate::requirements::{NodeSelectorRequirement, Operator};
use crate::resources::Resources;
use crate::selector::{LabelSelector, LabelSelectorRequirement, SelectorOperator};
use crate::taints::TaintEffect;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use std::collections::BTreeMap;

/// A field that is optional in some Kubernetes versions of k8s-openapi and required in others
/// (`DaemonSet.spec` became required in 1.37, `disruptionsAllowed` optional in 1.36): reading
/// it through this trait keeps the conversions compiling whichever version the binary picks.
pub(crate) trait Present<T> {
    fn present(&self) -> Option<&T>;
}

impl<T> Present<T> for Option<T> {
    fn present(&self) -> Option<&T> {
        self.as_ref()
    }
}

macro_rules! present_always {
    ($($t:ty),* $(,)?) => {$(
        impl Present<$t> for $t {
            fn present(&self) -> Option<&$t> {
                Some(self)
            }
        }
    )*};
}

present_always!(
    i32,
    k8s_openapi::api::apps::v1::DaemonSetSpec,
    k8s_openapi::api::apps::v1::DeploymentSpec,
    k8s_openapi::api::apps::v1::ReplicaSetSpec,
    k8s_openapi::api::apps::v1::StatefulSetSpec,
    k8s_openapi::api::core::v1::PodTemplateSpec,
    k8s_openapi::api::resource::v1::DeviceClassSpec,
    k8s_openapi::api::resource::v1::ResourceClaimSpec,
    k8s_openapi::api::resource::v1::ResourceClaimTemplateSpec,
    meta::LabelSelector,
);

/// A Kubernetes object that cannot be converted into the model.
///
/// The message reads `Pod default/web-0: spec.containers[1].resources.requests.cpu: quantity
/// "1x": …`, so a person can find the offending field without a debugger.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {object}: {field}: {reason}")]
pub struct ConversionError {
    /// The object's kind (`Pod`, `Node`, `DaemonSet`, `PersistentVolume` …).
    pub kind: &'static str,
    /// `namespace/name` for namespaced objects, `name` for cluster-scoped ones.
    pub object: String,
    /// The field path inside the object, in the API's camelCase spelling.
    pub field: String,
    /// Why the field was rejected.
    pub reason: String,
}

/// The object being converted: carried through helpers so every error names it.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    kind: &'static str,
    object: String,
}

impl Ctx {
    pub(crate) fn new(kind: &'static str, object: impl Into<String>) -> Self {
        Self {
            kind,
            object: object.into(),
        }
    }

    pub(crate) fn err(
        &self,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> ConversionError {
        ConversionError {
            kind: self.kind,
            object: self.object.clone(),
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// `namespace/name` with Kubernetes' default namespace, and the name required.
pub(crate) fn namespaced(
    kind: &'static str,
    meta: &meta::ObjectMeta,
) -> Result<(Ctx, String, String), ConversionError> {
    let namespace = meta
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into());
    let Some(name) = meta.name.clone().filter(|n| !n.is_empty()) else {
        return Err(
            Ctx::new(kind, format!("{namespace}/<unnamed>")).err("metadata.name", "missing")
        );
    };
    Ok((
        Ctx::new(kind, format!("{namespace}/{name}")),
        namespace,
        name,
    ))
}

/// The name of a cluster-scoped object, required.
pub(crate) fn cluster_scoped(
    kind: &'static str,
    meta: &meta::ObjectMeta,
) -> Result<(Ctx, String), ConversionError> {
    match meta.name.clone().filter(|n| !n.is_empty()) {
        Some(name) => Ok((Ctx::new(kind, name.clone()), name)),
        None => Err(Ctx::new(kind, "<unnamed>").err("metadata.name", "missing")),
    }
}

pub(crate) fn labels(map: Option<&BTreeMap<String, String>>) -> Labels {
    map.cloned().unwrap_or_default()
}

pub(crate) fn millis(t: Option<&meta::Time>) -> Option<Millis> {
    t.map(|t| t.0.as_millisecond())
}

pub(crate) fn quantity(
    ctx: &Ctx,
    field: &str,
    q: &K8sQuantity,
) -> Result<Quantity, ConversionError> {
    Quantity::parse(&q.0).map_err(|e| ctx.err(field, e.to_string()))
}

/// Parses a `ResourceList`, naming the entry that fails (`{field}.{resource}`).
pub(crate) fn quantities(
    ctx: &Ctx,
    field: &str,
    list: Option<&BTreeMap<String, K8sQuantity>>,
    allow_negative: bool,
) -> Result<BTreeMap<String, Quantity>, ConversionError> {
    let mut out = BTreeMap::new();
    for (name, q) in list.into_iter().flatten() {
        let path = format!("{field}.{name}");
        let parsed = quantity(ctx, &path, q)?;
        if !allow_negative && parsed.nanos() < 0 {
            return Err(ctx.err(path, format!("negative quantity {:?}", q.0)));
        }
        out.insert(name.clone(), parsed);
    }
    Ok(out)
}

/// A `ResourceList` in scheduler units.
pub(crate) fn resources(
    ctx: &Ctx,
    field: &str,
    list: Option<&BTreeMap<String, K8sQuantity>>,
) -> Result<Resources, ConversionError> {
    let parsed = quantities(ctx, field, list, false)?;
    Resources::from_quantities(parsed.iter().map(|(k, v)| (k.as_str(), v)))
        .map_err(|e| ctx.err(field, e.to_string()))
}

pub(crate) fn taint_effect(
    ctx: &Ctx,
    field: &str,
    effect: &str,
) -> Result<TaintEffect, ConversionError> {
    match effect {
        "NoSchedule" => Ok(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Ok(TaintEffect::PreferNoSchedule),
        "NoExecute" => Ok(TaintEffect::NoExecute),
        other => Err(ctx.err(
            field,
            format!("unknown taint effect {other:?} (expected NoSchedule, PreferNoSchedule or NoExecute)"),
        )),
    }
}

/// `metav1.LabelSelector`; `None` stays `None` (a nil selector, which matches nothing).
pub(crate) fn label_selector(
    ctx: &Ctx,
    field: &str,
    selector: Option<&meta::LabelSelector>,
) -> Result<Option<LabelSelector>, ConversionError> {
    let Some(selector) = selector else {
        return Ok(None);
    };
    let mut match_expressions = Vec::new();
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let operator = match e.operator.as_str() {
            "In" => SelectorOperator::In,
            "NotIn" => SelectorOperator::NotIn,
            "Exists" => SelectorOperator::Exists,
            "DoesNotExist" => SelectorOperator::DoesNotExist,
            other => {
                return Err(ctx.err(
                    format!("{field}.matchExpressions[{i}].operator"),
                    format!("unknown label selector operator {other:?} (expected In, NotIn, Exists or DoesNotExist)"),
                ));
            }
        };
        match_expressions.push(LabelSelectorRequirement {
            key: e.key.clone(),
            operator,
            values: e.values.clone().unwrap_or_default(),
        });
    }
    Ok(Some(LabelSelector {
        match_labels: labels(selector.match_labels.as_ref()),
        match_expressions,
    }))
}

/// A node selector requirement with the operators the Kubernetes API accepts (Karpenter's
/// Gte/Lte exist only in NodePools, so they are rejected here as the API server would).
pub(crate) fn node_selector_requirement(
    ctx: &Ctx,
    field: &str,
    r: &k8s_openapi::api::core::v1::NodeSelectorRequirement,
) -> Result<NodeSelectorRequirement, ConversionError> {
    let operator = match r.operator.as_str() {
        "In" => Operator::In,
        "NotIn" => Operator::NotIn,
        "Exists" => Operator::Exists,
        "DoesNotExist" => Operator::DoesNotExist,
        "Gt" => Operator::Gt,
        "Lt" => Operator::Lt,
        other => {
            return Err(ctx.err(
                format!("{field}.operator"),
                format!("unknown node selector operator {other:?} (expected In, NotIn, Exists, DoesNotExist, Gt or Lt)"),
            ));
        }
    };
    Ok(NodeSelectorRequirement {
        key: r.key.clone(),
        operator,
        values: r.values.clone().unwrap_or_default(),
        min_values: None,
    })
}

pub(crate) fn node_selector_requirements(
    ctx: &Ctx,
    field: &str,
    reqs: Option<&Vec<k8s_openapi::api::core::v1::NodeSelectorRequirement>>,
) -> Result<Vec<NodeSelectorRequirement>, ConversionError> {
    reqs.into_iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| node_selector_requirement(ctx, &format!("{field}[{i}]"), r))
        .collect()
}
