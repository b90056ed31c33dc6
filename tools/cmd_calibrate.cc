// hearth calibrate: profile a model's FFN activations on text, then train predictors (ReLU-family
// models) or choose per-layer magnitude thresholds (--sparsity, SwiGLU models), and write a
// calibrated copy of the model that run/bench/perplexity use in --sparse auto. With --report DIR
// it also writes an HTML report; `hearth calibrate -m CALIBRATED.gguf --report DIR` (no -f)
// renders the report of an already calibrated file. Progress goes to stderr.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "calib/calibrate.h"
#include "calib/residual_rotation.h"
#include "cli_common.h"
#include "commands.h"
#include "core/error.h"
#include "gguf/gguf.h"

namespace hearth::cli {
namespace {

std::vector<int64_t> parse_ranks(const std::string& s) {
  if (s == "auto") return {};
  std::vector<int64_t> ranks;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size() || part.empty() || v < 1 || v > 65536) {
      fail("--predictor-rank takes 'auto' or widths like 64 or 32,64,128 (got '", s, "')");
    }
    ranks.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ranks;
}

// The output must not replace the input: the same file under any spelling of its path (a
// symbolic or hard link, "./"), as quantize refuses.
void check_not_input(const std::string& in, const std::string& out) {
  std::error_code ec;
  if (in == out || std::filesystem::equivalent(in, out, ec)) {
    fail("the output ", out, " is the input file; write to another path");
  }
}

// Calibration can take minutes: a bad output path should fail before it starts, not after.
void check_writable_dir(const std::string& out) {
  const std::filesystem::path dir = std::filesystem::absolute(out).parent_path();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0) {
    fail("cannot write ", out, ": ", dir.string(), " is not a writable directory");
  }
}

// Writes what a run made (the model, the report) and prints the per-layer results.
int finish(const Model& model, const calib::CalibrationResult& r, const std::string& out_path,
           const std::string& report_dir) {
  if (!out_path.empty()) {
    calib::write_calibrated_model(model, r, out_path);
    std::printf("wrote %s\n", out_path.c_str());
    // What --sparse auto will make of it: a model-wide file whose thresholds would save too few
    // bytes runs dense (mapped, so nothing but the metadata is read).
    if (r.kind == calib::CalibKind::InputThresholds) {
      LoadOptions o;
      o.weights = WeightLoad::Map;
      const std::string note = Model::load(out_path, o)->sparse_note();
      if (!note.empty()) std::printf("note: %s\n", note.c_str());
    }
  }
  if (!report_dir.empty()) {
    sparse::write_calib_report(r.report, report_dir);
    std::printf("report: %s/index.html\n", report_dir.c_str());
  }
  for (size_t il = 0; il < r.report.layers.size(); ++il) {
    const auto& l = r.report.layers[il];
    if (l.predictor_rank > 0) {
      std::printf("layer %zu: width %lld, recall %.4f, precision %.4f, predicted sparsity %.4f, "
                  "true sparsity %.4f\n", il, static_cast<long long>(l.predictor_rank), l.recall,
                  l.precision, l.predicted_sparsity, l.true_sparsity);
    } else if (r.kind == calib::CalibKind::ProfileOnly) {
      std::printf("layer %zu: sparsity %.4f on the calibration tokens\n", il, l.true_sparsity);
    } else if (!l.input_share.empty()) {
      const LayerThresholds& t = r.thresholds[il];
      std::printf("layer %zu: skips attn_in %.3f (threshold %.4g), attn_out %.3f (%.4g), ffn_in "
                  "%.3f (%.4g), down_in %.3f (%.4g); held-out weight sparsity %.4f\n",
                  il, l.input_share[0], t.attn_in, l.input_share[1], t.attn_out, l.input_share[2],
                  t.ffn_in, l.input_share[3], t.down, l.true_sparsity);
    } else {
      std::printf("layer %zu: gate threshold %.6g, down threshold %.6g, held-out sparsity %.4f\n",
                  il, r.thresholds.empty() ? 0.0 : r.thresholds[il].gate,
                  std::isnan(l.threshold) ? 0.0 : l.threshold, l.true_sparsity);
    }
  }
  return 0;
}

std::shared_ptr<const Model> load_model(const std::string& path, const WeightFlags& weights) {
  LoadOptions o;
  o.weights = weights.load();
  return Model::load(path, o);
}

// The model with its residual stream in its principal axes (calib/residual_rotation.h), written
// to `scratch` and loaded from there; `model` itself when its recipe has no such rotation and
// `required` is false.
std::shared_ptr<const Model> rotated(const std::shared_ptr<const Model>& model,
                                     const calib::CalibrateOptions& o,
                                     const gguf::ScratchPath& scratch, bool required,
                                     const WeightFlags& weights) {
  if (calib::already_rotated(*model)) {
    o.log("rotation: none, since the file's residual stream is in its principal axes already");
    return model;
  }
  const std::string blocker = calib::rotation_blocker(*model);
  if (!blocker.empty()) {
    if (required) fail("--rotate: the residual stream of this model cannot be rotated: ", blocker);
    o.log("rotation: none, since " + blocker);
    return model;
  }
  calib::rotate_for_calibration(model, o, scratch.path());
  return load_model(scratch.path(), weights);
}

}  // namespace

int cmd_calibrate(int argc, char** argv) {
  CLI::App app("Profile a model's activations on text and make its predictors or thresholds",
               "calibrate");
  std::string model_path, text_file, heldout_file, out_path, report_dir, rank = "auto", stage = "all";
  calib::CalibrateOptions o;
  int32_t n_threads = 0;
  WeightFlags weights;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("-f,--file", text_file, "calibration text");
  app.add_option("-o,--output", out_path, "the calibrated model to write");
  app.add_option("--heldout", heldout_file,
                 "text to measure the result on (default: the last 10% of the calibration tokens)");
  app.add_option("--tokens", o.max_tokens, "calibration tokens to profile (0 = all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--predictor-rank", rank,
                 "predictor width: auto (choose per layer), N, or candidates N,M,...")
      ->capture_default_str();
  app.add_option("--target-recall", o.target_recall, "per-layer predictor recall to reach")
      ->capture_default_str();
  std::string scope = "model";
  app.add_option("--sparsity", o.sparsity,
                 "per-layer magnitude thresholds on projection inputs that skip this share of "
                 "each layer's weights (--scope model) or of the down projection's inputs "
                 "(--scope ffn)");
  app.add_option("--scope", scope,
                 "model: threshold the input of every projection (q/k/v, o, gate/up, down), "
                 "shares found by a greedy search on held-out divergence from the dense model; "
                 "ffn: the FFN alone, by |act(gate)| then |act(gate) * up|")
      ->check(CLI::IsMember({"model", "ffn"}))
      ->capture_default_str();
  bool rotate = false, no_rotate = false;
  app.add_flag("--rotate", rotate,
               "--scope model: rotate the residual stream to its sparse axes before "
               "choosing thresholds (the same function, folded into the weights; fails where the "
               "architecture cannot). The default for float and Q8_0 models whose architecture "
               "can; smaller types only when asked, since it rounds their matrices again");
  app.add_flag("--no-rotate", no_rotate, "--scope model: keep the residual stream's own axes")
      ->excludes("--rotate");
  app.add_option("--rotation-steps", o.rotation_steps,
                 "--scope model, rotated: steps that refine the principal axes so that a "
                 "token's smallest elements hold less of its energy at a share 0.2 above "
                 "--sparsity (0 = the principal axes alone)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--gate-sparsity", o.gate_sparsity,
                 "--scope ffn: of --sparsity, the share skipped by |act(gate)| alone, whose up "
                 "rows are not read either (default: 0.4 * sparsity)");
  app.add_option("--layer-groups", o.layer_groups,
                 "--scope model: layers that share one allocation, searched group by group (0 = "
                 "one per layer for small models, else 1)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  std::string allocate = "speed";
  app.add_option("--allocate", allocate,
                 "--scope model: what the search weighs each step's divergence against: speed "
                 "(the decode time it saves, by the paths a decode step takes) or weights (the "
                 "weights it skips, as TEAL does)")
      ->check(CLI::IsMember({"speed", "weights"}))
      ->capture_default_str();
  app.add_option("--search-tokens", o.search_tokens,
                 "--scope model: held-out tokens each step of the search evaluates (the search "
                 "keeps the dense model's next-token distributions: 2 bytes per token and "
                 "vocabulary entry)")
      ->capture_default_str();
  app.add_option("--epochs", o.epochs, "predictor training epochs")->capture_default_str();
  app.add_option("--max-samples", o.max_samples,
                 "training samples kept per layer (at most what fits in 1 GiB)")
      ->capture_default_str();
  app.add_option("--window", o.window, "tokens per profiling window")->capture_default_str();
  app.add_option("--seed", o.seed, "random seed (training is deterministic for a seed)")
      ->capture_default_str();
  app.add_option("--stage", stage,
                 "all: profile, then predictors or thresholds; profile: activation statistics "
                 "and training samples only; train: predictors from a --stage profile file (-m)")
      ->check(CLI::IsMember({"all", "profile", "train"}))->capture_default_str();
  app.add_option("--report", report_dir, "also write an HTML report into this directory");
  app.add_option("-t,--threads", n_threads, "threads (default: all)");
  weights.add_to(app);
  return run_app(app, argc, argv, [&] {
    o.ranks = parse_ranks(rank);
    o.n_threads = n_threads > 0 ? n_threads : default_threads();
    o.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    if (stage == "train") {
      if (!text_file.empty()) fail("--stage train reads its samples from -m (a --stage profile file), not -f");
      if (out_path.empty()) fail("--stage train needs -o OUT.gguf");
      check_not_input(model_path, out_path);
      check_writable_dir(out_path);
      const auto profile = load_model(model_path, weights);
      return finish(*profile, calib::train_from_profile(profile, o), out_path, report_dir);
    }
    if (text_file.empty()) {
      // Report of an already calibrated model.
      if (report_dir.empty()) fail("give a calibration text (-f FILE), or --report DIR for a calibrated model");
      if (!out_path.empty()) fail("-o needs a calibration text (-f FILE)");
      const auto model = load_model(model_path, weights);
      sparse::write_calib_report(calib::read_calib_report(*model), report_dir);
      std::printf("report: %s/index.html\n", report_dir.c_str());
      return 0;
    }
    if (out_path.empty() && report_dir.empty()) fail("give -o OUT.gguf (and/or --report DIR)");
    if (!out_path.empty()) {
      check_not_input(model_path, out_path);
      check_writable_dir(out_path);
    }
    o.text = read_text_file(text_file, "calibration text");
    if (!heldout_file.empty()) o.heldout_text = read_text_file(heldout_file, "held-out text");
    if (stage == "profile") o.kind = calib::CalibKind::ProfileOnly;
    if (stage == "all" && !std::isnan(o.sparsity)) {
      o.kind = scope == "ffn" ? calib::CalibKind::Thresholds : calib::CalibKind::InputThresholds;
      o.allocate = allocate == "weights" ? calib::Allocate::Weights : calib::Allocate::Speed;
    }
    auto model = load_model(model_path, weights);
    std::optional<gguf::ScratchPath> scratch;
    if (o.kind == calib::CalibKind::InputThresholds && !no_rotate &&
        (rotate || calib::rotation_rounds_finely(*model))) {
      const std::string base = out_path.empty()
                                   ? (std::filesystem::temp_directory_path() / "hearth").string()
                                   : out_path;
      scratch.emplace(str_cat(base, ".rotated.", ::getpid()));
      model = rotated(model, o, *scratch, rotate, weights);
    }
    return finish(*model, calib::calibrate(model, o), out_path, report_dir);
  });
}

}  // namespace hearth::cli
