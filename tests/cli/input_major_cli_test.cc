// The CLI on a float file with model-wide thresholds, wide enough that threshold decode reads
// input-major copies: by default it holds only the copies (LoadOptions::input_major_only), and
// --keep-matrices, --mmap and --sparse dense give the same greedy text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "calib/calibrate.h"
#include "common/test_util.h"
#include "hearth/model.h"
#include "model/synth.h"

namespace hearth {
namespace {

std::string model_wide_f16() {
  SynthOptions so = test::tiny_synth_options(DType::F16);
  so.n_embd = 512;  // SessionOptions' input_major_min_width
  so.n_layer = 2;
  so.n_ff = 640;
  const std::string plain = test::temp_dir() + "/cli-plain-512.gguf";
  write_synthetic_model(so, plain);
  calib::CalibrationResult r;
  r.kind = calib::CalibKind::InputThresholds;
  r.report.kind = "thresholds";
  r.report.layers.resize(static_cast<size_t>(so.n_layer));
  for (sparse::CalibLayerReport& l : r.report.layers) l.freq.assign(640, 0.5f);
  r.thresholds.assign(
      static_cast<size_t>(so.n_layer),
      LayerThresholds{.attn_in = 0.4f, .attn_out = 0.01f, .ffn_in = 0.4f, .down = 0.002f});
  const std::string out = test::temp_dir() + "/cli-model-wide-512.gguf";
  calib::write_calibrated_model(*Model::load(plain), r, out);
  return out;
}

TEST(InputMajorCli, CopiesOnlyGiveTheSameText) {
  const std::string model = model_wide_f16();
  const auto text = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"run",    "-m", model, "-p", "one two three", "-n", "12",
                                     "--temp", "0",  "-t",  "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CommandResult r = test::run_hearth(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("sparse mode threshold"), std::string::npos) << r.err;
    return r.out;
  };
  const std::string held = text({});
  EXPECT_FALSE(held.empty());
  EXPECT_EQ(held, text({"--keep-matrices"}));
  EXPECT_EQ(held, text({"--mmap"}));
  EXPECT_EQ(held, text({"-b", "1"}));
  const test::CommandResult dense = test::run_hearth(
      {"run", "-m", model, "-p", "one two three", "-n", "12", "--temp", "0", "--sparse", "dense"});
  EXPECT_EQ(dense.exit_code, 0) << dense.err;
}

}  // namespace
}  // namespace hearth
