// threshold_choice.h: the bytes a threshold decode step reads, estimated from the file's calibrated
// shares, and auto's choice from them.
#include "model/threshold_choice.h"

#include <cstdio>

#include "model/config.h"
#include "sparse/neuron_major.h"

namespace hearth {

double threshold_byte_share(const Model::Impl& m) {
  const std::vector<float>& shares = m.config.input_shares;
  const auto& layers = m.weights.layers;
  if (shares.size() != kInputKinds * layers.size()) return 1.0;
  double dense = static_cast<double>(m.weights.output.bytes());
  double sparse = dense;
  for (size_t il = 0; il < layers.size(); ++il) {
    for (int kind = 0; kind < kInputKinds; ++kind) {
      const double read = 1.0 - shares[kInputKinds * il + static_cast<size_t>(kind)];
      const sparse::InputRead r =
          sparse::input_read(layers[il], static_cast<InputKind>(kind), read);
      dense += r.dense;
      sparse += r.bytes;
    }
  }
  return dense > 0 ? sparse / dense : 1.0;
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
