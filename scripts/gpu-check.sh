#!/usr/bin/env bash
# One prepared check for a lent GPU machine (device time is short: run this once, read its table).
#   1. build with CUDA and run the `gpu` tests (each kernel against the CPU scalar reference);
#   2. make a synthetic ReLU model with predictors and measured neuron frequencies;
#   3. `hearth bench` it at several VRAM budgets (shares of the model's bytes): dense with whole
#      layers offloaded (what llama.cpp's -ngl does) against hybrid sparse (attention and hot
#      neurons on the GPU, cold neurons on the CPU at the same time), and print one table.
#
# Environment: DEVICE=standin runs steps 2-3 on the CPU stand-in device instead (no CUDA build):
# a dry run of this script on any machine. SIZE=small|medium (default medium, about 2.1 GB F16),
# SHARES="0.25 0.33 0.5 1.0", THREADS (default: all cores), N_GEN (64), REPS (2),
# CUDA_ARCH (default 90: an H100/H200; the build's default is "80;89;90").
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICE=${DEVICE:-cuda}
SIZE=${SIZE:-medium}
SHARES=${SHARES:-"0.25 0.33 0.5 1.0"}
THREADS=${THREADS:-$(nproc)}
N_GEN=${N_GEN:-64}
REPS=${REPS:-2}
OUT=${OUT:-build-gpu-check}
mkdir -p "$OUT"

if [ "$DEVICE" = cuda ]; then
  BUILD=build-gpu
  cmake -S . -B "$BUILD" -DHEARTH_CUDA=ON -DHEARTH_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" > "$OUT/cmake.log"
  cmake --build "$BUILD" -j"$(nproc)" --target hearth test_gpu > "$OUT/build.log" 2>&1 ||
    { tail -50 "$OUT/build.log"; exit 1; }
  nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv || true
  echo "== gpu tests"
  ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 300 | tail -25
  DEVICE_FLAGS=(--device cuda)
else
  BUILD=${BUILD:-build}
  [ -x "$BUILD/tools/hearth" ] || scripts/build.sh > "$OUT/build.log"
  DEVICE_FLAGS=(--device standin --standin-vram 64 --standin-threads 1)
fi
HEARTH="$BUILD/tools/hearth"

case "$SIZE" in
  small) SHAPE=(--n-embd 512 --n-layer 8 --n-ff 2048 --n-head 8 --n-head-kv 8) ;;
  medium) SHAPE=(--n-embd 2048 --n-layer 16 --n-ff 8192 --n-head 16 --n-head-kv 16) ;;
  *) echo "SIZE must be small or medium" >&2; exit 1 ;;
esac
MODEL="$OUT/synth-relu0.9-$SIZE.gguf"
if [ ! -f "$MODEL" ]; then
  echo "== making $MODEL"
  "$HEARTH" synth -o "$MODEL" "${SHAPE[@]}" --n-vocab 4096 --n-ctx 1024 --type f16 \
    --sparsity 0.9 --skew 1.5 --stats-tokens 256 --measure-tokens 16 -t "$THREADS" | tail -3
fi
MODEL_BYTES=$(stat -c %s "$MODEL")

# bench TAG SHARE MODE PLACEMENT: one row of the table from hearth bench's CSV.
bench() {
  local tag=$1 share=$2 mode=$3 placement=$4
  local gib
  gib=$(awk -v b="$MODEL_BYTES" -v s="$share" 'BEGIN { printf "%.4f", b * s / 2^30 }')
  local csv
  csv=$("$HEARTH" bench -m "$MODEL" -p 64 -n "$N_GEN" -r "$REPS" -t "$THREADS" -o csv \
        --no-bandwidth --sparse "$mode" "${DEVICE_FLAGS[@]}" --vram-budget "$gib" \
        --placement "$placement" --trace "$OUT/trace-$tag-$share.json" 2> "$OUT/bench-$tag-$share.log" |
        tail -1) || { echo "bench $tag $share failed:"; cat "$OUT/bench-$tag-$share.log"; return 1; }
  local tg busy placed
  tg=$(echo "$csv" | cut -d, -f11)
  busy=$(grep -o 'device busy [0-9.]*' "$OUT/bench-$tag-$share.log" | awk '{print $3}' || true)
  placed=$(grep -m1 '^hearth: ' "$OUT/bench-$tag-$share.log" | cut -c9-90 || true)
  printf '%s\t%s\t%s\t%s\t%s\n' "$share" "$tag" "$tg" "${busy:-0}" "$placed"
}

echo "== $MODEL: $(awk -v b="$MODEL_BYTES" 'BEGIN { printf "%.2f GiB", b / 2^30 }'), $THREADS threads, $DEVICE"
RESULTS="$OUT/results.tsv"
: > "$RESULTS"
for share in $SHARES; do
  bench dense-layers "$share" dense layers | tee -a "$RESULTS"
  bench hybrid-sparse "$share" predictor neurons | tee -a "$RESULTS"
done
echo
echo "| budget (share of model) | dense, layer offload tok/s | hybrid sparse tok/s | speed-up | device busy (hybrid) |"
echo "|---|---|---|---|---|"
awk -F'\t' '$2 == "dense-layers" { d[$1] = $3 } $2 == "hybrid-sparse" { h[$1] = $3; b[$1] = $4; order[++n] = $1 }
  END { for (i = 1; i <= n; ++i) { s = order[i];
    printf "| %s | %.2f | %.2f | %.2fx | %.0f%% |\n", s, d[s], h[s], (d[s] > 0 ? h[s] / d[s] : 0), 100 * b[s] } }' "$RESULTS"
