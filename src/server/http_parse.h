// Parsing a request as the network thread reads it (http.h): the end of the head, the request
// line and header fields, the body (Content-Length or chunked) under the size caps. Pure
// functions of a connection's buffered bytes; the caller answers what they refuse. Internal to
// src/server.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "server/http.h"
#include "server/http_conn.h"

namespace hearth::server::http_detail {

// Where the request line and headers end in c.in: `end` is where the empty line starts,
// `body_at` where the body starts. Empty lines before a request line are dropped from c.in
// first (RFC 9112 2.2). nullopt while the empty line has not arrived.
struct HeadEnd {
  size_t end = 0;
  size_t body_at = 0;
};
std::optional<HeadEnd> find_head_end(Conn& c);

// The request line and header fields into c.req, and the framing of the body; 0, or the status
// to answer.
int parse_head(Conn& c, std::string_view head, const HttpOptions& options);

// Moves body bytes from c.in; 0 when the body is complete, -1 when more is needed, else the
// status to answer.
int read_body(Conn& c, const HttpOptions& options);

}  // namespace hearth::server::http_detail
