#!/usr/bin/env bash
# Fuzzes the GGUF reader with libFuzzer under ASan and UBSan for $FUZZ_SECONDS (default 30).
# Builds with clang in its own directory ($FUZZ_BUILD_DIR, default build-fuzz), starts from a seed
# corpus of small valid files and exits non-zero when the fuzzer finds a crash, leak or timeout;
# the offending input is left under <build>/fuzz-artifacts/.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${FUZZ_SECONDS:-30}"
jobs="${FUZZ_BUILD_JOBS:-2}"

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHEARTH_FUZZ=ON -DHEARTH_BUILD_TESTS=OFF -DHEARTH_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --target gguf_reader_fuzz gguf_fuzz_seeds -j"$jobs"

seeds="$build/fuzz-seeds/gguf"
corpus="$build/fuzz-corpus/gguf"
artifacts="$build/fuzz-artifacts"
mkdir -p "$seeds" "$corpus" "$artifacts"
"$build/fuzz/gguf_fuzz_seeds" "$seeds"

# New inputs go to the first directory (kept between runs); seeds are only read.
# -timeout flags any single input that takes more than 10 s (a hang); -rss_limit_mb and
# -malloc_limit_mb flag inputs that make the reader allocate in proportion to a forged count.
"$build/fuzz/gguf_reader_fuzz" \
  -max_total_time="$seconds" \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -malloc_limit_mb=1024 \
  -print_final_stats=1 \
  -artifact_prefix="$artifacts/" \
  "$corpus" "$seeds"
echo "fuzz.sh: no crash in ${seconds} s"
