// hearth quantize on the real models of ../shared, perplexity on the first 60 chunks of 256 tokens
// of tinystories-eval.txt (seconds, not the minutes of the whole text; docs/benchmarks.md has the
// whole-text figures). The targets: q8_0 within 1% of the F32 original, q4_0 within 5%.
// q4_0 reaches it with the default mix alone (output, its tied token_embd copy, attn_v and, these
// models having grouped-query attention, attn_k at q8_0), and with an importance matrix of the
// calibration text on top (GPTQ with its Gram matrices). docs/benchmarks.md has the whole-text
// figures.
#include <gtest/gtest.h>

#include <string>

#include "common/test_util.h"
#include "core/dtype.h"
#include "gguf/gguf.h"

namespace hearth {
namespace {

double dense_perplexity(const std::string& model, const std::string& shared) {
  return test::cli_perplexity(model, shared + "/data/tinystories-eval.txt",
                              {"-c", "256", "--chunks", "60", "-t", "2", "--sparse", "dense"});
}

TEST(QuantizeGolden, StoriesPerplexityBounds) {
  HEARTH_REQUIRE_SHARED(shared);
  const std::string dir = test::temp_dir();
  for (const std::string name : {"stories260K", "stories260K-relu"}) {
    const std::string src = shared + "/models/" + name + ".gguf";
    const double base = dense_perplexity(src, shared);
    ASSERT_GT(base, 1.0) << name;
    const std::string imatrix = dir + "/" + name + ".imatrix.gguf";
    const auto im = test::run_hearth({"imatrix", "-m", src, "-f",
                                      shared + "/data/tinystories-calib.txt", "-o", imatrix,
                                      "--tokens", "32768", "-t", "2"});
    ASSERT_EQ(im.exit_code, 0) << im.err;
    struct Case {
      const char* type;
      bool with_imatrix;
      double bound;
    };
    for (const Case c : {Case{"q8_0", false, 1.01}, Case{"q4_0", true, 1.05},
                         Case{"q4_0", false, 1.05}}) {
      const std::string out = dir + "/" + name + "-" + c.type + (c.with_imatrix ? "-i" : "") + ".gguf";
      std::vector<std::string> args = {"quantize", src, out, c.type};
      if (c.with_imatrix) args.insert(args.end(), {"--imatrix", imatrix});
      const auto q = test::run_hearth(args);
      ASSERT_EQ(q.exit_code, 0) << q.err;
      // n_ff = 172 is not a multiple of 32: every ffn_down stays f16, and the report says so.
      EXPECT_NE(q.out.find("blk.4.ffn_down.weight: row length 172"), std::string::npos) << q.out;
      const auto f = gguf::GgufFile::open(out);
      if (std::string(c.type) == "q4_0") {
        // The mix: output, its tied copy token_embd, attn_v and attn_k (8 query heads, 4 KV
        // heads) at q8_0, reported with its cost.
        for (const char* t : {"output.weight", "token_embd.weight", "blk.2.attn_v.weight",
                              "blk.2.attn_k.weight"}) {
          EXPECT_EQ(f->find_tensor(t)->type, static_cast<uint32_t>(DType::Q8_0)) << t;
        }
        EXPECT_EQ(f->find_tensor("blk.2.attn_q.weight")->type, static_cast<uint32_t>(DType::Q4_0));
        EXPECT_NE(q.out.find("as q8_0 instead of q4_0: +43008 bytes"), std::string::npos) << q.out;
      }
      const double ppl = dense_perplexity(out, shared);
      EXPECT_LT(ppl, base * c.bound) << name << " " << c.type << ": " << ppl << " vs " << base;
      EXPECT_GT(ppl, base * 0.98) << name << " " << c.type;  // no suspicious "improvement" either
    }
  }
}

}  // namespace
}  // namespace hearth
