#include "text/unicode.h"

#include <array>

namespace hearth::text {

namespace {

constexpr uint32_t kReplacement = 0xFFFD;

// GPT-2 keeps the printable Latin-1 bytes as their own code points and moves the others (controls,
// space, DEL, NBSP, soft hyphen) to U+0100 upwards, in byte order, so that every byte becomes a
// visible character and BPE never sees whitespace or control bytes.
constexpr bool kept_as_is(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteTable {
  std::array<uint16_t, 256> cp{};
  std::array<std::array<char, 2>, 256> utf8{};
  std::array<uint8_t, 256> utf8_len{};
  std::array<int16_t, 512> byte_of{};  // code point -> byte, -1 outside the mapping
};

constexpr ByteTable make_byte_table() {
  ByteTable t{};
  for (auto& b : t.byte_of) b = -1;
  int moved = 0;
  for (int b = 0; b < 256; ++b) {
    const int cp = kept_as_is(b) ? b : 256 + moved++;
    t.cp[b] = static_cast<uint16_t>(cp);
    t.byte_of[cp] = static_cast<int16_t>(b);
    if (cp < 0x80) {
      t.utf8[b] = {static_cast<char>(cp), 0};
      t.utf8_len[b] = 1;
    } else {
      t.utf8[b] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      t.utf8_len[b] = 2;
    }
  }
  return t;
}

constexpr ByteTable kByteTable = make_byte_table();

inline bool is_cont(uint8_t c) { return (c & 0xC0) == 0x80; }

}  // namespace

size_t utf8_valid_len(std::string_view text, size_t pos) {
  const size_t left = text.size() - pos;
  const auto at = [&](size_t i) { return static_cast<uint8_t>(text[pos + i]); };
  const uint8_t c = at(0);
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;  // continuation byte or overlong 2-byte lead
  if (c < 0xE0) return left >= 2 && is_cont(at(1)) ? 2 : 0;
  if (c < 0xF0) {
    if (left < 3 || !is_cont(at(1)) || !is_cont(at(2))) return 0;
    if (c == 0xE0 && at(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && at(1) >= 0xA0) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (c < 0xF5) {
    if (left < 4 || !is_cont(at(1)) || !is_cont(at(2)) || !is_cont(at(3))) return 0;
    if (c == 0xF0 && at(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && at(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

std::string_view make_valid_utf8(std::string_view text, std::string& storage) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t n = utf8_valid_len(text, pos);
    if (n == 0) break;
    pos += n;
  }
  if (pos == text.size()) return text;

  storage.assign(text.substr(0, pos));
  while (pos < text.size()) {
    const size_t n = utf8_valid_len(text, pos);
    if (n == 0) {
      append_utf8(kReplacement, storage);
      ++pos;
    } else {
      storage.append(text.substr(pos, n));
      pos += n;
    }
  }
  return storage;
}

uint32_t utf8_next(std::string_view text, size_t& pos) {
  const size_t n = utf8_valid_len(text, pos);
  const auto at = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<uint8_t>(text[pos + i]));
  };
  uint32_t cp = kReplacement;
  switch (n) {
    case 1:
      cp = at(0);
      break;
    case 2:
      cp = ((at(0) & 0x1F) << 6) | (at(1) & 0x3F);
      break;
    case 3:
      cp = ((at(0) & 0x0F) << 12) | ((at(1) & 0x3F) << 6) | (at(2) & 0x3F);
      break;
    case 4:
      cp = ((at(0) & 0x07) << 18) | ((at(1) & 0x3F) << 12) | ((at(2) & 0x3F) << 6) | (at(3) & 0x3F);
      break;
    default:
      break;
  }
  pos += n == 0 ? 1 : n;
  return cp;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string_view byte_to_unicode(uint8_t byte) {
  return {kByteTable.utf8[byte].data(), kByteTable.utf8_len[byte]};
}

int unicode_to_byte(uint32_t cp) {
  return cp < kByteTable.byte_of.size() ? kByteTable.byte_of[cp] : -1;
}

void append_byte_level_decoded(std::string_view token_text, std::string& out) {
  size_t pos = 0;
  while (pos < token_text.size()) {
    const size_t start = pos;
    const uint32_t cp = utf8_next(token_text, pos);
    const int byte = unicode_to_byte(cp);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(token_text.substr(start, pos - start));
    }
  }
}

void append_spm_escaped(std::string_view text, std::string& out) {
  for (const char c : text) {
    if (c == ' ') {
      out.append(kSpmSpace);
    } else {
      out.push_back(c);
    }
  }
}

std::string spm_unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    if (text.compare(pos, kSpmSpace.size(), kSpmSpace) == 0) {
      out.push_back(' ');
      pos += kSpmSpace.size();
    } else {
      out.push_back(text[pos++]);
    }
  }
  return out;
}

int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = text[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

}  // namespace hearth::text
