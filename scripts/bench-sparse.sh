#!/usr/bin/env bash
# The sparse CPU benchmark of docs/benchmarks.md: the ~1B-parameter Llama shape of bench-cpu.sh,
# as ReGLU models with predictors made by `hearth synth --sparsity S`, at S = 0.7, 0.9 and 0.95;
# for each, `hearth bench` runs dense and predictor modes alternately (one call, so the ratio is
# measured under the same conditions) at THREADS threads. Types synth does not write itself (the
# K-quant and IQ4 mixes, e.g. TYPES=q4_k_m) come from the F16 model through `hearth quantize`,
# which keeps the predictors at f16 as for any file.
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
      synth_type=$type
      case $type in f32|f16|bf16|q8_0|q4_0) ;; *) synth_type=f16 ;; esac
      synth_model="$models/synth1b-relu$s-$synth_type.gguf"
      if [ ! -f "$synth_model" ]; then
        "$hearth" synth -o "$synth_model" --n-embd 2048 --n-layer "${N_LAYER:-22}" --n-ff 5632 \
          --n-head 32 --n-head-kv 4 --n-vocab 32000 --n-ctx 2048 --type "$synth_type" \
          --sparsity "$s" -t "$threads"
      fi
      if [ "$synth_type" != "$type" ]; then
        "$hearth" quantize "$synth_model" "$model" "$type"
      fi
    fi
    "$hearth" bench -m "$model" -p "${N_PROMPT:-128}" -n "${N_GEN:-64}" -t "$threads" -r "$reps" \
      --sparse dense --sparse predictor ${NO_MMAP:+--no-mmap} -o "${FORMAT:-md}"
  done
done
