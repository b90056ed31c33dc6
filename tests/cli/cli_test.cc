// The `hearth` binary as a user meets it: commands that work, and bad input that must end in one
// clear error line and a non-zero exit, never a crash.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gguf/gguf.h"

extern char** environ;

namespace hearth {
namespace {

using test::run_hearth;


using test::count_lines;
using test::expect_clean_error;

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir());
    model_ = new std::string(*dir_ + "/tiny.gguf");
    const auto r = run_hearth({"synth", "-o", *model_, "--n-embd", "64", "--n-layer", "2", "--n-ff",
                               "96", "--n-head", "4", "--n-head-kv", "2", "--n-vocab", "300",
                               "--n-ctx", "64", "--type", "f32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete model_;
  }
  static std::string* dir_;
  static std::string* model_;
};
std::string* Cli::dir_ = nullptr;
std::string* Cli::model_ = nullptr;

TEST_F(Cli, RunPrintsExactlyPromptThenText) {
  const auto r = run_hearth({"run", "-m", *model_, "-p", "hello world", "-n", "8", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("hello world", 0), 0u) << r.out;
  EXPECT_GT(r.out.size(), std::string("hello world").size());
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

// Runs `args` without and with `flag`: both succeed and print the same text.
void expect_flag_keeps_text(const std::vector<std::string>& args, const std::string& flag) {
  const auto without = run_hearth(args);
  auto copy = args;
  copy.push_back(flag);
  const auto with = run_hearth(copy);
  ASSERT_EQ(without.exit_code, 0) << without.err;
  ASSERT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(without.out, with.out) << flag;
}

// A 2-layer ReLU model with predictors (hearth synth --sparsity) at `path`.
::testing::AssertionResult synth_relu(const std::string& path, const char* n_embd,
                                      const char* n_ff, const char* type, const char* sparsity) {
  const auto r = run_hearth({"synth", "-o", path, "--n-embd", n_embd, "--n-layer", "2", "--n-ff",
                             n_ff, "--n-head", "4", "--n-head-kv", "2", "--n-vocab", "300",
                             "--n-ctx", "128", "--type", type, "--sparsity", sparsity});
  if (r.exit_code == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.err;
}

// The default reads a small file into memory or maps it, by the machine; both forced ways give
// the same text.
TEST_F(Cli, MmapAndNoMmapGiveTheSameText) {
  for (const char* flag : {"--no-mmap", "--mmap"}) {
    expect_flag_keeps_text({"run", "-m", *model_, "-p", "hello", "-n", "12", "--temp", "0"}, flag);
  }
}

// A sparse model with measured frequencies is held most-active first unless --no-reorder: the
// same function, so dense greedy text is identical either way.
TEST_F(Cli, NeuronReorderKeepsTheText) {
  const std::string sparse = *dir_ + "/tiny-relu.gguf";
  ASSERT_TRUE(synth_relu(sparse, "64", "96", "f32", "0.8"));
  for (const char* mode : {"dense", "predictor"}) {
    expect_flag_keeps_text(
        {"run", "-m", sparse, "-p", "hello", "-n", "12", "--temp", "0", "--sparse", mode},
        "--no-reorder");
  }
}

// Batch invariance: in predictor mode the prompt gives the same greedy text at any -b (every
// token a decode step, the largest sparse group, one more, a whole prompt) and thread count. The
// high threshold makes the predictors skip neurons that fire, so that a prompt computed any other
// way (densely, as before) gives other text.
TEST_F(Cli, SparseTextDoesNotDependOnTheBatchSize) {
  const std::string sparse = *dir_ + "/batch-relu.gguf";
  ASSERT_TRUE(synth_relu(sparse, "128", "512", "q8_0", "0.7"));
  const std::string prompt = "a prompt of some forty bytes, one token each";
  const auto text = [&](const char* batch, const char* threads) {
    const auto r = run_hearth({"run", "-m", sparse, "-p", prompt, "-n", "24", "--temp", "0",
                               "--sparse", "predictor", "--sparse-threshold", "4", "-b", batch,
                               "-t", threads});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string want = text("1", "2");
  for (const char* b : {"8", "9", "512"}) EXPECT_EQ(text(b, "2"), want) << "-b " << b;
  EXPECT_EQ(text("512", "1"), want) << "-t 1";
}

TEST_F(Cli, SameSeedSameText) {
  const std::vector<std::string> args = {"run", "-m", *model_, "-p", "abc", "-n", "16", "--temp",
                                         "1.0", "--top-k", "0", "--top-p", "1", "--min-p", "0"};
  auto with_seed = [&](const char* seed) {
    auto a = args;
    a.insert(a.end(), {"--seed", seed});
    const auto r = run_hearth(a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_EQ(with_seed("7"), with_seed("7"));
  EXPECT_NE(with_seed("7"), with_seed("8"));
}

TEST_F(Cli, EveryWeightTypeRuns) {
  for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_0"}) {
    const std::string path = *dir_ + "/t_" + type + ".gguf";
    auto r = run_hearth({"synth", "-o", path, "--n-embd", "64", "--n-layer", "1", "--n-ff", "64",
                         "--n-head", "2", "--n-head-kv", "1", "--n-vocab", "300", "--type", type});
    ASSERT_EQ(r.exit_code, 0) << type << ": " << r.err;
    r = run_hearth({"run", "-m", path, "-p", "x", "-n", "4", "--temp", "0"});
    EXPECT_EQ(r.exit_code, 0) << type << ": " << r.err;
    r = run_hearth({"inspect", path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(std::string(type) + " "), std::string::npos) << type << "\n" << r.out;
  }
}

TEST_F(Cli, TokenizeIds) {
  auto r = run_hearth({"tokenize", "-m", *model_, "-p", "hi", "--ids"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string plain = test::trim(r.out);
  EXPECT_FALSE(plain.empty());
  r = run_hearth({"tokenize", "-m", *model_, "-p", "hi", "--ids", "--bos"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::trim(r.out), "1 " + plain);
}

TEST_F(Cli, InspectShowsHyperParametersAndTensors) {
  const auto r = run_hearth({"inspect", *model_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("n_embd 64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blk.1.ffn_down.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokenizer"), std::string::npos) << r.out;
}

TEST_F(Cli, UsageErrors) {
  auto r = run_hearth({});
  EXPECT_EQ(r.exit_code, 1);
  expect_clean_error(run_hearth({"frobnicate"}), "unknown command");
  expect_clean_error(run_hearth({"run", "-p", "x"}), "model");
  expect_clean_error(run_hearth({"run", "-m", *model_, "--bogus"}), "bogus");
  expect_clean_error(run_hearth({"run", "-m", *model_, "--mmap", "--no-mmap"}), "excludes");
  expect_clean_error(run_hearth({"run", "-m", *model_, "-n", "abc"}), "n-predict");
  expect_clean_error(run_hearth({"run", "-m", *model_, "--top-p", "2"}), "top_p");
  expect_clean_error(run_hearth({"run", "-m", *model_, "-p", "a", "-f", "b"}), "either");
  expect_clean_error(run_hearth({"calibrate", "-m", *model_, "-f", *model_, "--sparsity", "0.4",
                                 "--allocate", "bytes", "-o", *dir_ + "/c.gguf"}),
                     "allocate");
  expect_clean_error(run_hearth({"synth", "-o", *dir_ + "/x.gguf", "--n-embd", "60", "--n-head", "8"}),
                     "n-embd");
}

TEST_F(Cli, BadModelFiles) {
  expect_clean_error(run_hearth({"run", "-m", *dir_ + "/missing.gguf"}), "missing.gguf");
  const std::string text = *dir_ + "/text.gguf";
  test::write_file(text, "this is not a model file at all, just some text\n");
  expect_clean_error(run_hearth({"run", "-m", text}), "GGUF");
  expect_clean_error(run_hearth({"inspect", text}), "GGUF");

  const std::string full = test::read_file(*model_);
  for (const size_t cut : {size_t{0}, size_t{3}, size_t{24}, size_t{1000}, full.size() / 2, full.size() - 1}) {
    const std::string path = *dir_ + "/cut" + std::to_string(cut) + ".gguf";
    test::write_file(path, full.substr(0, cut));
    expect_clean_error(run_hearth({"run", "-m", path, "-n", "1"}), "cut" + std::to_string(cut));
    for (const char* load : {"--no-mmap", "--mmap"}) {
      expect_clean_error(run_hearth({"run", "-m", path, "-n", "1", load}),
                         "cut" + std::to_string(cut));
    }
  }
}

TEST_F(Cli, UnsupportedArchitectureAndType) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "mamba");
  const std::string arch = *dir_ + "/mamba.gguf";
  w.write(arch);
  expect_clean_error(run_hearth({"run", "-m", arch}), "unsupported architecture 'mamba'");

  // A llama model whose embedding is in a type Hearth has no kernels for (iq2_xxs): the error
  // names the tensor, its type and the supported list.
  gguf::GgufWriter l;
  l.set_string("general.architecture", "llama");
  l.set_u32("llama.embedding_length", 256);
  l.set_u32("llama.block_count", 1);
  l.set_u32("llama.feed_forward_length", 256);
  l.set_u32("llama.attention.head_count", 2);
  std::vector<uint8_t> blob(300 * 66);
  const int64_t ne[2] = {256, 300};
  l.add_tensor("token_embd.weight", 16, ne, blob.data(), blob.size());
  const std::string iq2 = *dir_ + "/iq2_xxs.gguf";
  l.write(iq2);
  const auto r = run_hearth({"run", "-m", iq2});
  expect_clean_error(r, "'token_embd.weight' has type iq2_xxs, which Hearth does not support");
  EXPECT_NE(r.err.find("q4_k, q5_k, q6_k, iq4_nl, iq4_xs"), std::string::npos) << r.err;
}

TEST_F(Cli, PromptLongerThanContext) {
  const std::string long_prompt(400, 'z');
  expect_clean_error(run_hearth({"run", "-m", *model_, "-p", long_prompt}), "context");
  expect_clean_error(run_hearth({"run", "-m", *model_, "-p", "hi", "-c", "-5"}), "ctx-size");
}

TEST_F(Cli, GenerationStopsAtTheContextEnd) {
  const auto r = run_hearth({"run", "-m", *model_, "-p", "a", "-n", "-1", "-c", "12", "--temp", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("context is full"), std::string::npos) << r.err;
}

TEST_F(Cli, PromptFileThatIsADirectoryIsAnError) {
  expect_clean_error(run_hearth({"run", "-m", *model_, "-f", *dir_}), "is a directory");
}

// The CLI rejects what the server rejects ("temperature" must be in [0, 2] there); the library
// keeps llama.cpp's reading of a negative temperature as greedy.
TEST_F(Cli, NegativeTemperatureIsAnError) {
  expect_clean_error(run_hearth({"run", "-m", *model_, "-p", "a", "--temp", "-1"}), "--temp");
  expect_clean_error(run_hearth({"run", "-m", *model_, "-p", "a", "--temp", "nan"}), "--temp");
  EXPECT_EQ(run_hearth({"run", "-m", *model_, "-p", "a", "-n", "2", "--temp", "0"}).exit_code, 0);
}

// A FIFO (or any file that is not a regular one) as the model is refused at once instead of
// blocking in open() until something writes to it. `timeout` ends a command that blocks anyway.
TEST_F(Cli, ModelThatIsAFifoIsRefusedAtOnce) {
  const std::string fifo = *dir_ + "/model.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::vector<std::string>> commands = {
      {"run", "-m", fifo, "-p", "a"},
      {"inspect", fifo},
      {"tokenize", "-m", fifo, "-p", "a"},
      {"quantize", fifo, *dir_ + "/q.gguf", "q8_0"},
      {"perplexity", "-m", fifo, "-f", *model_},
      {"calibrate", "-m", fifo, "-f", *model_, "-o", *dir_ + "/c.gguf"},
  };
  for (const auto& args : commands) {
    std::vector<std::string> argv = {"timeout", "10", HEARTH_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = test::run_command(argv);
    EXPECT_NE(r.exit_code, 124) << args[0] << " blocked on the FIFO";
    expect_clean_error(r, "not a regular file");
  }
  expect_clean_error(run_hearth({"run", "-m", *dir_}), "not a regular file");
}

// calibrate refuses to write over its input, whatever the spelling of the path (as quantize).
TEST_F(Cli, CalibrateRefusesToReplaceItsInput) {
  const std::string text = *dir_ + "/calib.txt";
  test::write_file(text, "the cat sat on the mat and looked at the bird in the tree.\n");
  const std::string before = test::read_file(*model_);
  const std::string link = *dir_ + "/link.gguf";
  std::filesystem::remove(link);
  std::filesystem::create_symlink(*model_, link);
  for (const std::string& out : {*model_, *dir_ + "/./tiny.gguf", link}) {
    expect_clean_error(run_hearth({"calibrate", "-m", *model_, "-f", text, "-o", out}),
                       "is the input file");
    expect_clean_error(run_hearth({"calibrate", "-m", link, "--stage", "train", "-o", out}),
                       "is the input file");
  }
  EXPECT_EQ(test::read_file(*model_), before);
}

// perplexity on a model whose logits are NaN (its output matrix is) fails instead of printing
// "PPL = -nan" with exit code 0.
TEST_F(Cli, PerplexityWithNanLogitsIsAnError) {
  std::string bytes = test::read_file(*model_);
  const auto file = gguf::GgufFile::open_buffer("copy", reinterpret_cast<const uint8_t*>(bytes.data()),
                                                bytes.size());
  const gguf::TensorInfo* output = nullptr;
  for (const auto& t : file->tensors()) {
    if (t.name == "output.weight") output = &t;
  }
  ASSERT_NE(output, nullptr);
  ASSERT_EQ(output->type, 0u);  // f32
  const size_t at = static_cast<size_t>(output->data - reinterpret_cast<const uint8_t*>(bytes.data()));
  const float nan = std::nanf("");
  for (size_t i = 0; i < output->nbytes; i += sizeof nan) std::memcpy(&bytes[at + i], &nan, sizeof nan);
  const std::string broken = *dir_ + "/nan.gguf";
  test::write_file(broken, bytes);
  const std::string text = *dir_ + "/ppl.txt";
  std::string words;
  for (int i = 0; i < 200; ++i) words += "the cat sat on a mat ";
  test::write_file(text, words);
  const auto r = run_hearth({"perplexity", "-m", broken, "-f", text, "-c", "32", "-t", "1"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.out.find("PPL"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("not finite"), std::string::npos) << r.err;
}

// Runs `hearth ARGS` with default signal actions, waits until a file whose name starts with
// `prefix` appears in `dir`, sends `sig`, and checks that the process died of it and that no such
// file stays behind.
void expect_interrupt_cleans_up(std::vector<std::string> args, const std::string& dir,
                                const std::string& prefix, int sig, int settle_us) {
  SCOPED_TRACE("signal " + std::to_string(sig) + ", " + args[0]);
  args.insert(args.begin(), HEARTH_BINARY);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  // The child gets default signal actions, whatever this process ignores.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  const auto tmp_exists = [&] {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
    }
    return false;
  };
  bool seen = false;
  for (int i = 0; i < 30000 && !(seen = tmp_exists()); ++i) ::usleep(1000);
  ::usleep(settle_us);
  ::kill(pid, sig);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(seen) << "no " << prefix << "* file appeared";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig)
      << "status " << status << " (finished before the signal?)";
  EXPECT_FALSE(tmp_exists()) << "the " << prefix << "* file stayed behind";
}

// For SIGINT and SIGTERM: hearth ARGS(OUT), interrupted once a file OUT + `suffix`* appears,
// leaves neither that file nor OUT.
void expect_interrupts_clean_up(
    const std::function<std::vector<std::string>(const std::string&)>& args,
    const std::string& suffix, int settle_us) {
  for (const int sig : {SIGINT, SIGTERM}) {
    const std::string out_dir = test::temp_dir();
    const std::string out = out_dir + "/out.gguf";
    expect_interrupt_cleans_up(args(out), out_dir, "out.gguf" + suffix, sig, settle_us);
    EXPECT_FALSE(std::filesystem::exists(out));
  }
}

// A random F32 Llama of `shape` (synth's flags) at `path`.
void synth_f32(const std::string& path, std::vector<std::string> shape) {
  std::vector<std::string> args = {"synth", "-o", path, "--type", "f32", "--n-vocab", "300"};
  args.insert(args.end(), shape.begin(), shape.end());
  ASSERT_EQ(run_hearth(args).exit_code, 0);
}

// An interrupted quantize leaves neither OUT nor its temporary OUT.tmp.<pid> (SIGINT and SIGTERM;
// the process still dies of the signal).
TEST_F(Cli, InterruptedQuantizeLeavesNoTemporaryFile) {
  const std::string src = *dir_ + "/wide.gguf";
  synth_f32(src, {"--n-embd", "512", "--n-layer", "4", "--n-ff", "1408", "--n-head", "8",
                  "--n-head-kv", "8", "--n-ctx", "64"});
  expect_interrupts_clean_up(
      [&](const std::string& out) {
        return std::vector<std::string>{"quantize", src, out, "q4_k_m"};
      },
      ".tmp.", 50000);  // well into the writing
}

// A quantized model calibrated model-wide at 50%: none of its inputs leaves few enough rows for a
// Q4_0 input-major copy to pay, so its thresholds would read the dense bytes. calibrate says that
// --sparse auto will run it dense, and run does so and says why; --sparse threshold still works.
TEST_F(Cli, AutoRunsDenseWhereModelWideThresholdsDoNotPay) {
  const std::string src = *dir_ + "/q4-src.gguf";
  auto r = run_hearth({"synth", "-o", src, "--n-embd", "128", "--n-layer", "2", "--n-ff", "352",
                       "--n-head", "4", "--n-head-kv", "4", "--n-ctx", "256", "--type", "q4_0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = *dir_ + "/q4-text.txt";
  test::write_file(text, test::random_words(40000, 5));
  const std::string out = *dir_ + "/q4-mw.gguf";
  r = run_hearth({"calibrate", "-m", src, "-f", text, "--sparsity", "0.5", "--no-rotate",
                  "--tokens", "3000", "-t", "1", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("note: --sparse auto runs dense"), std::string::npos) << r.out;
  r = run_hearth({"run", "-m", out, "-p", "hello", "-n", "4", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("--sparse auto runs dense"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sparse dense"), std::string::npos) << r.err;
  r = run_hearth(
      {"run", "-m", out, "-p", "hello", "-n", "4", "--temp", "0", "--sparse", "threshold"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("--sparse auto runs dense"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sparse threshold"), std::string::npos) << r.err;
}

// An interrupted model-wide calibration leaves no scratch copy of the rotated model
// (OUT.rotated.<pid>), nor OUT.
TEST_F(Cli, InterruptedCalibrateLeavesNoRotatedScratchModel) {
  const std::string src = *dir_ + "/calib-src.gguf";
  synth_f32(src, {"--n-embd", "128", "--n-layer", "2", "--n-ff", "352", "--n-head", "4",
                  "--n-head-kv", "4", "--n-ctx", "256"});
  const std::string text = *dir_ + "/calib-text.txt";
  test::write_file(text, test::random_words(400000, 11));
  expect_interrupts_clean_up(
      [&](const std::string& out) {
        // The principal axes alone: the scratch file must appear within the helper's 30 s, under
        // the sanitizers too.
        return std::vector<std::string>{
            "calibrate",        "-m", src,  "-f", text, "--sparsity", "0.4",
            "--rotation-steps", "0",  "-t", "1",  "-o", out};
      },
      ".rotated.", 20000);  // into the search on the rotated model
}

}  // namespace
}  // namespace hearth
