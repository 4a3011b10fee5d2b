//! End to end against a real cluster (`KUBECONFIG`), with the fake provider: the controller
//! creates Nodes for a scaled-up Deployment, the pods get scheduled and run, and scaling to
//! zero removes the Nodes again. Needs `kubectl`, a cluster with the CRDs installed
//! (`karpenter crds | kubectl apply -f -`) and permission to create Nodes.
//!
//! Run with `cargo test -p karpenter-operator --test controller_e2e -- --ignored`.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn kubectl(args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .args(args)
        .output()
        .expect("kubectl on PATH");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn kubectl_stdin(args: &[&str], input: &str) {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .args(args)
        .stdin(Stdio::piped())
        .spawn()
        .expect("kubectl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "kubectl {args:?} failed");
}

fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    panic!("timed out waiting for {what}");
}

fn fake_nodes() -> usize {
    kubectl(&[
        "get",
        "nodes",
        "-l",
        "karpenter-rs.sh/fake-node=true",
        "-o",
        "name",
    ])
    .lines()
    .filter(|l| !l.is_empty())
    .count()
}

struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const MANIFESTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: e2e
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: inflate
  namespace: default
spec:
  replicas: 0
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      nodeSelector: {karpenter.sh/nodepool: e2e}
      containers:
        - name: pause
          image: registry.k8s.io/pause:3.10
          resources: {requests: {cpu: "1", memory: 1Gi}}
"#;

#[test]
#[ignore = "needs cluster"]
fn scale_up_and_down_with_the_fake_provider() {
    assert!(std::env::var_os("KUBECONFIG").is_some(), "set KUBECONFIG");
    kubectl_stdin(&["apply", "-f", "-"], MANIFESTS);
    let _controller = Controller(
        Command::new(env!("CARGO_BIN_EXE_karpenter"))
            .args([
                "controller",
                "--cloud-provider",
                "fake",
                "--disable-leader-election",
                "true",
                "--log-format",
                "text",
                "--metrics-port",
                "18080",
                "--health-probe-port",
                "18081",
            ])
            .spawn()
            .expect("start controller"),
    );
    kubectl(&[
        "scale",
        "deployment/inflate",
        "--replicas",
        "5",
        "-n",
        "default",
    ]);
    wait_for("fake nodes", Duration::from_secs(180), || fake_nodes() > 0);
    wait_for("pods running", Duration::from_secs(300), || {
        let phases = kubectl(&[
            "get",
            "pods",
            "-n",
            "default",
            "-l",
            "app=inflate",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ]);
        phases
            .split_whitespace()
            .filter(|p| *p == "Running")
            .count()
            == 5
    });
    kubectl(&[
        "scale",
        "deployment/inflate",
        "--replicas",
        "0",
        "-n",
        "default",
    ]);
    wait_for("fake nodes removed", Duration::from_secs(300), || {
        fake_nodes() == 0
    });
    kubectl(&[
        "delete",
        "deployment/inflate",
        "-n",
        "default",
        "--ignore-not-found",
    ]);
    kubectl(&["delete", "nodepool/e2e", "--ignore-not-found"]);
}
