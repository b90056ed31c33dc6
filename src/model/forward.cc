// Session::Impl::forward: the architecture family's pass (forward_<family>.cc), then the
// bookkeeping every family shares.
#include "model/session_impl.h"

namespace hearth {

void Session::Impl::forward(const int32_t* tokens, int64_t n, float* all_logits) {
  switch (model.family) {
    case ArchFamily::Llama: forward_llama(tokens, n, all_logits); break;
    case ArchFamily::Falcon: forward_falcon(tokens, n, all_logits); break;
    case ArchFamily::Opt: forward_opt(tokens, n, all_logits); break;
  }
  n_past += static_cast<int32_t>(n);
  stats.tokens += static_cast<uint64_t>(n);
  stats.weight_bytes += non_ffn_bytes;
}

}  // namespace hearth
