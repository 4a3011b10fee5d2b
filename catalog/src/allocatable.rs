//! Node capacity and overhead arithmetic of Karpenter's AWS provider
//! (`pkg/providers/instancetype/types.go`), for the default AMI family (AL2023): what a node
//! of a given EC2 shape reports as capacity, and what kubelet reserves from it.
//!
//! Every function is pure and works in the scheduler's integer units (bytes, millicores,
//! pods), so the fake provider and the real AWS provider compute identical numbers.
//!
//! | quantity | rule |
//! |---|---|
//! | cpu capacity | vCPUs × 1000 m |
//! | memory capacity | (MiB − 64 on arm64) − ⌈that × 7.5 %⌉ MiB of VM overhead |
//! | ephemeral-storage capacity | the 20 GiB root volume |
//! | pods capacity | `maxPods` if set, else ENIs × (IPv4 per ENI − 1) + 2; then at most `podsPerCore` × vCPUs |
//! | kube-reserved cpu | 6 % of the first core, 1 % of the second, 0.5 % of cores 3–4, 0.25 % of every further core |
//! | kube-reserved memory | 11 MiB × ENI-limited pods + 255 MiB |
//! | kube-reserved ephemeral-storage | 1 GiB |
//! | eviction threshold | memory 100 MiB, ephemeral-storage ⌈10 % of its capacity⌉ |

/// Bytes in a MiB.
pub const MIB: i64 = 1024 * 1024;
/// Bytes in a GiB.
pub const GIB: i64 = 1024 * MIB;

/// Karpenter's default `--vm-memory-overhead-percent` (a fraction: 0.075 is 7.5 %).
pub const DEFAULT_VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.075;

/// Memory Graviton (arm64) instances reserve for the contiguous memory allocator, which the
/// node can never use.
pub const ARM64_CMA_RESERVED_MIB: u64 = 64;

/// Size of the default root EBS volume of the AMI families (`DefaultEBS`), which becomes the
/// node's ephemeral-storage capacity.
pub const DEFAULT_ROOT_VOLUME_BYTES: i64 = 20 * GIB;

/// Default kube-reserved ephemeral-storage.
pub const KUBE_RESERVED_EPHEMERAL_STORAGE_BYTES: i64 = GIB;

/// Default hard eviction threshold for `memory.available`.
pub const EVICTION_MEMORY_BYTES: i64 = 100 * MIB;

/// Default hard eviction threshold for `nodefs.available`, as a percentage of ephemeral storage.
pub const EVICTION_NODEFS_PERCENT: f64 = 10.0;

/// Pods when the pod density is not ENI-limited (kubelet's default `maxPods`).
pub const DEFAULT_MAX_PODS: i64 = 110;

/// CPU capacity in millicores.
pub fn cpu_capacity_millis(vcpus: u32) -> i64 {
    i64::from(vcpus) * 1000
}

/// Memory capacity in bytes: the MiB EC2 reports, less 64 MiB on arm64, less the VM overhead
/// rounded up to a whole MiB. `overhead_fraction` is e.g. 0.075 for 7.5 %.
///
/// The float expression and its evaluation order match upstream so that rounding agrees.
pub fn memory_capacity_bytes(memory_mib: u64, arm64: bool, overhead_fraction: f64) -> i64 {
    let mut mib = memory_mib;
    if arm64 {
        mib = mib.saturating_sub(ARM64_CMA_RESERVED_MIB);
    }
    let bytes = i64::try_from(mib)
        .unwrap_or(i64::MAX / MIB)
        .saturating_mul(MIB);
    // Rounded up so the node never reports memory the hypervisor keeps; the bytes are
    // divided by 1024 twice exactly as upstream writes it.
    let overhead_mib = (bytes as f64 * overhead_fraction / 1024.0 / 1024.0).ceil() as i64;
    bytes - overhead_mib.saturating_mul(MIB)
}

/// The VPC CNI's pod limit: usable ENIs × (IPv4 addresses per ENI − 1) + 2, where the first
/// address of each ENI is the ENI's own and the 2 are host-network pods. `reserved_enis` are
/// ENIs kept for other uses (custom networking); none usable gives 0.
pub fn eni_limited_pods(
    max_network_interfaces: u32,
    ipv4_per_interface: u32,
    reserved_enis: u32,
) -> i64 {
    let usable = i64::from(max_network_interfaces) - i64::from(reserved_enis);
    if usable <= 0 {
        return 0;
    }
    usable * (i64::from(ipv4_per_interface) - 1) + 2
}

/// The node's pod capacity: `max_pods` when set, else the ENI-limited count; then capped by
/// `pods_per_core` × vCPUs when `pods_per_core` is set and positive.
pub fn pods_capacity(
    eni_limited: i64,
    max_pods: Option<u32>,
    pods_per_core: Option<u32>,
    vcpus: u32,
) -> i64 {
    let count = max_pods.map_or(eni_limited, i64::from);
    match pods_per_core {
        Some(ppc) if ppc > 0 => count.min(i64::from(ppc) * i64::from(vcpus)),
        _ => count,
    }
}

/// kube-reserved cpu in millicores for a node of `cpu_millis` capacity: 6 % of the first core,
/// 1 % of the second, 0.5 % of the third and fourth, 0.25 % of every further core (the
/// Bottlerocket/EKS formula). Each band is truncated to whole millicores before summing, as
/// upstream does.
pub fn kube_reserved_cpu_millis(cpu_millis: i64) -> i64 {
    const BANDS: [(i64, i64, f64); 4] = [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, 1 << 31, 0.0025),
    ];
    let mut reserved = 0;
    for (start, end, fraction) in BANDS {
        if cpu_millis >= start {
            let span = if cpu_millis < end {
                cpu_millis - start
            } else {
                end - start
            };
            reserved += (span as f64 * fraction) as i64;
        }
    }
    reserved
}

/// kube-reserved memory in bytes: 11 MiB per pod plus 255 MiB. The default AMI family counts
/// ENI-limited pods here even when `maxPods` overrides the pod capacity.
pub fn kube_reserved_memory_bytes(pods: i64) -> i64 {
    (11 * pods + 255) * MIB
}

/// The default `nodefs.available` eviction threshold in bytes: 10 % of ephemeral storage,
/// rounded up.
pub fn eviction_ephemeral_storage_bytes(ephemeral_storage_bytes: i64) -> i64 {
    (ephemeral_storage_bytes as f64 / 100.0 * EVICTION_NODEFS_PERCENT).ceil() as i64
}

/// An eviction signal as kubelet accepts it: a percentage of capacity or an absolute amount.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EvictionSignal {
    /// `10%`: that share of the resource's capacity. `100%` disables the threshold (0).
    Percent(f64),
    /// An absolute amount in bytes (`500Mi`).
    Bytes(i64),
}

impl EvictionSignal {
    /// The threshold in bytes for a resource of `capacity_bytes`: a percentage is taken of the
    /// capacity and rounded up; 100 % means disabled, as kubelet's configuration defines.
    pub fn threshold_bytes(&self, capacity_bytes: i64) -> i64 {
        match *self {
            EvictionSignal::Bytes(b) => b,
            EvictionSignal::Percent(p) => {
                let p = if p == 100.0 { 0.0 } else { p };
                (capacity_bytes as f64 / 100.0 * p).ceil() as i64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_reserved_cpu_bands() {
        // (vCPUs, 60 + 10 + 5×2 + 2.5×(n-4) millicores, truncated per band)
        for (vcpus, want) in [
            (1, 60),
            (2, 70),
            (3, 75),
            (4, 80),
            (8, 90),
            (32, 150),
            (96, 310),
            (192, 550),
        ] {
            assert_eq!(
                kube_reserved_cpu_millis(cpu_capacity_millis(vcpus)),
                want,
                "{vcpus} vCPU"
            );
        }
        // Half a core: 6 % of 500 m = 30 m.
        assert_eq!(kube_reserved_cpu_millis(500), 30);
        assert_eq!(kube_reserved_cpu_millis(0), 0);
    }

    #[test]
    fn memory_overhead_rounds_up_and_arm64_loses_64mib() {
        // 8192 × 0.075 = 614.4 → 615 MiB overhead.
        assert_eq!(
            memory_capacity_bytes(8192, false, 0.075),
            (8192 - 615) * MIB
        );
        // (8192 − 64) × 0.075 = 609.6 → 610 MiB overhead.
        assert_eq!(memory_capacity_bytes(8192, true, 0.075), (8128 - 610) * MIB);
        assert_eq!(memory_capacity_bytes(1024, false, 0.0), 1024 * MIB);
    }

    #[test]
    fn pods_rules() {
        assert_eq!(eni_limited_pods(3, 10, 0), 29);
        assert_eq!(eni_limited_pods(3, 10, 1), 20);
        assert_eq!(eni_limited_pods(1, 10, 1), 0);
        assert_eq!(eni_limited_pods(1, 10, 5), 0);
        assert_eq!(pods_capacity(29, None, None, 2), 29);
        assert_eq!(pods_capacity(29, Some(110), None, 2), 110);
        assert_eq!(pods_capacity(29, Some(110), Some(10), 2), 20);
        assert_eq!(pods_capacity(29, None, Some(0), 2), 29);
        assert_eq!(kube_reserved_memory_bytes(29), 574 * MIB);
    }

    #[test]
    fn eviction_signals() {
        assert_eq!(eviction_ephemeral_storage_bytes(20 * GIB), 2 * GIB);
        assert_eq!(EvictionSignal::Percent(5.0).threshold_bytes(1000), 50);
        assert_eq!(EvictionSignal::Percent(0.15).threshold_bytes(1000), 2);
        assert_eq!(EvictionSignal::Percent(100.0).threshold_bytes(1000), 0);
        assert_eq!(EvictionSignal::Bytes(7).threshold_bytes(1000), 7);
    }
}
