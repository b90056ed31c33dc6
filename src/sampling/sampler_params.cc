#include <cmath>

#include "core/error.h"
#include "hearth/sampling.h"

namespace hearth {

void validate(const SamplerParams& p) {
  // Comparisons are written so that NaN fails them: a NaN parameter must be rejected, not ignored.
  if (!std::isfinite(p.temp)) fail("sampling: temp must be finite, got ", p.temp);
  if (p.top_k < 0) fail("sampling: top_k must be >= 0 (0 disables), got ", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    fail("sampling: top_p must be in (0, 1] (1 disables), got ", p.top_p);
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    fail("sampling: min_p must be in [0, 1] (0 disables), got ", p.min_p);
  }
  if (!(p.repeat_penalty > 0.0f && std::isfinite(p.repeat_penalty))) {
    fail("sampling: repeat_penalty must be finite and > 0 (1 disables), got ", p.repeat_penalty);
  }
  if (p.repeat_last_n < 0 || p.repeat_last_n > kMaxRepeatLastN) {
    fail("sampling: repeat_last_n must be in [0, ", kMaxRepeatLastN, "] (0 disables), got ",
         p.repeat_last_n);
  }
}

}  // namespace hearth
