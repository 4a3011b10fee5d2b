//! User data that bootstraps a node into the cluster, per AMI family:
//!
//! - AL2023: a MIME multi-part archive whose last part is a nodeadm `NodeConfig`
//!   (`application/node.eks.aws`) with the cluster endpoint, CA, CIDR, kubelet configuration,
//!   taints (`registerWithTaints`) and `--node-labels`. The user's own user data comes first:
//!   a MIME archive contributes its parts, a YAML document becomes a NodeConfig part, anything
//!   else a shell-script part (nodeadm merges NodeConfigs in order, so Karpenter's settings
//!   win).
//! - Bottlerocket: TOML settings. The user's TOML is the base; Karpenter sets the
//!   `settings.kubernetes` keys it owns on top.
//! - Custom (and any family without a bootstrap format here): the user's data verbatim.

use crate::kubelet::MaxPods;
use crate::nodeclass::{AMI_FAMILY_AL2023, AMI_FAMILY_BOTTLEROCKET, KubeletConfiguration};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The MIME boundary of generated archives.
pub const MIME_BOUNDARY: &str = "//";
/// Content type of a nodeadm NodeConfig part.
pub const CONTENT_TYPE_NODE_CONFIG: &str = "application/node.eks.aws";
/// Content type of a shell-script part.
pub const CONTENT_TYPE_SHELL: &str = "text/x-shellscript; charset=\"us-ascii\"";

/// A taint for the node to register with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTaint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// What every bootstrap format needs to know.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BootstrapOptions {
    /// Cluster name.
    pub cluster_name: String,
    /// API server URL.
    pub cluster_endpoint: String,
    /// Base64 cluster CA bundle, when known.
    pub ca_bundle: Option<String>,
    /// Service CIDR (nodeadm's `cidr`), when known.
    pub cluster_cidr: Option<String>,
    /// Node labels.
    pub labels: BTreeMap<String, String>,
    /// Taints and startup taints.
    pub taints: Vec<NodeTaint>,
    /// The EC2NodeClass's kubelet block, with its expressions resolved for the instance
    /// types the user data is for (see
    /// [`KubeletResolver::resolved_config`](crate::kubelet_resolve::KubeletResolver::resolved_config)).
    /// AL2023 passes every field through; Bottlerocket writes the ones it has settings for.
    pub kubelet: Option<KubeletConfiguration>,
    /// Pod limit to set when kubelet's `maxPods` is absent (ENI-limited count), if any.
    pub max_pods: Option<i64>,
    /// The user's `spec.userData`.
    pub custom_user_data: Option<String>,
    /// `spec.instanceStorePolicy`.
    pub instance_store_policy: Option<String>,
}

/// Why user data could not be generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    /// The user's MIME archive is malformed.
    #[error("spec.userData: invalid MIME archive: {0}")]
    Mime(String),
    /// The user's Bottlerocket TOML does not parse.
    #[error("spec.userData: invalid Bottlerocket TOML: {0}")]
    Toml(String),
    /// Serialising the generated configuration failed.
    #[error("serialising user data: {0}")]
    Serialise(String),
}

/// One part of a MIME archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MimePart {
    /// The part's content type.
    pub content_type: String,
    /// The part's body.
    pub content: String,
}

/// Generates the user data of `family` (the unencoded text; EC2 wants it base64-encoded).
pub fn generate(family: &str, opts: &BootstrapOptions) -> Result<String, UserDataError> {
    match family {
        AMI_FAMILY_AL2023 => nodeadm(opts),
        AMI_FAMILY_BOTTLEROCKET => bottlerocket(opts),
        _ => Ok(opts.custom_user_data.clone().unwrap_or_default()),
    }
}

fn kubelet_config(opts: &BootstrapOptions) -> Map<String, Value> {
    let mut config = match opts
        .kubelet
        .as_ref()
        .and_then(|k| serde_json::to_value(k).ok())
    {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    if !config.contains_key("maxPods")
        && let Some(max) = opts.max_pods
    {
        config.insert("maxPods".into(), json!(max));
    }
    let taints: Vec<Value> = opts
        .taints
        .iter()
        .map(|t| {
            let mut m = Map::new();
            m.insert("key".into(), json!(t.key));
            if !t.value.is_empty() {
                m.insert("value".into(), json!(t.value));
            }
            m.insert("effect".into(), json!(t.effect));
            Value::Object(m)
        })
        .collect();
    config.insert("registerWithTaints".into(), Value::Array(taints));
    config
}

fn node_labels_flag(labels: &BTreeMap<String, String>) -> Option<String> {
    if labels.is_empty() {
        return None;
    }
    let joined: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    Some(format!("--node-labels={}", joined.join(",")))
}

/// The nodeadm NodeConfig document Karpenter contributes.
pub fn node_config_yaml(opts: &BootstrapOptions) -> Result<String, UserDataError> {
    let mut cluster = Map::new();
    cluster.insert("name".into(), json!(opts.cluster_name));
    cluster.insert("apiServerEndpoint".into(), json!(opts.cluster_endpoint));
    if let Some(ca) = opts.ca_bundle.as_deref().filter(|c| !c.is_empty()) {
        cluster.insert("certificateAuthority".into(), json!(ca));
    }
    if let Some(cidr) = opts.cluster_cidr.as_deref().filter(|c| !c.is_empty()) {
        cluster.insert("cidr".into(), json!(cidr));
    }
    let mut kubelet = Map::new();
    kubelet.insert("config".into(), Value::Object(kubelet_config(opts)));
    if let Some(flag) = node_labels_flag(&opts.labels) {
        kubelet.insert("flags".into(), json!([flag]));
    }
    let mut spec = Map::new();
    spec.insert("cluster".into(), Value::Object(cluster));
    if opts.instance_store_policy.as_deref() == Some("RAID0") {
        spec.insert(
            "instance".into(),
            json!({ "localStorage": { "strategy": "RAID0" } }),
        );
    }
    spec.insert("kubelet".into(), Value::Object(kubelet));
    let doc = json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": Value::Object(spec),
    });
    let yaml =
        serde_saphyr::to_string(&doc).map_err(|e| UserDataError::Serialise(e.to_string()))?;
    Ok(format!("# Karpenter Generated NodeConfig\n{yaml}"))
}

/// Parses a MIME multi-part archive into its parts.
pub fn parse_mime(text: &str) -> Result<Vec<MimePart>, UserDataError> {
    let text = text.replace("\r\n", "\n");
    let (headers, body) = text
        .split_once("\n\n")
        .ok_or_else(|| UserDataError::Mime("no blank line after the headers".into()))?;
    let boundary = headers
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-type"))
        .and_then(|(_, v)| {
            v.split(';')
                .filter_map(|p| p.trim().strip_prefix("boundary="))
                .next()
                .map(|b| b.trim_matches('"').to_string())
        })
        .ok_or_else(|| UserDataError::Mime("no multipart boundary in Content-Type".into()))?;
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut closed = false;
    for chunk in body.split(&delimiter).skip(1) {
        if chunk.starts_with("--") {
            closed = true;
            break;
        }
        let chunk = chunk.strip_prefix('\n').unwrap_or(chunk);
        let (part_headers, content) = chunk.split_once("\n\n").unwrap_or(("", chunk));
        let content_type = part_headers
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-type"))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "text/plain".to_string());
        parts.push(MimePart {
            content_type,
            content: content.trim_end_matches('\n').to_string(),
        });
    }
    if !closed {
        return Err(UserDataError::Mime(format!(
            "archive is not closed with {delimiter}--"
        )));
    }
    Ok(parts)
}

/// Serialises parts as a MIME multi-part archive with boundary [`MIME_BOUNDARY`].
pub fn serialise_mime(parts: &[MimePart]) -> String {
    let mut out = format!(
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{MIME_BOUNDARY}\"\n\n"
    );
    for p in parts {
        out.push_str(&format!(
            "--{MIME_BOUNDARY}\nContent-Type: {}\n\n{}\n\n",
            p.content_type, p.content
        ));
    }
    out.push_str(&format!("--{MIME_BOUNDARY}--\n"));
    out
}

fn is_mime(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("MIME-Version:") || t.starts_with("Content-Type:")
}

fn looks_like_yaml_mapping(text: &str) -> bool {
    // A document whose first meaningful line is `key: value` (a shell script's first line is
    // a shebang or a command).
    serde_saphyr::from_str::<BTreeMap<String, serde_json::Value>>(text).is_ok()
}

/// AL2023 user data: the user's parts, then Karpenter's NodeConfig.
pub fn nodeadm(opts: &BootstrapOptions) -> Result<String, UserDataError> {
    let mut parts = Vec::new();
    if let Some(custom) = opts
        .custom_user_data
        .as_deref()
        .filter(|c| !c.trim().is_empty())
    {
        if is_mime(custom) {
            parts.extend(parse_mime(custom)?);
        } else if looks_like_yaml_mapping(custom) {
            parts.push(MimePart {
                content_type: CONTENT_TYPE_NODE_CONFIG.into(),
                content: custom.to_string(),
            });
        } else {
            parts.push(MimePart {
                content_type: CONTENT_TYPE_SHELL.into(),
                content: custom.to_string(),
            });
        }
    }
    parts.push(MimePart {
        content_type: CONTENT_TYPE_NODE_CONFIG.into(),
        content: node_config_yaml(opts)?,
    });
    Ok(serialise_mime(&parts))
}

fn toml_map(map: &BTreeMap<String, String>) -> toml::Value {
    toml::Value::Table(
        map.iter()
            .map(|(k, v)| (k.clone(), toml::Value::String(v.clone())))
            .collect(),
    )
}

/// Bottlerocket user data: the user's TOML with Karpenter's `settings.kubernetes` on top.
pub fn bottlerocket(opts: &BootstrapOptions) -> Result<String, UserDataError> {
    let mut root: toml::Table = match opts.custom_user_data.as_deref() {
        Some(text) if !text.trim().is_empty() => text
            .parse::<toml::Table>()
            .map_err(|e| UserDataError::Toml(e.to_string()))?,
        _ => toml::Table::new(),
    };
    let settings = root
        .entry("settings")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let toml::Value::Table(settings) = settings else {
        return Err(UserDataError::Toml("`settings` is not a table".into()));
    };
    let k8s = settings
        .entry("kubernetes")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let toml::Value::Table(k8s) = k8s else {
        return Err(UserDataError::Toml(
            "`settings.kubernetes` is not a table".into(),
        ));
    };
    use toml::Value as T;
    k8s.insert("cluster-name".into(), T::String(opts.cluster_name.clone()));
    k8s.insert(
        "api-server".into(),
        T::String(opts.cluster_endpoint.clone()),
    );
    if let Some(ca) = opts.ca_bundle.as_deref().filter(|c| !c.is_empty()) {
        k8s.insert("cluster-certificate".into(), T::String(ca.to_string()));
    }
    // Expressions were resolved by the caller; one left unresolved is not written.
    let kubelet = opts
        .kubelet
        .as_ref()
        .and_then(|k| k.parse().ok())
        .unwrap_or_default();
    let max_pods = match kubelet.max_pods {
        Some(MaxPods::Count(n)) => Some(i64::from(n)),
        _ => None,
    }
    .or(opts.max_pods);
    if let Some(m) = max_pods {
        k8s.insert("max-pods".into(), T::Integer(m));
    }
    if !kubelet.cluster_dns.is_empty() {
        k8s.insert(
            "cluster-dns-ip".into(),
            T::Array(kubelet.cluster_dns.iter().cloned().map(T::String).collect()),
        );
    }
    if let Some(p) = kubelet.pods_per_core {
        k8s.insert("pods-per-core".into(), T::Integer(i64::from(p)));
    }
    for (key, map) in [
        ("system-reserved", &kubelet.system_reserved),
        ("kube-reserved", &kubelet.kube_reserved),
        ("eviction-hard", &kubelet.eviction_hard),
        ("eviction-soft", &kubelet.eviction_soft),
        (
            "eviction-soft-grace-period",
            &kubelet.eviction_soft_grace_period,
        ),
    ] {
        if !map.is_empty() {
            k8s.insert(key.into(), toml_map(map));
        }
    }
    if let Some(v) = kubelet.eviction_max_pod_grace_period {
        k8s.insert(
            "eviction-max-pod-grace-period".into(),
            T::Integer(i64::from(v)),
        );
    }
    if let Some(v) = kubelet.image_gc_high_threshold_percent {
        k8s.insert(
            "image-gc-high-threshold-percent".into(),
            T::Integer(i64::from(v)),
        );
    }
    if let Some(v) = kubelet.image_gc_low_threshold_percent {
        k8s.insert(
            "image-gc-low-threshold-percent".into(),
            T::Integer(i64::from(v)),
        );
    }
    if let Some(v) = kubelet.cpu_cfs_quota {
        k8s.insert("cpu-cfs-quota-enforced".into(), T::Boolean(v));
    }
    if !opts.labels.is_empty() {
        k8s.insert("node-labels".into(), toml_map(&opts.labels));
    }
    if !opts.taints.is_empty() {
        let mut taints: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for t in &opts.taints {
            taints
                .entry(t.key.clone())
                .or_default()
                .push(format!("{}:{}", t.value, t.effect));
        }
        k8s.insert(
            "node-taints".into(),
            T::Table(
                taints
                    .into_iter()
                    .map(|(k, v)| (k, T::Array(v.into_iter().map(T::String).collect())))
                    .collect(),
            ),
        );
    }
    toml::to_string(&root).map_err(|e| UserDataError::Serialise(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> BootstrapOptions {
        BootstrapOptions {
            cluster_name: "demo".into(),
            cluster_endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com".into(),
            ca_bundle: Some("Q0EtREFUQQ==".into()),
            cluster_cidr: Some("10.100.0.0/16".into()),
            labels: [
                ("karpenter.sh/nodepool".to_string(), "default".to_string()),
                ("team".to_string(), "a".to_string()),
            ]
            .into(),
            taints: vec![NodeTaint {
                key: "karpenter.sh/unregistered".into(),
                value: String::new(),
                effect: "NoExecute".into(),
            }],
            kubelet: Some(serde_json::from_value(json!({"maxPods": 42})).unwrap()),
            max_pods: Some(29),
            custom_user_data: None,
            instance_store_policy: None,
        }
    }

    #[test]
    fn al2023_is_a_mime_archive_ending_with_the_node_config() {
        let mut o = opts();
        o.custom_user_data = Some("#!/bin/bash\necho hello".into());
        let ud = generate(AMI_FAMILY_AL2023, &o).expect("generates");
        let parts = parse_mime(&ud).expect("round-trips");
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].content_type, CONTENT_TYPE_SHELL);
        assert_eq!(parts[0].content, "#!/bin/bash\necho hello");
        assert_eq!(parts[1].content_type, CONTENT_TYPE_NODE_CONFIG);
        let cfg: serde_json::Value = serde_saphyr::from_str(&parts[1].content).expect("yaml");
        assert_eq!(cfg["kind"], "NodeConfig");
        assert_eq!(cfg["apiVersion"], "node.eks.aws/v1alpha1");
        assert_eq!(cfg["spec"]["cluster"]["name"], "demo");
        assert_eq!(
            cfg["spec"]["cluster"]["certificateAuthority"],
            "Q0EtREFUQQ=="
        );
        assert_eq!(cfg["spec"]["cluster"]["cidr"], "10.100.0.0/16");
        // kubelet.maxPods from the NodeClass wins over the ENI-limited default.
        assert_eq!(cfg["spec"]["kubelet"]["config"]["maxPods"], 42);
        assert_eq!(
            cfg["spec"]["kubelet"]["config"]["registerWithTaints"][0]["key"],
            "karpenter.sh/unregistered"
        );
        assert_eq!(
            cfg["spec"]["kubelet"]["flags"][0],
            "--node-labels=karpenter.sh/nodepool=default,team=a"
        );
    }

    #[test]
    fn al2023_merges_user_mime_and_node_config() {
        let mut o = opts();
        o.custom_user_data = Some(serialise_mime(&[MimePart {
            content_type: CONTENT_TYPE_NODE_CONFIG.into(),
            content: "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig".into(),
        }]));
        let parts = parse_mime(&generate(AMI_FAMILY_AL2023, &o).expect("ok")).expect("ok");
        assert_eq!(parts.len(), 2);
        assert!(parts[0].content.contains("kind: NodeConfig"));
        o.custom_user_data = Some("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig".into());
        let parts = parse_mime(&generate(AMI_FAMILY_AL2023, &o).expect("ok")).expect("ok");
        assert_eq!(parts[0].content_type, CONTENT_TYPE_NODE_CONFIG);
        o.custom_user_data = Some(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"x\"\n\n--x\n\nunclosed"
                .into(),
        );
        assert!(matches!(
            generate(AMI_FAMILY_AL2023, &o),
            Err(UserDataError::Mime(_))
        ));
    }

    #[test]
    fn bottlerocket_toml_merges_user_settings() {
        let mut o = opts();
        o.custom_user_data = Some(
            "[settings.kubernetes]\ncluster-name = 'wrong'\nimage-gc-low-threshold-percent = 20\n[settings.host-containers.admin]\nenabled = true\n".into(),
        );
        let ud = generate(AMI_FAMILY_BOTTLEROCKET, &o).expect("generates");
        let t: toml::Table = ud.parse().expect("valid TOML");
        let k = &t["settings"]["kubernetes"];
        assert_eq!(k["cluster-name"].as_str(), Some("demo"));
        assert_eq!(
            k["api-server"].as_str(),
            Some("https://ABC.gr7.us-east-1.eks.amazonaws.com")
        );
        assert_eq!(k["cluster-certificate"].as_str(), Some("Q0EtREFUQQ=="));
        assert_eq!(k["max-pods"].as_integer(), Some(42));
        assert_eq!(k["image-gc-low-threshold-percent"].as_integer(), Some(20));
        assert_eq!(k["node-labels"]["team"].as_str(), Some("a"));
        assert_eq!(
            k["node-taints"]["karpenter.sh/unregistered"][0].as_str(),
            Some(":NoExecute")
        );
        assert_eq!(
            t["settings"]["host-containers"]["admin"]["enabled"].as_bool(),
            Some(true)
        );
        o.custom_user_data = Some("not = [toml".into());
        assert!(matches!(
            generate(AMI_FAMILY_BOTTLEROCKET, &o),
            Err(UserDataError::Toml(_))
        ));
    }

    #[test]
    fn custom_is_verbatim() {
        let mut o = opts();
        o.custom_user_data = Some("#!/bin/sh\n/etc/eks/bootstrap.sh demo".into());
        assert_eq!(
            generate("Custom", &o).expect("ok"),
            "#!/bin/sh\n/etc/eks/bootstrap.sh demo"
        );
    }
}
