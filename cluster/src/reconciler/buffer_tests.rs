//! CapacityBuffers in the reconciler: virtual pods planned with the pending pods, their
//! placements, and what emptiness makes of them.

use super::tests::{GI, LIVE, add_node, bind, index, launches, planned, reconciler, tick};
use super::*;
use crate::capacity_buffer::{BufferKey, Lookup, ResolvedBuffer, Template, resolve};
use crate::{Action, ClusterState};
use karpenter_cloudprovider::CapacityBuffer;
use karpenter_cloudprovider::v1::ConditionType;
use karpenter_testing::pods::pod;

/// A buffer `default/headroom` of `replicas` chunks of `cpu_millis` each.
fn buffer(replicas: i32, cpu_millis: i64) -> ResolvedBuffer {
    let b: CapacityBuffer = serde_json::from_value(serde_json::json!({
        "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
        "metadata": {"name": "headroom", "namespace": "default", "uid": "b1"},
        "spec": {"podTemplateRef": {"name": "chunk"}, "replicas": replicas}
    }))
    .unwrap();
    resolve(&b, |_, _| {
        Lookup::Found(Box::new(Template {
            pod: pod("chunk", cpu_millis, GI),
            scalable_replicas: None,
            pod_template: Some(("chunk".into(), 1)),
        }))
    })
}

fn key() -> BufferKey {
    BufferKey {
        namespace: "default".into(),
        name: "headroom".into(),
    }
}

fn buffer_events(t: &Tick) -> Vec<(usize, usize, usize)> {
    t.events
        .iter()
        .filter_map(|e| match e {
            Event::CapacityBuffer { placement: p, .. } => {
                Some((p.existing, p.new_claims, p.failed))
            }
            _ => None,
        })
        .collect()
}

fn pod_events(t: &Tick) -> usize {
    t.events
        .iter()
        .filter(|e| matches!(e, Event::Nominated { .. } | Event::FailedScheduling { .. }))
        .count()
}

#[test]
fn a_buffer_launches_its_capacity_then_fits_it_without_nominating() {
    let mut s = index(&[], true);
    s.set_capacity_buffers([buffer(2, 1_000)]);
    let mut r = reconciler();
    let opened = tick(&mut r, &s, 0, 0);
    assert_eq!(launches(&opened), 0);
    assert_eq!(opened.next_wakeup, Some(1_000));
    let due = tick(&mut r, &s, 0, 1_000);
    assert_eq!(launches(&due), 1, "{:?}", due.actions);
    let Some(Action::LaunchNodeClaim { plan, .. }) = due.actions.first() else {
        panic!("{:?}", due.actions)
    };
    assert_eq!(plan.pods.len(), 2, "the claim is sized for both chunks");
    assert_eq!(buffer_events(&due), [(0, 2, 0)]);
    assert_eq!(pod_events(&due), 0);
    // The reported plan holds only real pods: here none, one claim.
    let Some(Event::Planned { pods, plan, .. }) = due
        .events
        .iter()
        .find(|e| matches!(e, Event::Planned { .. }))
    else {
        panic!("{:?}", due.events)
    };
    assert_eq!((*pods, plan.new_node_claims.len()), (0, 1));
    assert!(plan.new_node_claims[0].pods.is_empty());

    // The claim is in flight: planned again after the re-plan period, the chunks fit it.
    add_node(&mut s, "n1", &[ConditionType::Launched]);
    let replan = 1_000 + RESOLVE_PERIOD_MS;
    assert!(!planned(&tick(&mut r, &s, 0, replan)));
    let fits = tick(&mut r, &s, 0, replan + 1_000);
    assert_eq!(launches(&fits), 0);
    assert_eq!(buffer_events(&fits), [(2, 0, 0)]);
    assert!(!planned(&fits), "nothing real was planned");
    assert_eq!(pod_events(&fits), 0);
    assert!(r.nominated_nodes(replan + 1_000).is_empty());
    assert_eq!(r.buffer_nodes()["n1"], 2);
    assert_eq!(r.capacity_buffer_placements()[&key()].existing, 2);
}

#[test]
fn a_pod_taking_the_buffers_room_refills_it_within_the_batch_window() {
    let mut s = index(&[], true);
    add_node(&mut s, "n1", &LIVE);
    s.set_capacity_buffers([buffer(2, 1_500)]);
    let mut r = reconciler();
    tick(&mut r, &s, 0, 0);
    let fits = tick(&mut r, &s, 0, 1_000);
    assert_eq!(
        (launches(&fits), buffer_events(&fits)),
        (0, vec![(2, 0, 0)])
    );
    // A workload pod lands in the room (the kube-scheduler sees no virtual pods).
    let mut p = pod("web-0", 2_000, GI);
    p.node_name = Some("n1".into());
    s.apply(crate::Object::Pod(Box::new(crate::PodRecord {
        pod: p,
        ready_at: None,
        deleting_at: None,
        unschedulable: false,
    })));
    let opened = tick(&mut r, &s, 0, 5_000);
    assert_eq!(opened.next_wakeup, Some(6_000));
    let refill = tick(&mut r, &s, 0, 6_000);
    assert_eq!(launches(&refill), 1, "{:?}", refill.actions);
    assert_eq!(buffer_events(&refill), [(1, 1, 0)]);
    // Without a buffer, a bound pod plans nothing.
    let mut s = index(&[], true);
    add_node(&mut s, "n1", &LIVE);
    let mut r = reconciler();
    tick(&mut r, &s, 0, 0);
    bind(&mut s, "web-0", "n1");
    for now in [1_000, 2_000, 40_000] {
        assert!(!planned(&tick(&mut r, &s, 0, now)));
    }
}

fn deletes(t: &Tick) -> Vec<String> {
    t.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeleteNodeClaim { node_claim, .. } => Some(node_claim.clone()),
            _ => None,
        })
        .collect()
}

/// Runs ticks every second from `from` to `to`, applying nothing; the NodeClaims whose
/// deletion was asked for.
fn run(r: &mut Reconciler, s: &ClusterState, from: Millis, to: Millis) -> Vec<String> {
    let asked: BTreeSet<String> = (from..=to)
        .step_by(1_000)
        .flat_map(|now| deletes(&tick(r, s, 0, now)))
        .collect();
    asked.into_iter().collect()
}

#[test]
fn emptiness_spares_a_node_that_holds_a_buffer_until_the_buffer_goes() {
    let mut s = index(&[], true);
    add_node(&mut s, "n1", &LIVE);
    // Without a buffer the empty node goes (Empty, after the 15 s validation).
    let mut r = reconciler();
    assert_eq!(run(&mut r, &s, 0, 40_000), ["n1"]);

    s.set_capacity_buffers([buffer(2, 1_500)]);
    let mut r = reconciler();
    assert!(run(&mut r, &s, 0, 60_000).is_empty());
    assert_eq!(r.buffer_nodes()["n1"], 2);
    // The buffer is deleted: its placements are forgotten at once and the node goes.
    s.set_capacity_buffers([]);
    assert_eq!(run(&mut r, &s, 61_000, 100_000), ["n1"]);
    assert!(r.capacity_buffer_placements().is_empty());
}
