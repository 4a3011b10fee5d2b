//! The `karpenter` binary: `controller` (the operator), `simulate` (a scenario on a virtual
//! clock), `plan` (what would be launched for these manifests), `convert` (older Karpenter
//! manifests as v1) and `crds` (the CustomResourceDefinitions). The subcommands are in [`cli`].
#![forbid(unsafe_code)]

mod cli;
mod controller;
mod convert_cmd;
mod http;
mod manifests;
mod plan_cluster;
mod plan_cmd;
mod settings;
mod simulate;

fn main() -> std::process::ExitCode {
    cli::main(clap::Parser::parse())
}
