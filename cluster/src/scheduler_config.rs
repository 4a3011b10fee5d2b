//! `--scheduler-config` / `SCHEDULER_CONFIG` (Karpenter v1.15): the parts of the cluster's
//! kube-scheduler configuration the scheduling simulation mirrors, today the
//! PodTopologySpread plugin's default constraints (applied by
//! [`default_spread`](crate::default_spread)).
//!
//! Two documents are read, as YAML or JSON:
//! - Karpenter's own shape, `podTopologySpread: {defaultConstraints: [...]}`, decoded as
//!   strictly as upstream decodes it (an unknown field anywhere is an error) and validated as
//!   upstream's `SchedulerConfiguration.Validate` does;
//! - a `kubescheduler.config.k8s.io/v1` `KubeSchedulerConfiguration`, the file the
//!   kube-scheduler itself reads: the `default-scheduler` profile's `PodTopologySpread`
//!   plugin arguments, validated as `ValidatePodTopologySpreadArgs` validates them.
//!   `defaultingType: List` applies its `defaultConstraints`; `System` (the kube-scheduler's
//!   default) stands for the kube-scheduler's built-in soft spreads, which Karpenter v1.15
//!   does not mirror either (a cluster without the setting behaves the same), so it applies
//!   none.
//!
//! Every error names the field by its path in the document.

use karpenter_cloudprovider::validation::qualified_name_error;
use karpenter_scheduling::model::{InclusionPolicy, TopologySpreadConstraint, WhenUnsatisfiable};
use serde::Deserialize;
use serde_json::Value;

/// What the simulation mirrors of the kube-scheduler's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SchedulerConfig {
    /// Constraints applied to every pod that declares no `topologySpreadConstraints`, each
    /// with the selector deduced for the pod (their `label_selector` is `None` here).
    pub default_constraints: Vec<TopologySpreadConstraint>,
    /// The document was a KubeSchedulerConfiguration with `defaultingType: System`: the
    /// kube-scheduler's built-in soft spreads, which are not mirrored.
    pub system_defaulting: bool,
}

impl SchedulerConfig {
    /// Whether any pod can get a default constraint.
    pub fn is_active(&self) -> bool {
        !self.default_constraints.is_empty()
    }
}

/// Why a scheduler configuration cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerConfigError {
    /// Not a YAML/JSON document of a known shape, or an unknown or mistyped field.
    #[error("decoding scheduler config: {0}")]
    Decode(String),
    /// A field the kube-scheduler (or Karpenter) would reject.
    #[error("{field}: {message}")]
    Invalid {
        /// Path of the field in the document (`podTopologySpread.defaultConstraints[0].maxSkew`).
        field: String,
        /// Why it is rejected.
        message: String,
    },
}

fn invalid(field: String, message: impl Into<String>) -> SchedulerConfigError {
    SchedulerConfigError::Invalid {
        field,
        message: message.into(),
    }
}

/// The scheduler name pods get by default, and the profile kube-scheduler gives it.
const DEFAULT_SCHEDULER: &str = "default-scheduler";
const KUBE_SCHEDULER_API_VERSION: &str = "kubescheduler.config.k8s.io/v1";

/// Karpenter's document: `podTopologySpread` is its only field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct KarpenterDocument {
    #[serde(default)]
    pod_topology_spread: Option<KarpenterSpread>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct KarpenterSpread {
    #[serde(default)]
    default_constraints: Vec<RawConstraint>,
}

/// `core/v1` TopologySpreadConstraint, as written in the document.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConstraint {
    #[serde(default)]
    max_skew: i32,
    #[serde(default)]
    topology_key: String,
    #[serde(default)]
    when_unsatisfiable: String,
    #[serde(default)]
    label_selector: Option<Value>,
    #[serde(default)]
    min_domains: Option<i32>,
    #[serde(default)]
    node_affinity_policy: Option<String>,
    #[serde(default)]
    node_taints_policy: Option<String>,
    #[serde(default)]
    match_label_keys: Option<Vec<String>>,
}

/// The KubeSchedulerConfiguration fields read; the others (client connection, leader
/// election, plugin sets …) are the kube-scheduler's business.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KubeSchedulerConfiguration {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    profiles: Vec<Profile>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Profile {
    #[serde(default)]
    scheduler_name: Option<String>,
    #[serde(default)]
    plugin_config: Vec<PluginConfig>,
}

#[derive(Deserialize)]
struct PluginConfig {
    #[serde(default)]
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

/// `PodTopologySpreadArgs`, decoded strictly as the kube-scheduler decodes plugin arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodTopologySpreadArgs {
    #[serde(default, rename = "apiVersion")]
    _api_version: Option<String>,
    #[serde(default, rename = "kind")]
    _kind: Option<String>,
    #[serde(default)]
    default_constraints: Vec<RawConstraint>,
    #[serde(default)]
    defaulting_type: Option<String>,
}

/// Which validator's rules apply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rules {
    /// Karpenter's: `matchLabelKeys` is refused, as it has no effect on default constraints.
    Karpenter,
    /// The kube-scheduler's: `matchLabelKeys` is accepted and, having no effect, dropped.
    KubeScheduler,
}

/// Parses and validates the value of `--scheduler-config`. Empty (or blank) text is no
/// configuration (`None`), as upstream.
///
/// # Errors
/// [`SchedulerConfigError::Decode`] for text that is not a document of either shape (with
/// the path of an unknown or mistyped field), [`SchedulerConfigError::Invalid`] for a value
/// the validators refuse.
pub fn parse_scheduler_config(text: &str) -> Result<Option<SchedulerConfig>, SchedulerConfigError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let value = decode_value(text)?;
    let is_kube_scheduler = value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k == "KubeSchedulerConfiguration");
    if is_kube_scheduler {
        return kube_scheduler(value).map(Some);
    }
    let doc: KarpenterDocument = typed(value, "")?;
    let constraints = doc
        .pod_topology_spread
        .map(|s| s.default_constraints)
        .unwrap_or_default();
    let default_constraints = validate(
        &constraints,
        "podTopologySpread.defaultConstraints",
        Rules::Karpenter,
    )?;
    Ok(Some(SchedulerConfig {
        default_constraints,
        system_defaulting: false,
    }))
}

fn decode_value(text: &str) -> Result<Value, SchedulerConfigError> {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return Ok(v);
    }
    serde_saphyr::from_str::<Value>(text).map_err(|e| SchedulerConfigError::Decode(e.to_string()))
}

/// Decodes `value` into `T`, naming the offending field's path under `prefix`.
fn typed<T: serde::de::DeserializeOwned>(
    value: Value,
    prefix: &str,
) -> Result<T, SchedulerConfigError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let at = match (prefix.is_empty(), path.as_str()) {
            (_, ".") => prefix.to_owned(),
            (true, _) => path,
            (false, _) => format!("{prefix}.{path}"),
        };
        let why = e.into_inner();
        SchedulerConfigError::Decode(if at.is_empty() {
            why.to_string()
        } else {
            format!("{at}: {why}")
        })
    })
}

fn kube_scheduler(value: Value) -> Result<SchedulerConfig, SchedulerConfigError> {
    let config: KubeSchedulerConfiguration = typed(value, "")?;
    if config.api_version != KUBE_SCHEDULER_API_VERSION {
        return Err(invalid(
            "apiVersion".into(),
            format!(
                "{:?} is not supported, expected {KUBE_SCHEDULER_API_VERSION:?}",
                config.api_version
            ),
        ));
    }
    // Without profiles the kube-scheduler runs one default profile: System defaulting.
    let mut found = None;
    for (i, profile) in config.profiles.into_iter().enumerate() {
        let name = profile
            .scheduler_name
            .as_deref()
            .unwrap_or(DEFAULT_SCHEDULER);
        if name != DEFAULT_SCHEDULER {
            continue;
        }
        for (j, plugin) in profile.plugin_config.into_iter().enumerate() {
            if plugin.name == "PodTopologySpread" {
                found = Some((format!("profiles[{i}].pluginConfig[{j}].args"), plugin.args));
            }
        }
        break;
    }
    let Some((path, Some(args))) = found else {
        return Ok(SchedulerConfig {
            default_constraints: Vec::new(),
            system_defaulting: true,
        });
    };
    let args: PodTopologySpreadArgs = typed(args, &path)?;
    let defaulting = args.defaulting_type.as_deref().unwrap_or("System");
    let field = format!("{path}.defaultingType");
    match defaulting {
        "System" if !args.default_constraints.is_empty() => Err(invalid(
            field,
            "Invalid value \"System\": when .defaultConstraints are not empty",
        )),
        "System" => Ok(SchedulerConfig {
            default_constraints: Vec::new(),
            system_defaulting: true,
        }),
        "List" => Ok(SchedulerConfig {
            default_constraints: validate(
                &args.default_constraints,
                &format!("{path}.defaultConstraints"),
                Rules::KubeScheduler,
            )?,
            system_defaulting: false,
        }),
        other => Err(invalid(
            field,
            format!("Unsupported value: {other:?}: supported values: \"List\", \"System\""),
        )),
    }
}

/// Validates every constraint, then refuses repeats, as upstream does.
fn validate(
    constraints: &[RawConstraint],
    path: &str,
    rules: Rules,
) -> Result<Vec<TopologySpreadConstraint>, SchedulerConfigError> {
    let mut out = Vec::with_capacity(constraints.len());
    for (i, raw) in constraints.iter().enumerate() {
        let at = format!("{path}[{i}]");
        out.push(constraint(raw, &at, rules)?);
        if let Some(j) = constraints[..i].iter().position(|o| {
            o.topology_key == raw.topology_key && o.when_unsatisfiable == raw.when_unsatisfiable
        }) {
            return Err(invalid(
                at,
                format!(
                    "is a duplicate of [{j}], {{{}, {}}}",
                    raw.topology_key, raw.when_unsatisfiable
                ),
            ));
        }
    }
    Ok(out)
}

fn constraint(
    raw: &RawConstraint,
    at: &str,
    rules: Rules,
) -> Result<TopologySpreadConstraint, SchedulerConfigError> {
    let field = |name: &str| format!("{at}.{name}");
    if raw.max_skew <= 0 {
        return Err(invalid(field("maxSkew"), "must be greater than 0"));
    }
    if raw.topology_key.is_empty() {
        return Err(invalid(field("topologyKey"), "must be set"));
    }
    if let Some(why) = qualified_name_error(&raw.topology_key) {
        return Err(invalid(
            field("topologyKey"),
            format!("{:?} is not a valid label name, {why}", raw.topology_key),
        ));
    }
    let when_unsatisfiable = match raw.when_unsatisfiable.as_str() {
        "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        other => {
            return Err(invalid(
                field("whenUnsatisfiable"),
                format!("{other:?} must be one of \"DoNotSchedule\" or \"ScheduleAnyway\""),
            ));
        }
    };
    if raw.label_selector.as_ref().is_some_and(|v| !v.is_null()) {
        return Err(invalid(
            field("labelSelector"),
            "must not be set, as selectors are deduced for each pod",
        ));
    }
    let match_label_keys = raw.match_label_keys.as_deref().unwrap_or_default();
    if rules == Rules::Karpenter && !match_label_keys.is_empty() {
        return Err(invalid(
            field("matchLabelKeys"),
            "must not be set, as it has no effect on default constraints",
        ));
    }
    // The API server's rules for a pod's constraint, which a default becomes.
    if let Some(min) = raw.min_domains {
        if min < 1 {
            return Err(invalid(field("minDomains"), "must be greater than 0"));
        }
        if when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule {
            return Err(invalid(
                field("minDomains"),
                "can only be set when whenUnsatisfiable is DoNotSchedule",
            ));
        }
    }
    let policy = |name: &str, value: Option<&str>, default: InclusionPolicy| match value {
        None => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(other) => Err(invalid(
            field(name),
            format!("{other:?} must be one of \"Honor\" or \"Ignore\""),
        )),
    };
    Ok(TopologySpreadConstraint {
        max_skew: raw.max_skew,
        topology_key: raw.topology_key.clone(),
        when_unsatisfiable,
        label_selector: None,
        min_domains: raw.min_domains,
        node_affinity_policy: policy(
            "nodeAffinityPolicy",
            raw.node_affinity_policy.as_deref(),
            InclusionPolicy::Honor,
        )?,
        node_taints_policy: policy(
            "nodeTaintsPolicy",
            raw.node_taints_policy.as_deref(),
            InclusionPolicy::Ignore,
        )?,
        // kube-scheduler replaces a default's selector with the deduced one, so the keys
        // it would have merged in have no effect.
        match_label_keys: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn err(text: &str) -> String {
        parse_scheduler_config(text).unwrap_err().to_string()
    }

    #[test]
    fn empty_is_no_configuration() {
        assert_eq!(parse_scheduler_config(""), Ok(None));
        assert_eq!(parse_scheduler_config("  \n"), Ok(None));
        let c = parse_scheduler_config("{}").unwrap().unwrap();
        assert!(!c.is_active());
    }

    #[test]
    fn karpenter_shape_in_yaml_and_json() {
        let yaml = format!(
            "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    topologyKey: {ZONE}\n    \
             whenUnsatisfiable: DoNotSchedule\n    minDomains: 3\n  - maxSkew: 2\n    \
             topologyKey: kubernetes.io/hostname\n    whenUnsatisfiable: ScheduleAnyway\n    \
             nodeTaintsPolicy: Honor\n"
        );
        let c = parse_scheduler_config(&yaml).unwrap().unwrap();
        assert!(c.is_active() && !c.system_defaulting);
        assert_eq!(c.default_constraints.len(), 2);
        let zone = &c.default_constraints[0];
        assert_eq!(
            (zone.max_skew, zone.topology_key.as_str(), zone.min_domains),
            (1, ZONE, Some(3))
        );
        assert_eq!(zone.when_unsatisfiable, WhenUnsatisfiable::DoNotSchedule);
        assert_eq!(zone.node_affinity_policy, InclusionPolicy::Honor);
        assert_eq!(zone.node_taints_policy, InclusionPolicy::Ignore);
        let host = &c.default_constraints[1];
        assert_eq!(host.when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
        assert_eq!(host.node_taints_policy, InclusionPolicy::Honor);
        assert!(host.label_selector.is_none());
        let json = format!(
            r#"{{"podTopologySpread":{{"defaultConstraints":[{{"maxSkew":1,"topologyKey":"{ZONE}","whenUnsatisfiable":"DoNotSchedule","minDomains":3}},{{"maxSkew":2,"topologyKey":"kubernetes.io/hostname","whenUnsatisfiable":"ScheduleAnyway","nodeTaintsPolicy":"Honor"}}]}}}}"#
        );
        assert_eq!(parse_scheduler_config(&json).unwrap(), Some(c));
    }

    #[test]
    fn unknown_fields_are_refused_with_their_path() {
        let e = err("podTopologySpread: {defaultConstraint: []}");
        assert!(
            e.contains("podTopologySpread") && e.contains("defaultConstraint"),
            "{e}"
        );
        let e = err(&format!(
            "podTopologySpread: {{defaultConstraints: [{{maxSkew: 1, topologyKey: {ZONE}, \
             whenUnsatisfiable: DoNotSchedule, maxskew: 2}}]}}"
        ));
        assert!(
            e.contains("defaultConstraints[0]") && e.contains("maxskew"),
            "{e}"
        );
        let e = err("profiles: []");
        assert!(e.contains("profiles"), "{e}");
        let e = err("podTopologySpread: {defaultConstraints: [{maxSkew: one}]}");
        assert!(e.contains("defaultConstraints[0].maxSkew"), "{e}");
    }

    #[test]
    fn each_rule_names_the_field_as_upstream() {
        let one = |c: &str| err(&format!("podTopologySpread: {{defaultConstraints: [{c}]}}"));
        let cases = [
            (
                format!("{{maxSkew: 0, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule}}"),
                "[0].maxSkew: must be greater than 0",
            ),
            (
                "{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}".to_owned(),
                "[0].topologyKey: must be set",
            ),
            (
                "{maxSkew: 1, topologyKey: 'bad key', whenUnsatisfiable: DoNotSchedule}".to_owned(),
                "[0].topologyKey: \"bad key\" is not a valid label name",
            ),
            (
                format!("{{maxSkew: 1, topologyKey: {ZONE}}}"),
                "[0].whenUnsatisfiable: \"\" must be one of",
            ),
            (
                format!(
                    "{{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule, \
                     labelSelector: {{matchLabels: {{app: web}}}}}}"
                ),
                "[0].labelSelector: must not be set, as selectors are deduced for each pod",
            ),
            (
                format!(
                    "{{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule, \
                     matchLabelKeys: [app]}}"
                ),
                "[0].matchLabelKeys: must not be set",
            ),
            (
                format!(
                    "{{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: ScheduleAnyway, \
                     minDomains: 2}}"
                ),
                "[0].minDomains: can only be set when whenUnsatisfiable is DoNotSchedule",
            ),
            (
                format!(
                    "{{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule, \
                     nodeAffinityPolicy: honor}}"
                ),
                "[0].nodeAffinityPolicy: \"honor\" must be one of",
            ),
        ];
        for (constraint, expected) in cases {
            let e = one(&constraint);
            assert!(
                e.starts_with("podTopologySpread.defaultConstraints") && e.contains(expected),
                "{constraint}: {e}"
            );
        }
        let e = one(&format!(
            "{{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule}}, \
             {{maxSkew: 3, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule}}"
        ));
        assert_eq!(
            e,
            format!(
                "podTopologySpread.defaultConstraints[1]: is a duplicate of [0], \
                 {{{ZONE}, DoNotSchedule}}"
            )
        );
        // The same key with another action is not a repeat.
        assert!(
            parse_scheduler_config(&format!(
                "podTopologySpread: {{defaultConstraints: [\
                 {{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule}}, \
                 {{maxSkew: 3, topologyKey: {ZONE}, whenUnsatisfiable: ScheduleAnyway}}]}}"
            ))
            .is_ok()
        );
    }

    fn kube_scheduler(args: &str) -> String {
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             clientConnection: {{kubeconfig: /etc/kubernetes/scheduler.conf}}\nprofiles:\n\
             - schedulerName: batch\n  pluginConfig:\n  - name: PodTopologySpread\n    \
             args: {{defaultingType: List, defaultConstraints: [{{maxSkew: 9, topologyKey: {ZONE}, \
             whenUnsatisfiable: DoNotSchedule}}]}}\n\
             - pluginConfig:\n  - name: NodeResourcesFit\n    args: {{scoringStrategy: {{type: MostAllocated}}}}\n  \
             - name: PodTopologySpread\n    args: {args}\n"
        )
    }

    #[test]
    fn kube_scheduler_configuration_reads_the_default_profile() {
        let c = parse_scheduler_config(&kube_scheduler(&format!(
            "{{apiVersion: kubescheduler.config.k8s.io/v1, kind: PodTopologySpreadArgs, \
             defaultingType: List, defaultConstraints: [{{maxSkew: 1, topologyKey: {ZONE}, \
             whenUnsatisfiable: ScheduleAnyway, matchLabelKeys: [app]}}]}}"
        )))
        .unwrap()
        .unwrap();
        assert_eq!(c.default_constraints.len(), 1, "not the batch profile's");
        assert_eq!(c.default_constraints[0].max_skew, 1);
        assert!(
            c.default_constraints[0].match_label_keys.is_empty(),
            "inert in the kube-scheduler, dropped"
        );
        // System defaulting (explicit or by default) applies nothing, and says so.
        for args in ["{defaultingType: System}", "{}"] {
            let c = parse_scheduler_config(&kube_scheduler(args))
                .unwrap()
                .unwrap();
            assert!(!c.is_active() && c.system_defaulting, "{args}");
        }
        let c = parse_scheduler_config(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        )
        .unwrap()
        .unwrap();
        assert!(c.system_defaulting);
    }

    #[test]
    fn kube_scheduler_configuration_is_validated_as_the_kube_scheduler_does() {
        let e = err(&kube_scheduler(&format!(
            "{{defaultingType: System, defaultConstraints: [{{maxSkew: 1, topologyKey: {ZONE}, \
             whenUnsatisfiable: DoNotSchedule}}]}}"
        )));
        assert_eq!(
            e,
            "profiles[1].pluginConfig[1].args.defaultingType: Invalid value \"System\": when \
             .defaultConstraints are not empty"
        );
        let e = err(&kube_scheduler("{defaultingType: Lists}"));
        assert!(
            e.starts_with("profiles[1].pluginConfig[1].args.defaultingType: Unsupported value"),
            "{e}"
        );
        let e = err(&kube_scheduler(
            "{defaultingType: List, defaultConstraints: [{maxSkew: -1}]}",
        ));
        assert_eq!(
            e,
            "profiles[1].pluginConfig[1].args.defaultConstraints[0].maxSkew: must be greater than 0"
        );
        let e = err(&kube_scheduler(
            "{defaultingType: List, defaultConstrains: []}",
        ));
        assert!(
            e.contains("profiles[1].pluginConfig[1].args") && e.contains("defaultConstrains"),
            "{e}"
        );
        let e = err(
            "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
        );
        assert!(
            e.starts_with("apiVersion: \"kubescheduler.config.k8s.io/v1beta3\""),
            "{e}"
        );
    }

    #[test]
    fn not_a_document() {
        let e = err("[1, 2");
        assert!(e.starts_with("decoding scheduler config"), "{e}");
        let e = err("just text");
        assert!(e.starts_with("decoding scheduler config"), "{e}");
    }
}
