#!/bin/sh
# Fuzzing campaigns: tests/fuzz/run.sh SECONDS [BUILD_DIR] [--merge]
#
# Builds the fuzz targets with clang, libFuzzer, AddressSanitizer (leaks
# included) and UndefinedBehaviorSanitizer in BUILD_DIR (default
# build-fuzz), then runs each target for SECONDS on a scratch copy of its
# corpus (tests/fuzz/corpus/NAME). Any crash, leak, sanitizer report or
# failed check stops with the reproducer's path. --merge folds the new inputs
# into the repository's corpus (minimised). The test suite's fuzz_smoke runs
# this for 30 seconds per target with FUZZ_SEED=1, so that a failure in CI
# reproduces; campaigns without FUZZ_SEED draw a new seed each run.
# FUZZ_TARGETS="desc npy" picks targets (default: desc npy conv cli).
set -eu
secs=$1
build=${2:-build-fuzz}
merge=${3:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
cc=${CC:-clang}
cmake -S "$src" -B "$build" -DNCONV_FUZZ=ON -DNCONV_BUILD_TOOLS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" >/dev/null
cmake --build "$build" -j2 --target fuzz_desc fuzz_npy fuzz_conv fuzz_cli >/dev/null
for f in ${FUZZ_TARGETS:-desc npy conv cli}; do
  scratch="$build/corpus/$f"
  mkdir -p "$scratch"
  log="$build/fuzz_$f.log"
  if ! (cd "$build" && "./tests/fuzz_$f" -max_total_time="$secs" ${FUZZ_SEED:+-seed="$FUZZ_SEED"} -timeout=20 -rss_limit_mb=2048 -max_len=4096 \
        -print_final_stats=1 "$scratch" "$src/tests/fuzz/corpus/$f" >"$log" 2>&1); then
    tail -n 40 "$log"
    echo "fuzz_$f: FAILED (log: $log; reproducer: crash-*/leak-* in $build)"
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "fuzz_$f: ${secs} s, ${runs:-?} executions, no findings (corpus: $(ls "$scratch" | wc -l) new + $(ls "$src/tests/fuzz/corpus/$f" | wc -l) kept)"
  if [ "$merge" = "--merge" ]; then
    "$build/tests/fuzz_$f" -merge=1 "$src/tests/fuzz/corpus/$f" "$scratch" >"$log.merge" 2>&1
  fi
done
