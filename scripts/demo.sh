#!/usr/bin/env bash
# Quick start: install dependencies, build, make a model and generate text with it.
# Uses ../shared/models/stories260K.gguf (a real pretrained model) when it is there; otherwise a
# random-weight model made by `hearth synth` (its text is gibberish, but every stage runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
mkdir -p build/models
if [ -f ../shared/models/stories260K.gguf ]; then
  model=../shared/models/stories260K.gguf
  prompt="Once upon a time"
else
  model=build/models/demo-synth.gguf
  build/tools/hearth synth -o "$model" --n-embd 256 --n-layer 4 --n-ff 768 --type q8_0
  prompt="hello"
fi
build/tools/hearth inspect "$model" | sed -n '/hyper-parameters/,/tokenizer/p'
build/tools/hearth run -m "$model" -p "$prompt" -n 64 --temp 0
echo
