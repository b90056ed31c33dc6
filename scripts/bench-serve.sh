#!/usr/bin/env bash
# Continuous batching throughput of `hearth serve`: the ~1B-parameter Llama shape of bench-cpu.sh
# (made by `hearth synth`, TYPE q4_0 or f16), served with --parallel PARALLEL at THREADS threads,
# and rounds of 1, 4 and 8 concurrent streaming clients (curl). Every client asks for MAX_TOKENS
# tokens at temperature 0 with ignore_eos, so each gets exactly that many. A round's aggregate
# tokens/s is its completion tokens over its wall time (prompts included: a few tokens each).
# Prints one markdown table, with the engine's mean batch (tokens per forward pass) per round.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${THREADS:-2}
type=${TYPE:-q4_0}
parallel=${PARALLEL:-8}
max_tokens=${MAX_TOKENS:-64}
rounds=${CLIENTS:-1 4 8}
models=${MODEL_DIR:-build/models}
hearth=${HEARTH:-build/tools/hearth}
mkdir -p "$models"
model="$models/synth1b-$type.gguf"
if [ ! -f "$model" ]; then
  "$hearth" synth -o "$model" --n-embd 2048 --n-layer 22 --n-ff 5632 --n-head 32 --n-head-kv 4 \
    --n-vocab 32000 --n-ctx 2048 --type "$type"
fi

work=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# SERVE_FLAGS: more flags for the server, e.g. --no-mmap (faster on machines where mapped
# weights do not get huge pages, docs/benchmarks.md "Why mmap is slower here").
# shellcheck disable=SC2086
"$hearth" serve -m "$model" --port 0 --parallel "$parallel" -t "$threads" -c 256 ${SERVE_FLAGS:-} \
  2>"$work/server.log" &
server_pid=$!
port=
for _ in $(seq 600); do
  port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/server.log" | head -1)
  if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null; then break; fi
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 0.2
done
url="http://127.0.0.1:$port"

now() { date +%s.%N; }
metric() { curl -s "$url/metrics" | sed -n "s/^$1 //p"; }
# Client i of a round: its own prompt, streamed; the output keeps the final usage chunk.
client() {
  curl -sN "$url/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"prompt\": \"Client $1 tells story number $1:\", \"max_tokens\": $max_tokens, \"temperature\": 0, \"ignore_eos\": true, \"stream\": true}" \
    >"$work/client$1.out"
}

client 0  # warm-up: pages the weights in
echo "model $(basename "$model"), --parallel $parallel, -t $threads, $max_tokens tokens per client"
echo
echo "| clients | tokens | wall s | aggregate tok/s | per client tok/s | vs 1 client | mean batch |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
base=
for n in $rounds; do
  steps0=$(metric hearth_engine_steps_total)
  tokens0=$(metric hearth_engine_tokens_total)
  t0=$(now)
  pids=()
  for i in $(seq 1 "$n"); do client "$i" & pids+=($!); done
  wait "${pids[@]}"
  t1=$(now)
  steps=$(awk -v a="$(metric hearth_engine_steps_total)" -v b="$steps0" 'BEGIN { print a - b }')
  evaluated=$(awk -v a="$(metric hearth_engine_tokens_total)" -v b="$tokens0" 'BEGIN { print a - b }')
  total=0
  for i in $(seq 1 "$n"); do
    got=$(grep -o '"completion_tokens":[0-9]*' "$work/client$i.out" | tail -1 | cut -d: -f2)
    total=$((total + ${got:-0}))
  done
  awk -v n="$n" -v tok="$total" -v t0="$t0" -v t1="$t1" -v base="$base" -v steps="$steps" \
    -v ev="$evaluated" 'BEGIN {
      s = t1 - t0; agg = tok / s
      printf "| %d | %d | %.2f | %.2f | %.2f | %s | %.2f |\n", n, tok, s, agg, agg / n,
             base == "" ? "1.00x" : sprintf("%.2fx", agg / base), steps ? ev / steps : 0 }'
  if [ -z "$base" ]; then base=$(awk -v tok="$total" -v t0="$t0" -v t1="$t1" 'BEGIN { print tok / (t1 - t0) }'); fi
done
