//! Synthetic instance types of Karpenter's own test suite (`pkg/cloudprovider/fake`), so
//! tests and benchmarks can be compared with upstream's scheduling benchmark, which runs
//! against `InstanceTypes(400)`.

use karpenter_scheduling::labels;
use karpenter_scheduling::model::{InstanceType, Offering, Overhead};
use karpenter_scheduling::requirements::{Operator, Requirement, Requirements};
use karpenter_scheduling::resources::Resources;
use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

/// Upstream's fake `size` label: `large` above 4 cpu and 8 GiB, else `small`.
pub const LABEL_SIZE: &str = "size";
/// Upstream's fake `special` label: `optional` on large types, absent otherwise.
pub const LABEL_SPECIAL: &str = "special";
/// Upstream's fake `integer` label: the cpu count.
pub const LABEL_INTEGER: &str = "integer";

/// Zones of the synthetic types.
pub const TEST_ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];

/// Number of types in upstream's scheduling benchmark.
pub const BENCHMARK_INSTANCE_TYPE_COUNT: usize = 400;

const GIB: i64 = 1024 * 1024 * 1024;

/// Upstream's `PriceFromResources`: 0.1 per cpu plus 0.1 per 10⁹ bytes of memory.
pub fn price_from_resources(cpu_millis: i64, memory_bytes: i64) -> f64 {
    0.1 * (cpu_millis as f64 / 1000.0) + 0.1 * memory_bytes as f64 / 1e9
}

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    // Fixed keys and operators with well-formed values: a failure is a defect in this file.
    Requirement::new(key, op, values.iter().copied())
        .unwrap_or_else(|e| panic!("synthetic requirement on {key}: {e}"))
}

/// The distinct values of `field` over the available offerings, sorted.
fn available(offerings: &[Offering], field: fn(&Offering) -> &String) -> Vec<&str> {
    let set: BTreeSet<&str> = offerings
        .iter()
        .filter(|o| o.available)
        .map(|o| field(o).as_str())
        .collect();
    set.into_iter().collect()
}

/// Upstream's `NewInstanceType`: the given offerings, arch, operating systems and resources,
/// and a kube-reserved overhead of 100m cpu and 10Mi memory.
fn synthetic(
    name: String,
    arch: &str,
    os: &[&str],
    cpu_millis: i64,
    memory: i64,
    pods: i64,
    offerings: Vec<Offering>,
) -> InstanceType {
    let zones = available(&offerings, |o| &o.zone);
    let cts = available(&offerings, |o| &o.capacity_type);
    let large = cpu_millis > 4000 && memory > 8 * GIB;
    let cpu_value = (cpu_millis + 999) / 1000;
    let mut r = Requirements::new();
    r.add(req(labels::INSTANCE_TYPE, Operator::In, &[&name]));
    r.add(req(labels::ARCH, Operator::In, &[arch]));
    r.add(req(labels::OS, Operator::In, os));
    r.add(req(labels::ZONE, Operator::In, &zones));
    r.add(req(labels::CAPACITY_TYPE, Operator::In, &cts));
    r.add(req(
        LABEL_SIZE,
        Operator::In,
        &[if large { "large" } else { "small" }],
    ));
    r.add(if large {
        req(LABEL_SPECIAL, Operator::In, &["optional"])
    } else {
        req(LABEL_SPECIAL, Operator::DoesNotExist, &[])
    });
    r.add(req(LABEL_INTEGER, Operator::In, &[&cpu_value.to_string()]));
    InstanceType {
        devices: Vec::new(),
        name,
        requirements: r,
        capacity: Resources {
            cpu_millis,
            memory,
            pods,
            ..Resources::default()
        },
        overhead: Overhead {
            kube_reserved: Resources {
                cpu_millis: 100,
                memory: 10 * 1024 * 1024,
                ..Resources::default()
            },
            ..Overhead::default()
        },
        offerings,
    }
}

fn offering(zone: &str, capacity_type: &str, price: f64) -> Offering {
    Offering {
        zone: zone.into(),
        capacity_type: capacity_type.into(),
        price,
        available: true,
        reservation: None,
    }
}

/// Upstream's `InstanceTypes(n)`: type i (0-based) is `fake-it-{i}` with i+1 cpu, 2(i+1) GiB
/// memory and 10(i+1) pods, amd64, operating systems darwin/linux/windows, offerings spot in
/// test-zone-1 and -2 and on-demand in test-zone-1, -2 and -3, all at
/// [`price_from_resources`].
pub fn instance_types(n: usize) -> Vec<Arc<InstanceType>> {
    (0..n)
        .map(|i| {
            let k = i as i64 + 1;
            let (cpu, memory) = (k * 1000, 2 * k * GIB);
            let price = price_from_resources(cpu, memory);
            let offerings = vec![
                offering(TEST_ZONES[0], labels::CAPACITY_TYPE_SPOT, price),
                offering(TEST_ZONES[1], labels::CAPACITY_TYPE_SPOT, price),
                offering(TEST_ZONES[0], labels::CAPACITY_TYPE_ON_DEMAND, price),
                offering(TEST_ZONES[1], labels::CAPACITY_TYPE_ON_DEMAND, price),
                offering(TEST_ZONES[2], labels::CAPACITY_TYPE_ON_DEMAND, price),
            ];
            let os = ["darwin", "linux", "windows"];
            Arc::new(synthetic(
                format!("fake-it-{i}"),
                "amd64",
                &os,
                cpu,
                memory,
                10 * k,
                offerings,
            ))
        })
        .collect()
}

/// The 400 types of upstream's scheduling benchmark ([`instance_types`]`(400)`), built once
/// per process; the `Arc`s are shared, so cloning the vector is cheap.
pub fn benchmark_instance_types() -> Vec<Arc<InstanceType>> {
    static TYPES: OnceLock<Vec<Arc<InstanceType>>> = OnceLock::new();
    TYPES
        .get_or_init(|| instance_types(BENCHMARK_INSTANCE_TYPE_COUNT))
        .clone()
}

/// Upstream's `InstanceTypesAssorted`: every combination of cpu {1…64}, memory {1…128 GiB},
/// zone, capacity type, OS (linux or windows) and arch (amd64 or arm64), each with a single
/// offering and 5 pods, named `{cpu}-cpu-{mem}-mem-{arch}-{os}-{zone}-{capacity type}`.
pub fn assorted_instance_types() -> Vec<Arc<InstanceType>> {
    let mut out = Vec::new();
    for cpu in [1i64, 2, 4, 8, 16, 32, 64] {
        for mem in [1i64, 2, 4, 8, 16, 32, 64, 128] {
            for zone in TEST_ZONES {
                for ct in [labels::CAPACITY_TYPE_SPOT, labels::CAPACITY_TYPE_ON_DEMAND] {
                    for os in ["linux", "windows"] {
                        for arch in ["amd64", "arm64"] {
                            let (cpu_millis, memory) = (cpu * 1000, mem * GIB);
                            let price = price_from_resources(cpu_millis, memory);
                            out.push(Arc::new(synthetic(
                                format!("{cpu}-cpu-{mem}-mem-{arch}-{os}-{zone}-{ct}"),
                                arch,
                                &[os],
                                cpu_millis,
                                memory,
                                5,
                                vec![offering(zone, ct, price)],
                            )));
                        }
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(it: &InstanceType, key: &str) -> Vec<String> {
        it.requirements
            .get(key)
            .map(|r| r.values().map(str::to_string).collect())
            .unwrap_or_default()
    }

    #[test]
    fn benchmark_types_match_upstream_instance_types_400() {
        let types = benchmark_instance_types();
        assert_eq!(types.len(), 400);
        for (i, it) in types.iter().enumerate() {
            let k = i as i64 + 1;
            assert_eq!(it.name, format!("fake-it-{i}"));
            assert_eq!(
                (it.capacity.cpu_millis, it.capacity.memory, it.capacity.pods),
                (k * 1000, 2 * k * GIB, 10 * k)
            );
            // Allocatable = capacity − 100m cpu − 10Mi memory.
            let a = it.allocatable();
            assert_eq!(
                (a.cpu_millis, a.memory),
                (k * 1000 - 100, 2 * k * GIB - 10 * 1024 * 1024)
            );
            // 0.1 × cpu + 0.1 × bytes / 10⁹
            let price = 0.1 * k as f64 + 0.1 * (2 * k * GIB) as f64 / 1e9;
            assert!(
                it.offerings
                    .iter()
                    .all(|o| (o.price - price).abs() < 1e-12 && o.available)
            );
            let mut offerings: Vec<(&str, &str)> = it
                .offerings
                .iter()
                .map(|o| (o.capacity_type.as_str(), o.zone.as_str()))
                .collect();
            offerings.sort_unstable();
            assert_eq!(
                offerings,
                [
                    ("on-demand", "test-zone-1"),
                    ("on-demand", "test-zone-2"),
                    ("on-demand", "test-zone-3"),
                    ("spot", "test-zone-1"),
                    ("spot", "test-zone-2"),
                ]
            );
            assert_eq!(values(it, LABEL_INTEGER), [k.to_string()]);
        }
        // Shared, not rebuilt.
        assert!(Arc::ptr_eq(&types[7], &benchmark_instance_types()[7]));
    }

    #[test]
    fn benchmark_type_labels() {
        let types = instance_types(5);
        let small = &types[3]; // 4 cpu, 8 GiB: not above both thresholds
        let large = &types[4]; // 5 cpu, 10 GiB
        assert_eq!(values(small, LABEL_SIZE), ["small"]);
        assert_eq!(
            small.requirements.get(LABEL_SPECIAL).map(|r| r.operator()),
            Some(Operator::DoesNotExist)
        );
        assert_eq!(values(large, LABEL_SIZE), ["large"]);
        assert_eq!(values(large, LABEL_SPECIAL), ["optional"]);
        assert_eq!(values(large, labels::OS), ["darwin", "linux", "windows"]);
        assert_eq!(values(large, labels::ARCH), ["amd64"]);
        assert_eq!(values(large, labels::ZONE), TEST_ZONES);
        assert_eq!(values(large, labels::CAPACITY_TYPE), ["on-demand", "spot"]);
        assert_eq!(values(large, labels::INSTANCE_TYPE), ["fake-it-4"]);
    }

    #[test]
    fn assorted_types() {
        let types = assorted_instance_types();
        assert_eq!(types.len(), 7 * 8 * 3 * 2 * 2 * 2);
        let it = &types[0];
        assert_eq!(it.name, "1-cpu-1-mem-amd64-linux-test-zone-1-spot");
        assert_eq!(it.offerings.len(), 1);
        assert_eq!(it.capacity.pods, 5);
        assert_eq!(values(it, labels::OS), ["linux"]);
        let names: std::collections::BTreeSet<_> = types.iter().map(|t| t.name.clone()).collect();
        assert_eq!(names.len(), types.len());
    }
}
