//! No command panics when its reader goes away: `karpenter ... | head` closes stdout early,
//! a supervisor may close stderr. Each test runs the binary with stdout, stderr or both
//! connected to a pipe whose read end is already closed, so every write fails with EPIPE
//! (Rust ignores SIGPIPE, so the process sees the error instead of being killed). A panic
//! exits with 101 and prints `panicked` on whichever stream still works.

use std::io::PipeWriter;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The write end of a pipe nobody reads.
fn closed() -> PipeWriter {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    writer
}

#[derive(Clone, Copy, Debug)]
enum Closed {
    Stdout,
    Stderr,
    Both,
}

fn run(args: &[&str], closed_streams: Closed) -> Output {
    let root: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut command = Command::new(env!("CARGO_BIN_EXE_karpenter"));
    command
        .args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        // No cluster: the controller must fail fast rather than find one.
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("RUST_BACKTRACE");
    let (out, err): (Stdio, Stdio) = match closed_streams {
        Closed::Stdout => (closed().into(), Stdio::piped()),
        Closed::Stderr => (Stdio::piped(), closed().into()),
        Closed::Both => (closed().into(), closed().into()),
    };
    command
        .stdout(out)
        .stderr(err)
        .output()
        .expect("run karpenter")
}

/// Runs `args` with each stream closed in turn and checks the exit code is one of `codes`
/// (never a panic's 101) and no open stream mentions a panic.
fn check(args: &[&str], codes: &[i32]) {
    for closed_streams in [Closed::Stdout, Closed::Stderr, Closed::Both] {
        let out = run(args, closed_streams);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !text.contains("panicked"),
            "{args:?} with {closed_streams:?} closed panicked: {text}"
        );
        let code = out.status.code();
        assert!(
            code.is_some_and(|c| codes.contains(&c)),
            "{args:?} with {closed_streams:?} closed exited with {:?} (expected one of {codes:?}): {text}",
            out.status
        );
    }
}

#[test]
fn plan_with_closed_output() {
    check(&["plan", "examples/inflate"], &[0]);
    check(&["plan", "examples/inflate", "-o", "json"], &[0]);
}

#[test]
fn simulate_with_closed_output() {
    check(&["simulate", "examples/quickstart.yaml"], &[0]);
    // JSON on stdout, the log on stderr.
    check(
        &["simulate", "examples/quickstart.yaml", "-o", "json"],
        &[0],
    );
}

#[test]
fn crds_and_help_with_closed_output() {
    check(&["crds"], &[0]);
    check(&["--help"], &[0]);
}

#[test]
fn errors_with_closed_output() {
    check(&["plan", "does-not-exist.yaml"], &[1]);
    check(&["simulate", "does-not-exist.yaml"], &[1]);
    // clap's usage error.
    check(&["plan", "--no-such-flag"], &[2]);
    // No cluster configured: the controller fails before it logs.
    check(&["controller"], &[1]);
}

/// A controller whose API server refuses connections logs watch errors at once and keeps
/// retrying; with its log stream closed it must keep running (until killed here), not panic
/// when the logger reports its own write failure on a closed stderr.
#[test]
fn controller_logs_to_closed_streams() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {token: x}}]\n\
         contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n",
    )
    .expect("write the kubeconfig");
    for output in ["stdout", "stderr"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_karpenter"))
            .args(["controller", "--log-output-paths", output])
            .args(["--metrics-port", "0", "--health-probe-port", "0"])
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .stdout(closed())
            .stderr(closed())
            .spawn()
            .expect("start the controller");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let status = loop {
            if let Some(status) = child.try_wait().expect("poll the controller") {
                break Some(status);
            }
            if std::time::Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        match status {
            Some(status) => {
                panic!("logging to a closed {output}: the controller exited with {status}")
            }
            None => child.kill().expect("stop the controller"),
        }
        child.wait().expect("reap the controller");
    }
}
