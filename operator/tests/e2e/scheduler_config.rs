//! `SCHEDULER_CONFIG` on the real control plane: with a default zonal spread, the pods of a
//! Deployment that declares no spread constraint (selected by a Service and their ReplicaSet)
//! get one NodeClaim per zone. The controller runs with the chart's RBAC, so the Service,
//! ReplicaSet, StatefulSet and ReplicationController watches the setting adds are granted.

use crate::harness::{self, wait_for};
use crate::provisioning::{deployment, node_pool};
use crate::rbac::{apply_chart_rbac, assert_nothing_forbidden};
use kube::api::ListParams;
use std::collections::BTreeSet;
use std::time::Duration;

const ZONE: &str = "topology.kubernetes.io/zone";

#[tokio::test]
async fn default_spread_constraints_put_a_deployment_in_every_zone() {
    let Some(cluster) = harness::cluster("scheduler_config").await else {
        return;
    };
    let (account, _) = apply_chart_rbac(&cluster, &[]).await;
    let config = cluster
        .service_account_kubeconfig(harness::SYSTEM_NAMESPACE, &account)
        .await;
    let zones = ["us-east-1a", "us-east-1b", "us-east-1c"];
    let pool = node_pool("default", "").replace(
        "        - {key: kubernetes.io/arch, operator: In, values: [amd64]}",
        &format!(
            "        - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}\n        \
             - {{key: {ZONE}, operator: In, values: [{}]}}",
            zones.join(", ")
        ),
    );
    cluster.apply(&pool).await;
    cluster
        .apply("apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80}]\n")
        .await;
    let scheduler_config = format!(
        "podTopologySpread: {{defaultConstraints: [{{maxSkew: 1, topologyKey: {ZONE}, \
         whenUnsatisfiable: DoNotSchedule}}]}}"
    );
    let mut controller = cluster.controller_with(
        "karpenter-spread",
        &["--scheduler-config", &scheduler_config],
        &config,
    );
    cluster
        .apply(&deployment("web", 3, "100m", "default"))
        .await;
    let claims = cluster.node_claims();
    let claim_zones = wait_for(
        "three NodeClaims, one per zone",
        Duration::from_secs(90),
        || {
            let claims = claims.clone();
            async move {
                let list = claims.list(&ListParams::default()).await.ok()?;
                let zones: BTreeSet<String> = list
                    .items
                    .iter()
                    .filter_map(|c| c.metadata.labels.as_ref()?.get(ZONE).cloned())
                    .collect();
                (list.items.len() == 3 && zones.len() == 3).then_some(zones)
            }
        },
    )
    .await;
    assert_eq!(
        claim_zones,
        zones.iter().map(|z| (*z).to_owned()).collect(),
        "{}",
        controller.log_text()
    );
    let log = controller.log_text();
    assert!(
        log.contains("scheduler-config is set"),
        "the defaults are named at start-up: {log}"
    );
    controller.assert_alive();
    assert_nothing_forbidden(&cluster, &account);
}
