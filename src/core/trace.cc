#include "core/trace.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "core/error.h"

namespace hearth {

TraceRecorder::TraceRecorder(size_t capacity) : start_(std::chrono::steady_clock::now()) {
  for (auto& s : spans_) s.resize(capacity);
}

double TraceRecorder::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_)
      .count();
}

void TraceRecorder::add(Track track, const char* name, double begin_us, double end_us) {
  const size_t i = used_[track].load(std::memory_order_relaxed);
  if (i >= spans_[track].size()) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  spans_[track][i] = Span{name, begin_us, end_us};
  // Release: a reader that sees the new count also sees the span.
  used_[track].store(i + 1, std::memory_order_release);
}

size_t TraceRecorder::size(Track track) const {
  return used_[track].load(std::memory_order_acquire);
}

void TraceRecorder::write_json(const std::string& path) const {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!f) fail("cannot write the trace file ", path);
  static constexpr const char* kTrackNames[kTracks] = {"host (CPU)", "device"};
  std::fputs("{\"traceEvents\":[\n", f.get());
  bool first = true;
  for (int t = 0; t < kTracks; ++t) {
    std::fprintf(f.get(),
                 "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                 "\"args\":{\"name\":\"%s\"}}",
                 first ? "" : ",\n", t + 1, kTrackNames[t]);
    first = false;
    const size_t n = size(static_cast<Track>(t));
    for (size_t i = 0; i < n; ++i) {
      const Span& s = spans_[t][i];
      std::fprintf(f.get(),
                   ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}",
                   s.name, t + 1, s.begin_us, std::max(0.0, s.end_us - s.begin_us));
    }
  }
  std::fprintf(f.get(), "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped_spans\":%llu}}\n",
               static_cast<unsigned long long>(dropped()));
  if (std::ferror(f.get())) fail("cannot write the trace file ", path);
}

double TraceRecorder::device_busy_fraction() const {
  const size_t nh = size(kHost), nd = size(kDevice);
  if (nh == 0) return 0.0;
  double begin = spans_[kHost][0].begin_us, end = spans_[kHost][0].end_us;
  for (size_t i = 0; i < nh; ++i) {
    begin = std::min(begin, spans_[kHost][i].begin_us);
    end = std::max(end, spans_[kHost][i].end_us);
  }
  double busy = 0.0;
  for (size_t i = 0; i < nd; ++i) {
    const Span& s = spans_[kDevice][i];
    busy += std::max(0.0, std::min(s.end_us, end) - std::max(s.begin_us, begin));
  }
  return end > begin ? busy / (end - begin) : 0.0;
}

}  // namespace hearth
