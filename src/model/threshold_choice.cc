// threshold_choice.h: the bytes a threshold decode step reads, estimated from the file's calibrated
// shares, and auto's choice from them.
#include "model/threshold_choice.h"

#include <cstdio>
#include <initializer_list>

#include "model/config.h"
#include "sparse/neuron_major.h"

namespace hearth {
namespace {

// The bytes of w's input-major copy ([cols inputs, rows outputs] in input_major_type).
uint64_t copy_bytes(const Matrix& w) {
  if (!w.present()) return 0;
  const DType type = sparse::input_major_type(w.type, w.rows);
  return static_cast<uint64_t>(w.cols) * row_bytes(type, w.rows);
}

}  // namespace

double threshold_byte_share(const Model::Impl& m) {
  const std::vector<float>& shares = m.config.input_shares;
  const auto& layers = m.weights.layers;
  if (shares.size() != kInputKinds * layers.size()) return 1.0;
  uint64_t dense = m.weights.output.bytes();
  double sparse = static_cast<double>(dense);
  for (size_t il = 0; il < layers.size(); ++il) {
    const LayerWeights& l = layers[il];
    const auto read = [&](InputKind input) {
      return 1.0 - shares[kInputKinds * il + static_cast<size_t>(input)];
    };
    // The matrices one input feeds: through their copies where those pay, else whole.
    const auto input = [&](InputKind kind, std::initializer_list<const Matrix*> fed) {
      uint64_t whole = 0, copies = 0;
      for (const Matrix* w : fed) {
        whole += w->bytes();
        copies += copy_bytes(*w);
      }
      dense += whole;
      sparse += sparse::input_copies_pay(shares, il, kind, fed)
                    ? read(kind) * static_cast<double>(copies)
                    : static_cast<double>(whole);
    };
    input(kAttnIn, {&l.wq, &l.wk, &l.wv});
    input(kAttnOut, {&l.wo});
    input(kFfnIn, {&l.ffn_gate, &l.ffn_up});
    // Down: the axpy over its neuron-major copy below the crossover, else the dense product.
    // (A file with only ffn_down_t reads it whole when dense.)
    const Matrix& down = l.ffn_down;
    const Matrix down_t = l.ffn_down_t.present() || !down.present()
                              ? l.ffn_down_t
                              : Matrix{sparse::neuron_major_type(down.type, down.rows), nullptr,
                                       down.cols, down.rows};
    const double read_down = read(kDownIn);
    const double axpy = read_down * static_cast<double>(down_t.bytes());
    const Matrix& dense_down = down.present() ? down : down_t;
    dense += dense_down.bytes();
    sparse += !down.present() || read_down < sparse::down_crossover(down, down_t)
                  ? axpy
                  : static_cast<double>(down.bytes());
  }
  return dense > 0 ? sparse / static_cast<double>(dense) : 1.0;
}

void weigh_thresholds(Model::Impl& m) {
  m.thresholds_pay = true;
  if (!model_wide(m.config.thresholds) || m.config.input_shares.empty()) return;
  const double share = threshold_byte_share(m);
  if (share <= kMaxThresholdByteShare) return;
  m.thresholds_pay = false;
  char note[160];
  std::snprintf(note, sizeof note,
                "--sparse auto runs dense: the file's thresholds would read %.0f%% of the dense "
                "bytes a token (--sparse threshold to use them)",
                100.0 * share);
  m.sparse_note = note;
}

}  // namespace hearth
