//! Pods' resource limits, which the index does not keep (the solver needs only requests):
//! computed from the pod objects as Kubernetes' `PodLimits` computes them, for
//! `karpenter_nodes_total_pod_limits` and `karpenter_nodes_total_daemon_limits`.

use k8s_openapi::api::core::v1::{Container, Pod};
use karpenter_scheduling::quantity::Quantity;
use karpenter_scheduling::requests::{ContainerResources, pod_requests};
use karpenter_scheduling::resources::Resources;
use std::collections::BTreeMap;

fn parsed(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> BTreeMap<String, Quantity> {
    // A malformed quantity is left out: the API server rejects them, so only a hand-made
    // object could carry one, and the gauge then undercounts rather than failing the pass.
    list.into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), Quantity::parse(&v.0).ok()?)))
        .collect()
}

/// A container's limits in the shape `pod_requests` aggregates.
fn as_requests(c: &Container, init: bool) -> ContainerResources {
    ContainerResources {
        requests: parsed(c.resources.as_ref().and_then(|r| r.limits.as_ref())),
        limits: BTreeMap::new(),
        restart_always: init && c.restart_policy.as_deref() == Some("Always"),
    }
}

/// The pod's limits: containers and sidecars summed, the larger of that and each init
/// step, plus the overhead for the resources that have a limit (Kubernetes' `PodLimits`,
/// the same aggregation as requests), and `pods` = 1 as upstream's `LimitsForPods` counts.
/// Pod-level limits (KEP-2837) replace the container sum for the resources they name.
pub fn pod_limits(pod: &Pod) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::default();
    };
    let containers: Vec<_> = spec
        .containers
        .iter()
        .map(|c| as_requests(c, false))
        .collect();
    let init: Vec<_> = (spec.init_containers.iter().flatten())
        .map(|c| as_requests(c, true))
        .collect();
    let overhead = parsed(spec.overhead.as_ref());
    let bare = pod_requests(&containers, &init, None).unwrap_or_default();
    let mut total = pod_requests(&containers, &init, Some(&overhead)).unwrap_or_default();
    for (name, _) in total.clone().iter() {
        if bare.get(name) == 0 {
            total.set(name, 0);
        }
    }
    for (name, q) in parsed(spec.resources.as_ref().and_then(|r| r.limits.as_ref())) {
        let value = if name == "cpu" {
            q.milli_value()
        } else {
            q.value()
        };
        let extra = overhead.get(&name).map_or(0, |o| {
            if name == "cpu" {
                o.milli_value()
            } else {
                o.value()
            }
        });
        total.set(&name, value.saturating_add(extra));
    }
    total.set("pods", 1);
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;

    fn container(limits: &[(&str, &str)], restart: Option<&str>) -> Container {
        Container {
            name: "c".into(),
            restart_policy: restart.map(str::to_owned),
            resources: Some(ResourceRequirements {
                limits: Some(
                    limits
                        .iter()
                        .map(|(k, v)| ((*k).into(), Q((*v).into())))
                        .collect(),
                ),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }
    }

    #[test]
    fn limits_aggregate_as_kubernetes_does() {
        let pod = Pod {
            spec: Some(PodSpec {
                containers: vec![
                    container(&[("cpu", "500m"), ("memory", "1Gi")], None),
                    container(&[("cpu", "250m")], None),
                ],
                init_containers: Some(vec![
                    container(&[("cpu", "2")], None),
                    container(&[("memory", "256Mi")], Some("Always")),
                ]),
                overhead: Some(
                    [
                        ("cpu".into(), Q("100m".into())),
                        ("nvidia.com/gpu".into(), Q("1".into())),
                    ]
                    .into(),
                ),
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let l = pod_limits(&pod);
        // cpu: max(0.75 + sidecar 0, init 2 + sidecars before it 0) + overhead 0.1.
        assert_eq!(l.get("cpu"), 2_100);
        assert_eq!(l.get("memory"), (1 << 30) + (256 << 20));
        assert_eq!(
            l.get("nvidia.com/gpu"),
            0,
            "no overhead where there is no limit"
        );
        assert_eq!(l.get("pods"), 1);
    }
}
