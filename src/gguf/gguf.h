// GGUF container: a strict reader over an mmapped file and a writer. Knows nothing about models.
//
// The reader treats the file as untrusted: every count, length, dimension, type, offset and size is
// checked against the file size (overflow-safe) before it is used, and every failure throws
// hearth::Error naming the file and the key or tensor at fault.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hearth::gguf {

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view value_type_name(ValueType t);

// One metadata value. Strings and array payloads point into the mapped file (valid while the
// GgufFile lives); arrays of strings are pre-split into `strings`.
struct Value {
  ValueType type = ValueType::U8;
  // scalars: exactly one of these is meaningful, chosen by `type`
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string_view str;
  // arrays
  ValueType elem_type = ValueType::U8;
  uint64_t count = 0;
  const uint8_t* data = nullptr;          // numeric array payload, little-endian, packed
  std::vector<std::string_view> strings;  // string array elements
};

struct TensorInfo {
  std::string name;
  uint32_t type = 0;           // ggml type id (see core/dtype.h)
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ggml order: ne[0] is the contiguous (row) dimension
  uint64_t offset = 0;         // relative to the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
 public:
  // Maps and validates the file. Accepts magic "GGUF" and PowerInfer's "PWRI", versions 2 and 3.
  // Mmap maps the file (weights paged in on demand, shared with the page cache). Read copies it
  // once into private, huge-page-advised memory (llama.cpp's --no-mmap): a page cache is held in
  // 4 KiB pages, and streaming weights through them costs a TLB miss per page, which under a
  // hypervisor's nested paging holds decode well below DRAM bandwidth. Auto reads when that can
  // pay off and is safe (resolve_load), else maps.
  enum class Load { Mmap, Read, Auto };
  static std::unique_ptr<GgufFile> open(const std::string& path, Load load = Load::Mmap);
  // Auto: Read when the system gives huge pages and the file takes at most half of the available
  // memory (a private copy cannot be dropped under memory pressure as mapped pages can); Mmap
  // otherwise, including when the available memory is unknown (0). Other loads stay as they are.
  static Load resolve_load(Load load, uint64_t file_bytes, uint64_t available_bytes,
                           bool huge_pages);
  // Parses a GGUF image already in memory (borrowed: `data` must outlive the result); `name`
  // stands for the path in messages. Same validation as open(); used by tests and the fuzzer.
  static std::unique_ptr<GgufFile> open_buffer(const std::string& name, const uint8_t* data,
                                               size_t size);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  // Whether open() read the file into private memory (Load::Read, or Auto resolved to it).
  bool is_private_copy() const { return private_copy_; }
  uint32_t version() const { return version_; }
  bool is_powerinfer() const { return powerinfer_; }  // magic was "PWRI"
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  const uint8_t* image() const { return base_; }  // the file's bytes, as mapped or read
  // Whether [data, data + bytes) lies inside image().
  bool contains(const void* data, uint64_t bytes) const;

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: nullopt when the key is absent; Error naming the key when it has a type that
  // cannot be converted (e.g. a string where an integer is expected, or a negative count).
  std::optional<std::string_view> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;    // any integer type
  std::optional<double> get_float(std::string_view key) const;   // F32/F64 or any integer
  std::optional<bool> get_bool(std::string_view key) const;
  // Array getters: nullopt when absent; Error when not an array of a convertible element type.
  std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_float_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;

  // Short human-readable rendering of a value (arrays abbreviated after `max_elems`).
  static std::string format_value(const Value& v, size_t max_elems = 8);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

  // Read mode only: calls `edit` on `bytes` bytes of the private copy starting at `data` (which
  // must lie inside the file image), writable for the call, so a loader can rearrange weights
  // without holding a second copy. The file on disk never changes. Returns false without calling
  // `edit` when the image is not a private copy (a mapped file or a borrowed buffer).
  bool edit_in_place(const void* data, uint64_t bytes, const std::function<void(uint8_t*)>& edit);

  // Mapped files only: drops the pages wholly inside [data, data + bytes) from this process's
  // memory, for weights the loader has copied elsewhere and will not read again (a later read
  // would page them in from the file again). Returns false, doing nothing, for a private copy or
  // a range outside the file image.
  bool release(const void* data, uint64_t bytes);

 private:
  GgufFile() = default;
  std::string path_;
  uint32_t version_ = 0;
  bool powerinfer_ = false;
  uint64_t alignment_ = 32;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;  // set when open() mapped the file; unmapped by the destructor
  size_t mapped_bytes_ = 0;
  bool private_copy_ = false;  // Load::Read: mapping_ is anonymous memory only this object uses
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> tensors_;
  // Name -> index into kv_ / tensors_. The views point into the file image, which outlives them.
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
  friend class GgufParser;
};

// A file a command writes and reads back before it ends (hearth calibrate's rotated model): the
// destructor removes it, and so does SIGINT, SIGTERM or SIGHUP while it lives (as for the
// temporary file of GgufWriter::write).
class ScratchPath {
 public:
  explicit ScratchPath(std::string path);
  ~ScratchPath();
  ScratchPath(const ScratchPath&) = delete;
  ScratchPath& operator=(const ScratchPath&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int slot_ = -1;
};

// Builds a GGUF v3 file. Tensor data is borrowed: the pointers passed to add_tensor must stay valid
// until write() returns. write() goes to a temporary file beside the target and renames it, so a
// failed or interrupted write never leaves a half-written file under the final name.
class GgufWriter {
 public:
  void set_string(const std::string& key, const std::string& value);
  void set_u32(const std::string& key, uint32_t value);
  void set_i32(const std::string& key, int32_t value);
  void set_u64(const std::string& key, uint64_t value);
  void set_f32(const std::string& key, float value);
  void set_bool(const std::string& key, bool value);
  void set_string_array(const std::string& key, const std::vector<std::string>& values);
  void set_f32_array(const std::string& key, std::span<const float> values);
  void set_i32_array(const std::string& key, std::span<const int32_t> values);
  // Copies a metadata value (of any type) from a file being read, e.g. when rewriting a model.
  void copy_value(const std::string& key, const Value& v);

  // ne in ggml order (ne[0] contiguous). nbytes must match the type's geometry.
  void add_tensor(const std::string& name, uint32_t ggml_type, std::span<const int64_t> ne,
                  const void* data, uint64_t nbytes);
  // Like add_tensor, but the data is made during write(): `fill` gets a buffer of nbytes to fill,
  // once, in tensor order. A converter (hearth quantize) then holds one converted tensor in memory
  // at a time instead of all of them. An exception from `fill` aborts write() (no file is left).
  using TensorFill = std::function<void(uint8_t* dst)>;
  void add_tensor_lazy(const std::string& name, uint32_t ggml_type, std::span<const int64_t> ne,
                       uint64_t nbytes, TensorFill fill);

  // Default 32; written as general.alignment if not 32. Setting general.alignment as a u32 (by
  // set_u32 or copy_value) comes here too; any other type for that key is an error.
  void set_alignment(uint64_t alignment);
  // "GGUF" by default; "PWRI" writes a PowerInfer-flagged file.
  void set_magic_powerinfer(bool on) { powerinfer_ = on; }

  void write(const std::string& path) const;

 private:
  // Adds or replaces (keeping its position) a key with its encoded type and value.
  void put(const std::string& key, std::vector<uint8_t> encoded);
  // Checks name, shape and size, then appends the tensor.
  void push_tensor(const std::string& name, uint32_t ggml_type, std::span<const int64_t> ne,
                   const void* data, uint64_t nbytes, TensorFill fill);
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<int64_t> ne;
    const void* data;  // null when `fill` makes the data
    uint64_t nbytes;
    TensorFill fill;
  };
  std::vector<std::pair<std::string, std::vector<uint8_t>>> kv_;  // key -> encoded (type + value)
  std::vector<Tensor> tensors_;
  uint64_t alignment_ = 32;
  bool powerinfer_ = false;
};

}  // namespace hearth::gguf
