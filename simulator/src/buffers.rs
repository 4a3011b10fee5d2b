//! CapacityBuffers in a simulation (the `capacityBuffer` setting, Karpenter's
//! `CapacityBuffer` gate): the buffers and PodTemplates of the scenario, resolved at every
//! step against the simulated workloads (a `scalableRef` follows its workload's scaling) and
//! handed to the index, where the shared reconciler plans their virtual pods as the
//! controller does.

use crate::workloads::{Kind, Workloads};
use k8s_openapi::api::core::v1 as core;
use karpenter_cloudprovider::CapacityBuffer;
use karpenter_cluster::capacity_buffer::{
    BufferKey, BufferState, Lookup, Reference, ResolvedBuffer, Template, namespaced_key, resolve,
};
use karpenter_scheduling::k8s::pod_from_pod_template;
use std::collections::BTreeMap;

/// The scenario's CapacityBuffers and PodTemplates.
#[derive(Debug, Default)]
pub(crate) struct Buffers {
    enabled: bool,
    buffers: BTreeMap<BufferKey, CapacityBuffer>,
    pod_templates: BTreeMap<(String, String), core::PodTemplate>,
    /// Each buffer's state as last logged.
    logged: BTreeMap<BufferKey, BufferState>,
}

impl Buffers {
    /// Buffers acted on only when `enabled` (the gate).
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            ..Self::default()
        }
    }

    /// Creates or replaces `buffer`; the log line.
    pub fn apply(&mut self, buffer: CapacityBuffer) -> String {
        let key = BufferKey::of(&buffer);
        let mut line = format!("applied capacitybuffer {key}");
        if !self.enabled {
            line.push_str(
                " (ignored: the CapacityBuffer feature gate is off; set spec.settings.capacityBuffer)",
            );
        } else if let Some(s) = buffer.spec.provisioning_strategy.as_deref().filter(|s| {
            *s != karpenter_cloudprovider::autoscaling::v1beta1::ACTIVE_PROVISIONING_STRATEGY
        }) {
            line.push_str(&format!(
                " (provisioningStrategy {s:?} is kept as buffer.x-k8s.io/active-capacity, as Karpenter v1.15 does)"
            ));
        }
        self.logged.remove(&key);
        self.buffers.insert(key, buffer);
        line
    }

    /// Creates or replaces a PodTemplate.
    pub fn apply_pod_template(&mut self, pt: core::PodTemplate) {
        self.pod_templates.insert(namespaced_key(&pt.metadata), pt);
    }

    /// Deletes the CapacityBuffer or PodTemplate `namespace/name`; whether it existed.
    pub fn delete(&mut self, kind: &str, namespace: &str, name: &str) -> bool {
        let (ns, n) = (namespace.to_owned(), name.to_owned());
        match kind {
            "CapacityBuffer" => {
                let key = BufferKey {
                    namespace: ns,
                    name: n,
                };
                self.logged.remove(&key);
                self.buffers.remove(&key).is_some()
            }
            "PodTemplate" => self.pod_templates.remove(&(ns, n)).is_some(),
            _ => false,
        }
    }

    fn lookup(&self, workloads: &Workloads, namespace: &str, reference: &Reference<'_>) -> Lookup {
        match *reference {
            Reference::PodTemplate { name } => {
                match self
                    .pod_templates
                    .get(&(namespace.to_owned(), name.to_owned()))
                {
                    None => Lookup::NotFound(format!("podtemplates {name:?} not found")),
                    Some(pt) => match pod_from_pod_template(pt) {
                        Ok(pod) => Lookup::Found(Box::new(Template {
                            pod,
                            scalable_replicas: None,
                            pod_template: Some((
                                name.to_owned(),
                                pt.metadata.generation.unwrap_or(0),
                            )),
                        })),
                        Err(e) => Lookup::Failed(e.to_string()),
                    },
                }
            }
            Reference::Scalable { group, kind, name } => {
                let group = if group.is_empty() { "apps" } else { group };
                if group != "apps" {
                    return Lookup::Failed(format!("unsupported scalableRef API group {group:?}"));
                }
                let k = match kind {
                    "Deployment" => Kind::Deployment,
                    "StatefulSet" => Kind::StatefulSet,
                    "ReplicaSet" => Kind::ReplicaSet,
                    other => return Lookup::Failed(format!("unsupported kind {other:?}")),
                };
                match workloads.get(&(k, namespace.to_owned(), name.to_owned())) {
                    None => Lookup::NotFound(format!(
                        "{}s.apps {name:?} not found",
                        kind.to_lowercase()
                    )),
                    Some(w) => {
                        let mut pod = w.proto.clone();
                        pod.owner = None;
                        Lookup::Found(Box::new(Template {
                            pod,
                            scalable_replicas: Some(w.replicas),
                            pod_template: None,
                        }))
                    }
                }
            }
        }
    }

    /// Every buffer resolved against `workloads` (none with the gate off), and a log line for
    /// each whose readiness changed since it was last told.
    pub fn resolve(&mut self, workloads: &Workloads) -> (Vec<ResolvedBuffer>, Vec<String>) {
        if !self.enabled {
            return (Vec::new(), Vec::new());
        }
        let resolved: Vec<ResolvedBuffer> = self
            .buffers
            .values()
            .map(|b| resolve(b, |ns, r| self.lookup(workloads, ns, r)))
            .collect();
        let mut lines = Vec::new();
        for r in &resolved {
            if self.logged.get(&r.key) == Some(&r.state) {
                continue;
            }
            lines.push(match &r.state {
                BufferState::Ready { replicas, .. } => format!(
                    "capacitybuffer {} is ready for provisioning: {replicas} chunk(s)",
                    r.key
                ),
                BufferState::NotReady { reason, message } => format!(
                    "capacitybuffer {} is not ready for provisioning ({reason}): {message}",
                    r.key
                ),
            });
            self.logged.insert(r.key.clone(), r.state.clone());
        }
        (resolved, lines)
    }
}
