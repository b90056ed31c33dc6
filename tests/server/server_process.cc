#include "server/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>

#include "common/test_util.h"

extern char** environ;

namespace hearth::test {
namespace {

using Clock = std::chrono::steady_clock;

std::mutex g_log_mu;  // guards ServerProcess::log_ between the drain thread and the test

// One line of fd (without "\n"); false at the end of the stream.
bool read_line(int fd, std::string& line) {
  line.clear();
  char c;
  while (::read(fd, &c, 1) == 1) {
    if (c == '\n') return true;
    line.push_back(c);
  }
  return !line.empty();
}

}  // namespace

ServerProcess::ServerProcess(const std::vector<std::string>& args, double timeout_s) {
  std::vector<std::string> full = {HEARTH_BINARY, "serve", "--port", "0"};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  err_fd_ = fds[0];
  if (rc != 0) throw std::runtime_error("cannot start " + full[0]);

  std::string line;
  while (port_ == 0 && read_line(err_fd_, line)) {
    log_ += line + "\n";
    const auto at = line.find("listening on http://");
    if (at != std::string::npos) port_ = std::stoi(line.substr(line.rfind(':') + 1));
  }
  if (port_ == 0) {
    stop();
    throw std::runtime_error("hearth serve did not start: " + log_);
  }
  drain_ = std::thread([this] {
    std::string l;
    while (read_line(err_fd_, l)) {
      std::lock_guard lock(g_log_mu);
      log_ += l + "\n";
    }
  });
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  auto c = client();
  for (;;) {
    const auto r = c.Get("/health");
    if (r && r->status == 200) break;
    int status = 0;
    if (Clock::now() > deadline || waitpid(pid_, &status, WNOHANG) == pid_) {
      if (Clock::now() <= deadline) pid_ = -1;  // exited (a model that fails to load): reaped
      stop();
      throw std::runtime_error("hearth serve did not become ready: " + log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

ServerProcess::~ServerProcess() { stop(); }

httplib::Client ServerProcess::client() const {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(30, 0);
  return c;
}

int ServerProcess::stop() {
  int code = -1;
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    int status = 0;
    while (Clock::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (code == -1) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  if (drain_.joinable()) drain_.join();
  if (err_fd_ >= 0) ::close(err_fd_);
  err_fd_ = -1;
  return code;
}

void ServerProcess::signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

int ServerProcess::wait_exit(double timeout_s) {
  if (pid_ <= 0) return -1;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      if (drain_.joinable()) drain_.join();
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

long ServerProcess::rss_bytes() const {
  if (pid_ <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6) * 1024;
  }
  return 0;
}

std::string ServerProcess::log() const {
  std::lock_guard lock(g_log_mu);
  return log_;
}

std::string synth_model(const std::string& name, const std::vector<std::string>& shape) {
  static std::mutex mu;
  static std::map<std::string, std::string> made;
  std::lock_guard lock(mu);
  if (const auto it = made.find(name); it != made.end()) return it->second;
  static const std::string dir = temp_dir();
  const std::string path = dir + "/" + name + ".gguf";
  std::vector<std::string> args = {"synth", "-o", path};
  args.insert(args.end(), shape.begin(), shape.end());
  const auto r = run_hearth(args);
  if (r.exit_code != 0) throw std::runtime_error("hearth synth failed: " + r.err);
  return made[name] = path;
}

std::string small_model() {
  return synth_model("small", {"--n-embd", "64", "--n-layer", "2", "--n-ff", "96", "--n-head", "4",
                               "--n-head-kv", "2", "--n-vocab", "300", "--n-ctx", "256", "--type",
                               "f32"});
}

std::string slow_model() {
  return synth_model("slow", {"--n-embd", "256", "--n-layer", "4", "--n-ff", "1024", "--n-head",
                              "4", "--n-head-kv", "4", "--n-vocab", "300", "--n-ctx", "2048",
                              "--type", "f32"});
}

}  // namespace hearth::test
