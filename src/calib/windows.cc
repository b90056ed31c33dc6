#include "calib/windows.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "text/unicode.h"

namespace hearth::calib {

std::vector<int32_t> tokenize_text(const Model& m, const std::string& text, const char* what) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = text::utf8_valid_len(text, pos);
    if (len == 0) fail("the ", what, " is not UTF-8 text (bad byte at offset ", pos, ")");
    pos += len;
  }
  return m.tokenize(text, /*add_bos=*/false);
}

SparseStats run_windows(const std::shared_ptr<const Model>& model, std::span<const int32_t> tokens,
                        SessionOptions so, int64_t window,
                        const std::function<void(const std::string&)>& log,
                        const std::string& label, const WindowStep& step) {
  using Clock = std::chrono::steady_clock;
  so.n_ctx = static_cast<int32_t>(window + 1);
  so.n_batch = so.n_ctx;
  Session session(model, so);
  const bool bos = model->add_bos_default() && model->bos() >= 0;
  std::vector<int32_t> input;
  const auto start = Clock::now();
  auto last = start;
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(window)) {
    const size_t n = std::min(tokens.size() - i, static_cast<size_t>(window));
    input.clear();
    if (bos) input.push_back(model->bos());
    input.insert(input.end(), tokens.begin() + static_cast<ptrdiff_t>(i),
                 tokens.begin() + static_cast<ptrdiff_t>(i + n));
    session.reset();
    if (step) {
      step(session, input);
    } else {
      session.eval(input);
    }
    const auto now = Clock::now();
    if (log && (i + n == tokens.size() || now - last > std::chrono::seconds(2))) {
      last = now;
      const double secs = std::chrono::duration<double>(now - start).count();
      const double rate = static_cast<double>(i + n) / std::max(secs, 1e-9);
      log(str_cat(label, ": ", i + n, "/", tokens.size(), " tokens, ",
                  static_cast<int64_t>(rate), " tokens/s, ",
                  static_cast<int64_t>((tokens.size() - i - n) / std::max(rate, 1e-9)), " s left"));
    }
  }
  return session.sparse_stats();
}

}  // namespace hearth::calib
