// GGUF v3 writer: metadata and tensor infos are encoded in memory, then streamed out with the
// borrowed tensor data into a temporary file that is renamed over the target only when complete.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>

#include "core/dtype.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_internal.h"

namespace hearth::gguf {

using detail::kAlignmentKey;

namespace {

void append_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  const size_t old = out.size();
  out.resize(old + n);
  std::memcpy(out.data() + old, p, n);
}

template <typename T>
void append(std::vector<uint8_t>& out, T v) {
  append_bytes(out, &v, sizeof(T));
}

void append_string(std::vector<uint8_t>& out, std::string_view s) {
  append<uint64_t>(out, s.size());
  append_bytes(out, s.data(), s.size());
}

std::vector<uint8_t> typed(ValueType t) {
  std::vector<uint8_t> out;
  append<uint32_t>(out, static_cast<uint32_t>(t));
  return out;
}

void check_key(const std::string& key) {
  if (key.empty()) fail("GgufWriter: empty metadata key");
  if (key == kAlignmentKey) {
    fail("GgufWriter: key '", kAlignmentKey, "' must be a u32 power of two (use set_alignment)");
  }
}

template <typename T, typename V>
T narrow(const std::string& key, ValueType t, V v) {
  if (!std::in_range<T>(v)) {
    fail("GgufWriter: key '", key, "': value ", v, " does not fit in ", value_type_name(t));
  }
  return static_cast<T>(v);
}

void encode_scalar(std::vector<uint8_t>& out, const std::string& key, const Value& v) {
  switch (v.type) {
    case ValueType::U8: append(out, narrow<uint8_t>(key, v.type, v.u)); break;
    case ValueType::I8: append(out, narrow<int8_t>(key, v.type, v.i)); break;
    case ValueType::U16: append(out, narrow<uint16_t>(key, v.type, v.u)); break;
    case ValueType::I16: append(out, narrow<int16_t>(key, v.type, v.i)); break;
    case ValueType::U32: append(out, narrow<uint32_t>(key, v.type, v.u)); break;
    case ValueType::I32: append(out, narrow<int32_t>(key, v.type, v.i)); break;
    case ValueType::U64: append(out, v.u); break;
    case ValueType::I64: append(out, v.i); break;
    case ValueType::F32: append(out, static_cast<float>(v.f)); break;
    case ValueType::F64: append(out, v.f); break;
    case ValueType::BOOL: append<uint8_t>(out, v.b ? 1 : 0); break;
    case ValueType::STRING: append_string(out, v.str); break;
    case ValueType::ARRAY: fail("GgufWriter: key '", key, "': an array is not a scalar");
  }
}

void encode_array(std::vector<uint8_t>& out, const std::string& key, const Value& v) {
  if (!detail::is_known_value_type(static_cast<uint32_t>(v.elem_type)) ||
      v.elem_type == ValueType::ARRAY) {
    fail("GgufWriter: key '", key, "': arrays of ", value_type_name(v.elem_type),
         " are not supported");
  }
  append<uint32_t>(out, static_cast<uint32_t>(v.elem_type));
  if (v.elem_type == ValueType::STRING) {
    if (v.count != v.strings.size()) {
      fail("GgufWriter: key '", key, "': count ", v.count, " but ", v.strings.size(), " strings");
    }
    append<uint64_t>(out, v.strings.size());
    for (std::string_view s : v.strings) append_string(out, s);
    return;
  }
  const size_t elem_size = detail::scalar_size(v.elem_type);
  if (v.count > SIZE_MAX / elem_size || (v.count > 0 && v.data == nullptr)) {
    fail("GgufWriter: key '", key, "': array of ", v.count, " elements has no valid data");
  }
  append<uint64_t>(out, v.count);
  append_bytes(out, v.data, v.count * elem_size);
}

// Temporary files being written, for the handler below: a process killed by SIGINT, SIGTERM or
// SIGHUP (Ctrl-C during `hearth quantize`) runs no destructor, so without it OUT.tmp.<pid> would
// stay behind. The table is fixed and lock-free: a signal handler may only read it.
constexpr int kMaxTempFiles = 8;
constexpr size_t kMaxTempPath = 4096;
struct TempSlot {
  std::atomic<int> state{0};  // 0 free, 1 being filled or emptied, 2 a file to remove
  char path[kMaxTempPath];
};
TempSlot g_temp_files[kMaxTempFiles];
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

void remove_temp_files_and_die(int sig) {
  for (TempSlot& t : g_temp_files) {
    if (t.state.load(std::memory_order_acquire) == 2) ::unlink(t.path);
  }
  // Die of the signal as if it had not been caught (the shell sees 130 for Ctrl-C).
  ::signal(sig, SIG_DFL);
  ::raise(sig);  // delivered when this handler returns
}

// Installs the handler for signals whose action is still the default (termination): a program
// that handles them itself (hearth serve) unwinds normally, and its destructors clean up.
void install_cleanup_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const int sig : kCleanupSignals) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL ||
          (old.sa_flags & SA_SIGINFO)) {
        continue;
      }
      struct sigaction sa {};
      sa.sa_handler = remove_temp_files_and_die;
      sigemptyset(&sa.sa_mask);
      for (const int other : kCleanupSignals) sigaddset(&sa.sa_mask, other);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

// A slot for path, or -1 when every slot is taken or the path is too long (then only the
// destructor removes the file, as before).
int register_temp_file(const std::string& path) {
  install_cleanup_handler();
  if (path.size() >= kMaxTempPath) return -1;
  for (int i = 0; i < kMaxTempFiles; ++i) {
    int expected = 0;
    if (g_temp_files[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_temp_files[i].path, path.c_str(), path.size() + 1);
      g_temp_files[i].state.store(2, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void unregister_temp_file(int slot) {
  if (slot >= 0) g_temp_files[slot].state.store(0, std::memory_order_release);
}

}  // namespace

ScratchPath::ScratchPath(std::string path) : path_(std::move(path)) {
  slot_ = register_temp_file(path_);
}

ScratchPath::~ScratchPath() {
  std::remove(path_.c_str());
  unregister_temp_file(slot_);
}

namespace {

// The temporary file of one write(): removed unless commit() renamed it over the target, also
// when a signal ends the process meanwhile.
class TempFile {
 public:
  TempFile(std::string target)
      : target_(std::move(target)), tmp_(str_cat(target_, ".tmp.", ::getpid())) {
    slot_ = register_temp_file(tmp_);  // before the file exists: a signal never misses it
    file_ = std::fopen(tmp_.c_str(), "wb");
    if (file_ == nullptr) {
      unregister_temp_file(slot_);
      fail("cannot write ", target_, ": ", std::strerror(errno));
    }
  }
  ~TempFile() {
    if (file_ != nullptr) std::fclose(file_);
    if (!committed_) std::remove(tmp_.c_str());
    unregister_temp_file(slot_);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* p, size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, file_) != n) fail_io();
  }

  void pad(uint64_t n) {
    static constexpr uint8_t kZeros[256] = {};
    while (n > 0) {
      const size_t chunk = n < sizeof kZeros ? n : sizeof kZeros;
      write(kZeros, chunk);
      n -= chunk;
    }
  }

  // Flushes to disk before the rename so that a crash never exposes a partial file by name.
  void commit() {
    if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) fail_io();
    const int rc = std::fclose(file_);
    file_ = nullptr;
    if (rc != 0) fail_io();
    if (std::rename(tmp_.c_str(), target_.c_str()) != 0) fail_io();
    committed_ = true;
  }

 private:
  [[noreturn]] void fail_io() const { fail("cannot write ", target_, ": ", std::strerror(errno)); }

  std::string target_;
  std::string tmp_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
  int slot_ = -1;
};

uint64_t padding(uint64_t pos, uint64_t align) { return (align - pos % align) % align; }

}  // namespace

void GgufWriter::put(const std::string& key, std::vector<uint8_t> encoded) {
  for (auto& [k, e] : kv_) {
    if (k == key) {
      e = std::move(encoded);
      return;
    }
  }
  kv_.emplace_back(key, std::move(encoded));
}

void GgufWriter::set_string(const std::string& key, const std::string& value) {
  check_key(key);
  auto e = typed(ValueType::STRING);
  append_string(e, value);
  put(key, std::move(e));
}

void GgufWriter::set_u32(const std::string& key, uint32_t value) {
  if (key == kAlignmentKey) {
    set_alignment(value);
    return;
  }
  check_key(key);
  auto e = typed(ValueType::U32);
  append(e, value);
  put(key, std::move(e));
}

void GgufWriter::set_i32(const std::string& key, int32_t value) {
  check_key(key);
  auto e = typed(ValueType::I32);
  append(e, value);
  put(key, std::move(e));
}

void GgufWriter::set_u64(const std::string& key, uint64_t value) {
  check_key(key);
  auto e = typed(ValueType::U64);
  append(e, value);
  put(key, std::move(e));
}

void GgufWriter::set_f32(const std::string& key, float value) {
  check_key(key);
  auto e = typed(ValueType::F32);
  append(e, value);
  put(key, std::move(e));
}

void GgufWriter::set_bool(const std::string& key, bool value) {
  check_key(key);
  auto e = typed(ValueType::BOOL);
  append<uint8_t>(e, value ? 1 : 0);
  put(key, std::move(e));
}

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& values) {
  check_key(key);
  auto e = typed(ValueType::ARRAY);
  append<uint32_t>(e, static_cast<uint32_t>(ValueType::STRING));
  append<uint64_t>(e, values.size());
  for (const auto& s : values) append_string(e, s);
  put(key, std::move(e));
}

void GgufWriter::set_f32_array(const std::string& key, std::span<const float> values) {
  check_key(key);
  auto e = typed(ValueType::ARRAY);
  append<uint32_t>(e, static_cast<uint32_t>(ValueType::F32));
  append<uint64_t>(e, values.size());
  append_bytes(e, values.data(), values.size_bytes());
  put(key, std::move(e));
}

void GgufWriter::set_i32_array(const std::string& key, std::span<const int32_t> values) {
  check_key(key);
  auto e = typed(ValueType::ARRAY);
  append<uint32_t>(e, static_cast<uint32_t>(ValueType::I32));
  append<uint64_t>(e, values.size());
  append_bytes(e, values.data(), values.size_bytes());
  put(key, std::move(e));
}

void GgufWriter::copy_value(const std::string& key, const Value& v) {
  if (key == kAlignmentKey && v.type == ValueType::U32) {
    set_alignment(v.u);
    return;
  }
  check_key(key);
  if (!detail::is_known_value_type(static_cast<uint32_t>(v.type))) {
    fail("GgufWriter: key '", key, "' has unknown value type ", static_cast<uint32_t>(v.type));
  }
  auto e = typed(v.type);
  if (v.type == ValueType::ARRAY) {
    encode_array(e, key, v);
  } else {
    encode_scalar(e, key, v);
  }
  put(key, std::move(e));
}

void GgufWriter::set_alignment(uint64_t alignment) {
  if (!std::has_single_bit(alignment) || alignment > UINT32_MAX) {
    fail("GgufWriter: alignment ", alignment, " is not a power of two that fits in u32");
  }
  alignment_ = alignment;
  if (alignment == detail::kDefaultAlignment) {
    std::erase_if(kv_, [](const auto& kv) { return kv.first == kAlignmentKey; });
    return;
  }
  auto e = typed(ValueType::U32);
  append(e, static_cast<uint32_t>(alignment));
  put(std::string(kAlignmentKey), std::move(e));
}

void GgufWriter::add_tensor(const std::string& name, uint32_t ggml_type,
                            std::span<const int64_t> ne, const void* data, uint64_t nbytes) {
  if (data == nullptr) fail("GgufWriter: tensor '", name, "': no data");
  push_tensor(name, ggml_type, ne, data, nbytes, nullptr);
}

void GgufWriter::add_tensor_lazy(const std::string& name, uint32_t ggml_type,
                                 std::span<const int64_t> ne, uint64_t nbytes, TensorFill fill) {
  if (!fill) fail("GgufWriter: tensor '", name, "': no data");
  push_tensor(name, ggml_type, ne, nullptr, nbytes, std::move(fill));
}

void GgufWriter::push_tensor(const std::string& name, uint32_t ggml_type,
                             std::span<const int64_t> ne, const void* data, uint64_t nbytes,
                             TensorFill fill) {
  if (name.empty()) fail("GgufWriter: tensor with an empty name");
  for (const auto& t : tensors_) {
    if (t.name == name) fail("GgufWriter: duplicate tensor name '", name, "'");
  }
  if (ne.empty() || ne.size() > static_cast<size_t>(detail::kMaxDims)) {
    fail("GgufWriter: tensor '", name, "': ", ne.size(), " dimensions (expected 1 to ",
         detail::kMaxDims, ")");
  }
  uint64_t dims[detail::kMaxDims] = {1, 1, 1, 1};
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] <= 0) fail("GgufWriter: tensor '", name, "': dimension ", d, " is ", ne[d]);
    dims[d] = static_cast<uint64_t>(ne[d]);
  }
  uint64_t expected = 0;
  const std::string problem =
      detail::check_tensor_geometry(ggml_type, dims, static_cast<int>(ne.size()), &expected);
  if (!problem.empty()) fail("GgufWriter: tensor '", name, "': ", problem);
  if (nbytes != expected) {
    fail("GgufWriter: tensor '", name, "': ", nbytes, " bytes of data but its ",
         ggml_type_info(ggml_type)->name, " shape needs ", expected);
  }
  tensors_.push_back(Tensor{name, ggml_type, std::vector<int64_t>(ne.begin(), ne.end()), data,
                            nbytes, std::move(fill)});
}

void GgufWriter::write(const std::string& path) const {
  std::vector<uint8_t> head;
  append_bytes(head, powerinfer_ ? detail::kMagicPowerInfer : detail::kMagicGguf, 4);
  append<uint32_t>(head, detail::kWriteVersion);
  append<uint64_t>(head, tensors_.size());
  append<uint64_t>(head, kv_.size());
  for (const auto& [key, encoded] : kv_) {
    append_string(head, key);
    append_bytes(head, encoded.data(), encoded.size());
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    append_string(head, t.name);
    append<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) append<uint64_t>(head, static_cast<uint64_t>(n));
    append<uint32_t>(head, t.type);
    append<uint64_t>(head, offset);
    offset += t.nbytes + padding(t.nbytes, alignment_);
  }

  TempFile out(path);
  out.write(head.data(), head.size());
  out.pad(padding(head.size(), alignment_));
  std::vector<uint8_t> made;  // the current lazy tensor; reused, so it ends the largest one's size
  for (const auto& t : tensors_) {
    const void* data = t.data;
    if (t.fill) {
      made.resize(t.nbytes);
      t.fill(made.data());
      data = made.data();
    }
    out.write(data, t.nbytes);
    out.pad(padding(t.nbytes, alignment_));
  }
  out.commit();
}

}  // namespace hearth::gguf
