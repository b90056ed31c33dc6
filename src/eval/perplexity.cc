#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace hearth::eval {

namespace {

// max(x) and log(sum exp(x - max)), so that log softmax(x)_i = x_i - max - lse.
struct LogSumExp {
  double max = 0, lse = 0;
};

LogSumExp log_sum_exp(std::span<const float> x) {
  LogSumExp r;
  if (x.empty()) fail("log softmax of an empty row of logits");
  r.max = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (const float v : x) sum += std::exp(static_cast<double>(v) - r.max);
  r.lse = std::log(sum);
  return r;
}

}  // namespace

double log_prob(std::span<const float> logits, int32_t target) {
  if (target < 0 || static_cast<size_t>(target) >= logits.size()) {
    fail("token ", target, " is outside the ", logits.size(), " logits");
  }
  const LogSumExp s = log_sum_exp(logits);
  return static_cast<double>(logits[static_cast<size_t>(target)]) - s.max - s.lse;
}

void log_softmax(std::span<const float> logits, std::span<double> out) {
  if (out.size() != logits.size()) fail("log_softmax: output size ", out.size(), " != ", logits.size());
  const LogSumExp s = log_sum_exp(logits);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - s.max - s.lse;
}

double kl_divergence(std::span<const float> base, std::span<const float> other) {
  if (base.size() != other.size()) fail("kl_divergence: ", base.size(), " != ", other.size(), " logits");
  const LogSumExp b = log_sum_exp(base), o = log_sum_exp(other);
  double kl = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    const double lp = static_cast<double>(base[i]) - b.max - b.lse;
    const double lq = static_cast<double>(other[i]) - o.max - o.lse;
    kl += std::exp(lp) * (lp - lq);
  }
  return kl;
}

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) fail("argmax of an empty row of logits");
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

void MeanStat::add(double x) {
  ++n_;
  const double d = x - mean_;
  mean_ += d / static_cast<double>(n_);
  m2_ += d * (x - mean_);
}

double MeanStat::standard_error() const {
  if (n_ < 2) return 0.0;
  const double var = std::max(0.0, m2_ / static_cast<double>(n_));  // population variance
  return std::sqrt(var / static_cast<double>(n_ - 1));
}

Perplexity perplexity(const MeanStat& nll) {
  Perplexity p;
  p.value = std::exp(nll.mean());
  p.error = p.value * nll.standard_error();
  return p;
}

ChunkPlan plan_chunks(int64_t n_tokens, int64_t n_ctx, int64_t max_chunks) {
  if (n_ctx < 4) fail("the context must be at least 4 tokens to score half of it (got ", n_ctx, ")");
  if (n_tokens < 2 * n_ctx) {
    fail("the text has ", n_tokens, " tokens, but a context of ", n_ctx, " needs at least ",
         2 * n_ctx, " (two chunks); give a longer text or a smaller -c");
  }
  ChunkPlan p;
  p.n_ctx = n_ctx;
  p.n_chunks = n_tokens / n_ctx;
  if (max_chunks > 0) p.n_chunks = std::min(p.n_chunks, max_chunks);
  p.first = n_ctx / 2;
  return p;
}

std::vector<int32_t> chunk_input(std::span<const int32_t> tokens, const ChunkPlan& plan, int64_t i,
                                 int32_t bos) {
  const size_t start = static_cast<size_t>(i * plan.n_ctx);
  const size_t n = static_cast<size_t>(plan.n_ctx);
  if (i < 0 || start + n > tokens.size()) fail("chunk ", i, " lies outside the text");
  std::vector<int32_t> chunk(tokens.begin() + static_cast<std::ptrdiff_t>(start),
                             tokens.begin() + static_cast<std::ptrdiff_t>(start + n));
  if (bos >= 0) chunk[0] = bos;
  return chunk;
}

void score_chunk(const ChunkPlan& plan, std::span<const int32_t> chunk, std::span<const float> logits,
                 int64_t n_vocab, MeanStat& nll) {
  const size_t v = static_cast<size_t>(n_vocab);
  if (chunk.size() != static_cast<size_t>(plan.n_ctx) || logits.size() < chunk.size() * v) {
    fail("score_chunk: expected ", plan.n_ctx, " tokens and their logits");
  }
  for (int64_t j = plan.first; j < plan.n_ctx - 1; ++j) {
    const auto row = logits.subspan(static_cast<size_t>(j) * v, v);
    nll.add(-log_prob(row, chunk[static_cast<size_t>(j + 1)]));
  }
}

void compare_chunk(const ChunkPlan& plan, std::span<const float> base, std::span<const float> other,
                   int64_t n_vocab, MeanStat& kl, uint64_t& same_top1) {
  const size_t v = static_cast<size_t>(n_vocab);
  const size_t need = static_cast<size_t>(plan.n_ctx) * v;
  if (base.size() < need || other.size() < need) fail("compare_chunk: expected ", plan.n_ctx, " rows of logits");
  for (int64_t j = plan.first; j < plan.n_ctx - 1; ++j) {
    const auto b = base.subspan(static_cast<size_t>(j) * v, v);
    const auto o = other.subspan(static_cast<size_t>(j) * v, v);
    kl.add(kl_divergence(b, o));
    same_top1 += argmax(b) == argmax(o);
  }
}

}  // namespace hearth::eval
