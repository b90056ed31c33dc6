#include "sparse/neuron_major.h"

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

NeuronMajorDown make_neuron_major_down(const std::vector<LayerWeights>& layers,
                                       const std::vector<std::vector<int32_t>>& orders) {
  NeuronMajorDown out;
  out.layers.resize(layers.size());
  std::vector<float> rows, column;
  for (size_t il = 0; il < layers.size(); ++il) {
    const Matrix& down = layers[il].ffn_down;  // [n_embd, n_ff]
    if (layers[il].ffn_down_t.present() || !down.present()) continue;
    const int64_t n_embd = down.rows, n_ff = down.cols;
    const DType type = neuron_major_type(down.type, n_embd);
    // Dequantize all of down once (n_embd * n_ff floats), then write it column by column.
    rows.resize(static_cast<size_t>(n_embd * n_ff));
    for (int64_t r = 0; r < n_embd; ++r) {
      dequantize_row(down.type, down.row(r), rows.data() + r * n_ff, n_ff);
    }
    const int64_t rb = row_bytes(type, n_embd);
    auto& blob = out.storage.emplace_back(static_cast<size_t>(rb * n_ff));
    column.resize(static_cast<size_t>(n_embd));
    const bool reordered = il < orders.size() && !orders[il].empty();
    for (int64_t j = 0; j < n_ff; ++j) {
      const int64_t i = reordered ? orders[il][static_cast<size_t>(j)] : j;
      for (int64_t r = 0; r < n_embd; ++r) column[r] = rows[r * n_ff + i];
      quantize_row(type, column.data(), blob.data() + j * rb, n_embd);
    }
    out.layers[il] = Matrix{type, blob.data(), n_ff, n_embd};
  }
  return out;
}

}  // namespace hearth::sparse
