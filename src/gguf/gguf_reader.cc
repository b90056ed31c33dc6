// GGUF reader: maps the file and parses it with a bounds-checked cursor. Layout (v2/v3, little
// endian): magic, u32 version, u64 n_tensors, u64 n_kv, the key/value pairs, the tensor infos,
// padding to the alignment, then the data section that tensor offsets are relative to.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "core/error.h"
#include "core/system_memory.h"
#include "gguf/gguf.h"
#include "gguf/gguf_internal.h"

namespace hearth::gguf {

static_assert(std::endian::native == std::endian::little,
              "GGUF is little-endian and the reader loads values in place");

using detail::printable;

class GgufParser {
 public:
  explicit GgufParser(GgufFile& file) : file_(file), data_(file.base_), size_(file.size_) {}

  void parse() {
    read_header();
    for (uint64_t i = 0; i < n_kv_; ++i) read_kv(i);
    read_alignment();
    for (uint64_t i = 0; i < n_tensors_; ++i) read_tensor_info(i);
    place_tensor_data();
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(const Args&... args) const {
    fail(file_.path_, ": ", args...);
  }

  // Everything below reads through need(), so no access can go past the end of the image.
  void need(uint64_t n, const char* what) const {
    if (n > size_ - pos_) {
      error("truncated while reading ", where_, ": ", what, " needs ", n, " bytes at offset ",
            pos_, " but the file has ", size_ - pos_, " left");
    }
  }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string_view read_string(const char* what) {
    const auto len = read<uint64_t>(what);
    if (len > size_ - pos_) {
      error(where_, ": ", what, " length ", len, " exceeds the ", size_ - pos_,
            " bytes left in the file");
    }
    const std::string_view s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

  void read_header() {
    where_ = "header";
    if (size_ == 0) error("empty file (not a GGUF file)");
    need(4, "magic");
    if (std::memcmp(data_, detail::kMagicPowerInfer, 4) == 0) {
      file_.powerinfer_ = true;
    } else if (std::memcmp(data_, detail::kMagicGguf, 4) == 0) {
      file_.powerinfer_ = false;
    } else {
      error("not a GGUF file (magic ", magic_text(), ")");
    }
    pos_ = 4;
    const auto version = read<uint32_t>("version");
    if (version == 1) error("GGUF version 1 is not supported (only versions 2 and 3)");
    if (version != 2 && version != 3) {
      const uint32_t swapped = __builtin_bswap32(version);
      if (swapped == 2 || swapped == 3) {
        error("big-endian GGUF files are not supported");
      }
      error("unsupported GGUF version ", version, " (only versions 2 and 3)");
    }
    file_.version_ = version;
    n_tensors_ = read<uint64_t>("tensor count");
    n_kv_ = read<uint64_t>("metadata key count");
    // Lower bounds on the encoded size of one entry turn absurd counts into an error before any
    // memory is reserved for them.
    constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;  // key length, key, type, u8 value
    // name length, name, n_dims, ne[0], type, offset
    constexpr uint64_t kMinTensorBytes = 8 + 1 + 4 + 8 + 4 + 8;
    const uint64_t left = size_ - pos_;
    if (n_kv_ > left / kMinKvBytes) {
      error("metadata key count ", n_kv_, " cannot fit in the ", left, " bytes left in the file");
    }
    if (n_tensors_ > left / kMinTensorBytes ||
        n_kv_ * kMinKvBytes + n_tensors_ * kMinTensorBytes > left) {
      error("tensor count ", n_tensors_, " (with ", n_kv_, " keys) cannot fit in the ", left,
            " bytes left in the file");
    }
    file_.kv_.reserve(n_kv_);
    file_.tensors_.reserve(n_tensors_);
  }

  std::string magic_text() const {
    std::string hex;
    for (uint64_t i = 0; i < 4 && i < size_; ++i) {
      char b[4];
      std::snprintf(b, sizeof b, "%02x", data_[i]);
      if (!hex.empty()) hex += ' ';
      hex += b;
    }
    const std::string_view raw(reinterpret_cast<const char*>(data_), size_ < 4 ? size_ : 4);
    return str_cat("'", printable(raw), "' = ", hex);
  }

  void read_kv(uint64_t index) {
    where_ = str_cat("key #", index);
    const std::string_view key = read_string("key name");
    if (key.empty()) error("key #", index, " has an empty name");
    where_ = str_cat("key '", printable(key), "'");
    if (file_.kv_index_.count(key) != 0) error("duplicate key '", printable(key), "'");
    Value v = read_value(read<uint32_t>("value type"));
    file_.kv_index_.emplace(key, file_.kv_.size());
    file_.kv_.emplace_back(std::string(key), std::move(v));
  }

  Value read_value(uint32_t raw_type) {
    if (!detail::is_known_value_type(raw_type)) {
      error(where_, " has unknown value type ", raw_type);
    }
    Value v;
    v.type = static_cast<ValueType>(raw_type);
    switch (v.type) {
      case ValueType::U8: v.u = read<uint8_t>("u8 value"); break;
      case ValueType::I8: v.i = read<int8_t>("i8 value"); break;
      case ValueType::U16: v.u = read<uint16_t>("u16 value"); break;
      case ValueType::I16: v.i = read<int16_t>("i16 value"); break;
      case ValueType::U32: v.u = read<uint32_t>("u32 value"); break;
      case ValueType::I32: v.i = read<int32_t>("i32 value"); break;
      case ValueType::U64: v.u = read<uint64_t>("u64 value"); break;
      case ValueType::I64: v.i = read<int64_t>("i64 value"); break;
      case ValueType::F32: v.f = read<float>("f32 value"); break;
      case ValueType::F64: v.f = read<double>("f64 value"); break;
      case ValueType::BOOL: v.b = read_bool(); break;
      case ValueType::STRING: v.str = read_string("string value"); break;
      case ValueType::ARRAY: read_array(v); break;
    }
    return v;
  }

  bool read_bool() {
    const auto b = read<uint8_t>("bool value");
    if (b > 1) error(where_, " has bool value ", static_cast<int>(b), " (expected 0 or 1)");
    return b == 1;
  }

  void read_array(Value& v) {
    const auto elem = read<uint32_t>("array element type");
    if (!detail::is_known_value_type(elem)) {
      error(where_, " is an array of unknown value type ", elem);
    }
    v.elem_type = static_cast<ValueType>(elem);
    if (v.elem_type == ValueType::ARRAY) error(where_, ": nested arrays are not supported");
    v.count = read<uint64_t>("array length");
    const uint64_t left = size_ - pos_;
    v.data = data_ + pos_;
    if (v.elem_type == ValueType::STRING) {
      // Each element carries at least its 8-byte length.
      if (v.count > left / 8) {
        error(where_, ": array of ", v.count, " strings cannot fit in the ", left,
              " bytes left in the file");
      }
      v.strings.reserve(v.count);
      for (uint64_t i = 0; i < v.count; ++i) v.strings.push_back(read_string("string element"));
      return;
    }
    const size_t elem_size = detail::scalar_size(v.elem_type);
    if (v.count > left / elem_size) {
      error(where_, ": array of ", v.count, " ", value_type_name(v.elem_type),
            " elements cannot fit in the ", left, " bytes left in the file");
    }
    if (v.elem_type == ValueType::BOOL) {
      for (uint64_t i = 0; i < v.count; ++i) {
        if (v.data[i] > 1) {
          error(where_, ": bool element ", i, " is ", static_cast<int>(v.data[i]),
                " (expected 0 or 1)");
        }
      }
    }
    pos_ += v.count * elem_size;
  }

  void read_alignment() {
    const auto it = file_.kv_index_.find(detail::kAlignmentKey);
    if (it == file_.kv_index_.end()) return;
    const Value& v = file_.kv_[it->second].second;
    if (v.type != ValueType::U32) {
      error("key '", detail::kAlignmentKey, "' has type ", value_type_name(v.type),
            ", expected u32");
    }
    if (!std::has_single_bit(v.u)) {
      error("key '", detail::kAlignmentKey, "' is ", v.u, ", expected a power of two");
    }
    file_.alignment_ = v.u;
  }

  void read_tensor_info(uint64_t index) {
    where_ = str_cat("tensor #", index);
    const std::string_view name = read_string("tensor name");
    if (name.empty()) error("tensor #", index, " has an empty name");
    const std::string shown = printable(name);
    where_ = str_cat("tensor '", shown, "'");
    if (file_.tensor_index_.count(name) != 0) error("duplicate tensor name '", shown, "'");
    const auto n_dims = read<uint32_t>("dimension count");
    if (n_dims < 1 || n_dims > static_cast<uint32_t>(detail::kMaxDims)) {
      error(where_, " has ", n_dims, " dimensions (expected 1 to ", detail::kMaxDims, ")");
    }
    uint64_t ne[detail::kMaxDims] = {1, 1, 1, 1};
    for (uint32_t d = 0; d < n_dims; ++d) ne[d] = read<uint64_t>("dimension");
    const auto type = read<uint32_t>("type");
    const auto offset = read<uint64_t>("data offset");

    TensorInfo t;
    const std::string problem =
        detail::check_tensor_geometry(type, ne, static_cast<int>(n_dims), &t.nbytes);
    if (!problem.empty()) error(where_, ": ", problem);
    if (offset % file_.alignment_ != 0) {
      error(where_, ": data offset ", offset, " is not a multiple of the alignment ",
            file_.alignment_);
    }
    t.name = std::string(name);
    t.type = type;
    t.n_dims = static_cast<int>(n_dims);
    for (int d = 0; d < detail::kMaxDims; ++d) t.ne[d] = static_cast<int64_t>(ne[d]);
    t.offset = offset;
    file_.tensor_index_.emplace(name, file_.tensors_.size());
    file_.tensors_.push_back(std::move(t));
  }

  void place_tensor_data() {
    if (file_.tensors_.empty()) return;
    const uint64_t align = file_.alignment_;
    // pos_ <= size_ and alignments are at most 2^31, so this cannot overflow for any real file;
    // the checked add keeps it so for any image size.
    uint64_t data_start = 0;
    if (__builtin_add_overflow(pos_, align - 1, &data_start)) error("data section overflows");
    data_start -= data_start % align;
    for (TensorInfo& t : file_.tensors_) {
      uint64_t begin = 0;
      uint64_t end = 0;
      if (__builtin_add_overflow(data_start, t.offset, &begin) ||
          __builtin_add_overflow(begin, t.nbytes, &end)) {
        error("tensor '", printable(t.name), "': data at offset ", t.offset, " + ", t.nbytes,
              " bytes past the data section at ", data_start, " overflows 64 bits");
      }
      if (end > size_) {
        error("tensor '", printable(t.name), "': data [", begin, ", ", end,
              ") extends past end of file (", size_, ")");
      }
      t.data = data_ + begin;
    }
  }

  GgufFile& file_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  std::string where_;  // what is being read, for error messages
};

namespace {

// Closes a descriptor on every path out of open().
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

namespace {

// Private anonymous memory holding the whole file, advised to use transparent huge pages.
void* read_into_memory(int fd, const std::string& path, size_t size, size_t mapped) {
  void* m = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) fail("cannot allocate ", mapped, " bytes to read ", path, ": ", std::strerror(errno));
  ::madvise(m, mapped, MADV_HUGEPAGE);
  auto* dst = static_cast<uint8_t*>(m);
  for (size_t done = 0; done < size;) {
    const ssize_t got = ::pread(fd, dst + done, std::min<size_t>(size - done, size_t{1} << 30),
                                static_cast<off_t>(done));
    if (got <= 0) {
      const int err = got < 0 ? errno : EIO;
      ::munmap(m, mapped);
      fail("cannot read ", path, ": ", std::strerror(err));
    }
    done += static_cast<size_t>(got);
  }
  ::mprotect(m, mapped, PROT_READ);
  return m;
}

}  // namespace

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path, Load load) {
  // O_NONBLOCK: a FIFO (or a device) given as the model must be refused below, not wait in
  // open() for a writer. It changes nothing for a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("cannot open ", path, ": ", std::strerror(errno));
  const FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("cannot stat ", path, ": ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    fail(path, ": not a regular file (",
         S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket",
         ")");
  }

  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  if (st.st_size > 0) {
    const auto size = static_cast<size_t>(st.st_size);
    void* m = nullptr;
    size_t mapped = size;
    if (load == Load::Auto) {
      load = resolve_load(load, size, available_memory_bytes(), transparent_huge_pages());
    }
    if (load == Load::Read) {
      constexpr size_t kHugePage = size_t{2} << 20;
      mapped = (size + kHugePage - 1) / kHugePage * kHugePage;
      m = read_into_memory(fd, path, size, mapped);
    } else {
      // Read-only shared mapping: weights are paged in on demand and never copied.
      m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
      if (m == MAP_FAILED) fail("cannot map ", path, ": ", std::strerror(errno));
    }
    file->mapping_ = m;
    file->mapped_bytes_ = mapped;
    file->private_copy_ = load == Load::Read;
    file->base_ = static_cast<const uint8_t*>(m);
    file->size_ = size;
  }
  GgufParser(*file).parse();
  return file;
}

GgufFile::Load GgufFile::resolve_load(Load load, uint64_t file_bytes, uint64_t available_bytes,
                                      bool huge_pages) {
  if (load != Load::Auto) return load;
  return huge_pages && available_bytes > 0 && file_bytes <= available_bytes / 2 ? Load::Read
                                                                                : Load::Mmap;
}

std::unique_ptr<GgufFile> GgufFile::open_buffer(const std::string& name, const uint8_t* data,
                                                size_t size) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = name;
  file->base_ = data;
  file->size_ = size;
  GgufParser(*file).parse();
  return file;
}

bool GgufFile::edit_in_place(const void* data, uint64_t bytes,
                             const std::function<void(uint8_t*)>& edit) {
  if (!private_copy_) return false;
  if (!contains(data, bytes)) fail(path_, ": edit_in_place: the range is not inside the file image");
  const auto at = reinterpret_cast<uintptr_t>(data), base = reinterpret_cast<uintptr_t>(base_);
  // The copy is read-only between edits, so that a stray write faults instead of corrupting
  // weights. The whole mapping changes protection: changing part of it would split the mapping
  // and, with it, the huge pages at the edges, which sparse decoding's short-row reads depend on
  // (core/huge_buffer.h).
  if (::mprotect(mapping_, mapped_bytes_, PROT_READ | PROT_WRITE) != 0) {
    fail(path_, ": cannot make the weights writable: ", std::strerror(errno));
  }
  try {
    edit(static_cast<uint8_t*>(mapping_) + (at - base));  // private_copy_: our own memory
  } catch (...) {
    ::mprotect(mapping_, mapped_bytes_, PROT_READ);
    throw;
  }
  ::mprotect(mapping_, mapped_bytes_, PROT_READ);
  return true;
}

bool GgufFile::contains(const void* data, uint64_t bytes) const {
  const auto at = reinterpret_cast<uintptr_t>(data), base = reinterpret_cast<uintptr_t>(base_);
  return at >= base && bytes <= size_ && at - base <= size_ - bytes;
}

bool GgufFile::release(const void* data, uint64_t bytes) {
  if (private_copy_ || mapping_ == nullptr || !contains(data, bytes)) return false;
  const auto at = reinterpret_cast<uintptr_t>(data);
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (at + page - 1) / page * page, last = (at + bytes) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  return true;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapped_bytes_);
}

}  // namespace hearth::gguf
