//! Validation tables, update rules, conditions and conversion to the scheduling model.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_cloudprovider::v1::{
    BudgetNodes, ConditionStatus, ConditionType, NodeClaimSpec, NodePoolSpec, StatusConditions,
    labels,
};
use karpenter_cloudprovider::validation::{cron_error, matches_budget_duration_pattern};
use karpenter_cloudprovider::{NodeClaim, NodePool};
use karpenter_scheduling::Resources;
use serde_json::json;

fn pool(spec: serde_json::Value) -> NodePool {
    let spec: NodePoolSpec = serde_json::from_value(spec).expect("spec parses");
    NodePool::new("test", spec)
}

fn base() -> serde_json::Value {
    json!({
        "template": {
            "spec": {
                "requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
            }
        }
    })
}

fn with_requirement(r: serde_json::Value) -> NodePool {
    let mut s = base();
    s["template"]["spec"]["requirements"] = json!([r]);
    pool(s)
}

#[test]
fn requirement_rules_follow_upstream() {
    // (requirement, Some(path) when invalid)
    let p = "spec.template.spec.requirements[0]";
    let cases = [
        (
            json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}),
            None,
        ),
        (
            json!({"key": "kubernetes.io/arch", "operator": "In"}),
            Some(format!("{p}.values")),
        ),
        // The CRD's CEL only demands values for In: NotIn [] means Exists, and values on
        // Exists/DoesNotExist are ignored, as Karpenter's NewRequirement does.
        (
            json!({"key": "kubernetes.io/arch", "operator": "NotIn"}),
            None,
        ),
        (
            json!({"key": "kubernetes.io/arch", "operator": "Exists"}),
            None,
        ),
        (
            json!({"key": "kubernetes.io/arch", "operator": "DoesNotExist", "values": ["a"]}),
            None,
        ),
        (
            json!({"key": "example.com/cpu", "operator": "Gte", "values": ["4"]}),
            None,
        ),
        (
            json!({"key": "example.com/cpu", "operator": "Lte", "values": ["-1"]}),
            Some(format!("{p}.values")),
        ),
        (
            json!({"key": "example.com/cpu", "operator": "Lt", "values": ["1", "2"]}),
            Some(format!("{p}.values")),
        ),
        (
            json!({"key": "example.com/x", "operator": "In", "values": ["a", "b"], "minValues": 2}),
            None,
        ),
        (
            json!({"key": "example.com/x", "operator": "Exists", "minValues": 51}),
            Some(format!("{p}.minValues")),
        ),
        (
            json!({"key": "example.com/x", "operator": "Exists", "minValues": 0}),
            Some(format!("{p}.minValues")),
        ),
        (
            json!({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}),
            None,
        ),
        (
            json!({"key": "karpenter.sh/nodepool", "operator": "In", "values": ["a"]}),
            Some(format!("{p}.key")),
        ),
        (
            json!({"key": "sub.karpenter.sh/x", "operator": "Exists"}),
            Some(format!("{p}.key")),
        ),
        (
            json!({"key": "kubernetes.io/hostname", "operator": "Exists"}),
            Some(format!("{p}.key")),
        ),
        (
            json!({"key": "Bad_Domain/x", "operator": "Exists"}),
            Some(format!("{p}.key")),
        ),
        (
            json!({"key": "example.com/x", "operator": "In", "values": ["not valid!"]}),
            Some(format!("{p}.values[0]")),
        ),
    ];
    for (req, want) in cases {
        let result = with_requirement(req.clone()).validate();
        match want {
            None => assert!(result.is_ok(), "{req} should be valid: {result:?}"),
            Some(path) => {
                let err = result.expect_err(&format!("{req} should be invalid"));
                assert!(err.has_path(&path), "{req}: want {path}, got {err}");
            }
        }
    }
}

#[test]
fn error_messages_read_like_the_api_server() {
    let err = with_requirement(json!({"key": "kubernetes.io/arch", "operator": "In"}))
        .validate()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "NodePool \"test\" is invalid: spec.template.spec.requirements[0].values: Required value: requirements with operator 'In' must have a value defined"
    );
}

#[test]
fn too_many_requirements_and_budgets() {
    let mut s = base();
    let reqs: Vec<_> = (0..101)
        .map(|i| json!({"key": format!("example.com/k{i}"), "operator": "Exists"}))
        .collect();
    s["template"]["spec"]["requirements"] = json!(reqs);
    s["disruption"] =
        json!({"budgets": (0..51).map(|_| json!({"nodes": "1"})).collect::<Vec<_>>()});
    let err = pool(s).validate().unwrap_err();
    assert!(err.has_path("spec.template.spec.requirements"));
    assert!(err.has_path("spec.disruption.budgets"));
}

#[test]
fn budget_patterns() {
    for (nodes, ok) in [
        ("0", true),
        ("10", true),
        ("10%", true),
        ("100%", true),
        ("0%", true),
        ("101%", false),
        ("1000%", false),
        ("%", false),
        ("-1", false),
        ("10 %", false),
        ("", false),
    ] {
        assert_eq!(BudgetNodes::parse(nodes).is_some(), ok, "{nodes:?}");
    }
    assert_eq!(
        BudgetNodes::parse("10%").unwrap().allowed(15),
        2,
        "percentages round up"
    );
    assert_eq!(BudgetNodes::parse("3").unwrap().allowed(15), 3);
    for (d, ok) in [
        ("1h", true),
        ("30m", true),
        ("1h30m", true),
        ("1h30m0s", true),
        ("10m0s", true),
        ("30s", false),
        ("1h30s", false),
        ("0s", false),
        ("1.5h", false),
    ] {
        assert_eq!(matches_budget_duration_pattern(d), ok, "{d:?}");
    }
    for (c, ok) in [
        ("@daily", true),
        ("@midnight", true),
        ("@annually", true),
        ("0 9 * * 1-5", true),
        ("*/5 * * * mon-fri", true),
        ("0 0 1 jan *", true),
        ("@every 1h", false),
        ("0 0 * *", false),
        ("0 0 0 * * *", false),
        ("61 * * * *", false),
        ("0 24 * * *", false),
    ] {
        assert_eq!(cron_error(c).is_none(), ok, "{c:?}: {:?}", cron_error(c));
    }
}

#[test]
fn update_rules() {
    let old = pool(base());
    let mut new_kind = old.clone();
    new_kind.spec.template.spec.node_class_ref.kind = "OtherNodeClass".into();
    let err = new_kind.validate_update(&old).unwrap_err();
    assert!(
        err.errors
            .iter()
            .any(|e| e.message == "nodeClassRef.kind is immutable")
    );
    let mut new_group = old.clone();
    new_group.spec.template.spec.node_class_ref.group = "other.example.com".into();
    assert!(
        new_group
            .validate_update(&old)
            .unwrap_err()
            .errors
            .iter()
            .any(|e| e.message == "nodeClassRef.group is immutable")
    );
    let mut new_name = old.clone();
    new_name.spec.template.spec.node_class_ref.name = "other".into();
    assert!(
        new_name.validate_update(&old).is_ok(),
        "the name may change"
    );
    let mut static_pool = old.clone();
    static_pool.spec.replicas = Some(2);
    assert!(
        static_pool.validate_update(&old).is_err(),
        "dynamic -> static is forbidden"
    );

    let spec: NodeClaimSpec = serde_json::from_value(json!({
        "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    }))
    .unwrap();
    let claim = NodeClaim::new("c", spec);
    assert!(claim.validate().is_ok());
    let mut same = claim.clone();
    same.status = Some(Default::default());
    assert!(
        karpenter_cloudprovider::validation::validate_node_claim_update(&claim, &same).is_ok(),
        "status may change"
    );
    let mut changed = claim.clone();
    changed.spec.expire_after = karpenter_cloudprovider::NillableDuration::never();
    let err = karpenter_cloudprovider::validation::validate_node_claim_update(&claim, &changed)
        .unwrap_err();
    assert!(err.has_path("spec"));
    assert_eq!(err.errors[0].message, "spec is immutable");
}

#[test]
fn node_claims_may_carry_the_nodepool_requirement() {
    let spec: NodeClaimSpec = serde_json::from_value(json!({
        "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    }))
    .unwrap();
    assert!(NodeClaim::new("c", spec).validate().is_ok());
}

fn time(s: &str) -> Time {
    serde_json::from_value(json!(s)).unwrap()
}

#[test]
fn conditions_roll_up_into_ready() {
    let spec: NodeClaimSpec = serde_json::from_value(json!({
        "requirements": [],
        "nodeClassRef": {"group": "g", "kind": "K", "name": "n"}
    }))
    .unwrap();
    let mut claim = NodeClaim::new("c", spec);
    let t0 = time("2024-01-01T00:00:00Z");
    let t1 = time("2024-01-01T00:01:00Z");
    assert!(claim.set_true(ConditionType::Launched.as_str(), t0.clone()));
    assert_eq!(
        claim.get_condition(ConditionType::Ready).unwrap().status,
        ConditionStatus::Unknown
    );
    claim.set_true("Registered", t0.clone());
    assert!(
        !claim.set_true("Registered", t1.clone()),
        "no change, no update"
    );
    claim.set_true("Initialized", t1.clone());
    assert!(claim.is(ConditionType::Ready));
    assert_eq!(
        claim
            .get_condition(ConditionType::Ready)
            .unwrap()
            .last_transition_time,
        t1
    );
    assert_eq!(
        claim
            .get_condition(ConditionType::Launched)
            .unwrap()
            .last_transition_time,
        t0,
        "kept while status is unchanged"
    );
    claim.set_false("Initialized", "NodeNotReady", "node not ready", t1.clone());
    assert!(claim.is_false("Ready"));
    assert!(
        claim
            .condition("Ready")
            .unwrap()
            .message
            .contains("Initialized")
    );
    assert!(!claim.clear_condition("Drifted"));
    claim.set_true("Drifted", t1.clone());
    assert!(claim.is(ConditionType::Drifted));
    assert!(claim.clear_condition("Drifted"));
    assert_eq!(
        ConditionType::parse("VolumesDetached"),
        Some(ConditionType::VolumesDetached)
    );
}

#[test]
fn converts_to_the_scheduling_model() {
    let mut s = base();
    s["weight"] = json!(10);
    s["limits"] = json!({"cpu": 100, "memory": "400Gi"});
    s["template"]["metadata"] = json!({"labels": {"team": "a"}, "annotations": {"note": "x"}});
    s["template"]["spec"]["taints"] =
        json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]);
    s["template"]["spec"]["startupTaints"] = json!([{"key": "cni", "effect": "NoExecute"}]);
    s["template"]["spec"]["requirements"] = json!([
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64", "amd64"], "minValues": 2},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["3"]}
    ]);
    let p = pool(s);
    let usage = Resources::parse(&[("cpu", "4")]).unwrap();
    let m = p.to_model(Vec::new(), usage.clone()).expect("converts");
    assert_eq!(m.name, "test");
    assert_eq!(m.weight, 10);
    assert_eq!(m.labels["team"], "a");
    assert_eq!(m.annotations["note"], "x");
    assert_eq!(m.taints.len(), 1);
    assert_eq!(m.taints[0].key, "dedicated");
    assert_eq!(
        m.startup_taints[0].effect,
        karpenter_scheduling::taints::TaintEffect::NoExecute
    );
    assert_eq!(m.limits["cpu"].milli_value(), 100_000);
    assert_eq!(m.limits["memory"].value(), 400 * 1024 * 1024 * 1024);
    assert_eq!(m.usage, usage);
    let arch = m.requirements.get(labels::ARCH).expect("arch requirement");
    assert!(arch.has("arm64") && arch.has("amd64") && !arch.has("s390x"));
    assert_eq!(arch.min_values(), Some(2));
    let cpu = m
        .requirements
        .get("karpenter.k8s.aws/instance-cpu")
        .unwrap();
    assert!(cpu.has("4") && !cpu.has("3"));
    assert!(
        !m.requirements.has("team"),
        "labels are not folded into requirements"
    );

    let invalid = with_requirement(json!({"key": "kubernetes.io/hostname", "operator": "Exists"}));
    assert!(matches!(
        invalid.to_model(Vec::new(), Resources::default()),
        Err(karpenter_cloudprovider::ConversionError::Invalid(_))
    ));
}

#[test]
fn well_known_constants() {
    assert_eq!(labels::TERMINATION_FINALIZER, "karpenter.sh/termination");
    assert_eq!(
        labels::disrupted_no_schedule_taint().to_string(),
        "karpenter.sh/disrupted:NoSchedule"
    );
    assert_eq!(
        labels::unregistered_no_execute_taint().to_string(),
        "karpenter.sh/unregistered:NoExecute"
    );
    assert_eq!(
        labels::NODEPOOL_HASH_ANNOTATION,
        "karpenter.sh/nodepool-hash"
    );
    assert_eq!(
        labels::NODEPOOL_HASH_VERSION_ANNOTATION,
        "karpenter.sh/nodepool-hash-version"
    );
    assert_eq!(
        labels::DO_NOT_DISRUPT_ANNOTATION,
        "karpenter.sh/do-not-disrupt"
    );
    assert_eq!(
        labels::node_class_label_key("karpenter.k8s.aws", "EC2NodeClass"),
        "karpenter.k8s.aws/ec2nodeclass"
    );
}

#[test]
fn lenient_upstream_forms_are_normalised_for_the_solver() {
    use karpenter_scheduling::requirements::Operator;
    let mut s = base();
    s["template"]["spec"]["requirements"] = json!([
        {"key": "kubernetes.io/arch", "operator": "NotIn"},
        {"key": "example.com/team", "operator": "DoesNotExist", "values": ["x"]},
    ]);
    let p = pool(s);
    p.validate().expect("the CRD accepts both forms");
    let m = p
        .to_model(Vec::new(), Resources::default())
        .expect("converts");
    let arch = m.requirements.get("kubernetes.io/arch").unwrap();
    assert_eq!(arch.operator(), Operator::Exists);
    assert!(arch.has("arm64") && arch.has("amd64"));
    let team = m.requirements.get("example.com/team").unwrap();
    assert_eq!(team.operator(), Operator::DoesNotExist);
}

#[test]
fn consolidation_policies_spell_as_the_api_and_only_balanced_is_scored() {
    use karpenter_cloudprovider::v1::{BALANCED_K, ConsolidationPolicy};
    for policy in [
        ConsolidationPolicy::WhenEmpty,
        ConsolidationPolicy::WhenEmptyOrUnderutilized,
        ConsolidationPolicy::Balanced,
    ] {
        assert_eq!(
            serde_json::to_value(policy).unwrap(),
            json!(policy.as_str())
        );
        assert_eq!(
            policy.is_balanced(),
            policy == ConsolidationPolicy::Balanced
        );
    }
    let mut s = base();
    s["disruption"] = json!({"consolidationPolicy": "Balanced"});
    assert!(pool(s).spec.disruption.consolidation_policy.is_balanced());
    assert_eq!(BALANCED_K, 2);
}
