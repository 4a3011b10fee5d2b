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

/// `karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz`.
pub const AWS_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: &str =
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz";
/// `karpenter.k8s.aws/instance-capability-flex`.
pub const AWS_INSTANCE_CAPABILITY_FLEX: &str = "karpenter.k8s.aws/instance-capability-flex";
/// `karpenter.k8s.aws/instance-tenancy` (values `default` or `dedicated`).
pub const AWS_INSTANCE_TENANCY: &str = "karpenter.k8s.aws/instance-tenancy";
/// `karpenter.k8s.aws/nitro-sandbox` (whether the instance supports Nitro Enclaves).
pub const AWS_INSTANCE_NITRO_ENCLAVES_SUPPORTED: &str = "karpenter.k8s.aws/nitro-sandbox";
/// `karpenter.k8s.aws/capacity-reservation-id`.
pub const AWS_CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
/// Labels only a node launched into a capacity reservation carries (upstream's
/// `ReservedCapacityLabels`, as Karpenter's AWS provider registers them): an offering without
/// a reservation cannot satisfy a requirement that needs one of them present.
pub const RESERVED_CAPACITY_LABELS: [&str; 2] =
    [AWS_CAPACITY_RESERVATION_ID, AWS_CAPACITY_RESERVATION_TYPE];
/// `karpenter.k8s.aws/capacity-reservation-type`.
pub const AWS_CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
/// `karpenter.k8s.aws/capacity-reservation-interruptible`.
pub const AWS_CAPACITY_RESERVATION_INTERRUPTIBLE: &str =
    "karpenter.k8s.aws/capacity-reservation-interruptible";
/// `karpenter.k8s.aws/placement-group-id`.
pub const AWS_PLACEMENT_GROUP_ID: &str = "karpenter.k8s.aws/placement-group-id";
/// `karpenter.k8s.aws/placement-group-partition`.
pub const AWS_PLACEMENT_GROUP_PARTITION: &str = "karpenter.k8s.aws/placement-group-partition";
/// `karpenter.k8s.aws/ec2nodeclass` (set by the AWS provider; not well-known, and restricted
/// because its domain is).
pub const AWS_NODE_CLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
/// `node.kubernetes.io/windows-build`.
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";

/// `amd64`.
pub const ARCHITECTURE_AMD64: &str = "amd64";
/// `arm64`.
pub const ARCHITECTURE_ARM64: &str = "arm64";
/// `default` tenancy (shared hardware).
pub const TENANCY_DEFAULT: &str = "default";
/// `dedicated` tenancy.
pub const TENANCY_DEDICATED: &str = "dedicated";

/// Karpenter's `WellKnownLabels` as the AWS provider extends them (core 8 plus the AWS
/// `init()` additions), sorted, without duplicates. Requirements on these keys may be
/// narrowed by pods even when a NodePool leaves them undefined, because every instance type
/// reports a value for them.
pub const WELL_KNOWN_LABELS: &[&str] = &[
    AWS_CAPACITY_RESERVATION_ID,
    AWS_CAPACITY_RESERVATION_INTERRUPTIBLE,
    AWS_CAPACITY_RESERVATION_TYPE,
    AWS_INSTANCE_ACCELERATOR_COUNT,
    AWS_INSTANCE_ACCELERATOR_MANUFACTURER,
    AWS_INSTANCE_ACCELERATOR_NAME,
    AWS_INSTANCE_CAPABILITY_FLEX,
    AWS_INSTANCE_CATEGORY,
    AWS_INSTANCE_CPU,
    AWS_INSTANCE_CPU_MANUFACTURER,
    AWS_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    AWS_INSTANCE_EBS_BANDWIDTH,
    AWS_INSTANCE_ENCRYPTION_IN_TRANSIT,
    AWS_INSTANCE_FAMILY,
    AWS_INSTANCE_GENERATION,
    AWS_INSTANCE_GPU_COUNT,
    AWS_INSTANCE_GPU_MANUFACTURER,
    AWS_INSTANCE_GPU_MEMORY,
    AWS_INSTANCE_GPU_NAME,
    AWS_INSTANCE_HYPERVISOR,
    AWS_INSTANCE_LOCAL_NVME,
    AWS_INSTANCE_MEMORY,
    AWS_INSTANCE_NETWORK_BANDWIDTH,
    AWS_INSTANCE_SIZE,
    AWS_INSTANCE_TENANCY,
    AWS_INSTANCE_NITRO_ENCLAVES_SUPPORTED,
    AWS_PLACEMENT_GROUP_ID,
    AWS_PLACEMENT_GROUP_PARTITION,
    CAPACITY_TYPE,
    NODEPOOL,
    ARCH,
    OS,
    INSTANCE_TYPE,
    WINDOWS_BUILD,
    ZONE_ID,
    REGION,
    ZONE,
];

/// Label domains reserved by Karpenter (core `karpenter.sh`, AWS `karpenter.k8s.aws`), sorted.
/// A key in one of them or in a sub-domain is restricted unless it is well-known.
pub const RESTRICTED_LABEL_DOMAINS: &[&str] = &["karpenter.k8s.aws", "karpenter.sh"];

/// Individual keys that may not be set or required because the provisioning logic owns them
/// (Karpenter's `RestrictedLabels`).
pub const RESTRICTED_LABELS: &[&str] = &[HOSTNAME];

/// Deprecated aliases and the well-known key each is rewritten to whenever a requirement is
/// built (Karpenter's `NormalizedLabels`), sorted by alias.
pub const NORMALIZED_LABELS: &[(&str, &str)] = &[
    ("beta.kubernetes.io/arch", ARCH),
    ("beta.kubernetes.io/instance-type", INSTANCE_TYPE),
    ("beta.kubernetes.io/os", OS),
    ("failure-domain.beta.kubernetes.io/region", REGION),
    ("failure-domain.beta.kubernetes.io/zone", ZONE),
];

/// Labels every instance type defines, so requirements on them are allowed even when a node
/// pool does not constrain them (Karpenter's `WellKnownLabels`, core plus AWS). Exactly the
/// members of [`WELL_KNOWN_LABELS`]; `kubernetes.io/hostname` is not one.
pub fn is_well_known(key: &str) -> bool {
    // A match compiles to length-then-bytes comparisons; this sits on the solver's hot path.
    matches!(
        key,
        AWS_CAPACITY_RESERVATION_ID
            | AWS_CAPACITY_RESERVATION_INTERRUPTIBLE
            | AWS_CAPACITY_RESERVATION_TYPE
            | AWS_INSTANCE_ACCELERATOR_COUNT
            | AWS_INSTANCE_ACCELERATOR_MANUFACTURER
            | AWS_INSTANCE_ACCELERATOR_NAME
            | AWS_INSTANCE_CAPABILITY_FLEX
            | AWS_INSTANCE_CATEGORY
            | AWS_INSTANCE_CPU
            | AWS_INSTANCE_CPU_MANUFACTURER
            | AWS_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ
            | AWS_INSTANCE_EBS_BANDWIDTH
            | AWS_INSTANCE_ENCRYPTION_IN_TRANSIT
            | AWS_INSTANCE_FAMILY
            | AWS_INSTANCE_GENERATION
            | AWS_INSTANCE_GPU_COUNT
            | AWS_INSTANCE_GPU_MANUFACTURER
            | AWS_INSTANCE_GPU_MEMORY
            | AWS_INSTANCE_GPU_NAME
            | AWS_INSTANCE_HYPERVISOR
            | AWS_INSTANCE_LOCAL_NVME
            | AWS_INSTANCE_MEMORY
            | AWS_INSTANCE_NETWORK_BANDWIDTH
            | AWS_INSTANCE_SIZE
            | AWS_INSTANCE_TENANCY
            | AWS_INSTANCE_NITRO_ENCLAVES_SUPPORTED
            | AWS_PLACEMENT_GROUP_ID
            | AWS_PLACEMENT_GROUP_PARTITION
            | CAPACITY_TYPE
            | NODEPOOL
            | ARCH
            | OS
            | INSTANCE_TYPE
            | WINDOWS_BUILD
            | ZONE_ID
            | REGION
            | ZONE
    )
}

/// The well-known key a deprecated alias stands for (`failure-domain.beta.kubernetes.io/zone`
/// → `topology.kubernetes.io/zone`, …), or `None` when `key` is not an alias.
pub fn normalized(key: &str) -> Option<&'static str> {
    NORMALIZED_LABELS
        .iter()
        .find(|(alias, _)| *alias == key)
        .map(|(_, target)| *target)
}

/// The values Karpenter accepts for a well-known key whose values are a closed set
/// (`karpenter.sh/capacity-type`, `karpenter.k8s.aws/instance-tenancy`), sorted; `None` for
/// any other key.
pub fn well_known_values(key: &str) -> Option<&'static [&'static str]> {
    match key {
        CAPACITY_TYPE => Some(&[
            CAPACITY_TYPE_ON_DEMAND,
            CAPACITY_TYPE_RESERVED,
            CAPACITY_TYPE_SPOT,
        ]),
        AWS_INSTANCE_TENANCY => Some(&[TENANCY_DEDICATED, TENANCY_DEFAULT]),
        _ => None,
    }
}

/// The DNS prefix of a label key (`topology.kubernetes.io` for `topology.kubernetes.io/zone`);
/// empty when the key has no prefix.
pub fn label_domain(key: &str) -> &str {
    key.split_once('/').map_or("", |(domain, _)| domain)
}

/// Why a label key may not appear in a NodePool's template labels or requirements, or `None`
/// when it may (Karpenter's restricted label domains and `IsRestrictedLabel`).
///
/// Follows Karpenter v1.10+ (the rules the AWS provider ships with): well-known keys are always
/// allowed; otherwise a key whose domain is `karpenter.sh` or `karpenter.k8s.aws`, or a
/// sub-domain of either (`foo.karpenter.sh`), is restricted, and so is
/// `kubernetes.io/hostname`. Other `kubernetes.io` / `k8s.io` keys are allowed: Karpenter
/// dropped those restrictions (and their `kops.k8s.io`, `node.kubernetes.io`,
/// `node-restriction.kubernetes.io` exceptions) in v1.10, so every key older releases accepted
/// is still accepted.
pub fn restricted_reason(key: &str) -> Option<String> {
    if is_well_known(key) {
        return None;
    }
    let domain = label_domain(key);
    let in_restricted_domain = RESTRICTED_LABEL_DOMAINS.iter().any(|restricted| {
        domain == *restricted
            || domain
                .strip_suffix(restricted)
                .is_some_and(|head| head.ends_with('.'))
    });
    if !(in_restricted_domain || RESTRICTED_LABELS.contains(&key)) {
        return None;
    }
    let domains = RESTRICTED_LABEL_DOMAINS.join(" ");
    let head = format!(
        "using label {key} is not allowed as it might interfere with the internal provisioning \
         logic"
    );
    // Upstream lists all 37 well-known labels here; a user who wrote a restricted key almost
    // always meant one of them, so name that one, or a handful of the domain's.
    if let Some(meant) = crate::hints::likely_label(key) {
        return Some(format!(
            "{head}; did you mean {meant}? Otherwise use a custom label that does not use a \
             restricted domain: [{domains}]"
        ));
    }
    let name = key.split_once('/').map_or(key, |(_, name)| name);
    let some = crate::hints::well_known_in_domain(domain, name, 4);
    let well_known = if some.is_empty() {
        String::new()
    } else {
        format!(" such as {}", some.join(", "))
    };
    Some(format!(
        "{head}; specify a well-known label{well_known}, or a custom label that does not use a \
         restricted domain: [{domains}]"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_list_is_sorted_unique_and_matches_predicate() {
        let mut sorted = WELL_KNOWN_LABELS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            sorted, WELL_KNOWN_LABELS,
            "WELL_KNOWN_LABELS must stay sorted and unique"
        );
        for key in WELL_KNOWN_LABELS {
            assert!(is_well_known(key), "{key} is listed but not recognised");
        }
        // Core 8 (windows-build counted once) plus the AWS additions.
        assert_eq!(WELL_KNOWN_LABELS.len(), 37);
    }

    #[test]
    fn well_known_table() {
        let cases = [
            (ZONE, true),
            (REGION, true),
            (INSTANCE_TYPE, true),
            (ARCH, true),
            (OS, true),
            (CAPACITY_TYPE, true),
            (NODEPOOL, true),
            (WINDOWS_BUILD, true),
            (ZONE_ID, true),
            (AWS_INSTANCE_FAMILY, true),
            (AWS_INSTANCE_CPU, true),
            (AWS_INSTANCE_GPU_NAME, true),
            (AWS_INSTANCE_TENANCY, true),
            (AWS_CAPACITY_RESERVATION_ID, true),
            (AWS_PLACEMENT_GROUP_PARTITION, true),
            (HOSTNAME, false),
            (NODE_INITIALIZED, false),
            (NODE_REGISTERED, false),
            (AWS_NODE_CLASS, false),
            // Aliases are normalised before lookup; the alias itself is not well-known.
            ("failure-domain.beta.kubernetes.io/zone", false),
            ("beta.kubernetes.io/arch", false),
            ("topology.kubernetes.io/zone ", false),
            ("example.com/team", false),
            ("", false),
        ];
        for (key, want) in cases {
            assert_eq!(is_well_known(key), want, "{key:?}");
        }
    }

    #[test]
    fn restricted_table() {
        // (key, restricted?) following IsRestrictedLabel with the AWS restricted domain.
        let cases = [
            // well-known keys are allowed even inside restricted domains
            (CAPACITY_TYPE, false),
            (NODEPOOL, false),
            (AWS_INSTANCE_FAMILY, false),
            (ZONE, false),
            (ARCH, false),
            (WINDOWS_BUILD, false),
            // karpenter.sh and karpenter.k8s.aws domains and their sub-domains
            (NODE_INITIALIZED, true),
            (NODE_REGISTERED, true),
            ("karpenter.sh/custom", true),
            ("sub.karpenter.sh/custom", true),
            ("karpenter.k8s.aws/custom", true),
            (AWS_NODE_CLASS, true),
            ("a.b.karpenter.k8s.aws/x", true),
            // only a dot-separated sub-domain counts, not a mere suffix
            ("notkarpenter.sh/custom", false),
            ("karpenter.shop/custom", false),
            ("karpenter.sh", false),
            // individual restricted keys
            (HOSTNAME, true),
            // kubernetes.io / k8s.io are no longer restricted (Karpenter v1.10+)
            ("kubernetes.io/custom", false),
            ("example.kubernetes.io/custom", false),
            ("node.kubernetes.io/custom", false),
            ("node-restriction.kubernetes.io/custom", false),
            ("k8s.io/custom", false),
            ("kops.k8s.io/instancegroup", false),
            ("topology.kubernetes.io/rack", false),
            // plain custom labels
            ("team", false),
            ("example.com/team", false),
        ];
        for (key, want) in cases {
            assert_eq!(restricted_reason(key).is_some(), want, "{key:?}");
        }
    }

    #[test]
    fn restricted_message_names_key_and_alternatives() {
        let msg = restricted_reason("karpenter.sh/custom").expect("restricted");
        assert!(
            msg.starts_with("using label karpenter.sh/custom is not allowed"),
            "{msg}"
        );
        assert!(
            msg.contains("such as karpenter.sh/nodepool, karpenter.sh/capacity-type"),
            "{msg}"
        );
        assert!(
            msg.ends_with("restricted domain: [karpenter.k8s.aws karpenter.sh]"),
            "{msg}"
        );
        // The likely fix instead of every well-known label.
        let msg = restricted_reason("karpenter.k8s.aws/capacity-type").expect("restricted");
        assert!(
            msg.contains("did you mean karpenter.sh/capacity-type?"),
            "{msg}"
        );
        assert!(!msg.contains("topology.kubernetes.io/zone"), "{msg}");
        assert!(msg.len() < 300, "{} characters: {msg}", msg.len());
        let msg = restricted_reason("kubernetes.io/hostname").expect("restricted");
        assert!(!msg.contains("did you mean"), "{msg}");
    }

    #[test]
    fn normalization_and_domains() {
        assert_eq!(
            normalized("failure-domain.beta.kubernetes.io/zone"),
            Some(ZONE)
        );
        assert_eq!(
            normalized("failure-domain.beta.kubernetes.io/region"),
            Some(REGION)
        );
        assert_eq!(normalized("beta.kubernetes.io/arch"), Some(ARCH));
        assert_eq!(normalized("beta.kubernetes.io/os"), Some(OS));
        assert_eq!(
            normalized("beta.kubernetes.io/instance-type"),
            Some(INSTANCE_TYPE)
        );
        assert_eq!(normalized(ZONE), None);
        for (_, target) in NORMALIZED_LABELS {
            assert!(is_well_known(target), "{target}");
        }
        assert_eq!(label_domain(ZONE), "topology.kubernetes.io");
        assert_eq!(label_domain("team"), "");
        assert_eq!(label_domain("a/b/c"), "a");
        assert_eq!(
            well_known_values(CAPACITY_TYPE),
            Some(&["on-demand", "reserved", "spot"][..])
        );
        assert_eq!(
            well_known_values(AWS_INSTANCE_TENANCY),
            Some(&["dedicated", "default"][..])
        );
        assert_eq!(well_known_values(ZONE), None);
    }
}
