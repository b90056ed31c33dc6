// A timeline of what the host and the device did, written as Chrome trace JSON (--trace FILE; open
// it in chrome://tracing or ui.perfetto.dev) to show that the two halves of a hybrid layer overlap.
// Each track is written by one thread only and its storage is reserved up front, so recording
// takes no lock and never allocates in the decode loop; spans beyond the capacity are counted and
// dropped.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace hearth {

class TraceRecorder {
 public:
  enum Track { kHost = 0, kDevice = 1, kTracks = 2 };

  explicit TraceRecorder(size_t capacity_per_track = 1 << 20);

  // Microseconds since the recorder was made (steady clock).
  double now_us() const;

  // `name` must outlive the recorder (a string literal). Thread-safe across tracks, not within one.
  void add(Track track, const char* name, double begin_us, double end_us);

  size_t size(Track track) const;
  uint64_t dropped() const { return dropped_.load(); }

  // Writes every span as a Chrome trace ("X" events, one thread per track); throws hearth::Error
  // when the file cannot be written.
  void write_json(const std::string& path) const;
  // Share of the host track's wall time (first begin to last end) covered by device spans.
  double device_busy_fraction() const;

 private:
  struct Span {
    const char* name;
    double begin_us;
    double end_us;
  };
  std::chrono::steady_clock::time_point start_;
  std::array<std::vector<Span>, kTracks> spans_;
  std::array<std::atomic<size_t>, kTracks> used_{};
  std::atomic<uint64_t> dropped_{0};
};

// Records the span from construction to destruction on a track (no-op without a recorder).
class TraceScope {
 public:
  TraceScope(TraceRecorder* trace, TraceRecorder::Track track, const char* name)
      : trace_(trace), track_(track), name_(name), begin_(trace ? trace->now_us() : 0.0) {}
  ~TraceScope() {
    if (trace_) trace_->add(track_, name_, begin_, trace_->now_us());
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  TraceRecorder* trace_;
  TraceRecorder::Track track_;
  const char* name_;
  double begin_;
};

}  // namespace hearth
