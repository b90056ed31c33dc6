#include "core/system_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace hearth {

uint64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    std::string unit;
    if (fields >> key >> kib >> unit && key == "MemAvailable:" && unit == "kB") return kib * 1024;
  }
  return 0;
}

bool transparent_huge_pages() {
  // The selected setting is the bracketed one: "always [madvise] never".
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string setting;
  std::getline(in, setting);
  return setting.find("[always]") != std::string::npos ||
         setting.find("[madvise]") != std::string::npos;
}

}  // namespace hearth
