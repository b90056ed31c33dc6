// hearth quantize's library part. Which tensors are "weight matrices" comes from the
// architecture's weight list, so a tensor the model does not use as a matrix (activation
// statistics, an unknown extra) is copied byte for byte rather than guessed at by name.
#include "model/quantize_model.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <span>
#include <thread>

#include "backend/cpu/thread_pool.h"
#include "core/error.h"
#include "core/quantize.h"
#include "core/quantize_gptq.h"
#include "gguf/gguf.h"
#include "model/imatrix_file.h"
#include "hearth/model.h"
#include "model/config.h"
#include "model/model_internals.h"
#include "model/weights.h"

namespace fs = std::filesystem;

namespace hearth {
namespace {

constexpr uint32_t kQuantizationVersion = 2;  // ggml's current block layouts (GGML_QNT_VERSION)

bool is_block_type(DType t) { return dtype_block_size(t) > 1; }

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_predictor(const std::string& name) {
  return name.rfind("blk.", 0) == 0 && (ends_with(name, ".fc1.weight") || ends_with(name, ".fc2.weight"));
}

// Everything that can be wrong with the paths, found before any conversion work.
void check_paths(const std::string& in, const std::string& out) {
  if (out.empty()) fail("no output file given");
  std::error_code ec;
  if (in == out || fs::equivalent(in, out, ec)) {
    fail("the output ", out, " is the input file; write to another path");
  }
  if (fs::is_directory(out, ec)) fail("cannot write ", out, ": it is a directory");
  fs::path dir = fs::path(out).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::exists(dir, ec)) fail("cannot write ", out, ": directory ", dir.string(), " does not exist");
  if (!fs::is_directory(dir, ec)) fail("cannot write ", out, ": ", dir.string(), " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    fail("cannot write ", out, ": directory ", dir.string(), " is not writable (",
         std::strerror(errno), ")");
  }
}

// Names of the tensors the model binds as matrices, from its architecture's weight list.
std::set<std::string> matrix_names(const gguf::GgufFile& file, const ModelConfig& config) {
  std::set<std::string> names;
  Weights scratch;  // bound only so that specs depending on earlier ones follow the file
  visit_weights(config, scratch, [&](const WeightSpec& spec) {
    const gguf::TensorInfo* t = file.find_tensor(spec.name);
    if (t == nullptr) return;
    if (spec.vector) {
      *spec.vector = reinterpret_cast<const float*>(t->data);
      return;
    }
    names.insert(spec.name);
    *spec.matrix = Matrix{static_cast<DType>(t->type), t->data, t->n_dims >= 2 ? t->ne[1] : 1,
                          t->ne[0]};
  });
  return names;
}

// What becomes of one tensor: kept (data borrowed from the input mapping) or converted.
struct TensorPlan {
  const gguf::TensorInfo* tensor = nullptr;
  DType to = DType::F32;
  bool convert = false;
};

using TypeRules = std::vector<std::pair<std::regex, DType>>;

TypeRules compile_rules(const QuantizeOptions& options) {
  TypeRules rules;
  for (const auto& [pattern, type] : options.tensor_types) {
    if (!is_quantize_target(type)) {
      fail("--tensor-type ", pattern, ": cannot quantize to type ", static_cast<uint32_t>(type));
    }
    try {
      rules.emplace_back(std::regex(pattern, std::regex::ECMAScript), type);
    } catch (const std::regex_error& e) {
      fail("--tensor-type: '", pattern, "' is not a regular expression (", e.what(), ")");
    }
  }
  return rules;
}

// llama.cpp's replacement for a 256-weight type on rows that hold no whole super-block.
DType small_block_fallback(DType t) {
  switch (t) {
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_XS: return DType::IQ4_NL;
    case DType::Q4_K: return DType::Q5_0;
    case DType::Q5_K: return DType::Q5_1;
    case DType::Q6_K: return DType::Q8_0;
    default: return t;
  }
}

// Whether quantize_row_search takes importance weights for the type.
bool uses_importance(DType t) {
  return t == DType::Q4_0 || (dtype_block_size(t) > 1 && t != DType::Q8_0);
}

TensorPlan plan_tensor(const gguf::TensorInfo& t, bool is_matrix, DType type, bool is_output,
                       const QuantizeOptions& options, const TypeRules& rules,
                       QuantizeReport& report) {
  TensorPlan p{&t, static_cast<DType>(t.type), false};
  // llama.cpp leaves learned position tables alone too (they are added, not multiplied).
  if (!is_matrix || t.name == "position_embd.weight") return p;
  if (is_predictor(t.name) && !options.quantize_predictors) return p;
  const DType target = type;
  if (is_output && options.output_type) type = *options.output_type;
  for (const auto& [pattern, rule_type] : rules) {
    if (std::regex_search(t.name, pattern)) {
      type = rule_type;
      break;
    }
  }
  const int64_t ne0 = t.ne[0];
  if (type != target && ne0 % dtype_block_size(type) == 0 && ne0 % dtype_block_size(target) == 0) {
    const int64_t rows = t.n_elements() / ne0;
    report.promotions.push_back(
        {t.name, type, rows * (row_bytes(type, ne0) - row_bytes(target, ne0))});
  }
  DType to = type;
  if (ne0 % dtype_block_size(type) != 0) {
    // Such a row cannot hold whole blocks: a 32-weight type close in size, as llama.cpp picks,
    // when the row holds those. Else: a non-block input here is f32, f16 or bf16 (block inputs
    // have whole blocks by construction): keep 16-bit ones as they are, narrow f32 to f16.
    to = small_block_fallback(type);
    if (ne0 % dtype_block_size(to) != 0) {
      to = p.to == DType::BF16 || p.to == DType::F16 ? p.to : DType::F16;
    }
    report.fallbacks.push_back({t.name, ne0, type, to});
  }
  p.convert = to != p.to;
  p.to = to;
  return p;
}

// Dequantizes each row to float and stores it in the target type. With the search: for Q4_0
// GPTQ when `entry` has a Gram matrix, else (and for the other types that take weights) the
// search weighted by its mean squares (`entry` null or without statistics: unweighted).
void convert_tensor(const gguf::TensorInfo& t, DType to, bool search, const ImatrixEntry* entry,
                    uint8_t* dst) {
  const auto from = static_cast<DType>(t.type);
  const int64_t n = t.ne[0];
  const int64_t rows = t.n_elements() / n;
  const int64_t in_row = row_bytes(from, n), out_row = row_bytes(to, n);
  std::vector<float> weights;
  std::optional<GptqQ4_0> gptq;
  if (search && uses_importance(to) && entry && entry->count > 0) {
    if (to == DType::Q4_0 && !entry->gram.empty()) {
      gptq.emplace(entry->gram.data(), n, entry->count);
    } else {
      weights = entry->sum2;
      for (float& v : weights) v = static_cast<float>(v / entry->count);
    }
  }
  // Rows are independent: split them over the cores (the K-quant and IQ4 searches try many
  // scales per block, too slow on one core for a large model).
  const auto convert_rows = [&](int64_t first, int64_t last) {
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t r = first; r < last; ++r) {
      dequantize_row(from, t.data + r * in_row, row.data(), n);
      if (gptq) {
        gptq->quantize_row(row.data(), reinterpret_cast<BlockQ4_0*>(dst + r * out_row));
      } else if (search) {
        quantize_row_search(to, row.data(), weights.empty() ? nullptr : weights.data(),
                            dst + r * out_row, n);
      } else {
        quantize_row(to, row.data(), dst + r * out_row, n);
      }
    }
  };
  const auto n_threads = static_cast<int>(
      std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), rows / 16 + 1));
  cpu::ThreadPool pool(n_threads);
  cpu::run_ranges(pool, rows, convert_rows);
}

}  // namespace

bool is_quantize_target(DType type) { return is_supported_dtype(static_cast<uint32_t>(type)); }

namespace {

struct TargetName {
  const char* name;
  DType type;
  QuantizeMix mix;
  uint32_t file_type;  // llama.cpp's llama_ftype
};

// Every target with its name and file type; the first name of a target is its canonical one.
constexpr TargetName kTargetNames[] = {
    {"f32", DType::F32, QuantizeMix::kPlain, 0},
    {"f16", DType::F16, QuantizeMix::kPlain, 1},
    {"q4_0", DType::Q4_0, QuantizeMix::kPlain, 2},
    {"q4_1", DType::Q4_1, QuantizeMix::kPlain, 3},
    {"q8_0", DType::Q8_0, QuantizeMix::kPlain, 7},
    {"q5_0", DType::Q5_0, QuantizeMix::kPlain, 8},
    {"q5_1", DType::Q5_1, QuantizeMix::kPlain, 9},
    {"q2_k", DType::Q2_K, QuantizeMix::kPlain, 10},
    {"q3_k_s", DType::Q3_K, QuantizeMix::kSmall, 11},
    {"q3_k", DType::Q3_K, QuantizeMix::kSmall, 11},
    {"q3_k_m", DType::Q3_K, QuantizeMix::kMedium, 12},
    {"q4_k_s", DType::Q4_K, QuantizeMix::kSmall, 14},
    {"q4_k", DType::Q4_K, QuantizeMix::kSmall, 14},
    {"q4_k_m", DType::Q4_K, QuantizeMix::kMedium, 15},
    {"q5_k_s", DType::Q5_K, QuantizeMix::kSmall, 16},
    {"q5_k", DType::Q5_K, QuantizeMix::kSmall, 16},
    {"q5_k_m", DType::Q5_K, QuantizeMix::kMedium, 17},
    {"q6_k", DType::Q6_K, QuantizeMix::kPlain, 18},
    {"iq4_nl", DType::IQ4_NL, QuantizeMix::kPlain, 25},
    {"iq4_xs", DType::IQ4_XS, QuantizeMix::kPlain, 30},
    {"bf16", DType::BF16, QuantizeMix::kPlain, 32},
};

const TargetName* find_target(const QuantizeTarget& target) {
  for (const TargetName& t : kTargetNames) {
    if (t.type == target.type && t.mix == target.mix) return &t;
  }
  return nullptr;
}

// A rule for tensors `suffix` (a regular expression for what follows "blk.N.") in the layers
// where keep(layer) holds; nothing when no layer does.
template <typename Keep>
void add_layer_rule(QuantizeOptions& options, int64_t n_layer, const std::string& suffix,
                    DType type, Keep keep) {
  std::string layers;
  for (int64_t il = 0; il < n_layer; ++il) {
    if (!keep(il)) continue;
    if (!layers.empty()) layers += '|';
    layers += std::to_string(il);
  }
  if (layers.empty()) return;
  options.tensor_types.emplace_back("^blk\\.(" + layers + ")\\.(" + suffix + ")\\.weight$", type);
}

void add_rule(QuantizeOptions& options, const std::string& suffix, DType type) {
  options.tensor_types.emplace_back("^blk\\.[0-9]+\\.(" + suffix + ")\\.weight$", type);
}

}  // namespace

std::optional<QuantizeTarget> parse_quantize_target(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const TargetName& t : kTargetNames) {
    if (lower == t.name) return QuantizeTarget(t.type, t.mix);
  }
  return std::nullopt;
}

std::string quantize_target_name(const QuantizeTarget& target) {
  const TargetName* t = find_target(target);
  return t ? t->name : std::string(dtype_name(target.type));
}

MixShape mix_shape(const gguf::GgufFile& file) {
  MixShape shape;
  const auto arch = file.get_string("general.architecture");
  if (!arch) return shape;
  const std::string a(*arch);
  shape.n_layer = file.get_int(a + ".block_count").value_or(0);
  shape.n_head = file.get_int(a + ".attention.head_count").value_or(1);
  shape.n_head_kv = file.get_int(a + ".attention.head_count_kv").value_or(shape.n_head);
  return shape;
}

bool use_more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

void apply_default_mix(const QuantizeTarget& target, const MixShape& shape, QuantizeOptions& options) {
  const DType type = target.type;
  if (type == DType::Q4_0) {
    if (!options.output_type) options.output_type = DType::Q8_0;
    add_rule(options, "attn_v", DType::Q8_0);
    if (shape.grouped_query()) add_rule(options, "attn_k", DType::Q8_0);
    return;
  }
  if (dtype_block_size(type) == 1 || type == DType::Q8_0) return;
  if (!options.output_type) options.output_type = DType::Q6_K;
  const int64_t n = shape.n_layer;
  const bool medium = target.mix == QuantizeMix::kMedium;
  switch (type) {
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      if (shape.n_gqa() >= 4) add_rule(options, "attn_v", DType::Q5_K);
      break;
    case DType::Q2_K:
      add_rule(options, "attn_v", shape.n_gqa() >= 4 ? DType::Q4_K : DType::Q3_K);
      add_rule(options, "ffn_down|ffn_down_t|attn_output", DType::Q3_K);
      break;
    case DType::Q3_K:
      if (!medium) break;
      add_layer_rule(options, n, "attn_v", DType::Q5_K, [](int64_t il) { return il < 2; });
      add_layer_rule(options, n, "ffn_down|ffn_down_t", DType::Q5_K,
                     [n](int64_t il) { return il < n / 16; });
      add_rule(options, "attn_v|ffn_down|ffn_down_t|attn_output|attn_qkv", DType::Q4_K);
      break;
    case DType::Q4_K:
    case DType::Q5_K:
      if (medium) {
        add_layer_rule(options, n, "attn_v|ffn_down|ffn_down_t", DType::Q6_K,
                       [n](int64_t il) { return use_more_bits(il, n); });
        add_rule(options, "attn_qkv", type == DType::Q4_K ? DType::Q5_K : DType::Q6_K);
      } else if (type == DType::Q4_K) {
        add_layer_rule(options, n, "attn_v", DType::Q5_K, [](int64_t il) { return il < 4; });
        add_layer_rule(options, n, "ffn_down|ffn_down_t", DType::Q5_K,
                       [n](int64_t il) { return il < n / 8; });
      }
      break;
    default:
      break;
  }
}


uint32_t llama_file_type(const QuantizeTarget& target) {
  const TargetName* t = find_target(target);
  if (!t) fail("no llama.cpp file type for ", quantize_target_name(target));
  return t->file_type;
}

QuantizeReport quantize_model(const std::string& in, const std::string& out,
                              const QuantizeTarget& target, const QuantizeOptions& options) {
  const DType type = target.type;
  llama_file_type(target);  // a type/mix pair that names no target fails here, before any work
  for (const DType t : {type, options.output_type.value_or(type)}) {
    if (!is_quantize_target(t)) {
      fail("cannot quantize to type ", static_cast<uint32_t>(t), " (expected ", kQuantizeTargets, ")");
    }
  }
  const TypeRules rules = compile_rules(options);
  // Loading validates the whole input as a model (shapes, types, tokenizer) before any work, and
  // maps it: kept tensors are written straight from the mapping.
  const std::shared_ptr<const Model> model = Model::load(in);
  check_paths(in, out);
  const gguf::GgufFile& file = model_file(*model);
  const std::set<std::string> matrices = matrix_names(file, model->config());
  Imatrix imatrix;
  if (!options.imatrix.empty()) {
    if (!options.search_scales) fail("--imatrix needs the scale search (not --reference-rounding)");
    imatrix = read_imatrix(options.imatrix);
    check_imatrix_fits(imatrix, options.imatrix, file,
                       std::vector<std::string>(matrices.begin(), matrices.end()));
  }

  QuantizeReport report;
  report.target = target;
  report.type = type;
  report.powerinfer = file.is_powerinfer();
  report.input_bytes = file.file_size();
  report.imatrix_entries = static_cast<int64_t>(imatrix.entries.size());
  report.imatrix_tokens = static_cast<int64_t>(imatrix.chunk_count) * imatrix.chunk_size;
  std::vector<TensorPlan> plans;
  bool quantized = false;
  // As llama.cpp: the output projection is token_embd when the file has no output.weight.
  const std::string output = file.find_tensor("output.weight") ? "output.weight" : "token_embd.weight";
  // Tied embeddings stored twice (llama2.c conversions): token_embd is then the output matrix
  // too, and llama.cpp gives a tied token_embd the output's type, so the copy follows it.
  const gguf::TensorInfo* out_t = file.find_tensor("output.weight");
  const gguf::TensorInfo* emb_t = file.find_tensor("token_embd.weight");
  report.tied_copy = out_t && emb_t && out_t->type == emb_t->type && out_t->nbytes == emb_t->nbytes &&
                     out_t->ne[0] == emb_t->ne[0] &&
                     std::memcmp(out_t->data, emb_t->data, out_t->nbytes) == 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const TensorPlan p =
        plan_tensor(t, matrices.count(t.name) > 0, type,
                    t.name == output || (report.tied_copy && t.name == "token_embd.weight"),
                    options, rules, report);
    ++report.input_types[t.type];
    ++report.output_types[static_cast<uint32_t>(p.to)];
    if (p.convert) {
      ++report.converted;
      if (is_block_type(static_cast<DType>(t.type))) ++report.requantized;
    }
    quantized = quantized || is_block_type(p.to);
    plans.push_back(p);
  }

  gguf::GgufWriter w;
  w.set_magic_powerinfer(file.is_powerinfer());
  for (const auto& [key, value] : file.metadata()) {
    // An f16 output of a quantized input is no longer quantized: drop its version.
    if (key == "general.quantization_version" && !quantized) continue;
    w.copy_value(key, value);
  }
  w.set_u32("general.file_type", llama_file_type(target));
  if (quantized) w.set_u32("general.quantization_version", kQuantizationVersion);

  for (const TensorPlan& p : plans) {
    const gguf::TensorInfo& t = *p.tensor;
    const std::span<const int64_t> ne(t.ne, static_cast<size_t>(t.n_dims));
    if (!p.convert) {
      w.add_tensor(t.name, t.type, ne, t.data, t.nbytes);
      continue;
    }
    // Converted lazily while write() streams the file, so only one converted tensor is in memory
    // at a time; the input stays mapped (paged in and out by the kernel).
    const uint64_t nbytes = static_cast<uint64_t>(t.n_elements() / t.ne[0] * row_bytes(p.to, t.ne[0]));
    const DType to = p.to;
    const bool search = options.search_scales;
    const ImatrixEntry* entry = nullptr;
    if (uses_importance(to) && search && !options.imatrix.empty()) {
      const auto it = imatrix.entries.find(t.name);
      if (it != imatrix.entries.end() && it->second.count > 0) entry = &it->second;
      ++(entry == nullptr ? report.imatrix_unweighted
         : to == DType::Q4_0 && !entry->gram.empty() ? report.imatrix_gptq
                                                     : report.imatrix_weighted);
    }
    w.add_tensor_lazy(t.name, static_cast<uint32_t>(to), ne, nbytes,
                      [&t, to, search, entry](uint8_t* dst) {
                        convert_tensor(t, to, search, entry, dst);
                      });
  }
  w.write(out);
  std::error_code ec;
  report.output_bytes = fs::file_size(out, ec);
  if (ec) fail("cannot read back the size of ", out, ": ", ec.message());
  return report;
}

}  // namespace hearth
