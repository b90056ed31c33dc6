#!/usr/bin/env bash
# The dense CPU benchmark of docs/benchmarks.md: a ~1B-parameter Llama-shaped model made by
# `hearth synth` (n_embd 2048, 22 layers, n_ff 5632, 32 heads, 4 KV heads, 32000 tokens) in F16
# and Q4_0 (TYPES=... for others), prompt processing and generation at THREADS threads, with the
# memory-bandwidth roofline. Types synth does not write itself (K-quant and IQ4 mixes such as
# q4_k_m, q6_k) are made from the F16 model by `hearth quantize`, with llama.cpp's mixes.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${THREADS:-2}
reps=${REPS:-5}
models=${MODEL_DIR:-build/models}
hearth=${HEARTH:-build/tools/hearth}
mkdir -p "$models"
for type in ${TYPES:-q4_0 f16}; do
  model="$models/synth1b-$type.gguf"
  if [ ! -f "$model" ]; then
    synth_type=$type
    case $type in f32|f16|bf16|q8_0|q4_0) ;; *) synth_type=f16 ;; esac
    synth_model="$models/synth1b-$synth_type.gguf"
    if [ ! -f "$synth_model" ]; then
      "$hearth" synth -o "$synth_model" --n-embd 2048 --n-layer 22 --n-ff 5632 --n-head 32 \
        --n-head-kv 4 --n-vocab 32000 --n-ctx 2048 --type "$synth_type"
    fi
    if [ "$synth_type" != "$type" ]; then "$hearth" quantize "$synth_model" "$model" "$type"; fi
  fi
  "$hearth" bench -m "$model" -p "${N_PROMPT:-512}" -n "${N_GEN:-128}" -t "$threads" -r "$reps" \
    -o "${FORMAT:-md}"
done
