//! `spec.kubelet` (Karpenter v1.15): an open map of the kubelet's `KubeletConfiguration`
//! (`kubelet.config.k8s.io/v1beta1`, k8s.io/kubelet v0.37.0, the version upstream v1.15.1 is
//! built against). The API server does not check it; the controller does
//! ([`KubeletConfiguration::validate`], as upstream's `ValidateKubeletConfig`), and a class
//! whose configuration fails is reported with `ValidationSucceeded=False` and launches
//! nothing.
//!
//! The fields Karpenter reads for scheduling and bootstrap ([`ParsedKubelet`]) are typed;
//! every other field is passed through to the node by the AMI families that render the raw
//! configuration (AL2023), and refused for those that would drop it.
//!
//! A v1.14 `spec.kubelet` (the typed subset) reads unchanged.

use crate::nodeclass::{EVICTION_SIGNALS, RESERVED_RESOURCES};
use karpenter_cloudprovider::duration::parse_go_duration;
use karpenter_cloudprovider::v1::kubelet::MANAGED_KUBELET_FIELDS;
use karpenter_scheduling::quantity::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// `spec.kubelet`: any KubeletConfiguration field, by its JSON name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KubeletConfiguration(pub BTreeMap<String, Value>);

impl JsonSchema for KubeletConfiguration {
    fn schema_name() -> Cow<'static, str> {
        "KubeletConfiguration".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "description": "Kubelet configures the kubelet on provisioned nodes. Any field of the upstream KubeletConfiguration for the Kubernetes version Karpenter was built against may be set. Karpenter reads the fields relevant to scheduling (maxPods, podsPerCore, kubeReserved, systemReserved, evictionHard) and passes all others through to UserData unchanged. Field names and types are validated by Karpenter, which reports a rejected configuration on status.conditions as ValidationSucceeded=False rather than failing the apply.",
            "additionalProperties": {"x-kubernetes-preserve-unknown-fields": true},
            "x-kubernetes-preserve-unknown-fields": true,
        })
    }
}

/// `maxPods`: a count, or (with `AWS_FEATURE_GATES` `NodeClassCEL`) a CEL expression
/// evaluated for each instance type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaxPods {
    /// A fixed count.
    Count(i32),
    /// A CEL expression.
    Expression(String),
}

/// The fields Karpenter reads, typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedKubelet {
    /// `clusterDNS`.
    pub cluster_dns: Vec<String>,
    /// `maxPods`.
    pub max_pods: Option<MaxPods>,
    /// `podsPerCore`.
    pub pods_per_core: Option<i32>,
    /// `systemReserved`: quantities, or CEL expressions.
    pub system_reserved: BTreeMap<String, String>,
    /// `kubeReserved`: quantities, or CEL expressions.
    pub kube_reserved: BTreeMap<String, String>,
    /// `evictionHard`.
    pub eviction_hard: BTreeMap<String, String>,
    /// `evictionSoft`.
    pub eviction_soft: BTreeMap<String, String>,
    /// `evictionSoftGracePeriod` (Go durations).
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    /// `evictionMaxPodGracePeriod` (seconds).
    pub eviction_max_pod_grace_period: Option<i32>,
    /// `imageGCHighThresholdPercent`.
    pub image_gc_high_threshold_percent: Option<i32>,
    /// `imageGCLowThresholdPercent`.
    pub image_gc_low_threshold_percent: Option<i32>,
    /// `cpuCFSQuota`.
    pub cpu_cfs_quota: Option<bool>,
}

impl ParsedKubelet {
    /// Every expression, with its field (`maxPods`, `kubeReserved[cpu]`).
    pub fn expressions(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(MaxPods::Expression(e)) = &self.max_pods {
            out.push(("maxPods".to_owned(), e.clone()));
        }
        for (field, map) in [
            ("kubeReserved", &self.kube_reserved),
            ("systemReserved", &self.system_reserved),
        ] {
            for (key, value) in map {
                if Quantity::parse(value).is_err() {
                    out.push((format!("{field}[{key}]"), value.clone()));
                }
            }
        }
        out
    }

    /// Whether `maxPods` is an expression or a reservation is not a quantity.
    pub fn has_expressions(&self) -> bool {
        matches!(self.max_pods, Some(MaxPods::Expression(_))) || self.has_resource_expressions()
    }

    /// Whether `kubeReserved` or `systemReserved` holds a value that is not a quantity (a
    /// CEL expression).
    pub fn has_resource_expressions(&self) -> bool {
        self.kube_reserved
            .values()
            .chain(self.system_reserved.values())
            .any(|v| Quantity::parse(v).is_err())
    }
}

/// A JSON type a KubeletConfiguration field decodes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Int32,
    Int64,
    Float,
    Str,
    /// `metav1.Duration`: a string Go's `time.ParseDuration` reads.
    Duration,
    StrList,
    Int32List,
    StrMap,
    BoolMap,
    StrListMap,
    /// A nested struct (its own fields are the kubelet's to check).
    Object,
    ObjectList,
}

/// Every field of k8s.io/kubelet v0.37.0's `KubeletConfiguration`, with its JSON type
/// (`apiVersion`/`kind` are its inline TypeMeta).
const FIELDS: &[(&str, Kind)] = {
    use Kind::*;
    &[
        ("apiVersion", Str),
        ("kind", Str),
        ("enableServer", Bool),
        ("staticPodPath", Str),
        ("podLogsDir", Str),
        ("syncFrequency", Duration),
        ("fileCheckFrequency", Duration),
        ("httpCheckFrequency", Duration),
        ("staticPodURL", Str),
        ("staticPodURLHeader", StrListMap),
        ("address", Str),
        ("port", Int32),
        ("readOnlyPort", Int32),
        ("tlsCertFile", Str),
        ("tlsPrivateKeyFile", Str),
        ("tlsCipherSuites", StrList),
        ("tlsCurvePreferences", Int32List),
        ("tlsMinVersion", Str),
        ("rotateCertificates", Bool),
        ("serverTLSBootstrap", Bool),
        ("authentication", Object),
        ("authorization", Object),
        ("registryPullQPS", Int32),
        ("registryBurst", Int32),
        ("imagePullCredentialsVerificationPolicy", Str),
        ("preloadedImagesVerificationAllowlist", StrList),
        ("eventRecordQPS", Int32),
        ("eventBurst", Int32),
        ("enableDebuggingHandlers", Bool),
        ("enableContentionProfiling", Bool),
        ("healthzPort", Int32),
        ("healthzBindAddress", Str),
        ("oomScoreAdj", Int32),
        ("clusterDomain", Str),
        ("clusterDNS", StrList),
        ("streamingConnectionIdleTimeout", Duration),
        ("nodeStatusUpdateFrequency", Duration),
        ("nodeStatusReportFrequency", Duration),
        ("nodeLeaseDurationSeconds", Int32),
        ("imageMinimumGCAge", Duration),
        ("imageMaximumGCAge", Duration),
        ("imageGCHighThresholdPercent", Int32),
        ("imageGCLowThresholdPercent", Int32),
        ("volumeStatsAggPeriod", Duration),
        ("kubeletCgroups", Str),
        ("systemCgroups", Str),
        ("cgroupRoot", Str),
        ("cgroupsPerQOS", Bool),
        ("cgroupDriver", Str),
        ("cpuManagerPolicy", Str),
        ("singleProcessOOMKill", Bool),
        ("cpuManagerPolicyOptions", StrMap),
        ("cpuManagerReconcilePeriod", Duration),
        ("memoryManagerPolicy", Str),
        ("topologyManagerPolicy", Str),
        ("topologyManagerScope", Str),
        ("topologyManagerPolicyOptions", StrMap),
        ("qosReserved", StrMap),
        ("runtimeRequestTimeout", Duration),
        ("hairpinMode", Str),
        ("maxPods", Int32),
        ("podCIDR", Str),
        ("podPidsLimit", Int64),
        ("resolvConf", Str),
        ("runOnce", Bool),
        ("cpuCFSQuota", Bool),
        ("cpuCFSQuotaPeriod", Duration),
        ("nodeStatusMaxImages", Int32),
        ("maxOpenFiles", Int64),
        ("contentType", Str),
        ("kubeAPIQPS", Int32),
        ("kubeAPIBurst", Int32),
        ("serializeImagePulls", Bool),
        ("maxParallelImagePulls", Int32),
        ("evictionHard", StrMap),
        ("evictionSoft", StrMap),
        ("evictionSoftGracePeriod", StrMap),
        ("evictionPressureTransitionPeriod", Duration),
        ("evictionMaxPodGracePeriod", Int32),
        ("evictionMinimumReclaim", StrMap),
        ("mergeDefaultEvictionSettings", Bool),
        ("podsPerCore", Int32),
        ("enableControllerAttachDetach", Bool),
        ("protectKernelDefaults", Bool),
        ("makeIPTablesUtilChains", Bool),
        ("iptablesMasqueradeBit", Int32),
        ("iptablesDropBit", Int32),
        ("featureGates", BoolMap),
        ("failSwapOn", Bool),
        ("memorySwap", Object),
        ("containerLogMaxSize", Str),
        ("containerLogMaxFiles", Int32),
        ("containerLogMaxWorkers", Int32),
        ("containerLogMonitorInterval", Duration),
        ("configMapAndSecretChangeDetectionStrategy", Str),
        ("systemReserved", StrMap),
        ("kubeReserved", StrMap),
        ("reservedSystemCPUs", Str),
        ("showHiddenMetricsForVersion", Str),
        ("systemReservedCgroup", Str),
        ("kubeReservedCgroup", Str),
        ("enforceNodeAllocatable", StrList),
        ("allowedUnsafeSysctls", StrList),
        ("defaultPodSysctls", StrMap),
        ("volumePluginDir", Str),
        ("providerID", Str),
        ("kernelMemcgNotification", Bool),
        ("logging", Object),
        ("enableSystemLogHandler", Bool),
        ("enableSystemLogQuery", Bool),
        ("shutdownGracePeriod", Duration),
        ("shutdownGracePeriodCriticalPods", Duration),
        ("shutdownGracePeriodByPodPriority", ObjectList),
        ("crashLoopBackOff", Object),
        ("reservedMemory", ObjectList),
        ("enableProfilingHandler", Bool),
        ("enableDebugFlagsHandler", Bool),
        ("seccompDefault", Bool),
        ("memoryThrottlingFactor", Float),
        ("memoryReservationPolicy", Str),
        ("registerWithTaints", ObjectList),
        ("registerNode", Bool),
        ("tracing", Object),
        ("localStorageCapacityIsolation", Bool),
        ("containerRuntimeEndpoint", Str),
        ("imageServiceEndpoint", Str),
        ("failCgroupV1", Bool),
        ("userNamespaces", Object),
    ]
};

/// Fields Karpenter sets itself, with why: a user value would be overwritten at bootstrap.
const KARPENTER_OWNED: [(&str, &str); 1] = [(
    "registerWithTaints",
    "Karpenter sets it from the NodeClaim's taints so the node registers unschedulable until it's ready",
)];

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `v` decodes as `kind`, as Go's `encoding/json` would decode it (null decodes as
/// anything).
fn decodes_as(v: &Value, kind: Kind) -> Result<(), String> {
    let int_in = |min: i64, max: i64| match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) if (min..=max).contains(&i) => Ok(()),
            Some(_) => Err(format!("number {n} overflows")),
            None => Err(format!("cannot unmarshal number {n} into an integer")),
        },
        other => Err(format!(
            "cannot unmarshal {} into an integer",
            type_name(other)
        )),
    };
    fn each<'v>(mut items: impl Iterator<Item = &'v Value>, kind: Kind) -> Result<(), String> {
        items.try_for_each(|item| decodes_as(item, kind))
    }
    match (kind, v) {
        (_, Value::Null) => Ok(()),
        (Kind::Bool, Value::Bool(_)) | (Kind::Str, Value::String(_)) => Ok(()),
        (Kind::Float, Value::Number(_)) => Ok(()),
        (Kind::Int32, _) => int_in(i64::from(i32::MIN), i64::from(i32::MAX)),
        (Kind::Int64, _) => int_in(i64::MIN, i64::MAX),
        (Kind::Duration, Value::String(s)) => parse_go_duration(s)
            .map(|_| ())
            .map_err(|e| format!("invalid duration {s:?}: {e}")),
        (Kind::StrList, Value::Array(a)) => each(a.iter(), Kind::Str),
        (Kind::Int32List, Value::Array(a)) => each(a.iter(), Kind::Int32),
        (Kind::StrMap, Value::Object(m)) => each(m.values(), Kind::Str),
        (Kind::BoolMap, Value::Object(m)) => each(m.values(), Kind::Bool),
        (Kind::StrListMap, Value::Object(m)) => each(m.values(), Kind::StrList),
        (Kind::Object, Value::Object(_)) => Ok(()),
        (Kind::ObjectList, Value::Array(a)) => each(a.iter(), Kind::Object),
        (kind, other) => Err(format!(
            "cannot unmarshal {} into {}",
            type_name(other),
            match kind {
                Kind::Bool => "a bool",
                Kind::Float => "a number",
                Kind::Str | Kind::Duration => "a string",
                Kind::StrList | Kind::Int32List | Kind::ObjectList => "a list",
                _ => "an object",
            }
        )),
    }
}

impl KubeletConfiguration {
    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fields set that Karpenter does not itself apply, sorted.
    pub fn unmanaged_fields(&self) -> Vec<String> {
        self.0
            .keys()
            .filter(|k| !MANAGED_KUBELET_FIELDS.contains(&k.as_str()))
            .cloned()
            .collect()
    }

    /// The configuration as JSON with its keys sorted (`null` when empty): what the class
    /// hash covers, as upstream's `KubeletConfiguration.String()`.
    pub fn canonical_json(&self) -> String {
        if self.0.is_empty() {
            return "null".into();
        }
        serde_json::to_string(&self.0).unwrap_or_default()
    }

    fn string_map(&self, field: &str) -> Option<BTreeMap<String, String>> {
        serde_json::from_value(self.0.get(field)?.clone()).ok()
    }

    fn int(&self, field: &str) -> Option<i64> {
        self.0.get(field)?.as_i64()
    }

    /// The fields Karpenter reads.
    ///
    /// # Errors
    /// A field of the wrong type, naming it (what [`validate`](Self::validate) reports).
    pub fn parse(&self) -> Result<ParsedKubelet, String> {
        fn get<T: serde::de::DeserializeOwned + Default>(
            k: &KubeletConfiguration,
            field: &str,
        ) -> Result<T, String> {
            match k.0.get(field) {
                None | Some(Value::Null) => Ok(T::default()),
                Some(v) => serde_json::from_value(v.clone())
                    .map_err(|e| format!("spec.kubelet.{field}: {e}")),
            }
        }
        let max_pods = match self.0.get("maxPods") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(MaxPods::Expression(s.clone())),
            Some(v) => Some(MaxPods::Count(
                serde_json::from_value(v.clone())
                    .map_err(|e| format!("spec.kubelet.maxPods: {e}"))?,
            )),
        };
        Ok(ParsedKubelet {
            cluster_dns: get(self, "clusterDNS")?,
            max_pods,
            pods_per_core: get(self, "podsPerCore")?,
            system_reserved: get(self, "systemReserved")?,
            kube_reserved: get(self, "kubeReserved")?,
            eviction_hard: get(self, "evictionHard")?,
            eviction_soft: get(self, "evictionSoft")?,
            eviction_soft_grace_period: get(self, "evictionSoftGracePeriod")?,
            eviction_max_pod_grace_period: get(self, "evictionMaxPodGracePeriod")?,
            image_gc_high_threshold_percent: get(self, "imageGCHighThresholdPercent")?,
            image_gc_low_threshold_percent: get(self, "imageGCLowThresholdPercent")?,
            cpu_cfs_quota: get(self, "cpuCFSQuota")?,
        })
    }

    /// Every reason the kubelet (or Karpenter) would not take this configuration, as
    /// upstream's `ValidateKubeletConfig`: fields the kubelet does not have, values of the
    /// wrong type, fields Karpenter owns, eviction signals and thresholds, reservable
    /// resources, ranges, and the pairs that must agree. A CEL expression in `maxPods`,
    /// `kubeReserved` or `systemReserved` passes here; it is checked where it is evaluated.
    pub fn validate(&self) -> Vec<String> {
        if self.0.is_empty() {
            return Vec::new();
        }
        let mut errs = self.validate_types();
        if !errs.is_empty() {
            // Upstream's strict decode fails as a whole on a type error; unknown fields are
            // reported with the semantic checks.
            if errs.iter().any(|e| !e.contains("unknown field")) {
                return errs;
            }
        }
        self.validate_semantics(&mut errs);
        errs
    }

    fn validate_types(&self) -> Vec<String> {
        let mut errs = Vec::new();
        for (field, value) in &self.0 {
            let Some((_, kind)) = FIELDS.iter().find(|(f, _)| f == field) else {
                errs.push(format!("spec.kubelet: unknown field {field:?}"));
                continue;
            };
            // A CEL expression stands where upstream types an int32.
            if field == "maxPods" && value.is_string() {
                continue;
            }
            if let Err(e) = decodes_as(value, *kind) {
                errs.push(format!("spec.kubelet.{field}: {e}"));
            }
        }
        errs
    }

    fn validate_semantics(&self, errs: &mut Vec<String>) {
        for (field, why) in KARPENTER_OWNED {
            if self.0.contains_key(field) {
                errs.push(format!("spec.kubelet.{field}: can't be set, {why}"));
            }
        }
        let signals = EVICTION_SIGNALS.join(", ");
        for field in [
            "evictionHard",
            "evictionSoft",
            "evictionSoftGracePeriod",
            "evictionMinimumReclaim",
        ] {
            let Some(map) = self.string_map(field) else {
                continue;
            };
            for (key, value) in &map {
                if !EVICTION_SIGNALS.contains(&key.as_str()) {
                    errs.push(format!(
                        "spec.kubelet.{field}: {key:?} isn't a valid eviction signal, must be one of {signals}"
                    ));
                }
                let bad = if field == "evictionSoftGracePeriod" {
                    match parse_go_duration(value) {
                        Err(_) => Some("must be a duration"),
                        Ok(n) if n < 0 => Some("can't be a negative duration"),
                        Ok(_) => None,
                    }
                } else {
                    threshold_error(value)
                };
                if let Some(why) = bad {
                    errs.push(format!("spec.kubelet.{field}[{key}]: {value:?} {why}"));
                }
            }
        }
        let soft = self.string_map("evictionSoft").unwrap_or_default();
        let grace = self
            .string_map("evictionSoftGracePeriod")
            .unwrap_or_default();
        for signal in soft.keys().filter(|s| !grace.contains_key(*s)) {
            errs.push(format!(
                "spec.kubelet.evictionSoft[{signal}]: has no matching evictionSoftGracePeriod"
            ));
        }
        for signal in grace.keys().filter(|s| !soft.contains_key(*s)) {
            errs.push(format!(
                "spec.kubelet.evictionSoftGracePeriod[{signal}]: has no matching evictionSoft"
            ));
        }
        let reservable = RESERVED_RESOURCES.join(", ");
        for field in ["kubeReserved", "systemReserved"] {
            let Some(map) = self.string_map(field) else {
                continue;
            };
            for (key, value) in &map {
                if !RESERVED_RESOURCES.contains(&key.as_str()) {
                    errs.push(format!(
                        "spec.kubelet.{field}: {key:?} isn't a reservable resource, must be one of {reservable}"
                    ));
                }
                if value.starts_with('-') {
                    errs.push(format!(
                        "spec.kubelet.{field}[{key}]: {value:?} can't be a negative resource quantity"
                    ));
                }
            }
        }
        for field in ["imageGCHighThresholdPercent", "imageGCLowThresholdPercent"] {
            if let Some(v) = self.int(field).filter(|v| !(0..=100).contains(v)) {
                errs.push(format!(
                    "spec.kubelet.{field}: {v} must be between 0 and 100"
                ));
            }
        }
        for field in ["podsPerCore", "evictionMaxPodGracePeriod", "maxPods"] {
            if let Some(v) = self.int(field).filter(|v| *v < 0) {
                errs.push(format!("spec.kubelet.{field}: {v} can't be negative"));
            }
        }
        if let (Some(high), Some(low)) = (
            self.int("imageGCHighThresholdPercent"),
            self.int("imageGCLowThresholdPercent"),
        ) && high <= low
        {
            errs.push(format!(
                "spec.kubelet: imageGCHighThresholdPercent ({high}) must be greater than \
                 imageGCLowThresholdPercent ({low})"
            ));
        }
    }
}

/// Upstream's `ValidationSucceeded` reasons for a kubelet configuration.
pub mod reason {
    /// A field the kubelet does not have, a wrong type, or a value out of range.
    pub const INVALID: &str = "InvalidKubeletConfiguration";
    /// An expression, with the `NodeClassCEL` gate off.
    pub const EXPRESSIONS_DISABLED: &str = "KubeletExpressionsDisabled";
    /// An expression that does not compile.
    pub const EXPRESSION_INVALID: &str = "KubeletExpressionInvalid";
    /// An expression that fails for some instance type.
    pub const EXPRESSION_EVAL_FAILED: &str = "KubeletExpressionEvaluationFailed";
    /// A field the class's AMI family would drop.
    pub const UNSUPPORTED: &str = "UnsupportedKubeletConfiguration";
}

/// The controller's checks of a class's kubelet configuration, in upstream's order (the
/// per-instance-type evaluation of expressions is the instance-type provider's): on failure,
/// the `ValidationSucceeded` reason and message.
///
/// # Errors
/// The first failing check's reason and message.
pub fn check(
    kubelet: Option<&KubeletConfiguration>,
    ami_family: &str,
    cel_enabled: bool,
) -> Result<(), (&'static str, String)> {
    let Some(kubelet) = kubelet.filter(|k| !k.is_empty()) else {
        return Ok(());
    };
    let errs = kubelet.validate();
    if !errs.is_empty() {
        return Err((reason::INVALID, errs.join("; ")));
    }
    let parsed = kubelet
        .parse()
        .map_err(|e| (reason::INVALID, format!("parsing spec.kubelet, {e}")))?;
    if parsed.has_expressions() && !cel_enabled {
        return Err((
            reason::EXPRESSIONS_DISABLED,
            "spec.kubelet contains a CEL expression, but the NodeClassCEL feature gate is disabled"
                .into(),
        ));
    }
    for (field, source) in parsed.expressions() {
        crate::kubelet_cel::compile(&source).map_err(|e| {
            (
                reason::EXPRESSION_INVALID,
                format!("spec.kubelet.{field}: {e}"),
            )
        })?;
    }
    supported_by_family(kubelet, &parsed, ami_family).map_err(|m| (reason::UNSUPPORTED, m))
}

/// Upstream's `validateKubeletFieldsSupported`: AL2023 renders the whole configuration and
/// `Custom` renders none of it; the other families apply only the managed fields,
/// Bottlerocket no `podsPerCore`, and take one cluster DNS address.
fn supported_by_family(
    kubelet: &KubeletConfiguration,
    parsed: &ParsedKubelet,
    family: &str,
) -> Result<(), String> {
    use crate::nodeclass::{AMI_FAMILY_AL2023, AMI_FAMILY_BOTTLEROCKET, AMI_FAMILY_CUSTOM};
    if family == AMI_FAMILY_CUSTOM || family == AMI_FAMILY_AL2023 {
        return Ok(());
    }
    let mut messages = Vec::new();
    let mut unsupported = kubelet.unmanaged_fields();
    if parsed.pods_per_core.is_some() && family == AMI_FAMILY_BOTTLEROCKET {
        unsupported.push("podsPerCore".into());
        unsupported.sort();
    }
    if !unsupported.is_empty() {
        messages.push(format!(
            "spec.kubelet has fields not applied by the {family} AMI family that would be silently dropped: {}",
            unsupported.join(", ")
        ));
    }
    if parsed.cluster_dns.len() > 1 {
        messages.push(format!(
            "spec.kubelet.clusterDNS: the {family} AMI family doesn't accept multiple entries, only one, but {} were set",
            parsed.cluster_dns.len()
        ));
    }
    if messages.is_empty() {
        Ok(())
    } else {
        Err(messages.join("; "))
    }
}

/// Why an eviction threshold is neither a percentage in [0, 100] nor a non-negative
/// quantity.
fn threshold_error(value: &str) -> Option<&'static str> {
    if let Some(pct) = value.strip_suffix('%') {
        return match pct.parse::<f64>() {
            Ok(v) if (0.0..=100.0).contains(&v) => None,
            _ => Some("must be a percentage or a resource quantity"),
        };
    }
    match Quantity::parse(value) {
        Err(_) => Some("must be a percentage or a resource quantity"),
        Ok(q) if q.nanos() < 0 => Some("can't be a negative resource quantity"),
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kc(v: Value) -> KubeletConfiguration {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_v1_14_kubelet_block_reads_the_same() {
        let k = kc(json!({
            "clusterDNS": ["10.0.1.100"], "maxPods": 110, "podsPerCore": 2,
            "systemReserved": {"cpu": "100m", "memory": "100Mi"},
            "kubeReserved": {"cpu": "200m"}, "evictionHard": {"memory.available": "5%"},
            "evictionSoft": {"memory.available": "500Mi"},
            "evictionSoftGracePeriod": {"memory.available": "1m"},
            "evictionMaxPodGracePeriod": 60, "imageGCHighThresholdPercent": 85,
            "imageGCLowThresholdPercent": 80, "cpuCFSQuota": true,
        }));
        assert!(k.validate().is_empty(), "{:?}", k.validate());
        let p = k.parse().unwrap();
        assert_eq!(p.max_pods, Some(MaxPods::Count(110)));
        assert_eq!(p.pods_per_core, Some(2));
        assert_eq!(p.kube_reserved["cpu"], "200m");
        assert_eq!(p.cluster_dns, ["10.0.1.100"]);
        assert_eq!(p.cpu_cfs_quota, Some(true));
        assert!(!p.has_expressions());
        assert!(k.unmanaged_fields().is_empty());
    }

    #[test]
    fn any_kubelet_field_is_accepted_and_unknown_ones_named() {
        let k = kc(
            json!({"containerLogMaxSize": "50Mi", "serializeImagePulls": false,
            "shutdownGracePeriod": "30s", "featureGates": {"Foo": true}, "maxPods": 58}),
        );
        assert!(k.validate().is_empty(), "{:?}", k.validate());
        assert_eq!(
            k.unmanaged_fields(),
            [
                "containerLogMaxSize",
                "featureGates",
                "serializeImagePulls",
                "shutdownGracePeriod"
            ]
        );
        let k = kc(json!({"maxpods": 10, "evictionHard": {"memory.available": "1%"}}));
        assert_eq!(k.validate(), ["spec.kubelet: unknown field \"maxpods\""]);
    }

    #[test]
    fn wrong_types_are_reported_alone() {
        let k = kc(json!({"podsPerCore": "two", "evictionHard": {"nope": "1%"}}));
        let errs = k.validate();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("spec.kubelet.podsPerCore: cannot unmarshal string"),
            "{errs:?}"
        );
        for (field, value) in [
            ("shutdownGracePeriod", json!("30 seconds")),
            ("maxPods", json!(1.5)),
            ("maxPods", json!(4_000_000_000_i64)),
            ("clusterDNS", json!("10.0.0.1")),
            ("featureGates", json!({"A": "yes"})),
        ] {
            let errs = kc(json!({ field: value })).validate();
            assert_eq!(errs.len(), 1, "{field}: {errs:?}");
            assert!(
                errs[0].starts_with(&format!("spec.kubelet.{field}:")),
                "{errs:?}"
            );
        }
    }

    #[test]
    fn semantic_rules_are_upstreams() {
        let errs = kc(json!({
            "registerWithTaints": [{"key": "a", "effect": "NoSchedule"}],
            "evictionHard": {"memory.available": "101%", "disk.available": "1Gi"},
            "evictionSoft": {"memory.available": "-1Gi"},
            "evictionSoftGracePeriod": {"nodefs.available": "-1m"},
            "kubeReserved": {"gpu": "1", "cpu": "-1"},
            "imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60,
            "podsPerCore": -1,
        }))
        .validate();
        for expected in [
            "spec.kubelet.registerWithTaints: can't be set",
            "spec.kubelet.evictionHard[memory.available]: \"101%\" must be a percentage or a resource quantity",
            "spec.kubelet.evictionHard: \"disk.available\" isn't a valid eviction signal",
            "spec.kubelet.evictionSoft[memory.available]: \"-1Gi\" can't be a negative resource quantity",
            "spec.kubelet.evictionSoftGracePeriod[nodefs.available]: \"-1m\" can't be a negative duration",
            "spec.kubelet.evictionSoft[memory.available]: has no matching evictionSoftGracePeriod",
            "spec.kubelet.evictionSoftGracePeriod[nodefs.available]: has no matching evictionSoft",
            "spec.kubelet.kubeReserved: \"gpu\" isn't a reservable resource",
            "spec.kubelet.kubeReserved[cpu]: \"-1\" can't be a negative resource quantity",
            "spec.kubelet: imageGCHighThresholdPercent (50) must be greater than imageGCLowThresholdPercent (60)",
            "spec.kubelet.podsPerCore: -1 can't be negative",
        ] {
            assert!(
                errs.iter().any(|e| e.starts_with(expected)),
                "{expected}: {errs:#?}"
            );
        }
    }

    #[test]
    fn expressions_are_recognised() {
        let k = kc(
            json!({"maxPods": "min(110, vcpus * 8)", "kubeReserved": {"cpu": "vcpus * 10", "memory": "1Gi"}}),
        );
        assert!(k.validate().is_empty(), "{:?}", k.validate());
        let p = k.parse().unwrap();
        assert_eq!(
            p.max_pods,
            Some(MaxPods::Expression("min(110, vcpus * 8)".into()))
        );
        assert!(p.has_expressions() && p.has_resource_expressions());
        let k = kc(json!({"kubeReserved": {"memory": "1Gi"}}));
        assert!(!k.parse().unwrap().has_expressions());
    }

    #[test]
    fn the_controller_checks_in_upstreams_order() {
        let expr = kc(json!({"maxPods": "vcpus * 8"}));
        assert_eq!(check(None, "AL2023", false), Ok(()));
        assert_eq!(check(Some(&expr), "AL2023", true), Ok(()));
        assert_eq!(
            check(Some(&expr), "AL2023", false).unwrap_err().0,
            reason::EXPRESSIONS_DISABLED
        );
        let bad = kc(json!({"maxPods": "vcpus * 1.5"}));
        let (why, message) = check(Some(&bad), "AL2023", true).unwrap_err();
        assert_eq!(why, reason::EXPRESSION_INVALID);
        assert!(message.starts_with("spec.kubelet.maxPods:"), "{message}");
        let invalid = kc(json!({"maxPods": "vcpus", "podsPerCore": -2}));
        assert_eq!(
            check(Some(&invalid), "AL2023", false).unwrap_err().0,
            reason::INVALID
        );
        // AL2023 renders any field; the other families only the managed ones.
        let extra =
            kc(json!({"containerLogMaxSize": "50Mi", "podsPerCore": 4, "clusterDNS": ["a", "b"]}));
        assert_eq!(check(Some(&extra), "AL2023", false), Ok(()));
        assert_eq!(check(Some(&extra), "Custom", false), Ok(()));
        let (why, message) = check(Some(&extra), "Bottlerocket", false).unwrap_err();
        assert_eq!(why, reason::UNSUPPORTED);
        assert!(
            message.contains("containerLogMaxSize, podsPerCore"),
            "{message}"
        );
        assert!(message.contains("clusterDNS"), "{message}");
        let (_, message) = check(Some(&extra), "AL2", false).unwrap_err();
        assert!(message.contains(": containerLogMaxSize;"), "{message}");
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let k = kc(json!({"maxPods": 10, "clusterDNS": ["a"]}));
        assert_eq!(k.canonical_json(), r#"{"clusterDNS":["a"],"maxPods":10}"#);
        assert_eq!(KubeletConfiguration::default().canonical_json(), "null");
    }
}
