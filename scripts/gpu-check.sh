#!/usr/bin/env bash
# One prepared check for a lent GPU machine (device time is short: run this once, read its table).
#   1. the `gpu` tests (each kernel and the CUDA device against the CPU's scalar references);
#   2. greedy text on the GPU against the CPU: stories260K's golden text with the whole model and
#      with part of it on the device, and a calibrated ReLU model and a synthetic one, hybrid sparse;
#   3. a synthetic ~1B ReLU model (90% sparse, predictors, measured neuron frequencies) in F16 and
#      Q4_0, `hearth bench` at several VRAM budgets (shares of the model's bytes): dense with whole
#      layers offloaded (what llama.cpp's -ngl does), sparse with whole layers offloaded, and hybrid
#      sparse (attention and hot neurons on the GPU, cold neurons on the CPU at the same time); the
#      GPU's memory in use (nvidia-smi) beside the allocator's own count; one table per type;
#   4. with BIG=1, a synthetic 13B-shaped Q4_0 ReLU model at a third of its size.
#
# Where the device machine lacks the build's dependencies, build here and name the folder that
# holds `hearth`, `test_gpu` (and libcudart.so.13, the test models) in PREBUILT (docs/cuda.md).
#
# Environment: DEVICE=standin runs steps 2-4 on the CPU stand-in device instead (no CUDA build): a
# dry run of this script on any machine. SIZE=small|medium (default medium, about 2.1 GB F16),
# TYPES ("f16 q4_0"), SHARES ("0.25 0.33 0.5 1.0"), THREADS (default: all cores), N_PROMPT (128),
# N_GEN (64), REPS (2), CUDA_ARCH (90: an H100/H200), MODELS (the test models' folder, default
# $PREBUILT or ../shared/models), OUT (results: summary.txt, results.tsv, logs.tar.gz), WORK (the
# generated models and logs; keep it outside OUT). OUT receives at most seven files.
set -uo pipefail
cd "$(dirname "$0")/.."

DEVICE=${DEVICE:-cuda}
SIZE=${SIZE:-medium}
TYPES=${TYPES:-"f16 q4_0"}
SHARES=${SHARES:-"0.25 0.33 0.5 1.0"}
THREADS=${THREADS:-$(nproc)}
N_PROMPT=${N_PROMPT:-128}
N_GEN=${N_GEN:-64}
REPS=${REPS:-2}
PREBUILT=${PREBUILT:-}
MODELS=${MODELS:-${PREBUILT:-../shared/models}}
OUT=${OUT:-build-gpu-check}
WORK=${WORK:-$OUT/work}
mkdir -p "$OUT" "$WORK/logs"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
stamp() { say "== [$(date +%T)] $*"; }
# Whatever happens, the logs come back as one file (the device tool returns only a few files).
pack() { tar -czf "$OUT/logs.tar.gz" --exclude='*.trace.json' -C "$WORK" logs 2>/dev/null; }
trap pack EXIT

stamp "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $THREADS threads"
if [ "$DEVICE" = cuda ]; then
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv | tee -a "$SUMMARY"
  if [ -n "$PREBUILT" ] && "$PREBUILT/hearth" --help > /dev/null 2>&1; then
    HEARTH="$PREBUILT/hearth"
    TESTS=("$PREBUILT/test_gpu")
    stamp "prebuilt binaries from $PREBUILT"
  else
    [ -n "$PREBUILT" ] && say "prebuilt hearth does not run here: $("$PREBUILT/hearth" --help 2>&1 | head -2)"
    BUILD=build-gpu
    cmake -S . -B "$BUILD" -DHEARTH_CUDA=ON -DHEARTH_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" > "$WORK/logs/cmake.log" 2>&1 &&
      cmake --build "$BUILD" -j"$(nproc)" --target hearth test_gpu > "$WORK/logs/build.log" 2>&1 ||
      { tail -30 "$WORK/logs/cmake.log" "$WORK/logs/build.log" | tee -a "$SUMMARY"; exit 1; }
    HEARTH="$BUILD/tools/hearth"
    TESTS=("$BUILD/tests/test_gpu")
  fi
  stamp "gpu tests"
  "${TESTS[@]}" --gtest_color=no > "$WORK/logs/gpu-tests.log" 2>&1
  say "test_gpu exit status $?"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|Failure|error' "$WORK/logs/gpu-tests.log" |
    head -40 | tee -a "$SUMMARY"
  DEVICE_FLAGS=(--device cuda)
else
  BUILD=${BUILD:-build}
  [ -x "$BUILD/tools/hearth" ] || scripts/build.sh > "$WORK/logs/build.log"
  HEARTH="$BUILD/tools/hearth"
  DEVICE_FLAGS=(--device standin --standin-vram 64 --standin-threads 1)
fi
pack

# same_text NAME GOLDEN_FILE -- ARGS...: greedy text of `hearth run ARGS` against a file, white
# space folded.
fold_ws() { tr -s ' \n' ' ' | sed 's/^ *//; s/ *$//'; }
same_text() {
  local name=$1 golden=$2
  shift 3
  local log="$WORK/logs/run-$name"
  "$HEARTH" run --temp 0 "$@" > "$log.out" 2> "$log.err" || { say "$name: FAILED: $(tail -2 "$log.err")"; return; }
  local where
  where=$(grep -m1 -E '^hearth: (CUDA|CPU stand-in|device budget)' "$log.err" | cut -c9-150)
  if [ "$(fold_ws < "$log.out")" = "$(fold_ws < "$golden")" ]; then
    say "$name: same text ($where)"
  else
    say "$name: DIFFERENT text ($where)"
  fi
}

stamp "greedy text, GPU against CPU"
if [ -f "$MODELS/stories260K.gguf" ]; then
  S="$MODELS/stories260K.gguf"
  G="$MODELS/stories260K.greedy250.txt"
  SMALL=(-p "" -n 250 -c 256 -b 32)
  same_text stories-cpu "$G" -- -m "$S" "${SMALL[@]}" --device none
  same_text stories-all "$G" -- -m "$S" "${SMALL[@]}" "${DEVICE_FLAGS[@]}"
  # The device's activation buffers take a few MiB (cuBLAS's workspace among them): of these
  # budgets, the smaller ones leave part of the 1.1 MiB model on the CPU.
  for budget in 0.004 0.006 0.008; do
    same_text "stories-layers-$budget" "$G" -- -m "$S" "${SMALL[@]}" "${DEVICE_FLAGS[@]}" --vram-budget "$budget" --placement layers
    same_text "stories-neurons-$budget" "$G" -- -m "$S" "${SMALL[@]}" "${DEVICE_FLAGS[@]}" --vram-budget "$budget" --placement neurons
  done
  same_text stories-prompt-batch "$G" -- -m "$S" -p "" -n 250 -c 256 -b 256 "${DEVICE_FLAGS[@]}"
  # The whole model on the device, whose weights are next to nothing: its decode speed and trace
  # are the device path's fixed cost per layer.
  "$HEARTH" bench -m "$S" -p 16 -n 128 -r 2 -t "$THREADS" --no-bandwidth "${DEVICE_FLAGS[@]}" \
    --trace "$WORK/logs/stories-device.trace.json" 2>&1 | tail -4 | tee -a "$SUMMARY"
  [ -f "$WORK/logs/stories-device.trace.json" ] &&
    gzip -c "$WORK/logs/stories-device.trace.json" > "$OUT/trace-stories-device.json.gz"
fi
if [ -f "$MODELS/stories260K-relu-cal.gguf" ]; then
  R="$MODELS/stories260K-relu-cal.gguf"
  RARGS=(-m "$R" -p "Once upon a time" -n 200 -c 256 -b 32 --sparse predictor)
  "$HEARTH" run --temp 0 "${RARGS[@]}" --device none > "$WORK/logs/relu-cpu.txt" 2> /dev/null
  same_text relu-predictor-all "$WORK/logs/relu-cpu.txt" -- "${RARGS[@]}" "${DEVICE_FLAGS[@]}"
  for budget in 0.004 0.006; do
    same_text "relu-predictor-neurons-$budget" "$WORK/logs/relu-cpu.txt" -- "${RARGS[@]}" "${DEVICE_FLAGS[@]}" --vram-budget "$budget"
  done
fi
pack

case "$SIZE" in
  small) SHAPE=(--n-embd 512 --n-layer 8 --n-ff 2048 --n-head 8 --n-head-kv 8) ;;
  medium) SHAPE=(--n-embd 2048 --n-layer 16 --n-ff 8192 --n-head 16 --n-head-kv 16) ;;
  *) echo "SIZE must be small or medium" >&2; exit 1 ;;
esac
BASE="$WORK/synth-relu0.9-$SIZE"
if [ ! -f "$BASE-f16.gguf" ]; then
  stamp "making $BASE-f16.gguf"
  "$HEARTH" synth -o "$BASE-f16.gguf" "${SHAPE[@]}" --n-vocab 4096 --n-ctx 1024 --type f16 \
    --sparsity 0.9 --skew 1.5 --stats-tokens 256 --measure-tokens 16 -t "$THREADS" 2>&1 | tail -2 | tee -a "$SUMMARY"
fi
for type in $TYPES; do
  if [ ! -f "$BASE-$type.gguf" ]; then
    "$HEARTH" quantize "$BASE-f16.gguf" "$BASE-$type.gguf" "$type" > "$WORK/logs/quantize-$type.log" 2>&1 ||
      say "quantize $type failed: $(tail -2 "$WORK/logs/quantize-$type.log")"
  fi
done
SYN="$BASE-${TYPES%% *}.gguf"
SARGS=(-m "$SYN" -p "one two three" -n 48 -t "$THREADS" --sparse predictor)
"$HEARTH" run --temp 0 "${SARGS[@]}" --device none > "$WORK/logs/synth-cpu.txt" 2> /dev/null
same_text synth-predictor-third "$WORK/logs/synth-cpu.txt" -- "${SARGS[@]}" "${DEVICE_FLAGS[@]}" \
  --vram-budget "$(awk -v b="$(stat -c %s "$SYN")" 'BEGIN { printf "%.4f", b / 3 / 2^30 }')"
pack

# csv_field CSV NAME: the column NAME (by the header line) of the CSV's last row.
csv_field() {
  printf '%s\n' "$1" | awk -F, -v name="$2" \
    'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == name) col = i } END { if (col) print $col }'
}

# bench MODEL TAG SHARE MODE PLACEMENT: one row of results.tsv from hearth bench's CSV, with the
# most GPU memory nvidia-smi saw in use during the run.
bench() {
  local model=$1 tag=$2 share=$3 mode=$4 placement=$5
  local name gib log csv smi_pid=""
  name=$(basename "$model" .gguf)
  gib=$(awk -v b="$(stat -c %s "$model")" -v s="$share" 'BEGIN { printf "%.4f", b * s / 2^30 }')
  log="$WORK/logs/bench-$name-$tag-$share"
  if [ "$DEVICE" = cuda ]; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$log.smi" 2>&1 &
    smi_pid=$!
  fi
  csv=$("$HEARTH" bench -m "$model" -p "$N_PROMPT" -n "$N_GEN" -r "$REPS" -t "$THREADS" -o csv \
        --no-bandwidth --sparse "$mode" "${DEVICE_FLAGS[@]}" --vram-budget "$gib" \
        --placement "$placement" --trace "$log.trace.json" 2> "$log.err")
  local rc=$?
  [ -n "$smi_pid" ] && kill "$smi_pid" 2> /dev/null && wait "$smi_pid" 2> /dev/null
  if [ $rc -ne 0 ] || [ -z "$csv" ]; then
    say "bench $name $tag $share failed: $(tail -3 "$log.err")"
    return
  fi
  local pp tg busy held smi
  pp=$(csv_field "$csv" pp_tokens_per_s)
  tg=$(csv_field "$csv" tg_tokens_per_s)
  busy=$(grep -o 'device busy [0-9.]*' "$log.err" | awk '{print $3}')
  held=$(grep -o 'peak [0-9.]* MiB' "$log.err" | awk '{print $2}')
  smi=$( [ -f "$log.smi" ] && sort -n "$log.smi" | tail -1)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$share" "$gib" "$tag" "$pp" "$tg" \
    "${busy:-0}" "${held:-0}" "${smi:--}" >> "$RESULTS"
  printf '%s %s %s: pp %s tg %s busy %s peak %s MiB (nvidia-smi %s MiB)\n' "$name" "$share" "$tag" \
    "$pp" "$tg" "${busy:-0}" "${held:-0}" "${smi:--}"
}

RESULTS="$OUT/results.tsv"
printf 'model\tshare\tbudget_gib\tconfig\tpp_tok_s\ttg_tok_s\tdevice_busy\tpeak_alloc_mib\tsmi_used_mib\n' > "$RESULTS"
table() {
  local name=$1
  say ""
  say "$name: tokens/s (prompt $N_PROMPT, decode $N_GEN, $THREADS threads), speed-up of hybrid over layer offload"
  say "| budget (share, GiB) | dense, layers: pp / tg | sparse, layers: pp / tg | hybrid sparse, neurons: pp / tg | tg hybrid / dense layers | GPU busy (hybrid) | GPU peak: allocator / nvidia-smi MiB |"
  say "|---|---|---|---|---|---|---|"
  awk -F'\t' -v n="$name" '$1 == n { k = $2; g[k] = $3; pp[k, $4] = $5; tg[k, $4] = $6
      if ($4 == "hybrid-sparse") { b[k] = $7; a[k] = $8; s[k] = $9; order[++m] = k } }
    END { for (i = 1; i <= m; ++i) { k = order[i]
      printf "| %s (%s) | %.1f / %.2f | %.1f / %.2f | %.1f / %.2f | %.2fx | %.0f%% | %s / %s |\n", k, g[k],
        pp[k, "dense-layers"], tg[k, "dense-layers"], pp[k, "sparse-layers"], tg[k, "sparse-layers"],
        pp[k, "hybrid-sparse"], tg[k, "hybrid-sparse"],
        (tg[k, "dense-layers"] > 0 ? tg[k, "hybrid-sparse"] / tg[k, "dense-layers"] : 0), 100 * b[k], a[k], s[k] } }' \
    "$RESULTS" | tee -a "$SUMMARY"
}
for type in $TYPES; do
  M="$BASE-$type.gguf"
  [ -f "$M" ] || continue
  stamp "bench $(basename "$M"): $(awk -v b="$(stat -c %s "$M")" 'BEGIN { printf "%.2f GiB", b / 2^30 }')"
  for share in $SHARES; do
    bench "$M" dense-layers "$share" dense layers
    bench "$M" sparse-layers "$share" predictor layers
    bench "$M" hybrid-sparse "$share" predictor neurons
  done
  table "$(basename "$M" .gguf)"
  # One trace of the hybrid at a third of the model, for the device's per-layer spans.
  trace="$WORK/logs/bench-$(basename "$M" .gguf)-hybrid-sparse-0.33.trace.json"
  [ -f "$trace" ] && gzip -c "$trace" > "$OUT/trace-$(basename "$M" .gguf)-hybrid-0.33.json.gz"
  pack
done

if [ "${BIG:-0}" = 1 ]; then
  BIGM="$WORK/synth-relu0.9-13b-q4_0.gguf"
  stamp "making $BIGM"
  "$HEARTH" synth -o "$BIGM" --n-embd 5120 --n-layer 40 --n-ff 13824 --n-head 40 --n-head-kv 40 \
    --n-vocab 32000 --n-ctx 1024 --type q4_0 --sparsity 0.9 --skew 1.5 --stats-tokens 128 \
    --measure-tokens 8 -t "$THREADS" 2>&1 | tail -2 | tee -a "$SUMMARY"
  stamp "bench $(basename "$BIGM")"
  N_GEN=32 REPS=1
  bench "$BIGM" dense-layers 0.33 dense layers
  bench "$BIGM" sparse-layers 0.33 predictor layers
  bench "$BIGM" hybrid-sparse 0.33 predictor neurons
  table "$(basename "$BIGM" .gguf)"
fi
stamp "done"
