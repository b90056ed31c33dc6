// Sustainable memory bandwidth of this machine, the ceiling of the decode roofline (DESIGN.md 7):
// a STREAM-style triad over arrays far larger than the caches.
#pragma once

#include <cstddef>

#include "backend/cpu/thread_pool.h"

namespace hearth::cpu {

// 256 MiB per array, as STREAM requires arrays well beyond the last-level cache.
inline constexpr size_t kDefaultBandwidthBytes = size_t{256} << 20;
inline constexpr int kDefaultBandwidthReps = 5;

// Runs a[i] = b[i] + s * c[i] over three float arrays of bytes_per_array bytes each, split by
// index range over the pool's threads, and returns the best of `reps` repetitions in GB/s
// (1e9 bytes per second).
//
// The figure follows the STREAM convention: 3 arrays per repetition (2 read, 1 written). With
// write-allocate caches the written array is also read first, so the memory bus really moves
// 4 arrays; the true traffic is 4/3 of the reported figure. We keep STREAM's count so the number
// compares with published STREAM results and with llama.cpp-style bytes-per-token estimates,
// which count only the bytes a kernel asks for.
//
// Each thread first-touches the part of the arrays it later streams, so on NUMA machines the pages
// land next to the thread that uses them. Throws hearth::Error for reps < 1, or arrays smaller
// than one float per thread, or when the memory cannot be allocated.
double measure_bandwidth_gbs(ThreadPool& pool, size_t bytes_per_array = kDefaultBandwidthBytes,
                             int reps = kDefaultBandwidthReps);

}  // namespace hearth::cpu
