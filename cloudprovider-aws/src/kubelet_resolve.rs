//! The kubelet values an instance type gets from its class: `maxPods`, `kubeReserved` and
//! `systemReserved` with their CEL expressions evaluated for the type (upstream's
//! `resolveMaxPods` and `resolveResourceExpressions`). `maxPods` is resolved first, so the
//! reservations' `max_pods` is the resolved count.
//!
//! With the `NodeClassCEL` gate off an expression is not evaluated: `maxPods` falls back to
//! the default count and an expression-valued reservation is dropped, as upstream does (the
//! class is also reported invalid, so nothing launches from it).

use crate::kubelet::{KubeletConfiguration, MaxPods, ParsedKubelet};
use crate::kubelet_cel::{Expression, InstanceTypeVars, compile, format_reservation};
use karpenter_catalog::CatalogueEntry;
use karpenter_catalog::allocatable::{eni_limited_pods, pods_capacity};
use karpenter_scheduling::quantity::Quantity;
use std::collections::BTreeMap;

/// What one instance type gets.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct TypeKubelet {
    /// `maxPods` (none: the default count).
    pub max_pods: Option<u32>,
    /// `kubeReserved`, as quantities.
    pub kube_reserved: BTreeMap<String, String>,
    /// `systemReserved`, as quantities.
    pub system_reserved: BTreeMap<String, String>,
}

/// A class's kubelet values, with its expressions compiled once.
#[derive(Debug, Clone)]
pub struct KubeletResolver {
    parsed: ParsedKubelet,
    max_pods: Option<Expression>,
    kube_reserved: BTreeMap<String, Expression>,
    system_reserved: BTreeMap<String, Expression>,
    reserved_enis: u32,
}

fn compiled(
    field: &str,
    map: &BTreeMap<String, String>,
    cel: bool,
) -> Result<BTreeMap<String, Expression>, String> {
    map.iter()
        .filter(|(_, v)| cel && Quantity::parse(v).is_err())
        .map(|(k, v)| {
            compile(v)
                .map(|e| (k.clone(), e))
                .map_err(|e| format!("spec.kubelet.{field}[{k}]: {e}"))
        })
        .collect()
}

impl KubeletResolver {
    /// Compiles the expressions of `parsed` (none with `cel` off).
    ///
    /// # Errors
    /// An expression that does not compile, naming its field.
    pub fn new(parsed: ParsedKubelet, cel: bool, reserved_enis: u32) -> Result<Self, String> {
        let max_pods = match &parsed.max_pods {
            Some(MaxPods::Expression(e)) if cel => {
                Some(compile(e).map_err(|e| format!("spec.kubelet.maxPods: {e}"))?)
            }
            _ => None,
        };
        Ok(Self {
            kube_reserved: compiled("kubeReserved", &parsed.kube_reserved, cel)?,
            system_reserved: compiled("systemReserved", &parsed.system_reserved, cel)?,
            max_pods,
            parsed,
            reserved_enis,
        })
    }

    /// Whether any value depends on the instance type.
    pub fn per_type(&self) -> bool {
        self.max_pods.is_some()
            || !self.kube_reserved.is_empty()
            || !self.system_reserved.is_empty()
    }

    /// The parsed configuration.
    pub fn parsed(&self) -> &ParsedKubelet {
        &self.parsed
    }

    fn pods_per_core(&self) -> Option<u32> {
        self.parsed
            .pods_per_core
            .and_then(|p| u32::try_from(p).ok())
    }

    /// The values every type shares: a fixed `maxPods` and the reservations that are
    /// quantities.
    pub fn shared(&self) -> TypeKubelet {
        let quantities = |m: &BTreeMap<String, String>| {
            m.iter()
                .filter(|(_, v)| Quantity::parse(v).is_ok())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        TypeKubelet {
            max_pods: match self.parsed.max_pods {
                Some(MaxPods::Count(n)) => u32::try_from(n).ok(),
                _ => None,
            },
            kube_reserved: quantities(&self.parsed.kube_reserved),
            system_reserved: quantities(&self.parsed.system_reserved),
        }
    }

    fn vars(&self, entry: &CatalogueEntry, max_pods: Option<u32>) -> InstanceTypeVars {
        let eni = eni_limited_pods(
            entry.max_network_interfaces,
            entry.ipv4_per_interface,
            self.reserved_enis,
        );
        InstanceTypeVars {
            vcpus: i64::from(entry.vcpu),
            memory_mib: i64::try_from(entry.memory_mib).unwrap_or(i64::MAX),
            default_enis: i64::from(entry.max_network_interfaces),
            ips_per_eni: i64::from(entry.ipv4_per_interface),
            max_pods: pods_capacity(eni, max_pods, self.pods_per_core(), entry.vcpu),
            instance_type: entry.name.clone(),
        }
    }

    /// `raw` with `values` in place of its `maxPods`, `kubeReserved` and `systemReserved`:
    /// the configuration a node of those values boots with (an unresolved expression is
    /// dropped, leaving the AMI family's default).
    pub fn resolved_config(
        raw: &KubeletConfiguration,
        values: &TypeKubelet,
    ) -> KubeletConfiguration {
        let mut out = raw.clone();
        let map = |m: &BTreeMap<String, String>| serde_json::to_value(m).unwrap_or_default();
        match values.max_pods {
            Some(n) => out.0.insert("maxPods".into(), n.into()),
            None => out.0.remove("maxPods"),
        };
        for (field, m) in [
            ("kubeReserved", &values.kube_reserved),
            ("systemReserved", &values.system_reserved),
        ] {
            if m.is_empty() {
                out.0.remove(field);
            } else {
                out.0.insert(field.into(), map(m));
            }
        }
        out
    }

    /// The values of `entry`.
    ///
    /// # Errors
    /// An expression that fails for this type, or a `maxPods` outside [0, 2³¹), naming the
    /// field, the expression and the type.
    pub fn for_type(&self, entry: &CatalogueEntry) -> Result<TypeKubelet, String> {
        let mut out = self.shared();
        if let Some(e) = &self.max_pods {
            // Its own `max_pods` is the count without it.
            let n = e
                .evaluate(&self.vars(entry, None))
                .map_err(|e| format!("spec.kubelet.maxPods: {e}"))?;
            let n = u32::try_from(n)
                .ok()
                .filter(|n| i32::try_from(*n).is_ok())
                .ok_or_else(|| {
                    format!(
                        "spec.kubelet.maxPods: expression {:?} for {} evaluated to {n}, outside the valid range [0, {}]",
                        e.source(),
                        entry.name,
                        i32::MAX
                    )
                })?;
            out.max_pods = Some(n);
        }
        if self.kube_reserved.is_empty() && self.system_reserved.is_empty() {
            return Ok(out);
        }
        let vars = self.vars(entry, out.max_pods);
        for (field, exprs, target) in [
            ("kubeReserved", &self.kube_reserved, &mut out.kube_reserved),
            (
                "systemReserved",
                &self.system_reserved,
                &mut out.system_reserved,
            ),
        ] {
            for (key, e) in exprs {
                let n = e
                    .evaluate(&vars)
                    .map_err(|err| format!("spec.kubelet.{field}[{key}]: {err}"))?;
                if n < 0 {
                    return Err(format!(
                        "spec.kubelet.{field}[{key}]: expression {:?} for {} evaluated to a negative value {n}",
                        e.source(),
                        entry.name
                    ));
                }
                target.insert(key.clone(), format_reservation(key, n));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::KubeletConfiguration;
    use serde_json::json;

    fn entry(name: &str, vcpu: u32, memory_mib: u64, enis: u32, ips: u32) -> CatalogueEntry {
        CatalogueEntry {
            name: name.into(),
            family: "m5".into(),
            size: "large".into(),
            vcpu,
            memory_mib,
            architecture: "amd64".into(),
            cpu_manufacturer: None,
            hypervisor: None,
            bare_metal: false,
            burstable: false,
            current_generation: true,
            max_network_interfaces: enis,
            ipv4_per_interface: ips,
            efa_supported: false,
            max_efa_interfaces: None,
            network_performance: None,
            local_storage_gb: 0,
            gpu: None,
            neuron_devices: 0,
            usage_classes: vec!["on-demand".into()],
            on_demand_price_per_hour_usd: 0.1,
            zones: vec!["us-east-1a".into()],
        }
    }

    fn resolver(kubelet: serde_json::Value, cel: bool) -> KubeletResolver {
        let k: KubeletConfiguration = serde_json::from_value(kubelet).unwrap();
        KubeletResolver::new(k.parse().unwrap(), cel, 0).unwrap()
    }

    #[test]
    fn expressions_are_evaluated_per_type_max_pods_first() {
        let r = resolver(
            json!({"maxPods": "min(110, vcpus * 8)", "podsPerCore": 20,
                   "kubeReserved": {"cpu": "vcpus * 25", "memory": "max_pods * 11 + 255", "pid": "100"},
                   "systemReserved": {"memory": "memory_mib / 100"}}),
            true,
        );
        assert!(r.per_type());
        let small = r.for_type(&entry("m5.large", 2, 8192, 3, 10)).unwrap();
        assert_eq!(small.max_pods, Some(16));
        assert_eq!(small.kube_reserved["cpu"], "50m");
        // max_pods is the resolved 16: 16 * 11 + 255 = 431, rounded up to 432Mi.
        assert_eq!(small.kube_reserved["memory"], "432Mi");
        assert_eq!(
            small.kube_reserved["pid"], "100",
            "a quantity stays as written"
        );
        assert_eq!(small.system_reserved["memory"], "96Mi");
        let big = r
            .for_type(&entry("m5.24xlarge", 96, 393_216, 15, 50))
            .unwrap();
        assert_eq!(big.max_pods, Some(110));
        assert_eq!(big.kube_reserved["cpu"], "2400m");
    }

    #[test]
    fn max_pods_expression_sees_the_default_count() {
        // Without maxPods the m5.large count is 3 × (10 − 1) + 2 = 29.
        let r = resolver(json!({"maxPods": "max_pods - 4"}), true);
        assert_eq!(
            r.for_type(&entry("m5.large", 2, 8192, 3, 10))
                .unwrap()
                .max_pods,
            Some(25)
        );
        let r = resolver(json!({"maxPods": "max_pods - 40"}), true);
        let e = r.for_type(&entry("m5.large", 2, 8192, 3, 10)).unwrap_err();
        assert!(e.contains("outside the valid range"), "{e}");
        let r = resolver(json!({"kubeReserved": {"cpu": "1 - vcpus"}}), true);
        let e = r.for_type(&entry("m5.large", 2, 8192, 3, 10)).unwrap_err();
        assert!(
            e.contains("negative") && e.contains("kubeReserved[cpu]"),
            "{e}"
        );
    }

    #[test]
    fn the_node_boots_with_the_resolved_values() {
        let raw: KubeletConfiguration = serde_json::from_value(json!({
            "maxPods": "vcpus * 10", "kubeReserved": {"cpu": "vcpus * 25"},
            "containerLogMaxSize": "50Mi"
        }))
        .unwrap();
        let r = KubeletResolver::new(raw.parse().unwrap(), true, 0).unwrap();
        let values = r.for_type(&entry("m5.large", 2, 8192, 3, 10)).unwrap();
        let config = KubeletResolver::resolved_config(&raw, &values);
        assert_eq!(
            serde_json::to_value(&config).unwrap(),
            json!({"maxPods": 20, "kubeReserved": {"cpu": "50m"}, "containerLogMaxSize": "50Mi"})
        );
        let off = KubeletResolver::new(raw.parse().unwrap(), false, 0).unwrap();
        let config = KubeletResolver::resolved_config(&raw, &off.shared());
        assert_eq!(
            serde_json::to_value(&config).unwrap(),
            json!({"containerLogMaxSize": "50Mi"})
        );
    }

    #[test]
    fn with_the_gate_off_expressions_fall_back() {
        let r = resolver(
            json!({"maxPods": "vcpus * 8", "kubeReserved": {"cpu": "vcpus * 25", "memory": "1Gi"}}),
            false,
        );
        assert!(!r.per_type());
        let t = r.for_type(&entry("m5.large", 2, 8192, 3, 10)).unwrap();
        assert_eq!(t.max_pods, None);
        assert_eq!(
            t.kube_reserved,
            [("memory".to_string(), "1Gi".to_string())].into()
        );
        let fixed = resolver(json!({"maxPods": 42}), false);
        assert_eq!(fixed.shared().max_pods, Some(42));
    }
}
