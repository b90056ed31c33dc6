// The CLI on a dense Q2_K file: by default it holds the matrices as row groups
// (LoadOptions::row_groups), whose products give the same bits for any batch size, thread count
// and way of loading, so the greedy text is the same through all of them; --no-repack keeps the
// file's rows, and a sparse mode, which reads single rows, still runs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "model/synth.h"

namespace hearth {
namespace {

std::string dense_q2_k() {
  SynthOptions so = test::tiny_synth_options(DType::Q2_K);
  so.n_embd = 256;  // whole super-blocks
  so.n_ff = 512;
  const std::string path = test::temp_dir() + "/cli-row-groups-q2_k.gguf";
  write_synthetic_model(so, path);
  return path;
}

TEST(RowGroupsCli, EveryBatchThreadCountAndLoadGivesTheSameText) {
  const std::string model = dense_q2_k();
  const auto text = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"run",    "-m", model, "-p", "one two three", "-n", "16",
                                     "--temp", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CommandResult r = test::run_hearth(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string grouped = text({"-t", "2"});
  EXPECT_FALSE(grouped.empty());
  EXPECT_EQ(grouped, text({"-t", "1"}));
  EXPECT_EQ(grouped, text({"-t", "2", "-b", "1"}));
  EXPECT_EQ(grouped, text({"-t", "2", "--mmap"}));
  EXPECT_FALSE(text({"--no-repack"}).empty());
  EXPECT_FALSE(text({"--sparse", "oracle"}).empty());
}

}  // namespace
}  // namespace hearth
