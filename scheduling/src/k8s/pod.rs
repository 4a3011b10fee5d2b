//! `Pod` (and pod templates) into [`model::Pod`].

use super::{
    ConversionError, Ctx, label_selector, labels, millis, namespaced, node_selector_requirements,
    quantities, taint_effect,
};
use crate::model::{
    self, Affinity, HostPort, InclusionPolicy, NodeAffinity, NodeSelectorTerm, OwnerRef,
    PodAffinity, PodAffinityTerm, PreferredSchedulingTerm, TopologySpreadConstraint,
    WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use crate::requests::{ContainerResources, pod_requests};
use crate::resources::{self, Resources};
use crate::taints::{Toleration, TolerationOperator};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// Converts a Pod.
///
/// The namespace defaults to `default`; the owner is the controlling `ownerReference` (the one
/// with `controller: true`), as `metav1.GetControllerOf` picks it; requests follow
/// [`pod_requests`] (sidecars are init containers with `restartPolicy: Always`, overhead is
/// added); times are Unix milliseconds; a pod with a `deletionTimestamp` is terminating.
///
/// # Errors
/// A [`ConversionError`] naming `namespace/name` and the field, for a missing name, a
/// malformed or negative quantity, or an operator, effect or policy the model does not know.
pub fn pod_from_k8s(pod: &core::Pod) -> Result<model::Pod, ConversionError> {
    let (ctx, namespace, name) = namespaced("Pod", &pod.metadata)?;
    let mut out = model::Pod {
        namespace,
        name,
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        labels: labels(pod.metadata.labels.as_ref()),
        annotations: labels(pod.metadata.annotations.as_ref()),
        owner: controller_of(&pod.metadata),
        created_at: millis(pod.metadata.creation_timestamp.as_ref()).unwrap_or_default(),
        started_at: millis(pod.status.as_ref().and_then(|s| s.start_time.as_ref())),
        terminating: pod.metadata.deletion_timestamp.is_some(),
        ..model::Pod::default()
    };
    let Some(spec) = pod.spec.as_ref() else {
        return Err(ctx.err("spec", "missing"));
    };
    convert_spec(&ctx, "spec", spec, &mut out)?;
    Ok(out)
}

/// The controlling owner reference, if any.
pub(crate) fn controller_of(meta: &meta::ObjectMeta) -> Option<OwnerRef> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| OwnerRef {
            kind: o.kind.clone(),
            name: o.name.clone(),
            uid: o.uid.clone(),
        })
}

/// Fills everything a pod spec determines: requests, node selector, affinity, tolerations,
/// spread constraints, host ports, priority and node name. `prefix` is the spec's path in
/// the object (`spec` for a Pod, `spec.template.spec` for a workload).
pub(crate) fn convert_spec(
    ctx: &Ctx,
    prefix: &str,
    spec: &core::PodSpec,
    out: &mut model::Pod,
) -> Result<(), ConversionError> {
    out.requests = requests(ctx, prefix, spec)?;
    out.node_selector = labels(spec.node_selector.as_ref());
    out.affinity = affinity(ctx, &format!("{prefix}.affinity"), spec.affinity.as_ref())?;
    out.tolerations = spec
        .tolerations
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| toleration(ctx, &format!("{prefix}.tolerations[{i}]"), t))
        .collect::<Result<_, _>>()?;
    out.topology_spread_constraints = spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| spread(ctx, &format!("{prefix}.topologySpreadConstraints[{i}]"), c))
        .collect::<Result<_, _>>()?;
    out.host_ports = host_ports(spec);
    out.priority = spec.priority.unwrap_or(0);
    out.node_name = spec.node_name.clone().filter(|n| !n.is_empty());
    Ok(())
}

fn container_resources(
    ctx: &Ctx,
    field: &str,
    c: &core::Container,
    init: bool,
) -> Result<ContainerResources, ConversionError> {
    let res = c.resources.as_ref();
    Ok(ContainerResources {
        requests: quantities(
            ctx,
            &format!("{field}.resources.requests"),
            res.and_then(|r| r.requests.as_ref()),
            false,
        )?,
        limits: quantities(
            ctx,
            &format!("{field}.resources.limits"),
            res.and_then(|r| r.limits.as_ref()),
            false,
        )?,
        restart_always: init && c.restart_policy.as_deref() == Some("Always"),
    })
}

fn requests(ctx: &Ctx, prefix: &str, spec: &core::PodSpec) -> Result<Resources, ConversionError> {
    let containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| container_resources(ctx, &format!("{prefix}.containers[{i}]"), c, false))
        .collect::<Result<Vec<_>, _>>()?;
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| container_resources(ctx, &format!("{prefix}.initContainers[{i}]"), c, true))
        .collect::<Result<Vec<_>, _>>()?;
    let overhead = quantities(
        ctx,
        &format!("{prefix}.overhead"),
        spec.overhead.as_ref(),
        false,
    )?;
    let mut total = pod_requests(
        &containers,
        &init,
        (!overhead.is_empty()).then_some(&overhead),
    )
    .map_err(|e| ctx.err(prefix, e.to_string()))?;

    // Pod-level resources (KEP-2837) replace the container sum for the resources they name;
    // the API server defaults a pod-level request from its limit, and overhead still adds.
    if let Some(pod_level) = spec.resources.as_ref() {
        let field = format!("{prefix}.resources");
        let req = quantities(
            ctx,
            &format!("{field}.requests"),
            pod_level.requests.as_ref(),
            false,
        )?;
        let lim = quantities(
            ctx,
            &format!("{field}.limits"),
            pod_level.limits.as_ref(),
            false,
        )?;
        for (name, q) in lim
            .iter()
            .filter(|(n, _)| !req.contains_key(*n))
            .chain(req.iter())
        {
            if !(name == resources::CPU
                || name == resources::MEMORY
                || name.starts_with("hugepages-"))
            {
                continue;
            }
            let value = if name == resources::CPU {
                q.milli_value()
            } else {
                q.value()
            };
            let extra = overhead
                .get(name)
                .map(|o| {
                    if name == resources::CPU {
                        o.milli_value()
                    } else {
                        o.value()
                    }
                })
                .unwrap_or(0);
            total.set(name, value.saturating_add(extra));
        }
    }
    Ok(total)
}

fn node_term(
    ctx: &Ctx,
    field: &str,
    t: &core::NodeSelectorTerm,
) -> Result<NodeSelectorTerm, ConversionError> {
    Ok(NodeSelectorTerm {
        match_expressions: node_selector_requirements(
            ctx,
            &format!("{field}.matchExpressions"),
            t.match_expressions.as_ref(),
        )?,
        match_fields: node_selector_requirements(
            ctx,
            &format!("{field}.matchFields"),
            t.match_fields.as_ref(),
        )?,
    })
}

fn pod_term(
    ctx: &Ctx,
    field: &str,
    t: &core::PodAffinityTerm,
) -> Result<PodAffinityTerm, ConversionError> {
    Ok(PodAffinityTerm {
        label_selector: label_selector(
            ctx,
            &format!("{field}.labelSelector"),
            t.label_selector.as_ref(),
        )?,
        namespaces: t.namespaces.clone().unwrap_or_default(),
        namespace_selector: label_selector(
            ctx,
            &format!("{field}.namespaceSelector"),
            t.namespace_selector.as_ref(),
        )?,
        topology_key: t.topology_key.clone(),
        match_label_keys: t.match_label_keys.clone().unwrap_or_default(),
        mismatch_label_keys: t.mismatch_label_keys.clone().unwrap_or_default(),
    })
}

const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

fn pod_affinity(
    ctx: &Ctx,
    field: &str,
    required: Option<&Vec<core::PodAffinityTerm>>,
    preferred: Option<&Vec<core::WeightedPodAffinityTerm>>,
) -> Result<PodAffinity, ConversionError> {
    Ok(PodAffinity {
        required: required
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| pod_term(ctx, &format!("{field}.{REQUIRED}[{i}]"), t))
            .collect::<Result<_, _>>()?,
        preferred: preferred
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, w)| {
                Ok(WeightedPodAffinityTerm {
                    weight: w.weight,
                    term: pod_term(
                        ctx,
                        &format!("{field}.{PREFERRED}[{i}].podAffinityTerm"),
                        &w.pod_affinity_term,
                    )?,
                })
            })
            .collect::<Result<_, _>>()?,
    })
}

fn affinity(
    ctx: &Ctx,
    field: &str,
    a: Option<&core::Affinity>,
) -> Result<Affinity, ConversionError> {
    let Some(a) = a else {
        return Ok(Affinity::default());
    };
    let mut out = Affinity::default();
    if let Some(na) = a.node_affinity.as_ref() {
        let f = format!("{field}.nodeAffinity");
        out.node_affinity = NodeAffinity {
            required: na
                .required_during_scheduling_ignored_during_execution
                .iter()
                .flat_map(|s| s.node_selector_terms.iter())
                .enumerate()
                .map(|(i, t)| node_term(ctx, &format!("{f}.{REQUIRED}.nodeSelectorTerms[{i}]"), t))
                .collect::<Result<_, _>>()?,
            preferred: na
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, p)| {
                    Ok(PreferredSchedulingTerm {
                        weight: p.weight,
                        preference: node_term(
                            ctx,
                            &format!("{f}.{PREFERRED}[{i}].preference"),
                            &p.preference,
                        )?,
                    })
                })
                .collect::<Result<_, _>>()?,
        };
    }
    if let Some(pa) = a.pod_affinity.as_ref() {
        out.pod_affinity = pod_affinity(
            ctx,
            &format!("{field}.podAffinity"),
            pa.required_during_scheduling_ignored_during_execution
                .as_ref(),
            pa.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        )?;
    }
    if let Some(paa) = a.pod_anti_affinity.as_ref() {
        out.pod_anti_affinity = pod_affinity(
            ctx,
            &format!("{field}.podAntiAffinity"),
            paa.required_during_scheduling_ignored_during_execution
                .as_ref(),
            paa.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        )?;
    }
    Ok(out)
}

fn toleration(ctx: &Ctx, field: &str, t: &core::Toleration) -> Result<Toleration, ConversionError> {
    let operator = match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => TolerationOperator::Equal,
        "Exists" => TolerationOperator::Exists,
        other => {
            return Err(ctx.err(
                format!("{field}.operator"),
                format!("unknown toleration operator {other:?} (expected Equal or Exists)"),
            ));
        }
    };
    let effect = match t.effect.as_deref().unwrap_or("") {
        "" => None,
        e => Some(taint_effect(ctx, &format!("{field}.effect"), e)?),
    };
    Ok(Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator,
        value: t.value.clone().unwrap_or_default(),
        effect,
        toleration_seconds: t.toleration_seconds,
    })
}

fn policy(
    ctx: &Ctx,
    field: &str,
    value: Option<&str>,
    default: InclusionPolicy,
) -> Result<InclusionPolicy, ConversionError> {
    match value.unwrap_or("") {
        "" => Ok(default),
        "Honor" => Ok(InclusionPolicy::Honor),
        "Ignore" => Ok(InclusionPolicy::Ignore),
        other => Err(ctx.err(
            field,
            format!("unknown inclusion policy {other:?} (expected Honor or Ignore)"),
        )),
    }
}

fn spread(
    ctx: &Ctx,
    field: &str,
    c: &core::TopologySpreadConstraint,
) -> Result<TopologySpreadConstraint, ConversionError> {
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        other => {
            return Err(ctx.err(
                format!("{field}.whenUnsatisfiable"),
                format!("unknown value {other:?} (expected DoNotSchedule or ScheduleAnyway)"),
            ));
        }
    };
    Ok(TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable,
        label_selector: label_selector(
            ctx,
            &format!("{field}.labelSelector"),
            c.label_selector.as_ref(),
        )?,
        min_domains: c.min_domains,
        node_affinity_policy: policy(
            ctx,
            &format!("{field}.nodeAffinityPolicy"),
            c.node_affinity_policy.as_deref(),
            InclusionPolicy::Honor,
        )?,
        node_taints_policy: policy(
            ctx,
            &format!("{field}.nodeTaintsPolicy"),
            c.node_taints_policy.as_deref(),
            InclusionPolicy::Ignore,
        )?,
        match_label_keys: c.match_label_keys.clone().unwrap_or_default(),
    })
}

/// Host ports of the regular containers, as Karpenter's `GetHostPorts` collects them: a
/// port only reserves the host when `hostPort` is set and non-zero.
fn host_ports(spec: &core::PodSpec) -> Vec<HostPort> {
    spec.containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.is_some_and(|h| h > 0))
        .map(|p| HostPort {
            port: p.host_port.unwrap_or_default(),
            protocol: p
                .protocol
                .clone()
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "TCP".into()),
            host_ip: p.host_ip.clone().unwrap_or_default(),
        })
        .collect()
}
