// Parsing a request (http_parse.h).
#include "server/http_parse.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>

namespace hearth::server::http_detail {
namespace {

constexpr size_t kMaxChunkLine = 1024;  // a chunk-size line with its extensions

// The size of a chunk-size line (its extensions ignored); nullopt when malformed.
std::optional<uint64_t> chunk_size(std::string_view line) {
  const std::string_view hex = trim_ows(line.substr(0, line.find(';')));
  uint64_t size = 0;
  bool ok = !hex.empty() && hex.size() <= 15;
  for (const char ch : hex) {
    const int d = std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0'
                  : (ch >= 'a' && ch <= 'f')                   ? ch - 'a' + 10
                  : (ch >= 'A' && ch <= 'F')                   ? ch - 'A' + 10
                                                               : -1;
    if (d < 0) ok = false;
    size = size * 16 + static_cast<uint64_t>(std::max(d, 0));
  }
  if (!ok) return std::nullopt;
  return size;
}

// The request line into c.req and c.http10; 0, or the status to answer.
int parse_request_line(Conn& c, std::string_view line) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return 400;
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), is_tchar)) return 400;
  if (!version.starts_with("HTTP/1.")) return version.starts_with("HTTP/") ? 505 : 400;
  if (version == "HTTP/1.0") {
    c.http10 = true;
  } else if (version == "HTTP/1.1") {
    c.http10 = false;
  } else {
    return 505;
  }
  if (target.empty() || (target[0] != '/' && !(target == "*" && method == "OPTIONS"))) return 400;
  for (const char ch : target) {
    if (static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f) return 400;
  }
  c.req.method = std::string(method);
  c.req.path = std::string(target.substr(0, target.find_first_of("?#")));
  c.req.remote_addr = c.peer;
  return 0;
}

}  // namespace

std::optional<HeadEnd> find_head_end(Conn& c) {
  size_t skip = 0;
  while (skip < c.in.size() && (c.in[skip] == '\r' || c.in[skip] == '\n')) ++skip;
  if (skip > 0) {
    c.in.erase(0, skip);
    c.scan = 0;
  }
  for (size_t i = c.scan; i < c.in.size(); ++i) {
    if (c.in[i] != '\n') continue;
    if (i + 1 < c.in.size() && c.in[i + 1] == '\n') return HeadEnd{i, i + 2};
    if (i + 2 < c.in.size() && c.in[i + 1] == '\r' && c.in[i + 2] == '\n') return HeadEnd{i, i + 3};
  }
  return std::nullopt;
}

int parse_head(Conn& c, std::string_view head, const HttpOptions& options) {
  const size_t eol = head.find('\n');
  const std::string_view line = trim_ows(head.substr(0, eol));
  head.remove_prefix(eol == std::string_view::npos ? head.size() : eol + 1);
  if (const int status = parse_request_line(c, line); status != 0) return status;

  std::string content_length;
  bool has_length = false;
  while (!head.empty()) {
    const size_t e = head.find('\n');
    std::string_view field = head.substr(0, e);
    head.remove_prefix(e == std::string_view::npos ? head.size() : e + 1);
    if (!field.empty() && field.back() == '\r') field.remove_suffix(1);
    if (field.empty()) continue;
    if (field[0] == ' ' || field[0] == '\t') return 400;  // obsolete line folding
    const size_t colon = field.find(':');
    if (colon == 0 || colon == std::string_view::npos) return 400;
    const std::string_view name = field.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_tchar)) return 400;
    const std::string key = lower(name);
    const std::string value(trim_ows(field.substr(colon + 1)));
    if (key == "content-length") {
      if (value.empty() || !std::all_of(value.begin(), value.end(), ::isdigit)) return 400;
      if (has_length && value != content_length) return 400;
      has_length = true;
      content_length = value;
    }
    if (key == "host" && c.req.headers.count("host")) return 400;
    auto [it, inserted] = c.req.headers.emplace(key, value);
    if (!inserted && key != "content-length") it->second += ", " + value;
  }
  if (!c.http10 && !c.req.headers.count("host")) return 400;
  const std::string te = c.req.header("transfer-encoding");
  if (!te.empty()) {
    if (has_length) return 400;  // both: a request-smuggling shape
    if (!iequals(trim_ows(te), "chunked")) return 501;
    c.framing = Framing::Chunked;
    c.chunk = ChunkState::Size;
  } else if (has_length) {
    const std::string_view digits = std::string_view(content_length).substr(
        std::min(content_length.find_first_not_of('0'), content_length.size()));
    if (digits.size() > 18) return 413;
    const uint64_t n = digits.empty() ? 0 : std::stoull(std::string(digits));
    if (n > options.max_body_bytes) return 413;
    c.framing = Framing::Length;
    c.remaining = n;
  }
  const std::string connection = c.req.header("connection");
  c.keep_alive = c.http10 ? has_token(connection, "keep-alive") : !has_token(connection, "close");
  return 0;
}

int read_body(Conn& c, const HttpOptions& options) {
  std::string& body = c.req.body;
  if (c.framing == Framing::Length) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(c.remaining, c.in.size()));
    if (body.empty()) body.reserve(static_cast<size_t>(c.remaining));
    body.append(c.in, 0, n);
    c.in.erase(0, n);
    c.remaining -= n;
    return c.remaining == 0 ? 0 : -1;
  }
  size_t pos = 0;
  int result = -1;
  while (result < 0) {
    if (c.chunk == ChunkState::Data) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(c.remaining, c.in.size() - pos));
      body.append(c.in, pos, n);
      pos += n;
      c.remaining -= n;
      if (c.remaining > 0) break;
      c.chunk = ChunkState::DataEnd;
      continue;
    }
    const size_t eol = c.in.find('\n', pos);
    if (eol == std::string::npos) {
      const size_t limit = c.chunk == ChunkState::Trailer ? options.max_header_bytes : kMaxChunkLine;
      if (c.in.size() - pos > limit) result = c.chunk == ChunkState::Trailer ? 431 : 400;
      break;
    }
    std::string_view line(c.in.data() + pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (c.chunk == ChunkState::DataEnd) {
      if (!line.empty()) result = 400;
      c.chunk = ChunkState::Size;
    } else if (c.chunk == ChunkState::Size) {
      if (line.size() > kMaxChunkLine) {
        result = 400;
        break;
      }
      const std::optional<uint64_t> size = chunk_size(line);
      if (!size) {
        result = 400;
      } else if (*size > options.max_body_bytes - std::min(body.size(), options.max_body_bytes)) {
        result = 413;  // known before a byte of that chunk is stored
      } else if (*size == 0) {
        c.chunk = ChunkState::Trailer;
      } else {
        c.remaining = *size;
        c.chunk = ChunkState::Data;
      }
    } else {  // Trailer: fields are read and dropped; an empty line ends the body
      if (line.empty()) {
        result = 0;
      } else {
        c.trailer_bytes += line.size();
        if (c.trailer_bytes > options.max_header_bytes) result = 431;
      }
    }
  }
  c.in.erase(0, pos);
  return result;
}

}  // namespace hearth::server::http_detail
