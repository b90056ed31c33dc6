#include "hearth/model.h"

#include "core/error.h"
#include "model/config.h"
#include "model/model_impl.h"
#include "model/model_internals.h"
#include "model/neuron_order.h"
#include "model/predictor_q8.h"
#include "model/threshold_choice.h"

namespace hearth {

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

std::shared_ptr<const Model> Model::load(const std::string& path, bool use_mmap) {
  LoadOptions o;
  o.weights = use_mmap ? WeightLoad::Map : WeightLoad::Read;
  return load(path, o);
}

std::shared_ptr<const Model> Model::load(const std::string& path, const LoadOptions& options) {
  auto impl = std::make_unique<Impl>();
  using Load = gguf::GgufFile::Load;
  const Load load = options.weights == WeightLoad::Map    ? Load::Mmap
                    : options.weights == WeightLoad::Read ? Load::Read
                                                          : Load::Auto;
  impl->file = gguf::GgufFile::open(path, load);
  impl->config = read_config(*impl->file);
  impl->weights = bind_weights(*impl->file, impl->config);
  impl->tokenizer = text::Tokenizer::from_gguf(*impl->file);
  if (impl->tokenizer->n_vocab() != impl->config.n_vocab) {
    fail(path, ": the tokenizer has ", impl->tokenizer->n_vocab(),
         " tokens but token_embd.weight has ", impl->config.n_vocab, " rows");
  }
  weigh_thresholds(*impl);
  if (options.reorder_neurons) reorder_neurons(*impl);
  if (options.q8_predictors) hold_predictors_q8(*impl);
  place_on_device(*impl, options.device);
  if (options.input_major_only) impl->hold_input_major_only(options.input_major_min_width);
  if (options.row_groups != RowGroups::None) impl->hold_row_groups(options.row_groups);
  return std::shared_ptr<const Model>(new Model(std::move(impl)));
}

const std::string& Model::sparse_note() const { return impl_->sparse_note; }
std::string Model::device_name() const { return impl_->device ? impl_->device->name() : ""; }
const std::string& Model::placement_note() const { return impl_->placement_note; }
uint64_t Model::device_allocated() const {
  return impl_->device ? impl_->device->allocated() : 0;
}
uint64_t Model::device_peak_allocated() const {
  return impl_->device ? impl_->device->peak_allocated() : 0;
}

const ModelConfig& Model::config() const { return impl_->config; }
const std::string& Model::path() const { return impl_->file->path(); }
uint64_t Model::file_bytes() const { return impl_->file->file_size(); }
bool Model::weights_in_memory() const { return impl_->file->is_private_copy(); }

uint64_t Model::weight_bytes_per_token() const {
  uint64_t total = impl_->non_ffn_bytes();
  for (const LayerWeights& l : impl_->weights.layers) {
    const Matrix& down = l.ffn_down.present() ? l.ffn_down : l.ffn_down_t;
    total += l.ffn_gate.bytes() + l.ffn_up.bytes() + down.bytes();
  }
  return total;
}

bool Model::has_predictors() const { return impl_->weights.layers.front().has_predictor(); }
bool Model::has_thresholds() const { return !impl_->config.thresholds.empty(); }
float Model::sparse_threshold() const { return impl_->config.sparse_threshold; }
bool Model::is_powerinfer() const { return impl_->file->is_powerinfer(); }

std::vector<int32_t> Model::tokenize(std::string_view text, bool add_bos, bool parse_special) const {
  return impl_->tokenizer->encode(text, add_bos, parse_special);
}
std::vector<int32_t> Model::tokenize(std::string_view text, bool add_bos,
                                     std::span<const std::pair<size_t, size_t>> literal) const {
  return impl_->tokenizer->encode(text, add_bos, /*parse_special=*/true, literal);
}
std::string Model::token_to_piece(int32_t id) const { return impl_->tokenizer->token_to_piece(id); }
std::string Model::token_text(int32_t id) const {
  return id < 0 ? std::string() : impl_->tokenizer->token_text(id);
}
int32_t Model::bos() const { return impl_->tokenizer->bos(); }
int32_t Model::eos() const { return impl_->tokenizer->eos(); }
bool Model::is_eog(int32_t id) const { return impl_->tokenizer->is_eog(id); }
bool Model::add_bos_default() const { return impl_->tokenizer->add_bos_default(); }
bool Model::adds_space_prefix() const { return impl_->tokenizer->add_space_prefix(); }

std::optional<std::string> Model::chat_template() const {
  const auto t = impl_->file->get_string("tokenizer.chat_template");
  if (!t) return std::nullopt;
  return std::string(*t);
}

}  // namespace hearth

namespace hearth {

const gguf::GgufFile& model_file(const Model& model) { return *model.impl().file; }
const Weights& model_weights(const Model& model) { return model.impl().weights; }

}  // namespace hearth
