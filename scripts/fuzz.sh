#!/usr/bin/env bash
# Runs the cargo-fuzz targets of fuzz/ one after another, each for SECONDS (default 600),
# then minimises its corpus. Needs the nightly toolchain and cargo-fuzz:
#   rustup toolchain install nightly && cargo install cargo-fuzz --locked
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (default: every target)
# Each run is niced, single-process (-jobs=1) and without a sanitizer: the project's code
# forbids `unsafe`, so what the fuzzer looks for is panics, overflows, hangs and memory
# blow-ups, which need no sanitizer and are found 2-3 times faster without one.
# Crashes land in fuzz/artifacts/<target>/; copy each into fuzz/regressions/<target>/
# once fixed, so `cargo test` keeps replaying it. Logs: target/fuzz-logs/<target>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    targets=(quantity requirements label_selector manifests scenario sqs_message)
fi
logs="$PWD/target/fuzz-logs"
mkdir -p "$logs"
nice -n 10 cargo +nightly fuzz build -s none
for target in "${targets[@]}"; do
    echo "==> $target for ${seconds}s (log: $logs/$target.log)"
    mkdir -p "fuzz/corpus/$target"
    # -jobs=1 runs one worker whose output libFuzzer writes to fuzz-0.log in the current
    # directory; run from the log directory so it lands there.
    (cd "$logs" && nice -n 10 cargo +nightly fuzz run --fuzz-dir "$OLDPWD/fuzz" -s none "$target" \
        "$OLDPWD/fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -jobs=1 -timeout=30 -rss_limit_mb=2048 \
        -dict="$OLDPWD/fuzz/dict/$target.dict" -print_final_stats=1) || true
    mv -f "$logs/fuzz-0.log" "$logs/$target.log" 2>/dev/null || true
    grep -E "^stat::|Done|ERROR|panicked" "$logs/$target.log" | tail -12 || true
    echo "==> $target: minimising the corpus"
    # On edge coverage only (-use_counters=0): the same edges from a fraction of the files
    # that hit-count buckets would keep, so the committed corpora stay small.
    nice -n 10 cargo +nightly fuzz cmin --fuzz-dir fuzz -s none "$target" "fuzz/corpus/$target" \
        -- -use_counters=0 -timeout=30 \
        >"$logs/$target.cmin.log" 2>&1 || echo "cmin failed: see $logs/$target.cmin.log"
    echo "    $(find "fuzz/corpus/$target" -type f | wc -l) files, $(du -sb "fuzz/corpus/$target" | cut -f1) bytes"
done
