use super::*;
use karpenter_scheduling::plan::{NewNodeClaim, NodePlacement, UnschedulablePod};
use serde_json::{Value, json};

fn buffer(spec: Value) -> CapacityBuffer {
    serde_json::from_value(json!({
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "buf", "namespace": "team", "uid": "u1", "generation": 3},
        "spec": spec,
    }))
    .expect("a CapacityBuffer")
}

fn pod_template(name: &str, cpu: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "team", "generation": 4},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}}}]}
        }
    })
}

fn deployment(name: &str, replicas: Option<i32>, cpu: &str) -> Value {
    let mut spec = json!({
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
        }
    });
    if let Some(r) = replicas {
        spec["replicas"] = json!(r);
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": "team", "uid": "d1"}, "spec": spec})
}

fn referents(objects: &[Value]) -> ReferentMaps {
    let mut maps = ReferentMaps::default();
    for o in objects {
        let kind = o["kind"].as_str().unwrap();
        assert!(maps.insert_value(kind, o).unwrap(), "{kind}");
    }
    maps
}

fn resolved(spec: Value, objects: &[Value]) -> ResolvedBuffer {
    let maps = referents(objects);
    resolve(&buffer(spec), |ns, r| lookup(&maps, ns, r))
}

#[test]
fn percentage_rounds_up_to_at_least_one() {
    for (scalable, pct, want) in [
        (10, 20, 2),
        (10, 25, 3),
        (1, 10, 1),
        (0, 50, 0),
        (10, 0, 0),
        (10, 100, 10),
        (10, 150, 15),
        (1_000_000, 50, 500_000),
        (i32::MAX, 200, i32::MAX),
    ] {
        assert_eq!(
            percentage_replicas(scalable, pct),
            want,
            "{scalable} × {pct}%"
        );
    }
}

#[test]
fn limits_count_the_chunks_that_fit_on_every_shared_resource() {
    let q = |s: &str| k8s_openapi::apimachinery::pkg::api::resource::Quantity(s.into());
    let limits = |items: &[(&str, &str)]| -> BTreeMap<_, _> {
        items.iter().map(|(k, v)| ((*k).to_owned(), q(v))).collect()
    };
    let req = |items: &[(&str, &str)]| Resources::parse(items).unwrap();
    let one_cpu = req(&[("cpu", "1"), ("memory", "1Gi")]);
    assert_eq!(limit_replicas(&limits(&[("cpu", "3")]), &one_cpu), Some(3));
    assert_eq!(
        limit_replicas(&limits(&[("memory", "5Gi")]), &one_cpu),
        Some(5)
    );
    // The least over resources, floored.
    assert_eq!(
        limit_replicas(&limits(&[("cpu", "10"), ("memory", "2.5Gi")]), &one_cpu),
        Some(2)
    );
    assert_eq!(
        limit_replicas(&limits(&[("cpu", "1500m")]), &req(&[("cpu", "500m")])),
        Some(3)
    );
    assert_eq!(
        limit_replicas(&limits(&[("cpu", "500m")]), &one_cpu),
        Some(0)
    );
    // Nothing requested that the limits name: they constrain nothing.
    assert_eq!(
        limit_replicas(&limits(&[("nvidia.com/gpu", "4")]), &one_cpu),
        None
    );
    assert_eq!(
        limit_replicas(&limits(&[("cpu", "4")]), &Resources::default()),
        None
    );
}

#[test]
fn replicas_combine_as_upstream_compute_replicas() {
    let pt = pod_template("pt", "1");
    let d10 = deployment("web", Some(10), "1");
    let cases: [(Value, &Value, i32); 9] = [
        (
            json!({"podTemplateRef": {"name": "pt"}, "replicas": 7}),
            &pt,
            7,
        ),
        (
            json!({"podTemplateRef": {"name": "pt"}, "replicas": 10, "limits": {"cpu": "3"}}),
            &pt,
            3,
        ),
        (
            json!({"podTemplateRef": {"name": "pt"}, "replicas": 3, "limits": {"cpu": "10"}}),
            &pt,
            3,
        ),
        (
            json!({"podTemplateRef": {"name": "pt"}, "limits": {"cpu": "5"}}),
            &pt,
            5,
        ),
        (
            json!({"scalableRef": {"kind": "Deployment", "name": "web"}, "percentage": 20}),
            &d10,
            2,
        ),
        (
            json!({"scalableRef": {"kind": "Deployment", "name": "web"}, "replicas": 5, "percentage": 20}),
            &d10,
            5,
        ),
        (
            json!({"scalableRef": {"kind": "Deployment", "name": "web"}, "replicas": 5, "percentage": 80}),
            &d10,
            8,
        ),
        (
            json!({"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"}, "replicas": 5, "percentage": 80, "limits": {"cpu": "4"}}),
            &d10,
            4,
        ),
        // A scalableRef with no sizing at all keeps nothing.
        (
            json!({"scalableRef": {"kind": "Deployment", "name": "web"}}),
            &d10,
            0,
        ),
    ];
    for (spec, object, want) in cases {
        let r = resolved(spec.clone(), std::slice::from_ref(object));
        assert_eq!(r.replicas(), want, "{spec}");
        assert_eq!(r.pods.len(), usize::try_from(want).unwrap(), "{spec}");
    }
    // Percentage of a Deployment without spec.replicas counts from 1.
    let r = resolved(
        json!({"scalableRef": {"kind": "Deployment", "name": "web"}, "percentage": 100}),
        &[deployment("web", None, "1")],
    );
    assert_eq!(r.replicas(), 1);
    // Percentage of a Deployment scaled to zero adds nothing.
    let r = resolved(
        json!({"scalableRef": {"kind": "Deployment", "name": "web"}, "percentage": 50}),
        &[deployment("web", Some(0), "1")],
    );
    assert_eq!(r.replicas(), 0);
}

#[test]
fn virtual_pods_carry_the_template_and_the_buffer() {
    let r = resolved(
        json!({"podTemplateRef": {"name": "pt"}, "replicas": 2}),
        &[pod_template("pt", "1")],
    );
    assert_eq!(
        r.state,
        BufferState::Ready {
            replicas: 2,
            pod_template: Some(("pt".into(), 4)),
        }
    );
    let names: Vec<&str> = r.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["capacity-buffer-buf-1", "capacity-buffer-buf-2"]);
    let p = &r.pods[1];
    assert_eq!((p.namespace.as_str(), p.uid.as_str()), ("team", "u1-2"));
    assert_eq!(p.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(p.requests.cpu_millis, 1000);
    assert_eq!(p.priority, i32::MIN);
    assert!(p.owner.is_none() && p.node_name.is_none());
    assert!(is_virtual(p));
    assert_eq!(
        buffer_of(p),
        Some(BufferKey {
            namespace: "team".into(),
            name: "buf".into()
        })
    );
    // A scalableRef's pods come from the workload's template, owned by nobody.
    let r = resolved(
        json!({"scalableRef": {"kind": "Deployment", "name": "web"}, "replicas": 1}),
        &[deployment("web", Some(3), "250m")],
    );
    assert_eq!(r.pods[0].requests.cpu_millis, 250);
    assert!(r.pods[0].owner.is_none());
    assert_eq!(r.pods[0].labels.get("app").map(String::as_str), Some("web"));
}

#[test]
fn unresolvable_buffers_say_why_with_upstreams_reasons() {
    let state = |spec: Value, objects: &[Value]| resolved(spec, objects).state;
    let not_ready = |reason: &'static str, message: &str| BufferState::NotReady {
        reason,
        message: message.into(),
    };
    assert_eq!(
        state(
            json!({"podTemplateRef": {"name": "gone"}, "replicas": 1}),
            &[]
        ),
        not_ready(
            REASON_POD_TEMPLATE_NOT_FOUND,
            "podtemplates \"gone\" not found"
        )
    );
    assert_eq!(
        state(
            json!({"scalableRef": {"kind": "Deployment", "name": "gone"}}),
            &[]
        ),
        not_ready(
            REASON_SCALABLE_REF_NOT_FOUND,
            "deployments.apps \"gone\" not found"
        )
    );
    assert_eq!(
        state(json!({"scalableRef": {"kind": "Job", "name": "j"}}), &[]),
        not_ready(REASON_RESOLUTION_FAILED, "unsupported kind \"Job\"")
    );
    assert_eq!(
        state(
            json!({"scalableRef": {"apiGroup": "batch", "kind": "Job", "name": "j"}}),
            &[]
        ),
        not_ready(
            REASON_RESOLUTION_FAILED,
            "unsupported scalableRef API group \"batch\""
        )
    );
    assert_eq!(
        state(json!({"replicas": 1}), &[]),
        not_ready(
            REASON_RESOLUTION_FAILED,
            "Neither podTemplateRef nor scalableRef is set"
        )
    );
    let r = resolved(
        json!({"podTemplateRef": {"name": "gone"}, "replicas": 1}),
        &[],
    );
    assert!(r.pods.is_empty());
    assert_eq!(r.replicas(), 0);
}

fn key(n: &str) -> PodKey {
    PodKey::new("team", n)
}

#[test]
fn placements_count_virtual_pods_per_buffer_and_node() {
    let mut pods: BTreeMap<PodKey, Pod> = BTreeMap::new();
    let make = |ns: &str, name: &str, count: i32| {
        let b = BufferKey {
            namespace: ns.into(),
            name: name.into(),
        };
        virtual_pods(&b, name, 0, &Pod::default(), count)
    };
    for p in make("team", "a", 3)
        .into_iter()
        .chain(make("other", "a", 1))
        .chain([Pod {
            namespace: "team".into(),
            name: "real".into(),
            ..Pod::default()
        }])
    {
        pods.insert(p.key(), p);
    }
    let plan = Plan {
        existing: vec![NodePlacement {
            node: "n1".into(),
            pods: vec![key("capacity-buffer-a-1"), key("real")],
        }],
        new_node_claims: vec![NewNodeClaim {
            node_pool: "default".into(),
            requirements: Default::default(),
            instance_type_options: Default::default(),
            pods: vec![
                key("capacity-buffer-a-2"),
                PodKey::new("other", "capacity-buffer-a-1"),
            ],
            requests: Resources::default(),
            daemon_overhead: Resources::default(),
            price: 1.0,
        }],
        unschedulable: vec![UnschedulablePod {
            pod: key("capacity-buffer-a-3"),
            reason: "limit".into(),
            deferred: false,
        }],
        ..Plan::default()
    };
    let p = placements(&plan, |k| pods.get(k));
    let team_a = &p.buffers[&BufferKey {
        namespace: "team".into(),
        name: "a".into(),
    }];
    assert_eq!(
        (team_a.existing, team_a.new_claims, team_a.failed),
        (1, 1, 1)
    );
    assert_eq!(team_a.failure.as_deref(), Some("limit"));
    assert_eq!(
        team_a.describe(
            &BufferKey {
                namespace: "team".into(),
                name: "a".into()
            },
            3
        ),
        "capacitybuffer team/a: 1 of 3 virtual pod(s) fit existing capacity, \
         1 need new nodeclaims, 1 fit nowhere (limit)"
    );
    let other_a = &p.buffers[&BufferKey {
        namespace: "other".into(),
        name: "a".into(),
    }];
    assert_eq!((other_a.existing, other_a.new_claims), (0, 1));
    assert_eq!(p.nodes, BTreeMap::from([("n1".to_owned(), 1)]));

    let mut real = plan.clone();
    without_virtual_pods(&mut real, |k| pods.get(k).is_some_and(is_virtual));
    assert_eq!(real.existing[0].pods, [key("real")]);
    assert!(real.new_node_claims[0].pods.is_empty());
    assert!(real.unschedulable.is_empty());
}

#[test]
fn the_provisioning_condition_follows_upstream() {
    let ready = resolved(
        json!({"podTemplateRef": {"name": "pt"}, "replicas": 2}),
        &[pod_template("pt", "1")],
    );
    let fits = Placement {
        existing: 2,
        ..Placement::default()
    };
    let (s, reason, message) = provisioning_condition(&ready, Some(&fits)).unwrap();
    assert_eq!(
        (s, reason),
        (ConditionStatus::True, REASON_FITS_EXISTING_CAPACITY)
    );
    assert_eq!(message, "All 2 virtual pods fit on existing capacity");
    let needs = Placement {
        existing: 1,
        new_claims: 1,
        ..Placement::default()
    };
    let (s, reason, message) = provisioning_condition(&ready, Some(&needs)).unwrap();
    assert_eq!(
        (s, reason),
        (ConditionStatus::False, REASON_REQUIRES_NEW_CAPACITY)
    );
    assert_eq!(message, "1/2 virtual pods required new capacity, 0 failed");
    assert_eq!(provisioning_condition(&ready, None), None);
    let not_ready = resolved(json!({"podTemplateRef": {"name": "x"}, "replicas": 2}), &[]);
    assert_eq!(
        provisioning_condition(&not_ready, Some(&fits)).unwrap().1,
        REASON_NOT_READY_FOR_PROVISIONING
    );
    let empty = resolved(
        json!({"podTemplateRef": {"name": "pt"}, "replicas": 0}),
        &[pod_template("pt", "1")],
    );
    assert_eq!(
        provisioning_condition(&empty, None).unwrap().1,
        REASON_BUFFER_EMPTY
    );
}

#[test]
fn the_status_records_the_resolution_and_keeps_transition_times() {
    let t = |s: i64| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
    let mut b = buffer(json!({"podTemplateRef": {"name": "pt"}, "replicas": 2}));
    let r = resolve(&b, |ns, r| {
        lookup(&referents(&[pod_template("pt", "1")]), ns, r)
    });
    let placed = Placement {
        existing: 2,
        ..Placement::default()
    };
    let status = desired_status(&b, &r, Some(&placed), &t(100));
    assert_eq!(status.replicas, Some(2));
    assert_eq!(
        status.pod_template_ref.as_ref().map(|r| r.name.as_str()),
        Some("pt")
    );
    assert_eq!(status.pod_template_generation, Some(4));
    assert_eq!(
        status.provisioning_strategy.as_deref(),
        Some(ACTIVE_PROVISIONING_STRATEGY)
    );
    let types: Vec<(&str, ConditionStatus, &str, Option<i64>)> = status
        .conditions
        .iter()
        .map(|c| {
            (
                c.type_.as_str(),
                c.status,
                c.reason.as_str(),
                c.observed_generation,
            )
        })
        .collect();
    assert_eq!(
        types,
        [
            (
                CONDITION_READY_FOR_PROVISIONING,
                ConditionStatus::True,
                REASON_RESOLVED,
                Some(3)
            ),
            (
                CONDITION_PROVISIONING,
                ConditionStatus::True,
                REASON_FITS_EXISTING_CAPACITY,
                Some(3)
            ),
        ]
    );
    b.status = Some(status.clone());
    // Nothing changed: the same status, transition times kept.
    assert_eq!(desired_status(&b, &r, Some(&placed), &t(200)), status);
    // The template disappears: not ready, replicas kept as last observed, Provisioning False.
    let gone = resolve(&b, |_, _| {
        Lookup::NotFound("podtemplates \"pt\" not found".into())
    });
    let after = desired_status(&b, &gone, None, &t(300));
    assert_eq!(after.replicas, Some(2));
    let ready = &after.conditions[0];
    assert_eq!(
        (
            ready.status,
            ready.reason.as_str(),
            ready.last_transition_time.clone()
        ),
        (
            ConditionStatus::False,
            REASON_POD_TEMPLATE_NOT_FOUND,
            t(300)
        )
    );
    assert_eq!(
        after.conditions[1].reason,
        REASON_NOT_READY_FOR_PROVISIONING
    );
}
