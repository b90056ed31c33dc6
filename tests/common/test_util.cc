#include "common/test_util.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "calib/calibrate.h"
#include "ops/vec.h"

namespace fs = std::filesystem;

namespace hearth::test {

std::optional<std::string> shared_dir() {
  if (const char* env = std::getenv("HEARTH_SHARED_DIR")) {
    if (fs::is_directory(env)) return std::string(env);
    return std::nullopt;
  }
  const fs::path p = fs::path(HEARTH_SOURCE_DIR).parent_path() / "shared";
  if (fs::is_directory(p / "models")) return p.string();
  return std::nullopt;
}

namespace {
struct TempRoot {
  fs::path path;
  TempRoot() {
    std::string tmpl = (fs::temp_directory_path() / "hearth-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};
}  // namespace

std::string temp_dir() {
  static TempRoot root;  // test-process lifetime only
  static int counter = 0;
  fs::path p = root.path / std::to_string(counter++);
  fs::create_directories(p);
  return p.string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<int32_t> read_ids(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out << data;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = s.find(sep, start)) != std::string::npos; start = at + sep.size()) {
    parts.push_back(s.substr(start, at - start));
  }
  parts.push_back(s.substr(start));
  return parts;
}

namespace {
std::string drain(int fd) {
  std::string data;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return data;
}
}  // namespace

namespace {

// Writes all of `data` to fd, then closes it. SIGPIPE is blocked in this thread only, so a child
// that exits without reading its input makes write() fail instead of killing the test process.
void feed(int fd, const std::string& data) {
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
}

// Runs argv_store[0] (looked up on PATH when it has no '/') with its output captured.
CommandResult run_impl(std::vector<std::string> argv_store, const std::string* input) {
  int in_pipe[2] = {-1, -1}, out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) throw std::runtime_error("pipe failed");
  if (input && pipe(in_pipe) != 0) throw std::runtime_error("pipe failed");
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (input) {
      dup2(in_pipe[0], 0);
      close(in_pipe[0]);
      close(in_pipe[1]);
    } else {
      const int devnull = open("/dev/null", O_RDONLY);
      dup2(devnull, 0);
    }
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  std::thread writer;
  if (input) {
    close(in_pipe[0]);
    writer = std::thread(feed, in_pipe[1], *input);
  }
  CommandResult r;
  std::thread err_reader([&] { r.err = drain(err_pipe[0]); });
  r.out = drain(out_pipe[0]);
  err_reader.join();
  if (writer.joinable()) writer.join();
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::vector<std::string> hearth_argv(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {HEARTH_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

CommandResult run_hearth(const std::vector<std::string>& args) {
  return run_impl(hearth_argv(args), nullptr);
}

CommandResult run_hearth_with_input(const std::vector<std::string>& args, const std::string& input) {
  return run_impl(hearth_argv(args), &input);
}

CommandResult run_command(const std::vector<std::string>& argv) { return run_impl(argv, nullptr); }

int count_lines(const std::string& s) {
  int n = 0;
  for (const char c : s) n += c == '\n';
  return n;
}

void expect_clean_error(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("error"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

double cli_perplexity(const std::string& model, const std::string& text,
                      const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"perplexity", "-m", model, "-f", text};
  args.insert(args.end(), extra.begin(), extra.end());
  const CommandResult r = run_hearth(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The mode's own line starts with "PPL = " (--kl-base adds a "dense PPL = " line after it).
  const size_t at = r.out.rfind("\nPPL = ") + 1;
  if (at == 0 && r.out.rfind("PPL = ", 0) != 0) return std::nan("");
  return std::strtod(r.out.c_str() + at + 6, nullptr);
}

std::string random_words(size_t chars, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> letter('a', 'z'), len(1, 8);
  std::string s;
  while (s.size() < chars) {
    for (int i = len(gen); i > 0; --i) s.push_back(static_cast<char>(letter(gen)));
    s.push_back(' ');
  }
  return s;
}

std::vector<float> logits_in_steps(const std::shared_ptr<const Model>& model,
                                   const SessionOptions& options,
                                   const std::vector<int32_t>& tokens, size_t step) {
  Session s(model, options);
  std::span<const float> last;
  for (size_t i = 0; i < tokens.size(); i += step) {
    last = s.eval(std::span(tokens).subspan(i, std::min(step, tokens.size() - i)));
  }
  return {last.begin(), last.end()};
}

std::vector<int32_t> fixed_prompt(int n) {
  std::vector<int32_t> t = {1};
  for (int i = 1; i < n; ++i) t.push_back(2 + (i * 53) % 290);
  return t;
}

std::vector<float> prompt_logits(const std::shared_ptr<const Model>& model,
                                 const SessionOptions& options, const std::vector<int32_t>& tokens,
                                 const std::vector<int32_t>& steps) {
  Session s(model, options);
  std::vector<float> out(tokens.size() * static_cast<size_t>(model->config().n_vocab));
  s.eval_all(tokens, out);
  for (const int32_t t : steps) {
    const auto l = s.eval({&t, 1});
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

SynthOptions tiny_synth_options(DType type, FfnActivation act) {
  SynthOptions o;
  o.n_embd = 64;
  o.n_layer = 2;
  o.n_ff = 128;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_vocab = 300;
  o.type = type;
  o.act = act;
  return o;
}

std::string write_skewed_sparse_model(DType type, const std::string& path) {
  SynthOptions o = tiny_synth_options(type, FfnActivation::Relu);
  o.n_embd = 128;
  o.n_layer = 3;
  o.n_ff = 352;
  o.n_ctx = 128;
  o.sparsity = 0.8;
  o.skew = 1.5;
  write_synthetic_model(o, path);
  add_activation_stats(path, 96, 7, 1);
  return path;
}

std::string write_model_wide_model(DType type, int64_t n_embd, bool relu,
                                   const std::vector<double>& shares) {
  SynthOptions so = tiny_synth_options(type, relu ? FfnActivation::Relu : FfnActivation::Silu);
  so.n_embd = n_embd;
  so.n_ff = 2 * n_embd + 96;
  if (relu) so.sparsity = 0.8;
  std::string name =
      std::string(dtype_name(type)) + "-" + std::to_string(n_embd) + (relu ? "-relu" : "");
  for (double s : shares) name += "-" + std::to_string(static_cast<int>(100 * s));
  const std::string plain = temp_dir() + "/plain-" + name + ".gguf";
  write_synthetic_model(so, plain);
  calib::CalibrationResult r;
  r.kind = calib::CalibKind::InputThresholds;
  r.report.kind = "thresholds";
  r.report.layers.resize(static_cast<size_t>(so.n_layer));
  for (sparse::CalibLayerReport& l : r.report.layers) {
    l.freq.assign(static_cast<size_t>(so.n_ff), 0.5f);
    l.true_sparsity = 0.4;
    l.input_share = shares;
  }
  r.thresholds.assign(
      static_cast<size_t>(so.n_layer),
      LayerThresholds{.attn_in = 0.4f, .attn_out = 0.01f, .ffn_in = 0.4f, .down = 0.002f});
  const std::string out = temp_dir() + "/model-wide-" + name + ".gguf";
  calib::write_calibrated_model(*Model::load(plain), r, out);
  return out;
}

std::vector<int32_t> greedy_ids(const std::shared_ptr<const Model>& model, int n,
                                const SessionOptions& options) {
  Session session(model, options);
  std::vector<int32_t> out;
  const int32_t bos = model->bos();
  auto logits = session.eval({&bos, 1});
  for (int i = 0; i < n; ++i) {
    const auto next = static_cast<int32_t>(argmax(logits.data(), static_cast<int64_t>(logits.size())));
    if (model->is_eog(next)) break;
    out.push_back(next);
    logits = session.eval({&next, 1});
  }
  return out;
}

}  // namespace hearth::test
