//! The command line: subcommands, how each runs, and how errors become exit codes.

use crate::{controller, convert_cmd, plan_cmd, settings, simulate};
use clap::{Parser, Subcommand};
use std::io::Write;

/// karpenter-rs: a Kubernetes node autoscaler compatible with Karpenter's v1 API.
#[derive(Debug, Parser)]
#[command(name = "karpenter", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Plan the nodes karpenter-rs would launch for the pods and NodePools in manifests.
    Plan(plan_cmd::PlanArgs),
    /// Run a scenario (manifests and a timeline) on an embedded cluster with a virtual clock.
    Simulate(simulate::SimulateArgs),
    /// Convert Karpenter v1alpha5 and v1beta1 manifests to v1, reporting what changes.
    Convert(convert_cmd::ConvertArgs),
    /// Print the CustomResourceDefinitions (karpenter.sh/v1 NodePool and NodeClaim).
    Crds,
    /// Run the operator against a cluster (in-cluster config or KUBECONFIG).
    Controller(Box<settings::ControllerArgs>),
}

/// Runs the parsed command line; a broken pipe on output is success, any other error is
/// printed and fails.
pub fn main(cli: Cli) -> std::process::ExitCode {
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // A reader that stops early (`| head`) is not an error worth reporting.
        Err(e) if is_broken_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // Not `eprintln!`, which panics when stderr is a closed pipe: with nowhere to
            // report the error, the exit code alone tells it.
            let _ = writeln!(std::io::stderr(), "error: {}", chain_once(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cli.command {
        Command::Plan(args) => plan_cmd::run(&args, &mut out)?,
        Command::Simulate(args) => simulate::run(&args, &mut out)?,
        Command::Convert(args) => convert_cmd::run(&args, &mut out)?,
        Command::Crds => out.write_all(karpenter_cloudprovider::crds_yaml().as_bytes())?,
        Command::Controller(args) => {
            drop(out);
            install_crypto_provider();
            return tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(controller::run(&args));
        }
    }
    out.flush()?;
    Ok(())
}

/// Installs `ring` as the process's rustls crypto provider. kube's TLS client asks rustls for
/// the process default, which rustls can only infer when exactly one provider is compiled in;
/// a build with the `aws` feature also links aws-lc-rs (the AWS SDK's client names its provider
/// itself), so without this the first API call panics.
pub(crate) fn install_crypto_provider() {
    // An error means a provider is installed already, which is all that is needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The error and its causes joined by ": ", each cause once. Many errors print their source
/// in their own message as well as returning it from `source()` (thiserror's
/// `"{path}: {source}"`), so anyhow's `{:#}` printed "No such file or directory (os error 2)"
/// twice; a cause whose text the message already ends with is left out.
fn chain_once(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if text.is_empty() || out.ends_with(&text) || out.contains(&format!("{text}: ")) {
            continue;
        }
        out.push_str(": ");
        out.push_str(&text);
    }
    out
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(|j| j.io_error_kind())
                .is_some_and(|k| k == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::chain_once;
    use anyhow::Context;

    #[derive(Debug, thiserror::Error)]
    #[error("{path}: {source}")]
    struct Repeats {
        path: String,
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_printed_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::new(Repeats {
            path: "a.yaml".into(),
            source: io(),
        });
        assert_eq!(format!("{e:#}"), "a.yaml: no such file: no such file");
        assert_eq!(chain_once(&e), "a.yaml: no such file");
        // Context that repeats nothing keeps every layer.
        let e = Err::<(), _>(io())
            .context("reading catalogue c.json")
            .unwrap_err();
        assert_eq!(chain_once(&e), "reading catalogue c.json: no such file");
        let e = Err::<(), _>(Repeats {
            path: "a.yaml".into(),
            source: io(),
        })
        .context("loading manifests")
        .unwrap_err();
        assert_eq!(chain_once(&e), "loading manifests: a.yaml: no such file");
    }
}
