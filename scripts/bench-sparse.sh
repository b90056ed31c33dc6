#!/usr/bin/env bash
# The sparse CPU benchmark of docs/benchmarks.md: the ~1B-parameter Llama shape of bench-cpu.sh,
# as ReGLU models with predictors made by `hearth synth --sparsity S`, at S = 0.7, 0.9 and 0.95;
# for each, `hearth bench` runs dense and predictor modes alternately (one call, so the ratio is
# measured under the same conditions) at THREADS threads.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${THREADS:-2}
reps=${REPS:-3}
models=${MODEL_DIR:-build/models}
hearth=${HEARTH:-build/tools/hearth}
mkdir -p "$models"
for type in ${TYPES:-q4_0 f16}; do
  for s in ${SPARSITIES:-0.7 0.9 0.95}; do
    model="$models/synth1b-relu$s-$type.gguf"
    if [ ! -f "$model" ]; then
      "$hearth" synth -o "$model" --n-embd 2048 --n-layer 22 --n-ff 5632 --n-head 32 \
        --n-head-kv 4 --n-vocab 32000 --n-ctx 2048 --type "$type" --sparsity "$s" -t "$threads"
    fi
    "$hearth" bench -m "$model" -p "${N_PROMPT:-128}" -n "${N_GEN:-64}" -t "$threads" -r "$reps" \
      --sparse dense --sparse predictor ${NO_MMAP:+--no-mmap} -o "${FORMAT:-md}"
  done
done
