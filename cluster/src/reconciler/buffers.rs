//! CapacityBuffers in a tick: when their virtual pods call for a plan, and what a plan did
//! with them (upstream's provisioner side of the `CapacityBuffer` gate).
//!
//! The virtual pods are planned with the provisionable pods: a new or changed buffer opens a
//! batch, so does a pod bound to a node (it may have taken a buffer's room), and they are
//! planned again every re-plan period like any pod left pending. A plan's virtual pods never
//! nominate a node and never produce pod events; their placements decide each buffer's
//! `Provisioning` condition and which nodes emptiness leaves alone.

use super::{Event, Reconciler};
use crate::ClusterState;
use crate::capacity_buffer::{self, Placement, provisioning_condition};
use karpenter_scheduling::Plan;
use karpenter_scheduling::model::{Millis, Pod, PodKey};
use std::collections::{BTreeMap, BTreeSet};

impl Reconciler {
    /// The virtual pods' keys at `now`, after opening a batch if the buffers changed or a pod
    /// was bound (or left a node) since the last tick. Without buffers, forgets the last
    /// placements (emptiness may then take the nodes they held).
    pub(super) fn buffer_pods(&mut self, index: &ClusterState, now: Millis) -> BTreeSet<PodKey> {
        let keys: BTreeSet<PodKey> = index.virtual_pods().map(Pod::key).collect();
        let seen = self.buffers_seen;
        self.buffers_seen = index.generation();
        if keys.is_empty() {
            if !self.buffer_nodes.is_empty() {
                self.pass_memo = None;
            }
            self.buffer_nodes.clear();
            self.buffer_placements.clear();
            return keys;
        }
        if index.buffers_changed_after(seen) || index.pod_events_after(seen).next().is_some() {
            self.queue.trigger(now);
        }
        keys
    }

    /// Records where `plan` put the virtual pods (`keys`), reports each buffer whose
    /// `Provisioning` verdict changed, and removes the virtual pods from `plan` so that the
    /// rest of provisioning sees only real pods.
    pub(super) fn place_buffers(
        &mut self,
        index: &ClusterState,
        keys: &BTreeSet<PodKey>,
        plan: &mut Plan,
        events: &mut Vec<Event>,
    ) {
        if keys.is_empty() {
            return;
        }
        let pods: BTreeMap<PodKey, &Pod> = index.virtual_pods().map(|p| (p.key(), p)).collect();
        let placed = capacity_buffer::placements(plan, |k| pods.get(k).copied());
        for (key, buffer) in index.capacity_buffers() {
            let Some(now) = placed.buffers.get(key) else {
                continue;
            };
            let before = self.buffer_placements.get(key);
            let verdict = |p: Option<&Placement>| provisioning_condition(buffer, p);
            if before.is_none() || verdict(before) != verdict(Some(now)) {
                events.push(Event::CapacityBuffer {
                    buffer: key.clone(),
                    replicas: buffer.replicas(),
                    placement: now.clone(),
                });
            }
        }
        self.buffer_placements = placed.buffers;
        if self.buffer_nodes != placed.nodes {
            // Emptiness reads them: the next disruption poll must not reuse a pass computed
            // with the old ones.
            self.pass_memo = None;
            self.buffer_nodes = placed.nodes;
        }
        capacity_buffer::without_virtual_pods(plan, |k| keys.contains(k));
    }

    /// Where the last plan put each CapacityBuffer's virtual pods (buffers no plan placed
    /// yet are absent).
    pub fn capacity_buffer_placements(&self) -> &BTreeMap<capacity_buffer::BufferKey, Placement> {
        &self.buffer_placements
    }

    /// How many virtual pods the last plan put on each node (or in-flight NodeClaim).
    pub fn buffer_nodes(&self) -> &BTreeMap<String, usize> {
        &self.buffer_nodes
    }
}
