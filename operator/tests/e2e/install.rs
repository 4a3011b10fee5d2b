//! Installation: the CRDs that `karpenter crds` prints and that the chart ships are accepted by
//! the real API server (structural schemas, CEL rules) and served.

use crate::harness::{self, apply_crds};
use std::path::Path;

#[tokio::test]
async fn karpenter_crds_and_the_charts_crds_are_accepted() {
    let Some(cluster) = harness::cluster("install_crds").await else {
        return;
    };
    // `karpenter crds` was applied by the reset; the chart's copies must be accepted too
    // (they are what `helm install` applies).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/karpenter-rs/crds");
    let mut applied = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("chart crds")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("crd file");
        applied.extend(apply_crds(&cluster.client, &text).await);
    }
    applied.sort();
    assert_eq!(
        applied,
        [
            "capacitybuffers.autoscaling.x-k8s.io",
            "ec2nodeclasses.karpenter.k8s.aws",
            "nodeclaims.karpenter.sh",
            "nodeoverlays.karpenter.sh",
            "nodepools.karpenter.sh"
        ]
    );
}
