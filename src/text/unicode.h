// UTF-8 helpers and the GPT-2 byte <-> unicode table used by the tokenizers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hearth::text {

// Length of the UTF-8 sequence that `lead` starts, judged from its top four bits alone, the way
// llama.cpp splits text into symbols: stray continuation bytes count as one, and the caller clamps
// the result to what is left of the text. Never 0.
inline size_t utf8_len_lenient(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// Length of the well-formed UTF-8 sequence (no overlongs, surrogates or code points above
// U+10FFFF) at text[pos], or 0 when the bytes there are not one.
size_t utf8_valid_len(std::string_view text, size_t pos);

// The text itself when it is well-formed UTF-8; otherwise a copy in `storage` with every byte that
// does not start a well-formed sequence replaced by U+FFFD (as llama.cpp does before its regexes).
std::string_view make_valid_utf8(std::string_view text, std::string& storage);

// Decodes the well-formed sequence at text[pos] and advances pos past it; a malformed byte yields
// U+FFFD and advances by one.
uint32_t utf8_next(std::string_view text, size_t& pos);

void append_utf8(uint32_t cp, std::string& out);

// GPT-2's reversible byte -> printable code point mapping (bytes_to_unicode in its encoder.py),
// returned as the UTF-8 bytes of that code point.
std::string_view byte_to_unicode(uint8_t byte);

// The byte a code point of the GPT-2 mapping stands for, or -1 when it is not in the mapping.
int unicode_to_byte(uint32_t cp);

// Appends the bytes a byte-level BPE token text stands for. Code points outside the mapping (found
// only in malformed vocabularies) are passed through as their own UTF-8.
void append_byte_level_decoded(std::string_view token_text, std::string& out);

// SentencePiece writes spaces as U+2581 LOWER ONE EIGHTH BLOCK.
inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";
void append_spm_escaped(std::string_view text, std::string& out);
std::string spm_unescape(std::string_view text);

// Parses "<0xAB>" (hex digits of either case) into 0xAB; -1 when the text is not of that form.
int parse_byte_token(std::string_view text);

}  // namespace hearth::text
