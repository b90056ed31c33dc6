// What the operating system can give a process that is about to hold a model in memory: the
// memory it could use without swapping, and whether anonymous memory can be backed by transparent
// huge pages. Read fresh on every call (Linux /proc and /sys; elsewhere both answer "unknown").
#pragma once

#include <cstdint>

namespace hearth {

// MemAvailable: free memory plus what the kernel can reclaim (clean page cache included), in
// bytes; 0 when it cannot be read.
uint64_t available_memory_bytes();

// Whether madvise(MADV_HUGEPAGE) memory gets transparent huge pages: THP "always" or "madvise".
bool transparent_huge_pages();

}  // namespace hearth
