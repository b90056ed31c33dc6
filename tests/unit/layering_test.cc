// Layers only point down: a folder of src/ includes only the folders below it (docs/design-notes.md,
// "Layers"). The public headers (include/hearth/) are plain types every layer may use. A new
// folder must be given its place here, or the third test fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Bottom to top; each folder with the folders it may include.
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> rules = {
      {"core", {}},
      {"gguf", {"core"}},
      {"backend", {"core"}},  // backend/cpu: thread pool, ISA dispatch, kernels
      {"text", {"core", "gguf"}},
      {"sampling", {"core"}},
      {"eval", {"core"}},
      {"ops", {"core", "backend"}},
      {"sparse", {"core", "gguf", "backend", "ops"}},
      {"device", {"core", "gguf", "backend", "ops", "sparse"}},
      {"model", {"core", "gguf", "backend", "ops", "sparse", "device", "text"}},
      {"calib", {"core", "gguf", "backend", "ops", "sparse", "device", "model", "text", "eval"}},
      {"server",
       {"core", "gguf", "backend", "ops", "sparse", "device", "model", "text", "sampling", "eval"}},
  };
  return rules;
}

// "folder/file.h: includes higher/x.h" for every include of `text` (a file of `folder`) that
// points to a folder of src/ it may not use.
std::vector<std::string> upward_includes(const std::string& folder, const std::string& name,
                                         const std::string& text) {
  std::vector<std::string> out;
  const std::set<std::string>& ok = allowed().at(folder);
  std::istringstream lines(text);
  std::string line;
  const std::string directive = "#include \"";
  while (std::getline(lines, line)) {
    if (line.rfind(directive, 0) != 0) continue;
    const std::string path = line.substr(directive.size(), line.find('"', directive.size()) -
                                                               directive.size());
    const size_t slash = path.find('/');
    if (slash == std::string::npos) continue;
    const std::string target = path.substr(0, slash);
    if (target == folder || target == "hearth" || ok.count(target)) continue;
    if (!allowed().count(target)) continue;  // not a folder of src/ (e.g. a generated file)
    out.push_back(name + ": includes " + path);
  }
  return out;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Layering, NoFolderOfSrcIncludesAHigherOne) {
  const fs::path src = fs::path(HEARTH_SOURCE_DIR) / "src";
  std::vector<std::string> bad;
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(src)) {
    if (!e.is_regular_file()) continue;
    const std::string ext = e.path().extension().string();
    if (ext != ".h" && ext != ".cc" && ext != ".cu" && ext != ".cuh") continue;
    const std::string rel = fs::relative(e.path(), src).generic_string();
    const std::string folder = rel.substr(0, rel.find('/'));
    ASSERT_TRUE(allowed().count(folder)) << "src/" << folder << " has no place in the layers";
    for (std::string& v : upward_includes(folder, rel, read_all(e.path()))) bad.push_back(v);
    ++files;
  }
  EXPECT_GT(files, 100u);
  std::string all;
  for (const std::string& b : bad) all += b + "\n";
  EXPECT_TRUE(bad.empty()) << all;
}

TEST(Layering, TheCheckSeesAnUpwardInclude) {
  const std::string text = "#include <vector>\n#include \"ops/norm.h\"\n#include \"model/x.h\"\n";
  const auto bad = upward_includes("sparse", "sparse/a.cc", text);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0], "sparse/a.cc: includes model/x.h");
  EXPECT_TRUE(upward_includes("model", "model/a.cc", text).empty());
}

TEST(Layering, EveryFolderOfSrcHasAPlace) {
  for (const auto& e : fs::directory_iterator(fs::path(HEARTH_SOURCE_DIR) / "src")) {
    if (e.is_directory()) {
      EXPECT_TRUE(allowed().count(e.path().filename().string())) << e.path();
    }
  }
}

}  // namespace
