//! `karpenter simulate SCENARIO.yaml`: the command around [`karpenter_simulator`]. It parses
//! the arguments, reads the scenario and the files it names from disk, runs the scenario
//! (twice with `--compare`), and prints the log lines, a progress bar on a terminal and the
//! report, and writes the HTML report with `--report`. See docs/simulator.md.

use anyhow::{Context, Result};
use karpenter_cluster::manifests::{Document, ManifestError};
use karpenter_simulator::{Files, LogLine, RunOptions, Scenario, clock, run_scenario};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Arguments of `karpenter simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// The scenario file (`apiVersion: karpenter-rs/v1alpha1`, `kind: Scenario`).
    pub scenario: PathBuf,
    /// Output format of the report.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Print only the report, not the decision log.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Run twice — with the packing optimiser and as Karpenter's greedy first fit — and
    /// show both reports side by side.
    #[arg(long)]
    pub compare: bool,
    /// Also write the report as one self-contained HTML page (charts over time and the
    /// tables; both runs with `--compare`) to this file.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Also compute the hourly lower bound of a single run (every 10 minutes of cluster time
    /// the wanted pods are planned from scratch): printed after the report and drawn on the
    /// HTML report's cost chart. `--compare` always computes it.
    #[arg(long)]
    pub lower_bound: bool,
}

/// Report formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Log lines and tables.
    Text,
    /// The report as JSON on stdout (log lines, unless `--quiet`, go to stderr).
    Json,
}

/// The disk, as the simulator reads it: a `{file: path}` reference may name a directory
/// (its YAML and JSON files in name order), like `karpenter plan`'s paths.
struct Disk;

impl Files for Disk {
    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn manifests(&self, path: &Path) -> Result<Vec<Document>, ManifestError> {
        crate::manifests::load_paths(&[path.to_path_buf()])
    }
}

/// Runs the subcommand.
pub fn run(args: &SimulateArgs, out: &mut dyn Write) -> Result<()> {
    let scenario = Scenario::load(&args.scenario, &Disk)?;
    let json = args.output == Output::Json;
    let bar = (!args.quiet && std::io::stderr().is_terminal() && scenario.duration >= 3_600_000)
        .then(|| {
            let bar = indicatif::ProgressBar::new((scenario.duration / 1000).unsigned_abs());
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} simulating [{bar:40}] {msg} ({elapsed})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
    let runs: &[bool] = if args.compare {
        &[true, false]
    } else {
        &[scenario.settings.optimizer]
    };
    let mut reports = Vec::new();
    let mut failure: Option<std::io::Error> = None;
    for &optimizer in runs {
        if args.compare && !args.quiet {
            let line = karpenter_simulator::run_heading(optimizer);
            emit(&bar, json, out, &line, &mut failure);
        }
        let mut log = |line: &LogLine| {
            if args.quiet {
                return;
            }
            let text = format!("{} {}", clock(line.at), line.message);
            emit(&bar, json, out, &text, &mut failure);
        };
        let mut progress = |t: i64| {
            if let Some(b) = &bar {
                b.set_position((t / 1000).unsigned_abs());
                b.set_message(clock(t));
            }
        };
        // The hourly lower bound belongs to the scenario, not to a run: the comparison
        // computes it once, in the optimiser's run. A single run computes it only when asked:
        // it adds a plan per distinct set of wanted pods (14 % on daily-traffic.yaml).
        let lower_bound = if args.compare {
            optimizer
        } else {
            args.lower_bound
        };
        let report = run_scenario(
            &scenario,
            RunOptions {
                optimizer,
                lower_bound,
            },
            &Disk,
            &mut log,
            &mut progress,
        )?;
        if let Some(e) = failure.take() {
            return Err(e.into());
        }
        if let Some(b) = &bar {
            b.reset();
        }
        reports.push(report);
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(path) = &args.report {
        let page = if args.compare {
            karpenter_simulator::render_html_comparison(&reports[0], &reports[1])
        } else {
            karpenter_simulator::render_html(&reports[0])
        };
        std::fs::write(path, page)
            .with_context(|| format!("cannot write the HTML report to {}", path.display()))?;
    }
    if json {
        if args.compare {
            let value = serde_json::json!({
                "optimized": reports[0],
                "greedy": reports[1],
            });
            serde_json::to_writer_pretty(&mut *out, &value)?;
        } else {
            serde_json::to_writer_pretty(&mut *out, &reports[0])?;
        }
        writeln!(out)?;
    } else if args.compare {
        if !args.quiet {
            writeln!(out)?;
        }
        write!(
            out,
            "{}",
            karpenter_simulator::render_comparison(&reports[0], &reports[1])
        )?;
    } else {
        if !args.quiet {
            writeln!(out)?;
        }
        write!(out, "{}", karpenter_simulator::render(&reports[0]))?;
    }
    Ok(())
}

fn emit(
    bar: &Option<indicatif::ProgressBar>,
    to_stderr: bool,
    out: &mut dyn Write,
    text: &str,
    failure: &mut Option<std::io::Error>,
) {
    if failure.is_some() {
        return;
    }
    let mut write = || -> std::io::Result<()> {
        if to_stderr {
            writeln!(std::io::stderr(), "{text}")
        } else {
            writeln!(out, "{text}")
        }
    };
    let result = match bar {
        Some(b) => b.suspend(write),
        None => write(),
    };
    if let Err(e) = result {
        *failure = Some(e);
    }
}
