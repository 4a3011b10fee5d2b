//! The kubelet settings Karpenter applies itself.

/// The kubelet configuration keys Karpenter writes into a node's bootstrap: the fields of
/// v1beta1's `NodePool.spec.template.spec.kubelet` and of v1's `EC2NodeClass.spec.kubelet`
/// before v1.15 opened the latter to every KubeletConfiguration field. Conversion keeps
/// exactly these; a provider that accepts more names the others as passed through.
pub const MANAGED_KUBELET_FIELDS: [&str; 12] = [
    "clusterDNS",
    "maxPods",
    "podsPerCore",
    "systemReserved",
    "kubeReserved",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionMaxPodGracePeriod",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "cpuCFSQuota",
];
