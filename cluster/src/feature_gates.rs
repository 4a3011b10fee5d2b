//! Karpenter's feature gates (`FEATURE_GATES`), with upstream's defaults and parsing: the
//! controller reads them from its settings, and they select what the shared reconciler does
//! (static capacity, node repair, NodeOverlays, CapacityBuffers).

use std::collections::BTreeMap;

/// `FEATURE_GATES` is not a comma-separated list of `Name=true|false`; says which entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FeatureGateError(pub String);

/// Feature gates Karpenter knows; unknown names are accepted and ignored, as upstream does
/// (and named at start-up by [`crate::upstream_settings::ignored_settings`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    /// Consolidate spot nodes into cheaper spot nodes.
    pub spot_to_spot_consolidation: bool,
    /// Replace nodes whose conditions match the provider's repair policies.
    pub node_repair: bool,
    /// Launch into reserved capacity first.
    pub reserved_capacity: bool,
    /// Apply NodeOverlays (`karpenter.sh/v1alpha1`) to instance types before scheduling.
    pub node_overlay: bool,
    /// Static-capacity NodePools (`spec.replicas`): kept at their size (the reconciler's
    /// `static_capacity`).
    pub static_capacity: bool,
    /// CapacityBuffers (`autoscaling.x-k8s.io/v1beta1`) kept as virtual pods the provisioner
    /// plans ([`crate::capacity_buffer`]).
    pub capacity_buffer: bool,
}

impl Default for FeatureGates {
    /// Karpenter's defaults: only ReservedCapacity enabled.
    fn default() -> Self {
        Self {
            spot_to_spot_consolidation: false,
            node_repair: false,
            reserved_capacity: true,
            node_overlay: false,
            static_capacity: false,
            capacity_buffer: false,
        }
    }
}

impl FeatureGates {
    /// Parses `Name=bool,Name=bool` the way Kubernetes' `MapStringBool` flag does: entries
    /// are trimmed, values parsed like Go's `strconv.ParseBool`, unlisted gates keep their
    /// defaults.
    pub fn parse(text: &str) -> Result<Self, FeatureGateError> {
        let mut gates = Self::default();
        for (name, value) in gate_map(text)? {
            match name.as_str() {
                "SpotToSpotConsolidation" => gates.spot_to_spot_consolidation = value,
                "NodeRepair" => gates.node_repair = value,
                "ReservedCapacity" => gates.reserved_capacity = value,
                "NodeOverlay" => gates.node_overlay = value,
                "StaticCapacity" => gates.static_capacity = value,
                "CapacityBuffer" => gates.capacity_buffer = value,
                _ => {}
            }
        }
        Ok(gates)
    }
}

/// `Name=bool,Name=bool` as Kubernetes' `MapStringBool` flag reads it: entries trimmed,
/// values parsed like Go's `strconv.ParseBool`, a later entry overriding an earlier one.
///
/// # Errors
/// An entry without `=` or with a value that is not a Go bool.
pub fn gate_map(text: &str) -> Result<BTreeMap<String, bool>, FeatureGateError> {
    let mut seen = BTreeMap::new();
    for entry in text.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let Some((name, value)) = entry.split_once('=') else {
            return Err(FeatureGateError(format!(
                "missing bool value for {entry:?}"
            )));
        };
        let value = parse_go_bool(value.trim()).ok_or_else(|| {
            FeatureGateError(format!(
                "invalid value {:?} for {:?}",
                value.trim(),
                name.trim()
            ))
        })?;
        seen.insert(name.trim().to_owned(), value);
    }
    Ok(seen)
}

pub(crate) fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_gate_table_from_upstream() {
        // Upstream options_test: whitespace is trimmed, unknown gates are ignored.
        for (text, spot) in [
            ("SpotToSpotConsolidation=true", true),
            ("SpotToSpotConsolidation=false", false),
            ("SpotToSpotConsolidation\t= false", false),
            ("Hello=true,SpotToSpotConsolidation=false,World=true", false),
        ] {
            let gates = FeatureGates::parse(text).unwrap();
            assert_eq!(gates.spot_to_spot_consolidation, spot, "{text}");
        }
        assert!(!FeatureGates::default().capacity_buffer);
        assert!(
            FeatureGates::parse("CapacityBuffer=true")
                .unwrap()
                .capacity_buffer
        );
        assert!(FeatureGates::parse("SpotToSpotConsolidation").is_err());
        assert!(FeatureGates::parse("SpotToSpotConsolidation=maybe").is_err());
    }
}
