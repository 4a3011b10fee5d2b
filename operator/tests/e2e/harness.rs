//! The end-to-end harness: a client for the control plane that `scripts/control-plane.sh`
//! started, a clean state per test, manifests applied the way `kubectl apply --server-side`
//! does, and `karpenter controller` processes built the way the README builds the binary.
//!
//! Environment (set by `scripts/test.sh`):
//! - `KARPENTER_E2E_KUBECONFIG`: the admin kubeconfig. Without it every test is skipped
//!   locally and fails under `CI=true`, so CI cannot pass without a real API server.
//! - `KARPENTER_E2E_BIN`: the `karpenter` binary under test (default `target/release/karpenter`,
//!   what `cargo build --release` at the workspace root produces).
//! - `KARPENTER_E2E_STATE`: the control plane's state directory (audit log, certificates).

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_cloudprovider::{NodeClaim, NodePool};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::{Client, Config, ResourceExt as _};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The namespace the controller runs in (its Lease and events).
pub const SYSTEM_NAMESPACE: &str = "karpenter";
/// Label on every namespace a test creates, so the next test can remove them.
pub const TEST_LABEL: &str = "karpenter-rs.sh/e2e";

/// One control plane, so one test at a time (each test has its own runtime, so the lock is
/// an async one that any runtime can wait on; it does not poison when a test fails).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A test's hold on the control plane, from a clean state.
pub struct Cluster {
    /// Admin client.
    pub client: Client,
    /// Admin kubeconfig path.
    pub kubeconfig: PathBuf,
    /// The test's namespace (created clean).
    pub namespace: String,
    /// Where this test's controller logs go.
    pub log_dir: PathBuf,
    /// Length of the audit log when the test started (its events come after).
    audit_start: usize,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Installs the process-wide TLS provider (the test binary links both ring and, with the
/// `aws` feature, aws-lc-rs, as the product binary does).
fn tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The control plane for `test`, reset to a clean state; `None` (test skipped) when no control
/// plane is configured and this is not CI.
pub async fn cluster(test: &str) -> Option<Cluster> {
    tls();
    let serial = SERIAL.lock().await;
    let Some(kubeconfig) = std::env::var_os("KARPENTER_E2E_KUBECONFIG").map(PathBuf::from) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but KARPENTER_E2E_KUBECONFIG is not set: the end-to-end suite needs the \
             control plane that scripts/test.sh starts (scripts/control-plane.sh)"
        );
        eprintln!(
            "skipping {test}: no control plane (run scripts/test.sh, or see docs/operator.md)"
        );
        return None;
    };
    let client = client_for(&kubeconfig).await;
    let namespace = format!("e2e-{}", test.replace('_', "-"));
    let log_dir = workspace().join("target/e2e").join(test);
    let _ = std::fs::remove_dir_all(&log_dir);
    std::fs::create_dir_all(&log_dir).expect("log dir");
    let mut cluster = Cluster {
        client,
        kubeconfig,
        namespace,
        log_dir,
        audit_start: 0,
        _serial: serial,
    };
    cluster.reset().await;
    cluster.audit_start = audit_log().map_or(0, |t| t.len());
    Some(cluster)
}

/// A client from a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> Client {
    tls();
    let kc = Kubeconfig::read_from(kubeconfig).expect("kubeconfig readable");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig valid");
    Client::try_from(config).expect("client")
}

/// Polls `check` every 250 ms until it returns `Some`, or panics after `timeout` naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    match poll_until(timeout, check).await {
        Some(v) => v,
        None => panic!("timed out after {timeout:?} waiting for {what}"),
    }
}

/// Waits up to 60 s for a Warning event with `reason` on the `kind` object `name` with `uid`
/// and returns its note. Events outlive their objects (an hour by default), so an earlier
/// test's (or run's) event on an object of the same name is told apart by the UID.
pub async fn wait_for_warning(
    client: &Client,
    kind: &str,
    name: &str,
    uid: Option<String>,
    reason: &str,
) -> String {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let what = format!("a {reason} Warning event on {kind} {name}");
    wait_for(&what, Duration::from_secs(60), || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find_map(|e| {
            let on_object = e.regarding.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name) && r.uid == uid
            });
            (on_object
                && e.reason.as_deref() == Some(reason)
                && e.type_.as_deref() == Some("Warning"))
            .then(|| e.note.unwrap_or_default())
        })
    })
    .await
}

/// Polls `check` every 250 ms until it returns `Some`; `None` once `timeout` has passed.
pub async fn poll_until<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if start.elapsed() >= timeout {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Appends one measurement to `target/e2e/timings.tsv` and prints it.
pub fn record(test: &str, what: &str, value: f64, unit: &str) {
    use std::io::Write as _;
    eprintln!("e2e timing: {test}: {what} = {value:.1} {unit}");
    let path = workspace().join("target/e2e/timings.tsv");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{test}\t{what}\t{value:.2}\t{unit}");
    }
}

impl Cluster {
    /// NodePools.
    pub fn node_pools(&self) -> Api<NodePool> {
        Api::all(self.client.clone())
    }
    /// NodeClaims.
    pub fn node_claims(&self) -> Api<NodeClaim> {
        Api::all(self.client.clone())
    }
    /// Nodes.
    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }
    /// Pods of the test namespace.
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Removes what earlier tests left: controllers are gone (their handles were dropped);
    /// NodePools, NodeClaims, fake Nodes, test namespaces and the leader Lease are deleted,
    /// finalizers stripped, and the CRDs and the test namespace installed fresh.
    pub async fn reset(&self) {
        let client = &self.client;
        self.install_crds().await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let test_namespaces = namespaces
            .list(&ListParams::default().labels(TEST_LABEL))
            .await
            .expect("list namespaces");
        for ns in &test_namespaces {
            // Bound pods would wait for a kubelet; force them out so the namespace can go.
            let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name_any());
            let _ = pods
                .delete_collection(
                    &DeleteParams::default().grace_period(0),
                    &ListParams::default(),
                )
                .await;
            let _ = namespaces
                .delete(&ns.name_any(), &DeleteParams::default())
                .await;
        }
        let pools = self.node_pools();
        let _ = pools
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
        let overlays: Api<karpenter_cloudprovider::NodeOverlay> = Api::all(client.clone());
        let _ = overlays
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
        // EC2NodeClasses (the migration tests apply one when the CRD is installed); nothing
        // puts a finalizer on them with the fake provider. A missing CRD answers 404.
        let gvk = GroupVersionKind::gvk("karpenter.k8s.aws", "v1", "EC2NodeClass");
        let classes: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &kube::discovery::ApiResource::from_gvk_with_plural(&gvk, "ec2nodeclasses"),
        );
        let _ = classes
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
        let claims = self.node_claims();
        for claim in claims
            .list(&ListParams::default())
            .await
            .expect("list nodeclaims")
        {
            strip_finalizers(&claims, &claim.name_any()).await;
            let _ = claims
                .delete(&claim.name_any(), &DeleteParams::default())
                .await;
        }
        let nodes = self.nodes();
        for node in nodes
            .list(&ListParams::default())
            .await
            .expect("list nodes")
        {
            strip_finalizers(&nodes, &node.name_any()).await;
            let _ = nodes
                .delete(&node.name_any(), &DeleteParams::default())
                .await;
        }
        let by_label = ListParams::default().labels(TEST_LABEL);
        let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> =
            Api::all(client.clone());
        let _ = bindings
            .delete_collection(&DeleteParams::default(), &by_label)
            .await;
        let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
        let _ = roles
            .delete_collection(&DeleteParams::default(), &by_label)
            .await;
        let leases: Api<Lease> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
        let _ = leases
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
        wait_for("a clean cluster", Duration::from_secs(120), || async {
            let left = namespaces
                .list(&ListParams::default().labels(TEST_LABEL))
                .await
                .ok()?
                .items
                .len()
                + pools.list(&ListParams::default()).await.ok()?.items.len()
                + claims.list(&ListParams::default()).await.ok()?.items.len()
                + nodes.list(&ListParams::default()).await.ok()?.items.len();
            (left == 0).then_some(())
        })
        .await;
        self.apply(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {SYSTEM_NAMESPACE}\n"
        ))
        .await;
        self.apply(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {}\n  labels:\n    {TEST_LABEL}: \"true\"\n",
            self.namespace
        ))
        .await;
        // Pods are admitted only once the namespace's default ServiceAccount exists.
        let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(client.clone(), &self.namespace);
        wait_for(
            "the default ServiceAccount",
            Duration::from_secs(60),
            || async { sas.get_opt("default").await.ok().flatten().map(|_| ()) },
        )
        .await;
    }

    /// Applies the CRDs `karpenter crds` prints and waits until the API server serves them.
    pub async fn install_crds(&self) {
        let out = Command::new(binary())
            .arg("crds")
            .output()
            .expect("run karpenter crds");
        assert!(out.status.success(), "karpenter crds failed");
        let crds = apply_crds(&self.client, &String::from_utf8(out.stdout).expect("utf-8")).await;
        assert!(
            crds.len() >= 2,
            "karpenter crds printed {} CRDs",
            crds.len()
        );
    }

    /// Applies every document of `yaml` by server-side apply (as `kubectl apply
    /// --server-side`), in the test namespace when a namespaced object names none.
    pub async fn apply(&self, yaml: &str) {
        for doc in documents(yaml) {
            if let Err(e) = apply_one(&self.client, &self.namespace, doc).await {
                panic!("{e}");
            }
        }
    }

    /// Applies every document of `yaml` as [`apply`](Self::apply) does, stopping at the
    /// first the API server refuses, with its error.
    pub async fn try_apply(&self, yaml: &str) -> Result<(), String> {
        for doc in documents(yaml) {
            apply_one(&self.client, &self.namespace, doc).await?;
        }
        Ok(())
    }

    /// Starts `karpenter controller` with the fake provider and `extra` arguments.
    pub fn controller(&self, name: &str, extra: &[&str]) -> Controller {
        self.controller_with(name, extra, &self.kubeconfig)
    }

    /// Starts `karpenter controller` with the fake provider, `extra` arguments and the
    /// credentials of `kubeconfig`.
    pub fn controller_with(&self, name: &str, extra: &[&str], kubeconfig: &Path) -> Controller {
        self.controller_from(&binary(), name, extra, kubeconfig)
    }

    /// Starts `karpenter controller` from the binary at `bin`.
    pub fn controller_from(
        &self,
        bin: &Path,
        name: &str,
        extra: &[&str],
        kubeconfig: &Path,
    ) -> Controller {
        let metrics = free_port();
        let health = free_port();
        let log = self.log_dir.join(format!("{name}.log"));
        let file = File::create(&log).expect("controller log");
        let mut args: Vec<String> = [
            "controller",
            "--cloud-provider",
            "fake",
            "--cluster-name",
            "e2e",
            "--log-format",
            "text",
            "--system-namespace",
            SYSTEM_NAMESPACE,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend([
            "--metrics-port".into(),
            metrics.to_string(),
            "--health-probe-port".into(),
            health.to_string(),
        ]);
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let child = Command::new(bin)
            .args(&args)
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", name)
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::from(file.try_clone().expect("log handle")))
            .stderr(Stdio::from(file))
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        Controller {
            child,
            name: name.to_owned(),
            log,
            metrics_port: metrics,
            health_port: health,
        }
    }

    /// Pods of the test namespace with label `app=<app>`.
    pub async fn app_pods(&self, app: &str) -> Vec<Pod> {
        self.pods()
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .expect("list pods")
            .items
    }

    /// Waits until exactly `n` pods of `app` are Running and Ready, and returns them.
    /// On a timeout the panic describes the pods, Nodes and NodeClaims as they are then.
    pub async fn wait_running(&self, app: &str, n: usize, timeout: Duration) -> Vec<Pod> {
        let what = format!("{n} running pod(s) of {app}");
        self.wait_described(&what, timeout, || async {
            let pods = self.app_pods(app).await;
            let live: Vec<Pod> = pods
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            (live.len() == n && live.iter().all(running_ready)).then_some(live)
        })
        .await
    }

    /// [`wait_for`], whose panic on a timeout also carries [`describe`](Self::describe).
    async fn wait_described<T, F, Fut>(&self, what: &str, timeout: Duration, check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        match poll_until(timeout, check).await {
            Some(v) => v,
            None => panic!(
                "timed out after {timeout:?} waiting for {what}\n{}",
                self.describe().await
            ),
        }
    }

    /// The test's pods, every Node and every NodeClaim with their conditions, one a line:
    /// what a failed wait needs to say why it waited in vain.
    pub async fn describe(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for pod in listed(&self.pods()).await {
            let value = serde_json::to_value(&pod).unwrap_or_default();
            let _ = writeln!(
                out,
                "pod {} phase={} node={:?} deleting={} {}",
                pod.name_any(),
                value["status"]["phase"].as_str().unwrap_or_default(),
                value["spec"]["nodeName"].as_str().unwrap_or_default(),
                pod.metadata.deletion_timestamp.is_some(),
                conditions(&value)
            );
        }
        for node in listed(&self.nodes()).await {
            let value = serde_json::to_value(&node).unwrap_or_default();
            let taints: Vec<String> = node
                .spec
                .iter()
                .flat_map(|s| s.taints.iter().flatten())
                .map(|t| format!("{}:{}", t.key, t.effect))
                .collect();
            let _ = writeln!(
                out,
                "node {} unschedulable={} taints={taints:?} {}",
                node.name_any(),
                value["spec"]["unschedulable"].as_bool().unwrap_or(false),
                conditions(&value)
            );
        }
        for claim in listed(&self.node_claims()).await {
            let value = serde_json::to_value(&claim).unwrap_or_default();
            let _ = writeln!(
                out,
                "nodeclaim {} node={:?} {}",
                claim.name_any(),
                value["status"]["nodeName"].as_str().unwrap_or_default(),
                conditions(&value)
            );
        }
        // What the kube-scheduler said about this test's pods, if it said anything.
        let scheduler = std::env::var_os("KARPENTER_E2E_STATE")
            .and_then(|dir| {
                std::fs::read_to_string(Path::new(&dir).join("kube-scheduler.log")).ok()
            })
            .unwrap_or_default();
        let lines: Vec<String> = scheduler
            .lines()
            .filter(|l| l.contains(&self.namespace))
            .map(|l| l.chars().take(400).collect())
            .collect();
        let _ = writeln!(
            out,
            "kube-scheduler on {} (last 20 lines):\n{}",
            self.namespace,
            lines[lines.len().saturating_sub(20)..].join("\n")
        );
        out
    }

    /// Waits until `n` pods of `app` exist and the kube-scheduler has marked every one
    /// `PodScheduled=False` with reason `Unschedulable`, the signal Karpenter batches on.
    pub async fn wait_unschedulable(&self, app: &str, n: usize, timeout: Duration) {
        wait_for(
            &format!("{n} unschedulable pod(s) of {app}"),
            timeout,
            || async {
                let pods = self.app_pods(app).await;
                (pods.len() == n && pods.iter().all(unschedulable)).then_some(())
            },
        )
        .await
    }

    /// Scales Deployment `name` in the test namespace.
    pub async fn scale(&self, name: &str, replicas: i32) {
        let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
            Api::namespaced(self.client.clone(), &self.namespace);
        deployments
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}})),
            )
            .await
            .expect("scale deployment");
    }

    /// Every NodeClaim and fake Node is gone and no finalizer is left on anything.
    pub async fn wait_no_nodes(&self, timeout: Duration) {
        self.wait_described("no NodeClaims and no Nodes", timeout, || async {
            let claims = self.node_claims().list(&ListParams::default()).await.ok()?;
            let nodes = self.nodes().list(&ListParams::default()).await.ok()?;
            (claims.items.is_empty() && nodes.items.is_empty()).then_some(())
        })
        .await;
    }

    /// The audit log's events (JSON lines) since this test started.
    pub fn audit_events(&self) -> Vec<serde_json::Value> {
        let text = audit_log().unwrap_or_default();
        text.get(self.audit_start..)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// Every object `api` lists; none when the list fails (for diagnostics only).
async fn listed<K>(api: &Api<K>) -> Vec<K>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// An object's `status.conditions` as `Type=Status(Reason)` words.
fn conditions(object: &serde_json::Value) -> String {
    let list: &[serde_json::Value] = object["status"]["conditions"]
        .as_array()
        .map_or(&[], Vec::as_slice);
    list.iter()
        .map(|c| {
            let field = |k: &str| c[k].as_str().unwrap_or_default();
            let reason = field("reason");
            let reason = if reason.is_empty() {
                String::new()
            } else {
                format!("({reason})")
            };
            format!("{}={}{reason}", field("type"), field("status"))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The control plane's audit log (one JSON event a line).
fn audit_log() -> Option<String> {
    let dir = std::env::var_os("KARPENTER_E2E_STATE")?;
    std::fs::read_to_string(Path::new(&dir).join("audit.log")).ok()
}

/// Whether `pod` is Running with `Ready=True`.
pub fn running_ready(pod: &Pod) -> bool {
    let Some(status) = &pod.status else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Whether the kube-scheduler has given up on `pod` for now (`PodScheduled=False`,
/// reason `Unschedulable`).
pub fn unschedulable(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
}

/// Whether NodeClaim `claim` has condition `type_` True.
pub fn claim_condition(claim: &NodeClaim, type_: &str) -> bool {
    let v = serde_json::to_value(claim).unwrap_or_default();
    v.pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == "True")
}

async fn strip_finalizers<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let _ = api
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await;
}

/// Splits a multi-document YAML text into parsed documents (comments and empty ones dropped).
pub fn documents(yaml: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for doc in yaml.split("\n---") {
        let doc = doc.trim_start_matches("---");
        if doc.lines().all(|l| {
            let l = l.trim();
            l.is_empty() || l.starts_with('#')
        }) {
            continue;
        }
        let v: serde_json::Value =
            serde_saphyr::from_str(doc).unwrap_or_else(|e| panic!("invalid YAML: {e}\n{doc}"));
        out.push(v);
    }
    out
}

/// Applies CRDs from YAML and waits until each is Established; returns their names.
pub async fn apply_crds(client: &Client, yaml: &str) -> Vec<String> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for doc in documents(yaml) {
        let crd: CustomResourceDefinition =
            serde_json::from_value(doc).expect("a CustomResourceDefinition");
        let name = crd.name_any();
        api.patch(
            &name,
            &PatchParams::apply("karpenter-e2e").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("apply CRD {name}: {e}"));
        names.push(name);
    }
    for name in &names {
        wait_for(
            &format!("CRD {name} Established"),
            Duration::from_secs(60),
            || async {
                let crd = api.get(name).await.ok()?;
                crd.status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                    .then_some(())
            },
        )
        .await;
    }
    names
}

async fn apply_one(
    client: &Client,
    default_ns: &str,
    doc: serde_json::Value,
) -> Result<(), String> {
    let api_version = doc["apiVersion"].as_str().expect("apiVersion").to_owned();
    let kind = doc["kind"].as_str().expect("kind").to_owned();
    let (group, version) = api_version
        .rsplit_once('/')
        .map_or((String::new(), api_version.clone()), |(g, v)| {
            (g.to_owned(), v.to_owned())
        });
    let gvk = GroupVersionKind::gvk(&group, &version, &kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("discover {api_version} {kind}: {e}"));
    let mut obj: DynamicObject = serde_json::from_value(doc).expect("object");
    let name = obj.name_any();
    let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
        let ns = obj
            .metadata
            .namespace
            .get_or_insert_with(|| default_ns.to_owned())
            .clone();
        Api::namespaced_with(client.clone(), &ns, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    api.patch(
        &name,
        &PatchParams::apply("karpenter-e2e").force(),
        &Patch::Apply(&obj),
    )
    .await
    .map(|_| ())
    .map_err(|e| format!("apply {kind} {name}: {e}"))
}

/// The binary under test.
pub fn binary() -> PathBuf {
    let path = std::env::var_os("KARPENTER_E2E_BIN").map_or_else(
        || workspace().join("target/release/karpenter"),
        PathBuf::from,
    );
    assert!(
        path.exists(),
        "{} is missing: build it as the README does (`cargo build --release`), or let \
         scripts/test.sh do it",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A running `karpenter controller`; killed when dropped.
pub struct Controller {
    child: Child,
    /// Its name (POD_NAME, hence its leader-election identity).
    pub name: String,
    /// Its log file.
    pub log: PathBuf,
    /// Its metrics port.
    pub metrics_port: u16,
    /// Its health-probe port.
    pub health_port: u16,
}

impl Controller {
    /// Sends `signal` (`TERM`, `KILL`, …).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} {}", self.name);
    }

    /// The exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Waits up to `timeout` for the process to exit.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// Everything it has logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log's lines without terminal colours, each with its timestamp.
    pub fn log_lines(&self) -> Vec<(jiff::Timestamp, String)> {
        let text = self.log_text();
        text.lines()
            .map(strip_ansi)
            .filter_map(|l| {
                let (stamp, rest) = l.split_once(' ')?;
                Some((stamp.parse().ok()?, rest.trim().to_owned()))
            })
            .collect()
    }

    /// Fails the test with the log if the process exited.
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.exited() {
            panic!(
                "controller {} exited with {status}; log:\n{}",
                self.name,
                tail(&self.log_text(), 60)
            );
        }
    }

    /// One Prometheus metric family's samples, as text lines.
    pub async fn metrics(&self) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.metrics_port);
        http_get(&url).await.unwrap_or_default()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failing test's output is all CI keeps; the log file goes with the clone.
        if std::thread::panicking() {
            eprintln!(
                "controller {} log (last 120 lines):\n{}",
                self.name,
                tail(
                    &self
                        .log_text()
                        .lines()
                        .map(strip_ansi)
                        .collect::<Vec<_>>()
                        .join("\n"),
                    120
                )
            );
        }
    }
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A plain HTTP/1.1 GET on loopback (the controller's metrics and probes).
pub async fn http_get(url: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut stream = tokio::net::TcpStream::connect(host).await.ok()?;
    stream
        .write_all(
            format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .ok()?;
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// Watches pods of the test namespace with label `app=<app>` until `stop` resolves, and
/// returns the smallest number of Running+Ready pods seen after any event (call it once the
/// workload is fully up).
pub async fn min_ready_while<F>(cluster: &Cluster, app: &str, stop: F) -> usize
where
    F: std::future::Future<Output = ()>,
{
    use kube::runtime::{WatchStreamExt as _, watcher};
    let api = cluster.pods();
    let stream = watcher(
        api,
        watcher::Config::default().labels(&format!("app={app}")),
    )
    .default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut stop = std::pin::pin!(stop);
    let mut state: std::collections::BTreeMap<String, bool> = Default::default();
    let mut min = usize::MAX;
    // The initial list arrives one pod at a time: count only once it is complete.
    let mut listed = false;
    loop {
        tokio::select! {
            () = &mut stop => break,
            ev = stream.next() => {
                match ev {
                    Some(Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod))) => {
                        let ready = pod.metadata.deletion_timestamp.is_none() && running_ready(&pod);
                        state.insert(pod.name_any(), ready);
                    }
                    Some(Ok(watcher::Event::Delete(pod))) => {
                        state.remove(&pod.name_any());
                    }
                    Some(Ok(watcher::Event::Init)) => {
                        listed = false;
                        state.clear();
                        continue;
                    }
                    Some(Ok(watcher::Event::InitDone)) => listed = true,
                    Some(Err(_)) => continue,
                    None => break,
                }
                if listed {
                    min = min.min(state.values().filter(|r| **r).count());
                }
            }
        }
    }
    min
}

/// Whether `node` carries the `karpenter.sh/disrupted` taint.
pub fn disrupted(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == "karpenter.sh/disrupted"))
}

impl Cluster {
    /// The leader-election Lease's holder, if any.
    pub async fn lease_holder(&self) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), SYSTEM_NAMESPACE);
        leases
            .get_opt("karpenter-leader-election")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty())
    }

    /// A kubeconfig for ServiceAccount `namespace/name` with a fresh token (TokenRequest), so
    /// a controller runs with exactly that account's RBAC and shows up under its own name in
    /// the audit log.
    pub async fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> PathBuf {
        use k8s_openapi::api::core::v1::ServiceAccount;
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let request = serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600}
        });
        let response: serde_json::Value = sas
            .create_subresource("token", name, &kube::api::PostParams::default(), &request)
            .await
            .unwrap_or_else(|e| panic!("token for {namespace}/{name}: {e}"));
        let token = response["status"]["token"].as_str().expect("token");
        let admin: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&self.kubeconfig).expect("kubeconfig"))
                .expect("kubeconfig yaml");
        let cluster = &admin["clusters"][0]["cluster"];
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: e2e\n  context: {{cluster: e2e, user: {name}}}\ncurrent-context: e2e\n",
            cluster["server"].as_str().expect("server"),
            cluster["certificate-authority-data"].as_str().expect("ca"),
        );
        let path = self.log_dir.join(format!("{namespace}-{name}.kubeconfig"));
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }

    /// Creates ServiceAccount `namespace/name` bound to `cluster-admin` (a distinct identity
    /// for the audit log, not a least-privilege one).
    pub async fn admin_service_account(&self, namespace: &str, name: &str) -> PathBuf {
        self.apply(&format!(
            r#"
apiVersion: v1
kind: ServiceAccount
metadata: {{name: {name}, namespace: {namespace}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: e2e-{name}
  labels: {{{TEST_LABEL}: "true"}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}
subjects: [{{kind: ServiceAccount, name: {name}, namespace: {namespace}}}]
"#
        ))
        .await;
        self.service_account_kubeconfig(namespace, name).await
    }
}

/// The directory of the control plane's tools (`kubectl`, `helm`).
pub fn tools_dir() -> Option<PathBuf> {
    std::env::var_os("KARPENTER_E2E_TOOLS").map(PathBuf::from)
}

/// Runs `scripts/control-plane.sh` with `args` (`restart kube-apiserver`, `freeze etcd`,
/// `compact` …) on the control plane under test (`KARPENTER_E2E_STATE`), and returns what it
/// printed. Panics with its output when it fails.
pub fn control_plane(args: &[&str]) -> String {
    let state = std::env::var_os("KARPENTER_E2E_STATE")
        .expect("KARPENTER_E2E_STATE: the control plane's state directory");
    let out = Command::new(workspace().join("scripts/control-plane.sh"))
        .args(args)
        .env("KARPENTER_E2E_DIR", state)
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/control-plane.sh");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert!(
        out.status.success(),
        "scripts/control-plane.sh {args:?} failed: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}
