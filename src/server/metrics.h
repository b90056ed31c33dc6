// Counters for GET /metrics (Prometheus text format). Updated by the HTTP threads (requests) and
// the engine thread (results); every member is guarded by one mutex, since updates happen once per
// request, never per token. Gauges the scheduler keeps itself come in with each scrape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

#include "server/generation.h"
#include "server/http.h"

namespace hearth::server {

struct SchedulerGauges {
  size_t queued = 0;
  int active = 0;
  int n_slots = 0;
  double ffn_sparsity = 0;  // over every token evaluated so far
  uint64_t steps = 0;       // forward passes of the engine
  uint64_t tokens = 0;      // tokens they evaluated (prompt chunks and generated tokens)
};

class Metrics {
 public:
  void on_request();      // a completion request arrived
  void on_rejected();     // refused because the queue was full
  void on_result(const GenerationResult& r);
  std::string prometheus(const SchedulerGauges& gauges, const HttpStats& http = {}) const;

 private:
  // Generation speed over this many of the latest requests.
  static constexpr size_t kWindow = 16;
  mutable std::mutex mu_;
  uint64_t requests_ = 0;
  uint64_t rejected_ = 0;
  uint64_t prompt_tokens_ = 0;
  uint64_t cached_tokens_ = 0;
  uint64_t generated_tokens_ = 0;
  std::deque<std::pair<int32_t, double>> recent_;  // (tokens, seconds) of the latest requests
};

}  // namespace hearth::server
