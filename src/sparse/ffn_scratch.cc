#include "sparse/ffn_scratch.h"

#include <algorithm>
#include <numeric>

namespace hearth::sparse {
namespace {

// Elements of each buffer, in the order of the members.
struct Sizes {
  size_t gate, up, decided, score, hidden, file_order, observed, input, decide_rows, list_rows,
      down_out, n_ff;
};

Sizes sizes(const FfnShape& s, const FfnMode& m) {
  const auto per_row = static_cast<size_t>(s.n_ff);
  const auto batch = static_cast<size_t>(s.n_batch);
  // A sparse decision is made for decode-sized groups only, unless prompts are masked too.
  const size_t decide_rows =
      m.masked_batches ? batch : std::min(batch, static_cast<size_t>(kMaxSparseBatch));
  const bool magnitude = m.mode == SparseMode::Oracle || m.mode == SparseMode::Threshold;
  const bool predictor = m.mode == SparseMode::Predictor;
  const bool sparse = m.mode != SparseMode::Dense;
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
  z.decide_rows = decide_rows;
  // Dense mode's groups share one list (a device's subset) and write straight into out.
  z.list_rows = sparse ? std::min(decide_rows, static_cast<size_t>(kDownListBlock)) : 0;
  z.down_out = sparse ? decide_rows * static_cast<size_t>(s.n_embd) : 0;
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
  input_idx.resize(z.input);
  input_counts.resize(z.input ? z.decide_rows : 0);
  down_tokens.resize(z.decide_rows);
  list_tokens.resize(z.list_rows);
  down_counts.resize(z.list_rows);
  down_idx.resize(z.list_rows * z.n_ff);
  down_coef.resize(z.list_rows * z.n_ff);
  down_out.resize(z.down_out);
  idx.resize(z.n_ff);
  all.resize(z.n_ff);
  std::iota(all.begin(), all.end(), 0);
}

uint64_t FfnScratch::bytes(const FfnShape& shape, const FfnMode& mode) {
  const Sizes z = sizes(shape, mode);
  const size_t floats = z.gate + z.up + z.decided + z.score + z.hidden + z.file_order +
                        z.observed + 2 * z.input + z.list_rows * z.n_ff + z.down_out;
  const size_t int32s = z.input + z.decide_rows + z.list_rows + z.list_rows * z.n_ff + 2 * z.n_ff;
  const size_t int64s = (z.input ? z.decide_rows : 0) + z.list_rows;
  return floats * sizeof(float) + int32s * sizeof(int32_t) + int64s * sizeof(int64_t);
}

}  // namespace hearth::sparse
