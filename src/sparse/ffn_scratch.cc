#include "sparse/ffn_scratch.h"

#include <algorithm>
#include <numeric>

namespace hearth::sparse {
namespace {

// Floats of each buffer, in the order of the members.
struct Sizes {
  size_t gate, up, decided, score, hidden, file_order, observed, input, n_ff;
};

Sizes sizes(const FfnShape& s, const FfnMode& m) {
  const auto per_row = static_cast<size_t>(s.n_ff);
  const auto batch = static_cast<size_t>(s.n_batch);
  // A sparse decision is made for decode-sized groups only, unless prompts are masked too.
  const size_t decide_rows =
      m.masked_batches ? batch : std::min(batch, static_cast<size_t>(kMaxSparseBatch));
  const bool magnitude = m.mode == SparseMode::Oracle || m.mode == SparseMode::Threshold;
  const bool predictor = m.mode == SparseMode::Predictor;
  Sizes z{};
  z.gate = z.up = batch * per_row;
  z.decided = magnitude || (predictor && m.audit) ? decide_rows * per_row : 0;
  z.score = predictor ? decide_rows * per_row : 0;
  z.hidden = predictor ? decide_rows * static_cast<size_t>(s.max_hidden) : 0;
  // Dense products with ffn_down read the activations in the file's order; a sparse group that
  // takes the dense down scatters its few rows here.
  z.file_order = (s.reordered || m.observer ? batch : decide_rows) * per_row;
  z.observed = m.observer ? batch * per_row : 0;
  z.input = m.mode == SparseMode::Threshold ? decide_rows * static_cast<size_t>(s.n_embd) : 0;
  z.n_ff = per_row;
  return z;
}

}  // namespace

FfnScratch::FfnScratch(const FfnShape& shape, const FfnMode& mode) {
  const Sizes z = sizes(shape, mode);
  gate.resize(z.gate);
  up.resize(z.up);
  decided.resize(z.decided);
  score.resize(z.score);
  hidden.resize(z.hidden);
  file_order.resize(z.file_order);
  observed.resize(z.observed);
  input.resize(z.input);
  input_values.resize(z.input);
  input_idx.resize(z.input ? static_cast<size_t>(shape.n_embd) : 0);
  idx.resize(z.n_ff);
  all.resize(z.n_ff);
  std::iota(all.begin(), all.end(), 0);
  keep.resize(z.n_ff);
}

uint64_t FfnScratch::bytes(const FfnShape& shape, const FfnMode& mode) {
  const Sizes z = sizes(shape, mode);
  const size_t floats =
      z.gate + z.up + z.decided + z.score + z.hidden + z.file_order + z.observed + 2 * z.input;
  const size_t input_idx = z.input ? static_cast<size_t>(shape.n_embd) : 0;
  return floats * sizeof(float) + z.n_ff * (2 * sizeof(int32_t) + sizeof(uint8_t)) +
         input_idx * sizeof(int32_t);
}

}  // namespace hearth::sparse
