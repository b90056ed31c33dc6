#include "model/predictor_q8.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "core/quantize.h"

namespace hearth {
namespace {

bool float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// w's rows in Q8_0, into out (rows * row_bytes(Q8_0, cols) bytes), rows split over the pool.
void to_q8_0(cpu::ThreadPool& pool, const Matrix& w, uint8_t* out) {
  const auto rb = static_cast<size_t>(row_bytes(DType::Q8_0, w.cols));
  cpu::run_ranges(pool, w.rows, [&](int64_t first, int64_t last) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = first; r < last; ++r) {
      dequantize_row(w.type, w.row(r), row.data(), w.cols);
      quantize_row(DType::Q8_0, row.data(), out + static_cast<size_t>(r) * rb, w.cols);
    }
  });
}

}  // namespace

void hold_predictors_q8(Model::Impl& m) {
  cpu::ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  for (LayerWeights& l : m.weights.layers) {
    for (Matrix* w : {&l.fc1, &l.fc2}) {
      if (!w->present() || !float_type(w->type) || w->cols % dtype_block_size(DType::Q8_0) != 0) {
        continue;
      }
      Matrix q8{DType::Q8_0, nullptr, w->rows, w->cols};
      HugeBuffer converted(q8.bytes());
      to_q8_0(pool, *w, converted.data());
      const bool in_place = m.file->edit_in_place(w->data, w->bytes(), [&](uint8_t* data) {
        std::memcpy(data, converted.data(), q8.bytes());
      });
      if (in_place) {
        q8.data = w->data;
      } else {
        q8.data = m.converted.emplace_back(std::move(converted)).data();
      }
      *w = q8;
    }
  }
}

}  // namespace hearth
