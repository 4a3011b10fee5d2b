//! `DaemonSet` into [`model::DaemonSet`].

use super::{ConversionError, Present, labels, millis, namespaced, pod::convert_spec};
use crate::model::{self, OwnerRef};
use k8s_openapi::api::apps::v1 as apps;

/// Converts a DaemonSet into the pod it would run on every node it targets, as Karpenter's
/// `PodForDaemonSet` builds it for daemon overhead: the template's spec (limits stand in for
/// missing requests), named and namespaced like the DaemonSet, owned by it (kind
/// `DaemonSet`, so [`model::Pod::is_daemon`] holds). The template's labels and annotations are
/// kept so selectors over daemon pods see them.
///
/// # Errors
/// A [`ConversionError`] naming `namespace/name` and the field under `spec.template.spec`.
pub fn daemonset_from_k8s(ds: &apps::DaemonSet) -> Result<model::DaemonSet, ConversionError> {
    let (ctx, namespace, name) = namespaced("DaemonSet", &ds.metadata)?;
    let Some(spec) = ds.spec.present() else {
        return Err(ctx.err("spec", "missing"));
    };
    let Some(pod_spec) = spec.template.spec.as_ref() else {
        return Err(ctx.err("spec.template.spec", "missing"));
    };
    let template_meta = spec.template.metadata.as_ref();
    let mut pod = model::Pod {
        namespace: namespace.clone(),
        name: name.clone(),
        labels: labels(template_meta.and_then(|m| m.labels.as_ref())),
        annotations: labels(template_meta.and_then(|m| m.annotations.as_ref())),
        owner: Some(OwnerRef {
            kind: "DaemonSet".into(),
            name: name.clone(),
            uid: ds.metadata.uid.clone().unwrap_or_default(),
        }),
        created_at: millis(ds.metadata.creation_timestamp.as_ref()).unwrap_or_default(),
        ..model::Pod::default()
    };
    convert_spec(&ctx, "spec.template.spec", pod_spec, &mut pod)?;
    Ok(model::DaemonSet {
        namespace,
        name,
        pod,
    })
}
