//! `karpenter convert`: manifests of Karpenter's older APIs (v1alpha5, v1beta1) as v1, with a
//! report of every rename, move and loss. The conversion is `karpenter_convert`'s; this reads
//! the files and prints.

use crate::manifests;
use anyhow::{Context, Result};
use karpenter_convert::{Options, convert_documents};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Arguments of `karpenter convert`.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// Manifest files or directories (YAML or JSON, multi-document, `kind: List`); `-` reads
    /// standard input.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Print the conversion even when some fields could not be converted (the report names
    /// them), and succeed unless an input was invalid. Without it nothing is printed then, so
    /// `karpenter convert … | kubectl apply -f -` applies nothing half-converted.
    #[arg(long)]
    pub allow_lossy: bool,
    /// Leave out the requirements v1alpha5's webhook added to every Provisioner that lacked
    /// them (linux, amd64, on-demand, instance category c/m/r of generation > 2).
    #[arg(long)]
    pub ignore_defaults: bool,
}

/// Runs the subcommand: the v1 YAML to `out`, the report to standard error.
pub fn run(args: &ConvertArgs, out: &mut dyn Write) -> Result<()> {
    let mut docs = Vec::new();
    for path in &args.paths {
        if path == Path::new("-") {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading standard input")?;
            docs.extend(karpenter_cluster::manifests::parse_str(
                Path::new("stdin"),
                &text,
            )?);
        } else {
            docs.extend(manifests::load_paths(std::slice::from_ref(path))?);
        }
    }
    let options = Options {
        alpha_default_requirements: !args.ignore_defaults,
    };
    let conversion = convert_documents(docs, &options);
    let mut report = std::io::stderr().lock();
    for issue in &conversion.issues {
        writeln!(report, "{issue}")?;
    }
    writeln!(report, "{}", conversion.summary(args.allow_lossy))?;
    if conversion.printable(args.allow_lossy) {
        out.write_all(conversion.to_yaml()?.as_bytes())?;
    }
    conversion.verdict(args.allow_lossy)?;
    Ok(())
}
