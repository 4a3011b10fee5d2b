//! A pod's effective resource requests, computed as Kubernetes computes them.

use crate::quantity::{Quantity, QuantityFormat};
use crate::resources::{ResourceError, Resources, qualified_name_error};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The resources of one container as written in the pod spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerResources {
    /// `resources.requests`.
    #[serde(default)]
    pub requests: BTreeMap<String, Quantity>,
    /// `resources.limits`; a resource with a limit but no request requests its limit, as the
    /// API server's defaulting does.
    #[serde(default)]
    pub limits: BTreeMap<String, Quantity>,
    /// For init containers: `restartPolicy: Always` (a sidecar that keeps running).
    #[serde(default)]
    pub restart_always: bool,
}

/// The effective requests of a pod: max(largest init container, sum of containers), where
/// restartable (sidecar) init containers add to everything that starts after them, plus the
/// pod overhead — the rules of `resourcehelper.PodRequests`.
///
/// Precisely: each container requests its explicit requests plus, for resources with only a
/// limit, that limit (API-server defaulting). The steady state is the sum of all containers
/// plus all sidecars (`restart_always` init containers). Each init container, in order, needs
/// its own requests plus the sidecars started before it (a sidecar's step is the sidecars up
/// to and including itself). The result is the per-resource maximum of the steady state and
/// every init step, plus the overhead. Sums are exact; rounding to scheduler units happens
/// once on the total. Pod-level resources and in-place resize status are not modelled.
///
/// Errors when any requests, limits or overhead entry is negative or has an invalid name.
pub fn pod_requests(
    containers: &[ContainerResources],
    init_containers: &[ContainerResources],
    overhead: Option<&BTreeMap<String, Quantity>>,
) -> Result<Resources, ResourceError> {
    // Work in exact nanos and convert once at the end, as upstream sums `Quantity` values and
    // the scheduler rounds the pod total, not each container.
    let mut total = Amounts::new();
    for container in containers {
        add(&mut total, &effective_requests(container)?);
    }

    // Sidecars keep running, so each one adds to the steady state and to every init step
    // after it; a regular init container runs alone next to the sidecars started before it.
    let mut sidecars = Amounts::new();
    let mut init_peak = Amounts::new();
    for container in init_containers {
        let requests = effective_requests(container)?;
        if container.restart_always {
            add(&mut total, &requests);
            add(&mut sidecars, &requests);
            max_into(&mut init_peak, &sidecars);
        } else {
            let mut step = requests;
            add(&mut step, &sidecars);
            max_into(&mut init_peak, &step);
        }
    }
    max_into(&mut total, &init_peak);

    if let Some(overhead) = overhead {
        let mut extra = Amounts::new();
        for (name, quantity) in overhead {
            add_one(&mut extra, name, quantity)?;
        }
        add(&mut total, &extra);
    }

    let quantities: Vec<(&str, Quantity)> = total
        .iter()
        .map(|(name, nanos)| {
            (
                name.as_str(),
                Quantity::from_nanos(*nanos, QuantityFormat::DecimalSI),
            )
        })
        .collect();
    Resources::from_quantities(quantities.iter().map(|(name, q)| (*name, q)))
}

/// Exact amounts in nanos by resource name.
type Amounts = BTreeMap<String, i128>;

/// A container's requests after the API server's defaulting: an explicit request is kept and
/// a resource with only a limit requests that limit. Every entry of both maps is validated as
/// the API server would (qualified name, non-negative).
fn effective_requests(container: &ContainerResources) -> Result<Amounts, ResourceError> {
    let mut out = Amounts::new();
    for (name, quantity) in &container.requests {
        add_one(&mut out, name, quantity)?;
    }
    for (name, quantity) in &container.limits {
        validate(name, quantity)?;
        if !container.requests.contains_key(name) {
            add_one(&mut out, name, quantity)?;
        }
    }
    Ok(out)
}

fn validate(name: &str, quantity: &Quantity) -> Result<(), ResourceError> {
    if let Some(reason) = qualified_name_error(name) {
        return Err(ResourceError::InvalidName {
            name: name.to_owned(),
            reason,
        });
    }
    if quantity.nanos() < 0 {
        return Err(ResourceError::Negative {
            name: name.to_owned(),
            quantity: quantity.to_string(),
        });
    }
    Ok(())
}

fn add_one(into: &mut Amounts, name: &str, quantity: &Quantity) -> Result<(), ResourceError> {
    validate(name, quantity)?;
    let entry = into.entry(name.to_owned()).or_insert(0);
    *entry = entry.saturating_add(quantity.nanos());
    Ok(())
}

fn add(into: &mut Amounts, other: &Amounts) {
    for (name, nanos) in other {
        let entry = into.entry(name.clone()).or_insert(0);
        *entry = entry.saturating_add(*nanos);
    }
}

fn max_into(into: &mut Amounts, other: &Amounts) {
    for (name, nanos) in other {
        let entry = into.entry(name.clone()).or_insert(0);
        *entry = (*entry).max(*nanos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity::parse(v).unwrap()))
            .collect()
    }

    fn requests(items: &[(&str, &str)]) -> ContainerResources {
        ContainerResources {
            requests: list(items),
            ..Default::default()
        }
    }

    fn sidecar(items: &[(&str, &str)]) -> ContainerResources {
        ContainerResources {
            restart_always: true,
            ..requests(items)
        }
    }

    fn res(items: &[(&str, &str)]) -> Resources {
        Resources::parse(items).unwrap()
    }

    #[test]
    fn empty_pod_requests_nothing() {
        assert_eq!(pod_requests(&[], &[], None).unwrap(), Resources::default());
    }

    #[test]
    fn containers_are_summed() {
        let got = pod_requests(
            &[
                requests(&[("cpu", "100m"), ("memory", "128Mi")]),
                requests(&[("cpu", "250m"), ("nvidia.com/gpu", "1")]),
            ],
            &[],
            None,
        )
        .unwrap();
        assert_eq!(
            got,
            res(&[
                ("cpu", "350m"),
                ("memory", "128Mi"),
                ("nvidia.com/gpu", "1")
            ])
        );
    }

    #[test]
    fn sums_are_exact_before_rounding() {
        let half = requests(&[("memory", "0.5"), ("cpu", "0.5m")]);
        let got = pod_requests(&[half.clone(), half], &[], None).unwrap();
        assert_eq!(got.memory, 1);
        assert_eq!(got.cpu_millis, 1);
    }

    #[test]
    fn limits_default_missing_requests() {
        // Limits only: requests default to the limits.
        let limits_only = ContainerResources {
            limits: list(&[("cpu", "1"), ("memory", "1Gi")]),
            ..Default::default()
        };
        assert_eq!(
            pod_requests(&[limits_only], &[], None).unwrap(),
            res(&[("cpu", "1"), ("memory", "1Gi")])
        );
        // An explicit request wins over the limit, even an explicit zero.
        let mixed = ContainerResources {
            requests: list(&[("cpu", "200m"), ("memory", "0")]),
            limits: list(&[("cpu", "1"), ("memory", "1Gi"), ("nvidia.com/gpu", "2")]),
            restart_always: false,
        };
        assert_eq!(
            pod_requests(&[mixed], &[], None).unwrap(),
            res(&[("cpu", "200m"), ("nvidia.com/gpu", "2")])
        );
        // Defaulting applies to init containers too.
        let init = ContainerResources {
            limits: list(&[("memory", "2Gi")]),
            ..Default::default()
        };
        assert_eq!(
            pod_requests(&[requests(&[("memory", "1Gi")])], &[init], None)
                .unwrap()
                .memory,
            2 << 30
        );
    }

    #[test]
    fn big_init_container_dominates_the_sum() {
        let got = pod_requests(
            &[
                requests(&[("cpu", "1"), ("memory", "1Gi")]),
                requests(&[("cpu", "1")]),
            ],
            &[
                requests(&[("cpu", "3"), ("memory", "512Mi")]),
                requests(&[("memory", "4Gi")]),
            ],
            None,
        )
        .unwrap();
        // Each resource takes its own maximum: cpu from the first init, memory from the second.
        assert_eq!(got, res(&[("cpu", "3"), ("memory", "4Gi")]));
    }

    #[test]
    fn sidecar_before_big_init_container_adds_to_it() {
        let got = pod_requests(
            &[requests(&[("cpu", "1")])],
            &[sidecar(&[("cpu", "500m")]), requests(&[("cpu", "3")])],
            None,
        )
        .unwrap();
        // Init step: 3 + 0.5 running sidecar; steady state: 1 + 0.5.
        assert_eq!(got.cpu_millis, 3500);
    }

    #[test]
    fn sidecar_after_big_init_container_does_not() {
        let got = pod_requests(
            &[requests(&[("cpu", "1")])],
            &[requests(&[("cpu", "3")]), sidecar(&[("cpu", "500m")])],
            None,
        )
        .unwrap();
        assert_eq!(got.cpu_millis, 3000);
    }

    #[test]
    fn sidecars_always_add_to_the_steady_state() {
        let got = pod_requests(
            &[requests(&[("cpu", "2"), ("memory", "1Gi")])],
            &[
                sidecar(&[("cpu", "1"), ("memory", "256Mi")]),
                requests(&[("cpu", "2")]),
                sidecar(&[("memory", "256Mi")]),
            ],
            None,
        )
        .unwrap();
        // Steady: cpu 2+1 = 3, memory 1Gi+512Mi; init step: cpu 2+1 = 3, memory 256Mi.
        assert_eq!(got, res(&[("cpu", "3"), ("memory", "1536Mi")]));
    }

    #[test]
    fn a_sidecar_heavier_than_the_containers_counts_alone() {
        // A pod whose only long-running container is a sidecar still requests it.
        let got = pod_requests(&[], &[sidecar(&[("memory", "1Gi")])], None).unwrap();
        assert_eq!(got.memory, 1 << 30);
    }

    #[test]
    fn restart_always_is_ignored_on_regular_containers() {
        let got = pod_requests(&[sidecar(&[("cpu", "1")])], &[], None).unwrap();
        assert_eq!(got.cpu_millis, 1000);
    }

    #[test]
    fn overhead_is_added_after_the_maximum() {
        let overhead = list(&[("cpu", "250m"), ("memory", "120Mi")]);
        let got = pod_requests(
            &[requests(&[("cpu", "1")])],
            &[requests(&[("cpu", "2")])],
            Some(&overhead),
        )
        .unwrap();
        assert_eq!(got, res(&[("cpu", "2250m"), ("memory", "120Mi")]));
    }

    #[test]
    fn invalid_entries_are_errors() {
        let negative = requests(&[("cpu", "-1")]);
        assert!(
            matches!(pod_requests(&[negative], &[], None), Err(ResourceError::Negative { name, .. }) if name == "cpu")
        );
        let bad_limit = ContainerResources {
            limits: list(&[("bad name", "1")]),
            ..Default::default()
        };
        assert!(
            matches!(pod_requests(&[], &[bad_limit], None), Err(ResourceError::InvalidName { name, .. }) if name == "bad name")
        );
        let overhead = list(&[("memory", "-1Mi")]);
        assert!(matches!(
            pod_requests(&[], &[], Some(&overhead)),
            Err(ResourceError::Negative { quantity, .. }) if quantity == "-1Mi"
        ));
    }

    #[test]
    fn container_resources_deserialize_from_pod_spec_shape() {
        let c: ContainerResources = serde_json::from_str(
            r#"{"requests":{"cpu":"100m"},"limits":{"memory":"1Gi"},"restartAlways":true}"#,
        )
        .unwrap();
        assert!(c.restart_always);
        assert_eq!(
            pod_requests(&[c], &[], None).unwrap(),
            res(&[("cpu", "100m"), ("memory", "1Gi")])
        );
    }
}
