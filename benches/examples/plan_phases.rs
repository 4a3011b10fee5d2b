//! Where `karpenter plan`'s time goes, phase by phase, on manifest files such as
//! `plan_inputs` writes: reading and parsing the manifests, decoding them into solver inputs,
//! building the embedded catalogue's instance types (and, apart, parsing its JSON), giving
//! each NodePool its types, the snapshot, the greedy solve, the default solve and the JSON
//! plan. The binary runs the catalogue beside the manifests; here each phase is timed alone.
//!
//! `cargo run --release -p karpenter-benches --example plan_phases -- [--repeat N] FILE...`
//! prints, per file, the best of N runs (default 5) of each phase in milliseconds.

use karpenter_catalog::{Catalogue, CatalogueOptions};
use karpenter_cluster::inputs::Inputs;
use karpenter_cluster::manifests::parse_str;
use karpenter_scheduling::{SolveOptions, solve};
use std::path::Path;
use std::time::Instant;

/// Runs `f` `repeat` times; its last result and the best time in milliseconds.
fn best_of<T>(repeat: usize, mut f: impl FnMut() -> T) -> (T, f64) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..repeat {
        let start = Instant::now();
        let value = f();
        best = best.min(start.elapsed().as_secs_f64() * 1e3);
        out = Some(value);
    }
    (out.expect("at least one run"), best)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut repeat = 5usize;
    if let Some(i) = args.iter().position(|a| a == "--repeat") {
        repeat = args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .expect("--repeat takes a number");
        args.drain(i..=i + 1);
    }
    if args.is_empty() {
        eprintln!("usage: plan_phases [--repeat N] FILE...");
        std::process::exit(2);
    }
    let greedy = SolveOptions {
        optimizer: karpenter_scheduling::solver::OptimizerOptions {
            enabled: false,
            ..Default::default()
        },
        ..SolveOptions::default()
    };
    println!(
        "| input | parse | decode | catalogue JSON | catalogue types | pool types | snapshot \
         | greedy solve | default solve | JSON plan | price ($/h) | optimiser work |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for file in &args {
        let path = Path::new(file);
        let (docs, parse) = best_of(repeat, || {
            let text = std::fs::read_to_string(path).expect("readable input");
            parse_str(path, &text).expect("valid manifests")
        });
        let (inputs, decode) = best_of(repeat, || {
            Inputs::from_documents(&docs).expect("decodable manifests")
        });
        let (catalogue, catalogue_json) = best_of(repeat, || {
            Catalogue::from_json(karpenter_catalog::catalogue::EMBEDDED_CATALOGUE_JSON)
                .expect("embedded catalogue")
        });
        let (types, catalogue_types) = best_of(repeat, || {
            catalogue
                .instance_types(&CatalogueOptions::default())
                .expect("default options")
        });
        let (by_pool, pool_types) = best_of(repeat, || inputs.pool_instance_types(&types));
        let (snapshot, snapshot_ms) = best_of(repeat, || {
            inputs.snapshot_for(&by_pool.by_pool).expect("snapshot")
        });
        let (_, greedy_ms) = best_of(repeat, || solve(&snapshot, &greedy));
        let (plan, solve_ms) = best_of(repeat, || solve(&snapshot, &SolveOptions::default()));
        let (_, json_ms) = best_of(repeat, || {
            // What `karpenter plan -o json` writes: each shared option list once.
            let mut out = Vec::new();
            karpenter_simulator::plan_json::write_plan_json(
                &plan,
                Some(karpenter_cluster::provisioner::MAX_INSTANCE_TYPES),
                &mut out,
            )
            .expect("in memory");
            out.len()
        });
        let name = path
            .file_name()
            .map_or_else(|| file.clone(), |n| n.to_string_lossy().into_owned());
        println!(
            "| {name} | {parse:.1} | {decode:.1} | {catalogue_json:.1} | {catalogue_types:.1} \
             | {pool_types:.1} | {snapshot_ms:.1} | {greedy_ms:.1} | {solve_ms:.1} | {json_ms:.1} \
             | {:.3} | {} |",
            plan.total_price,
            plan.optimizer.as_ref().map_or(0, |o| o.work),
        );
    }
}
