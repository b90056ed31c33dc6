#include "text/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <span>

#include "core/error.h"
#include "text/pretokenize_families.h"
#include "text/unicode.h"

namespace hearth::text {

namespace {

// llama.cpp's whitespace, the Unicode White_Space property, as the body of a character class.
// PCRE2's own \s also takes U+180E, which llama.cpp's tables do not count as whitespace.
constexpr std::string_view kWhitespaceClass =
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}";

// The family's pattern with `\s` and `\S` spelled as kWhitespaceClass. Other escapes, `\\`
// among them, are copied as they are; a class ends at its first unescaped `]` after the opening.
std::string with_whitespace_class(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhitespaceClass) : "[" + std::string(kWhitespaceClass) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhitespaceClass) + "]";
      } else if (e == 'S') {
        fail("pre-tokenizer regex '", pattern, "' has \\S inside a class");
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

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

Regex compile(std::string_view family_pattern) {
  const std::string pattern = with_whitespace_class(family_pattern);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  Regex regex;
  // `$` is the end of the piece only, as in the ECMAScript matcher llama.cpp uses.
  regex.code.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error,
                                 &error_offset, nullptr));
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
  bool add_bos = false;

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
      // An empty match still cuts the text there (SuperBPE marks its digit groups so), as
      // llama.cpp's splitter does; the search then steps over one character.
      if (start > emitted) out.push_back(piece.substr(emitted, start - emitted));
      emitted = start;
      if (end == start) {
        if (start == piece.size()) break;
        search = start + std::min(utf8_len_lenient(static_cast<uint8_t>(piece[start])),
                                  piece.size() - start);
        continue;
      }
      out.push_back(piece.substr(start, end - start));
      emitted = search = end;
    }
    if (emitted < piece.size()) out.push_back(piece.substr(emitted));
  }
};

PreTokenizer::PreTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreTokenizer::~PreTokenizer() = default;

std::unique_ptr<PreTokenizer> PreTokenizer::create(std::string_view name) {
  const PreTokenizerFamily* family = find_pre_tokenizer_family(name);
  if (!family) {
    fail("tokenizer.ggml.pre '", name, "' is not a supported pre-tokenizer (known: ", known_names(),
         ")");
  }
  auto impl = std::make_unique<Impl>();
  impl->ignore_merges = family->ignore_merges;
  impl->add_bos = family->add_bos;
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

bool PreTokenizer::add_bos() const { return impl_->add_bos; }

std::string PreTokenizer::known_names() { return pre_tokenizer_family_names(); }

}  // namespace hearth::text
