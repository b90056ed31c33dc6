#include "server/metrics.h"

#include <sstream>

namespace hearth::server {
namespace {

void metric(std::ostringstream& out, const char* name, const char* type, const char* help,
            double value) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
      << name << ' ' << value << '\n';
}

}  // namespace

void Metrics::on_request() {
  std::lock_guard lock(mu_);
  ++requests_;
}

void Metrics::on_rejected() {
  std::lock_guard lock(mu_);
  ++rejected_;
}

void Metrics::on_result(const GenerationResult& r) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += static_cast<uint64_t>(r.n_prompt);
  cached_tokens_ += static_cast<uint64_t>(r.n_cached);
  generated_tokens_ += static_cast<uint64_t>(r.n_generated);
  recent_.emplace_back(r.n_generated, r.gen_s);
  if (recent_.size() > kWindow) recent_.pop_front();
}

std::string Metrics::prometheus(const SchedulerGauges& g, const HttpStats& h) const {
  std::lock_guard lock(mu_);
  double tokens = 0, seconds = 0;
  for (const auto& [n, s] : recent_) {
    tokens += n;
    seconds += s;
  }
  std::ostringstream out;
  out.precision(10);
  metric(out, "hearth_requests_total", "counter", "Completion requests received.", requests_);
  metric(out, "hearth_requests_rejected_total", "counter", "Requests refused with 503 (queue full).",
         rejected_);
  metric(out, "hearth_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
         prompt_tokens_);
  metric(out, "hearth_prompt_tokens_cached_total", "counter",
         "Prompt tokens not evaluated: a slot's cache held them.", cached_tokens_);
  metric(out, "hearth_tokens_generated_total", "counter", "Tokens generated.", generated_tokens_);
  metric(out, "hearth_tokens_per_second", "gauge",
         "Generation speed of one slot over the latest requests.", seconds > 0 ? tokens / seconds : 0);
  metric(out, "hearth_queue_length", "gauge", "Requests waiting for a slot.",
         static_cast<double>(g.queued));
  metric(out, "hearth_slots_active", "gauge", "Slots generating now.", g.active);
  metric(out, "hearth_slots_total", "gauge", "Slots (--parallel).", g.n_slots);
  metric(out, "hearth_engine_steps_total", "counter",
         "Forward passes, each over every active slot.", static_cast<double>(g.steps));
  metric(out, "hearth_engine_tokens_total", "counter",
         "Tokens those passes evaluated (divided by the steps: the mean batch).",
         static_cast<double>(g.tokens));
  metric(out, "hearth_ffn_sparsity", "gauge",
         "Fraction of FFN neurons skipped over all requests so far.", g.ffn_sparsity);
  metric(out, "hearth_http_connections", "gauge", "HTTP connections open now.",
         static_cast<double>(h.connections));
  metric(out, "hearth_http_connections_total", "counter", "HTTP connections accepted.",
         static_cast<double>(h.connections_total));
  metric(out, "hearth_http_connections_rejected_total", "counter",
         "Connections answered 503 at --max-connections or --max-connections-per-client.",
         static_cast<double>(h.rejected_total));
  metric(out, "hearth_http_timeouts_total", "counter",
         "Connections closed at a header, body or write deadline.",
         static_cast<double>(h.timeouts_total));
  metric(out, "hearth_http_too_large_total", "counter",
         "Requests answered 413 or 431 (body or headers over the limit).",
         static_cast<double>(h.too_large_total));
  metric(out, "hearth_http_refused_total", "counter",
         "Requests answered 403: a foreign Host or cross-origin Origin.",
         static_cast<double>(h.refused_total));
  return out.str();
}

}  // namespace hearth::server
