// Importance matrices ("imatrix", as llama.cpp's llama-imatrix writes them): per weight matrix, the
// sum over calibration tokens of the square of each input column, and how many token rows were
// summed. Their ratio, the mean square of the activations a column multiplies, tells the
// quantizer which columns' errors matter (hearth quantize --imatrix). Stored as plain GGUF in
// llama.cpp's layout, so files move between the two tools; docs/formats.md has the keys.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hearth {

namespace gguf {
class GgufFile;
}

struct ImatrixEntry {
  std::vector<float> sum2;  // [cols] sum over rows of x_j^2
  double count = 0;         // rows summed
  // Hearth files only: the first values of the matrix's first row as the model held them, so that
  // an imatrix of another model with the same shapes is recognised. Empty in llama.cpp files.
  std::vector<float> probe;
  // Hearth files, optional: [cols * cols] sum over rows of x x^T (so sum2 is its diagonal), for
  // GPTQ (core/quantize_gptq.h). llama.cpp's reader skips it.
  std::vector<float> gram;
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight tensor name
  std::vector<std::string> datasets;            // the text files the statistics came from
  uint32_t chunk_count = 0;                     // windows of text evaluated
  uint32_t chunk_size = 0;                      // tokens per window
};

inline constexpr int64_t kImatrixProbeLength = 64;

// Writes `m` to `path` (through a temporary file renamed at the end). Throws hearth::Error.
void write_imatrix(const Imatrix& m, const std::string& path);

// Reads an imatrix file, validating it (keys, pairs of sums and counts, shapes, finite values).
// Throws hearth::Error with one line naming the file and the problem.
Imatrix read_imatrix(const std::string& path);

// Checks that `m` belongs to the model in `model_file`, whose weight matrices are `matrices`:
// every entry names one of them, with its row length, and (Hearth files) its probe matches the
// first row to within quantization error. Throws hearth::Error naming the first mismatch.
void check_imatrix_fits(const Imatrix& m, const std::string& imatrix_path,
                        const gguf::GgufFile& model_file, const std::vector<std::string>& matrices);

}  // namespace hearth
