// hearth bench: prompt-processing and generation speed like llama-bench, plus the decode roofline
// (bytes read per token against the machine's measured memory bandwidth, DESIGN.md section 7).
// Several --sparse modes are measured in one run, alternating within each repetition, so their
// ratios are fair on a noisy machine.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/bandwidth.h"
#include "backend/cpu/thread_pool.h"
#include "bench_report.h"
#include "cli_common.h"
#include "device_flags.h"
#include "elapsed.h"
#include "commands.h"
#include "core/error.h"

namespace hearth::cli {
namespace {

struct Stats {
  double mean = 0, sd = 0;
};
Stats stats(const std::vector<double>& v) {
  Stats s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

double time_s(const std::function<void()>& f) {
  const auto t0 = Clock::now();
  f();
  return seconds_since(t0);
}

// Weight FLOPs per token (2 per multiply-add) plus attention at an average context of `ctx`.
double flops_per_token(const ModelConfig& c, double ctx) {
  const double q = static_cast<double>(c.n_head * c.head_dim);
  const double kv = static_cast<double>(c.n_embd_kv());
  const double attn_w = c.n_embd * (2 * q + 2 * kv);
  const double ffn_w = static_cast<double>(c.n_embd) * c.n_ff * (c.ffn_gated ? 3 : 2);
  const double attn = 4.0 * q * ctx;
  return 2.0 * ((attn_w + ffn_w) * c.n_layer + static_cast<double>(c.n_vocab) * c.n_embd) + attn * c.n_layer;
}

// Adds the counters of `s` to `acc` (SparseStats of several tg runs).
void accumulate(SparseStats& acc, const SparseStats& s) {
  acc.tokens += s.tokens;
  acc.neurons_total += s.neurons_total;
  acc.neurons_active += s.neurons_active;
  acc.weight_bytes += s.weight_bytes;
  acc.audit_true += s.audit_true;
  acc.audit_hit += s.audit_hit;
}

struct ModeRun {
  SparseMode requested;
  std::unique_ptr<Session> session;
  std::vector<double> pp, tg;  // tokens/s of each repetition
  SparseStats tg_stats;        // summed over the measured tg runs
};

}  // namespace

int cmd_bench(int argc, char** argv) {
  CLI::App app("Measure prompt and generation speed and the decode roofline", "bench");
  std::string model_path, format = "md";
  int32_t n_prompt = 512, n_gen = 128, n_depth = 0, reps = 3;
  bool skip_bandwidth = false;
  SessionFlags sf;
  DeviceFlags df;
  std::string trace_path;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("-p,--n-prompt", n_prompt, "prompt tokens (0 = skip)")->check(CLI::Range(0, 1 << 20))->capture_default_str();
  app.add_option("-n,--n-gen", n_gen, "generated tokens (0 = skip)")->check(CLI::Range(0, 1 << 20))->capture_default_str();
  app.add_option("-d,--n-depth", n_depth,
                 "tokens already in the context when each test starts (evaluated first, not timed)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("-r,--repetitions", reps, "repetitions of each test")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("-o,--output", format, "output format")->check(CLI::IsMember({"md", "csv", "json"}))->capture_default_str();
  app.add_flag("--no-bandwidth", skip_bandwidth, "skip the memory bandwidth measurement");
  sf.add_to(app, /*sparse_repeatable=*/true);
  df.add_to(app);
  app.add_option("--trace", trace_path,
                 "write a Chrome trace of the first mode's last generation run to FILE")
      ->type_name("FILE");
  app.get_option("--ctx-size")
      ->description("context size in tokens (0 = -d plus the larger of -p and -n, plus 1)");
  return run_app(app, argc, argv, [&] {
    if (n_prompt == 0 && n_gen == 0) fail("nothing to measure: -p and -n are both 0");
    const int32_t longest = n_depth + std::max(n_prompt, n_gen);
    if (sf.n_ctx == 0) sf.n_ctx = longest + 1;
    // The device's placement is solved for the first mode.
    const auto model = load_model(model_path, sf, df);
    const ModelConfig& c = model->config();
    SessionOptions o = sf.options();
    if (o.n_ctx < longest) {
      fail("-c ", o.n_ctx, " is too small for ", longest, " tokens (-d ", n_depth, ", -p ",
           n_prompt, ", -n ", n_gen, ")");
    }
    o.n_batch = std::max(1, std::min(o.n_batch, std::max({n_prompt, n_depth, 1})));
    if (o.n_ctx > c.n_ctx_train) {
      std::fprintf(stderr, "hearth bench: note: %d tokens exceed the model's training context %lld\n",
                   o.n_ctx, (long long)c.n_ctx_train);
    }
    // One session per mode, all made before measuring so a mode that cannot run fails first.
    std::vector<ModeRun> runs;
    for (const SparseMode mode : sf.sparse_modes()) {
      SessionOptions mo = o;
      mo.sparse = mode;
      mo.trace = runs.empty() && !trace_path.empty();
      runs.push_back({mode, std::make_unique<Session>(model, mo), {}, {}, {}});
    }

    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(c.n_vocab - 1));
    std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
    for (auto& t : prompt) t = pick(rng);
    std::vector<int32_t> gen(static_cast<size_t>(n_gen));
    for (auto& t : gen) t = pick(rng);
    std::vector<int32_t> depth(static_cast<size_t>(n_depth));
    for (auto& t : depth) t = pick(rng);

    // Each test starts from a context holding the depth tokens, evaluated outside the timing.
    auto fill = [&](Session& s) {
      s.reset();
      if (n_depth) s.eval_prompt(depth);
    };
    auto run_pp = [&](Session& s) { s.eval_prompt(prompt); };
    auto run_tg = [&](Session& s) {
      for (const int32_t& t : gen) s.eval({&t, 1});
    };
    // Warm-up (page in the mapped weights, size the scratch), then alternate the tests and, within
    // each test, the modes.
    for (auto& r : runs) {
      if (n_prompt) {
        fill(*r.session);
        run_pp(*r.session);
      }
      if (n_gen) {
        fill(*r.session);
        run_tg(*r.session);
      }
    }
    // The bandwidth is measured once per repetition, right after its runs, so that on a machine
    // whose speed drifts each repetition's speed is set against a bandwidth of the same minutes.
    std::vector<double> bandwidths;
    for (int rep = 0; rep < reps; ++rep) {
      if (n_prompt) {
        for (auto& r : runs) {
          fill(*r.session);
          r.pp.push_back(n_prompt / time_s([&] { run_pp(*r.session); }));
        }
      }
      if (n_gen) {
        for (auto& r : runs) {
          fill(*r.session);
          r.session->reset_stats();
          r.tg.push_back(n_gen / time_s([&] { run_tg(*r.session); }));
          accumulate(r.tg_stats, r.session->sparse_stats());
        }
      }
      if (!skip_bandwidth) {
        cpu::ThreadPool pool(o.n_threads);
        bandwidths.push_back(cpu::measure_bandwidth_gbs(pool));
      }
    }
    const double bandwidth = stats(bandwidths).mean;
    const int kv_bytes = o.kv_type == KvType::F16 ? 2 : 4;
    // Decode reads the KV cache so far: on average n_depth + n_gen / 2 positions.
    const double kv_per_token =
        2.0 * c.n_layer * c.n_embd_kv() * kv_bytes * (n_depth + n_gen / 2.0);
    // One number for the report; per-layer calibrated thresholds have none (null).
    const double threshold = !std::isnan(sf.sparse_threshold) ? sf.sparse_threshold
                             : c.predictor_thresholds.empty() ? model->sparse_threshold()
                                                              : std::nan("");
    const std::string name = model_path.substr(model_path.find_last_of('/') + 1);

    std::vector<BenchRow> rows;
    for (const auto& r : runs) {
      BenchRow row;
      row.model = name;
      row.sparse = to_string(r.session->sparse_mode());
      row.sparse_requested = to_string(r.requested);
      row.sparse_threshold = r.session->sparse_mode() == SparseMode::Predictor ? threshold : std::nan("");
      row.n_prompt = n_prompt;
      row.n_gen = n_gen;
      row.n_depth = n_depth;
      row.threads = r.session->n_threads();
      row.repetitions = reps;
      const Stats pps = stats(r.pp), tgs = stats(r.tg);
      row.pp_mean = pps.mean;
      row.pp_sd = pps.sd;
      row.pp_gflops = pps.mean * flops_per_token(c, n_depth + n_prompt / 2.0) / 1e9;
      row.tg_mean = tgs.mean;
      row.tg_sd = tgs.sd;
      row.sparsity = r.tg_stats.sparsity();
      row.input_sparsity = r.tg_stats.input_sparsity();
      // Weights as the session counted them during tg; the dense estimate when it counted none.
      row.measured_bytes = r.tg_stats.tokens > 0 && r.tg_stats.weight_bytes > 0;
      row.bytes_per_token = (row.measured_bytes ? r.tg_stats.bytes_per_token()
                                                : static_cast<double>(model->weight_bytes_per_token())) +
                            kv_per_token;
      row.bandwidth_gbs = bandwidth;
      row.roofline = bandwidth > 0 ? bandwidth * 1e9 / row.bytes_per_token : 0;
      // The mean of each repetition's speed against its own bandwidth.
      row.roofline_fraction = 0;
      if (!bandwidths.empty() && !r.tg.empty()) {
        for (size_t i = 0; i < r.tg.size(); ++i) {
          row.roofline_fraction += r.tg[i] * row.bytes_per_token / (bandwidths[i] * 1e9);
        }
        row.roofline_fraction /= static_cast<double>(r.tg.size());
      }
      row.device = model->device_name();
      row.device_bytes = model->device_allocated();
      row.device_busy = r.session->device_busy_fraction();
      row.weights_in_memory = model->weights_in_memory();
      rows.push_back(row);
    }
    if (!trace_path.empty()) {
      runs.front().session->write_trace(trace_path);
      std::fprintf(stderr, "hearth bench: trace of %s written to %s (device busy %.3f of the time)\n",
                   to_string(runs.front().session->sparse_mode()).c_str(), trace_path.c_str(),
                   runs.front().session->device_busy_fraction());
    }
    std::fprintf(stderr, "hearth bench: weights %s\n",
                 model->weights_in_memory() ? "read into memory (--mmap maps the file instead)"
                                            : "mapped from the file");
    if (!model->device_name().empty()) {
      std::fprintf(stderr, "hearth bench: %s holds %.1f MiB (peak %.1f MiB)\n",
                   model->device_name().c_str(), model->device_allocated() / 1048576.0,
                   model->device_peak_allocated() / 1048576.0);
    }
    print_bench(rows, format);
    return 0;
  });
}

}  // namespace hearth::cli
