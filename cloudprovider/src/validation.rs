//! Validation of NodePools, NodeClaims and NodeOverlays as the API server applies Karpenter's CRD schema
//! (patterns, enums, ranges, maxItems) and CEL rules, plus Karpenter's runtime validation
//! (restricted labels, well-known values). Every error names the JSON path of the field.

use crate::duration::NEVER;
use crate::v1::{
    Budget, NodeClaim, NodeClaimSpec, NodeClassReference, NodePool, NodePoolSpec,
    NodeSelectorOperator, NodeSelectorRequirementWithMinValues, Taint, labels,
};
use crate::v1alpha1::{NodeOverlay, NodeOverlaySpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Most requirements a template or claim may have.
pub const MAX_REQUIREMENTS: usize = 100;
/// Most disruption budgets a pool may have (and most reasons a budget may list).
pub const MAX_BUDGETS: usize = 50;
/// Most template labels.
pub const MAX_LABELS: usize = 100;
/// Largest `minValues`.
pub const MAX_MIN_VALUES: i64 = 50;

/// The class of a validation failure, phrased as the API server phrases it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// `Required value`.
    Required,
    /// `Invalid value`.
    Invalid,
    /// `Unsupported value`.
    NotSupported,
    /// `Duplicate value`.
    Duplicate,
    /// `Too many`.
    TooMany,
    /// `Forbidden`.
    Forbidden,
}

impl ErrorKind {
    fn phrase(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Duplicate => "Duplicate value",
            Self::TooMany => "Too many",
            Self::Forbidden => "Forbidden",
        }
    }
}

/// One invalid field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ValidationError {
    /// JSON path of the field (`spec.template.spec.requirements[2].operator`).
    pub path: String,
    /// What kind of failure.
    pub kind: ErrorKind,
    /// The offending value as text, when there is one.
    pub value: Option<String>,
    /// Why, in the words of the CRD rule or Karpenter's runtime check.
    pub message: String,
}

impl ValidationError {
    fn new(
        path: impl Into<String>,
        kind: ErrorKind,
        value: Option<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            path: path.into(),
            kind,
            value,
            message: message.into(),
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.kind.phrase())?;
        if let Some(v) = &self.value {
            write!(f, ": {v:?}")?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

/// Every invalid field of an object (never empty when returned as an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationErrors {
    /// Kind and name of the object (`NodePool "default"`).
    pub object: String,
    /// The failures, in field order.
    pub errors: Vec<ValidationError>,
}

impl ValidationErrors {
    /// Whether some error is at exactly `path`.
    pub fn has_path(&self, path: &str) -> bool {
        self.errors.iter().any(|e| e.path == path)
    }
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is invalid: ", self.object)?;
        if self.errors.len() > 1 {
            f.write_str("[")?;
        }
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{e}")?;
        }
        if self.errors.len() > 1 {
            f.write_str("]")?;
        }
        Ok(())
    }
}

#[derive(Default)]
struct Errs(Vec<ValidationError>);

impl Errs {
    fn push(
        &mut self,
        path: impl Into<String>,
        kind: ErrorKind,
        value: Option<&str>,
        message: impl Into<String>,
    ) {
        self.0.push(ValidationError::new(
            path,
            kind,
            value.map(str::to_owned),
            message,
        ));
    }

    fn into_result(self, object: String) -> Result<(), ValidationErrors> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ValidationErrors {
                object,
                errors: self.0,
            })
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Syntax helpers (the Kubernetes validation functions, written without a regex engine).

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, the qualified-name part.
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum(b[0])
        && is_alnum(b[b.len() - 1])
        && b.iter()
            .all(|&c| is_alnum(c) || c == b'-' || c == b'_' || c == b'.')
}

/// DNS-1123 subdomain: dot-separated lowercase labels `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, ≤ 253.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && !s.is_empty()
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
                && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
                && b.iter()
                    .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        })
}

/// Kubernetes' `IsQualifiedName`: why `key` is not a valid label/taint key, if it is not.
pub fn qualified_name_error(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Some("prefix part must be non-empty".to_owned());
        }
        if !is_dns1123_subdomain(p) {
            return Some(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".to_owned(),
            );
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".to_owned());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".to_owned());
    }
    if !is_name_part(name) {
        return Some(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".to_owned(),
        );
    }
    None
}

/// Kubernetes' `IsValidLabelValue`: why `value` is not a valid label value, if it is not.
pub fn label_value_error(value: &str) -> Option<String> {
    if value.len() > 63 {
        return Some("must be no more than 63 characters".to_owned());
    }
    if !value.is_empty() && !is_name_part(value) {
        return Some(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".to_owned(),
        );
    }
    None
}

/// `^(([0-9]+(s|m|h))+|Never)$` (expireAfter, consolidateAfter).
pub fn matches_nillable_duration_pattern(text: &str) -> bool {
    text == NEVER || matches_duration_pattern(text)
}

/// `^([0-9]+(s|m|h))+$` (terminationGracePeriod).
pub fn matches_duration_pattern(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    if b.is_empty() {
        return false;
    }
    while i < b.len() {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start || i >= b.len() || !matches!(b[i], b's' | b'm' | b'h') {
            return false;
        }
        i += 1;
    }
    true
}

/// `^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$` (budget duration: hours and minutes only).
pub fn matches_budget_duration_pattern(text: &str) -> bool {
    let body = text.strip_suffix("0s").unwrap_or(text);
    let digits_then = |s: &str, unit: char| -> bool {
        s.strip_suffix(unit)
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
    };
    let exact = |s: &str| {
        digits_then(s, 'h')
            || digits_then(s, 'm')
            || s.split_once('h').is_some_and(|(h, m)| {
                !h.is_empty() && h.bytes().all(|c| c.is_ascii_digit()) && digits_then(m, 'm')
            })
    };
    // The optional `0s` is greedy-free in the regex, so try both readings.
    exact(text) || (body.len() < text.len() && exact(body))
}

/// `^((100|[0-9]{1,2})%|[0-9]+)$` (budget nodes).
pub fn matches_budget_nodes_pattern(text: &str) -> bool {
    crate::v1::BudgetNodes::parse(text).is_some()
}

const CRON_MACROS: [&str; 7] = [
    "@annually",
    "@yearly",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// Why `schedule` is not a cron schedule Karpenter accepts: five fields (minute hour
/// day-of-month month day-of-week, no seconds, no time zone) or one of `@annually`,
/// `@yearly`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`.
pub fn cron_error(schedule: &str) -> Option<String> {
    let expr = if CRON_MACROS.contains(&schedule) {
        // croner has no `@midnight`; it is `@daily` under another name.
        if schedule == "@midnight" {
            "@daily"
        } else {
            schedule
        }
    } else {
        let fields = schedule.split_whitespace().count();
        if schedule.starts_with('@') {
            return Some(format!(
                "unsupported descriptor, expected one of {}",
                CRON_MACROS.join(", ")
            ));
        }
        if fields != 5 {
            return Some(format!("expected exactly 5 fields, found {fields}"));
        }
        schedule
    };
    let parser = croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build();
    parser.parse(expr).err().map(|e| e.to_string())
}

fn quantity_error(q: &Quantity) -> Option<String> {
    karpenter_scheduling::Quantity::parse(&q.0)
        .err()
        .map(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------------
// Field validators.

/// Which key rules apply to requirements: NodePool templates also forbid
/// `karpenter.sh/nodepool` (the pool sets it), NodeClaims do not.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Owner {
    NodePool,
    NodeClaim,
}

fn validate_label_key_domain(errs: &mut Errs, path: &str, key: &str, owner: Owner) {
    // The CRD's CEL rules, checked first so their messages appear as the API server's would.
    let domain = key.split_once('/').map(|(d, _)| d).unwrap_or("");
    let allowed_karpenter = [labels::CAPACITY_TYPE, labels::NODEPOOL];
    let restricted_domain = (domain == labels::GROUP || domain.ends_with(".karpenter.sh"))
        && !allowed_karpenter.contains(&key);
    if restricted_domain {
        errs.push(
            path,
            ErrorKind::Invalid,
            Some(key),
            "label domain \"karpenter.sh\" is restricted",
        );
    } else if owner == Owner::NodePool && key == labels::NODEPOOL {
        errs.push(
            path,
            ErrorKind::Invalid,
            Some(key),
            "label \"karpenter.sh/nodepool\" is restricted",
        );
    } else if key == labels::HOSTNAME {
        errs.push(
            path,
            ErrorKind::Invalid,
            Some(key),
            "label \"kubernetes.io/hostname\" is restricted",
        );
    } else if key != labels::NODEPOOL {
        // Karpenter's runtime check, which also knows the provider's restricted domains.
        if let Some(reason) = karpenter_scheduling::labels::restricted_reason(key) {
            errs.push(path, ErrorKind::Invalid, Some(key), reason);
        }
    }
}

fn validate_labels(errs: &mut Errs, path: &str, labels_map: &BTreeMap<String, String>) {
    if labels_map.len() > MAX_LABELS {
        errs.push(
            path,
            ErrorKind::TooMany,
            Some(&labels_map.len().to_string()),
            format!("must have at most {MAX_LABELS} items"),
        );
    }
    for (key, value) in labels_map {
        let kpath = format!("{path}[{key}]");
        if let Some(reason) = qualified_name_error(key) {
            errs.push(&kpath, ErrorKind::Invalid, Some(key), reason);
        }
        validate_label_key_domain(errs, &kpath, key, Owner::NodePool);
        if let Some(reason) = label_value_error(value) {
            errs.push(&kpath, ErrorKind::Invalid, Some(value), reason);
        }
    }
}

fn validate_taints(
    errs: &mut Errs,
    path: &str,
    taints: &[Taint],
    seen: &mut BTreeSet<(String, &'static str)>,
) {
    for (i, taint) in taints.iter().enumerate() {
        let tpath = format!("{path}[{i}]");
        if taint.key.is_empty() {
            errs.push(
                format!("{tpath}.key"),
                ErrorKind::Required,
                None,
                "taint key must be non-empty",
            );
        } else if let Some(reason) = qualified_name_error(&taint.key) {
            errs.push(
                format!("{tpath}.key"),
                ErrorKind::Invalid,
                Some(&taint.key),
                reason,
            );
        }
        // Karpenter validates taint values as qualified names, stricter than label values.
        if !taint.value.is_empty()
            && let Some(reason) = qualified_name_error(&taint.value)
        {
            errs.push(
                format!("{tpath}.value"),
                ErrorKind::Invalid,
                Some(&taint.value),
                reason,
            );
        }
        if !seen.insert((taint.key.clone(), taint.effect.as_str())) {
            errs.push(
                &tpath,
                ErrorKind::Duplicate,
                Some(&format!("{}:{}", taint.key, taint.effect.as_str())),
                format!(
                    "duplicate taint Key/Effect pair {}={}",
                    taint.key,
                    taint.effect.as_str()
                ),
            );
        }
    }
}

/// Validates one requirement at `path` (`…requirements[i]`).
fn validate_requirement(
    errs: &mut Errs,
    path: &str,
    r: &NodeSelectorRequirementWithMinValues,
    owner: Owner,
) {
    let key_path = format!("{path}.key");
    if r.key.len() > 316 {
        errs.push(
            &key_path,
            ErrorKind::TooMany,
            Some(&r.key),
            "may not be longer than 316 characters",
        );
    }
    if let Some(reason) = qualified_name_error(&r.key) {
        errs.push(
            &key_path,
            ErrorKind::Invalid,
            Some(&r.key),
            format!("key {} is not a qualified name, {reason}", r.key),
        );
    }
    validate_label_key_domain(errs, &key_path, &r.key, owner);
    for (j, v) in r.values.iter().enumerate() {
        if let Some(reason) = label_value_error(v) {
            errs.push(
                format!("{path}.values[{j}]"),
                ErrorKind::Invalid,
                Some(v),
                reason,
            );
        }
    }
    let op = r.operator;
    let values_path = format!("{path}.values");
    match op {
        // Upstream's CEL asks values of In only; NotIn [] and values on Exists/DoesNotExist are
        // accepted (and normalised by `to_model`), so manifests that Karpenter takes parse here.
        NodeSelectorOperator::In if r.values.is_empty() => {
            errs.push(
                &values_path,
                ErrorKind::Required,
                None,
                "requirements with operator 'In' must have a value defined".to_string(),
            );
        }
        o if o.is_numeric() => {
            let ok = r.values.len() == 1 && r.values[0].parse::<i64>().is_ok_and(|v| v >= 0);
            if !ok {
                errs.push(&values_path, ErrorKind::Invalid, r.values.first().map(String::as_str), "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value");
            }
        }
        _ => {}
    }
    if let Some(min) = r.min_values {
        let mpath = format!("{path}.minValues");
        if !(1..=MAX_MIN_VALUES).contains(&min) {
            errs.push(
                &mpath,
                ErrorKind::Invalid,
                Some(&min.to_string()),
                format!("must be between 1 and {MAX_MIN_VALUES}"),
            );
        } else if op == NodeSelectorOperator::In && (r.values.len() as i64) < min {
            errs.push(&mpath, ErrorKind::Invalid, Some(&min.to_string()), "requirements with 'minValues' must have at least that many values specified in the 'values' field");
        }
    }
    // Runtime: a well-known key with a closed set of values must name at least one of them.
    if op == NodeSelectorOperator::In && r.key == labels::CAPACITY_TYPE && !r.values.is_empty() {
        let known = [
            labels::CAPACITY_TYPE_ON_DEMAND,
            labels::CAPACITY_TYPE_SPOT,
            labels::CAPACITY_TYPE_RESERVED,
        ];
        let valid = r
            .values
            .iter()
            .filter(|v| known.contains(&v.as_str()))
            .count();
        if valid == 0 {
            errs.push(
                &values_path,
                ErrorKind::NotSupported,
                Some(&r.values.join(",")),
                format!(
                    "no valid values found for {}, expected one of: {}",
                    r.key,
                    known.join(", ")
                ),
            );
        } else if r.min_values.is_some_and(|m| (valid as i64) < m) {
            errs.push(
                &values_path,
                ErrorKind::Invalid,
                Some(&r.values.join(",")),
                format!(
                    "not enough valid values found for {} to satisfy minValues",
                    r.key
                ),
            );
        }
    }
}

fn validate_requirements(
    errs: &mut Errs,
    path: &str,
    reqs: &[NodeSelectorRequirementWithMinValues],
    owner: Owner,
) {
    if reqs.len() > MAX_REQUIREMENTS {
        errs.push(
            path,
            ErrorKind::TooMany,
            Some(&reqs.len().to_string()),
            format!("must have at most {MAX_REQUIREMENTS} items"),
        );
    }
    for (i, r) in reqs.iter().enumerate() {
        validate_requirement(errs, &format!("{path}[{i}]"), r, owner);
    }
}

fn validate_node_class_ref(errs: &mut Errs, path: &str, r: &NodeClassReference) {
    for (field, value) in [("group", &r.group), ("kind", &r.kind), ("name", &r.name)] {
        if value.is_empty() {
            errs.push(
                format!("{path}.{field}"),
                ErrorKind::Required,
                None,
                format!("{field} may not be empty"),
            );
        }
    }
    if r.group.contains('/') {
        errs.push(
            format!("{path}.group"),
            ErrorKind::Invalid,
            Some(&r.group),
            "should match '^[^/]*$'",
        );
    }
}

fn validate_durations(
    errs: &mut Errs,
    path: &str,
    expire_after: &crate::NillableDuration,
    termination_grace_period: Option<&crate::Duration>,
) {
    if !matches_nillable_duration_pattern(expire_after.as_str()) {
        errs.push(
            format!("{path}.expireAfter"),
            ErrorKind::Invalid,
            Some(expire_after.as_str()),
            "should match '^(([0-9]+(s|m|h))+|Never)$'",
        );
    }
    if let Some(tgp) = termination_grace_period
        && !matches_duration_pattern(tgp.as_str())
    {
        errs.push(
            format!("{path}.terminationGracePeriod"),
            ErrorKind::Invalid,
            Some(tgp.as_str()),
            "should match '^([0-9]+(s|m|h))+$'",
        );
    }
}

fn validate_resource_list(errs: &mut Errs, path: &str, list: &BTreeMap<String, Quantity>) {
    for (name, q) in list {
        if let Some(reason) = quantity_error(q) {
            errs.push(
                format!("{path}[{name}]"),
                ErrorKind::Invalid,
                Some(&q.0),
                reason,
            );
        }
        if let Some(reason) = qualified_name_error(name) {
            errs.push(
                format!("{path}[{name}]"),
                ErrorKind::Invalid,
                Some(name),
                reason,
            );
        }
    }
}

fn validate_budget(errs: &mut Errs, path: &str, b: &Budget) {
    if !matches_budget_nodes_pattern(&b.nodes) {
        errs.push(
            format!("{path}.nodes"),
            ErrorKind::Invalid,
            Some(&b.nodes),
            "should match '^((100|[0-9]{1,2})%|[0-9]+)$'",
        );
    }
    if b.schedule.is_some() != b.duration.is_some() {
        errs.push(
            path,
            ErrorKind::Invalid,
            None,
            "'schedule' must be set with 'duration'",
        );
    }
    if let Some(schedule) = &b.schedule
        && let Some(reason) = cron_error(schedule)
    {
        errs.push(
            format!("{path}.schedule"),
            ErrorKind::Invalid,
            Some(schedule),
            format!("invalid cron schedule: {reason}"),
        );
    }
    if let Some(d) = &b.duration
        && !matches_budget_duration_pattern(d.as_str())
    {
        errs.push(
            format!("{path}.duration"),
            ErrorKind::Invalid,
            Some(d.as_str()),
            "should match '^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$'",
        );
    }
    if b.reasons.len() > MAX_BUDGETS {
        errs.push(
            format!("{path}.reasons"),
            ErrorKind::TooMany,
            Some(&b.reasons.len().to_string()),
            format!("must have at most {MAX_BUDGETS} items"),
        );
    }
    let mut seen = BTreeSet::new();
    for (i, r) in b.reasons.iter().enumerate() {
        if !seen.insert(*r) {
            errs.push(
                format!("{path}.reasons[{i}]"),
                ErrorKind::Duplicate,
                Some(r.as_str()),
                "",
            );
        }
    }
}

fn validate_node_pool_spec(errs: &mut Errs, spec: &NodePoolSpec) {
    let tpath = "spec.template";
    validate_labels(
        errs,
        &format!("{tpath}.metadata.labels"),
        &spec.template.metadata.labels,
    );
    let s = &spec.template.spec;
    let spath = "spec.template.spec";
    let mut seen = BTreeSet::new();
    validate_taints(errs, &format!("{spath}.taints"), &s.taints, &mut seen);
    validate_taints(
        errs,
        &format!("{spath}.startupTaints"),
        &s.startup_taints,
        &mut seen,
    );
    validate_requirements(
        errs,
        &format!("{spath}.requirements"),
        &s.requirements,
        Owner::NodePool,
    );
    validate_node_class_ref(errs, &format!("{spath}.nodeClassRef"), &s.node_class_ref);
    validate_durations(
        errs,
        spath,
        &s.expire_after,
        s.termination_grace_period.as_ref(),
    );

    let d = &spec.disruption;
    if !matches_nillable_duration_pattern(d.consolidate_after.as_str()) {
        errs.push(
            "spec.disruption.consolidateAfter",
            ErrorKind::Invalid,
            Some(d.consolidate_after.as_str()),
            "should match '^(([0-9]+(s|m|h))+|Never)$'",
        );
    }
    if d.budgets.len() > MAX_BUDGETS {
        errs.push(
            "spec.disruption.budgets",
            ErrorKind::TooMany,
            Some(&d.budgets.len().to_string()),
            format!("must have at most {MAX_BUDGETS} items"),
        );
    }
    for (i, b) in d.budgets.iter().enumerate() {
        validate_budget(errs, &format!("spec.disruption.budgets[{i}]"), b);
    }

    validate_resource_list(errs, "spec.limits", &spec.limits);
    if let Some(w) = spec.weight
        && !(1..=100).contains(&w)
    {
        errs.push(
            "spec.weight",
            ErrorKind::Invalid,
            Some(&w.to_string()),
            "must be between 1 and 100",
        );
    }
    if let Some(r) = spec.replicas {
        if r < 0 {
            errs.push(
                "spec.replicas",
                ErrorKind::Invalid,
                Some(&r.to_string()),
                "should be greater than or equal to 0",
            );
        }
        if spec.limits.keys().any(|k| k != "nodes") {
            errs.push(
                "spec",
                ErrorKind::Invalid,
                None,
                "only 'limits.nodes' is supported on static NodePools",
            );
        }
        if spec.weight.is_some() {
            errs.push(
                "spec",
                ErrorKind::Invalid,
                None,
                "'weight' is not supported on static NodePools",
            );
        }
    }
}

fn validate_node_claim_spec(errs: &mut Errs, spec: &NodeClaimSpec) {
    let mut seen = BTreeSet::new();
    validate_taints(errs, "spec.taints", &spec.taints, &mut seen);
    validate_taints(errs, "spec.startupTaints", &spec.startup_taints, &mut seen);
    validate_requirements(
        errs,
        "spec.requirements",
        &spec.requirements,
        Owner::NodeClaim,
    );
    validate_node_class_ref(errs, "spec.nodeClassRef", &spec.node_class_ref);
    validate_durations(
        errs,
        "spec",
        &spec.expire_after,
        spec.termination_grace_period.as_ref(),
    );
    validate_resource_list(errs, "spec.resources.requests", &spec.resources.requests);
}

fn describe(kind: &str, name: Option<&str>) -> String {
    format!("{kind} {:?}", name.unwrap_or(""))
}

impl NodePool {
    /// Checks the pool as the API server (schema + CEL) and Karpenter's runtime validation
    /// would, returning every failure with its field path.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errs = Errs::default();
        validate_node_pool_spec(&mut errs, &self.spec);
        errs.into_result(describe("NodePool", self.metadata.name.as_deref()))
    }

    /// Checks an update from `old` to `self`: everything [`validate`](Self::validate) checks,
    /// plus the transition rules (nodeClassRef group and kind are immutable; a pool cannot
    /// switch between static and dynamic).
    pub fn validate_update(&self, old: &NodePool) -> Result<(), ValidationErrors> {
        let mut errs = Errs::default();
        validate_node_pool_spec(&mut errs, &self.spec);
        let (o, n) = (
            &old.spec.template.spec.node_class_ref,
            &self.spec.template.spec.node_class_ref,
        );
        if o.group != n.group {
            errs.push(
                "spec.template.spec.nodeClassRef",
                ErrorKind::Invalid,
                Some(&n.group),
                "nodeClassRef.group is immutable",
            );
        }
        if o.kind != n.kind {
            errs.push(
                "spec.template.spec.nodeClassRef",
                ErrorKind::Invalid,
                Some(&n.kind),
                "nodeClassRef.kind is immutable",
            );
        }
        if old.spec.replicas.is_some() != self.spec.replicas.is_some() {
            errs.push("spec", ErrorKind::Invalid, None, "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes");
        }
        errs.into_result(describe("NodePool", self.metadata.name.as_deref()))
    }
}

impl NodeClaim {
    /// Checks the claim as the API server (schema + CEL) would.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errs = Errs::default();
        validate_node_claim_spec(&mut errs, &self.spec);
        errs.into_result(describe("NodeClaim", self.metadata.name.as_deref()))
    }

    /// Checks an update: the spec is immutable (compared as the stored JSON, as CEL's
    /// `self == oldSelf` does), and the new object must be valid.
    pub fn validate_update(&self, old: &NodeClaim) -> Result<(), ValidationErrors> {
        let mut errs = Errs::default();
        validate_node_claim_spec(&mut errs, &self.spec);
        let as_json = |s: &NodeClaimSpec| serde_json::to_value(s).ok();
        if as_json(&self.spec) != as_json(&old.spec) {
            errs.push("spec", ErrorKind::Invalid, None, "spec is immutable");
        }
        errs.into_result(describe("NodeClaim", self.metadata.name.as_deref()))
    }
}

/// [`NodePool::validate_update`] as a free function.
pub fn validate_node_pool_update(old: &NodePool, new: &NodePool) -> Result<(), ValidationErrors> {
    new.validate_update(old)
}

/// [`NodeClaim::validate_update`] as a free function.
pub fn validate_node_claim_update(
    old: &NodeClaim,
    new: &NodeClaim,
) -> Result<(), ValidationErrors> {
    new.validate_update(old)
}

/// Largest NodeOverlay weight.
pub const MAX_OVERLAY_WEIGHT: i32 = 10_000;
/// Resources a NodeOverlay may not set: the instance type's own, which overlays never
/// replace.
pub const OVERLAY_RESTRICTED_RESOURCES: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pods"];

fn validate_node_overlay_spec(errs: &mut Errs, spec: &NodeOverlaySpec) {
    let path = "spec.requirements";
    if spec.requirements.len() > MAX_REQUIREMENTS {
        errs.push(
            path,
            ErrorKind::TooMany,
            Some(&spec.requirements.len().to_string()),
            format!("must have at most {MAX_REQUIREMENTS} items"),
        );
    }
    for (i, r) in spec.requirements.iter().enumerate() {
        let rpath = format!("{path}[{i}]");
        // Overlays may select on karpenter.sh/nodepool, as NodeClaims may.
        validate_requirement(errs, &rpath, &r.with_min_values(), Owner::NodeClaim);
        if r.operator == NodeSelectorOperator::NotIn && r.values.is_empty() {
            errs.push(
                format!("{rpath}.values"),
                ErrorKind::Required,
                None,
                "requirements with operator 'NotIn' must have a value defined",
            );
        }
    }
    if spec.price.is_some() && spec.price_adjustment.is_some() {
        errs.push(
            "spec",
            ErrorKind::Invalid,
            None,
            "cannot set both 'price' and 'priceAdjustment'",
        );
    }
    use crate::overlay::{PRICE_ADJUSTMENT_PATTERN, PRICE_PATTERN, PriceChange};
    type Parse = fn(&str) -> Option<PriceChange>;
    let prices: [(&str, &Option<String>, Parse, &str); 2] = [
        (
            "spec.price",
            &spec.price,
            PriceChange::parse_price,
            PRICE_PATTERN,
        ),
        (
            "spec.priceAdjustment",
            &spec.price_adjustment,
            PriceChange::parse_adjustment,
            PRICE_ADJUSTMENT_PATTERN,
        ),
    ];
    for (path, value, parse, pattern) in prices {
        if let Some(v) = value
            && parse(v).is_none()
        {
            errs.push(
                path,
                ErrorKind::Invalid,
                Some(v),
                format!("should match '{pattern}'"),
            );
        }
    }
    validate_resource_list(errs, "spec.capacity", &spec.capacity);
    for name in spec.capacity.keys() {
        if OVERLAY_RESTRICTED_RESOURCES.contains(&name.as_str()) {
            errs.push(
                format!("spec.capacity[{name}]"),
                ErrorKind::Invalid,
                Some(name),
                "invalid resource restricted",
            );
        }
    }
    if let Some(w) = spec.weight
        && !(1..=MAX_OVERLAY_WEIGHT).contains(&w)
    {
        errs.push(
            "spec.weight",
            ErrorKind::Invalid,
            Some(&w.to_string()),
            format!("must be between 1 and {MAX_OVERLAY_WEIGHT}"),
        );
    }
}

impl NodeOverlay {
    /// Checks the overlay as the API server (schema + CEL) and Karpenter's runtime
    /// validation would, returning every failure with its field path.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errs = Errs::default();
        validate_node_overlay_spec(&mut errs, &self.spec);
        errs.into_result(describe("NodeOverlay", self.metadata.name.as_deref()))
    }
}
