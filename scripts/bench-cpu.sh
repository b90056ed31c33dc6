#!/usr/bin/env bash
# The dense CPU benchmark of docs/benchmarks.md: a ~1B-parameter Llama-shaped model made by
# `hearth synth` (n_embd 2048, 22 layers, n_ff 5632, 32 heads, 4 KV heads, 32000 tokens) in F16
# and Q4_0, prompt processing and generation at THREADS threads, with the memory-bandwidth roofline.
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
    "$hearth" synth -o "$model" --n-embd 2048 --n-layer 22 --n-ff 5632 --n-head 32 --n-head-kv 4 \
      --n-vocab 32000 --n-ctx 2048 --type "$type"
  fi
  "$hearth" bench -m "$model" -p 512 -n 128 -t "$threads" -r "$reps" -o "${FORMAT:-md}"
done
