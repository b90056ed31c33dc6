// A `hearth serve` process for the integration tests: started on a free loopback port (--port 0,
// the port read from its stderr), ready once /health answers 200, stopped with SIGTERM.
#pragma once

#include <sys/types.h>

#include <httplib.h>

#include <string>
#include <thread>
#include <vector>

namespace hearth::test {

class ServerProcess {
 public:
  // `args` follow "hearth serve --port 0"; throws std::runtime_error when the server does not
  // come up within `timeout_s`.
  explicit ServerProcess(const std::vector<std::string>& args, double timeout_s = 20);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  httplib::Client client() const;
  // SIGTERM, then the exit status (-1 if it did not exit within a few seconds).
  int stop();
  // Sends `sig` to the server (nothing once it has exited).
  void signal(int sig) const;
  // Waits up to timeout_s for the server to exit: its wait status (waitpid's), or -1 when it is
  // still running (then it stays so; stop() ends it).
  int wait_exit(double timeout_s);
  // The server's resident memory now, in bytes (VmRSS; 0 when it cannot be read).
  long rss_bytes() const;
  // Everything the server wrote to stderr so far (complete after stop()).
  std::string log() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int err_fd_ = -1;
  std::string log_;
  std::thread drain_;
};

// A small Llama-shaped model made with `hearth synth` (once per process and shape).
std::string synth_model(const std::string& name, const std::vector<std::string>& shape);
// The small synthetic model most server tests use (64 wide, 2 layers, 300 tokens, context 256).
std::string small_model();
// Big enough that a full-context reply (ignore_eos, -c 2048) takes seconds, so a slot still busy
// shows.
std::string slow_model();

}  // namespace hearth::test
