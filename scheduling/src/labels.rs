//! Well-known node labels and the label domains Karpenter restricts.

/// `kubernetes.io/arch`.
pub const ARCH: &str = "kubernetes.io/arch";
/// `kubernetes.io/os`.
pub const OS: &str = "kubernetes.io/os";
/// `node.kubernetes.io/instance-type`.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// `topology.kubernetes.io/zone`.
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// `topology.kubernetes.io/region`.
pub const REGION: &str = "topology.kubernetes.io/region";
/// `kubernetes.io/hostname`.
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// `karpenter.sh/capacity-type`.
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// `karpenter.sh/nodepool`.
pub const NODEPOOL: &str = "karpenter.sh/nodepool";
/// `karpenter.sh/initialized`.
pub const NODE_INITIALIZED: &str = "karpenter.sh/initialized";
/// `karpenter.sh/registered`.
pub const NODE_REGISTERED: &str = "karpenter.sh/registered";
/// `topology.k8s.aws/zone-id`.
pub const ZONE_ID: &str = "topology.k8s.aws/zone-id";
/// `karpenter.sh/do-not-disrupt` (annotation on pods and nodes).
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

/// `spot`.
pub const CAPACITY_TYPE_SPOT: &str = "spot";
/// `on-demand`.
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
/// `reserved`.
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";

/// `karpenter.k8s.aws/instance-family`.
pub const AWS_INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
/// `karpenter.k8s.aws/instance-category`.
pub const AWS_INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
/// `karpenter.k8s.aws/instance-generation`.
pub const AWS_INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
/// `karpenter.k8s.aws/instance-size`.
pub const AWS_INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
/// `karpenter.k8s.aws/instance-cpu`.
pub const AWS_INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
/// `karpenter.k8s.aws/instance-cpu-manufacturer`.
pub const AWS_INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
/// `karpenter.k8s.aws/instance-memory`.
pub const AWS_INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
/// `karpenter.k8s.aws/instance-hypervisor`.
pub const AWS_INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
/// `karpenter.k8s.aws/instance-network-bandwidth`.
pub const AWS_INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
/// `karpenter.k8s.aws/instance-encryption-in-transit-supported`.
pub const AWS_INSTANCE_ENCRYPTION_IN_TRANSIT: &str =
    "karpenter.k8s.aws/instance-encryption-in-transit-supported";
/// `karpenter.k8s.aws/instance-ebs-bandwidth`.
pub const AWS_INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
/// `karpenter.k8s.aws/instance-local-nvme`.
pub const AWS_INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
/// `karpenter.k8s.aws/instance-gpu-name`.
pub const AWS_INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
/// `karpenter.k8s.aws/instance-gpu-manufacturer`.
pub const AWS_INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
/// `karpenter.k8s.aws/instance-gpu-count`.
pub const AWS_INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
/// `karpenter.k8s.aws/instance-gpu-memory`.
pub const AWS_INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
/// `karpenter.k8s.aws/instance-accelerator-name`.
pub const AWS_INSTANCE_ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
/// `karpenter.k8s.aws/instance-accelerator-manufacturer`.
pub const AWS_INSTANCE_ACCELERATOR_MANUFACTURER: &str =
    "karpenter.k8s.aws/instance-accelerator-manufacturer";
/// `karpenter.k8s.aws/instance-accelerator-count`.
pub const AWS_INSTANCE_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";

/// Labels every instance type defines, so requirements on them are allowed even when a node
/// pool does not constrain them (Karpenter's `WellKnownLabels`, core plus AWS).
pub fn is_well_known(key: &str) -> bool {
    let _ = key;
    todo!()
}

/// Why a label key may not appear in a NodePool's template labels or requirements, or `None`
/// when it may (Karpenter's restricted label domains and `IsRestrictedLabel`).
pub fn restricted_reason(key: &str) -> Option<String> {
    let _ = key;
    todo!()
}
