// End-to-end tests of `hedgedb train / embed / evaluate`: the real bin/hedgedb
// runs as a subprocess; the embeddings it writes must go into `hedgedb
// create / ingest / search` exactly as printed, and bad input must fail with
// a clear message and a non-zero exit code.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "hedgedb/npy.h"

namespace hedgedb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Output : cli_testing::CliRun {
  json Json() const {
    const std::vector<json> lines = cli_testing::JsonLines(out, /*strict=*/false);
    return lines.empty() ? json(json::value_t::discarded) : lines.back();
  }
};

std::string Slurp(const std::string& path) { return cli_testing::ReadWholeFile(path); }

using cli_testing::Lowercase;

class EncoderCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "hedgedb_encoder_cli.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  Output Run(const std::vector<std::string>& args) {
    Output r;
    static_cast<cli_testing::CliRun&>(r) = cli_testing::RunHedgedb(dir_, args);
    return r;
  }

  static std::string Describe(const std::vector<std::string>& args, const Output& r) {
    return cli_testing::DescribeRun(args, r);
  }

  json Ok(const std::vector<std::string>& args) {
    const Output r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << Describe(args, r);
    return r.Json();
  }

  // Expects a failure with "hedgedb: error:" and every needle in stderr.
  void Fails(const std::vector<std::string>& args, const std::vector<std::string>& needles,
             int exit_code = -1) {
    const Output r = Run(args);
    EXPECT_NE(r.exit_code, 0) << Describe(args, r);
    if (exit_code >= 0) {
      EXPECT_EQ(r.exit_code, exit_code) << Describe(args, r);
    }
    EXPECT_EQ(r.err.find("hedgedb: error: "), 0u) << Describe(args, r);
    for (const auto& needle : needles) {
      EXPECT_NE(Lowercase(r.err).find(Lowercase(needle)), std::string::npos)
          << "missing '" << needle << "' in\n"
          << Describe(args, r);
    }
  }

  // 12 Gaussian clusters in 8-d, 30 items each: 6 train / 6 test classes.
  std::string WriteFeatures() {
    std::mt19937_64 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int classes = 12, per_class = 30, dim = 8;
    std::vector<float> centres(classes * dim), features;
    for (float& c : centres) c = normal(rng);
    std::vector<int64_t> labels;
    for (int i = 0; i < per_class; ++i) {
      for (int c = 0; c < classes; ++c) {
        for (int j = 0; j < dim; ++j) features.push_back(centres[c * dim + j] + 0.6f * normal(rng));
        labels.push_back(c);
      }
    }
    EXPECT_TRUE(WriteNpy(Path("f.npy"), MakeNpy(features, {classes * per_class, dim})).ok());
    EXPECT_TRUE(WriteNpy(Path("l.npy"), MakeNpy(labels, {classes * per_class})).ok());
    return "features:" + Path("f.npy") + "," + Path("l.npy");
  }

  std::vector<std::string> TrainArgs(const std::string& data, const std::string& method,
                                     const std::string& model) {
    return {"train", "--data",       data,       "--method",  method, "--iterations",
            "60",    "--mlp-hidden", "32",       "--threads", "1",    "--val-fraction",
            "0",     "--out",        Path(model)};
  }

  std::string dir_;
};

// train -> embed -> create (with the printed flags) -> ingest -> search, for
// each embedding kind.
// The encoder commands live in a module bin/hedgedb loads only to run one of
// them (tools/main.cc): --help lists them without it, each one's own --help
// loads it, and without the module they fail naming its file while the engine
// commands still run.
TEST_F(EncoderCliTest, EncoderCommandsComeFromTheirModule) {
  const Output listing = Run({"--help"});
  ASSERT_EQ(listing.exit_code, 0) << Describe({"--help"}, listing);
  Output r;
  for (const char* cmd :
       {"train", "embed", "evaluate", "ingest-images", "query-image", "export-images"}) {
    EXPECT_NE(listing.out.find(cmd), std::string::npos) << cmd << "\n" << listing.out;
    r = Run({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << Describe({cmd, "--help"}, r);
    EXPECT_NE(r.out.find("--"), std::string::npos) << cmd << "\n" << r.out;
  }
  r = Run({"train", "--help"});
  EXPECT_NE(r.out.find("--method"), std::string::npos) << r.out;

  // A copy of the executable alone: no module at its relative path.
  const std::string lone = Path("bin/hedgedb");
  fs::create_directories(Path("bin"));
  fs::copy_file(std::string(HEDGEDB_BIN_DIR) + "/hedgedb", lone);
  const auto run_lone = [&](const std::string& args) {
    const std::string command =
        "'" + lone + "' " + args + " > '" + Path("lone.out") + "' 2> '" + Path("lone.err") + "'";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run_lone("train --help"), 1);
  const std::string err = Slurp(Path("lone.err"));
  EXPECT_EQ(err.find("hedgedb: error: "), 0u) << err;
  EXPECT_NE(err.find(dir_), std::string::npos) << err;
  EXPECT_NE(err.find("libhedgedb_cli_encoders.so"), std::string::npos) << err;
  EXPECT_EQ(run_lone("list --help"), 0) << Slurp(Path("lone.err"));
  EXPECT_EQ(run_lone("--help"), 0) << Slurp(Path("lone.err"));
  EXPECT_NE(Slurp(Path("lone.out")).find("query-image"), std::string::npos);
}

TEST_F(EncoderCliTest, TrainEmbedIngestSearchEveryKind) {
  const std::string data = WriteFeatures();
  struct Case {
    const char* method;
    std::vector<std::string> extra;
    const char* kind;
  };
  const std::vector<Case> cases = {
      {"point", {}, "point"},
      {"hib", {}, "gaussian"},
      {"hib", {"--components", "2"}, "mog"},
      {"dimco", {"--code-dim", "4", "--code-k", "8"}, "codes"},
  };
  const std::string db = Path("db");
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& tc = cases[c];
    SCOPED_TRACE(tc.kind);
    const std::string model = std::string("m") + std::to_string(c) + ".model";
    std::vector<std::string> args = TrainArgs(data, tc.method, model);
    args.insert(args.end(), tc.extra.begin(), tc.extra.end());
    const json trained = Ok(args);
    ASSERT_TRUE(fs::exists(Path(model)));
    EXPECT_EQ(trained["kind"], tc.kind);
    EXPECT_EQ(trained["iterations"], 60);
    EXPECT_LT(trained["last_loss"].get<double>(), trained["first_loss"].get<double>());

    const std::string prefix = Path(std::string("e") + std::to_string(c));
    const json embedded =
        Ok({"embed", "--model", Path(model), "--data", data, "--split", "test", "--out", prefix});
    EXPECT_EQ(embedded["items"], 180);
    const json flags = embedded["create_flags"];
    EXPECT_EQ(flags["kind"], tc.kind);

    const std::string collection = std::string("c") + std::to_string(c);
    std::vector<std::string> create = {"create", "--db", db, "--collection", collection};
    for (const auto& [name, value] : flags.items()) {
      create.push_back("--" + name);
      create.push_back(value.is_string() ? value.get<std::string>() : value.dump());
    }
    const json created = Ok(create);
    EXPECT_EQ(created["created"]["kind"], tc.kind);

    std::vector<std::string> item_files, query_files;
    const std::string kind = tc.kind;
    if (kind == "point") {
      item_files = {"--vec", prefix + ".vec.npy"};
      query_files = item_files;
    } else if (kind == "gaussian") {
      item_files = {"--mean", prefix + ".mean.npy", "--var", prefix + ".var.npy"};
      query_files = item_files;
    } else if (kind == "mog") {
      item_files = {"--mean",    prefix + ".mean.npy",   "--var", prefix + ".var.npy",
                    "--weights", prefix + ".weights.npy"};
      query_files = item_files;
    } else {
      item_files = {"--codes", prefix + ".codes.npy"};
      query_files = {"--logp", prefix + ".logp.npy"};
    }
    std::vector<std::string> ingest = {"ingest",
                                       "--db",
                                       db,
                                       "--collection",
                                       collection,
                                       "--ids",
                                       prefix + ".ids.npy",
                                       "--labels",
                                       prefix + ".labels.npy"};
    ingest.insert(ingest.end(), item_files.begin(), item_files.end());
    const json ingested = Ok(ingest);
    EXPECT_EQ(ingested["ingested"], 180);

    std::vector<std::string> search = {"search",   "--db", db,  "--collection",
                                       collection, "--k",  "5", "--exhaustive"};
    search.insert(search.end(), query_files.begin(), query_files.end());
    const Output r = Run(search);
    ASSERT_EQ(r.exit_code, 0) << Describe(search, r);
    // One line per query; the nearest neighbours share the query's label
    // more often than chance (6 classes).
    std::istringstream lines(r.out);
    std::string line;
    int64_t queries = 0, same_label = 0, hits = 0;
    NpyArray labels_npy;
    ASSERT_TRUE(ReadNpy(prefix + ".labels.npy", &labels_npy).ok());
    std::vector<int64_t> labels;
    ASSERT_TRUE(NpyToInt64(labels_npy, "labels", &labels).ok());
    while (std::getline(lines, line)) {
      const json q = json::parse(line);
      const int64_t query = q["query"].get<int64_t>();
      for (const auto& hit : q["results"]) {
        ASSERT_TRUE(hit.contains("label"));
        same_label += hit["label"].get<int64_t>() == labels[query];
        ++hits;
      }
      ++queries;
    }
    EXPECT_EQ(queries, 180);
    ASSERT_GT(hits, 0);
    EXPECT_GT(static_cast<double>(same_label) / hits, 2.0 / 6) << tc.kind;
  }
}

TEST_F(EncoderCliTest, EvaluatePrintsThePapersMetrics) {
  const std::string data = WriteFeatures();
  Ok(TrainArgs(data, "hib", "hib.model"));
  const json report = Ok({"evaluate", "--model", Path("hib.model"), "--data", data, "--pairs",
                          "500", "--max-items", "0"});
  ASSERT_TRUE(report.contains("verification")) << report.dump();
  EXPECT_GT(report["verification"]["clean"]["average_precision"].get<double>(), 0.5);
  const json& clean = report["retrieval"]["clean"];
  for (const char* key :
       {"recall_at_1", "recall_at_2", "recall_at_4", "recall_at_8", "map_at_r", "knn_accuracy"}) {
    EXPECT_TRUE(clean.contains(key)) << key;
  }
  // Every class has other items here: no query is left out of recall@k.
  EXPECT_EQ(clean["queries_with_relevant"], clean["queries"]) << clean.dump();
  EXPECT_EQ(clean["eta_calibration"]["bin_performance"].size(), 20u);
  EXPECT_TRUE(clean["eta_calibration"].contains("kendall_tau"));
  EXPECT_EQ(report["items"], 180);
  EXPECT_EQ(report["mc_repeats"], 1);

  // Three Monte Carlo repeats on the same items and pairs: the numbers that
  // depend on the samples become {mean, sd, repeats}; counts stay numbers.
  const json repeated = Ok({"evaluate", "--model", Path("hib.model"), "--data", data, "--pairs",
                            "500", "--max-items", "0", "--mc-repeats", "3"});
  EXPECT_EQ(repeated["mc_repeats"], 3);
  EXPECT_EQ(repeated["items"], 180);
  const json& ap = repeated["verification"]["clean"]["average_precision"];
  ASSERT_TRUE(ap.is_object()) << repeated.dump();
  EXPECT_EQ(ap["repeats"], 3);
  EXPECT_GT(ap["sd"].get<double>(), 0.0);
  EXPECT_NEAR(ap["mean"].get<double>(),
              report["verification"]["clean"]["average_precision"].get<double>(),
              5 * ap["sd"].get<double>() + 1e-3);
  EXPECT_EQ(repeated["verification"]["clean"]["pairs"], 500);
  // Feature vectors have no factors to disentangle, and a point-only
  // baseline refuses a Gaussian model, both before embedding anything.
  Fails({"evaluate", "--model", Path("hib.model"), "--data", data, "--disentanglement"},
        {"disentanglement", "composites"});
  Fails({"evaluate", "--model", Path("hib.model"), "--data", data, "--pq", "2x4"},
        {"needs a point model"});
  Fails({"evaluate", "--model", Path("hib.model"), "--data", data, "--episodes", "3"},
        {"episodic accuracy needs an SPE or a point model"});
}

// The "[evaluate] step S/N NAME DONE/TOTAL UNIT ..." lines of stderr.
struct ProgressLine {
  int step = 0, steps = 0;
  std::string name;
  long long done = 0, total = 0;
};
std::vector<ProgressLine> ProgressLines(const std::string& err) {
  // The name may hold spaces and a slash ("eta (repeat 1/2)"); the count
  // and unit follow it, then the rate and ETA (mid-step only), then the
  // elapsed time.
  static const std::regex format(
      R"(\[evaluate\] step (\d+)/(\d+) (.+) (\d+)/(\d+) ([a-z]+)( \d+ [a-z]+/s ETA \S+)?, elapsed \S+)");
  std::vector<ProgressLine> lines;
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("[evaluate]", 0) != 0) continue;
    std::smatch m;
    EXPECT_TRUE(std::regex_match(line, m, format)) << line;
    if (m.empty()) continue;
    ProgressLine p;
    p.step = std::stoi(m[1]);
    p.steps = std::stoi(m[2]);
    p.name = m[3];
    p.done = std::stoll(m[4]);
    p.total = std::stoll(m[5]);
    lines.push_back(p);
  }
  return lines;
}

// evaluate reports its progress on stderr as train does (item 11 of the
// first-hour issue): with a small --progress-seconds every step shows up, in
// order, from its start to its end; --no-progress silences it; stdout's
// report is the same either way.
TEST_F(EncoderCliTest, EvaluateReportsProgressOnStderr) {
  const std::string data = WriteFeatures();
  Ok(TrainArgs(data, "hib", "hib.model"));
  const std::vector<std::string> evaluate = {
      "evaluate",    "--model", Path("hib.model"), "--data", data, "--pairs", "200",
      "--max-items", "0",       "--mc-repeats",    "2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = evaluate;
    args.insert(args.end(), extra.begin(), extra.end());
    const Output r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << Describe(args, r);
    return r;
  };
  const Output loud = with({"--progress-seconds", "0"});
  const std::vector<ProgressLine> lines = ProgressLines(loud.err);
  ASSERT_FALSE(lines.empty()) << loud.err;
  // 1 embedding (features have no corrupt twin) + 2 repeats x (eta,
  // verification, retrieval) + calibration.
  const int steps = 1 + 2 * 3 + 1;
  EXPECT_EQ(lines.front().step, 1);
  EXPECT_EQ(lines.front().name, "embedding");
  EXPECT_EQ(lines.front().done, 0);
  EXPECT_EQ(lines.front().total, 180);
  std::vector<std::string> names;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].steps, steps);
    EXPECT_LE(lines[i].done, lines[i].total);
    if (i > 0) {
      EXPECT_GE(lines[i].step, lines[i - 1].step);
    }
    if (names.empty() || names.back() != lines[i].name) names.push_back(lines[i].name);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "embedding", "eta (repeat 1/2)", "verification clean (repeat 1/2)",
                "retrieval clean (repeat 1/2)", "eta (repeat 2/2)",
                "verification clean (repeat 2/2)", "retrieval clean (repeat 2/2)", "calibration"}));
  EXPECT_EQ(lines.back().step, steps);
  EXPECT_EQ(lines.back().done, lines.back().total);
  // Queries in between, with their rate and the step's ETA.
  EXPECT_NE(loud.err.find("queries/s ETA "), std::string::npos) << loud.err;

  const Output quiet = with({"--no-progress"});
  EXPECT_EQ(quiet.err.find("[evaluate]"), std::string::npos) << quiet.err;
  EXPECT_EQ(quiet.out, loud.out);
  // The default interval (5 s) prints the start and the end at least.
  const Output plain = with({});
  EXPECT_GE(ProgressLines(plain.err).size(), 2u) << plain.err;
  EXPECT_EQ(plain.out, loud.out);
  Fails({"evaluate", "--model", Path("hib.model"), "--data", data, "--progress-seconds", "-1"},
        {"--progress-seconds"}, 2);

  // Embeddings without a model: the ranking of the queries, then their eta.
  const json emb = Ok({"embed", "--model", Path("hib.model"), "--data", data, "--out", Path("e"),
                       "--split", "test"});
  const std::vector<std::string> files = {"evaluate",
                                          "--kind",
                                          "gaussian",
                                          "--dim",
                                          "2",
                                          "--mean",
                                          Path("e.mean.npy"),
                                          "--var",
                                          Path("e.var.npy"),
                                          "--labels",
                                          Path("e.labels.npy")};
  std::vector<std::string> args = files;
  args.insert(args.end(), {"--progress-seconds", "0"});
  const Output eloud = Run(args);
  ASSERT_EQ(eloud.exit_code, 0) << Describe(args, eloud);
  const std::vector<ProgressLine> elines = ProgressLines(eloud.err);
  ASSERT_GE(elines.size(), 4u) << eloud.err;
  EXPECT_EQ(elines.front().name, "ranking");
  EXPECT_EQ(elines.front().steps, 2);
  EXPECT_EQ(elines.back().name, "eta");
  EXPECT_EQ(elines.back().done, elines.back().total);
  args = files;
  args.push_back("--no-progress");
  const Output equiet = Run(args);
  ASSERT_EQ(equiet.exit_code, 0) << Describe(args, equiet);
  EXPECT_EQ(equiet.err.find("[evaluate]"), std::string::npos) << equiet.err;
  EXPECT_EQ(equiet.out, eloud.out);
}

TEST_F(EncoderCliTest, FashionMnistTinyRun) {
  const std::vector<std::string> data = {"--data",        "fashion-mnist", "--items",      "2",
                                         "--train-total", "1500",          "--test-total", "400"};
  std::vector<std::string> train = {"train",
                                    "--method",
                                    "point",
                                    "--iterations",
                                    "40",
                                    "--conv1",
                                    "4",
                                    "--conv2",
                                    "8",
                                    "--cnn-hidden",
                                    "16",
                                    "--batch-size",
                                    "32",
                                    "--threads",
                                    "1",
                                    "--out",
                                    Path("fm.model"),
                                    "--val-fraction",
                                    "0.1",
                                    "--eval-every",
                                    "20",
                                    "--val-items",
                                    "100"};
  train.insert(train.end(), data.begin(), data.end());
  const json trained = Ok(train);
  EXPECT_EQ(trained["kind"], "point");
  EXPECT_TRUE(trained.contains("best_validation_map_at_r"));
  std::vector<std::string> embed = {"embed",       "--model", Path("fm.model"), "--corrupt",
                                    "--max-items", "50",      "--out",          Path("fm")};
  embed.insert(embed.end(), data.begin(), data.end());
  const json embedded = Ok(embed);
  EXPECT_EQ(embedded["items"], 50);
  NpyArray vec;
  ASSERT_TRUE(ReadNpy(Path("fm.vec.npy"), &vec).ok());
  EXPECT_EQ(vec.shape, (std::vector<int64_t>{50, 2}));
  std::vector<std::string> evaluate = {
      "evaluate", "--model", Path("fm.model"), "--max-items", "200", "--pairs", "400"};
  evaluate.insert(evaluate.end(), data.begin(), data.end());
  const json report = Ok(evaluate);
  EXPECT_TRUE(report["verification"].contains("corrupt"));
  EXPECT_TRUE(report["retrieval"].contains("corrupt"));
  EXPECT_TRUE(report["retrieval"].contains("corrupt_probe"));

  // HIB's Table 1 settings for the flags not given: the seen classes, the
  // whole split; a point model draws no samples, so one repeat.
  std::vector<std::string> table1 = {"evaluate", "--model",    Path("fm.model"), "--pairs",
                                     "400",      "--protocol", "hib-table1"};
  table1.insert(table1.end(), data.begin(), data.end());
  const json preset = Ok(table1);
  EXPECT_EQ(preset["protocol"], "hib-table1");
  EXPECT_EQ(preset["split"], "test-seen");
  EXPECT_EQ(preset["mc_repeats"], 1);
  EXPECT_GT(preset["items"].get<int64_t>(), 10);
  // An explicit flag wins over the preset.
  table1.push_back("--max-items");
  table1.push_back("30");
  EXPECT_EQ(Ok(table1)["items"], 30);

  // DIMCO's baseline: the point embeddings product-quantized to 2 x 8 bits,
  // the codebooks trained on the training split.
  std::vector<std::string> pq = evaluate;
  pq.insert(pq.end(), {"--pq", "2x8"});
  const json quantized = Ok(pq);
  EXPECT_EQ(quantized["pq"]["code_bits"], 16);
  EXPECT_GT(quantized["pq"]["train_items"].get<int64_t>(), 256);
  for (const char* gallery : {"clean", "corrupt"}) {
    const double r1 = quantized["pq"]["retrieval"][gallery]["recall_at_1"].get<double>();
    EXPECT_GE(r1, 0.0);
    EXPECT_LE(r1, 1.0);
  }
  pq.back() = "3x8";  // 3 sub-codes do not divide D = 2
  // This is found once the PQ step runs, after the progress lines of the
  // steps before it: without them the error opens stderr, as Fails expects.
  std::vector<std::string> quiet_pq = pq;
  quiet_pq.push_back("--no-progress");
  Fails(quiet_pq, {"3 sub-codes", "dimension 2"});
  pq.back() = "2x";
  Fails(pq, {"MxB", "2x"});

  // The F-statistic paper's disentanglement, the two items as the factors.
  std::vector<std::string> factors = evaluate;
  factors.push_back("--disentanglement");
  const json disentangled = Ok(factors)["disentanglement"];
  EXPECT_EQ(disentangled["factors"], json::array({10, 10}));
  EXPECT_GE(disentangled["modularity"].get<double>(), 0.0);
  EXPECT_LE(disentangled["modularity"].get<double>(), 1.0);
  EXPECT_EQ(disentangled["modularity_dimensions"], 2);
  EXPECT_GT(disentangled["explicitness"].get<double>(), 0.5);  // trained, if briefly
  EXPECT_EQ(disentangled["explicitness_values"], 20);

  // SPE's episodic protocol; a point model classifies by the nearest
  // support mean. The same draws for the three conditions.
  std::vector<std::string> episodic = evaluate;
  episodic.insert(episodic.end(), {"--episodes", "4", "--shots", "2", "--queries", "1"});
  const json episodes = Ok(episodic)["episodes"];
  EXPECT_EQ(episodes["episodes"], 4);
  EXPECT_EQ(episodes["rule"], "nearest support mean");
  EXPECT_GE(episodes["classes"].get<int64_t>(), 2);
  for (const char* condition : {"clean", "corrupt_support", "corrupt_query"}) {
    const double accuracy = episodes["accuracy"][condition]["mean"].get<double>();
    EXPECT_GE(accuracy, 0.0) << condition;
    EXPECT_LE(accuracy, 1.0) << condition;
  }
  // The preset's 1000 episodes of 5 + 5 items, overridden to fit this tiny split.
  std::vector<std::string> spe_preset = {"evaluate", "--model",    Path("fm.model"), "--pairs",
                                         "400",      "--protocol", "spe-episodes"};
  spe_preset.insert(spe_preset.end(), {"--episodes", "3", "--shots", "2", "--queries", "1"});
  spe_preset.insert(spe_preset.end(), data.begin(), data.end());
  const json preset_episodes = Ok(spe_preset);
  EXPECT_EQ(preset_episodes["protocol"], "spe-episodes");
  EXPECT_EQ(preset_episodes["episodes"]["episodes"], 3);
  // HIB Tables 2 and 5: the same items, 10 repeats (none for a point model).
  std::replace(table1.begin(), table1.end(), std::string("hib-table1"), std::string("hib-table2"));
  const json table2 = Ok(table1);
  EXPECT_EQ(table2["protocol"], "hib-table2");
  EXPECT_EQ(table2["split"], "test-seen");
  EXPECT_EQ(table2["items"], 30);
  std::replace(table1.begin(), table1.end(), std::string("hib-table2"), std::string("spe-table9"));
  Fails(table1, {"--protocol", "spe-table9", "hib-table1", "hib-table2"}, 2);
}

// An MNIST-layout directory: `train` and `test` 28 x 28 images per label
// (labels 0..9), pixels varying with the image, for --data idx:DIR.
void WriteIdxDir(const std::string& dir, int train, int test) {
  fs::create_directories(dir);
  auto be32 = [](std::string* out, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
  };
  for (const auto& [prefix, per_label] : {std::make_pair("train", train), {"t10k", test}}) {
    std::string images, labels;
    const uint32_t count = 10u * static_cast<uint32_t>(per_label);
    be32(&images, 2051);
    be32(&images, count);
    be32(&images, 28);
    be32(&images, 28);
    be32(&labels, 2049);
    be32(&labels, count);
    for (uint32_t i = 0; i < count; ++i) {
      labels.push_back(static_cast<char>(i % 10));
      for (int p = 0; p < 28 * 28; ++p) {
        images.push_back(static_cast<char>((i % 10) * 20 + (p * 7 + i * 3) % 40));
      }
    }
    std::ofstream(dir + "/" + prefix + "-images-idx3-ubyte", std::ios::binary) << images;
    std::ofstream(dir + "/" + prefix + "-labels-idx1-ubyte", std::ios::binary) << labels;
  }
}

// The ModelSpec JSON of a model file's header (encoders/models/model_file.h:
// magic, u32 version, u64 header length, header).
json ModelHeader(const std::string& path) {
  const std::string bytes = Slurp(path);
  if (bytes.size() < 20) return json();
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(bytes[12 + i]);
  return json::parse(bytes.substr(20, length));
}

// `train --preset`: a preset sets what its help says for the flags not given,
// explicit flags win, and it refuses methods it is not for.
TEST_F(EncoderCliTest, TrainPresetSetsThePapersSettingsAndExplicitFlagsWin) {
  WriteIdxDir(Path("mnist"), 20, 10);
  const std::vector<std::string> data = {
      "--data", "idx:" + Path("mnist"), "--items", "2",         "--train-total",
      "700",    "--test-total",         "150",     "--threads", "1"};
  auto train = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"train"};
    args.insert(args.end(), data.begin(), data.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::vector<std::string> hib =
      train({"--method", "hib", "--preset", "hib-ndigit", "--iterations", "2", "--conv2", "8",
             "--out", Path("hib.model")});
  const Output r = Run(hib);
  ASSERT_EQ(r.exit_code, 0) << Describe(hib, r);
  const json out = r.Json();
  ASSERT_TRUE(out.contains("preset")) << out.dump();
  EXPECT_EQ(out["preset"]["name"], "hib-ndigit");
  const json expected = {{"--arch", "cnn"},
                         {"--conv1", "32"},
                         {"--cnn-hidden", "500"},
                         {"--batch-size", "128"},
                         {"--beta", "1e-4"},
                         {"--samples", "8"},
                         {"--train-occlusion", "0.2"},
                         {"--patience", "1000000"}};
  EXPECT_EQ(out["preset"]["applied"], expected) << "explicit --iterations and --conv2 win";
  EXPECT_EQ(out["iterations"], 2);
  EXPECT_NE(r.err.find(" 128 items/batch, 2 iterations"), std::string::npos) << r.err;
  const json spec = ModelHeader(Path("hib.model"));
  EXPECT_EQ(spec["backbone"]["type"], "cnn") << spec.dump();
  EXPECT_EQ(spec["backbone"]["conv1_channels"], 32);
  EXPECT_EQ(spec["backbone"]["conv2_channels"], 8);
  EXPECT_EQ(spec["backbone"]["cnn_hidden"], 500);

  // spe-ndigit: all 70 training classes per episode for N = 2, the preset's
  // 500000 iterations (cut short by --max-seconds); explicit --n-support wins.
  const std::vector<std::string> spe = train(
      {"--method", "spe", "--preset", "spe-ndigit", "--n-support", "2", "--conv1", "4", "--conv2",
       "4", "--cnn-hidden", "16", "--max-seconds", "1", "--out", Path("spe.model")});
  const Output s = Run(spe);
  ASSERT_EQ(s.exit_code, 0) << Describe(spe, s);
  EXPECT_NE(s.err.find(" 70 classes, 490 items/batch, 500000 iterations"), std::string::npos)
      << s.err;
  const json applied = s.Json()["preset"]["applied"];
  EXPECT_EQ(applied["--n-way"], "0");
  EXPECT_EQ(applied["--n-query"], "5");
  EXPECT_FALSE(applied.contains("--n-support"));
  EXPECT_FALSE(applied.contains("--conv1"));

  // --budget-items sets the length in items seen (an episode of 70 x (2 + 5)
  // = 490 items: 1000 items are ceil(1000 / 490) = 3 episodes), and the
  // preset's 500000 iterations then stay out, as they do for --epochs.
  const std::vector<std::string> budget = train(
      {"--method", "spe", "--preset", "spe-ndigit", "--n-support", "2", "--conv1", "4", "--conv2",
       "4", "--cnn-hidden", "16", "--budget-items", "1000", "--out", Path("budget.model")});
  const Output b = Run(budget);
  ASSERT_EQ(b.exit_code, 0) << Describe(budget, b);
  EXPECT_EQ(b.Json()["iterations"], 3);
  EXPECT_NE(b.err.find(" 490 items/batch, 3 iterations"), std::string::npos) << b.err;
  EXPECT_FALSE(b.Json()["preset"]["applied"].contains("--iterations"));
  const std::vector<std::string> epochs =
      train({"--method", "hib", "--preset", "hib-ndigit", "--conv1", "4", "--conv2", "4",
             "--cnn-hidden", "16", "--epochs", "0.2", "--out", Path("epochs.model")});
  const Output e = Run(epochs);
  ASSERT_EQ(e.exit_code, 0) << Describe(epochs, e);
  EXPECT_FALSE(e.Json()["preset"]["applied"].contains("--iterations"));
  EXPECT_LE(e.Json()["iterations"].get<int64_t>(), 2)
      << "0.2 of at most 700 composites, 128 a batch";
  // An explicit 0 is no length: the preset's iterations stand (and are cut
  // short by --max-seconds here).
  const std::vector<std::string> zero = train(
      {"--method", "hib", "--preset", "hib-ndigit", "--conv1", "4", "--conv2", "4", "--cnn-hidden",
       "16", "--epochs", "0", "--max-seconds", "0.5", "--out", Path("zero.model")});
  const Output z = Run(zero);
  ASSERT_EQ(z.exit_code, 0) << Describe(zero, z);
  EXPECT_EQ(z.Json()["preset"]["applied"]["--iterations"], "500000");
  Fails(train({"--method", "hib", "--iterations", "5", "--budget-items", "100", "--out",
               Path("x.model")}),
        {"--iterations and --budget-items and --epochs must not be combined"}, 2);
  Fails(train({"--method", "hib", "--budget-items", "-1", "--out", Path("x.model")}),
        {"--budget-items must be >= 0"}, 2);

  Fails(train({"--method", "spe", "--preset", "hib-ndigit", "--out", Path("x.model")}),
        {"--preset hib-ndigit is for --method point, softcon, contrastive, hib", "'spe'"}, 2);
  Fails(train({"--method", "hib", "--preset", "hib-table1", "--out", Path("x.model")}),
        {"unknown preset 'hib-table1'", "hib-ndigit", "spe-ndigit"}, 2);
  EXPECT_FALSE(fs::exists(Path("x.model")));
}

// --precision bf16 reaches the training steps (the same seed trains other
// weights than fp32) and is reported; the model file is an ordinary float32
// one; another value is refused before any data is read.
TEST_F(EncoderCliTest, TrainPrecisionBf16RunsTheBackboneInBfloat16) {
  WriteIdxDir(Path("mnist"), 20, 10);
  auto train = [&](const std::string& precision, const std::string& out) {
    std::vector<std::string> args = {"train",
                                     "--data",
                                     "idx:" + Path("mnist"),
                                     "--items",
                                     "2",
                                     "--train-total",
                                     "300",
                                     "--test-total",
                                     "60",
                                     "--method",
                                     "hib",
                                     "--conv1",
                                     "4",
                                     "--conv2",
                                     "4",
                                     "--cnn-hidden",
                                     "16",
                                     "--iterations",
                                     "3",
                                     "--batch-size",
                                     "16",
                                     "--threads",
                                     "1",
                                     "--seed",
                                     "5",
                                     "--out",
                                     out};
    if (!precision.empty()) {
      args.push_back("--precision");
      args.push_back(precision);
    }
    return args;
  };
  const auto fp32 = train("", Path("fp32.model"));
  const Output a = Run(fp32);
  ASSERT_EQ(a.exit_code, 0) << Describe(fp32, a);
  EXPECT_EQ(a.Json()["precision"], "fp32");
  EXPECT_EQ(a.err.find("bfloat16"), std::string::npos) << a.err;
  const auto bf16 = train("bf16", Path("bf16.model"));
  const Output b = Run(bf16);
  ASSERT_EQ(b.exit_code, 0) << Describe(bf16, b);
  EXPECT_EQ(b.Json()["precision"], "bf16");
  EXPECT_NE(b.err.find(", bfloat16 backbone"), std::string::npos) << b.err;
  EXPECT_NE(Slurp(Path("fp32.model")), Slurp(Path("bf16.model")))
      << "the bf16 steps train other weights from the same seed";
  EXPECT_EQ(ModelHeader(Path("bf16.model"))["backbone"],
            ModelHeader(Path("fp32.model"))["backbone"]);
  const auto again = train("bf16", Path("bf16_again.model"));
  ASSERT_EQ(Run(again).exit_code, 0);
  EXPECT_EQ(Slurp(Path("bf16.model")), Slurp(Path("bf16_again.model")))
      << "a bf16 run is as deterministic for its seed as an fp32 one";

  Fails(train("fp16", Path("x.model")), {"--precision must be fp32 or bf16, got 'fp16'"}, 2);
  EXPECT_FALSE(fs::exists(Path("x.model")));
}

TEST_F(EncoderCliTest, BadInputFailsClearly) {
  const std::string data = WriteFeatures();
  // Unknown method: a usage error.
  Fails(TrainArgs(data, "bogus", "x.model"), {"unknown method", "bogus"}, 2);
  // --hib-likelihood takes its two spellings only (the library takes the enum).
  std::vector<std::string> likelihood = TrainArgs(data, "hib", "x.model");
  likelihood.insert(likelihood.end(), {"--hib-likelihood", "median"});
  Fails(likelihood, {"--hib-likelihood must be expected or mc, got 'median'"}, 2);
  // --hib-variance-mls: the library's rule, worded with the flag.
  std::vector<std::string> mls = TrainArgs(data, "hib", "x.model");
  mls.insert(mls.end(), {"--hib-variance-mls", "-1"});
  Fails(mls, {"--hib-variance-mls must be a finite number >= 0"}, 2);
  mls = TrainArgs(data, "point", "x.model");
  mls.insert(mls.end(), {"--hib-variance-mls", "1"});
  Fails(mls, {"--hib-variance-mls needs method hib with gaussian embeddings (components 1)"}, 2);
  EXPECT_FALSE(fs::exists(Path("x.model")));
  // Missing data files.
  Fails(TrainArgs("features:" + Path("nope.npy") + "," + Path("l.npy"), "point", "x.model"),
        {"nope.npy"});
  Fails(TrainArgs("idx:" + Path("nodir"), "point", "x.model"), {"nodir"});
  Fails(TrainArgs("somewhere", "point", "x.model"), {"unknown data source"});
  // --cub ROOT is the same flag as --data cub:ROOT (as on ingest-images).
  std::vector<std::string> cub = TrainArgs(data, "point", "x.model");
  cub.push_back("--cub");
  cub.push_back(Path("no_cub_root"));
  Fails(cub, {"give the data set once"}, 2);
  cub = TrainArgs(Path("no_cub_root2"), "point", "x.model");
  cub[1] = "--cub";  // instead of --data
  Fails(cub, {"no_cub_root2"});
  // Wrong shapes: 3-d features; labels that do not match the rows.
  ASSERT_TRUE(WriteNpy(Path("f3.npy"), MakeNpy(std::vector<float>(24, 1.0f), {2, 3, 4})).ok());
  Fails(TrainArgs("features:" + Path("f3.npy") + "," + Path("l.npy"), "point", "x.model"),
        {"f3.npy"});
  ASSERT_TRUE(WriteNpy(Path("short.npy"), MakeNpy(std::vector<int64_t>(5, 1), {5})).ok());
  Fails(TrainArgs("features:" + Path("f.npy") + "," + Path("short.npy"), "point", "x.model"),
        {"short.npy"});
  // Labels out of range (negative).
  ASSERT_TRUE(WriteNpy(Path("neg.npy"), MakeNpy(std::vector<int64_t>(360, -3), {360})).ok());
  Fails(TrainArgs("features:" + Path("f.npy") + "," + Path("neg.npy"), "point", "x.model"),
        {"neg.npy"});
  // Missing, corrupt and mismatched models.
  Fails({"embed", "--model", Path("missing.model"), "--data", data, "--out", Path("o")},
        {"missing.model"});
  std::ofstream(Path("garbage.model")) << "garbage, not a model file";
  Fails({"evaluate", "--model", Path("garbage.model"), "--data", data}, {"garbage.model"});
  Ok(TrainArgs(data, "point", "p.model"));
  Fails({"embed", "--model", Path("p.model"), "--data", "fashion-mnist", "--train-total", "1000",
         "--test-total", "300", "--out", Path("o")},
        {"shape"});
  // A truncated model file fails its checks.
  const std::string bytes = Slurp(Path("p.model"));
  std::ofstream(Path("cut.model"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  Fails({"evaluate", "--model", Path("cut.model"), "--data", data}, {"cut.model"});
  // Flags that do not fit the method.
  std::vector<std::string> args = TrainArgs(data, "point", "y.model");
  args.insert(args.end(), {"--components", "2"});
  Fails(args, {"components"}, 2);
  // The library names TrainOptions fields; train's messages name its flags.
  args = TrainArgs(data, "dimco", "y.model");
  args.insert(args.end(), {"--code-dim", "-1"});
  Fails(args, {"--code-dim must be >= 1"}, 2);
  args = TrainArgs(data, "point", "y.model");
  args.insert(args.end(), {"--lr", "-1"});
  Fails(args, {"--lr must be > 0"}, 2);
  Fails(
      {"embed", "--model", Path("p.model"), "--data", data, "--split", "nope", "--out", Path("o")},
      {"split"});
}

// The data-set loader names DataOptions' fields (tests/datasets/
// load_data_test.cc); the commands name their flags for the same input, and
// leave no field name behind.
TEST_F(EncoderCliTest, DataErrorsNameTheFlags) {
  const std::string data = WriteFeatures();
  struct Case {
    std::vector<std::string> args;
    std::string flag_text, field;
  };
  std::vector<std::string> val = TrainArgs(data, "point", "x.model");
  *(std::find(val.begin(), val.end(), "--val-fraction") + 1) = "1.5";
  std::vector<std::string> bbox = TrainArgs(data, "point", "x.model");
  bbox.push_back("--bbox");
  std::vector<std::string> size = TrainArgs(data, "point", "x.model");
  size.insert(size.end(), {"--image-size", "32"});
  std::vector<std::string> split = TrainArgs(data, "point", "x.model");
  split.insert(split.end(), {"--class-split", "3"});
  const std::vector<Case> cases = {
      {val, "--val-fraction must be in [0, 1)", "val_fraction"},
      {bbox, "--bbox applies to cub:ROOT, cars:ROOT and folder:ROOT data only", " bbox"},
      {size, "--image-size applies to cub:ROOT", "image_size"},
      {split, "--class-split applies to cub:ROOT", "class_split"},
      {TrainArgs("features:" + Path("f.npy"), "point", "x.model"),
       "--data features:FEATS.npy,LABELS.npy needs two files", "source features"},
      {TrainArgs("idx:", "point", "x.model"), "--data idx:DIR needs a directory", "source idx"},
      {{"embed", "--model", Path("m.model"), "--data", "idx:", "--out", Path("o")},
       "--data idx:DIR needs a directory",
       "source idx"},
  };
  // embed loads the data as train does (a model first).
  Ok(TrainArgs(data, "point", "m.model"));
  for (const Case& c : cases) {
    const Output r = Run(c.args);
    EXPECT_EQ(r.exit_code, 1) << Describe(c.args, r);
    EXPECT_NE(r.err.find(c.flag_text), std::string::npos) << Describe(c.args, r);
    EXPECT_EQ(r.err.find(c.field), std::string::npos) << Describe(c.args, r);
  }
}

}  // namespace
}  // namespace hedgedb
