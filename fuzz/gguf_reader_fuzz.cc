// libFuzzer target for the GGUF reader: parses the input as a file image, then touches every value
// and every tensor byte range the parser accepted, so that a bounds mistake shows up under ASan.
// hearth::Error is the expected outcome for bad input; anything else (crash, sanitizer report,
// another exception, a leak) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "gguf/gguf.h"

namespace {

using hearth::gguf::GgufFile;
using hearth::gguf::GgufWriter;
using hearth::gguf::TensorInfo;
using hearth::gguf::Value;

// Runs one getter; a type mismatch is reported as hearth::Error and is fine.
template <typename Fn>
size_t probe(Fn&& fn) {
  try {
    const auto result = fn();
    return result.has_value() ? 1 : 0;
  } catch (const hearth::Error&) {
    return 0;
  }
}

size_t touch_metadata(const GgufFile& f) {
  size_t sink = 0;
  GgufWriter copy;
  for (const auto& entry : f.metadata()) {
    const std::string& key = entry.first;
    const Value& v = entry.second;
    if (f.find(key) != &v) __builtin_trap();  // keys are unique, so lookup finds this entry
    sink += GgufFile::format_value(v, 4).size();
    sink += probe([&] { return f.get_string(key); });
    sink += probe([&] { return f.get_int(key); });
    sink += probe([&] { return f.get_float(key); });
    sink += probe([&] { return f.get_bool(key); });
    sink += probe([&] { return f.get_string_array(key); });
    sink += probe([&] { return f.get_float_array(key); });
    sink += probe([&] { return f.get_int_array(key); });
    // Re-encoding every accepted value must succeed: the reader never yields what the writer
    // cannot represent.
    try {
      copy.copy_value(key, v);
    } catch (const hearth::Error&) {
      __builtin_trap();
    }
  }
  return sink;
}

size_t touch_tensors(const GgufFile& f) {
  size_t sink = 0;
  for (const TensorInfo& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) __builtin_trap();
    if (t.n_elements() <= 0 || t.nbytes == 0) __builtin_trap();
    // First and last byte of the accepted range: out of bounds would trip ASan.
    sink += t.data[0] + t.data[t.nbytes - 1];
  }
  return sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto f = GgufFile::open_buffer("fuzz.gguf", data, size);
    volatile size_t sink = touch_metadata(*f) + touch_tensors(*f);
    (void)sink;
  } catch (const hearth::Error&) {
    // Rejected input: the expected outcome for almost every mutation.
  }
  return 0;
}
