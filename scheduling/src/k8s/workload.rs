//! Pods a workload would create, for tools that plan before anything exists
//! (`karpenter plan`, the simulator).

use super::{
    ConversionError, Ctx, Present, label_selector, labels, millis, namespaced, pod::convert_spec,
};
use crate::model::{self, OwnerRef};
use crate::selector::LabelSelector;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// Kubernetes' documented scalability limit for pods in one cluster; a larger count is a
/// typo, and expanding it would only exhaust memory.
pub const MAX_PODS: i32 = 150_000;

/// A workload whose pod template [`pods_from_workload`] expands.
#[derive(Debug, Clone, Copy)]
pub enum Workload<'a> {
    /// `spec.replicas` pods (default 1).
    Deployment(&'a apps::Deployment),
    /// `spec.replicas` pods (default 1).
    ReplicaSet(&'a apps::ReplicaSet),
    /// `spec.replicas` pods (default 1), named by ordinal from `spec.ordinals.start`.
    StatefulSet(&'a apps::StatefulSet),
    /// The pods running at once: `parallelism` (default 1), capped by the completions still
    /// outstanding; none while suspended.
    Job(&'a batch::Job),
}

impl<'a> From<&'a apps::Deployment> for Workload<'a> {
    fn from(w: &'a apps::Deployment) -> Self {
        Self::Deployment(w)
    }
}
impl<'a> From<&'a apps::ReplicaSet> for Workload<'a> {
    fn from(w: &'a apps::ReplicaSet) -> Self {
        Self::ReplicaSet(w)
    }
}
impl<'a> From<&'a apps::StatefulSet> for Workload<'a> {
    fn from(w: &'a apps::StatefulSet) -> Self {
        Self::StatefulSet(w)
    }
}
impl<'a> From<&'a batch::Job> for Workload<'a> {
    fn from(w: &'a batch::Job) -> Self {
        Self::Job(w)
    }
}

impl Workload<'_> {
    /// The workload's kind, as it appears in an owner reference.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Deployment(_) => "Deployment",
            Self::ReplicaSet(_) => "ReplicaSet",
            Self::StatefulSet(_) => "StatefulSet",
            Self::Job(_) => "Job",
        }
    }

    /// `spec.selector` of a Deployment, ReplicaSet or StatefulSet (`None` when absent, and
    /// always for a Job, whose selector the kube-scheduler never deduces spreads from).
    ///
    /// # Errors
    /// A [`ConversionError`] naming the workload and `spec.selector` for an operator the
    /// model does not know.
    pub fn selector(&self) -> Result<Option<LabelSelector>, ConversionError> {
        let selector = match self {
            Self::Deployment(w) => w.spec.present().and_then(|s| s.selector.present()),
            Self::ReplicaSet(w) => w.spec.present().and_then(|s| s.selector.present()),
            Self::StatefulSet(w) => w.spec.present().and_then(|s| s.selector.present()),
            Self::Job(_) => None,
        };
        let (ctx, _, _) = namespaced(self.kind(), self.metadata())?;
        label_selector(&ctx, "spec.selector", selector)
    }

    fn metadata(&self) -> &meta::ObjectMeta {
        match self {
            Self::Deployment(w) => &w.metadata,
            Self::ReplicaSet(w) => &w.metadata,
            Self::StatefulSet(w) => &w.metadata,
            Self::Job(w) => &w.metadata,
        }
    }

    fn template(&self) -> Option<&core::PodTemplateSpec> {
        match self {
            Self::Deployment(w) => w.spec.present().and_then(|s| s.template.present()),
            Self::ReplicaSet(w) => w.spec.present().and_then(|s| s.template.present()),
            Self::StatefulSet(w) => w.spec.present().and_then(|s| s.template.present()),
            Self::Job(w) => w.spec.present().and_then(|s| s.template.present()),
        }
    }

    /// The field that decides the count, the number of pods to create, and the first index.
    fn count(&self) -> (&'static str, i32, i32) {
        match self {
            Self::Deployment(w) => (
                "spec.replicas",
                w.spec.present().and_then(|s| s.replicas).unwrap_or(1),
                0,
            ),
            Self::ReplicaSet(w) => (
                "spec.replicas",
                w.spec.present().and_then(|s| s.replicas).unwrap_or(1),
                0,
            ),
            Self::StatefulSet(w) => {
                let spec = w.spec.present();
                let start = spec
                    .and_then(|s| s.ordinals.as_ref())
                    .and_then(|o| o.start)
                    .unwrap_or(0);
                (
                    "spec.replicas",
                    spec.and_then(|s| s.replicas).unwrap_or(1),
                    start,
                )
            }
            Self::Job(w) => {
                let spec = w.spec.present();
                if spec.and_then(|s| s.suspend) == Some(true) {
                    return ("spec.suspend", 0, 0);
                }
                let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
                let succeeded = w.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
                let count = match spec.and_then(|s| s.completions) {
                    // Validation keeps both non-negative; a negative parallelism is still
                    // reported below rather than hidden by the `min`.
                    Some(completions) if parallelism >= 0 => {
                        parallelism.min(completions.saturating_sub(succeeded).max(0))
                    }
                    _ => parallelism,
                };
                ("spec.parallelism", count, 0)
            }
        }
    }
}

/// Expands a workload into the pods it would run: one per replica (or per concurrently running
/// Job pod, see [`Workload::Job`]), named `<name>-<index>` (StatefulSets use their ordinals,
/// so the names are the real ones), in the workload's namespace, carrying the template's
/// labels and annotations and owned by the workload itself (kind `Deployment`, `ReplicaSet`,
/// `StatefulSet` or `Job`). Pod UIDs are left empty; `created_at` is the workload's creation
/// time. The output is deterministic and ordered by index.
///
/// # Errors
/// A [`ConversionError`] naming the workload (`namespace/name`) and the field: a missing spec
/// or template, a negative count or one above [`MAX_PODS`], or anything
/// [`super::pod_from_k8s`] rejects, under `spec.template.spec`.
pub fn pods_from_workload<'a>(
    workload: impl Into<Workload<'a>>,
) -> Result<Vec<model::Pod>, ConversionError> {
    let workload: Workload<'a> = workload.into();
    let metadata = workload.metadata();
    let (ctx, namespace, name) = namespaced(workload.kind(), metadata)?;
    let Some(template) = workload.template() else {
        return Err(ctx.err("spec", "missing"));
    };
    let Some(pod_spec) = template.spec.as_ref() else {
        return Err(ctx.err("spec.template.spec", "missing"));
    };
    let (field, count, start) = workload.count();
    if count < 0 {
        return Err(ctx.err(field, format!("negative count {count}")));
    }
    if count > MAX_PODS {
        return Err(ctx.err(
            field,
            format!("{count} pods exceed the {MAX_PODS} a cluster can hold"),
        ));
    }
    let template_meta = template.metadata.as_ref();
    let mut proto = model::Pod {
        namespace,
        labels: labels(template_meta.and_then(|m| m.labels.as_ref())),
        annotations: labels(template_meta.and_then(|m| m.annotations.as_ref())),
        owner: Some(OwnerRef {
            kind: workload.kind().into(),
            name: name.clone(),
            uid: metadata.uid.clone().unwrap_or_default(),
        }),
        created_at: millis(metadata.creation_timestamp.as_ref()).unwrap_or_default(),
        ..model::Pod::default()
    };
    convert_spec(&ctx, "spec.template.spec", pod_spec, &mut proto)?;
    Ok(indices(&ctx, start, count)?
        .map(|i| model::Pod {
            name: format!("{name}-{i}"),
            ..proto.clone()
        })
        .collect())
}

/// The pod a PodTemplate describes (the shape of a CapacityBuffer's chunk): named after the
/// PodTemplate, in its namespace, with the template's labels and annotations, no owner, and
/// `created_at` the PodTemplate's creation time.
///
/// # Errors
/// A [`ConversionError`] naming the PodTemplate (`namespace/name`) and the field: a missing
/// `template` or `template.spec`, or anything [`super::pod_from_k8s`] rejects, under
/// `template.spec`.
pub fn pod_from_pod_template(pt: &core::PodTemplate) -> Result<model::Pod, ConversionError> {
    let (ctx, namespace, name) = namespaced("PodTemplate", &pt.metadata)?;
    let Some(template) = pt.template.as_ref() else {
        return Err(ctx.err("template", "missing"));
    };
    let Some(spec) = template.spec.as_ref() else {
        return Err(ctx.err("template.spec", "missing"));
    };
    let meta = template.metadata.as_ref();
    let mut pod = model::Pod {
        namespace,
        name,
        labels: labels(meta.and_then(|m| m.labels.as_ref())),
        annotations: labels(meta.and_then(|m| m.annotations.as_ref())),
        created_at: millis(pt.metadata.creation_timestamp.as_ref()).unwrap_or_default(),
        ..model::Pod::default()
    };
    convert_spec(&ctx, "template.spec", spec, &mut pod)?;
    Ok(pod)
}

fn indices(
    ctx: &Ctx,
    start: i32,
    count: i32,
) -> Result<impl Iterator<Item = i64>, ConversionError> {
    if start < 0 {
        return Err(ctx.err("spec.ordinals.start", format!("negative start {start}")));
    }
    let start = i64::from(start);
    Ok(start..start + i64::from(count))
}
