// The CUB-200-2011 workflow end to end, on a fixture in the official layout
// (images.txt, image_class_labels.txt, classes.txt, bounding_boxes.txt,
// images/<class>/<file>) with colour images of varying sizes: the paths that
// used to give a wrong benchmark number without a word.
//   - The model file carries its data settings: evaluate and embed need no
//     data flags, and a contradicting flag is an error naming both values.
//   - A subset with other class ids needs --class-split, and says so.
//   - ingest-images reads benchmark images as training did (--fit resize,
//     the model's --bbox), records how in the collection, and re-running it
//     adds nothing.
//   - query-image reads the queries as the gallery was read.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"

namespace hedgedb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void Spit(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// A colour PPM of rows x cols: the class sets the colour of a square inside
// the box (x0, y0, side); the rest is noise. Sizes vary per image, so only a
// fitting resize makes them the model's input.
std::string ClassImage(int label, int rows, int cols, int x0, int y0, int side, unsigned seed) {
  std::string bytes = "P6\n" + std::to_string(cols) + " " + std::to_string(rows) + "\n255\n";
  unsigned state = seed * 2654435761u + 1;
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) {
      const bool inside = x >= x0 && x < x0 + side && y >= y0 && y < y0 + side;
      for (int c = 0; c < 3; ++c) {
        state = state * 1103515245u + 12345u;
        const int noise = static_cast<int>((state >> 16) % 64);
        const int value = inside ? ((label * (c + 3) * 53) % 192) + noise : noise;
        bytes.push_back(static_cast<char>(value));
      }
    }
  }
  return bytes;
}

// A CUB root with `classes` (official ids), `per_class` images each.
void WriteCubRoot(const std::string& root, const std::vector<int>& classes, int per_class) {
  std::string images, labels, boxes, names;
  int id = 0;
  for (int label : classes) {
    char folder[64];
    std::snprintf(folder, sizeof(folder), "%03d.Bird_%d", label, label);
    names += std::to_string(label) + " " + folder + "\n";
    for (int i = 0; i < per_class; ++i) {
      ++id;
      const int rows = 30 + (id * 7) % 17, cols = 34 + (id * 5) % 19;
      const int x0 = 3 + id % 5, y0 = 2 + id % 4, side = 18;
      const std::string relative = std::string(folder) + "/Bird_" + std::to_string(id) + ".ppm";
      Spit(root + "/images/" + relative, ClassImage(label, rows, cols, x0, y0, side, id));
      images += std::to_string(id) + " " + relative + "\n";
      labels += std::to_string(id) + " " + std::to_string(label) + "\n";
      boxes += std::to_string(id) + " " + std::to_string(x0) + ".0 " + std::to_string(y0) + ".0 " +
               std::to_string(side) + ".0 " + std::to_string(side) + ".0\n";
    }
  }
  Spit(root + "/images.txt", images);
  Spit(root + "/image_class_labels.txt", labels);
  Spit(root + "/bounding_boxes.txt", boxes);
  Spit(root + "/classes.txt", names);
}

class BenchmarkCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string pattern = (fs::temp_directory_path() / "hedgedb_benchmark_cli.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    shared_ = pattern;
    // Classes 1-4 of 200: a subset, split 1-2 / 3-4 by --class-split 2.
    WriteCubRoot(Shared("CUB"), {1, 2, 3, 4}, 6);
    for (const auto& [model, bbox] : {std::pair{"boxes.hdbm", true}, {"whole.hdbm", false}}) {
      std::vector<std::string> train = {
          "train",      "--method",       "hib", "--cub",        Shared("CUB"), "--class-split",
          "2",          "--image-size",   "16",  "--arch",       "mlp",         "--mlp-hidden",
          "16",         "--dim",          "2",   "--iterations", "10",          "--batch-size",
          "8",          "--val-fraction", "0",   "--threads",    "2",           "--out",
          Shared(model)};
      if (bbox) train.push_back("--bbox");
      const cli_testing::CliRun r = cli_testing::RunHedgedb(shared_, train);
      ASSERT_EQ(r.exit_code, 0) << cli_testing::DescribeRun(train, r);
    }
  }
  static void TearDownTestSuite() { fs::remove_all(shared_); }

  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "hedgedb_benchmark_case.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    db_ = (fs::path(dir_) / "db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Shared(const std::string& name) { return (fs::path(shared_) / name).string(); }

  cli_testing::CliRun Run(const std::vector<std::string>& args) const {
    return cli_testing::RunHedgedb(dir_, args);
  }
  json Ok(const std::vector<std::string>& args) const {
    const cli_testing::CliRun r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << cli_testing::DescribeRun(args, r);
    const std::vector<json> lines = cli_testing::JsonLines(r.out, /*strict=*/false);
    return lines.empty() ? json() : lines.back();
  }
  // Expects `code` and every needle in stderr.
  void Fails(const std::vector<std::string>& args, int code,
             const std::vector<std::string>& needles) const {
    const cli_testing::CliRun r = Run(args);
    EXPECT_EQ(r.exit_code, code) << cli_testing::DescribeRun(args, r);
    for (const std::string& needle : needles) {
      EXPECT_NE(r.err.find(needle), std::string::npos) << "missing '" << needle << "' in\n"
                                                       << cli_testing::DescribeRun(args, r);
    }
  }
  std::vector<std::string> Ingest(const std::string& model, const std::string& collection,
                                  const std::vector<std::string>& rest) const {
    std::vector<std::string> args = {"ingest-images", "--db",    db_,           "--collection",
                                     collection,      "--model", Shared(model), "--no-progress"};
    args.insert(args.end(), rest.begin(), rest.end());
    return args;
  }
  std::vector<std::string> Query(const std::string& model, const std::string& collection,
                                 const std::vector<std::string>& rest) const {
    std::vector<std::string> args = {"query-image", "--db",    db_,           "--collection",
                                     collection,    "--model", Shared(model), "--no-progress",
                                     "--k",         "3"};
    args.insert(args.end(), rest.begin(), rest.end());
    return args;
  }
  int64_t Items(const std::string& collection) const {
    return Ok({"stats", "--db", db_, "--collection", collection})["items"].get<int64_t>();
  }

  static std::string shared_;
  std::string dir_, db_;
};

std::string BenchmarkCliTest::shared_;

TEST_F(BenchmarkCliTest, TheModelCarriesItsData) {
  // No data flags: the model's data set, image size, boxes and class split.
  const json report = Ok({"evaluate", "--model", Shared("boxes.hdbm"), "--max-items", "0", "--bins",
                          "3", "--threads", "2"});
  EXPECT_NE(report.dump().find("16 x 16, boxes"), std::string::npos) << report;
  const json embedded = Ok({"embed", "--model", Shared("boxes.hdbm"), "--out",
                            (fs::path(dir_) / "emb").string(), "--threads", "2"});
  EXPECT_EQ(embedded["items"], 12) << embedded;  // classes 3 and 4
  // A flag that contradicts the model names both values.
  Fails({"evaluate", "--model", Shared("boxes.hdbm"), "--image-size", "32"}, 2,
        {"--image-size 32", "--image-size 16", "boxes.hdbm"});
  Fails({"embed", "--model", Shared("whole.hdbm"), "--out", "x", "--bbox"}, 2,
        {"--bbox on", "--bbox off"});
  Fails({"evaluate", "--model", Shared("boxes.hdbm"), "--class-split", "3"}, 2,
        {"--class-split 3", "--class-split 2"});
  // The same value is no contradiction.
  Ok({"embed", "--model", Shared("boxes.hdbm"), "--out", (fs::path(dir_) / "e2").string(),
      "--image-size", "16", "--bbox", "--cub", Shared("CUB"), "--threads", "2"});
}

TEST_F(BenchmarkCliTest, SubsetsNeedAClassSplit) {
  // Classes 1-4 hold no image of the official test classes 101-200: the
  // error names the classes found and the flag.
  Fails({"train", "--method", "hib", "--cub", Shared("CUB"), "--out", "m.hdbm"}, 1,
        {"test split (classes 101-200)", "classes 1-4", "--class-split"});
  Fails(Ingest("boxes.hdbm", "g", {"--cub", Shared("CUB"), "--class-split", "200"}), 1,
        {"--class-split must be in [1, 199]"});
  Fails(Ingest("boxes.hdbm", "g", {"--dir", Shared("CUB/images"), "--class-split", "2"}), 2,
        {"--class-split"});
}

TEST_F(BenchmarkCliTest, IngestTwiceAddsNothing) {
  // No --fit, no --bbox: resize (as training read the images) and the
  // model's boxes; the collection records both.
  json r = Ok(Ingest("boxes.hdbm", "g", {"--cub", Shared("CUB")}));
  EXPECT_EQ(r["ingested"], 12) << r;
  EXPECT_EQ(r["created"], true);
  const json described = Ok({"stats", "--db", db_, "--collection", "g"});
  const json record = json::parse(described["metadata"].get<std::string>())["images"];
  EXPECT_EQ(record["fit"], "resize") << described;
  EXPECT_EQ(record["bbox"], true) << described;
  EXPECT_EQ(record["data_set"], "cub") << described;
  EXPECT_EQ(record["class_split"], 2) << described;

  r = Ok(Ingest("boxes.hdbm", "g", {"--cub", Shared("CUB")}));
  EXPECT_EQ(r["ingested"], 0) << r;
  EXPECT_EQ(r["already_present"], 12) << r;
  EXPECT_EQ(Items("g"), 12);
  Fails(Ingest("boxes.hdbm", "g", {"--cub", Shared("CUB"), "--existing", "refuse"}), 1,
        {"12 of the 12 images are in collection 'g' already", "nothing was ingested",
         "(--existing skip ingests only the new ones, --existing add adds them again)"});
  EXPECT_EQ(Items("g"), 12);
  // The train split is new: only it is added.
  r = Ok(Ingest("boxes.hdbm", "g", {"--cub", Shared("CUB"), "--split", "all"}));
  EXPECT_EQ(r["ingested"], 12) << r;
  EXPECT_EQ(r["already_present"], 12) << r;
  EXPECT_EQ(Items("g"), 24);
  r = Ok(Ingest("boxes.hdbm", "g", {"--cub", Shared("CUB"), "--existing", "add"}));
  EXPECT_EQ(r["ingested"], 12) << r;
  EXPECT_EQ(Items("g"), 36);
  // Embeddings of another model cannot join the collection, nor query it.
  Fails(Ingest("whole.hdbm", "g", {"--cub", Shared("CUB")}), 1,
        {"collection 'g' holds embeddings of another model", "boxes.hdbm", "whole.hdbm"});
  Fails(Query("whole.hdbm", "g", {"--cub", Shared("CUB")}), 1,
        {"holds embeddings of another model", "queries cannot be compared"});
  EXPECT_EQ(Items("g"), 36);
  // More images must be read as the collection's were.
  Fails(Ingest("boxes.hdbm", "g", {"--cub", Shared("CUB"), "--fit", "crop"}), 2,
        {"--fit crop", "collection 'g'", "--fit resize"});
}

TEST_F(BenchmarkCliTest, QueriesAreReadAsTheGalleryWas) {
  // A model trained on whole images, a gallery ingested with --bbox: the
  // collection's record makes the queries cropped too.
  Ok(Ingest("whole.hdbm", "g", {"--cub", Shared("CUB"), "--bbox"}));
  const cli_testing::CliRun implied = Run(Query("whole.hdbm", "g", {"--cub", Shared("CUB")}));
  const cli_testing::CliRun explicit_box =
      Run(Query("whole.hdbm", "g", {"--cub", Shared("CUB"), "--bbox"}));
  ASSERT_EQ(implied.exit_code, 0) << implied.err;
  ASSERT_EQ(explicit_box.exit_code, 0) << explicit_box.err;
  EXPECT_EQ(implied.out, explicit_box.out);
  // The same files read whole (a plain folder has no boxes) score otherwise.
  const cli_testing::CliRun whole =
      Run(Query("whole.hdbm", "g", {"--dir", Shared("CUB/images/003.Bird_3"), "--format", "json"}));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const json first_whole = cli_testing::JsonLines(whole.out, false).front();
  const json first_cropped = cli_testing::JsonLines(implied.out, false).front();
  ASSERT_EQ(first_whole["image"], first_cropped["image"]);
  EXPECT_NE(first_whole["results"][0]["score"], first_cropped["results"][0]["score"]);
  // Exit-self recall over the gallery runs without any reading flag.
  const json summary = Ok(
      Query("whole.hdbm", "g", {"--cub", Shared("CUB"), "--exclude-self", "--format", "summary"}));
  EXPECT_EQ(summary["labelled_queries"], 12) << summary;
}

TEST_F(BenchmarkCliTest, HelpNamesTheBenchmarkSources) {
  const cli_testing::CliRun query = Run({"query-image", "--help"});
  EXPECT_NE(query.out.find("--cub ROOT"), std::string::npos) << query.out;
  EXPECT_EQ(query.out.find("(and ingested)"), std::string::npos) << query.out;
  const cli_testing::CliRun ingest = Run({"ingest-images", "--help"});
  EXPECT_NE(ingest.out.find("--existing"), std::string::npos) << ingest.out;
  EXPECT_NE(ingest.out.find("--class-split"), std::string::npos) << ingest.out;
  EXPECT_NE(ingest.out.find("folder:ROOT"), std::string::npos) << ingest.out;
}

// A user's own photos: one folder per class (torchvision's ImageFolder
// layout, images of any size, nested folders allowed). The first half of the
// classes by name train, the rest test; train, evaluate, ingest and query
// read the same split, and the model carries the source.
TEST_F(BenchmarkCliTest, AFolderOfClassFoldersTrainsEvaluatesAndIngests) {
  const std::string root = (fs::path(dir_) / "photos").string();
  const std::vector<std::string> names = {"cat", "dog", "eel", "fox"};
  for (size_t c = 0; c < names.size(); ++c) {
    for (int i = 0; i < 6; ++i) {
      const int id = static_cast<int>(c) * 6 + i + 1;
      const std::string sub = i % 2 == 0 ? "" : "/more";  // nested: still the class's
      Spit(root + "/" + names[c] + sub + "/img" + std::to_string(i) + ".ppm",
           ClassImage(static_cast<int>(c) + 1, 30 + id % 9, 34 + id % 7, 4, 3, 18, id));
    }
  }
  Spit(root + "/dog/notes.txt", "not an image: ignored");
  const std::string model = (fs::path(dir_) / "photos.hdbm").string();
  const json trained = Ok({"train",
                           "--method",
                           "hib",
                           "--data",
                           "folder:" + root,
                           "--image-size",
                           "16",
                           "--arch",
                           "mlp",
                           "--mlp-hidden",
                           "16",
                           "--iterations",
                           "10",
                           "--batch-size",
                           "8",
                           "--val-fraction",
                           "0",
                           "--threads",
                           "2",
                           "--out",
                           model});
  EXPECT_NE(trained["data"].get<std::string>().find("image folder"), std::string::npos) << trained;
  // evaluate needs no data flags: the model names its folder. The test split
  // is eel and fox, 12 images.
  const json report =
      Ok({"evaluate", "--model", model, "--max-items", "0", "--bins", "3", "--threads", "2"});
  EXPECT_EQ(report["retrieval"]["clean"]["queries"], 12) << report.dump();
  EXPECT_EQ(report["retrieval"]["clean"]["queries_with_relevant"], 12) << report.dump();
  // The test split into a collection, with the class names as labels.
  Ok({"ingest-images", "--db", db_, "--collection", "photos", "--model", model, "--no-progress",
      "--data", "folder:" + root, "--split", "test"});
  EXPECT_EQ(Items("photos"), 12);
  const json summary = Ok({"query-image", "--db", db_, "--collection", "photos", "--model", model,
                           "--no-progress", "--k", "3", "--exclude-self", "--format", "summary",
                           "--data", "folder:" + root, "--split", "test"});
  EXPECT_EQ(summary["queries"], 12) << summary.dump();
  // --class-split 3: cat, dog and eel train; fox (6 images) is the test split.
  Ok({"ingest-images", "--db", db_, "--collection", "fox", "--model", model, "--no-progress",
      "--data", "folder:" + root, "--split", "test", "--class-split", "3"});
  EXPECT_EQ(Items("fox"), 6);
  // No boxes in a folder; a flat folder has no classes; one class is too few.
  Fails({"ingest-images", "--db", db_, "--collection", "b", "--model", model, "--data",
         "folder:" + root, "--bbox"},
        2, {"--bbox"});
  Spit((fs::path(dir_) / "flat/a.ppm").string(), ClassImage(1, 20, 20, 1, 1, 8, 1));
  Fails({"train", "--method", "hib", "--data", "folder:" + (fs::path(dir_) / "flat").string(),
         "--out", (fs::path(dir_) / "x.hdbm").string()},
        1, {"one subfolder per class"});
  Spit((fs::path(dir_) / "one/cat/a.ppm").string(), ClassImage(1, 20, 20, 1, 1, 8, 1));
  Fails({"train", "--method", "hib", "--data", "folder:" + (fs::path(dir_) / "one").string(),
         "--out", (fs::path(dir_) / "x.hdbm").string()},
        1, {"at least 2"});
}

}  // namespace
}  // namespace hedgedb
