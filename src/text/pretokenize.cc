#include "text/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <span>

#include "core/error.h"
#include "text/unicode.h"

namespace hearth::text {

namespace {

// GPT-2's pattern from its encoder.py. The final `\s+` only names whitespace that the lookahead
// alternative leaves behind; such text would become a piece of its own anyway.
constexpr std::string_view kGpt2Regex =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

// Llama 3's tokenizer.json pattern: case-insensitive contractions, a letter run may take one
// leading non-letter, digits in groups of up to three, newlines kept with the punctuation before.
constexpr std::string_view kLlama3Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Qwen 2 is Llama 3's pattern with every digit a word of its own.
constexpr std::string_view kQwen2Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

struct Family {
  std::span<const std::string_view> regexes;  // applied in this order
  bool ignore_merges;
};

constexpr std::array kGpt2Regexes = {kGpt2Regex};
constexpr std::array kLlama3Regexes = {kLlama3Regex};
constexpr std::array kQwen2Regexes = {kQwen2Regex};

constexpr Family kGpt2{kGpt2Regexes, false};
constexpr Family kLlama3{kLlama3Regexes, true};
constexpr Family kQwen2{kQwen2Regexes, false};

struct Alias {
  std::string_view name;  // a tokenizer.ggml.pre value, as llama.cpp's converter writes it
  const Family* family;
};

// "default" (and an absent key) get GPT-2's pattern. llama.cpp splits such files with a sequence of
// regexes of its own instead, so there, and only there, ids may differ from llama.cpp's.
// clang-format off
constexpr Alias kAliases[] = {
    {"default", &kGpt2},   {"gpt-2", &kGpt2},  {"phi-2", &kGpt2},
    {"llama3", &kLlama3},  {"llama-v3", &kLlama3},  {"llama-bpe", &kLlama3},
    {"qwen2", &kQwen2},
};
// clang-format on

struct CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using CodePtr = std::unique_ptr<pcre2_code, CodeDeleter>;
using MatchDataPtr = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  pcre2_get_error_message(code, buffer.data(), buffer.size());
  return reinterpret_cast<const char*>(buffer.data());
}

struct Regex {
  CodePtr code;
  bool jit = false;
};

Regex compile(std::string_view pattern) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  Regex regex;
  regex.code.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr));
  if (!regex.code) {
    fail("pre-tokenizer regex '", pattern, "' does not compile at offset ", error_offset, ": ",
         pcre2_message(error));
  }
  // JIT is an optimization only: PCRE2 may be built without it, and the interpreter gives the same
  // matches.
  regex.jit = pcre2_jit_compile(regex.code.get(), PCRE2_JIT_COMPLETE) == 0;
  return regex;
}

}  // namespace

struct PreTokenizer::Impl {
  std::vector<Regex> regexes;
  bool ignore_merges = false;

  // Splits one piece with one regex: matches and the gaps between them, in order.
  void split_piece(const Regex& regex, pcre2_match_data* match, std::string_view piece,
                   std::vector<std::string_view>& out) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t emitted = 0;
    size_t search = 0;
    while (search < piece.size()) {
      int rc = regex.jit ? pcre2_jit_match(regex.code.get(), subject, piece.size(), search, 0,
                                           match, nullptr)
                         : PCRE2_ERROR_JIT_BADOPTION;
      // The JIT's stack is small and fixed; the interpreter keeps its backtracking on the heap.
      if (!regex.jit || rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        rc = pcre2_match(regex.code.get(), subject, piece.size(), search, PCRE2_NO_UTF_CHECK, match,
                         nullptr);
      }
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) fail("pre-tokenizer regex failed: ", pcre2_message(rc));

      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
      const size_t start = ovector[0];
      const size_t end = ovector[1];
      if (end == start) {
        // An empty match makes no piece; step over one character to keep going.
        search = start + std::min(utf8_len_lenient(static_cast<uint8_t>(piece[start])),
                                  piece.size() - start);
        continue;
      }
      if (start > emitted) out.push_back(piece.substr(emitted, start - emitted));
      out.push_back(piece.substr(start, end - start));
      emitted = search = end;
    }
    if (emitted < piece.size()) out.push_back(piece.substr(emitted));
  }
};

PreTokenizer::PreTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreTokenizer::~PreTokenizer() = default;

std::unique_ptr<PreTokenizer> PreTokenizer::create(std::string_view name) {
  const Family* family = nullptr;
  for (const Alias& alias : kAliases) {
    if (alias.name == name) family = alias.family;
  }
  if (!family) {
    fail("tokenizer.ggml.pre '", name, "' is not a supported pre-tokenizer (known: ", known_names(),
         ")");
  }
  auto impl = std::make_unique<Impl>();
  impl->ignore_merges = family->ignore_merges;
  for (const std::string_view pattern : family->regexes) impl->regexes.push_back(compile(pattern));
  return std::unique_ptr<PreTokenizer>(new PreTokenizer(std::move(impl)));
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  if (text.empty()) return;
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (const Regex& regex : impl_->regexes) {
    const MatchDataPtr match(pcre2_match_data_create_from_pattern(regex.code.get(), nullptr));
    if (!match) fail("pre-tokenizer: out of memory for match data");
    next.clear();
    for (const std::string_view piece : current)
      impl_->split_piece(regex, match.get(), piece, next);
    current.swap(next);
  }
  pieces.insert(pieces.end(), current.begin(), current.end());
}

bool PreTokenizer::ignore_merges() const { return impl_->ignore_merges; }

std::string PreTokenizer::known_names() {
  std::string names;
  for (const Alias& alias : kAliases) {
    if (!names.empty()) names += ", ";
    names += alias.name;
  }
  return names;
}

}  // namespace hearth::text
