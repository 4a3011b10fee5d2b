use super::*;
use crate::v1::{CONDITION_READY, NodeSelectorOperator as Op};
use crate::v1alpha1::{NodeOverlaySpec, NodeSelectorRequirement as Req};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_testing::instance_types::InstanceTypeBuilder;

fn overlay(name: &str, weight: Option<i32>, reqs: Vec<Req>) -> NodeOverlay {
    let mut o = NodeOverlay::new(
        name,
        NodeOverlaySpec {
            requirements: reqs,
            weight,
            ..NodeOverlaySpec::default()
        },
    );
    o.metadata.generation = Some(1);
    o
}

fn priced(mut o: NodeOverlay, adjustment: &str) -> NodeOverlay {
    o.spec.price_adjustment = Some(adjustment.into());
    o
}

fn with_capacity(mut o: NodeOverlay, items: &[(&str, &str)]) -> NodeOverlay {
    for (k, v) in items {
        o.spec.capacity.insert((*k).into(), Quantity((*v).into()));
    }
    o
}

fn req(key: &str, op: Op, values: &[&str]) -> Req {
    Req::new(key, op, values.iter().copied())
}

fn pool(name: &str, labels: &[(&str, &str)]) -> NodePool {
    let mut p = NodePool::new(name, Default::default());
    for (k, v) in labels {
        p.spec
            .template
            .metadata
            .labels
            .insert((*k).into(), (*v).into());
    }
    p
}

fn types() -> Vec<Arc<InstanceType>> {
    vec![
        InstanceTypeBuilder::new("small", 2, 4)
            .zones(&["zone-a", "zone-b"])
            .on_demand(0.10)
            .spot(0.04)
            .build(),
        InstanceTypeBuilder::new("large", 8, 16)
            .zones(&["zone-a", "zone-b"])
            .on_demand(0.40)
            .spot(0.16)
            .build(),
    ]
}

fn price(types: &[Arc<InstanceType>], name: &str, zone: &str, ct: &str) -> f64 {
    types
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| {
            t.offerings
                .iter()
                .find(|o| o.zone == zone && o.capacity_type == ct)
        })
        .map(|o| o.price)
        .expect("offering exists")
}

fn run(
    overlays: &[NodeOverlay],
    pools: &[&NodePool],
) -> (BTreeMap<String, Vec<Arc<InstanceType>>>, Evaluation) {
    let raw = pools
        .iter()
        .map(|p| (p.name().to_owned(), types()))
        .collect();
    overlay_instance_types(overlays, pools, &raw)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn price_patterns_match_upstreams() {
    for ok in [
        "+5.00", "-7.50", "+0.5", "-.5", "+10%", "+150%", "-10%", "-99.5%", "-100%", "+.5%",
    ] {
        assert!(PriceChange::parse_adjustment(ok).is_some(), "{ok}");
    }
    for bad in [
        "5", "10%", "-101%", "-150%", "-.5%", "+5.", "+", "-", "+5%%", "++5", "-1e3", "+ 5", "",
    ] {
        assert!(PriceChange::parse_adjustment(bad).is_none(), "{bad}");
    }
    for ok in ["5", "5.00", "0", "0.125"] {
        assert!(PriceChange::parse_price(ok).is_some(), "{ok}");
    }
    for bad in ["+5", "-1", ".5", "5.", "5%", "", "1e3"] {
        assert!(PriceChange::parse_price(bad).is_none(), "{bad}");
    }
}

#[test]
fn price_changes_compute_as_upstream() {
    let adj = |s: &str, p: f64| PriceChange::parse_adjustment(s).unwrap().apply(p);
    assert!(close(adj("+10%", 0.40), 0.44));
    assert!(close(adj("-25%", 0.40), 0.30));
    assert!(close(adj("-100%", 0.40), 0.0));
    assert!(close(adj("+0.05", 0.40), 0.45));
    assert!(close(adj("-0.5", 0.40), 0.0), "clamped at zero");
    assert!(close(
        PriceChange::parse_price("5.00").unwrap().apply(0.40),
        5.0
    ));
}

#[test]
fn price_adjustment_changes_only_selected_offerings() {
    let p = pool("default", &[]);
    let o = priced(
        overlay(
            "od-discount",
            None,
            vec![
                req(labels::CAPACITY_TYPE, Op::In, &["on-demand"]),
                req(labels::INSTANCE_TYPE, Op::In, &["large"]),
            ],
        ),
        "-50%",
    );
    let (out, eval) = run(&[o], &[&p]);
    assert_eq!(eval.verdicts()["od-discount"], Verdict::Applied);
    let t = &out["default"];
    assert!(close(price(t, "large", "zone-a", "on-demand"), 0.20));
    assert!(close(price(t, "large", "zone-b", "on-demand"), 0.20));
    assert!(close(price(t, "large", "zone-a", "spot"), 0.16));
    assert!(close(price(t, "small", "zone-a", "on-demand"), 0.10));
    // Untouched types are shared, not copied.
    assert!(Arc::ptr_eq(&t[0], &types_shared(&out)[0]));
}

fn types_shared(out: &BTreeMap<String, Vec<Arc<InstanceType>>>) -> Vec<Arc<InstanceType>> {
    out["default"].clone()
}

#[test]
fn price_replaces_and_zone_requirements_select_offerings() {
    let p = pool("default", &[]);
    let mut o = overlay("zone-a", None, vec![req(labels::ZONE, Op::In, &["zone-a"])]);
    o.spec.price = Some("1.5".into());
    let (out, _) = run(&[o], &[&p]);
    let t = &out["default"];
    assert!(close(price(t, "small", "zone-a", "spot"), 1.5));
    assert!(close(price(t, "small", "zone-a", "on-demand"), 1.5));
    assert!(close(price(t, "small", "zone-b", "on-demand"), 0.10));
}

#[test]
fn higher_weight_wins_and_lower_weights_fill_the_rest() {
    let p = pool("default", &[]);
    let base = priced(overlay("base", None, vec![]), "+100%");
    let specific = priced(
        overlay(
            "specific",
            Some(10),
            vec![req(labels::INSTANCE_TYPE, Op::In, &["large"])],
        ),
        "-50%",
    );
    let (out, eval) = run(&[base, specific], &[&p]);
    assert_eq!(eval.verdicts()["base"], Verdict::Applied);
    assert_eq!(eval.verdicts()["specific"], Verdict::Applied);
    let t = &out["default"];
    assert!(
        close(price(t, "large", "zone-a", "on-demand"), 0.20),
        "weight 10 wins"
    );
    assert!(
        close(price(t, "small", "zone-a", "on-demand"), 0.20),
        "base fills the rest"
    );
}

#[test]
fn equal_weights_overlapping_conflict_and_the_later_name_wins() {
    let p = pool("default", &[]);
    let a = priced(
        overlay(
            "overlay-a",
            Some(10),
            vec![req(labels::INSTANCE_TYPE, Op::In, &["large"])],
        ),
        "+1",
    );
    let b = priced(
        overlay(
            "overlay-b",
            Some(10),
            vec![req(labels::CAPACITY_TYPE, Op::In, &["on-demand"])],
        ),
        "+2",
    );
    let (out, eval) = run(&[a.clone(), b.clone()], &[&p]);
    assert_eq!(eval.verdicts()["overlay-b"], Verdict::Applied);
    let Verdict::Conflict(msg) = &eval.verdicts()["overlay-a"] else {
        panic!("overlay-a should conflict: {:?}", eval.verdicts());
    };
    assert!(
        msg.contains("\"overlay-b\"") && msg.contains("large"),
        "{msg}"
    );
    let t = &out["default"];
    assert!(close(price(t, "large", "zone-a", "on-demand"), 2.40));
    // overlay-a is applied nowhere, not even to the spot offerings only it selects.
    assert!(close(price(t, "large", "zone-a", "spot"), 0.16));

    // Order of the input does not matter.
    let (_, eval) = run(&[b, a], &[&p]);
    assert!(matches!(eval.verdicts()["overlay-a"], Verdict::Conflict(_)));
}

#[test]
fn equal_weights_on_disjoint_offerings_both_apply() {
    let p = pool("default", &[]);
    let a = priced(
        overlay(
            "a",
            Some(5),
            vec![req(labels::CAPACITY_TYPE, Op::In, &["spot"])],
        ),
        "+1",
    );
    let b = priced(
        overlay(
            "b",
            Some(5),
            vec![req(labels::CAPACITY_TYPE, Op::In, &["on-demand"])],
        ),
        "+2",
    );
    let (out, eval) = run(&[a, b], &[&p]);
    assert!(eval.verdicts().values().all(|v| *v == Verdict::Applied));
    let t = &out["default"];
    assert!(close(price(t, "small", "zone-a", "spot"), 1.04));
    assert!(close(price(t, "small", "zone-a", "on-demand"), 2.10));
}

#[test]
fn a_conflict_in_one_pool_withholds_the_overlay_from_every_pool() {
    let team = pool("team", &[("team", "ml")]);
    let other = pool("other", &[]);
    let wide = priced(overlay("z-wide", Some(3), vec![]), "+1");
    let narrow = priced(
        overlay(
            "a-narrow",
            Some(3),
            vec![req(labels::NODEPOOL, Op::In, &["other"])],
        ),
        "+5",
    );
    let (out, eval) = run(&[wide, narrow], &[&team, &other]);
    assert!(matches!(eval.verdicts()["a-narrow"], Verdict::Conflict(_)));
    assert!(close(price(&out["other"], "small", "zone-a", "spot"), 1.04));
}

#[test]
fn template_labels_match_and_undefined_custom_labels_do_not() {
    let ml = pool("ml", &[("team", "ml")]);
    let web = pool("web", &[]);
    let o = priced(
        overlay("ml", None, vec![req("team", Op::In, &["ml"])]),
        "+1",
    );
    let not_ml = priced(
        overlay("not-ml", Some(2), vec![req("team", Op::NotIn, &["ml"])]),
        "+3",
    );
    let (out, eval) = run(&[o, not_ml], &[&ml, &web]);
    assert!(eval.verdicts().values().all(|v| *v == Verdict::Applied));
    assert!(close(
        price(&out["ml"], "small", "zone-a", "on-demand"),
        1.10
    ));
    // NotIn on a label the pool does not define matches (absence satisfies NotIn).
    assert!(close(
        price(&out["web"], "small", "zone-a", "on-demand"),
        3.10
    ));
}

#[test]
fn capacity_overlays_merge_by_weight_and_conflict_on_the_same_resource() {
    let p = pool("default", &[]);
    let base = with_capacity(
        overlay("base", None, vec![]),
        &[("hugepages-2Mi", "100Mi"), ("example.com/fuse", "1")],
    );
    let large = with_capacity(
        overlay(
            "large",
            Some(10),
            vec![req(labels::INSTANCE_TYPE, Op::In, &["large"])],
        ),
        &[("hugepages-2Mi", "1Gi")],
    );
    let (out, eval) = run(&[base, large], &[&p]);
    assert!(eval.verdicts().values().all(|v| *v == Verdict::Applied));
    let get = |n: &str| out["default"].iter().find(|t| t.name == n).unwrap().clone();
    assert_eq!(get("large").capacity.get("hugepages-2Mi"), 1 << 30);
    assert_eq!(get("large").capacity.get("example.com/fuse"), 1);
    assert_eq!(get("small").capacity.get("hugepages-2Mi"), 100 << 20);
    assert_eq!(get("small").allocatable().get("example.com/fuse"), 1);
    assert_eq!(
        get("small").capacity.cpu_millis,
        2000,
        "standard resources untouched"
    );

    let x = with_capacity(overlay("x", Some(7), vec![]), &[("example.com/fuse", "1")]);
    let y = with_capacity(overlay("y", Some(7), vec![]), &[("example.com/fuse", "2")]);
    let z = with_capacity(overlay("w", Some(7), vec![]), &[("example.com/other", "2")]);
    let (out, eval) = run(&[x, y, z], &[&p]);
    assert!(matches!(eval.verdicts()["x"], Verdict::Conflict(_)));
    assert_eq!(eval.verdicts()["y"], Verdict::Applied);
    assert_eq!(
        eval.verdicts()["w"],
        Verdict::Applied,
        "another resource does not conflict"
    );
    assert_eq!(out["default"][0].capacity.get("example.com/fuse"), 2);
    assert_eq!(out["default"][0].capacity.get("example.com/other"), 2);
}

#[test]
fn invalid_overlays_are_reported_and_not_applied() {
    let p = pool("default", &[]);
    let cpu = with_capacity(overlay("cpu", None, vec![]), &[("cpu", "2")]);
    let mut both = priced(overlay("both", None, vec![]), "+1");
    both.spec.price = Some("3".into());
    let (out, eval) = run(&[cpu, both], &[&p]);
    let Verdict::Invalid(msg) = &eval.verdicts()["cpu"] else {
        panic!("{:?}", eval.verdicts());
    };
    assert!(msg.contains("spec.capacity[cpu]"), "{msg}");
    assert!(matches!(eval.verdicts()["both"], Verdict::Invalid(_)));
    assert_eq!(out["default"][0].capacity.cpu_millis, 2000);
    assert!(close(
        price(&out["default"], "small", "zone-a", "on-demand"),
        0.10
    ));
}

#[test]
fn unevaluated_pools_are_refused() {
    let p = pool("default", &[]);
    let t = types();
    let eval = evaluate(&[], &[(&p, t.as_slice())]);
    assert!(eval.evaluated("default"));
    assert_eq!(
        eval.apply("new", &t).unwrap_err(),
        UnevaluatedNodePool("new".into())
    );
}

#[test]
fn verdicts_become_status_conditions() {
    let mut o = overlay("o", None, vec![]);
    let t0 = Time(jiff_like_time(0));
    assert!(Verdict::Applied.set_condition(&mut o, t0.clone()));
    assert!(o.is_true(NODEOVERLAY_CONDITION_VALIDATION_SUCCEEDED));
    assert!(o.is_true(CONDITION_READY));
    assert!(
        !Verdict::Applied.set_condition(&mut o, t0.clone()),
        "no change, no write"
    );
    assert!(Verdict::Conflict("with b".into()).set_condition(&mut o, t0));
    let c = o
        .condition(NODEOVERLAY_CONDITION_VALIDATION_SUCCEEDED)
        .unwrap();
    assert_eq!(
        (c.reason.as_str(), c.message.as_str()),
        (REASON_CONFLICT, "with b")
    );
    assert!(o.is_false(CONDITION_READY));
}

fn jiff_like_time(secs: i64) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(secs).unwrap()
}

#[test]
fn validation_follows_the_crd_and_runtime_rules() {
    let paths = |o: &NodeOverlay| -> Vec<String> {
        o.validate()
            .err()
            .map(|e| e.errors.iter().map(|e| e.path.clone()).collect())
            .unwrap_or_default()
    };
    let ok = priced(
        overlay(
            "ok",
            Some(10_000),
            vec![
                req(labels::NODEPOOL, Op::In, &["default"]),
                req(labels::CAPACITY_TYPE, Op::In, &["spot"]),
                req("karpenter.k8s.aws/instance-cpu", Op::Gt, &["4"]),
            ],
        ),
        "-10%",
    );
    assert_eq!(paths(&ok), Vec::<String>::new());
    let bad = with_capacity(
        overlay(
            "bad",
            Some(0),
            vec![
                req(labels::HOSTNAME, Op::In, &["n"]),
                req("team", Op::NotIn, &[]),
                req("cpu", Op::Gt, &["many"]),
            ],
        ),
        &[("memory", "1Gi"), ("example.com/x", "lots")],
    );
    let mut bad = priced(bad, "10%");
    bad.spec.price = Some("-1".into());
    let got = paths(&bad);
    for want in [
        "spec.requirements[0].key",
        "spec.requirements[1].values",
        "spec.requirements[2].values",
        "spec",
        "spec.price",
        "spec.priceAdjustment",
        "spec.capacity[memory]",
        "spec.capacity[example.com/x]",
        "spec.weight",
    ] {
        assert!(got.iter().any(|p| p == want), "{want} missing from {got:?}");
    }
    let msg = bad.validate().unwrap_err().to_string();
    assert!(msg.starts_with("NodeOverlay \"bad\" is invalid"), "{msg}");
}

#[test]
fn numeric_and_existence_requirements_match_type_labels() {
    let mem_label = "karpenter.k8s.aws/instance-memory";
    let with_memory = |it: Arc<InstanceType>, mib: &str| {
        let mut t = InstanceType::clone(&it);
        t.requirements
            .add(Requirement::new(mem_label, Operator::In, [mib]).unwrap());
        Arc::new(t)
    };
    let p = pool("default", &[]);
    let raw = BTreeMap::from([(
        "default".to_owned(),
        vec![
            with_memory(types()[0].clone(), "4096"),
            with_memory(types()[1].clone(), "16384"),
        ],
    )]);
    let big = priced(
        overlay("big", None, vec![req(mem_label, Op::Gt, &["8192"])]),
        "+1",
    );
    let gpu = priced(
        overlay(
            "gpu",
            Some(2),
            vec![req("karpenter.k8s.aws/instance-gpu-count", Op::Exists, &[])],
        ),
        "+5",
    );
    let no_gpu = priced(
        overlay(
            "no-gpu",
            Some(3),
            vec![
                req(
                    "karpenter.k8s.aws/instance-gpu-count",
                    Op::DoesNotExist,
                    &[],
                ),
                req(labels::INSTANCE_TYPE, Op::In, &["small"]),
            ],
        ),
        "+2",
    );
    let (out, eval) = overlay_instance_types(&[big, gpu, no_gpu], &[&p], &raw);
    assert!(
        eval.verdicts().values().all(|v| *v == Verdict::Applied),
        "{:?}",
        eval.verdicts()
    );
    let t = &out["default"];
    assert!(
        close(price(t, "large", "zone-a", "on-demand"), 1.40),
        "Gt 8192 matches 16384"
    );
    // Exists on a label no type has matches nothing; DoesNotExist matches its absence.
    assert!(close(price(t, "small", "zone-a", "on-demand"), 2.10));
}

#[test]
fn claims_are_annotated_with_the_kinds_of_overlay_among_their_options() {
    let p = pool("default", &[]);
    let price_on_large = priced(
        overlay(
            "price",
            None,
            vec![req(labels::INSTANCE_TYPE, Op::In, &["large"])],
        ),
        "+1",
    );
    let fuse_on_small = with_capacity(
        overlay(
            "fuse",
            None,
            vec![req(labels::INSTANCE_TYPE, Op::In, &["small"])],
        ),
        &[("example.com/fuse", "1")],
    );
    let (_, eval) = run(&[price_on_large, fuse_on_small], &[&p]);
    assert_eq!(
        eval.claim_annotations("default", ["large"]),
        [(PRICE_OVERLAY_APPLIED_ANNOTATION, "true")]
    );
    assert_eq!(
        eval.claim_annotations("default", ["small", "large"]),
        [
            (PRICE_OVERLAY_APPLIED_ANNOTATION, "true"),
            (CAPACITY_OVERLAY_APPLIED_ANNOTATION, "true")
        ]
    );
    assert!(eval.claim_annotations("default", ["medium"]).is_empty());
    assert!(eval.claim_annotations("other", ["large"]).is_empty());
}

/// The cases of upstream's NodeOverlay validation suite for `price` and `priceAdjustment`.
#[test]
fn upstream_price_validation_cases() {
    for ok in [
        "+1%",
        "-1%",
        "-100%",
        "+100.102%",
        "+298%",
        "+43",
        "-43",
        "+34.43",
        "-34.43",
        "-129",
    ] {
        assert!(PriceChange::parse_adjustment(ok).is_some(), "{ok}");
    }
    for bad in ["1%", "1", "1.3", "-100.0%", "-101.1%"] {
        assert!(PriceChange::parse_adjustment(bad).is_none(), "{bad}");
    }
    for bad in [
        "+42",
        ".5",
        "42.",
        "42%",
        "3,14",
        "1e10",
        "0x42",
        "forty-two",
        "42a",
        "42 ",
        " 42",
        "42.0.0",
        "-",
        ".",
        "-.42",
    ] {
        assert!(PriceChange::parse_price(bad).is_none(), "{bad}");
    }
    for ok in ["43", "43.5", "0.0001"] {
        assert!(PriceChange::parse_price(ok).is_some(), "{ok}");
    }
}

/// The requirement cases of upstream's NodeOverlay validation suite.
#[test]
fn upstream_requirement_validation_cases() {
    let valid = |reqs: Vec<Req>| overlay("o", None, reqs).validate().is_ok();
    for key in [
        "test.com.com}",
        "Test.com/test",
        "test/test/test",
        "test/",
        "/test",
    ] {
        assert!(!valid(vec![req(key, Op::Exists, &[])]), "{key}");
    }
    let long = format!("test.com.test/test-{}", "a".repeat(250));
    assert!(!valid(vec![req(&long, Op::Exists, &[])]));
    assert!(!valid(vec![req("karpenter.sh/test", Op::In, &["test"])]));
    for key in [
        "kubernetes.io/test",
        "k8s.io/test",
        "subdomain.kubernetes.io/test",
        "subdomain.k8s.io/test",
        labels::NODEPOOL,
        labels::ZONE,
        labels::INSTANCE_TYPE,
        "test",
    ] {
        let op = if key == "test" { Op::Exists } else { Op::In };
        let values: &[&str] = if key == "test" { &[] } else { &["test"] };
        assert!(valid(vec![req(key, op, values)]), "{key}");
    }
    let zone = labels::ZONE;
    assert!(valid(vec![
        req(zone, Op::In, &["test"]),
        req(zone, Op::Gt, &["1"]),
        req(zone, Op::Lt, &["1"]),
        req(zone, Op::Gte, &["1"]),
        req(zone, Op::Lte, &["1"]),
        req(zone, Op::NotIn, &["1"]),
        req(zone, Op::Exists, &[]),
    ]));
    assert!(!valid(vec![req(zone, Op::Gt, &["-1"])]));
    assert!(!valid(vec![req(zone, Op::Lte, &["one"])]));
}

/// Upstream's "conflicting capacity overlays with multiple overlays": same-weight capacity
/// overlays are checked against the resources of the last one applied to the type only, and
/// equal values conflict too.
#[test]
fn upstream_capacity_conflict_cases() {
    let p = pool("default", &[]);
    let on = |names: &[&str]| vec![req(labels::INSTANCE_TYPE, Op::In, names)];
    let a = with_capacity(
        overlay("conflicting-overlay-1", Some(10), on(&["small", "large"])),
        &[("hugepages-1Gi", "2Gi")],
    );
    let b = with_capacity(
        overlay("good-overlay-1", Some(10), on(&["small"])),
        &[("example.com/fuse", "1")],
    );
    let c = with_capacity(
        overlay("conflicting-overlay-2", Some(10), on(&["small"])),
        &[("hugepages-1Gi", "3Gi")],
    );
    let (_, eval) = run(&[a, b, c], &[&p]);
    let v = eval.verdicts();
    assert!(
        matches!(v["conflicting-overlay-1"], Verdict::Conflict(_)),
        "{v:?}"
    );
    assert_eq!(v["good-overlay-1"], Verdict::Applied);
    assert_eq!(v["conflicting-overlay-2"], Verdict::Applied);

    let same = |name: &str, types: &[&str]| {
        with_capacity(
            overlay(name, Some(10), on(types)),
            &[("example.com/fuse", "54")],
        )
    };
    let (_, eval) = run(
        &[
            same("overlay-a", &["small", "large"]),
            same("overlay-b", &["small"]),
        ],
        &[&p],
    );
    assert!(matches!(eval.verdicts()["overlay-a"], Verdict::Conflict(_)));
    assert_eq!(eval.verdicts()["overlay-b"], Verdict::Applied);
}

#[test]
fn a_published_evaluation_reprices_launches_and_an_unpublished_one_changes_nothing() {
    let published = Published::default();
    // Nothing published (the gate is off): the provider's own prices.
    let raw = published.apply("default", &types()).unwrap();
    assert!(close(price(&raw, "small", "zone-a", "spot"), 0.04));
    let default = pool("default", &[]);
    let (_, evaluation) = run(&[priced(overlay("fee", None, vec![]), "+0.5")], &[&default]);
    let reader = published.clone();
    published.publish(evaluation);
    let overlaid = reader.apply("default", &types()).unwrap();
    assert!(close(price(&overlaid, "small", "zone-a", "spot"), 0.54));
    // A pool the evaluation did not see waits, as upstream's store makes it.
    assert_eq!(
        reader.apply("new", &types()),
        Err(UnevaluatedNodePool("new".into()))
    );
}
