#include "sparse/neuron_major.h"

#include <vector>

#include "core/quantize.h"

namespace hearth::sparse {

DType neuron_major_type(DType t, int64_t n_embd) {
  switch (t) {
    case DType::F32:
    case DType::BF16:
      return DType::F32;
    case DType::F16:
      return DType::F16;
    default:
      return n_embd % dtype_block_size(DType::Q8_0) == 0 ? DType::Q8_0 : DType::F16;
  }
}

namespace {

// The transpose of w ([rows, cols] -> [cols, rows]) in `type`, its row j holding w's column
// order[j] (j itself without an order), stored in a new buffer of `storage`.
Matrix transpose(const Matrix& w, DType type, const int32_t* order,
                 std::vector<HugeBuffer>& storage) {
  const int64_t rows = w.rows, cols = w.cols;
  // Dequantize all of w once (rows * cols floats), then write it column by column.
  std::vector<float> all(static_cast<size_t>(rows * cols)), column(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) dequantize_row(w.type, w.row(r), all.data() + r * cols, cols);
  const int64_t rb = row_bytes(type, rows);
  auto& blob = storage.emplace_back(static_cast<size_t>(rb * cols));
  for (int64_t j = 0; j < cols; ++j) {
    const int64_t i = order ? order[j] : j;
    for (int64_t r = 0; r < rows; ++r) column[r] = all[r * cols + i];
    quantize_row(type, column.data(), blob.data() + j * rb, rows);
  }
  return Matrix{type, blob.data(), cols, rows};
}

}  // namespace

DType input_major_type(DType t, int64_t rows) {
  const auto fits = [rows](DType b) { return rows % dtype_block_size(b) == 0; };
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
      return neuron_major_type(t, rows);
    case DType::Q6_K:
      if (fits(t)) return t;
      return fits(DType::Q8_0) ? DType::Q8_0 : DType::F16;
    case DType::Q5_K:
    case DType::Q5_0:
    case DType::Q5_1:
      if (fits(DType::Q5_K)) return DType::Q5_K;
      return fits(DType::Q8_0) ? DType::Q8_0 : DType::F16;
    case DType::Q4_0:
      return fits(DType::Q4_0) ? DType::Q4_0 : DType::F16;
    default:  // the 4-bit and smaller types: Q4_K where it fits
      if (fits(DType::Q4_K)) return DType::Q4_K;
      return fits(DType::Q4_0) ? DType::Q4_0 : DType::F16;
  }
}

InputMajor make_input_major(const std::vector<LayerWeights>& layers) {
  InputMajor out;
  for (const LayerWeights& l : layers) {
    InputMajorLayer& t = out.layers.emplace_back();
    const auto copy = [&out](const Matrix& w) {
      return w.present() ? transpose(w, input_major_type(w.type, w.rows), nullptr, out.storage)
                         : Matrix{};
    };
    t.wq_t = copy(l.wq);
    t.wk_t = copy(l.wk);
    t.wv_t = copy(l.wv);
    t.wo_t = copy(l.wo);
    t.gate_t = copy(l.ffn_gate);
    t.up_t = copy(l.ffn_up);
  }
  return out;
}

NeuronMajorDown make_neuron_major_down(const std::vector<LayerWeights>& layers,
                                       const std::vector<std::vector<int32_t>>& orders) {
  NeuronMajorDown out;
  out.layers.resize(layers.size());
  for (size_t il = 0; il < layers.size(); ++il) {
    const Matrix& down = layers[il].ffn_down;  // [n_embd, n_ff]
    if (layers[il].ffn_down_t.present() || !down.present()) continue;
    const bool reordered = il < orders.size() && !orders[il].empty();
    out.layers[il] = transpose(down, neuron_major_type(down.type, down.rows),
                               reordered ? orders[il].data() : nullptr, out.storage);
  }
  return out;
}

}  // namespace hearth::sparse
