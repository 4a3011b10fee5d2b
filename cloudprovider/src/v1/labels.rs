//! Well-known label, annotation, taint and finalizer names of `karpenter.sh`.

pub use karpenter_scheduling::labels::{
    ARCH, CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT,
    DO_NOT_DISRUPT, HOSTNAME, INSTANCE_TYPE, NODE_INITIALIZED, NODE_REGISTERED, NODEPOOL, OS,
    REGION, ZONE,
};

/// The API group of NodePool and NodeClaim.
pub const GROUP: &str = "karpenter.sh";
/// The API version served and stored.
pub const VERSION: &str = "v1";
/// The compatibility group (`compatibility.karpenter.sh`).
pub const COMPATIBILITY_GROUP: &str = "compatibility.karpenter.sh";

/// Label on a Node and NodeClaim naming its NodePool (same as [`NODEPOOL`]).
pub const NODEPOOL_LABEL: &str = NODEPOOL;
/// Label on a Node that tells Karpenter not to sync NodeClaim taints to it.
pub const NODE_DO_NOT_SYNC_TAINTS: &str = "karpenter.sh/do-not-sync-taints";
/// Label on a Node naming the NodeClaim that launched it (karpenter-rs; upstream finds the
/// claim by provider ID, this label makes the link visible to `kubectl`).
pub const NODECLAIM_LABEL: &str = "karpenter.sh/nodeclaim";

/// Annotation on pods and nodes that blocks voluntary disruption.
pub const DO_NOT_DISRUPT_ANNOTATION: &str = DO_NOT_DISRUPT;
/// Annotation on a NodePool and its NodeClaims: the template hash (drift detection).
pub const NODEPOOL_HASH_ANNOTATION: &str = "karpenter.sh/nodepool-hash";
/// Annotation carrying the hash algorithm version of [`NODEPOOL_HASH_ANNOTATION`].
pub const NODEPOOL_HASH_VERSION_ANNOTATION: &str = "karpenter.sh/nodepool-hash-version";
/// Annotation on a NodeClaim: when its termination grace period runs out (RFC 3339).
pub const NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION: &str =
    "karpenter.sh/nodeclaim-termination-timestamp";
/// Annotation on a NodeClaim launched after relaxing minValues.
pub const NODECLAIM_MIN_VALUES_RELAXED_ANNOTATION: &str =
    "karpenter.sh/nodeclaim-min-values-relaxed";
/// Annotation listing the DRA drivers whose devices pods on the claim were allocated.
pub const DRA_DRIVERS_ANNOTATION: &str = "karpenter.sh/requested-dra-drivers";
/// Annotation naming the provider a resource was created for (`compatibility.karpenter.sh/provider`).
pub const PROVIDER_COMPATIBILITY_ANNOTATION: &str = "compatibility.karpenter.sh/provider";

/// Finalizer on Nodes and NodeClaims that Karpenter removes once the instance is gone.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";

/// Key of the taint put on nodes being disrupted.
pub const DISRUPTED_TAINT_KEY: &str = "karpenter.sh/disrupted";
/// Key of the taint nodes carry until Karpenter registers them.
pub const UNREGISTERED_TAINT_KEY: &str = "karpenter.sh/unregistered";

/// `amd64`.
pub const ARCHITECTURE_AMD64: &str = "amd64";
/// `arm64`.
pub const ARCHITECTURE_ARM64: &str = "arm64";

/// `karpenter.sh/disrupted:NoSchedule`, put on nodes Karpenter is disrupting so nothing new
/// lands there.
pub fn disrupted_no_schedule_taint() -> super::Taint {
    super::Taint::new(DISRUPTED_TAINT_KEY, "", super::TaintEffect::NoSchedule)
}

/// `karpenter.sh/unregistered:NoExecute`, which nodes carry until Karpenter has synced the
/// NodeClaim's labels and taints onto them.
pub fn unregistered_no_execute_taint() -> super::Taint {
    super::Taint::new(UNREGISTERED_TAINT_KEY, "", super::TaintEffect::NoExecute)
}

/// The label that names a node's NodeClass of `group`/`kind` (`karpenter.k8s.aws/ec2nodeclass`).
pub fn node_class_label_key(group: &str, kind: &str) -> String {
    format!("{group}/{}", kind.to_lowercase())
}
