#include "cli_common.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "core/error.h"

namespace hearth::cli {

int run_app(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  const std::string name = "hearth " + app.get_name();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s (see --help)\n", name.c_str(), e.what());
    return 1;
  }
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: out of memory\n", name.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
  }
  return 1;
}

void WeightFlags::add_to(CLI::App& app) {
  auto* on = app.add_flag("--mmap", mmap,
                          "map the model file (default: read it into huge-page memory when it "
                          "takes at most half of the available memory, else map it)");
  app.add_flag("--no-mmap", no_mmap, "read the model into memory instead of mapping it")
      ->excludes(on);
}

WeightLoad WeightFlags::load() const {
  return mmap ? WeightLoad::Map : no_mmap ? WeightLoad::Read : WeightLoad::Auto;
}

void SessionFlags::add_to(CLI::App& app, bool sparse_repeatable) {
  app.add_option("-t,--threads", n_threads, "threads to use (default: all hardware threads)")
      ->check(CLI::Range(1, 1024));
  app.add_option("-c,--ctx-size", n_ctx, "context size in tokens (0 = the model's, at most 4096)")
      ->check(CLI::Range(0, 1 << 24));
  app.add_option("-b,--batch-size", n_batch, "tokens per forward pass in prompt processing")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--kv-type", kv_type, "KV cache type")->check(CLI::IsMember({"f16", "f32"}));
  weights.add_to(app);
  app.add_flag("--no-reorder", no_reorder,
               "keep FFN neurons in the file's order (default: most active first where the file "
               "has calibrated frequencies; same output, faster sparse decoding)");
  app.add_flag("--float-predictors", float_predictors,
               "keep float predictors as the file stores them (default: held in Q8_0, about half "
               "the bytes a predictor-mode decode step reads)");
  app.add_flag("--keep-matrices", keep_matrices,
               "on a float file with model-wide thresholds, keep the file's projection matrices "
               "beside the input-major copies threshold decoding reads (default: only the copies, "
               "about the file's memory instead of 1.75 times it; the same output)");
  app.add_flag("--no-repack", no_repack,
               "keep K-quant and 4/5-bit block matrices in the file's row layout (default: "
               "16-row groups, faster decode, the same bytes: attention's and the output head's "
               "unless a mode reads their rows, the FFN's where every session runs dense)");
  auto* s = app.add_option("--sparse", sparse,
                           sparse_repeatable
                               ? "FFN sparsity: dense, oracle, predictor, threshold or auto "
                                 "(default); repeat to compare modes"
                               : "FFN sparsity: dense, oracle, predictor, threshold or auto (default)")
                ->type_name("MODE")
                ->check(
                    [](const std::string& v) {
                      try {
                        parse_sparse_mode(v);
                        return std::string();
                      } catch (const Error& e) {
                        return std::string(e.what());
                      }
                    },
                    "");
  if (sparse_repeatable) {
    s->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  } else {
    s->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  app.add_option("--sparse-threshold", sparse_threshold,
                 "predictor threshold: a neuron is active iff its score >= F (default: the model's)")
      ->type_name("F");
  auto* dense = app.add_flag(
      "--dense-prompt", dense_prompt,
      "in the sparse modes, run batches of more than 8 tokens dense, as PowerInfer's prefill "
      "does (exact prompt KV cache; a token's output then depends on the batch size)");
  app.add_flag("--sparse-prompt", sparse_prompt,
               "in the sparse modes, give prompt tokens the mode too, so that a token's output is "
               "the same in any batch (the default, except for model-wide threshold files whose "
               "decode reads quantized input-major copies, where prompts then run through the "
               "copies, slower)")
      ->excludes(dense);
}

SessionOptions SessionFlags::options() const {
  SessionOptions o;
  o.n_threads = n_threads > 0 ? n_threads : default_threads();
  o.n_ctx = n_ctx;
  o.n_batch = n_batch;
  o.kv_type = kv_type == "f32" ? KvType::F32 : KvType::F16;
  o.sparse = sparse_modes().front();
  o.sparse_threshold = sparse_threshold;
  if (dense_prompt) o.sparse_prompt = false;
  if (sparse_prompt) o.sparse_prompt = true;
  return o;
}

std::vector<SparseMode> SessionFlags::sparse_modes() const {
  std::vector<SparseMode> modes;
  for (const auto& s : sparse) modes.push_back(parse_sparse_mode(s));
  if (modes.empty()) modes.push_back(SparseMode::Auto);
  return modes;
}

void SamplingFlags::add_to(CLI::App& app) {
  SamplerParams& sp = params;
  app.add_option("--temp", sp.temp, "temperature (0 = greedy)")->capture_default_str();
  app.add_option("--top-k", sp.top_k, "top-k sampling (0 = off)")->capture_default_str();
  app.add_option("--top-p", sp.top_p, "top-p sampling (1 = off)")->capture_default_str();
  app.add_option("--min-p", sp.min_p, "min-p sampling (0 = off)")->capture_default_str();
  app.add_option("--repeat-penalty", sp.repeat_penalty, "repetition penalty (1 = off)")->capture_default_str();
  app.add_option("--repeat-last-n", sp.repeat_last_n, "tokens the repetition penalty looks back")->capture_default_str();
  app.add_option("--seed", seed, "random seed (-1 = random)")->capture_default_str();
}

SamplerParams SamplingFlags::resolve() const {
  // The library takes a negative temperature as greedy (llama.cpp's convention); a flag says 0
  // for that, and rejects what the server rejects.
  if (!(params.temp >= 0.0f)) fail("--temp must be >= 0 (0 = greedy), got ", params.temp);
  SamplerParams sp = params;
  sp.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
  validate(sp);
  return sp;
}

void print_load_info(const std::string& model_path, const Model& model, const Session& session,
                     double load_seconds) {
  const ModelConfig& c = model.config();
  std::fprintf(stderr, "hearth: %s: %s, %lld layers, n_embd %lld, n_ff %lld, %.1f MiB; ctx %d, %d threads, sparse %s (%.2f s)\n",
               model_path.c_str(), c.arch.c_str(), (long long)c.n_layer, (long long)c.n_embd,
               (long long)c.n_ff, model.file_bytes() / 1048576.0, session.n_ctx(),
               session.n_threads(), to_string(session.sparse_mode()).c_str(), load_seconds);
}

std::string read_text_file(const std::string& path, const char* what) {
  // A directory opens as a stream that reads nothing: it would pass for an empty text.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    fail("cannot read ", what, " ", path, ": it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read ", what, " ", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("error reading ", what, " ", path);
  return ss.str();
}

std::string read_prompt(const std::string& text, const std::string& file) {
  if (!text.empty() && !file.empty()) fail("give either -p or -f, not both");
  if (file.empty()) return text;
  return read_text_file(file, "prompt file");
}

int32_t default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int32_t>(n);
}

}  // namespace hearth::cli
