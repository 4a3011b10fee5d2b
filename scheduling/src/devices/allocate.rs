//! Whether one node's devices can serve every claim placed on it: each `All` request takes
//! every matching device, then each `ExactCount` device is matched to a distinct free device
//! (a bipartite matching, so a request for a specific model never loses to a less specific
//! one that could have used another device). A claim shared by several pods on the node is
//! counted once.

use super::cel::Selector;
use super::{Device, DeviceClaim, DeviceCount};
use std::collections::BTreeSet;

/// A request with its selectors compiled.
#[derive(Debug, Clone)]
pub(crate) struct CompiledRequest {
    name: String,
    class: String,
    selectors: Vec<Selector>,
    count: DeviceCount,
}

impl CompiledRequest {
    fn matches(&self, d: &Device) -> bool {
        self.selectors.iter().all(|s| s.matches(d))
    }

    fn describe(&self) -> String {
        let n = match self.count {
            DeviceCount::ExactCount(n) => format!("{n} device(s)"),
            DeviceCount::All => "all devices".to_string(),
        };
        let class = if self.class.is_empty() {
            String::new()
        } else {
            format!(" of class {}", self.class)
        };
        let sel: Vec<&str> = self.selectors.iter().map(|s| s.expression()).collect();
        if sel.is_empty() {
            format!("{n}{class}")
        } else {
            format!("{n}{class} matching {}", sel.join(" && "))
        }
    }
}

/// A claim with its requests compiled.
#[derive(Debug, Clone)]
pub(crate) struct CompiledClaim {
    key: String,
    requests: Vec<CompiledRequest>,
}

/// Compiles a pod's claims; the first claim that cannot be simulated (unsupported, or a
/// selector outside the CEL subset) is an error naming it.
pub(crate) fn compile_claims(claims: &[DeviceClaim]) -> Result<Vec<CompiledClaim>, String> {
    claims
        .iter()
        .map(|c| {
            if let Some(why) = &c.unsupported {
                return Err(format!("ResourceClaim {}: {why}", c.key));
            }
            let requests = c
                .requests
                .iter()
                .map(|r| {
                    let selectors = r
                        .selectors
                        .iter()
                        .map(|s| Selector::compile(s))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| format!("ResourceClaim {} request {}: {e}", c.key, r.name))?;
                    Ok(CompiledRequest {
                        name: r.name.clone(),
                        class: r.device_class.clone(),
                        selectors,
                        count: r.count,
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(CompiledClaim {
                key: c.key.clone(),
                requests,
            })
        })
        .collect()
}

/// Tries to give `unit` a device, moving earlier units to other devices when needed (Kuhn's
/// augmenting path).
fn augment(
    unit: usize,
    wants: &[Vec<usize>],
    owner: &mut [Option<usize>],
    seen: &mut [bool],
) -> bool {
    for &d in &wants[unit] {
        if seen[d] {
            continue;
        }
        seen[d] = true;
        if owner[d].is_none_or(|u| augment(u, wants, owner, seen)) {
            owner[d] = Some(unit);
            return true;
        }
    }
    false
}

/// Whether `devices` serve every claim in `claims` at once (claims with the same key once);
/// otherwise which request cannot be served, for the pod's reason.
pub(crate) fn allocate<'a>(
    devices: &[Device],
    claims: impl IntoIterator<Item = &'a CompiledClaim>,
) -> Result<(), String> {
    let mut seen_keys = BTreeSet::new();
    let mut taken = vec![false; devices.len()];
    // (claim key, request) for each device an ExactCount request wants.
    let mut units: Vec<(&str, &CompiledRequest)> = Vec::new();
    for claim in claims {
        if !seen_keys.insert(claim.key.as_str()) {
            continue;
        }
        for r in &claim.requests {
            match r.count {
                DeviceCount::All => {
                    let mut any = false;
                    for (i, d) in devices.iter().enumerate() {
                        if r.matches(d) {
                            if taken[i] {
                                return Err(unserved(&claim.key, r, "a matching device is taken"));
                            }
                            taken[i] = true;
                            any = true;
                        }
                    }
                    if !any {
                        return Err(unserved(&claim.key, r, "no device matches"));
                    }
                }
                DeviceCount::ExactCount(n) => {
                    units.extend(std::iter::repeat_n((claim.key.as_str(), r), n as usize))
                }
            }
        }
    }
    if units.is_empty() {
        return Ok(());
    }
    let wants: Vec<Vec<usize>> = units
        .iter()
        .map(|(_, r)| {
            (0..devices.len())
                .filter(|&i| !taken[i] && r.matches(&devices[i]))
                .collect()
        })
        .collect();
    let mut owner = vec![None; devices.len()];
    for u in 0..units.len() {
        let mut seen = vec![false; devices.len()];
        if !augment(u, &wants, &mut owner, &mut seen) {
            let (key, r) = units[u];
            let matching = wants[u].len();
            return Err(unserved(
                key,
                r,
                &format!("{matching} free matching device(s) for all requests on the node"),
            ));
        }
    }
    Ok(())
}

fn unserved(key: &str, r: &CompiledRequest, why: &str) -> String {
    format!(
        "ResourceClaim {key} request {} ({}): {why}",
        r.name,
        r.describe()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::{DeviceAttribute, DeviceRequest};
    use std::collections::BTreeMap;

    fn gpus(models: &[&str]) -> Vec<Device> {
        models
            .iter()
            .enumerate()
            .map(|(i, m)| Device {
                driver: "gpu.example.com".into(),
                pool: "n".into(),
                name: format!("gpu-{i}"),
                attributes: BTreeMap::from([(
                    "model".into(),
                    DeviceAttribute::String((*m).into()),
                )]),
                capacity: BTreeMap::new(),
            })
            .collect()
    }

    fn claim(key: &str, model: Option<&str>, count: DeviceCount) -> DeviceClaim {
        let mut selectors = vec![r#"device.driver == "gpu.example.com""#.to_string()];
        if let Some(m) = model {
            selectors.push(format!(
                r#"device.attributes["gpu.example.com"].model == "{m}""#
            ));
        }
        DeviceClaim {
            key: key.into(),
            requests: vec![DeviceRequest {
                name: "gpu".into(),
                device_class: "gpu.example.com".into(),
                selectors,
                count,
            }],
            unsupported: None,
        }
    }

    fn run(devices: &[Device], claims: &[DeviceClaim]) -> Result<(), String> {
        let c = compile_claims(claims)?;
        allocate(devices, &c)
    }

    #[test]
    fn counts_devices_across_claims_and_shares_a_claim_once() {
        let d = gpus(&["A", "A"]);
        let one = |k: &str| claim(k, None, DeviceCount::ExactCount(1));
        assert!(run(&d, &[one("ns/a"), one("ns/b")]).is_ok());
        let err = run(&d, &[one("ns/a"), one("ns/b"), one("ns/c")]).unwrap_err();
        assert!(err.contains("ResourceClaim ns/c request gpu"), "{err}");
        // The same claim named by two pods takes its devices once.
        assert!(run(&d, &[one("ns/a"), one("ns/a"), one("ns/b")]).is_ok());
        assert!(run(&d, &[claim("ns/x", None, DeviceCount::ExactCount(3))]).is_err());
    }

    #[test]
    fn matching_reassigns_devices_for_specific_requests() {
        let d = gpus(&["A", "B"]);
        // The unspecific request comes first and could take A; the matching moves it to B.
        let any = claim("ns/any", None, DeviceCount::ExactCount(1));
        let a = claim("ns/a", Some("A"), DeviceCount::ExactCount(1));
        assert!(run(&d, &[any.clone(), a.clone()]).is_ok());
        let a2 = claim("ns/a2", Some("A"), DeviceCount::ExactCount(1));
        assert!(run(&d, &[a, a2]).is_err());
    }

    #[test]
    fn all_mode_takes_every_matching_device_and_needs_one() {
        let d = gpus(&["A", "A", "B"]);
        let all_a = claim("ns/all", Some("A"), DeviceCount::All);
        assert!(
            run(
                &d,
                &[
                    all_a.clone(),
                    claim("ns/b", Some("B"), DeviceCount::ExactCount(1))
                ]
            )
            .is_ok()
        );
        assert!(
            run(
                &d,
                &[
                    all_a.clone(),
                    claim("ns/x", None, DeviceCount::ExactCount(2))
                ]
            )
            .is_err()
        );
        assert!(run(&d, &[claim("ns/c", Some("C"), DeviceCount::All)]).is_err());
        assert!(run(&[], &[claim("ns/c", None, DeviceCount::ExactCount(1))]).is_err());
    }

    #[test]
    fn unsupported_claims_and_selectors_are_reported() {
        let mut c = claim("ns/a", None, DeviceCount::ExactCount(1));
        c.unsupported = Some("constraints are not simulated".into());
        let err = compile_claims(&[c]).unwrap_err();
        assert_eq!(err, "ResourceClaim ns/a: constraints are not simulated");
        let mut c = claim("ns/a", None, DeviceCount::ExactCount(1));
        c.requests[0].selectors.push("device.foo".into());
        let err = compile_claims(&[c]).unwrap_err();
        assert!(
            err.contains("ResourceClaim ns/a request gpu") && err.contains("device.foo"),
            "{err}"
        );
    }
}
