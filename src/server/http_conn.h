// One connection of the HTTP layer (http.h) and where it stands: read and parsed by the network
// thread, or held by a worker while its request is answered. Internal to src/server.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "server/http.h"
#include "server/http_util.h"

namespace hearth::server::http_detail {

enum class Phase {
  Headers,     // reading a request line and headers (or waiting for a keep-alive request)
  Body,        // reading a body
  Dispatched,  // a worker holds it
  Writing,     // the network thread writes an answer of its own
  Lingering,   // answered and half-closed: reading and dropping what the client still sends
};

// Lingering: for at most this long, and this much of what the refused client still sends.
constexpr double kLingerSeconds = 2;
constexpr size_t kLingerBytes = 64 << 20;

enum class Framing { None, Length, Chunked };
enum class ChunkState { Size, Data, DataEnd, Trailer };

struct Conn {
  int fd = -1;
  std::string peer;
  Phase phase = Phase::Headers;
  Clock::time_point deadline;
  bool idle = true;  // waiting for the first byte of a request (a keep-alive wait)
  bool fresh = true;  // the connection's first request
  std::string in;    // bytes read and not yet consumed
  size_t scan = 0;   // where to resume the search for the end of the headers
  // The request being read or answered.
  HttpRequest req;
  bool http10 = false;
  bool keep_alive = true;
  Framing framing = Framing::None;
  uint64_t remaining = 0;  // body bytes (Length) or bytes of the current chunk (Chunked) to come
  ChunkState chunk = ChunkState::Size;
  size_t trailer_bytes = 0;
  const HttpHandler* handler = nullptr;
  std::map<std::string, std::string> extra_headers;  // CORS
  // What the network thread writes.
  std::string out;
  size_t out_off = 0;
  bool close_after = false;
  size_t lingered = 0;
  bool peer_eof = false;
  // Worker side: a write failed, or stop() shut the socket down.
  std::atomic<bool> broken{false};
  std::atomic<bool> forced{false};
  bool close_after_worker = false;
};

}  // namespace hearth::server::http_detail
