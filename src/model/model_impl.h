// What a loaded Model holds. Internal: frontends see only include/hearth/model.h.
#pragma once

#include <memory>
#include <mutex>

#include "core/huge_buffer.h"
#include "device/device.h"
#include "gguf/gguf.h"
#include "hearth/model.h"
#include "model/config.h"
#include "model/weights.h"
#include "sparse/neuron_major.h"
#include "text/tokenizer.h"

namespace hearth {

struct Model::Impl {
  std::unique_ptr<gguf::GgufFile> file;  // owns the mapping every weight points into
  ModelConfig config;
  Weights weights;
  std::unique_ptr<text::Tokenizer> tokenizer;

  // Neurons most-active first (model/neuron_order.h): per layer, the file id of the neuron at
  // each row of ffn_gate, ffn_up, ffn_down_t and fc2 as held here; empty where they keep the
  // file's order (ffn_down always does). [n_layer][n_ff], or empty when not reordered at all.
  std::vector<std::vector<int32_t>> neuron_order;
  std::vector<HugeBuffer> reordered;  // those matrices of a mapped file, copied in the new order
  std::vector<HugeBuffer> converted;  // a mapped file's predictors in Q8_0 (predictor_q8.h)
  std::vector<HugeBuffer> grouped;    // a mapped file's matrices as row groups (hold_row_groups)
  bool ffn_row_groups = false;        // the FFN's matrices are row groups: sessions must run dense

  // What --sparse auto means for this model: Predictor when it has predictors, else Threshold
  // when it has calibrated thresholds, else Dense. The session and the placement both ask here.
  SparseMode auto_sparse_mode() const {
    if (weights.layers.front().has_predictor()) return SparseMode::Predictor;
    return config.thresholds.empty() || !thresholds_pay ? SparseMode::Dense : SparseMode::Threshold;
  }
  // Whether a model-wide file's thresholds read enough fewer bytes than dense decode to be
  // auto's mode (threshold_choice.h); sparse_note says so where they do not.
  bool thresholds_pay = true;
  std::string sparse_note;

  // Bytes of the weights a forward pass reads outside the FFN: attention and the output head.
  uint64_t non_ffn_bytes() const {
    uint64_t total = weights.output.bytes();
    for (const LayerWeights& l : weights.layers) {
      total += l.wq.bytes() + l.wk.bytes() + l.wv.bytes() + l.wo.bytes();
    }
    return total;
  }

  // The order of layer il, or null for the file's.
  const int32_t* order(size_t il) const {
    return il < neuron_order.size() && !neuron_order[il].empty() ? neuron_order[il].data()
                                                                 : nullptr;
  }

  // Hybrid execution (model_device.cc): the device holding part of the model, or null when the
  // CPU runs everything.
  std::unique_ptr<backend::Device> device;
  std::vector<uint8_t> device_attention;   // [n_layer] the layer's attention runs on the device
  std::vector<int64_t> device_hot;         // [n_layer] FFN neurons on the device
  std::vector<std::vector<int32_t>> cold;  // [n_layer] the others, where the device has some
  backend::DeviceSessionOptions device_session;  // what the placement left room for
  std::string placement_note;

  // Transposed ffn_down for layers whose file lacks ffn_down_t, made on first use by a sparse
  // session (dense sessions never pay for it); thread-safe, then immutable. The first caller's
  // choice holds: a device's placement, at load and before any session, asks for every layer
  // (its hot neurons' columns come from the copy); sessions for the layers whose calibrated
  // shares make the copy pay (make_neuron_major_down).
  const sparse::NeuronMajorDown& neuron_major_down(bool every_layer = false) const {
    std::call_once(neuron_major_once_, [this, every_layer] {
      neuron_major_ = sparse::make_neuron_major_down(
          weights.layers, neuron_order, every_layer ? std::vector<float>{} : config.input_shares);
    });
    return neuron_major_;
  }

  // Input-major copies of the float projections, made on first use by a session with model-wide
  // input thresholds, or at load by hold_input_major_only; thread-safe, then immutable.
  const sparse::InputMajor& input_major() const {
    std::call_once(input_major_once_, [this] {
      input_major_ = sparse::make_input_major(weights.layers, config.input_shares);
    });
    return input_major_;
  }

  // LoadOptions::input_major_only (input_major_weights.cc): where the model allows, makes the
  // copies (q, k and v one joint copy where they lie one after another in the file) and holds
  // them in the place of the file's matrices, whose Matrix views become input-major views of the
  // copies. Where the file was read into memory the copies are written over the file's matrices
  // (same type, same bytes); a mapped file's pages are released. Returns whether it did.
  bool hold_input_major_only(int32_t min_width);

  // LoadOptions::row_groups (row_group_weights.cc): with no device, rewrites the matrices `which`
  // names (see RowGroups) of a type whose row groups this CPU's kernel table has and whose rows
  // come in whole groups as them: in the file's bytes where it was read into memory, else in
  // buffers of their own with the mapped pages released. The embedding table (and a tied output
  // head) keeps its rows. Returns whether it did.
  bool hold_row_groups(RowGroups which);

 private:
  mutable std::once_flag neuron_major_once_;
  mutable sparse::NeuronMajorDown neuron_major_;
  mutable std::once_flag input_major_once_;
  mutable sparse::InputMajor input_major_;
};

// Places part of the model on the device options name (model_device.cc); nothing for "none".
void place_on_device(Model::Impl& m, const DeviceOptions& options);

}  // namespace hearth
