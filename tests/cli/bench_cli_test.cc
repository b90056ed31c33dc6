// `hearth bench` with several --sparse modes: the fields scripts rely on, the order of the modes,
// the ratios against the first mode, and clean errors for modes that cannot run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>  // header-only (system package), as the hearth binary uses it
#include <string>
#include <vector>

#include "common/test_util.h"

namespace hearth {
namespace {

using test::run_hearth;


using test::count_lines;
using test::expect_clean_error;

class BenchCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(test::temp_dir() + "/bench.gguf");
    const auto r = run_hearth({"synth", "-o", *model_, "--n-embd", "64", "--n-layer", "2", "--n-ff",
                               "96", "--n-head", "4", "--n-head-kv", "2", "--n-vocab", "300",
                               "--n-ctx", "64", "--type", "f32", "--act", "relu"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete model_; }

  // A quick bench: 8 prompt tokens, 4 generated, one repetition, no bandwidth probe.
  static std::vector<std::string> quick(std::vector<std::string> extra) {
    std::vector<std::string> a = {"bench", "-m", *model_, "-p", "8", "-n", "4", "-r", "1", "-t", "1",
                                  "--no-bandwidth"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  static std::string* model_;
};
std::string* BenchCli::model_ = nullptr;

// --mmap and --no-mmap are reported as the way the weights came in.
TEST_F(BenchCli, JsonSaysHowTheWeightsWereLoaded) {
  for (const bool mapped : {true, false}) {
    const auto r = run_hearth(quick({"-o", "json", mapped ? "--mmap" : "--no-mmap"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j.is_array() && !j.empty()) << r.out;
    EXPECT_EQ(j[0]["weights_in_memory"], !mapped);
  }
}

TEST_F(BenchCli, JsonHasTheFieldsForEveryModeInTheOrderGiven) {
  for (const auto& order : {std::vector<std::string>{"dense", "oracle"},
                            std::vector<std::string>{"oracle", "dense"}}) {
    const auto r = run_hearth(quick({"-o", "json", "--sparse", order[0], "--sparse", order[1]}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j.is_array()) << r.out;
    ASSERT_EQ(j.size(), 2u) << r.out;
    for (size_t i = 0; i < 2; ++i) {
      const auto& row = j[i];
      for (const char* field :
           {"sparse", "sparse_requested", "n_prompt", "n_gen", "threads", "pp_tokens_per_s",
            "tg_tokens_per_s", "sparsity", "bytes_per_token", "bandwidth_gbs", "roofline_fraction",
            "model", "repetitions", "pp_tokens_per_s_sd", "tg_tokens_per_s_sd", "pp_gflops",
            "roofline_tokens_per_s", "tg_speedup", "pp_speedup", "tg_implied_speedup",
            "input_sparsity", "weights_in_memory"}) {
        EXPECT_TRUE(row.contains(field)) << field << " missing in\n" << row.dump(2);
      }
      EXPECT_EQ(row["sparse"], order[i]);
      EXPECT_EQ(row["sparse_requested"], order[i]);
      EXPECT_EQ(row["n_prompt"], 8);
      EXPECT_EQ(row["n_gen"], 4);
      EXPECT_EQ(row["threads"], 1);
      EXPECT_GT(row["pp_tokens_per_s"].get<double>(), 0.0);
      EXPECT_GT(row["tg_tokens_per_s"].get<double>(), 0.0);
      EXPECT_GT(row["bytes_per_token"].get<double>(), 0.0);
      EXPECT_GE(row["sparsity"].get<double>(), 0.0);
      EXPECT_LE(row["sparsity"].get<double>(), 1.0);
      EXPECT_GT(row["tg_speedup"].get<double>(), 0.0);
      EXPECT_GT(row["pp_speedup"].get<double>(), 0.0);
    }
    EXPECT_DOUBLE_EQ(j[0]["tg_speedup"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(j[0]["tg_implied_speedup"].get<double>(), 1.0);
    EXPECT_NEAR(j[1]["tg_implied_speedup"].get<double>(),
                j[0]["bytes_per_token"].get<double>() / j[1]["bytes_per_token"].get<double>(), 1e-9);
    EXPECT_NEAR(j[1]["tg_speedup"].get<double>(),
                j[1]["tg_tokens_per_s"].get<double>() / j[0]["tg_tokens_per_s"].get<double>(), 1e-9);
  }
}

// With the bandwidth probe (run once per repetition), the roofline is the mean bandwidth over
// the bytes a token reads, and the share of it reached is set; without it both are left out.
TEST_F(BenchCli, RooflineComesFromTheBandwidthOfEachRepetition) {
  const auto r = run_hearth(
      {"bench", "-m", *model_, "-p", "0", "-n", "4", "-r", "2", "-t", "1", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto row = nlohmann::json::parse(r.out).at(0);
  const double bandwidth = row["bandwidth_gbs"].get<double>();
  const double bytes = row["bytes_per_token"].get<double>();
  EXPECT_GT(bandwidth, 0.0);
  EXPECT_NEAR(row["roofline_tokens_per_s"].get<double>(), bandwidth * 1e9 / bytes,
              1e-6 * bandwidth * 1e9 / bytes);
  EXPECT_GT(row["roofline_fraction"].get<double>(), 0.0);

  const auto none = run_hearth(quick({"-o", "json"}));
  ASSERT_EQ(none.exit_code, 0) << none.err;
  const auto plain = nlohmann::json::parse(none.out).at(0);
  EXPECT_EQ(plain["bandwidth_gbs"].get<double>(), 0.0);
  EXPECT_EQ(plain["roofline_fraction"].get<double>(), 0.0);
}

TEST_F(BenchCli, DefaultIsOneAutoRun) {
  const auto r = run_hearth(quick({"-o", "json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["sparse_requested"], "auto");
  EXPECT_EQ(j[0]["sparse"], "dense");  // synth models have no predictors
}

TEST_F(BenchCli, MarkdownAndCsvCompareAgainstTheFirstMode) {
  auto r = run_hearth(quick({"--sparse", "dense", "--sparse", "oracle"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("vs dense"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| oracle |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tg4"), std::string::npos) << r.out;

  r = run_hearth(quick({"-o", "csv", "--sparse", "dense", "--sparse", "oracle"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = test::split(test::trim(r.out), "\n");
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0].rfind("model,sparse,", 0), 0u) << lines[0];
  EXPECT_NE(lines[1].find(",dense,dense,"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find(",oracle,oracle,"), std::string::npos) << lines[2];
}

// -d, as llama-bench's: each test starts with that many tokens in the context, which the test
// names say, the decode's bytes count (its KV reads) and the context size must hold.
TEST_F(BenchCli, DepthStartsEachTestFromAFilledContext) {
  auto r = run_hearth(quick({"-d", "16"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| pp8 @ d16 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg4 @ d16 |"), std::string::npos) << r.out;
  const auto bytes = [&](const std::string& depth) {
    const auto j = run_hearth(quick({"-o", "json", "-d", depth}));
    EXPECT_EQ(j.exit_code, 0) << j.err;
    const auto rows = nlohmann::json::parse(j.out);
    EXPECT_EQ(rows[0]["n_depth"], std::stoi(depth));
    return rows[0]["bytes_per_token"].get<double>();
  };
  EXPECT_GT(bytes("40"), bytes("0"));
  expect_clean_error(run_hearth(quick({"-d", "16", "-c", "20"})), "-d 16");
  expect_clean_error(run_hearth(quick({"-d", "-3"})), "depth");
}

TEST_F(BenchCli, BadModesAreCleanErrors) {
  expect_clean_error(run_hearth(quick({"--sparse", "turbo"})), "turbo");
  expect_clean_error(run_hearth(quick({"--sparse", "dense", "--sparse", "bogus"})), "bogus");
  expect_clean_error(run_hearth(quick({"--sparse", "predictor"})), "predictor");
  expect_clean_error(run_hearth(quick({"--sparse", "dense", "--sparse", "predictor"})), "predictor");
  expect_clean_error(run_hearth({"run", "-m", *model_, "-p", "x", "--sparse", "turbo"}), "turbo");
}

TEST_F(BenchCli, RunAcceptsTheSparseFlags) {
  const auto r = run_hearth({"run", "-m", *model_, "-p", "hello", "-n", "4", "--temp", "0",
                             "--sparse", "oracle", "--sparse-threshold", "0.5"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("hello", 0), 0u) << r.out;
}

}  // namespace
}  // namespace hearth
