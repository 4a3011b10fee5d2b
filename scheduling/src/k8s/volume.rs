//! Node requirements a pod inherits from its volumes, as Karpenter's `volumetopology.go`
//! derives them.

use super::{ConversionError, Ctx, cluster_scoped, namespaced, node_selector_requirements};
use crate::model;
use crate::requirements::{NodeSelectorRequirement, Operator};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;
use std::collections::BTreeSet;

const HOSTNAME: &str = "kubernetes.io/hostname";
const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// The node requirements `pod` needs for its volumes, ANDed across volumes:
///
/// - a claim bound to a PersistentVolume (`spec.volumeName`) takes the PV's
///   `nodeAffinity.required` terms; for `local` and `hostPath` PVs the hostname expressions are
///   dropped (the pod is being placed on a new node anyway), and a term left empty by that
///   makes the volume unconstrained;
/// - an unbound claim with a StorageClass takes the class's `allowedTopologies` as `In`
///   requirements;
/// - generic ephemeral volumes use the claim named `<pod>-<volume>`; before that claim
///   exists, its template's StorageClass (or the cluster's default class, the newest one
///   annotated `storageclass.kubernetes.io/is-default-class: "true"`, as admission would pick)
///   stands in;
/// - other volume types (emptyDir, hostPath, configMap …) add nothing.
///
/// Alternatives (several PV terms or topology terms, which are ORed) are folded exactly when
/// they are single `In` requirements on one key (the usual "zone a OR zone b" becomes
/// `In [a, b]`); otherwise the first alternative is used, which may be stricter than needed
/// but never places the pod where its volume cannot attach. The model keeps one ANDed list, so
/// this is the one place precision is traded for a single answer. The result is deduplicated
/// and in volume order.
///
/// # Errors
/// A [`ConversionError`] naming the pod and `spec.volumes[i]…` when a referenced claim,
/// volume or class is not among those given (Karpenter cannot schedule such a pod either),
/// or naming the PersistentVolume and its field for an unknown operator.
pub fn volume_requirements(
    pod: &core::Pod,
    pvcs: &[core::PersistentVolumeClaim],
    pvs: &[core::PersistentVolume],
    storage_classes: &[storage::StorageClass],
) -> Result<Vec<NodeSelectorRequirement>, ConversionError> {
    let (ctx, namespace, name) = namespaced("Pod", &pod.metadata)?;
    let lookup = Lookup {
        ctx: &ctx,
        pvs,
        storage_classes,
    };
    let mut out: Vec<NodeSelectorRequirement> = Vec::new();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    for (i, v) in volumes.into_iter().flatten().enumerate() {
        let field = format!("spec.volumes[{i}]");
        let alternatives = if let Some(claim) = v.persistent_volume_claim.as_ref() {
            let field = format!("{field}.persistentVolumeClaim.claimName");
            let Some(pvc) = find_pvc(pvcs, &namespace, &claim.claim_name) else {
                return Err(ctx.err(
                    field,
                    format!(
                        "PersistentVolumeClaim {namespace}/{} not found",
                        claim.claim_name
                    ),
                ));
            };
            let spec = pvc.spec.as_ref();
            lookup.claim(&field, spec, false)?
        } else if let Some(eph) = v.ephemeral.as_ref() {
            let claim_name = format!("{name}-{}", v.name);
            let field = format!("{field}.ephemeral");
            match find_pvc(pvcs, &namespace, &claim_name) {
                Some(pvc) => lookup.claim(&field, pvc.spec.as_ref(), false)?,
                None => {
                    let spec = eph.volume_claim_template.as_ref().map(|t| &t.spec);
                    lookup.claim(
                        &format!("{field}.volumeClaimTemplate.spec.storageClassName"),
                        spec,
                        true,
                    )?
                }
            }
        } else {
            Vec::new()
        };
        for r in collapse(alternatives) {
            if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// Sets `model_pod.volume_requirements` from [`volume_requirements`] for the Kubernetes pod it
/// was converted from.
///
/// # Errors
/// As [`volume_requirements`]; `model_pod` is left unchanged on error.
pub fn fill_volume_requirements(
    model_pod: &mut model::Pod,
    pod: &core::Pod,
    pvcs: &[core::PersistentVolumeClaim],
    pvs: &[core::PersistentVolume],
    storage_classes: &[storage::StorageClass],
) -> Result<(), ConversionError> {
    model_pod.volume_requirements = volume_requirements(pod, pvcs, pvs, storage_classes)?;
    Ok(())
}

fn find_pvc<'a>(
    pvcs: &'a [core::PersistentVolumeClaim],
    namespace: &str,
    name: &str,
) -> Option<&'a core::PersistentVolumeClaim> {
    pvcs.iter().find(|c| {
        c.metadata.name.as_deref() == Some(name)
            && c.metadata
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or("default")
                == namespace
    })
}

struct Lookup<'a> {
    ctx: &'a Ctx,
    pvs: &'a [core::PersistentVolume],
    storage_classes: &'a [storage::StorageClass],
}

/// ORed alternatives, each an AND of requirements. No alternatives means no constraint.
type Alternatives = Vec<Vec<NodeSelectorRequirement>>;

impl Lookup<'_> {
    /// The alternatives of one claim spec; `from_template` lets a missing class fall back to
    /// the default one, as admission would fill it when the claim is created.
    fn claim(
        &self,
        field: &str,
        spec: Option<&core::PersistentVolumeClaimSpec>,
        from_template: bool,
    ) -> Result<Alternatives, ConversionError> {
        let Some(spec) = spec else {
            return Ok(Vec::new());
        };
        if let Some(volume) = spec.volume_name.as_deref().filter(|v| !v.is_empty()) {
            let Some(pv) = self
                .pvs
                .iter()
                .find(|pv| pv.metadata.name.as_deref() == Some(volume))
            else {
                return Err(self
                    .ctx
                    .err(field, format!("PersistentVolume {volume} not found")));
            };
            return pv_alternatives(pv);
        }
        let class = match spec.storage_class_name.as_deref() {
            Some(c) => Some(c),
            None if from_template => self.default_class(),
            None => None,
        };
        let Some(class) = class.filter(|c| !c.is_empty()) else {
            return Ok(Vec::new());
        };
        let Some(sc) = self
            .storage_classes
            .iter()
            .find(|sc| sc.metadata.name.as_deref() == Some(class))
        else {
            return Err(self
                .ctx
                .err(field, format!("StorageClass {class} not found")));
        };
        Ok(sc
            .allowed_topologies
            .iter()
            .flatten()
            .map(|term| {
                term.match_label_expressions
                    .iter()
                    .flatten()
                    .map(|e| NodeSelectorRequirement {
                        key: e.key.clone(),
                        operator: Operator::In,
                        values: e.values.clone(),
                        min_values: None,
                    })
                    .collect::<Vec<_>>()
            })
            .filter(|reqs| !reqs.is_empty())
            .collect())
    }

    fn default_class(&self) -> Option<&str> {
        self.storage_classes
            .iter()
            .filter(|sc| {
                sc.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                    .is_some_and(|v| v == "true")
            })
            .max_by_key(|sc| {
                (
                    sc.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    sc.metadata.name.clone(),
                )
            })
            .and_then(|sc| sc.metadata.name.as_deref())
    }
}

fn pv_alternatives(pv: &core::PersistentVolume) -> Result<Alternatives, ConversionError> {
    let (ctx, _) = cluster_scoped("PersistentVolume", &pv.metadata)?;
    let Some(spec) = pv.spec.as_ref() else {
        return Ok(Vec::new());
    };
    let node_local = spec.local.is_some() || spec.host_path.is_some();
    let terms = spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
        .map(|r| &r.node_selector_terms);
    let mut out = Vec::new();
    for (i, term) in terms.into_iter().flatten().enumerate() {
        let field = format!("spec.nodeAffinity.required.nodeSelectorTerms[{i}].matchExpressions");
        let mut reqs = node_selector_requirements(&ctx, &field, term.match_expressions.as_ref())?;
        if node_local {
            let had_any = !reqs.is_empty();
            reqs.retain(|r| r.key != HOSTNAME);
            if had_any && reqs.is_empty() {
                // A hostname-only term still allows the pod anywhere once hostname is ignored.
                out.push(Vec::new());
                continue;
            }
        }
        if !reqs.is_empty() {
            out.push(reqs);
        }
    }
    Ok(out)
}

/// Folds ORed alternatives into one ANDed list (see [`volume_requirements`]).
fn collapse(mut alternatives: Alternatives) -> Vec<NodeSelectorRequirement> {
    if alternatives.is_empty() || alternatives.iter().any(Vec::is_empty) {
        return Vec::new();
    }
    if alternatives.len() == 1 {
        return alternatives.swap_remove(0);
    }
    let first_key = alternatives[0][0].key.clone();
    let single_in_same_key = alternatives
        .iter()
        .all(|a| a.len() == 1 && a[0].operator == Operator::In && a[0].key == first_key);
    if single_in_same_key {
        let values: BTreeSet<String> = alternatives
            .iter()
            .flat_map(|a| a[0].values.iter().cloned())
            .collect();
        return vec![NodeSelectorRequirement {
            key: first_key,
            operator: Operator::In,
            values: values.into_iter().collect(),
            min_values: None,
        }];
    }
    alternatives.swap_remove(0)
}
