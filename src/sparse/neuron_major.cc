#include "sparse/neuron_major.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "core/quantize.h"
#include "hearth/types.h"
#include "ops/input_sparse.h"
#include "ops/sparse_matmul.h"

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

// Output rows (w's columns) gathered per pass: each pass reads one cache line of every row of
// the dequantized matrix, instead of one float per line as a column at a time would.
constexpr int64_t kColumnsPerPass = 16;

// A pool for making copies at load time: every core, as `hearth quantize` uses.
int copy_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Makes transposed copies on a pool of every core, with one buffer for the dequantized matrix
// kept from copy to copy (a fresh one per matrix would fault its pages in again each time).
class Transposer {
 public:
  Transposer() : pool_(copy_threads()) {}

  // The transpose of w ([rows, cols] -> [cols, rows]) in `type`, its row j holding w's column
  // order[j] (j itself without an order), stored in a new buffer of `storage`. The values, and
  // so the bytes, do not depend on the thread count.
  Matrix operator()(const Matrix& w, DType type, const int32_t* order,
                    std::vector<HugeBuffer>& storage) {
    return (*this)(std::span<const Matrix>(&w, 1), type, order, storage);
  }

  // The same for matrices of equal cols stacked one above the other: row j of the copy holds
  // their columns j side by side, in the order given.
  Matrix operator()(std::span<const Matrix> parts, DType type, const int32_t* order,
                    std::vector<HugeBuffer>& storage) {
    const int64_t cols = parts.front().cols;
    int64_t rows = 0;
    for (const Matrix& w : parts) rows += w.rows;
    const bool same_floats = dtype_block_size(type) == 1 &&
                             std::all_of(parts.begin(), parts.end(), [&](const Matrix& w) {
                               return w.type == type;
                             });
    if (same_floats) return transpose_elements(parts, rows, cols, type, order, storage);
    // all[rows, cols]: the parts dequantized once.
    const auto elements = static_cast<size_t>(rows * cols);
    if (all_.size() < elements) all_.resize(elements);
    float* const all = all_.data();
    for (int64_t row0 = 0; const Matrix& w : parts) {
      cpu::run_ranges(pool_, w.rows, [&](int64_t first, int64_t last) {
        for (int64_t r = first; r < last; ++r) {
          dequantize_row(w.type, w.row(r), all + (row0 + r) * cols, cols);
        }
      });
      row0 += w.rows;
    }
    const int64_t rb = row_bytes(type, rows);
    auto& blob = storage.emplace_back(static_cast<size_t>(rb * cols));
    const int64_t passes = (cols + kColumnsPerPass - 1) / kColumnsPerPass;
    cpu::run_ranges(pool_, passes, [&](int64_t first, int64_t last) {
      // [kColumnsPerPass, rows]: one pass's output rows before quantization.
      const std::unique_ptr<float[]> columns(new float[kColumnsPerPass * rows]);
      int64_t source[kColumnsPerPass];
      for (int64_t p = first; p < last; ++p) {
        const int64_t j0 = p * kColumnsPerPass, count = std::min(kColumnsPerPass, cols - j0);
        for (int64_t c = 0; c < count; ++c) source[c] = order ? order[j0 + c] : j0 + c;
        for (int64_t r = 0; r < rows; ++r) {
          const float* row = all + r * cols;
          for (int64_t c = 0; c < count; ++c) columns[c * rows + r] = row[source[c]];
        }
        for (int64_t c = 0; c < count; ++c) {
          quantize_row_quick(type, columns.get() + c * rows, blob.data() + (j0 + c) * rb, rows);
        }
      }
    });
    return Matrix{type, blob.data(), cols, rows};
  }

 private:
  // A float copy in the parts' own type: each element moved as it is (its bytes, so its value),
  // a pass taking a cache line of every source row.
  Matrix transpose_elements(std::span<const Matrix> parts, int64_t rows, int64_t cols, DType type,
                            const int32_t* order, std::vector<HugeBuffer>& storage) {
    std::vector<const uint8_t*> source_rows;
    for (const Matrix& w : parts) {
      for (int64_t r = 0; r < w.rows; ++r) source_rows.push_back(w.row(r));
    }
    auto& blob = storage.emplace_back(static_cast<size_t>(row_bytes(type, rows) * cols));
    if (row_bytes(type, 1) == 2) {
      move_elements<uint16_t>(source_rows, rows, cols, order, blob.data());
    } else {
      move_elements<uint32_t>(source_rows, rows, cols, order, blob.data());
    }
    return Matrix{type, blob.data(), cols, rows};
  }

  // out[j][r] = rows[r][order ? order[j] : j], elements of type E, in tiles of kTile by kTile
  // elements: a tile touches kTile rows on each side, few enough pages for the TLB.
  template <typename E>
  void move_elements(const std::vector<const uint8_t*>& rows_in, int64_t rows, int64_t cols,
                     const int32_t* order, uint8_t* out_bytes) {
    constexpr int64_t kTile = 64 / sizeof(E) * 2;
    auto* const out = reinterpret_cast<E*>(out_bytes);
    const int64_t passes = (cols + kTile - 1) / kTile;
    cpu::run_ranges(pool_, passes, [&](int64_t first, int64_t last) {
      for (int64_t p = first; p < last; ++p) {
        const int64_t j0 = p * kTile, count = std::min(kTile, cols - j0);
        int64_t from[kTile];
        for (int64_t c = 0; c < count; ++c) from[c] = order ? order[j0 + c] : j0 + c;
        for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
          const int64_t r1 = std::min(rows, r0 + kTile);
          for (int64_t c = 0; c < count; ++c) {
            E* const to = out + (j0 + c) * rows;
            for (int64_t r = r0; r < r1; ++r) {
              to[r] = reinterpret_cast<const E*>(rows_in[static_cast<size_t>(r)])[from[c]];
            }
          }
        }
      }
    });
  }

  cpu::ThreadPool pool_;
  std::vector<float> all_;  // grows to the largest matrix copied
};

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

namespace {

// The type of q, k and v's one copy side by side, where their copies would have one type whose
// blocks tile each of the three: the copy's blocks run along the outputs and are quantized one
// by one, so the joint copy holds the bytes three would, and a decode step reads each input's
// three rows as one run. Empty where they keep a copy each.
std::optional<DType> joint_qkv_type(const LayerWeights& l) {
  if (!l.wq.present()) return std::nullopt;
  const DType type = input_major_type(l.wq.type, l.wq.rows);
  for (const Matrix* w : {&l.wq, &l.wk, &l.wv}) {
    if (!w->present() || w->type != l.wq.type || w->cols != l.wq.cols ||
        input_major_type(w->type, w->rows) != type || w->rows % dtype_block_size(type) != 0) {
      return std::nullopt;
    }
  }
  return type;
}

}  // namespace

double axpy_crossover(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return 0.65;
    case DType::Q8_0:
      return 0.4;
    default:
      return 0.35;
  }
}

double down_crossover(const Matrix& down, const Matrix& down_t) {
  const double file = static_cast<double>(row_bytes(down.type, down.cols)) / down.cols;
  const double copy = static_cast<double>(row_bytes(down_t.type, down_t.cols)) / down_t.cols;
  return axpy_crossover(down_t.type) * std::min(1.0, file / copy);
}

namespace {

// input_copies_pay for an input that reads a share `read` of its elements.
bool copies_pay(double read, std::span<const Matrix* const> fed) {
  // An input that skips nothing reads every row of a copy, slower than the file's matrix.
  if (read >= 1.0) return false;
  return std::all_of(fed.begin(), fed.end(), [read](const Matrix* w) {
    if (!w || !w->present()) return true;
    const DType type = input_major_type(w->type, w->rows);
    return dtype_block_size(type) == 1 || read < axpy_crossover(type);
  });
}

// The matrices an input other than down's feeds (null where it feeds fewer).
std::array<const Matrix*, 3> fed_by(const LayerWeights& l, InputKind input) {
  switch (input) {
    case kAttnIn:
      return {&l.wq, &l.wk, &l.wv};
    case kAttnOut:
      return {&l.wo, nullptr, nullptr};
    default:
      return {&l.ffn_gate, &l.ffn_up, nullptr};
  }
}

// The shape and type (no data) of the neuron-major copy make_neuron_major_down makes of `down`.
Matrix neuron_major_shape(const Matrix& down) {
  return Matrix{neuron_major_type(down.type, down.rows), nullptr, down.cols, down.rows};
}

// Down's share of input_read: the axpy over its neuron-major copy below the crossover, else the
// dense product (a file with only ffn_down_t reads it whole when dense).
InputRead down_read(const LayerWeights& l, double read) {
  const Matrix& down = l.ffn_down;
  const Matrix down_t =
      l.ffn_down_t.present() || !down.present() ? l.ffn_down_t : neuron_major_shape(down);
  InputRead r;
  r.dense = static_cast<double>((down.present() ? down : down_t).bytes());
  const double crossover =
      down.present() ? down_crossover(down, down_t) : axpy_crossover(down_t.type);
  if (down.present() && read >= crossover) {
    r.bytes = r.time = r.dense;
    return r;
  }
  r.bytes = read * static_cast<double>(down_t.bytes());
  r.time = dtype_block_size(down_t.type) == 1
               ? r.bytes + read * static_cast<double>(down_t.rows) * kFloatCopyRowCost
               : r.dense * read / crossover;
  return r;
}

}  // namespace

bool input_copies_pay(const std::vector<float>& input_shares, size_t layer, InputKind input,
                      std::initializer_list<const Matrix*> fed) {
  if (input_shares.empty()) return true;
  return copies_pay(1.0 - input_shares[kInputKinds * layer + static_cast<size_t>(input)],
                    std::span(fed.begin(), fed.size()));
}

InputRead input_read(const LayerWeights& l, InputKind input, double read) {
  if (input == kDownIn) return down_read(l, read);
  const std::array<const Matrix*, 3> fed = fed_by(l, input);
  const bool copies = copies_pay(read, fed);
  InputRead r;
  // Float copies are walked one by one, each paying its cost per row read, except q, k and v's
  // joint copy, whose rows hold each input's three runs side by side (one walk).
  int walks = 0;
  int64_t inputs = 0;
  for (const Matrix* w : fed) {
    if (!w || !w->present()) continue;
    const auto whole = static_cast<double>(w->bytes());
    r.dense += whole;
    if (!copies) {
      r.bytes += whole, r.time += whole;
      continue;
    }
    const DType type = input_major_type(w->type, w->rows);
    const double copy = read * static_cast<double>(row_bytes(type, w->rows) * w->cols);
    r.bytes += copy;
    const bool exact = dtype_block_size(type) == 1;
    r.time += exact ? copy : read * whole / axpy_crossover(type);
    walks += exact ? 1 : 0;
    inputs = w->cols;
  }
  if (input == kAttnIn && joint_qkv_type(l)) walks = std::min(walks, 1);
  r.time += read * static_cast<double>(walks * inputs) * kFloatCopyRowCost;
  return r;
}

InputMajor make_input_major(const std::vector<LayerWeights>& layers,
                            const std::vector<float>& input_shares, bool joint_qkv,
                            const InputMajorVisit& visit) {
  InputMajor out;
  Transposer transpose;
  std::vector<HugeBuffer> storage;  // the layer's copies
  // The inputs in the order of a copy's rows, as its reader wants them (copy_is_lane_grouped):
  // lane-grouped, or input order (null).
  std::vector<int32_t> grouped;
  const auto row_order = [&grouped](DType from, DType type, int64_t inputs) -> const int32_t* {
    if (!copy_is_lane_grouped(from, type)) return nullptr;
    grouped.resize(static_cast<size_t>(inputs));
    for (int64_t i = 0; i < inputs; ++i) {
      grouped[static_cast<size_t>(lane_grouped_row(i, inputs))] = static_cast<int32_t>(i);
    }
    return grouped.data();
  };
  for (size_t il = 0; il < layers.size(); ++il) {
    const LayerWeights& l = layers[il];
    InputMajorLayer& t = out.layers.emplace_back();
    const auto pay = [&](InputKind input, std::initializer_list<const Matrix*> fed) {
      return input_copies_pay(input_shares, il, input, fed);
    };
    const auto copy = [&storage, &transpose, &row_order](const Matrix& w) {
      if (!w.present()) return Matrix{};
      const DType type = input_major_type(w.type, w.rows);
      return transpose(w, type, row_order(w.type, type, w.cols), storage);
    };
    if (pay(kAttnIn, {&l.wq, &l.wk, &l.wv})) {
      if (const std::optional<DType> joint = joint_qkv ? joint_qkv_type(l) : std::nullopt) {
        const Matrix parts[] = {l.wq, l.wk, l.wv};
        t.wqkv_t = transpose(parts, *joint, row_order(l.wq.type, *joint, l.wq.cols), storage);
      } else {
        t.wq_t = copy(l.wq);
        t.wk_t = copy(l.wk);
        t.wv_t = copy(l.wv);
      }
    }
    if (pay(kAttnOut, {&l.wo})) t.wo_t = copy(l.wo);
    if (pay(kFfnIn, {&l.ffn_gate, &l.ffn_up})) {
      t.gate_t = copy(l.ffn_gate);
      t.up_t = copy(l.ffn_up);
    }
    if (visit) visit(il, t, storage);
    for (HugeBuffer& b : storage) out.storage.push_back(std::move(b));
    storage.clear();
  }
  return out;
}

NeuronMajorDown make_neuron_major_down(const std::vector<LayerWeights>& layers,
                                       const std::vector<std::vector<int32_t>>& orders,
                                       const std::vector<float>& input_shares) {
  NeuronMajorDown out;
  out.layers.resize(layers.size());
  Transposer transpose;
  const bool by_shares = input_shares.size() == kInputKinds * layers.size();
  for (size_t il = 0; il < layers.size(); ++il) {
    const Matrix& down = layers[il].ffn_down;  // [n_embd, n_ff]
    if (layers[il].ffn_down_t.present() || !down.present()) continue;
    if (by_shares && !layers[il].has_predictor()) {
      const double read = 1.0 - input_shares[kInputKinds * il + kDownIn];
      if (read >= down_crossover(down, neuron_major_shape(down))) continue;
    }
    const bool reordered = il < orders.size() && !orders[il].empty();
    out.layers[il] = transpose(down, neuron_major_type(down.type, down.rows),
                               reordered ? orders[il].data() : nullptr, out.storage);
  }
  return out;
}

}  // namespace hearth::sparse
