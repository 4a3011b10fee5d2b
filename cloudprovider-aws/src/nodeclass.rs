//! `EC2NodeClass` (`karpenter.k8s.aws/v1`): how nodes are launched on EC2 — AMIs, subnets,
//! security groups, IAM, user data, block devices, metadata options and kubelet settings.
//!
//! Field names, defaults and validation follow Karpenter's v1 API (`pkg/apis/v1/
//! ec2nodeclass.go` and its CRD), so existing manifests deserialise unchanged. Fields of the
//! upstream API that karpenter-rs does not act on yet (`networkInterfaces`,
//! `connectionTracking`, `placementGroupSelector`, `cpuOptions`, `ipPrefixCount`) are kept
//! verbatim in [`EC2NodeClassSpec::other`] so a round trip loses nothing.

pub use crate::kubelet::KubeletConfiguration;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_cloudprovider::v1::{Condition, StatusConditions};
use karpenter_cloudprovider::validation::{ErrorKind, ValidationError, ValidationErrors};
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// API group of the EC2NodeClass.
pub const GROUP: &str = "karpenter.k8s.aws";
/// Kind of the EC2NodeClass.
pub const KIND: &str = "EC2NodeClass";
/// Label and tag naming a node's EC2NodeClass.
pub const LABEL_NODE_CLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
/// Annotation on NodeClaims: the hash of the EC2NodeClass they were launched from.
pub const ANNOTATION_NODE_CLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
/// Annotation carrying the version of [`ANNOTATION_NODE_CLASS_HASH`]'s algorithm.
pub const ANNOTATION_NODE_CLASS_HASH_VERSION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// The hash algorithm version karpenter-rs writes, bumped (as upstream bumps its `v1`…`v6`)
/// whenever an unchanged class could hash differently: `rs2` hashes `spec.kubelet` as the
/// open map the user wrote (Karpenter v1.15), where `rs1` hashed the typed v1.14 subset (an
/// empty list or map written by the user now counts). A claim of another version (an older
/// karpenter-rs, or Karpenter's `v6`) is re-stamped with the current version and hash
/// ([`crate::instance::hash_version_update`]) rather than reported as drifted, so neither an
/// upgrade nor a migration from Karpenter replaces every node.
pub const NODE_CLASS_HASH_VERSION: &str = "rs2";

/// `AL2`.
pub const AMI_FAMILY_AL2: &str = "AL2";
/// `AL2023` (the default of an alias-less class with no `amiFamily` is `Custom`).
pub const AMI_FAMILY_AL2023: &str = "AL2023";
/// `Bottlerocket`.
pub const AMI_FAMILY_BOTTLEROCKET: &str = "Bottlerocket";
/// `Custom`: user data is used verbatim.
pub const AMI_FAMILY_CUSTOM: &str = "Custom";
/// `Windows2019`.
pub const AMI_FAMILY_WINDOWS2019: &str = "Windows2019";
/// `Windows2022`.
pub const AMI_FAMILY_WINDOWS2022: &str = "Windows2022";
/// `Windows2025`.
pub const AMI_FAMILY_WINDOWS2025: &str = "Windows2025";
/// Every value `spec.amiFamily` accepts.
pub const AMI_FAMILIES: [&str; 7] = [
    AMI_FAMILY_AL2,
    AMI_FAMILY_AL2023,
    AMI_FAMILY_BOTTLEROCKET,
    AMI_FAMILY_CUSTOM,
    AMI_FAMILY_WINDOWS2019,
    AMI_FAMILY_WINDOWS2022,
    AMI_FAMILY_WINDOWS2025,
];

/// Tag keys users may not set: Karpenter owns them.
pub const RESTRICTED_TAG_KEYS: [&str; 4] = [
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    LABEL_NODE_CLASS,
];
/// Tag key prefix users may not set (`kubernetes.io/cluster/<name>`).
pub const RESTRICTED_TAG_PREFIX: &str = "kubernetes.io/cluster";

/// Eviction signals kubelet accepts in `evictionHard`/`evictionSoft`.
pub const EVICTION_SIGNALS: [&str; 6] = [
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];
/// Resources `kubeReserved`/`systemReserved` accept.
pub const RESERVED_RESOURCES: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];

/// `EC2NodeClass.spec`.
// kube's `printcolumn(...)` repeats keys by design; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "karpenter.k8s.aws",
    version = "v1",
    kind = "EC2NodeClass",
    plural = "ec2nodeclasses",
    singular = "ec2nodeclass",
    shortname = "ec2nc",
    shortname = "ec2ncs",
    category = "karpenter",
    status = "EC2NodeClassStatus",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Role",
        type_ = "string",
        json_path = ".spec.role",
        priority = 1
    ),
    doc = "EC2NodeClass is the Schema for the EC2NodeClass API"
)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassSpec {
    /// Subnets to launch into: a subnet matching any term is used (at most 30 terms).
    #[serde(default)]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Security groups to attach: groups matching any term (at most 30 terms).
    #[serde(default)]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// Capacity reservations the class may use (parsed; karpenter-rs does not launch into
    /// reservations yet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservation_selector_terms: Vec<CapacityReservationSelectorTerm>,
    /// Whether instances get a public IPv4 address (default: the subnet's setting).
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// AMIs: an alias (`al2023@latest`) alone, or id/name/owner/tags/ssmParameter terms.
    #[serde(default, rename = "amiSelectorTerms")]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// Bootstrapping format; inferred from the alias when absent.
    #[serde(default, rename = "amiFamily", skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    /// User data merged with (AL2023, Bottlerocket) or replacing (Custom) what Karpenter
    /// generates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// IAM role for the node; Karpenter manages an instance profile for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// An existing instance profile (mutually exclusive with `role`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// Tags on instances, volumes and launch templates (Karpenter's keys are restricted).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Kubelet configures the kubelet on provisioned nodes: any field of the kubelet's
    /// KubeletConfiguration. Karpenter reads maxPods, podsPerCore, kubeReserved,
    /// systemReserved and evictionHard for allocatable and passes every field to the node
    /// (AL2023). The controller validates it and reports a rejected configuration as
    /// ValidationSucceeded=False.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    /// Block devices (at most 50, at most one `rootVolume`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// `RAID0` to combine instance store volumes for ephemeral storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<String>,
    /// Detailed (1-minute) CloudWatch monitoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// Instance metadata service options (defaults: endpoint enabled, IPv6 disabled, hop
    /// limit 1, tokens required).
    #[serde(default = "default_metadata_options")]
    pub metadata_options: MetadataOptions,
    /// The EC2 fleet context (reserved capacity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Nitro Enclaves (Karpenter v1.15): enabled, only instance types that support them
    /// are offered, and instances launch with enclaves on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enclave_options: Option<EnclaveOptions>,
    /// CPU options (Karpenter v1.15): `nestedVirtualization: enabled` offers only the types
    /// EC2 describes as supporting nested virtualization; when set (either value) it is
    /// written to the launch template.
    #[serde(
        default,
        rename = "cpuOptions",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_options: Option<CpuOptions>,
    /// IPv4 prefixes (/28) assigned to the primary network interface at launch (≥ 0). Not
    /// hashed (upstream's `hash:"ignore"`): a change gives new launch templates, not drift.
    #[serde(
        default,
        rename = "ipPrefixCount",
        skip_serializing_if = "Option::is_none"
    )]
    pub ip_prefix_count: Option<i32>,
    /// Idle connection tracking timeouts on the network interfaces in the launch template.
    /// Set, only Nitro instance types are offered. Hashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
    /// Upstream fields karpenter-rs carries without acting on them.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(skip)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// A subnet selector: by id, or by tags (`"*"` matches any value).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubnetSelectorTerm {
    /// Tags the subnet must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Subnet id (`subnet-…`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
}

/// A security-group selector: by id, by name, or by tags.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupSelectorTerm {
    /// Tags the group must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Group id (`sg-…`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Group name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// A capacity-reservation selector.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationSelectorTerm {
    /// Tags the reservation must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Reservation id (`cr-…`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Owning account.
    #[serde(default, rename = "ownerID", skip_serializing_if = "String::is_empty")]
    pub owner_id: String,
    /// `open` or `targeted`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance_match_criteria: String,
}

/// An AMI selector.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiSelectorTerm {
    /// `family@version`, e.g. `al2023@latest`, `bottlerocket@v1.20.0`, `al2@v20240807`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub alias: String,
    /// Tags the image must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Image id (`ami-…`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Image name (wildcards as EC2 accepts them).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Owner account id or alias (`self`, `amazon`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner: String,
    /// An SSM parameter holding an image id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ssm_parameter: String,
}

/// `spec.enclaveOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnclaveOptions {
    /// Whether instances are enabled for AWS Nitro Enclaves.
    pub enabled: bool,
}

/// `spec.cpuOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuOptions {
    /// NestedVirtualization enables or disables nested virtualization on the instance
    /// (`enabled` or `disabled`). When enabled, only instance types reporting
    /// "nested-virtualization" in ProcessorInfo.SupportedFeatures are offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virtualization: Option<String>,
}

/// `spec.connectionTracking`: idle timeouts in seconds; unset ones keep EC2's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionTracking {
    /// Idle established TCP connections, 60–432000 seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_established_timeout: Option<i32>,
    /// Idle UDP flows that saw more than one request-response, 60–180 seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_stream_timeout: Option<i32>,
    /// Idle UDP flows seen in one direction or one request-response, 30–60 seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_timeout: Option<i32>,
}

/// A block device mapping.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    /// Device name (`/dev/xvda`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// The EBS volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    /// Whether this is the root volume (its size becomes ephemeral-storage capacity).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_volume: bool,
}

/// An EBS volume.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    /// Delete the volume with the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    /// Encrypt the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Provisioned IOPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    /// KMS key for encryption.
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// Snapshot to restore.
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    /// Throughput in MiB/s (gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    /// Size (`20Gi`, `100G`, `1Ti`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<Quantity>,
    /// `gp3`, `gp2`, `io1`, `io2`, `sc1`, `st1`, `standard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
}

/// Instance metadata service options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    /// `enabled` (default) or `disabled`.
    #[serde(default = "default_enabled")]
    pub http_endpoint: String,
    /// `disabled` (default) or `enabled`.
    #[serde(default = "default_disabled", rename = "httpProtocolIPv6")]
    pub http_protocol_ipv6: String,
    /// Hops a metadata response may travel (1–64, default 1: pods cannot reach IMDS).
    #[serde(default = "default_hop_limit")]
    pub http_put_response_hop_limit: i64,
    /// `required` (default: IMDSv2 only) or `optional`.
    #[serde(default = "default_required")]
    pub http_tokens: String,
}

fn default_enabled() -> String {
    "enabled".into()
}
fn default_disabled() -> String {
    "disabled".into()
}
fn default_required() -> String {
    "required".into()
}
fn default_hop_limit() -> i64 {
    1
}

/// Karpenter's default metadata options.
pub fn default_metadata_options() -> MetadataOptions {
    MetadataOptions {
        http_endpoint: default_enabled(),
        http_protocol_ipv6: default_disabled(),
        http_put_response_hop_limit: default_hop_limit(),
        http_tokens: default_required(),
    }
}

impl Default for MetadataOptions {
    fn default() -> Self {
        default_metadata_options()
    }
}

/// `EC2NodeClass.status`: what the selectors resolved to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    /// Resolved subnets, most free IP addresses first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<SubnetStatus>,
    /// Resolved security groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroupStatus>,
    /// Capacity reservations the selector terms select (by id), usable by `reserved`
    /// launches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<crate::capacity_reservation::CapacityReservationStatus>,
    /// Resolved AMIs, newest first, with the requirements each applies to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<AmiStatus>,
    /// The instance profile nodes get.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance_profile: String,
    /// Conditions: `SubnetsReady`, `SecurityGroupsReady`, `AMIsReady`,
    /// `InstanceProfileReady`, `ValidationSucceeded`, rolled up into `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A resolved subnet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubnetStatus {
    /// Subnet id.
    pub id: String,
    /// Availability zone name.
    pub zone: String,
    /// Availability zone id.
    #[serde(default, rename = "zoneID", skip_serializing_if = "String::is_empty")]
    pub zone_id: String,
}

/// A resolved security group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupStatus {
    /// Group id.
    pub id: String,
    /// Group name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// A resolved AMI.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiStatus {
    /// Image id.
    pub id: String,
    /// Image name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Whether the image is deprecated.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
    /// Node requirements the image serves (architecture, GPU variants).
    #[serde(default)]
    pub requirements: Vec<AmiRequirement>,
}

/// A node-selector requirement on an AMI (`kubernetes.io/arch In [arm64]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiRequirement {
    /// Label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`.
    pub operator: String,
    /// Values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// `SubnetsReady`.
pub const CONDITION_SUBNETS_READY: &str = "SubnetsReady";
/// `SecurityGroupsReady`.
pub const CONDITION_SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
/// `AMIsReady`.
pub const CONDITION_AMIS_READY: &str = "AMIsReady";
/// `InstanceProfileReady`.
pub const CONDITION_INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";
/// `CapacityReservationsReady`.
pub const CONDITION_CAPACITY_RESERVATIONS_READY: &str = "CapacityReservationsReady";
/// `ValidationSucceeded`.
pub const CONDITION_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";

impl StatusConditions for EC2NodeClass {
    const READY_DEPENDENTS: &'static [&'static str] = &[
        CONDITION_AMIS_READY,
        CONDITION_SUBNETS_READY,
        CONDITION_SECURITY_GROUPS_READY,
        CONDITION_INSTANCE_PROFILE_READY,
        CONDITION_VALIDATION_SUCCEEDED,
        CONDITION_CAPACITY_RESERVATIONS_READY,
    ];

    fn conditions(&self) -> &[Condition] {
        self.status.as_ref().map_or(&[], |s| &s.conditions)
    }

    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self
            .status
            .get_or_insert_with(EC2NodeClassStatus::default)
            .conditions
    }

    fn generation(&self) -> Option<i64> {
        self.metadata.generation
    }
}

/// A parsed AMI alias (`al2023@latest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    /// The AMI family in its `amiFamily` spelling (`AL2023`).
    pub family: String,
    /// `latest` or a pinned version.
    pub version: String,
}

/// Parses `family@version` with a known lowercase family; `None` when malformed.
pub fn parse_alias(alias: &str) -> Option<Alias> {
    let (family, version) = alias.split_once('@')?;
    if version.is_empty() || version.contains('@') {
        return None;
    }
    let family = AMI_FAMILIES
        .iter()
        .find(|f| **f != AMI_FAMILY_CUSTOM && f.to_lowercase() == family)?;
    Some(Alias {
        family: (*family).to_string(),
        version: version.to_string(),
    })
}

impl EC2NodeClass {
    /// The name, empty if unset.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    /// The alias term, parsed, if the class selects AMIs by alias.
    pub fn alias(&self) -> Option<Alias> {
        self.spec
            .ami_selector_terms
            .iter()
            .find(|t| !t.alias.is_empty())
            .and_then(|t| parse_alias(&t.alias))
    }

    /// The effective AMI family: `amiFamily`, else the alias's family, else `Custom`.
    pub fn ami_family(&self) -> String {
        if let Some(f) = &self.spec.ami_family {
            return f.clone();
        }
        self.alias()
            .map_or_else(|| AMI_FAMILY_CUSTOM.to_string(), |a| a.family)
    }

    /// Whether instances launch with Nitro Enclaves (`spec.enclaveOptions.enabled`).
    pub fn enclaves_enabled(&self) -> bool {
        self.spec
            .enclave_options
            .as_ref()
            .is_some_and(|e| e.enabled)
    }

    /// Whether instances launch with nested virtualization
    /// (`spec.cpuOptions.nestedVirtualization: enabled`), which narrows the instance types.
    pub fn nested_virtualization_enabled(&self) -> bool {
        self.spec
            .cpu_options
            .as_ref()
            .and_then(|c| c.nested_virtualization.as_deref())
            == Some("enabled")
    }

    /// The resolved status (default when absent).
    pub fn status_or_default(&self) -> EC2NodeClassStatus {
        self.status.clone().unwrap_or_default()
    }

    /// The size of the root volume in bytes, if a `rootVolume` mapping sets one.
    pub fn root_volume_bytes(&self) -> Option<i64> {
        let root = self
            .spec
            .block_device_mappings
            .iter()
            .find(|m| m.root_volume)?;
        let q = root.ebs.as_ref()?.volume_size.as_ref()?;
        karpenter_scheduling::quantity::Quantity::parse(&q.0)
            .ok()
            .map(|q| q.value())
    }

    /// The static hash of the spec fields whose change makes nodes drift: everything except
    /// the selector terms and `amiFamily` (their results are compared directly instead), as
    /// upstream's `hash:"ignore"` tags define. FNV-1a over the canonical JSON of those fields;
    /// the value is stable across runs and platforms.
    pub fn hash(&self) -> String {
        let mut spec = serde_json::to_value(&self.spec).unwrap_or_default();
        if let Some(map) = spec.as_object_mut() {
            for ignored in [
                "subnetSelectorTerms",
                "securityGroupSelectorTerms",
                "capacityReservationSelectorTerms",
                "amiSelectorTerms",
                "amiFamily",
                "ipPrefixCount",
            ] {
                map.remove(ignored);
            }
        }
        // serde_json's map is ordered (BTreeMap without `preserve_order`), so the text is
        // canonical.
        let text = format!("{}|{}", self.ami_family(), spec);
        karpenter_catalog::pricing::fnv1a_64(text.as_bytes()).to_string()
    }

    /// Validates the object as the CRD's schema and CEL rules would, returning every
    /// failure.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errs = Vec::new();
        validate_spec(&self.spec, &mut errs);
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ValidationErrors {
                object: format!("EC2NodeClass {:?}", self.name()),
                errors: errs,
            })
        }
    }
}

fn err(errs: &mut Vec<ValidationError>, path: impl Into<String>, kind: ErrorKind, msg: &str) {
    errs.push(ValidationError {
        path: path.into(),
        kind,
        value: None,
        message: msg.to_string(),
    });
}

fn has_prefixed_id(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix).is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    })
}

fn validate_tags_map(errs: &mut Vec<ValidationError>, path: &str, tags: &BTreeMap<String, String>) {
    if tags.len() > 20 {
        err(errs, path, ErrorKind::TooMany, "must have at most 20 items");
    }
    if tags.iter().any(|(k, v)| k.is_empty() || v.is_empty()) {
        err(
            errs,
            path,
            ErrorKind::Invalid,
            "empty tag keys or values aren't supported",
        );
    }
}

fn validate_spec(spec: &EC2NodeClassSpec, errs: &mut Vec<ValidationError>) {
    use ErrorKind::{Forbidden, Invalid, NotSupported, Required, TooMany};
    // Subnets.
    let p = "spec.subnetSelectorTerms";
    if spec.subnet_selector_terms.is_empty() {
        err(errs, p, Required, "subnetSelectorTerms cannot be empty");
    }
    if spec.subnet_selector_terms.len() > 30 {
        err(errs, p, TooMany, "must have at most 30 items");
    }
    for (i, t) in spec.subnet_selector_terms.iter().enumerate() {
        let tp = format!("{p}[{i}]");
        if t.tags.is_empty() && t.id.is_empty() {
            err(
                errs,
                &tp,
                Required,
                "expected at least one, got none, ['tags', 'id']",
            );
        }
        if !t.id.is_empty() && !t.tags.is_empty() {
            err(
                errs,
                &tp,
                Invalid,
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",
            );
        }
        if !t.id.is_empty() && !has_prefixed_id(&t.id, "subnet-") {
            err(
                errs,
                format!("{tp}.id"),
                Invalid,
                "must match subnet-[0-9a-z]+",
            );
        }
        validate_tags_map(errs, &format!("{tp}.tags"), &t.tags);
    }
    // Security groups.
    let p = "spec.securityGroupSelectorTerms";
    if spec.security_group_selector_terms.is_empty() {
        err(
            errs,
            p,
            Required,
            "securityGroupSelectorTerms cannot be empty",
        );
    }
    if spec.security_group_selector_terms.len() > 30 {
        err(errs, p, TooMany, "must have at most 30 items");
    }
    for (i, t) in spec.security_group_selector_terms.iter().enumerate() {
        let tp = format!("{p}[{i}]");
        let set = [!t.tags.is_empty(), !t.id.is_empty(), !t.name.is_empty()];
        if set.iter().all(|s| !s) {
            err(
                errs,
                &tp,
                Required,
                "expected at least one, got none, ['tags', 'id', 'name']",
            );
        }
        if set[1] && (set[0] || set[2]) {
            err(
                errs,
                &tp,
                Invalid,
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",
            );
        }
        if set[2] && (set[0] || set[1]) {
            err(
                errs,
                &tp,
                Invalid,
                "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",
            );
        }
        if set[1] && !has_prefixed_id(&t.id, "sg-") {
            err(errs, format!("{tp}.id"), Invalid, "must match sg-[0-9a-z]+");
        }
        validate_tags_map(errs, &format!("{tp}.tags"), &t.tags);
    }
    // AMIs.
    let p = "spec.amiSelectorTerms";
    let terms = &spec.ami_selector_terms;
    if terms.is_empty() {
        err(errs, p, Required, "must have at least 1 item");
    }
    if terms.len() > 30 {
        err(errs, p, TooMany, "must have at most 30 items");
    }
    let has_alias = terms.iter().any(|t| !t.alias.is_empty());
    if has_alias && terms.len() != 1 {
        err(
            errs,
            p,
            Invalid,
            "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
        );
    }
    for (i, t) in terms.iter().enumerate() {
        let tp = format!("{p}[{i}]");
        let others = !t.tags.is_empty() || !t.name.is_empty() || !t.owner.is_empty();
        if t.alias.is_empty()
            && t.tags.is_empty()
            && t.id.is_empty()
            && t.name.is_empty()
            && t.ssm_parameter.is_empty()
        {
            err(
                errs,
                &tp,
                Required,
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
            );
        }
        if !t.id.is_empty() && (!t.alias.is_empty() || others) {
            err(
                errs,
                &tp,
                Invalid,
                "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
            );
        }
        if !t.alias.is_empty() && (!t.id.is_empty() || others) {
            err(
                errs,
                &tp,
                Invalid,
                "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
            );
        }
        if !t.id.is_empty() && !has_prefixed_id(&t.id, "ami-") {
            err(
                errs,
                format!("{tp}.id"),
                Invalid,
                "must match ami-[0-9a-z]+",
            );
        }
        if !t.alias.is_empty() {
            let ap = format!("{tp}.alias");
            let well_formed = t.alias.split_once('@').is_some_and(|(f, v)| {
                !f.is_empty() && f.bytes().all(|b| b.is_ascii_alphanumeric()) && !v.is_empty()
            });
            if !well_formed {
                err(
                    errs,
                    &ap,
                    Invalid,
                    "'alias' is improperly formatted, must match the format 'family@version'",
                );
            } else if parse_alias(&t.alias).is_none() {
                err(
                    errs,
                    &ap,
                    NotSupported,
                    "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",
                );
            } else if t.alias.starts_with("windows") && !t.alias.ends_with("@latest") {
                err(
                    errs,
                    &ap,
                    Invalid,
                    "windows families may only specify version 'latest'",
                );
            }
        }
        validate_tags_map(errs, &format!("{tp}.tags"), &t.tags);
    }
    if let Some(f) = &spec.ami_family {
        if !AMI_FAMILIES.contains(&f.as_str()) {
            err(
                errs,
                "spec.amiFamily",
                NotSupported,
                "must be one of AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025",
            );
        }
        let al2_alias = terms
            .iter()
            .any(|t| t.alias.split('@').next() == Some("al2"));
        if al2_alias && f != AMI_FAMILY_CUSTOM && f != AMI_FAMILY_AL2 {
            err(
                errs,
                "spec",
                Invalid,
                "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias",
            );
        }
    } else if !has_alias {
        err(
            errs,
            "spec.amiFamily",
            Required,
            "amiFamily must be set when amiSelectorTerms does not contain an alias",
        );
    }
    // IAM.
    match (&spec.role, &spec.instance_profile) {
        (Some(_), None) | (None, Some(_)) => {}
        _ => err(
            errs,
            "spec",
            Invalid,
            "must specify exactly one of ['role', 'instanceProfile']",
        ),
    }
    if spec.role.as_deref() == Some("") {
        err(errs, "spec.role", Invalid, "role cannot be empty");
    }
    if spec.instance_profile.as_deref() == Some("") {
        err(
            errs,
            "spec.instanceProfile",
            Invalid,
            "instanceProfile cannot be empty",
        );
    }
    // Tags.
    for k in spec.tags.keys() {
        let tp = format!("spec.tags[{k:?}]");
        if k.is_empty() {
            err(
                errs,
                "spec.tags",
                Invalid,
                "empty tag keys aren't supported",
            );
        } else if k.starts_with(RESTRICTED_TAG_PREFIX) {
            err(
                errs,
                tp,
                Forbidden,
                "tag contains a restricted tag matching kubernetes.io/cluster/",
            );
        } else if let Some(r) = RESTRICTED_TAG_KEYS.iter().find(|r| *r == k) {
            err(
                errs,
                tp,
                Forbidden,
                &format!("tag contains a restricted tag matching {r}"),
            );
        }
    }
    // spec.kubelet is an open map the API server does not check (Karpenter v1.15): the
    // controller validates it, see `crate::kubelet`.
    // Block devices.
    let p = "spec.blockDeviceMappings";
    if spec.block_device_mappings.len() > 50 {
        err(errs, p, TooMany, "must have at most 50 items");
    }
    if spec
        .block_device_mappings
        .iter()
        .filter(|m| m.root_volume)
        .count()
        > 1
    {
        err(
            errs,
            p,
            Invalid,
            "must have only one blockDeviceMappings with rootVolume",
        );
    }
    for (i, m) in spec.block_device_mappings.iter().enumerate() {
        if let Some(ebs) = &m.ebs {
            let ep = format!("{p}[{i}].ebs");
            if ebs.snapshot_id.is_none() && ebs.volume_size.is_none() {
                err(
                    errs,
                    &ep,
                    Required,
                    "snapshotID or volumeSize must be defined",
                );
            }
            if let Some(t) = &ebs.volume_type
                && !["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"].contains(&t.as_str())
            {
                err(
                    errs,
                    format!("{ep}.volumeType"),
                    NotSupported,
                    "must be one of standard, io1, io2, gp2, sc1, st1, gp3",
                );
            }
            if let Some(size) = &ebs.volume_size
                && karpenter_scheduling::quantity::Quantity::parse(&size.0)
                    .map(|q| q.value() <= 0)
                    .unwrap_or(true)
            {
                err(
                    errs,
                    format!("{ep}.volumeSize"),
                    Invalid,
                    "must be a positive quantity such as 20Gi",
                );
            }
        }
    }
    if let Some(p) = &spec.instance_store_policy
        && p != "RAID0"
    {
        err(
            errs,
            "spec.instanceStorePolicy",
            NotSupported,
            "must be RAID0",
        );
    }
    // Metadata options.
    let m = &spec.metadata_options;
    let mp = "spec.metadataOptions";
    if !["enabled", "disabled"].contains(&m.http_endpoint.as_str()) {
        err(
            errs,
            format!("{mp}.httpEndpoint"),
            NotSupported,
            "must be enabled or disabled",
        );
    }
    if !["enabled", "disabled"].contains(&m.http_protocol_ipv6.as_str()) {
        err(
            errs,
            format!("{mp}.httpProtocolIPv6"),
            NotSupported,
            "must be enabled or disabled",
        );
    }
    if !(1..=64).contains(&m.http_put_response_hop_limit) {
        err(
            errs,
            format!("{mp}.httpPutResponseHopLimit"),
            Invalid,
            "must be between 1 and 64",
        );
    }
    if !["required", "optional"].contains(&m.http_tokens.as_str()) {
        err(
            errs,
            format!("{mp}.httpTokens"),
            NotSupported,
            "must be required or optional",
        );
    }
    if let Some(nv) = spec
        .cpu_options
        .as_ref()
        .and_then(|c| c.nested_virtualization.as_deref())
        && !["enabled", "disabled"].contains(&nv)
    {
        err(
            errs,
            "spec.cpuOptions.nestedVirtualization",
            NotSupported,
            "supported values: \"enabled\", \"disabled\"",
        );
    }
    if spec.ip_prefix_count.is_some_and(|n| n < 0) {
        err(
            errs,
            "spec.ipPrefixCount",
            Invalid,
            "should be greater than or equal to 0",
        );
    }
    if let Some(ct) = &spec.connection_tracking {
        let p = "spec.connectionTracking";
        if ct.tcp_established_timeout.is_none()
            && ct.udp_stream_timeout.is_none()
            && ct.udp_timeout.is_none()
        {
            err(
                errs,
                p,
                Invalid,
                "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",
            );
        }
        for (field, value, range) in [
            (
                "tcpEstablishedTimeout",
                ct.tcp_established_timeout,
                CT_TCP_ESTABLISHED,
            ),
            ("udpStreamTimeout", ct.udp_stream_timeout, CT_UDP_STREAM),
            ("udpTimeout", ct.udp_timeout, CT_UDP),
        ] {
            match value {
                Some(v) if v < range.0 => err(
                    errs,
                    format!("{p}.{field}"),
                    Invalid,
                    &format!("should be greater than or equal to {}", range.0),
                ),
                Some(v) if v > range.1 => err(
                    errs,
                    format!("{p}.{field}"),
                    Invalid,
                    &format!("should be less than or equal to {}", range.1),
                ),
                _ => {}
            }
        }
    }
}

/// `spec.connectionTracking` bounds (seconds), as upstream's CRD sets them.
pub const CT_TCP_ESTABLISHED: (i32, i32) = (60, 432_000);
/// See [`CT_TCP_ESTABLISHED`].
pub const CT_UDP_STREAM: (i32, i32) = (60, 180);
/// See [`CT_TCP_ESTABLISHED`].
pub const CT_UDP: (i32, i32) = (30, 60);

/// Parses one EC2NodeClass from YAML (or JSON), applying the CRD defaults.
pub fn from_yaml(text: &str) -> Result<EC2NodeClass, serde_saphyr::Error> {
    serde_saphyr::from_str(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> EC2NodeClass {
        from_yaml(
            r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
"#,
        )
        .expect("parses")
    }

    #[test]
    fn defaults_are_applied() {
        let nc = base();
        assert_eq!(nc.spec.metadata_options, default_metadata_options());
        assert_eq!(nc.spec.metadata_options.http_put_response_hop_limit, 1);
        assert_eq!(nc.spec.metadata_options.http_tokens, "required");
        assert_eq!(nc.ami_family(), AMI_FAMILY_AL2023);
        assert_eq!(
            nc.alias(),
            Some(Alias {
                family: "AL2023".into(),
                version: "latest".into()
            })
        );
        nc.validate().expect("valid");
        // Partially set metadata options get the other defaults.
        let nc: EC2NodeClass =
            from_yaml("metadata: {name: x}\nspec: {metadataOptions: {httpTokens: optional}}")
                .expect("parses");
        assert_eq!(nc.spec.metadata_options.http_endpoint, "enabled");
        assert_eq!(nc.spec.metadata_options.http_tokens, "optional");
    }

    #[test]
    fn validation_table() {
        type Mutate = fn(&mut EC2NodeClassSpec);
        let cases: Vec<(&str, Mutate, &str)> = vec![
            (
                "restricted cluster tag",
                |s| {
                    s.tags
                        .insert("kubernetes.io/cluster/demo".into(), "owned".into());
                },
                "restricted tag matching kubernetes.io/cluster/",
            ),
            (
                "restricted nodepool tag",
                |s| {
                    s.tags.insert("karpenter.sh/nodepool".into(), "x".into());
                },
                "restricted tag matching karpenter.sh/nodepool",
            ),
            (
                "restricted eks tag",
                |s| {
                    s.tags.insert("eks:eks-cluster-name".into(), "x".into());
                },
                "restricted tag matching eks:eks-cluster-name",
            ),
            (
                "restricted nodeclass tag",
                |s| {
                    s.tags.insert(LABEL_NODE_CLASS.into(), "x".into());
                },
                "restricted tag matching karpenter.k8s.aws/ec2nodeclass",
            ),
            (
                "role and profile",
                |s| s.instance_profile = Some("p".into()),
                "exactly one of ['role', 'instanceProfile']",
            ),
            (
                "neither role nor profile",
                |s| s.role = None,
                "exactly one of ['role', 'instanceProfile']",
            ),
            (
                "empty subnets",
                |s| s.subnet_selector_terms.clear(),
                "subnetSelectorTerms cannot be empty",
            ),
            (
                "empty subnet term",
                |s| s.subnet_selector_terms = vec![SubnetSelectorTerm::default()],
                "expected at least one, got none, ['tags', 'id']",
            ),
            (
                "subnet id and tags",
                |s| s.subnet_selector_terms[0].id = "subnet-123".into(),
                "'id' is mutually exclusive",
            ),
            (
                "bad subnet id",
                |s| {
                    s.subnet_selector_terms = vec![SubnetSelectorTerm {
                        id: "sn-1".into(),
                        ..Default::default()
                    }]
                },
                "subnet-[0-9a-z]+",
            ),
            (
                "empty sgs",
                |s| s.security_group_selector_terms.clear(),
                "securityGroupSelectorTerms cannot be empty",
            ),
            (
                "sg name and tags",
                |s| s.security_group_selector_terms[0].name = "n".into(),
                "'name' is mutually exclusive",
            ),
            (
                "alias with other term",
                |s| {
                    s.ami_selector_terms.push(AmiSelectorTerm {
                        id: "ami-123".into(),
                        ..Default::default()
                    })
                },
                "cannot be set with a combination of other amiSelectorTerms",
            ),
            (
                "bad alias family",
                |s| s.ami_selector_terms[0].alias = "ubuntu@latest".into(),
                "family is not supported",
            ),
            (
                "malformed alias",
                |s| s.ami_selector_terms[0].alias = "al2023".into(),
                "improperly formatted",
            ),
            (
                "windows pinned",
                |s| s.ami_selector_terms[0].alias = "windows2022@v1".into(),
                "windows families may only specify version 'latest'",
            ),
            (
                "no alias no family",
                |s| {
                    s.ami_selector_terms = vec![AmiSelectorTerm {
                        id: "ami-123".into(),
                        ..Default::default()
                    }]
                },
                "amiFamily must be set",
            ),
            (
                "al2 alias wrong family",
                |s| {
                    s.ami_selector_terms[0].alias = "al2@latest".into();
                    s.ami_family = Some("AL2023".into());
                },
                "must be 'AL2' or 'Custom'",
            ),
            (
                "hop limit",
                |s| s.metadata_options.http_put_response_hop_limit = 65,
                "between 1 and 64",
            ),
            (
                "tokens",
                |s| s.metadata_options.http_tokens = "sometimes".into(),
                "required or optional",
            ),
            (
                "two root volumes",
                |s| {
                    s.block_device_mappings = vec![
                        BlockDeviceMapping {
                            root_volume: true,
                            ..Default::default()
                        },
                        BlockDeviceMapping {
                            root_volume: true,
                            ..Default::default()
                        },
                    ]
                },
                "only one blockDeviceMappings with rootVolume",
            ),
            (
                "ebs without size",
                |s| {
                    s.block_device_mappings = vec![BlockDeviceMapping {
                        ebs: Some(BlockDevice::default()),
                        ..Default::default()
                    }]
                },
                "snapshotID or volumeSize",
            ),
            (
                "nested virtualization not enabled or disabled",
                |s| {
                    s.cpu_options = Some(CpuOptions {
                        nested_virtualization: Some("on".into()),
                    })
                },
                "spec.cpuOptions.nestedVirtualization",
            ),
            (
                "negative ipPrefixCount",
                |s| s.ip_prefix_count = Some(-1),
                "spec.ipPrefixCount",
            ),
            (
                "empty connectionTracking",
                |s| s.connection_tracking = Some(ConnectionTracking::default()),
                "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout",
            ),
            (
                "tcp timeout too short",
                |s| {
                    s.connection_tracking = Some(ConnectionTracking {
                        tcp_established_timeout: Some(59),
                        ..Default::default()
                    })
                },
                "spec.connectionTracking.tcpEstablishedTimeout: Invalid value: should be greater than or equal to 60",
            ),
            (
                "udp stream timeout too long",
                |s| {
                    s.connection_tracking = Some(ConnectionTracking {
                        udp_stream_timeout: Some(181),
                        ..Default::default()
                    })
                },
                "spec.connectionTracking.udpStreamTimeout: Invalid value: should be less than or equal to 180",
            ),
            (
                "udp timeout too short",
                |s| {
                    s.connection_tracking = Some(ConnectionTracking {
                        udp_timeout: Some(29),
                        ..Default::default()
                    })
                },
                "spec.connectionTracking.udpTimeout: Invalid value: should be greater than or equal to 30",
            ),
        ];
        for (name, mutate, want) in cases {
            let mut nc = base();
            mutate(&mut nc.spec);
            let e = nc.validate().expect_err(name);
            assert!(e.to_string().contains(want), "{name}: {e}");
        }
    }

    #[test]
    fn hash_ignores_selectors_but_not_user_data() {
        let a = base();
        let mut b = base();
        b.spec.subnet_selector_terms[0]
            .tags
            .insert("other".into(), "x".into());
        assert_eq!(a.hash(), b.hash());
        b.spec.user_data = Some("echo hi".into());
        assert_ne!(a.hash(), b.hash());
        let mut c = base();
        c.spec.tags.insert("team".into(), "a".into());
        assert_ne!(a.hash(), c.hash());
    }

    #[test]
    fn unknown_upstream_fields_round_trip() {
        let nc: EC2NodeClass = from_yaml(
            "metadata: {name: x}\nspec:\n  ipPrefixCount: 2\n  cpuOptions: {nestedVirtualization: enabled}\n",
        )
        .expect("parses");
        let v = serde_json::to_value(&nc).expect("serialises");
        assert_eq!(v["spec"]["ipPrefixCount"], 2);
        assert_eq!(v["spec"]["cpuOptions"]["nestedVirtualization"], "enabled");
    }

    #[test]
    fn ip_prefix_count_is_not_hashed_connection_tracking_is() {
        let nc: EC2NodeClass = from_yaml(
            "metadata: {name: x}\nspec:\n  ipPrefixCount: 2\n  connectionTracking: {udpTimeout: 30}\n",
        )
        .expect("parses");
        assert!(nc.spec.other.is_empty(), "{:?}", nc.spec.other);
        assert_eq!(nc.spec.ip_prefix_count, Some(2));
        let mut prefixes = base();
        prefixes.spec.ip_prefix_count = Some(4);
        prefixes.validate().expect("valid");
        assert_eq!(base().hash(), prefixes.hash());
        let mut tracked = base();
        tracked.spec.connection_tracking = Some(ConnectionTracking {
            tcp_established_timeout: Some(432_000),
            udp_stream_timeout: Some(60),
            udp_timeout: Some(60),
        });
        tracked.validate().expect("valid");
        assert_ne!(base().hash(), tracked.hash());
    }

    #[test]
    fn cpu_options_are_typed_validated_and_hashed() {
        let mut nc: EC2NodeClass = from_yaml(
            "metadata: {name: x}\nspec:\n  cpuOptions: {nestedVirtualization: enabled}\n",
        )
        .expect("parses");
        assert!(nc.spec.other.is_empty(), "{:?}", nc.spec.other);
        assert!(nc.nested_virtualization_enabled());
        nc.spec.cpu_options = Some(CpuOptions {
            nested_virtualization: Some("disabled".into()),
        });
        assert!(!nc.nested_virtualization_enabled());
        let mut enabled = base();
        enabled.spec.cpu_options = Some(CpuOptions {
            nested_virtualization: Some("enabled".into()),
        });
        enabled.validate().expect("valid");
        // Upstream hashes cpuOptions: changing it drifts nodes.
        assert_ne!(base().hash(), enabled.hash());
    }

    #[test]
    fn root_volume_size() {
        let mut nc = base();
        assert_eq!(nc.root_volume_bytes(), None);
        nc.spec.block_device_mappings = vec![BlockDeviceMapping {
            device_name: Some("/dev/xvda".into()),
            root_volume: true,
            ebs: Some(BlockDevice {
                volume_size: Some(Quantity("100Gi".into())),
                ..Default::default()
            }),
        }];
        assert_eq!(nc.root_volume_bytes(), Some(100 * 1024 * 1024 * 1024));
    }
}
