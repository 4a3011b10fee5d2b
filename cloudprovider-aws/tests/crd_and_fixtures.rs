//! The committed CRD matches the generated one, and real manifests parse and validate.

use karpenter_cloudprovider_aws::crd::ec2_node_class_crd_yaml;
use karpenter_cloudprovider_aws::nodeclass::{EC2NodeClass, from_yaml};
use std::path::PathBuf;

fn crd_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/karpenter-rs/crds/karpenter.k8s.aws_ec2nodeclasses.yaml")
}

/// Fails when the committed CRD is stale; `UPDATE_CRDS=1 cargo test` rewrites it.
#[test]
fn committed_crd_is_up_to_date() {
    let generated = ec2_node_class_crd_yaml();
    let path = crd_path();
    if std::env::var("UPDATE_CRDS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write CRD");
        return;
    }
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run UPDATE_CRDS=1 cargo test)", path.display()));
    assert!(
        committed == generated,
        "{} is stale: run UPDATE_CRDS=1 cargo test -p karpenter-cloudprovider-aws",
        path.display()
    );
}

fn documents(text: &str) -> Vec<&str> {
    text.split("\n---\n")
        .filter(|d| d.contains("kind:"))
        .collect()
}

#[test]
fn getting_started_manifests_parse_and_validate() {
    let text = include_str!("fixtures/getting-started.yaml");
    let docs = documents(text);
    assert_eq!(docs.len(), 2);
    let pool: karpenter_cloudprovider::NodePool =
        serde_saphyr::from_str(docs[0]).expect("NodePool parses");
    assert_eq!(pool.spec.template.spec.node_class_ref.kind, "EC2NodeClass");
    let nc: EC2NodeClass = from_yaml(docs[1]).expect("EC2NodeClass parses");
    nc.validate().expect("valid");
    assert_eq!(nc.ami_family(), "AL2023");
    assert_eq!(
        nc.spec.role.as_deref(),
        Some("KarpenterNodeRole-my-cluster")
    );
    assert_eq!(nc.spec.metadata_options.http_tokens, "required");
}

#[test]
fn full_reference_manifest_parses_validates_and_round_trips() {
    let nc = from_yaml(include_str!("fixtures/full-ec2nodeclass.yaml")).expect("parses");
    nc.validate().expect("valid");
    let k = nc.spec.kubelet.as_ref().expect("kubelet");
    assert!(k.validate().is_empty(), "{:?}", k.validate());
    let k = k.parse().expect("the managed fields");
    assert_eq!(
        (k.max_pods, k.pods_per_core),
        (
            Some(karpenter_cloudprovider_aws::kubelet::MaxPods::Count(20)),
            Some(2)
        )
    );
    assert_eq!(k.eviction_soft_grace_period["nodefs.available"], "1m30s");
    assert_eq!(
        nc.spec.kubelet.as_ref().unwrap().unmanaged_fields(),
        ["containerLogMaxSize", "shutdownGracePeriod"]
    );
    assert!(!nc.enclaves_enabled());
    assert!(nc.ignored_fields().is_empty(), "{:?}", nc.ignored_fields());
    assert_eq!(nc.root_volume_bytes(), Some(100 * 1024 * 1024 * 1024));
    assert_eq!(nc.spec.associate_public_ip_address, Some(true));
    assert_eq!(nc.spec.ami_selector_terms.len(), 4);
    let json = serde_json::to_string(&nc).expect("serialises");
    let back: EC2NodeClass = serde_json::from_str(&json).expect("parses back");
    assert_eq!(back.spec, nc.spec);
    assert_eq!(back.metadata, nc.metadata);
}
