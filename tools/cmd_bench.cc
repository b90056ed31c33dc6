// hearth bench: prompt-processing and generation speed like llama-bench, plus the decode roofline
// (bytes read per token against the machine's measured memory bandwidth, DESIGN.md section 7).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/bandwidth.h"
#include "backend/cpu/thread_pool.h"
#include "cli_common.h"
#include "commands.h"
#include "core/error.h"

namespace hearth::cli {
namespace {

using Clock = std::chrono::steady_clock;

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
  return std::chrono::duration<double>(Clock::now() - t0).count();
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

}  // namespace

int cmd_bench(int argc, char** argv) {
  CLI::App app("Measure prompt and generation speed and the decode roofline", "bench");
  std::string model_path, format = "md";
  int32_t n_prompt = 512, n_gen = 128, reps = 3, n_threads = 0;
  bool skip_bandwidth = false, no_mmap = false;
  std::string kv_type = "f16";
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("-p,--n-prompt", n_prompt, "prompt tokens (0 = skip)")->check(CLI::Range(0, 1 << 20))->capture_default_str();
  app.add_option("-n,--n-gen", n_gen, "generated tokens (0 = skip)")->check(CLI::Range(0, 1 << 20))->capture_default_str();
  app.add_option("-r,--repetitions", reps, "repetitions of each test")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("-t,--threads", n_threads, "threads (default: all)")->check(CLI::Range(1, 1024));
  app.add_option("-o,--output", format, "output format")->check(CLI::IsMember({"md", "csv", "json"}))->capture_default_str();
  app.add_option("--kv-type", kv_type, "KV cache type")->check(CLI::IsMember({"f16", "f32"}));
  app.add_flag("--no-bandwidth", skip_bandwidth, "skip the memory bandwidth measurement");
  app.add_flag("--no-mmap", no_mmap, "read the model into memory instead of mapping it");
  return run_app(app, argc, argv, [&] {
    if (n_prompt == 0 && n_gen == 0) fail("nothing to measure: -p and -n are both 0");
    const auto model = Model::load(model_path, !no_mmap);
    const ModelConfig& c = model->config();
    SessionOptions o;
    o.n_threads = n_threads > 0 ? n_threads : default_threads();
    o.n_ctx = std::max(n_prompt, n_gen) + 1;
    o.n_batch = std::max(1, std::min(n_prompt, 512));
    o.kv_type = kv_type == "f32" ? KvType::F32 : KvType::F16;
    if (o.n_ctx > c.n_ctx_train) {
      std::fprintf(stderr, "hearth bench: note: %d tokens exceed the model's training context %lld\n",
                   o.n_ctx, (long long)c.n_ctx_train);
    }
    Session session(model, o);

    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(c.n_vocab - 1));
    std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
    for (auto& t : prompt) t = pick(rng);
    std::vector<int32_t> gen(static_cast<size_t>(n_gen));
    for (auto& t : gen) t = pick(rng);

    auto run_pp = [&] {
      session.reset();
      session.eval(prompt);
    };
    auto run_tg = [&] {
      session.reset();
      for (const int32_t& t : gen) session.eval({&t, 1});
    };
    // Warm-up (page in the mapped weights, size the scratch), then alternate the tests.
    if (n_prompt) run_pp();
    if (n_gen) run_tg();
    std::vector<double> pp, tg;
    for (int r = 0; r < reps; ++r) {
      if (n_prompt) pp.push_back(n_prompt / time_s(run_pp));
      if (n_gen) tg.push_back(n_gen / time_s(run_tg));
    }

    double bandwidth = 0;
    if (!skip_bandwidth) {
      cpu::ThreadPool pool(o.n_threads);
      bandwidth = cpu::measure_bandwidth_gbs(pool);
    }
    const int kv_bytes = o.kv_type == KvType::F16 ? 2 : 4;
    // Decode reads every weight matrix once plus the KV cache so far (average n_gen / 2 positions).
    const double bytes_per_token = static_cast<double>(model->weight_bytes_per_token()) +
                                   2.0 * c.n_layer * c.n_embd_kv() * kv_bytes * (n_gen / 2.0);
    const Stats pps = stats(pp), tgs = stats(tg);
    const double roofline = bandwidth > 0 ? bandwidth * 1e9 / bytes_per_token : 0;
    const double fraction = roofline > 0 ? tgs.mean / roofline : 0;
    const double pp_gflops = pps.mean * flops_per_token(c, n_prompt / 2.0) / 1e9;

    const std::string name = model_path.substr(model_path.find_last_of('/') + 1);
    if (format == "json") {
      nlohmann::json row = {
          {"model", name}, {"sparse", "dense"}, {"n_prompt", n_prompt}, {"n_gen", n_gen},
          {"threads", o.n_threads}, {"repetitions", reps},
          {"pp_tokens_per_s", pps.mean}, {"pp_tokens_per_s_sd", pps.sd}, {"pp_gflops", pp_gflops},
          {"tg_tokens_per_s", tgs.mean}, {"tg_tokens_per_s_sd", tgs.sd}, {"sparsity", 0.0},
          {"bytes_per_token", bytes_per_token}, {"bandwidth_gbs", bandwidth},
          {"roofline_tokens_per_s", roofline}, {"roofline_fraction", fraction}};
      std::printf("%s\n", nlohmann::json::array({row}).dump(2).c_str());
    } else if (format == "csv") {
      std::printf("model,sparse,n_prompt,n_gen,threads,pp_tokens_per_s,pp_sd,pp_gflops,tg_tokens_per_s,tg_sd,sparsity,bytes_per_token,bandwidth_gbs,roofline_fraction\n");
      std::printf("%s,dense,%d,%d,%d,%.3f,%.3f,%.2f,%.3f,%.3f,0,%.0f,%.2f,%.4f\n", name.c_str(),
                  n_prompt, n_gen, o.n_threads, pps.mean, pps.sd, pp_gflops, tgs.mean, tgs.sd,
                  bytes_per_token, bandwidth, fraction);
    } else {
      std::printf("| model | sparse | threads | test | tokens/s | GFLOP/s | MB/token | bandwidth GB/s | roofline |\n");
      std::printf("|---|---|---|---|---|---|---|---|---|\n");
      if (n_prompt) {
        std::printf("| %s | dense | %d | pp%d | %.2f ± %.2f | %.1f | | | |\n", name.c_str(), o.n_threads,
                    n_prompt, pps.mean, pps.sd, pp_gflops);
      }
      if (n_gen) {
        std::printf("| %s | dense | %d | tg%d | %.2f ± %.2f | | %.1f | %.2f | %.0f%% of %.2f tok/s |\n",
                    name.c_str(), o.n_threads, n_gen, tgs.mean, tgs.sd, bytes_per_token / 1e6,
                    bandwidth, 100 * fraction, roofline);
      }
    }
    return 0;
  });
}

}  // namespace hearth::cli
