// Wall-clock timing for the figures the commands print (load, prompt and generation times).
#pragma once

#include <chrono>

namespace hearth::cli {

using Clock = std::chrono::steady_clock;

// Seconds since t0.
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace hearth::cli
