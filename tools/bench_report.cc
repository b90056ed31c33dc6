#include "bench_report.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace hearth::cli {
namespace {

// a / b, or NaN when either side was not measured.
double ratio(double a, double b) { return a > 0 && b > 0 ? a / b : std::nan(""); }

nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }

std::string label(const BenchRow& r) {
  return r.sparse == r.sparse_requested ? r.sparse : r.sparse + " (" + r.sparse_requested + ")";
}

std::string fmt(const char* f, double x) {
  if (!std::isfinite(x)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

void print_json(const std::vector<BenchRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  const BenchRow& base = rows.front();
  for (const BenchRow& r : rows) {
    out.push_back(
        {{"model", r.model},
         {"sparse", r.sparse},
         {"sparse_requested", r.sparse_requested},
         {"sparse_threshold", number_or_null(r.sparse_threshold)},
         {"n_prompt", r.n_prompt},
         {"n_gen", r.n_gen},
         {"n_depth", r.n_depth},
         {"threads", r.threads},
         {"repetitions", r.repetitions},
         {"pp_tokens_per_s", r.pp_mean},
         {"pp_tokens_per_s_sd", r.pp_sd},
         {"pp_gflops", r.pp_gflops},
         {"tg_tokens_per_s", r.tg_mean},
         {"tg_tokens_per_s_sd", r.tg_sd},
         {"pp_speedup", number_or_null(ratio(r.pp_mean, base.pp_mean))},
         {"tg_speedup", number_or_null(ratio(r.tg_mean, base.tg_mean))},
         {"sparsity", r.sparsity},
         {"input_sparsity", r.input_sparsity},
         {"bytes_per_token", r.bytes_per_token},
         {"bytes_per_token_measured", r.measured_bytes},
         {"bandwidth_gbs", r.bandwidth_gbs},
         {"roofline_tokens_per_s", r.roofline},
         {"roofline_fraction", r.roofline_fraction},
         {"tg_implied_speedup", number_or_null(ratio(base.bytes_per_token, r.bytes_per_token))},
         {"device", r.device},
         {"device_bytes", r.device_bytes},
         {"device_busy", r.device_busy},
         {"weights_in_memory", r.weights_in_memory}});
  }
  std::printf("%s\n", out.dump(2).c_str());
}

void print_csv(const std::vector<BenchRow>& rows) {
  std::printf(
      "model,sparse,sparse_requested,n_prompt,n_gen,n_depth,threads,repetitions,pp_tokens_per_s,pp_"
      "sd,"
      "pp_gflops,tg_tokens_per_s,tg_sd,pp_speedup,tg_speedup,sparsity,bytes_per_token,"
      "bandwidth_gbs,roofline_tokens_per_s,roofline_fraction\n");
  const BenchRow& base = rows.front();
  for (const BenchRow& r : rows) {
    std::printf("%s,%s,%s,%d,%d,%d,%d,%d,%.3f,%.3f,%.2f,%.3f,%.3f,%s,%s,%.4f,%.0f,%.2f,%.3f,%.4f\n",
                r.model.c_str(), r.sparse.c_str(), r.sparse_requested.c_str(), r.n_prompt, r.n_gen,
                r.n_depth, r.threads, r.repetitions, r.pp_mean, r.pp_sd, r.pp_gflops, r.tg_mean,
                r.tg_sd, fmt("%.4f", ratio(r.pp_mean, base.pp_mean)).c_str(),
                fmt("%.4f", ratio(r.tg_mean, base.tg_mean)).c_str(), r.sparsity, r.bytes_per_token,
                r.bandwidth_gbs, r.roofline, r.roofline_fraction);
  }
}

void print_md(const std::vector<BenchRow>& rows) {
  const BenchRow& base = rows.front();
  const bool compare = rows.size() > 1;
  std::string vs_header;
  if (compare) vs_header.append(" vs ").append(label(base)).append(" |");
  std::printf("| model | sparse | threads | test | tokens/s |%s sparsity | GFLOP/s | MB/token | bandwidth GB/s | roofline |\n",
              vs_header.c_str());
  std::printf("|---|---|---|---|---|%s---|---|---|---|---|\n", compare ? "---|" : "");
  auto vs = [&](double a, double b) {
    if (!compare) return std::string();
    const double x = ratio(a, b);
    std::string cell(" ");
    if (std::isfinite(x)) cell.append(fmt("%.2fx", x));
    return cell.append(" |");
  };
  // llama-bench's test names: "tg128 @ d512" after 512 tokens of context.
  const auto test = [](const char* kind, int32_t n, int32_t depth) {
    std::string name = kind + std::to_string(n);
    if (depth > 0) name.append(" @ d").append(std::to_string(depth));
    return name;
  };
  for (const BenchRow& r : rows) {
    if (r.n_prompt) {
      std::printf("| %s | %s | %d | %s | %.2f ± %.2f |%s | %.1f | | | |\n", r.model.c_str(),
                  label(r).c_str(), r.threads, test("pp", r.n_prompt, r.n_depth).c_str(), r.pp_mean,
                  r.pp_sd, vs(r.pp_mean, base.pp_mean).c_str(), r.pp_gflops);
    }
  }
  for (const BenchRow& r : rows) {
    if (r.n_gen) {
      std::string roof;
      if (r.roofline > 0) {
        roof.append(fmt("%.0f%%", 100 * r.roofline_fraction)).append(" of ");
        roof.append(fmt("%.2f", r.roofline)).append(" tok/s");
        // What the bytes saved allow against the first mode, next to what was measured.
        const double implied = ratio(base.bytes_per_token, r.bytes_per_token);
        if (&r != &base && std::isfinite(implied)) roof.append(fmt(" (implies %.2fx)", implied));
      }
      std::printf("| %s | %s | %d | %s | %.2f ± %.2f |%s %.3f | | %.4g%s | %s | %s |\n",
                  r.model.c_str(), label(r).c_str(), r.threads,
                  test("tg", r.n_gen, r.n_depth).c_str(), r.tg_mean, r.tg_sd,
                  vs(r.tg_mean, base.tg_mean).c_str(), r.sparsity, r.bytes_per_token / 1e6,
                  r.measured_bytes ? "" : "*",
                  r.bandwidth_gbs > 0 ? fmt("%.2f", r.bandwidth_gbs).c_str() : "", roof.c_str());
    }
  }
  for (const BenchRow& r : rows) {
    if (r.n_gen && !r.measured_bytes) {
      std::printf("\n\\* the session counted no weight traffic: every weight matrix once plus the KV cache\n");
      break;
    }
  }
}

}  // namespace

void print_bench(const std::vector<BenchRow>& rows, const std::string& format) {
  if (rows.empty()) return;
  if (format == "json") {
    print_json(rows);
  } else if (format == "csv") {
    print_csv(rows);
  } else {
    print_md(rows);
  }
}

}  // namespace hearth::cli
