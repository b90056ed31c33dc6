#!/usr/bin/env bash
# Hearth against llama.cpp on the conformance files (../shared/conformance): for every file its
# perplexity (-c 256, 40 chunks of ../shared/data/tinystories-eval.txt) beside llama.cpp's figure
# from references.md, and how many characters of llama.cpp's greedy text ("Once upon a time",
# 128 tokens) Hearth reproduces. Prints a Markdown table (docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${SHARED:-../shared}
hearth=${HEARTH:-build/tools/hearth}
threads=${THREADS:-2}
dir=$shared/conformance
echo "| file | Hearth PPL | llama.cpp PPL | ratio | greedy chars agreeing |"
echo "|---|---|---|---|---|"
grep -E '^\| stories260K-w256-[A-Za-z0-9_]+\.gguf' "$dir/references.md" | while IFS='|' read -r _ file ref _; do
  file=$(echo "$file" | xargs)
  ref=$(echo "$ref" | xargs)
  ppl=$("$hearth" perplexity -m "$dir/$file" -f "$shared/data/tinystories-eval.txt" -c 256 \
        --chunks 40 -t "$threads" 2>/dev/null | sed -n 's/^PPL = \([0-9.]*\).*/\1/p')
  want=$(sed 's/^ *//' "$dir/${file%.gguf}.greedy128.txt")
  got=$("$hearth" run -m "$dir/$file" -p "Once upon a time" -n 128 --temp 0 -t "$threads" \
        2>/dev/null | sed 's/^ *//')
  agree=$(python3 -c 'import sys
a, b = sys.argv[1], sys.argv[2]
i = 0
while i < min(len(a), len(b)) and a[i] == b[i]: i += 1
print(f"{i} of {len(b)}")' "$got" "$want")
  ratio=$(python3 -c "print(f'{$ppl / $ref:.4f}')")
  echo "| $file | $ppl | $ref | $ratio | $agree |"
done
