// hearth quantize IN OUT TYPE: the model's weight matrices in another dtype (src/model/
// quantize_model.h says which tensors change). The report goes to stdout.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "model/quantize_model.h"

namespace hearth::cli {
namespace {

std::string type_counts(const std::map<uint32_t, int64_t>& counts) {
  std::string s;
  int64_t total = 0;
  for (const auto& [type, n] : counts) {
    const auto info = ggml_type_info(type);
    s += str_cat(s.empty() ? "" : ", ", info ? info->name : std::to_string(type), " ", n);
    total += n;
  }
  return str_cat(total, " tensors (", s, ")");
}

std::string mib(uint64_t bytes) {
  char s[64];
  std::snprintf(s, sizeof s, "%llu bytes (%.2f MiB)", static_cast<unsigned long long>(bytes),
                static_cast<double>(bytes) / (1024.0 * 1024.0));
  return s;
}

void print_report(const std::string& in, const std::string& out, const QuantizeReport& r) {
  std::printf("hearth quantize: %s -> %s as %s%s\n", in.c_str(), out.c_str(),
              quantize_target_name(r.target).c_str(), r.powerinfer ? " (PowerInfer PWRI file)" : "");
  for (const QuantizeFallback& f : r.fallbacks) {
    std::printf("  %s: row length %lld is not a multiple of %lld, kept as %s\n", f.name.c_str(),
                static_cast<long long>(f.row_length),
                static_cast<long long>(dtype_block_size(f.wanted)),
                std::string(dtype_name(f.kept)).c_str());
  }
  if (!r.promotions.empty()) {
    std::map<uint32_t, std::pair<int64_t, int64_t>> by_type;  // tensors, extra bytes
    for (const QuantizePromotion& p : r.promotions) {
      auto& [n, bytes] = by_type[static_cast<uint32_t>(p.type)];
      ++n;
      bytes += p.extra_bytes;
    }
    for (const auto& [type, nb] : by_type) {
      std::string names;
      int shown = 0;
      for (const QuantizePromotion& p : r.promotions) {
        if (static_cast<uint32_t>(p.type) != type) continue;
        if (shown++ < 4) names += str_cat(names.empty() ? "" : ", ", p.name);
      }
      if (shown > 4) names += str_cat(", ... (", shown, " in all)");
      std::printf("  type mix: %s as %s instead of %s: %+lld bytes\n", names.c_str(),
                  std::string(dtype_name(static_cast<DType>(type))).c_str(),
                  std::string(dtype_name(r.type)).c_str(), static_cast<long long>(nb.second));
    }
  }
  if (r.tied_copy) {
    std::printf("  output.weight is a copy of token_embd.weight (tied embeddings): token_embd "
                "takes the output's type\n");
  }
  if (r.imatrix_entries > 0) {
    std::printf("  imatrix: %lld entries from about %lld tokens; quantized tensors: %lld by GPTQ "
                "(q4_0), %lld weighted by mean squares, %lld without an entry (unweighted)\n",
                static_cast<long long>(r.imatrix_entries), static_cast<long long>(r.imatrix_tokens),
                static_cast<long long>(r.imatrix_gptq), static_cast<long long>(r.imatrix_weighted),
                static_cast<long long>(r.imatrix_unweighted));
  }
  if (r.requantized > 0) {
    std::printf("  %lld tensors were already quantized: requantizing adds its error to theirs\n",
                static_cast<long long>(r.requantized));
  }
  std::printf("input:  %s, %s\n", mib(r.input_bytes).c_str(), type_counts(r.input_types).c_str());
  std::printf("output: %s, %s\n", mib(r.output_bytes).c_str(), type_counts(r.output_types).c_str());
  std::printf("converted %lld tensors; compression %.2fx\n", static_cast<long long>(r.converted),
              r.ratio());
}

QuantizeTarget parse_target(const std::string& name) {
  const auto target = parse_quantize_target(name);
  if (!target) fail("unknown type '", name, "' (expected ", kQuantizeTargets, ")");
  return *target;
}

// A single tensor's type (--tensor-type, --output-tensor-type): a type, not a mix.
DType parse_type(const std::string& name) {
  const auto type = parse_dtype(name);
  if (!type || !is_quantize_target(*type)) {
    fail("unknown type '", name, "' (expected one of ", supported_dtype_names(), ")");
  }
  return *type;
}

}  // namespace

int cmd_quantize(int argc, char** argv) {
  CLI::App app("Writes a model with its weight matrices in another type (as llama-quantize)",
               "quantize");
  std::string in, out, type_name;
  QuantizeOptions options;
  app.add_option("input", in, "GGUF model to read")->required();
  app.add_option("output", out, "GGUF file to write (not the input)")->required();
  app.add_option("type", type_name,
                 str_cat("target type, or a K-quant mix as llama-quantize's: ", kQuantizeTargets))
      ->required();
  std::string output_type;
  app.add_flag("--quantize-predictors", options.quantize_predictors,
               "also convert the predictors blk.N.fc1/fc2 (kept as they are by default)");
  app.add_option("--output-tensor-type", output_type,
                 "type of the output projection (default: q8_0 for q4_0, q6_k for the other "
                 "block types below 8 bits, as llama.cpp; else TYPE)");
  std::vector<std::string> tensor_types;
  app.add_option("--tensor-type", tensor_types,
                 "PATTERN=TYPE: tensors whose name matches the regular expression PATTERN take "
                 "TYPE (repeatable; the first match wins), as llama-quantize's flag");
  app.add_option("--imatrix", options.imatrix,
                 "importance matrix (hearth imatrix, or llama-imatrix's GGUF file): blocks of the "
                 "4/5/6-bit, K and IQ4 types minimise each column's error weighted by its "
                 "activations' mean square (q4_0: GPTQ when it has Gram matrices)");
  bool pure = false;
  app.add_flag("--pure", pure,
               "every matrix in TYPE (as llama-quantize --pure): no default mix (q4_0: output, "
               "attn_v and, with grouped-query attention, attn_k at q8_0; the other block types: "
               "output at q6_k, and the _s/_m rules of model/quantize_model.h)");
  bool reference_rounding = false;
  app.add_flag("--reference-rounding", reference_rounding,
               "ggml's reference algorithms (q4_0, q8_0: byte-identical to llama-quantize's) "
               "instead of the per-block scale searches for the least error");
  return run_app(app, argc, argv, [&] {
    options.search_scales = !reference_rounding;
    const QuantizeTarget target = parse_target(type_name);
    for (const std::string& rule : tensor_types) {
      const size_t eq = rule.rfind('=');
      if (eq == std::string::npos || eq == 0) {
        fail("--tensor-type expects PATTERN=TYPE (got '", rule, "')");
      }
      options.tensor_types.emplace_back(rule.substr(0, eq), parse_type(rule.substr(eq + 1)));
    }
    if (!output_type.empty()) options.output_type = parse_type(output_type);
    if (!pure) apply_default_mix(target, mix_shape(*gguf::GgufFile::open(in)), options);
    const QuantizeReport report = quantize_model(in, out, target, options);
    print_report(in, out, report);
    return 0;
  });
}

}  // namespace hearth::cli
