// End-to-end tests of `hedgedb export-images / ingest-images / query-image`:
// the real bin/hedgedb runs as a subprocess on PNG and JPEG files it wrote
// from Fashion-MNIST composites, with a tiny model trained by `hedgedb train`.
// Bad images (truncated, missing, garbage, wrong size or channels) must fail
// with a message naming the file and leave the collection unchanged under
// --on-error abort, and be reported and skipped under --on-error skip.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"

namespace hedgedb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Output : cli_testing::CliRun {
  // Every non-empty stdout line as JSON (discarded where a line is not JSON).
  std::vector<json> Lines() const { return cli_testing::JsonLines(out, /*strict=*/false); }
  json Last() const {
    const std::vector<json> lines = Lines();
    return lines.empty() ? json() : lines.back();
  }
};

std::string Slurp(const std::string& path) { return cli_testing::ReadWholeFile(path); }

void Spit(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

using cli_testing::Lowercase;

// A binary PGM (gray) or PPM (colour, channels that differ) of rows x cols
// pixels: images of the wrong size or channel count that OpenCV reads fine.
std::string NetPbm(bool colour, int rows, int cols) {
  std::string bytes = std::string(colour ? "P6" : "P5") + "\n" + std::to_string(cols) + " " +
                      std::to_string(rows) + "\n255\n";
  const int samples = rows * cols * (colour ? 3 : 1);
  for (int i = 0; i < samples; ++i) bytes.push_back(static_cast<char>((i * 37) % 256));
  return bytes;
}

void PutBigEndian32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

// Data flags shared by train and export-images: a small composite data set.
const std::vector<std::string> kDataFlags = {
    "--data", "fashion-mnist", "--items", "2", "--train-total", "2000", "--test-total", "400"};

class ImageCliTest : public ::testing::Test {
 protected:
  // One model and one set of exported images for all tests (training and
  // data loading dominate the run time).
  static void SetUpTestSuite() {
    std::string pattern = (fs::temp_directory_path() / "hedgedb_image_cli.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    shared_ = pattern;
    std::vector<std::string> train = {"train",
                                      "--method",
                                      "hib",
                                      "--dim",
                                      "2",
                                      "--iterations",
                                      "20",
                                      "--batch-size",
                                      "32",
                                      "--conv1",
                                      "4",
                                      "--conv2",
                                      "8",
                                      "--cnn-hidden",
                                      "16",
                                      "--val-fraction",
                                      "0",
                                      "--threads",
                                      "2",
                                      "--seed",
                                      "1",
                                      "--out",
                                      Shared("model.hdbm")};
    train.insert(train.end(), kDataFlags.begin(), kDataFlags.end());
    const Output trained = RunIn(shared_, train);
    ASSERT_EQ(trained.exit_code, 0) << trained.err;
    Spit(Shared("train.json"), trained.Last().dump());
    auto export_images = [](const std::vector<std::string>& extra) {
      std::vector<std::string> args = {"export-images", "--split", "test"};
      args.insert(args.end(), kDataFlags.begin(), kDataFlags.end());
      args.insert(args.end(), extra.begin(), extra.end());
      const Output r = RunIn(shared_, args);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      return r.Last();
    };
    const json gallery = export_images({"--count", "24", "--out", Shared("gallery")});
    EXPECT_EQ(gallery["written"], 24);
    EXPECT_EQ(gallery["shape"], json::array({1, 28, 56}));
    export_images({"--offset", "24", "--count", "6", "--format", "jpg", "--out", Shared("jpegs")});
    export_images({"--offset", "30", "--count", "6", "--out", Shared("clean")});
    export_images({"--offset", "30", "--count", "6", "--corrupt", "--out", Shared("occluded")});
  }
  static void TearDownTestSuite() { fs::remove_all(shared_); }

  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "hedgedb_image_cli_case.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    db_ = Path("db");
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Shared(const std::string& name) { return (fs::path(shared_) / name).string(); }
  std::string Path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  static Output RunIn(const std::string& dir, const std::vector<std::string>& args) {
    Output r;
    static_cast<cli_testing::CliRun&>(r) = cli_testing::RunHedgedb(dir, args);
    return r;
  }
  Output Run(const std::vector<std::string>& args) const { return RunIn(dir_, args); }

  static std::string Describe(const std::vector<std::string>& args, const Output& r) {
    return cli_testing::DescribeRun(args, r);
  }

  json Ok(const std::vector<std::string>& args) const {
    const Output r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << Describe(args, r);
    return r.Last();
  }

  // Expects exit code 1, "hedgedb: error:" and every needle in stderr.
  Output Fails(const std::vector<std::string>& args,
               const std::vector<std::string>& needles) const {
    const Output r = Run(args);
    EXPECT_EQ(r.exit_code, 1) << Describe(args, r);
    EXPECT_NE(r.err.find("hedgedb: error: "), std::string::npos) << Describe(args, r);
    for (const auto& needle : needles) {
      EXPECT_NE(Lowercase(r.err).find(Lowercase(needle)), std::string::npos)
          << "missing '" << needle << "' in\n"
          << Describe(args, r);
    }
    return r;
  }

  std::vector<std::string> Ingest(const std::string& collection,
                                  const std::vector<std::string>& source) const {
    std::vector<std::string> args = {"ingest-images",      "--db",         db_,
                                     "--collection",       collection,     "--model",
                                     Shared("model.hdbm"), "--batch-size", "8"};
    args.insert(args.end(), source.begin(), source.end());
    return args;
  }
  std::vector<std::string> Query(const std::vector<std::string>& rest) const {
    std::vector<std::string> args = {
        "query-image", "--db", db_, "--collection", "images", "--model", Shared("model.hdbm")};
    args.insert(args.end(), rest.begin(), rest.end());
    return args;
  }
  int64_t Items(const std::string& collection) const {
    return Ok({"stats", "--db", db_, "--collection", collection})["items"].get<int64_t>();
  }
  std::vector<std::string> Collections() const {
    return Ok({"list", "--db", db_})["collections"].get<std::vector<std::string>>();
  }

  // The files under `dir` (recursively), sorted.
  static std::vector<std::string> FilesUnder(const std::string& dir) {
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.is_regular_file()) files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    return files;
  }
  static std::vector<std::string> GalleryFiles() { return FilesUnder(Shared("gallery")); }

  // A copy of the gallery plus `bad` files (name -> bytes).
  std::string GalleryWith(const std::vector<std::pair<std::string, std::string>>& bad) const {
    const std::string dir = Path("mixed");
    fs::copy(Shared("gallery"), dir, fs::copy_options::recursive);
    for (const auto& [name, bytes] : bad) Spit(dir + "/" + name, bytes);
    return dir;
  }

  static std::string shared_;
  std::string dir_, db_;
};

std::string ImageCliTest::shared_;

TEST_F(ImageCliTest, IngestPngAndJpegThenQuery) {
  json r = Ok(Ingest("images", {"--dir", Shared("gallery")}));
  EXPECT_EQ(r["created"], true);
  EXPECT_EQ(r["ingested"], 24);
  EXPECT_EQ(r["first_id"], 0);
  EXPECT_EQ(r["last_id"], 23);
  EXPECT_EQ(r["batches"], 3);
  EXPECT_EQ(r["skipped"], json::array());
  {
    // The progress lines (stderr is not a terminal: one line a stage) print
    // a rate only over half a second or more, so it is at most 2 x images;
    // a stage that ends at once printed millions a second.
    const Output jpegs = Run(Ingest("images", {"--dir", Shared("jpegs")}));
    ASSERT_EQ(jpegs.exit_code, 0) << jpegs.err;
    r = json::parse(jpegs.out);
    const std::regex line(R"(\] (\d+)/\d+ images (\d+)/s)");
    int lines = 0;
    for (std::sregex_iterator it(jpegs.err.begin(), jpegs.err.end(), line), end; it != end;
         ++it, ++lines) {
      EXPECT_LE(std::stod((*it)[2]), 2.0 * std::stod((*it)[1])) << jpegs.err;
    }
    EXPECT_NE(jpegs.err.find("6/6 images"), std::string::npos) << jpegs.err;
    std::printf("progress lines with a rate: %d\n", lines);
  }
  EXPECT_EQ(r["created"], false);
  EXPECT_EQ(r["ingested"], 6);
  EXPECT_EQ(r["first_id"], 24);
  EXPECT_EQ(Items("images"), 30);

  // The collection was made from the model: kind, dimension, learned a and b.
  const json stats = Ok({"stats", "--db", db_, "--collection", "images"});
  const json model = json::parse(Slurp(Shared("train.json")));
  EXPECT_EQ(stats["kind"], "gaussian") << stats;
  EXPECT_EQ(stats["dim"], 2) << stats;
  EXPECT_EQ(stats["match_a"], model["create_flags"]["match-a"]) << stats;
  EXPECT_EQ(stats["match_b"], model["create_flags"]["match-b"]) << stats;

  // Payloads keep the path and the class folder name.
  const json got = Ok({"get", "--db", db_, "--collection", "images", "--id", "0"});
  const json payload = json::parse(got["payload"].get<std::string>());
  const std::string first = GalleryFiles().front();
  EXPECT_EQ(payload["path"], first);
  EXPECT_EQ(payload["label_name"], fs::path(first).parent_path().filename().string());
  EXPECT_EQ(got["label"], std::stoll(payload["label_name"].get<std::string>()));

  // JSON: one line per query image, k results with path and uncertainty.
  const std::vector<std::string> queries = {first, GalleryFiles()[5]};
  Output out = Run(Query({"--k", "5", queries[0], queries[1]}));
  ASSERT_EQ(out.exit_code, 0) << out.err;
  std::vector<json> lines = out.Lines();
  ASSERT_EQ(lines.size(), 2u) << out.out;
  for (size_t q = 0; q < 2; ++q) {
    const json& line = lines[q];
    EXPECT_EQ(line["query"], q);
    EXPECT_EQ(line["image"], queries[q]);
    const double eta = line["query_uncertainty"].get<double>();
    EXPECT_GT(eta, 0.0);
    EXPECT_LT(eta, 1.0);
    ASSERT_EQ(line["results"].size(), 5u);
    bool found_itself = false;
    double previous = 2.0;
    for (const json& hit : line["results"]) {
      EXPECT_TRUE(fs::exists(hit["path"].get<std::string>())) << hit;
      EXPECT_TRUE(hit.contains("uncertainty")) << hit;
      EXPECT_LE(hit["score"].get<double>(), previous);
      previous = hit["score"].get<double>();
      found_itself = found_itself || hit["path"] == queries[q];
    }
    // The query image is in the collection: it is among its own best matches.
    EXPECT_TRUE(found_itself) << line;
  }

  // --exclude-self drops the query's own image and still returns k results.
  out = Run(Query({"--k", "3", "--exclude-self", "--exhaustive", queries[0]}));
  ASSERT_EQ(out.exit_code, 0) << out.err;
  const json excluded = out.Last();
  ASSERT_EQ(excluded["results"].size(), 3u);
  for (const json& hit : excluded["results"]) EXPECT_NE(hit["path"], queries[0]);

  // The search knobs are those of `search`: FAISS nprobe, oversampling, and
  // no uncertainty when it is not wanted.
  out = Run(
      Query({"--k", "2", "--nprobe", "4", "--oversampling", "3", "--no-uncertainty", queries[0]}));
  ASSERT_EQ(out.exit_code, 0) << out.err;
  const json plain = out.Last();
  EXPECT_FALSE(plain.contains("query_uncertainty")) << plain;
  ASSERT_EQ(plain["results"].size(), 2u);
  EXPECT_FALSE(plain["results"][0].contains("uncertainty")) << plain;
  out = Run(Query({"--k", "2", "--score", "nonsense", queries[0]}));
  EXPECT_EQ(out.exit_code, 2) << out.err;

  // Table: readable, with the score column, the paths and a summary line.
  out = Run(Query({"--format", "table", "--k", "2", queries[0]}));
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_NE(out.out.find("query 0"), std::string::npos) << out.out;
  // The raw score is not labelled as a probability; prob is the calibrated one.
  EXPECT_NE(out.out.find("raw mc"), std::string::npos) << out.out;
  EXPECT_EQ(out.out.find("match_prob"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find(fs::path(queries[0]).filename().string()), std::string::npos);
  EXPECT_NE(out.out.find("1 query, mean query uncertainty"), std::string::npos) << out.out;

  // Summary of labelled queries (class folders): recall and mean uncertainty
  // of clean and occluded twins.
  const json clean = Ok(Query({"--format", "summary", "--dir", Shared("clean")}));
  const json occluded = Ok(Query({"--format", "summary", "--dir", Shared("occluded")}));
  for (const json& s : {clean, occluded}) {
    EXPECT_EQ(s["queries"], 6);
    EXPECT_EQ(s["labelled_queries"], 6);
    EXPECT_GE(s["recall_at_1"].get<double>(), 0.0);
    EXPECT_LE(s["recall_at_1"].get<double>(), s["recall_at_5"].get<double>());
    EXPECT_GT(s["mean_query_uncertainty"].get<double>(), 0.0);
  }
  EXPECT_NE(clean["mean_query_uncertainty"], occluded["mean_query_uncertainty"]);
}

TEST_F(ImageCliTest, OcclusionListDescribesTheOccludedTwins) {
  EXPECT_FALSE(fs::exists(Shared("clean/occlusion.csv")));
  std::istringstream csv(Slurp(Shared("occluded/occlusion.csv")));
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(line, "path,label,hidden_fraction");
  int rows = 0, hidden = 0;
  while (std::getline(csv, line)) {
    ++rows;
    const size_t c1 = line.find(','), c2 = line.rfind(',');
    ASSERT_NE(c1, c2) << line;
    const std::string path = line.substr(0, c1);
    EXPECT_EQ(line.substr(c1 + 1, c2 - c1 - 1), fs::path(path).parent_path().string()) << line;
    const double fraction = std::stod(line.substr(c2 + 1));
    EXPECT_GE(fraction, 0.0) << line;
    EXPECT_LE(fraction, 1.0) << line;
    // The clean twin has the same name; hidden foreground means other pixels.
    const std::string occluded = Slurp(Shared("occluded/" + path));
    const std::string clean = Slurp(Shared("clean/" + path));
    if (fraction > 0) {
      ++hidden;
      EXPECT_NE(occluded, clean) << line;
    } else {
      EXPECT_EQ(occluded, clean) << line;
    }
  }
  EXPECT_EQ(rows, 6);
  EXPECT_GT(hidden, 0);
}

TEST_F(ImageCliTest, Cub200LayoutIngestAndRecallAtK) {
  // A CUB-200-2011 root in the official layout: class 1 trains, 101 and 102
  // test (the class-disjoint split); real JPEG files.
  const std::string root = Path("CUB_200_2011");
  const std::vector<std::string> jpegs = FilesUnder(Shared("jpegs"));
  ASSERT_EQ(jpegs.size(), 6u);
  std::string images, labels, boxes;
  const std::vector<std::pair<int, std::string>> classes = {{1, "001.Black_footed_Albatross"},
                                                            {101, "101.White_Pelican"},
                                                            {102, "102.Western_Wood_Pewee"}};
  int id = 0;
  for (const auto& [label, name] : classes) {
    for (int i = 0; i < (label == 1 ? 2 : 3); ++i) {
      ++id;
      const std::string relative = name + "/" + name.substr(4) + "_" + std::to_string(id) + ".jpg";
      fs::create_directories(fs::path(root) / "images" / name);
      fs::copy_file(jpegs[(id - 1) % jpegs.size()], fs::path(root) / "images" / relative);
      images += std::to_string(id) + " " + relative + "\n";
      labels += std::to_string(id) + " " + std::to_string(label) + "\n";
      boxes += std::to_string(id) + (id == 4 ? " 2.0 1.0 40.0 20.0\n" : " 0.0 0.0 56.0 28.0\n");
    }
  }
  Spit(root + "/images.txt", images);
  Spit(root + "/image_class_labels.txt", labels);
  Spit(root + "/bounding_boxes.txt", boxes);
  Spit(root + "/classes.txt",
       "1 001.Black_footed_Albatross\n101 101.White_Pelican\n102 102.Western_Wood_Pewee\n");

  // The test split (default): 6 images; payloads keep the path and class name.
  json r = Ok(Ingest("cub", {"--cub", root, "--bbox", "--fit", "resize"}));
  EXPECT_EQ(r["ingested"], 6) << r;
  const json got = Ok({"get", "--db", db_, "--collection", "cub", "--id", "0"});
  EXPECT_EQ(got["label"], 101);
  const json payload = json::parse(got["payload"].get<std::string>());
  EXPECT_EQ(payload["label_name"], "101.White_Pelican");
  EXPECT_TRUE(fs::exists(payload["path"].get<std::string>())) << payload;
  r = Ok(Ingest("cub_train", {"--cub", root, "--split", "train", "--fit", "resize"}));
  EXPECT_EQ(r["ingested"], 2) << r;

  // Recall@1, 2, 4 of every test image against the others (itself left out).
  const json summary = Ok({"query-image", "--db", db_, "--collection", "cub", "--model",
                           Shared("model.hdbm"), "--cub", root, "--bbox", "--fit", "resize",
                           "--exclude-self", "--k", "4", "--format", "summary"});
  EXPECT_EQ(summary["labelled_queries"], 6) << summary;
  for (const char* key : {"recall_at_1", "recall_at_2", "recall_at_4"}) {
    ASSERT_TRUE(summary.contains(key)) << summary;
  }
  EXPECT_LE(summary["recall_at_1"].get<double>(), summary["recall_at_2"].get<double>());
  EXPECT_LE(summary["recall_at_2"].get<double>(), summary["recall_at_4"].get<double>());
  // Each class has two other images among 5 candidates: k = 4 always finds one.
  EXPECT_DOUBLE_EQ(summary["recall_at_4"].get<double>(), 1.0) << summary;

  // Errors: a missing root names it; two sources at once is a usage error.
  Fails(Ingest("cub", {"--cub", Path("no_such_root"), "--fit", "resize"}), {"no_such_root"});
  // --data cub:ROOT is the same flag as --cub ROOT (as on train/evaluate).
  Fails(Ingest("cub", {"--data", "cub:" + Path("no_such_root2"), "--fit", "resize"}),
        {"no_such_root2"});
  const Output twice = Run(Ingest("cub", {"--cub", root, "--data", "cub:" + root}));
  EXPECT_EQ(twice.exit_code, 2) << twice.err;
  const Output both = Run(Ingest("cub", {"--cub", root, "--dir", Shared("gallery")}));
  EXPECT_EQ(both.exit_code, 2) << both.err;
  // --split and --bbox mean nothing for sources without classes or boxes.
  for (const char* flag : {"--split", "--bbox"}) {
    std::vector<std::string> rest = {"--dir", Shared("gallery"), flag};
    if (std::string(flag) == "--split") rest.push_back("train");
    const Output r = Run(Ingest("cub", rest));
    EXPECT_EQ(r.exit_code, 2) << flag << "\n" << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  }
  EXPECT_EQ(Items("cub"), 6);
}

TEST_F(ImageCliTest, AbortLeavesTheCollectionUnchanged) {
  Ok(Ingest("images", {"--dir", Shared("jpegs")}));
  ASSERT_EQ(Items("images"), 6);
  const std::string png = Slurp(GalleryFiles().front());
  const std::string jpg = Slurp(FilesUnder(Shared("jpegs")).front());
  ASSERT_FALSE(jpg.empty());

  struct Case {
    std::string file, bytes;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"5/cut.png", png.substr(0, png.size() / 2), {"cut.png", "truncated"}},
      {"5/cut.jpg", jpg.substr(0, jpg.size() - 40), {"cut.jpg", "truncated"}},
      {"5/noise.png", std::string(200, '\x42'), {"noise.png", "not a readable image"}},
      {"5/small.pgm",
       NetPbm(false, 28, 28),
       {"small.pgm", "28 x 28", "28 x 56", "(--fit resize or crop converts it)"}},
      {"5/colour.ppm",
       NetPbm(true, 28, 56),
       {"colour.ppm", "3 channels", "1 channel", "(--fit resize or crop converts it)"}},
  };
  for (Case c : cases) {
    SCOPED_TRACE(c.file);
    // The library's hint names its option (skip_bad_images); the command
    // names its flag.
    c.needles.push_back("skipping bad images (--on-error skip) ingests the others");
    const std::string dir = GalleryWith({{c.file, c.bytes}});
    Fails(Ingest("images", {"--dir", dir}), c.needles);
    Fails(Ingest("fresh", {"--dir", dir}), c.needles);
    fs::remove_all(dir);
  }
  // Nothing of any batch was written; the new collection was not created.
  EXPECT_EQ(Items("images"), 6);
  EXPECT_EQ(Collections(), std::vector<std::string>{"images"});

  // A missing file in a list: named, nothing written.
  std::string list;
  for (const std::string& f : GalleryFiles()) list += f + ",1\n";
  list += Path("gone.png") + ",1\n";
  Spit(Path("list.csv"), list);
  Fails(Ingest("images", {"--list", Path("list.csv")}), {Path("gone.png"), "no such file"});
  EXPECT_EQ(Items("images"), 6);

  // A database that did not exist is not created by a failed ingest.
  const std::string dir = GalleryWith({{"1/bad.png", "junk"}});
  const std::vector<std::string> args = {"ingest-images",      "--db",  Path("newdb"),
                                         "--collection",       "c",     "--model",
                                         Shared("model.hdbm"), "--dir", dir};
  Fails(args, {"bad.png"});
  EXPECT_FALSE(fs::exists(Path("newdb")));

  // Query images fail the same way, naming the file.
  Fails(Query({Path("gone.png")}), {"gone.png", "no such file"});
  Spit(Path("small.pgm"), NetPbm(false, 28, 28));
  Fails(Query({Path("small.pgm")}),
        {"small.pgm", "28 x 28", "(--fit resize or crop converts it)",
         "(skipping bad images (--on-error skip) answers the other queries)"});

  // --on-error skip reports them and answers the good query between them.
  const std::string good = GalleryFiles().front();
  Output out =
      Run(Query({"--on-error", "skip", "--k", "2", Path("gone.png"), good, Path("small.pgm")}));
  ASSERT_EQ(out.exit_code, 0) << out.err;
  const std::vector<json> lines = out.Lines();
  ASSERT_EQ(lines.size(), 3u) << out.out;
  int answered = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const json& line = lines[i];
    EXPECT_EQ(line["query"], i) << "skipped queries are reported in their place: " << out.out;
    if (line.contains("error")) {
      EXPECT_FALSE(line.contains("results")) << line;
      EXPECT_NE(line["error"].get<std::string>().find(line["image"].get<std::string>()),
                std::string::npos)
          << line;
    } else {
      ++answered;
      EXPECT_EQ(line["image"], good);
      EXPECT_EQ(line["results"].size(), 2u);
    }
  }
  EXPECT_EQ(answered, 1);
  EXPECT_NE(out.err.find("skipped"), std::string::npos) << out.err;
  const json summary = Ok(Query(
      {"--on-error", "skip", "--format", "summary", "--no-progress", Path("gone.png"), good}));
  EXPECT_EQ(summary["queries"], 1) << summary;
  EXPECT_EQ(summary["skipped"], 1) << summary;
  // Nothing answered at all is a failure.
  Fails(Query({"--on-error", "skip", Path("gone.png")}), {"none of the 1 query images"});
}

TEST_F(ImageCliTest, SkipReportsAndIngestsTheRest) {
  const std::string png = Slurp(GalleryFiles().front());
  const std::string dir = GalleryWith({{"5/cut.png", png.substr(0, png.size() / 3)},
                                       {"5/small.pgm", NetPbm(false, 28, 28)},
                                       {"6/colour.ppm", NetPbm(true, 28, 56)}});
  std::vector<std::string> args = Ingest("images", {"--dir", dir, "--on-error", "skip"});
  const Output r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << Describe(args, r);
  const json summary = r.Last();
  EXPECT_EQ(summary["images"], 27);
  EXPECT_EQ(summary["ingested"], 24);
  ASSERT_EQ(summary["skipped"].size(), 3u) << summary;
  std::string skipped_text = summary["skipped"].dump();
  for (const char* name : {"cut.png", "small.pgm", "colour.ppm"}) {
    EXPECT_NE(skipped_text.find(name), std::string::npos) << skipped_text;
    EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
  }
  // The skipped images' errors name the flag, in the summary and on stderr.
  EXPECT_NE(skipped_text.find("(--fit resize or crop converts it)"), std::string::npos)
      << skipped_text;
  EXPECT_NE(r.err.find("(--fit resize or crop converts it)"), std::string::npos) << r.err;
  EXPECT_EQ(skipped_text.find("(fit resize"), std::string::npos) << skipped_text;
  EXPECT_EQ(Items("images"), 24);

  // --fit resize converts what exact rejects: only the truncated file is left.
  args = Ingest("resized", {"--dir", dir, "--on-error", "skip", "--fit", "resize"});
  const json resized = Ok(args);
  EXPECT_EQ(resized["ingested"], 26);
  ASSERT_EQ(resized["skipped"].size(), 1u);
  EXPECT_NE(resized["skipped"][0]["image"].get<std::string>().find("cut.png"), std::string::npos);

  // No image of the model's size: the hint is another fit, not skipping.
  const std::string all_small = Path("all_small");
  Spit(all_small + "/small.pgm", NetPbm(false, 28, 28));
  Fails(Ingest("none", {"--dir", all_small}),
        {"no image can be used as it is: --fit resize or --fit crop fits images of other sizes "
         "to the model"});

  // Every image bad: a failure, nothing created.
  const std::string all_bad = Path("all_bad");
  Spit(all_bad + "/x.png", "junk");
  Fails(Ingest("none", {"--dir", all_bad, "--on-error", "skip"}), {"none of the 1 images"});
  EXPECT_EQ(Collections(), (std::vector<std::string>{"images", "resized"}));
}

TEST_F(ImageCliTest, IdxSourceAndListLabels) {
  // A hand-written IDX pair: 3 images of 28 x 56, labels 4, 4, 9.
  std::string images, labels;
  PutBigEndian32(&images, 2051);
  for (uint32_t v : {3u, 28u, 56u}) PutBigEndian32(&images, v);
  for (int i = 0; i < 3 * 28 * 56; ++i) images.push_back(static_cast<char>((i * 7) % 251));
  PutBigEndian32(&labels, 2049);
  PutBigEndian32(&labels, 3);
  labels += std::string("\x04\x04\x09", 3);
  Spit(Path("i.idx"), images);
  Spit(Path("l.idx"), labels);
  json r = Ok(Ingest("images", {"--idx", Path("i.idx") + "," + Path("l.idx")}));
  EXPECT_EQ(r["ingested"], 3);
  const json got = Ok({"get", "--db", db_, "--collection", "images", "--id", "2"});
  EXPECT_EQ(got["label"], 9);
  const json payload = json::parse(got["payload"].get<std::string>());
  EXPECT_EQ(payload["path"], Path("i.idx"));
  EXPECT_EQ(payload["index"], 2);
  // Query results name the IDX file and index.
  const json hit = Ok(Query({"--k", "1", "--idx", Path("i.idx")}))["results"][0];
  EXPECT_EQ(hit["path"], Path("i.idx"));
  EXPECT_TRUE(hit.contains("index"));
  // Labels of a count that does not match the images.
  labels[7] = 2;
  Spit(Path("l2.idx"), labels.substr(0, 10));
  Fails(Ingest("images", {"--idx", Path("i.idx") + "," + Path("l2.idx")}), {"l2.idx"});

  // A list file with names as labels (stable across ingests) and a relative path.
  const std::string gallery_file = GalleryFiles().front();
  Spit(Path("lists/rel.png"), Slurp(gallery_file));
  Spit(Path("lists/l.csv"), "rel.png,sneaker\n" + gallery_file + ",sneaker\n");
  r = Ok(Ingest("named", {"--list", Path("lists/l.csv")}));
  EXPECT_EQ(r["ingested"], 2);
  const json a = Ok({"get", "--db", db_, "--collection", "named", "--id", "0"});
  const json b = Ok({"get", "--db", db_, "--collection", "named", "--id", "1"});
  EXPECT_EQ(a["label"], b["label"]);
  EXPECT_EQ(json::parse(a["payload"].get<std::string>())["path"], Path("lists/rel.png"));
}

TEST_F(ImageCliTest, UsageAndMismatchErrors) {
  // A collection of another kind or dimension is not filled with this model.
  Ok({"create", "--db", db_, "--collection", "points", "--kind", "point", "--dim", "2"});
  Fails(Ingest("points", {"--dir", Shared("jpegs")}), {"points", "does not match", "model"});
  Ok({"create", "--db", db_, "--collection", "wide", "--kind", "gaussian", "--dim", "7"});
  Fails(Ingest("wide", {"--dir", Shared("jpegs")}), {"dim 7", "dim 2"});
  EXPECT_EQ(Items("wide"), 0);
  // No source, two sources, missing sources and models.
  Output r = Run(Ingest("images", {}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = Run(Ingest("images", {"--dir", Shared("jpegs"), "--list", Path("x.csv")}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  Fails(Ingest("images", {"--dir", Path("nowhere")}), {"nowhere", "no such directory"});
  Fails(Ingest("images", {"--list", Path("nowhere.csv")}), {"nowhere.csv"});
  Fails({"ingest-images", "--db", db_, "--collection", "c", "--model", Path("no.hdbm"), "--dir",
         Shared("jpegs")},
        {"no.hdbm"});
  r = Run(Ingest("images", {"--dir", Shared("jpegs"), "--on-error", "ignore"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // --help documents the error policy.
  r = Run({"ingest-images", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--on-error"), std::string::npos);
  EXPECT_NE(r.out.find("leaves the database unchanged"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hedgedb
