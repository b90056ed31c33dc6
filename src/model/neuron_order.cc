#include "model/neuron_order.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "core/error.h"

namespace hearth {
namespace {

// dst row j = src row order[j], rows of rb bytes.
void gather_rows(const uint8_t* src, size_t rb, const std::vector<int32_t>& order, uint8_t* dst) {
  for (size_t j = 0; j < order.size(); ++j) {
    std::memcpy(dst + j * rb, src + static_cast<size_t>(order[j]) * rb, rb);
  }
}

// Puts mat's rows ([n_ff, cols]) in `order`: in place in a private copy of the file, else into
// a new buffer that mat then views.
void reorder_rows(Model::Impl& m, Matrix& mat, const std::vector<int32_t>& order) {
  if (!mat.present()) return;
  if (mat.rows != static_cast<int64_t>(order.size())) {
    fail(m.file->path(), ": cannot reorder a matrix of ", mat.rows, " rows by ", order.size(),
         " neurons");
  }
  const size_t rb = row_bytes(mat.type, mat.cols), bytes = mat.bytes();
  const bool edited = m.file->edit_in_place(mat.data, bytes, [&](uint8_t* data) {
    const std::vector<uint8_t> before(data, data + bytes);
    gather_rows(before.data(), rb, order, data);
  });
  if (edited) return;
  HugeBuffer& copy = m.reordered.emplace_back(bytes);
  gather_rows(static_cast<const uint8_t*>(mat.data), rb, order, copy.data());
  m.file->release(mat.data, bytes);  // the mapped pages just read, which nothing reads again
  mat.data = copy.data();
}

}  // namespace

std::vector<float> layer_frequency(const Model::Impl& m, size_t il) {
  const int64_t n_ff = m.config.n_ff;
  const gguf::TensorInfo* t = m.file->find_tensor("blk." + std::to_string(il) + ".ffn_act_freq");
  if (!t || t->type != static_cast<uint32_t>(DType::F32) || t->n_elements() != n_ff) return {};
  const auto* p = reinterpret_cast<const float*>(t->data);
  std::vector<float> freq(p, p + n_ff);
  if (const int32_t* order = m.order(il)) {
    for (int64_t j = 0; j < n_ff; ++j) freq[j] = p[order[j]];
  }
  return freq;
}

std::vector<int32_t> frequency_order(const std::vector<float>& freq) {
  std::vector<int32_t> order(freq.size());
  std::iota(order.begin(), order.end(), 0);
  // NaN sorts last, so a damaged frequency cannot break the ordering.
  const auto key = [&](int32_t i) { return std::isnan(freq[i]) ? -1.0f : freq[i]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return key(a) > key(b); });
  for (size_t j = 0; j < order.size(); ++j) {
    if (order[j] != static_cast<int32_t>(j)) return order;
  }
  return {};
}

void reorder_neurons(Model::Impl& m) {
  Weights& w = m.weights;
  m.neuron_order.assign(w.layers.size(), {});
  for (size_t il = 0; il < w.layers.size(); ++il) {
    std::vector<int32_t> order = frequency_order(layer_frequency(m, il));
    if (order.empty()) continue;
    LayerWeights& l = w.layers[il];
    for (Matrix* mat : {&l.ffn_gate, &l.ffn_up, &l.ffn_down_t, &l.fc2}) {
      reorder_rows(m, *mat, order);
    }
    if (l.ffn_up_b) {
      std::vector<float>& bias = w.owned.emplace_back(order.size());
      for (size_t j = 0; j < order.size(); ++j) bias[j] = l.ffn_up_b[order[j]];
      l.ffn_up_b = bias.data();
    }
    m.neuron_order[il] = std::move(order);
  }
}

}  // namespace hearth
