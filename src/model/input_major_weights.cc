// Model::Impl::hold_input_major_only (model_impl.h): a model-wide float model's projections held
// only as their input-major copies.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "model/config.h"
#include "model/model_impl.h"

namespace hearth {

bool Model::Impl::hold_input_major_only(int32_t min_width) {
  // Copies that keep the file's type (F32, F16: lane_matvec's), of separate matrices: a fused
  // q|k|v or gate|up would need its views' copies side by side in its own bytes.
  const auto copies_exactly = [](const Matrix& w) {
    return !w.present() || w.type == DType::F32 || w.type == DType::F16;
  };
  // (A file whose sessions default to predictors keeps its matrices: its attention would run
  // dense through the copies.)
  const bool allowed =
      !device && auto_sparse_mode() == SparseMode::Threshold && model_wide(config.thresholds) &&
      config.n_embd >= min_width &&
      std::all_of(weights.layers.begin(), weights.layers.end(), [&](const LayerWeights& l) {
        return !l.wqkv.present() && !l.ffn_gate_up.present() && copies_exactly(l.wq) &&
               copies_exactly(l.wk) && copies_exactly(l.wv) && copies_exactly(l.wo) &&
               copies_exactly(l.ffn_gate) && copies_exactly(l.ffn_up);
      });
  if (!allowed) return false;
  // Layer by layer, so that the load holds at most one layer's copies beside the file. `image`:
  // the writable file image, where the file was read into memory (one edit_in_place for all, as
  // each changes the protection of the whole image), else null. A matrix outside the image (in a
  // buffer of the loader's, as a mapped file's reordered neurons are) leaves its buffer unused.
  // q, k and v share one copy (each input's three rows one run, which decode steps read far
  // faster than three short ones) where they lie one after another in the image, whose bytes then
  // take the joint copy.
  const auto follows = [](const Matrix& a, const Matrix& b) {
    return static_cast<const uint8_t*>(a.data) + a.bytes() == b.data;
  };
  const bool joint = std::all_of(weights.layers.begin(), weights.layers.end(), [&](const auto& l) {
    return follows(l.wq, l.wk) && follows(l.wk, l.wv) &&
           file->contains(l.wq.data, l.wq.bytes() + l.wk.bytes() + l.wv.bytes());
  });
  std::vector<const void*> unused;
  const auto hold = [&](uint8_t* image) {
    // Where the copy of the matrices at [at, at + bytes) is to lie: over them where the image is
    // writable (`placed`), else in its own buffer, the matrices' pages released or their buffer
    // marked unused.
    const auto place_copy = [&](const void* at, uint64_t bytes, const void* copy, bool& placed) {
      if (!file->contains(at, bytes)) {
        unused.push_back(at);
      } else if (!image) {
        file->release(at, bytes);
      } else {
        std::memcpy(image + (static_cast<const uint8_t*>(at) - file->image()), copy, bytes);
        return at;
      }
      placed = false;
      return copy;
    };
    const auto view = [](const Matrix& w, const void* data, int64_t stride) {
      return Matrix{w.type, data, w.rows, w.cols, /*input_major=*/true, stride};
    };
    const auto place = [&](size_t il, InputMajorLayer& t, std::vector<HugeBuffer>& buffers) {
      LayerWeights& l = weights.layers[il];
      bool placed = true;
      std::vector<std::pair<Matrix*, Matrix*>> pairs = {
          {&l.wo, &t.wo_t}, {&l.ffn_gate, &t.gate_t}, {&l.ffn_up, &t.up_t}};
      if (t.wqkv_t.present()) {
        const auto* at = static_cast<const uint8_t*>(
            place_copy(l.wq.data, t.wqkv_t.bytes(), t.wqkv_t.data, placed));
        t.wqkv_t.data = at;
        const auto stride = static_cast<int64_t>(row_bytes(t.wqkv_t.type, t.wqkv_t.cols));
        const auto elem = static_cast<int64_t>(row_bytes(t.wqkv_t.type, 1));
        l.wv = view(l.wv, at + (l.wq.rows + l.wk.rows) * elem, stride);
        l.wk = view(l.wk, at + l.wq.rows * elem, stride);
        l.wq = view(l.wq, at, stride);
      } else {
        pairs.insert(pairs.end(), {{&l.wq, &t.wq_t}, {&l.wk, &t.wk_t}, {&l.wv, &t.wv_t}});
      }
      for (const auto& [w, copy] : pairs) {
        // No copy where its input skips nothing (make_input_major): the file's matrix stays.
        if (!w->present() || !copy->present()) continue;
        copy->data = place_copy(w->data, w->bytes(), copy->data, placed);
        *w = view(*w, copy->data, 0);
      }
      if (placed) buffers.clear();  // the copies are in the file's bytes now
    };
    // input_major() returns these from now on.
    std::call_once(input_major_once_, [&] {
      input_major_ = sparse::make_input_major(weights.layers, config.input_shares, joint, place);
    });
  };
  if (!file->edit_in_place(file->image(), file->file_size(), hold)) hold(nullptr);
  std::erase_if(reordered, [&](const HugeBuffer& b) {
    return std::find(unused.begin(), unused.end(), b.data()) != unused.end();
  });
  return true;
}

}  // namespace hearth
