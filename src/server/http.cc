#include "server/http.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace hearth::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

class SinkAdapter final : public StreamSink {
 public:
  explicit SinkAdapter(httplib::DataSink& sink) : sink_(sink) {}
  bool write(std::string_view data) override {
    // After one failed write the socket is dead: never write to it again.
    ok_ = ok_ && sink_.is_writable() && sink_.write(data.data(), data.size());
    return ok_;
  }
  bool ok() const { return ok_; }

 private:
  httplib::DataSink& sink_;
  bool ok_ = true;
};

HttpRequest to_request(const httplib::Request& req) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  r.body = req.body;
  for (const auto& [name, value] : req.headers) r.headers.emplace(lower(name), value);
  return r;
}

void fill_response(HttpResponse&& ours, httplib::Response& res) {
  res.status = ours.status;
  for (const auto& [name, value] : ours.headers) res.set_header(name, value);
  if (!ours.stream) {
    res.set_content(ours.body, ours.content_type);
    if (ours.on_close) ours.on_close();
    return;
  }
  auto stream = std::move(ours.stream);
  auto on_close = std::move(ours.on_close);
  res.set_chunked_content_provider(
      ours.content_type,
      [stream](size_t, httplib::DataSink& sink) {
        SinkAdapter adapter(sink);
        stream(adapter);
        if (!adapter.ok()) return false;  // drops the connection
        sink.done();
        return true;
      },
      [on_close](bool) {
        if (on_close) on_close();
      });
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  const auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

struct HttpServer::Impl {
  httplib::Server server;
  HttpOptions options;

  httplib::Server::Handler wrap(HttpHandler handler) {
    return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
      fill_response(handler(to_request(req)), res);
    };
  }
};

HttpServer::HttpServer(const HttpOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  auto& s = impl_->server;
  s.set_payload_max_length(options.max_body_bytes);
  // httplib's default adds SO_REUSEPORT, which lets a second server bind a port already in use
  // and silently share its connections; a busy port must be an error instead.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const size_t n_threads = static_cast<size_t>(std::max(1, options.n_threads));
  s.new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  // Errors httplib answers by itself (413, 404) get the same JSON shape as ours; our own error
  // responses already carry a body and are left alone.
  s.set_error_handler([error_body = options.error_body](const httplib::Request&,
                                                        httplib::Response& res) {
    if (res.body.empty() && error_body) res.set_content(error_body(res.status), "application/json");
  });
  s.set_exception_handler([error_body = options.error_body](const httplib::Request&,
                                                            httplib::Response& res,
                                                            std::exception_ptr) {
    res.status = 500;
    if (error_body) res.set_content(error_body(500), "application/json");
  });
}

HttpServer::~HttpServer() = default;

void HttpServer::get(const std::string& path, HttpHandler handler) {
  impl_->server.Get(path, impl_->wrap(std::move(handler)));
}

void HttpServer::post(const std::string& path, HttpHandler handler) {
  impl_->server.Post(path, impl_->wrap(std::move(handler)));
}

int HttpServer::bind(const std::string& host, int port) {
  const int bound = port == 0 ? impl_->server.bind_to_any_port(host)
                              : (impl_->server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) fail("cannot listen on ", host, ":", port, " (address in use or not local?)");
  return bound;
}

bool HttpServer::serve() { return impl_->server.listen_after_bind(); }

void HttpServer::stop() { impl_->server.stop(); }

}  // namespace hearth::server
