//! Replaying the fuzz targets' committed inputs on stable Rust. The targets in `fuzz/` (run
//! with `cargo +nightly fuzz`) are one call each into a crate's `fuzzing` module; a crate's
//! tests pass the same function to [`replay_corpus`], so every input the fuzzer kept
//! (`fuzz/corpus/<target>/`) and every crash it found (`fuzz/regressions/<target>/`) is
//! checked by `cargo test`, where CI runs it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// The repository's `fuzz/` directory.
pub fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// Runs `entry` on every file of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/`,
/// in name order, and returns how many there were. Panics naming the file when `entry`
/// panics on one, and when the target has no committed input at all (a renamed target or a
/// lost corpus would otherwise pass silently).
pub fn replay_corpus(target: &str, entry: fn(&[u8])) -> usize {
    let root = fuzz_dir();
    let mut files = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        files.extend(entries.map(|e| e.expect("a readable directory entry").path()));
    }
    files.sort();
    assert!(!files.is_empty(), "no committed fuzz input for {target}");
    for file in &files {
        let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if catch_unwind(AssertUnwindSafe(|| entry(&data))).is_err() {
            panic!("fuzz target {target} panics on {}", file.display());
        }
    }
    files.len()
}
