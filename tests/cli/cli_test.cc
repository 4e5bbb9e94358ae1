// End-to-end tests of the `hedgedb` command line: every test runs the real
// bin/hedgedb as a subprocess on a temporary database and checks its exit
// code, its JSON output and the database state afterwards.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "hedgedb/npy.h"

namespace hedgedb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct RunResult : cli_testing::CliRun {
  // stdout as one JSON value per line.
  std::vector<json> JsonLines() const { return cli_testing::JsonLines(out, /*strict=*/true); }
  json Json() const {
    const std::vector<json> lines = JsonLines();
    EXPECT_EQ(lines.size(), 1u) << out;
    return lines.empty() ? json() : lines[0];
  }
};

using cli_testing::ReadWholeFile;

std::string Lower(std::string s) { return cli_testing::Lowercase(std::move(s)); }

using cli_testing::DescribeRun;
std::string Describe(const std::vector<std::string>& args, const RunResult& r) {
  return DescribeRun(args, r);
}

enum class K { kPoint, kGaussian, kMog, kCodes };
const char* KindFlag(K k) {
  switch (k) {
    case K::kPoint:
      return "point";
    case K::kGaussian:
      return "gaussian";
    case K::kMog:
      return "mog";
    case K::kCodes:
      return "codes";
  }
  return "";
}

constexpr int64_t kDim = 4;         // D
constexpr int64_t kComponents = 2;  // C
constexpr int64_t kCodeDim = 6;     // d
constexpr int64_t kCodeK = 8;       // k

// Deterministic, pairwise distinct items (row i, starting at `first`).
struct Items {
  std::vector<float> vec, mean, var, weights;
  std::vector<int32_t> codes;
  int64_t n = 0;
};

Items MakeItems(K kind, int64_t first, int64_t n) {
  Items it;
  it.n = n;
  for (int64_t i = first; i < first + n; ++i) {
    switch (kind) {
      case K::kPoint:
        for (int64_t j = 0; j < kDim; ++j) it.vec.push_back(0.5f * i + 0.25f * j);
        break;
      case K::kGaussian:
        for (int64_t j = 0; j < kDim; ++j) it.mean.push_back(0.5f * i + 0.25f * j);
        for (int64_t j = 0; j < kDim; ++j) it.var.push_back(0.01f * (1 + i % 5) + 0.001f * j);
        break;
      case K::kMog:
        it.weights.push_back(0.25f);
        it.weights.push_back(0.75f);
        for (int64_t c = 0; c < kComponents; ++c)
          for (int64_t j = 0; j < kDim; ++j) it.mean.push_back(0.5f * i + 0.25f * j + 0.1f * c);
        for (int64_t c = 0; c < kComponents; ++c)
          for (int64_t j = 0; j < kDim; ++j) it.var.push_back(0.02f * (c + 1) + 0.001f * j);
        break;
      case K::kCodes:
        // Distinct for i < 512.
        it.codes.push_back(static_cast<int32_t>(i % 8));
        it.codes.push_back(static_cast<int32_t>((i / 8) % 8));
        it.codes.push_back(static_cast<int32_t>((i / 64) % 8));
        for (int64_t j = 3; j < kCodeDim; ++j)
          it.codes.push_back(static_cast<int32_t>((i + j) % 8));
        break;
    }
  }
  return it;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "hedgedb_cli_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    db_ = Path("db");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  RunResult Run(const std::vector<std::string>& args) {
    RunResult r;
    static_cast<cli_testing::CliRun&>(r) = cli_testing::RunHedgedb(dir_, args);
    return r;
  }

  // Runs and expects success; returns the result.
  RunResult Ok(const std::vector<std::string>& args) {
    RunResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << Describe(args, r);
    return r;
  }

  // Runs and expects failure with `exit_code` and a "hedgedb: error: " message
  // containing every one of `needles` (case-insensitive).
  RunResult Fails(const std::vector<std::string>& args, int exit_code,
                  const std::vector<std::string>& needles) {
    RunResult r = Run(args);
    EXPECT_EQ(r.exit_code, exit_code) << Describe(args, r);
    EXPECT_EQ(r.err.rfind("hedgedb: error: ", 0), 0u) << Describe(args, r);
    EXPECT_TRUE(r.out.empty()) << Describe(args, r);
    for (const auto& needle : needles) {
      EXPECT_NE(Lower(r.err).find(Lower(needle)), std::string::npos)
          << "missing '" << needle << "' in\n"
          << Describe(args, r);
    }
    return r;
  }

  // Fails unless one of `alternatives` appears in stderr (case-insensitive).
  static void ExpectMentionsOneOf(const RunResult& r,
                                  const std::vector<std::string>& alternatives) {
    const std::string err = Lower(r.err);
    bool found = false;
    for (const auto& a : alternatives) found = found || err.find(Lower(a)) != std::string::npos;
    EXPECT_TRUE(found) << "stderr mentions none of the expected words: " << r.err;
  }

  std::string Write(const std::string& name, const NpyArray& array) {
    const std::string path = Path(name);
    const Status s = WriteNpy(path, array);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return path;
  }

  void Create(const std::string& collection, K kind, const std::string& index = "") {
    std::vector<std::string> args = {"create", "--db",         db_,    "--collection", collection,
                                     "--kind", KindFlag(kind), "--dim"};
    args.push_back(std::to_string(kind == K::kCodes ? kCodeDim : kDim));
    if (kind == K::kMog) args.insert(args.end(), {"--components", std::to_string(kComponents)});
    if (kind == K::kCodes) args.insert(args.end(), {"--code-k", std::to_string(kCodeK)});
    if (!index.empty()) args.insert(args.end(), {"--index", index});
    const json j = Ok(args).Json();
    EXPECT_EQ(j["created"]["name"], collection);
    EXPECT_EQ(j["created"]["kind"], KindFlag(kind));
    // The index the collection built, the kind's default when none was given
    // (never ""), as stats names it.
    const std::string expected_index =
        !index.empty() ? index : (kind == K::kCodes ? "PQ" : "IVF1024,Flat");
    EXPECT_EQ(j["created"]["index_factory"], expected_index) << j.dump();
  }

  // The embedding flags for `items`, written under `tag`.
  std::vector<std::string> ItemFlags(K kind, const Items& it, const std::string& tag) {
    const int64_t n = it.n;
    switch (kind) {
      case K::kPoint:
        return {"--vec", Write(tag + ".vec.npy", MakeNpy(it.vec, {n, kDim}))};
      case K::kGaussian:
        return {"--mean", Write(tag + ".mean.npy", MakeNpy(it.mean, {n, kDim})), "--var",
                Write(tag + ".var.npy", MakeNpy(it.var, {n, kDim}))};
      case K::kMog:
        return {"--mean",    Write(tag + ".mean.npy", MakeNpy(it.mean, {n, kComponents, kDim})),
                "--var",     Write(tag + ".var.npy", MakeNpy(it.var, {n, kComponents, kDim})),
                "--weights", Write(tag + ".weights.npy", MakeNpy(it.weights, {n, kComponents}))};
      case K::kCodes:
        return {"--codes", Write(tag + ".codes.npy", MakeNpy(it.codes, {n, kCodeDim}))};
    }
    return {};
  }

  // Query flags that look for items[rows]: the same embeddings, or for codes a
  // table peaked at each item's code.
  std::vector<std::string> QueryFlags(K kind, const Items& it, const std::string& tag) {
    if (kind != K::kCodes) return ItemFlags(kind, it, tag);
    std::vector<float> logp;
    for (int64_t i = 0; i < it.n; ++i) {
      for (int64_t j = 0; j < kCodeDim; ++j) {
        for (int64_t s = 0; s < kCodeK; ++s) {
          logp.push_back(s == it.codes[i * kCodeDim + j] ? std::log(0.9f)
                                                         : std::log(0.1f / (kCodeK - 1)));
        }
      }
    }
    return {"--logp", Write(tag + ".logp.npy", MakeNpy(logp, {it.n, kCodeDim, kCodeK}))};
  }

  std::vector<std::string> Cmd(const std::string& command, const std::string& collection,
                               std::vector<std::string> rest = {}) {
    std::vector<std::string> args = {command, "--db", db_, "--collection", collection};
    args.insert(args.end(), rest.begin(), rest.end());
    return args;
  }

  int64_t ItemCount(const std::string& collection) {
    const RunResult r = Ok({"stats", "--db", db_, "--collection", collection});
    return r.Json().value("items", int64_t{-1});
  }

  std::string dir_, db_;
};

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---------------------------------------------------------------- help and usage

TEST_F(CliTest, HelpListsCommandsAndFlags) {
  RunResult r = Ok({"--help"});
  for (const char* cmd : {"create", "ingest", "search", "get", "remove", "fuse", "stats", "list",
                          "drop", "generate"}) {
    EXPECT_NE(r.out.find(cmd), std::string::npos) << cmd << "\n" << r.out;
  }
  r = Ok({"search", "--help"});
  for (const char* flag : {"--k", "--score", "--candidates", "--exhaustive", "--samples", "--seed",
                           "--nprobe", "--ef-search", "--no-uncertainty", "--logp", "--weights"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  }
  r = Ok({"create", "--help"});
  for (const char* flag : {"--kind", "--dim", "--components", "--code-k", "--index", "--match-a",
                           "--match-b", "--samples", "--seed"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  }
  for (const char* cmd : {"ingest", "get", "remove", "stats", "list", "drop", "generate"}) {
    r = Ok({cmd, "--help"});
    EXPECT_NE(r.out.find("--"), std::string::npos) << cmd;
  }
}

TEST_F(CliTest, VersionPrintsTheProjectVersion) {
  const RunResult r = Ok({"--version"});
  EXPECT_EQ(r.out, "hedgedb " HEDGEDB_VERSION "\n");
}

TEST_F(CliTest, UsageErrorsExitWithTwo) {
  Fails({}, 2, {});
  Fails({"frobnicate"}, 2, {"frobnicate"});
  Fails({"create", "--db", db_, "--collection", "c", "--dim", "4"}, 2, {"--kind"});
  Fails({"create", "--db", db_, "--collection", "c", "--kind", "blob", "--dim", "4"}, 2, {"blob"});
  Fails({"create", "--db", db_, "--collection", "c", "--kind", "codes", "--dim", "4"}, 2,
        {"--code-k"});
  Fails({"search", "--db", db_, "--collection", "c", "--vec", "x.npy"}, 2, {"--k"});
  Fails({"search", "--db", db_, "--collection", "c", "--vec", "x.npy", "--k", "3", "--exhaustive",
         "--candidates", "10"},
        2, {"exhaustive"});
  Fails({"search", "--db", db_, "--collection", "c", "--vec", "x.npy", "--k", "0"}, 2, {"--k"});
  // None of these created a database.
  EXPECT_FALSE(fs::exists(db_));
}

// ---------------------------------------------------------------- round trips

class CliKindTest : public CliTest, public ::testing::WithParamInterface<K> {};

TEST_P(CliKindTest, CreateIngestSearchGetRemoveStatsListDrop) {
  const K kind = GetParam();
  const std::string name = std::string("c_") + KindFlag(kind);
  // A Flat stage 1 is trained from the first item on (the default IVF needs
  // tens of thousands), so two-stage searches really go through FAISS.
  Create(name, kind, kind == K::kCodes ? "" : "Flat");

  // Batch 1: 30 items, ids assigned by the database (0..29), labels, payloads.
  const int64_t n1 = 30;
  const Items batch1 = MakeItems(kind, 0, n1);
  std::vector<int64_t> labels(n1);
  std::string payload_text;
  for (int64_t i = 0; i < n1; ++i) {
    labels[i] = i % 3;
    payload_text += i == 1 ? "{\"path\": \"img/1.png\", \"note\": \"caf\xc3\xa9\"}\n"
                           : "img/" + std::to_string(i) + ".png\n";
  }
  std::ofstream(Path("payloads.txt")) << payload_text;
  json j = Ok(Concat(Cmd("ingest", name,
                         {"--labels", Write("labels.npy", MakeNpy(labels, {n1})), "--payloads",
                          Path("payloads.txt")}),
                     ItemFlags(kind, batch1, "b1")))
               .Json();
  EXPECT_EQ(j["ingested"], n1);
  EXPECT_EQ(j["first_id"], 0);
  EXPECT_EQ(j["last_id"], n1 - 1);

  // Batch 2: ids continue after the largest.
  const Items batch2 = MakeItems(kind, n1, 5);
  j = Ok(Concat(Cmd("ingest", name), ItemFlags(kind, batch2, "b2"))).Json();
  EXPECT_EQ(j["first_id"], n1);
  EXPECT_EQ(j["last_id"], n1 + 4);

  // Batch 3: explicit (int32) ids.
  const Items batch3 = MakeItems(kind, n1 + 5, 2);
  j = Ok(Concat(Cmd("ingest", name,
                    {"--ids", Write("ids3.npy", MakeNpy(std::vector<int32_t>{1000, 999}, {2}))}),
                ItemFlags(kind, batch3, "b3")))
          .Json();
  EXPECT_EQ(j["ingested"], 2);
  EXPECT_EQ(j["first_id"], 1000);
  EXPECT_EQ(j["last_id"], 999);
  EXPECT_EQ(ItemCount(name), n1 + 5 + 2);

  // get: stored fields come back exactly; unknown ids are found: false.
  const std::string get_ids = Write("get.npy", MakeNpy(std::vector<int64_t>{1, 1000, 77}, {3}));
  std::vector<json> records = Ok(Cmd("get", name, {"--ids", get_ids})).JsonLines();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0]["id"], 1);
  EXPECT_EQ(records[0]["found"], true);
  EXPECT_EQ(records[0]["label"], 1);
  EXPECT_EQ(records[0]["payload"], "{\"path\": \"img/1.png\", \"note\": \"caf\xc3\xa9\"}");
  EXPECT_EQ(records[1]["id"], 1000);
  EXPECT_EQ(records[1]["found"], true);
  EXPECT_FALSE(records[1].contains("label"));
  EXPECT_EQ(records[2]["id"], 77);
  EXPECT_EQ(records[2]["found"], false);
  auto expect_floats = [](const json& values, const float* expected, size_t n) {
    ASSERT_TRUE(values.is_array());
    ASSERT_EQ(values.size(), n);
    // Printed as the shortest decimal that reads back as the same float.
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(values[i].get<float>(), expected[i]) << i;
  };
  switch (kind) {
    case K::kPoint:
      expect_floats(records[0]["vec"], batch1.vec.data() + kDim, kDim);
      expect_floats(records[1]["vec"], batch3.vec.data(), kDim);
      break;
    case K::kGaussian:
      expect_floats(records[0]["mean"], batch1.mean.data() + kDim, kDim);
      expect_floats(records[0]["var"], batch1.var.data() + kDim, kDim);
      break;
    case K::kMog:
      expect_floats(records[0]["weights"], batch1.weights.data() + kComponents, kComponents);
      ASSERT_EQ(records[0]["mean"].size(), size_t(kComponents));
      for (int64_t c = 0; c < kComponents; ++c) {
        expect_floats(records[0]["mean"][c], batch1.mean.data() + (kComponents + c) * kDim, kDim);
        expect_floats(records[0]["var"][c], batch1.var.data() + (kComponents + c) * kDim, kDim);
      }
      break;
    case K::kCodes:
      EXPECT_EQ(records[0]["codes"].get<std::vector<int32_t>>(),
                std::vector<int32_t>(batch1.codes.begin() + kCodeDim,
                                     batch1.codes.begin() + 2 * kCodeDim));
      break;
  }

  // search: queries equal to items 0..2 find themselves first, in two-stage
  // and exhaustive mode; scores are non-increasing.
  const Items probe = MakeItems(kind, 0, 3);
  const std::vector<std::string> query = QueryFlags(kind, probe, "q");
  const std::string exact_score = kind == K::kCodes ? "logprob" : "l2";
  std::vector<json> lines;
  for (const std::vector<std::string>& mode :
       {std::vector<std::string>{}, std::vector<std::string>{"--exhaustive"}}) {
    std::vector<std::string> args =
        Concat(Cmd("search", name, {"--k", "5", "--score", exact_score}), query);
    args = Concat(args, mode);
    lines = Ok(args).JsonLines();
    ASSERT_EQ(lines.size(), 3u);
    for (int q = 0; q < 3; ++q) {
      SCOPED_TRACE(q);
      EXPECT_EQ(lines[q]["query"], q);
      const json& results = lines[q]["results"];
      ASSERT_EQ(results.size(), 5u);
      EXPECT_EQ(results[0]["id"], q);
      EXPECT_EQ(results[0]["label"], q % 3);
      for (size_t i = 1; i < results.size(); ++i) {
        EXPECT_GE(results[i - 1]["score"].get<double>(), results[i]["score"].get<double>());
      }
    }
  }

  // Payloads on request only.
  lines =
      Ok(Concat(Cmd("search", name, {"--k", "1", "--score", exact_score, "--with-payload"}), query))
          .JsonLines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["results"][0]["payload"],
            "{\"path\": \"img/1.png\", \"note\": \"caf\xc3\xa9\"}");
  EXPECT_EQ(lines[2]["results"][0]["payload"], "img/2.png");

  // Default score: uncertainty fields exactly where the kind has one.
  // Codes queries have one (their table's entropy), stored codes none.
  const bool uncertain = kind == K::kGaussian || kind == K::kMog;
  lines = Ok(Concat(Cmd("search", name, {"--k", "3"}), query)).JsonLines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].contains("query_uncertainty"), uncertain || kind == K::kCodes) << lines[0];
  ASSERT_EQ(lines[0]["results"].size(), 3u);
  EXPECT_EQ(lines[0]["results"][0].contains("uncertainty"), uncertain) << lines[0];
  EXPECT_FALSE(lines[0]["results"][0].contains("payload")) << lines[0];
  if (uncertain) {
    const double eta = lines[0]["results"][0]["uncertainty"].get<double>();
    EXPECT_GE(eta, 0.0);
    EXPECT_LE(eta, 1.0);
  }
  // Deterministic for a fixed seed.
  const std::vector<std::string> seeded =
      Concat(Cmd("search", name, {"--k", "4", "--seed", "7", "--samples", "8"}), query);
  EXPECT_EQ(Ok(seeded).out, Ok(seeded).out);
  lines = Ok(Concat(Cmd("search", name, {"--k", "3", "--no-uncertainty"}), query)).JsonLines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_FALSE(lines[0].contains("query_uncertainty"));
  EXPECT_FALSE(lines[0]["results"][0].contains("uncertainty"));
  // With every item a candidate, two-stage search equals the exhaustive one.
  EXPECT_EQ(Ok(Concat(Cmd("search", name, {"--k", "6", "--candidates", "1000"}), query)).out,
            Ok(Concat(Cmd("search", name, {"--k", "6", "--exhaustive"}), query)).out);

  // remove
  j = Ok(Cmd("remove", name,
             {"--ids", Write("rm.npy", MakeNpy(std::vector<int64_t>{0, 1000}, {2}))}))
          .Json();
  EXPECT_EQ(j["removed"], 2);
  EXPECT_EQ(ItemCount(name), n1 + 5);
  records = Ok(Cmd("get", name, {"--ids", Write("g0.npy", MakeNpy(std::vector<int64_t>{0}, {1}))}))
                .JsonLines();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["found"], false);
  lines =
      Ok(Concat(Cmd("search", name, {"--k", "3", "--exhaustive", "--score", exact_score}), query))
          .JsonLines();
  ASSERT_EQ(lines.size(), 3u);
  for (const json& hit : lines[0]["results"]) EXPECT_NE(hit["id"], 0);

  // stats, list, drop
  j = Ok({"stats", "--db", db_, "--collection", name}).Json();
  EXPECT_EQ(j["name"], name);
  EXPECT_EQ(j["kind"], KindFlag(kind));
  EXPECT_EQ(j["dim"], kind == K::kCodes ? kCodeDim : kDim);
  EXPECT_EQ(j["items"], n1 + 5);
  EXPECT_EQ(j["max_id"], 1000);
  EXPECT_EQ(j["index_trained"], true);
  EXPECT_GE(j["index_vectors"].get<int64_t>(), n1 + 5);
  for (const char* field :
       {"sequence", "index_sequence", "index_vectors", "index_trained", "index_description"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  // Every command before this one closed the database, which saved the arena
  // snapshot: this open mapped it.
  EXPECT_EQ(j["arena_source"], "snapshot") << j.dump();
  EXPECT_GT(j["arena_mapped_bytes"].get<int64_t>(), 0);
  EXPECT_FALSE(j.contains("arena_note")) << j.dump();
  Create("other", K::kPoint);
  j = Ok({"list", "--db", db_}).Json();
  auto names = j["collections"].get<std::vector<std::string>>();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{name, "other"}));
  j = Ok({"stats", "--db", db_}).Json();
  EXPECT_EQ(j["collections"].size(), 2u);
  EXPECT_EQ(Ok({"drop", "--db", db_, "--collection", name}).Json()["dropped"], name);
  j = Ok({"list", "--db", db_}).Json();
  EXPECT_EQ(j["collections"].get<std::vector<std::string>>(), std::vector<std::string>{"other"});
  Fails({"stats", "--db", db_, "--collection", name}, 1, {name});
}

INSTANTIATE_TEST_SUITE_P(AllKinds, CliKindTest,
                         ::testing::Values(K::kPoint, K::kGaussian, K::kMog, K::kCodes),
                         [](const ::testing::TestParamInfo<K>& info) {
                           return std::string(KindFlag(info.param));
                         });

// An IVF stage 1 that trains on the collection: with every list probed and
// every item a candidate, two-stage search must equal the exhaustive one.
TEST_F(CliTest, TrainedIvfStageOneMatchesExhaustiveSearch) {
  const std::string prefix = Path("ivf");
  Ok({"generate", "--kind", "gaussian", "--n", "400", "--dim", "8", "--classes", "4", "--queries",
      "5", "--seed", "9", "--out", prefix});
  Ok({"create", "--db", db_, "--collection", "ivf", "--kind", "gaussian", "--dim", "8", "--index",
      "IVF4,Flat"});
  Ok({"ingest", "--db", db_, "--collection", "ivf", "--mean", prefix + ".mean.npy", "--var",
      prefix + ".var.npy"});
  const json stats = Ok({"stats", "--db", db_, "--collection", "ivf"}).Json();
  EXPECT_EQ(stats["index_trained"], true);
  EXPECT_EQ(stats["index_vectors"], 400);
  const std::vector<std::string> query =
      Cmd("search", "ivf",
          {"--mean", prefix + ".query.mean.npy", "--var", prefix + ".query.var.npy", "--k", "7"});
  const RunResult two_stage = Ok(Concat(query, {"--nprobe", "4", "--candidates", "400"}));
  EXPECT_EQ(two_stage.JsonLines().size(), 5u);
  EXPECT_EQ(two_stage.out, Ok(Concat(query, {"--exhaustive"})).out);
  // Probing one list of four with few candidates still answers every query.
  const RunResult narrow = Ok(Concat(query, {"--nprobe", "1", "--candidates", "7"}));
  EXPECT_EQ(narrow.JsonLines().size(), 5u);
}

// ---------------------------------------------------------------- errors

class CliErrorTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    Create("g", K::kGaussian);
    const Items it = MakeItems(K::kGaussian, 0, kInitial);
    Ok(Concat(Cmd("ingest", "g"), ItemFlags(K::kGaussian, it, "init")));
    ASSERT_EQ(ItemCount("g"), kInitial);
  }
  // Every failed command must leave the collection as it was.
  void ExpectUnchanged() { EXPECT_EQ(ItemCount("g"), kInitial); }

  static constexpr int64_t kInitial = 10;
};

TEST_F(CliErrorTest, UnknownCollectionAndDatabase) {
  const Items it = MakeItems(K::kGaussian, 100, 2);
  Fails(Concat(Cmd("ingest", "nope"), ItemFlags(K::kGaussian, it, "x")), 1, {"nope"});
  Fails(Concat(Cmd("search", "nope", {"--k", "2"}), ItemFlags(K::kGaussian, it, "x")), 1, {"nope"});
  Fails(Cmd("get", "nope", {"--ids", Write("i.npy", MakeNpy(std::vector<int64_t>{1}, {1}))}), 1,
        {"nope"});
  Fails({"drop", "--db", db_, "--collection", "nope"}, 1, {"nope"});
  // A missing database directory is reported and not created.
  const std::string missing = Path("no_such_db");
  Fails({"list", "--db", missing}, 1, {missing});
  Fails({"stats", "--db", missing}, 1, {missing});
  EXPECT_FALSE(fs::exists(missing));
  ExpectUnchanged();
}

TEST_F(CliErrorTest, WrongShapesNameTheFileAndBothShapes) {
  const std::vector<float> wide(2 * (kDim + 1), 1.f);
  const std::string mean = Write("wide_mean.npy", MakeNpy(wide, {2, kDim + 1}));
  const std::string var = Write("wide_var.npy", MakeNpy(wide, {2, kDim + 1}));
  Fails(Concat(Cmd("ingest", "g"), {"--mean", mean, "--var", var}), 1,
        {mean, "--mean", "expected shape (n, 4), got (2, 5)"});

  // Means and variances disagree on the row count.
  const Items it = MakeItems(K::kGaussian, 100, 3);
  const std::string mean3 = Write("m3.npy", MakeNpy(it.mean, {3, kDim}));
  const std::string var2 = Write(
      "v2.npy", MakeNpy(std::vector<float>(it.var.begin(), it.var.begin() + 2 * kDim), {2, kDim}));
  Fails(Concat(Cmd("ingest", "g"), {"--mean", mean3, "--var", var2}), 1,
        {var2, "expected shape (3, 4), got (2, 4)"});

  // Labels and ids of the wrong length, payload line count.
  const std::vector<std::string> good = ItemFlags(K::kGaussian, it, "good");
  const std::string labels = Write("l.npy", MakeNpy(std::vector<int64_t>{1, 2}, {2}));
  Fails(Concat(Cmd("ingest", "g", {"--labels", labels}), good), 1, {labels, "(3,)", "(2,)"});
  const std::string ids = Write("ids.npy", MakeNpy(std::vector<int64_t>{50, 51, 52, 53}, {4}));
  Fails(Concat(Cmd("ingest", "g", {"--ids", ids}), good), 1, {ids, "(3,)", "(4,)"});
  std::ofstream(Path("p.txt")) << "a\nb\n";
  Fails(Concat(Cmd("ingest", "g", {"--payloads", Path("p.txt")}), good), 1, {Path("p.txt"), "3"});
  // Float ids that are not integers.
  const std::string float_ids = Write("fids.npy", MakeNpy(std::vector<float>{1.f, 2.5f, 3.f}, {3}));
  Fails(Concat(Cmd("ingest", "g", {"--ids", float_ids}), good), 1, {float_ids, "integer"});
  // Integer means.
  const std::string int_mean = Write("imean.npy", MakeNpy(std::vector<int32_t>(12, 1), {3, kDim}));
  Fails(Concat(Cmd("ingest", "g"), {"--mean", int_mean, "--var", good[3]}), 1, {int_mean, "float"});
  // Query shapes are checked as well.
  Fails(Concat(Cmd("search", "g", {"--k", "2"}), {"--mean", mean, "--var", var}), 1,
        {mean, "expected shape (n, 4), got (2, 5)"});
  ExpectUnchanged();
}

TEST_F(CliErrorTest, FlagsThatDoNotFitTheKindAreUsageErrors) {
  const Items it = MakeItems(K::kPoint, 100, 2);
  const std::vector<std::string> vec = ItemFlags(K::kPoint, it, "p");
  Fails(Concat(Cmd("ingest", "g"), vec), 2, {"--vec", "gaussian"});
  const Items g = MakeItems(K::kGaussian, 100, 2);
  std::vector<std::string> mean_only = ItemFlags(K::kGaussian, g, "g");
  mean_only.resize(2);
  Fails(Concat(Cmd("ingest", "g"), mean_only), 2, {"--var"});
  Fails(Concat(Cmd("search", "g", {"--k", "2"}), vec), 2, {"--vec"});
  ExpectUnchanged();
}

TEST_F(CliErrorTest, TruncatedAndCorruptNpyFiles) {
  const Items it = MakeItems(K::kGaussian, 100, 3);
  std::vector<std::string> flags = ItemFlags(K::kGaussian, it, "t");
  const std::string bytes = ReadWholeFile(flags[1]);
  std::ofstream(flags[1], std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 3));
  Fails(Concat(Cmd("ingest", "g"), flags), 1, {flags[1], "truncated"});
  std::ofstream(flags[1], std::ios::binary | std::ios::trunc) << "not an array";
  Fails(Concat(Cmd("ingest", "g"), flags), 1, {flags[1], "not a .npy"});
  Fails(Concat(Cmd("ingest", "g"), {"--mean", Path("missing.npy"), "--var", flags[3]}), 1,
        {Path("missing.npy")});
  ExpectUnchanged();
}

TEST_F(CliErrorTest, InvalidValuesAreRejectedByTheDatabase) {
  Items it = MakeItems(K::kGaussian, 100, 3);
  it.mean[5] = std::numeric_limits<float>::quiet_NaN();
  RunResult r = Fails(Concat(Cmd("ingest", "g"), ItemFlags(K::kGaussian, it, "nan")), 1, {});
  ExpectMentionsOneOf(r, {"nan", "finite"});
  ExpectUnchanged();

  it = MakeItems(K::kGaussian, 100, 3);
  it.var[7] = 0.f;
  r = Fails(Concat(Cmd("ingest", "g"), ItemFlags(K::kGaussian, it, "zero")), 1, {});
  ExpectMentionsOneOf(r, {"varian"});
  ExpectUnchanged();

  it = MakeItems(K::kGaussian, 100, 3);
  it.var[2] = -1.f;
  r = Fails(Concat(Cmd("ingest", "g"), ItemFlags(K::kGaussian, it, "neg")), 1, {});
  ExpectMentionsOneOf(r, {"varian"});
  ExpectUnchanged();

  it = MakeItems(K::kGaussian, 100, 3);
  it.var[2] = std::numeric_limits<float>::infinity();
  r = Fails(Concat(Cmd("ingest", "g"), ItemFlags(K::kGaussian, it, "inf")), 1, {});
  ExpectMentionsOneOf(r, {"inf", "finite"});
  ExpectUnchanged();

  // NaN in a query.
  it = MakeItems(K::kGaussian, 100, 1);
  it.mean[0] = std::numeric_limits<float>::quiet_NaN();
  r = Fails(Concat(Cmd("search", "g", {"--k", "2"}), ItemFlags(K::kGaussian, it, "qnan")), 1, {});
  ExpectMentionsOneOf(r, {"nan", "finite"});
}

// A half-float coarse index would store a coarse value beyond what a half
// holds as an infinity: ingest and upsert refuse the batch (exit 1), naming
// the item's id, the coarse dimension and the value, and nothing is written.
// Under an IVF the bound is 32736 (the lists store residuals); values up to
// it are taken and found.
TEST_F(CliErrorTest, HalfFloatIndexesRefuseCoarseValuesTheyCannotHold) {
  Create("h", K::kGaussian, "IVF4,SQfp16");
  const std::string ids = Write("h.ids.npy", MakeNpy(std::vector<int64_t>{0, 1, 2}, {3}));
  Ok(Concat(Cmd("ingest", "h", {"--ids", ids}),
            ItemFlags(K::kGaussian, MakeItems(K::kGaussian, 0, 3), "h0")));
  const std::string new_ids = Write("h.new.npy", MakeNpy(std::vector<int64_t>{10, 11}, {2}));
  Items far = MakeItems(K::kGaussian, 10, 2);
  far.mean[kDim + 2] = 70000.0f;  // item id 11, coarse dimension 2
  Fails(Concat(Cmd("ingest", "h", {"--ids", new_ids}), ItemFlags(K::kGaussian, far, "h1")), 1,
        {"mean 70000 of item id 11 (coarse dimension 2) is outside what index 'IVF4,SQfp16' "
         "holds",
         "within +-32736", "index 'IVF4,Flat'"});
  far.mean[kDim + 2] = -70000.0f;
  Fails(Concat(Cmd("ingest", "h", {"--ids", new_ids}), ItemFlags(K::kGaussian, far, "h2")), 1,
        {"mean -70000 of item id 11 (coarse dimension 2)"});
  // An upsert of existing items, past the bound by one float.
  far = MakeItems(K::kGaussian, 20, 3);
  far.mean[0] = std::nextafter(32736.0f, 1e9f);
  Fails(Concat(Cmd("ingest", "h", {"--ids", ids, "--upsert"}), ItemFlags(K::kGaussian, far, "h3")),
        1, {"mean 32736.002 of item id 0 (coarse dimension 0)"});
  EXPECT_EQ(ItemCount("h"), 3);
  const std::vector<json> records =
      Ok(Cmd("get", "h", {"--ids", Write("g.npy", MakeNpy(std::vector<int64_t>{0, 11}, {2}))}))
          .JsonLines();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_FLOAT_EQ(records[0]["mean"][0].get<float>(), MakeItems(K::kGaussian, 0, 1).mean[0]);
  EXPECT_EQ(records[1]["found"], false) << records[1].dump();
  // At the bound: taken and found.
  Items edge = MakeItems(K::kGaussian, 30, 1);
  edge.mean[1] = -32736.0f;
  Ok(Concat(
      Cmd("ingest", "h", {"--ids", Write("h.edge.npy", MakeNpy(std::vector<int64_t>{30}, {1}))}),
      ItemFlags(K::kGaussian, edge, "h4")));
  EXPECT_EQ(ItemCount("h"), 4);
  const std::vector<json> lines = Ok(Concat(Cmd("search", "h", {"--k", "2", "--score", "l2"}),
                                            ItemFlags(K::kGaussian, edge, "q")))
                                      .JsonLines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["results"][0]["id"], 30);
  // A flat half-float store: the bound is 65504 itself.
  Create("f", K::kGaussian, "SQfp16");
  edge.mean[1] = -65504.0f;
  Ok(Concat(Cmd("ingest", "f"), ItemFlags(K::kGaussian, edge, "f1")));
  edge.mean[1] = -70000.0f;
  Fails(Concat(Cmd("ingest", "f"), ItemFlags(K::kGaussian, edge, "f2")), 1,
        {"mean -70000 of item 0 of the batch (coarse dimension 1) is outside what index 'SQfp16' "
         "holds: it stores half floats (largest magnitude 65504)"});
  EXPECT_EQ(ItemCount("f"), 1);
}

// --std, --log-var and --log-std are converted to the same stored variances
// as --var; a bad value names the file, the form and the item.
TEST_F(CliErrorTest, VarianceFormsConvertOnceAndAreChecked) {
  const Items it = MakeItems(K::kGaussian, 100, 3);
  std::vector<float> std_dev, log_var, log_std;
  for (float v : it.var) {
    std_dev.push_back(std::sqrt(v));
    log_var.push_back(std::log(v));
    log_std.push_back(0.5f * std::log(v));
  }
  const std::string mean = Write("f.mean.npy", MakeNpy(it.mean, {3, kDim}));
  const std::vector<std::pair<std::string, const std::vector<float>*>> forms = {
      {"--std", &std_dev}, {"--log-var", &log_var}, {"--log-std", &log_std}};
  int64_t first = 200;
  for (const auto& [flag, values] : forms) {
    const std::string file = Write("f" + flag + ".npy", MakeNpy(*values, {3, kDim}));
    const std::string ids = Write("f" + flag + ".ids.npy",
                                  MakeNpy(std::vector<int64_t>{first, first + 1, first + 2}, {3}));
    Ok(Concat(Cmd("ingest", "g"), {"--mean", mean, flag, file, "--ids", ids}));
    const std::vector<json> got = Ok(Cmd("get", "g", {"--ids", ids})).JsonLines();
    ASSERT_EQ(got.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < kDim; ++j) {
        EXPECT_NEAR(got[size_t(i)]["var"][size_t(j)].get<double>(), it.var[size_t(i * kDim + j)],
                    1e-5 * it.var[size_t(i * kDim + j)])
            << flag;
      }
    }
    first += 10;
  }
  const int64_t items = ItemCount("g");
  // A std that is not > 0, a log that overflows: refused, naming the item.
  std::vector<float> bad = std_dev;
  bad[kDim + 1] = -0.5f;
  Fails(Concat(Cmd("ingest", "g"),
               {"--mean", mean, "--std", Write("bad_std.npy", MakeNpy(bad, {3, kDim}))}),
        1, {"bad_std.npy (--std)", "std of item 1", "must be finite and > 0"});
  bad = log_var;
  bad[2 * kDim] = 500.f;
  Fails(Concat(Cmd("ingest", "g"),
               {"--mean", mean, "--log-var", Write("bad_lv.npy", MakeNpy(bad, {3, kDim}))}),
        1, {"log_var of item 2", "outside float's range"});
  // One form at a time.
  Fails(Concat(Cmd("ingest", "g"),
               {"--mean", mean, "--std", Path("f--std.npy"), "--var", Path("f--std.npy")}),
        2, {"give the variances once"});
  EXPECT_EQ(ItemCount("g"), items);
}

TEST_F(CliErrorTest, CodeSymbolsOutsideTheAlphabet) {
  Create("codes", K::kCodes);
  Ok(Concat(Cmd("ingest", "codes"), ItemFlags(K::kCodes, MakeItems(K::kCodes, 0, 4), "c0")));
  for (int32_t bad : {int32_t(kCodeK), int32_t(-1), int32_t(1000)}) {
    SCOPED_TRACE(bad);
    Items it = MakeItems(K::kCodes, 10, 3);
    it.codes[4] = bad;
    const RunResult r =
        Fails(Concat(Cmd("ingest", "codes"), ItemFlags(K::kCodes, it, "bad")), 1, {});
    ExpectMentionsOneOf(r, {"symbol", "code"});
    EXPECT_EQ(ItemCount("codes"), 4);
  }
  // A value beyond int32 is not wrapped into a valid symbol.
  std::vector<int64_t> wild(3 * kCodeDim, 1);
  wild[2] = (int64_t{1} << 32) + 1;
  Fails(
      Concat(Cmd("ingest", "codes"), {"--codes", Write("wild.npy", MakeNpy(wild, {3, kCodeDim}))}),
      1, {"wild.npy", "4294967297"});
  EXPECT_EQ(ItemCount("codes"), 4);
}

TEST_F(CliErrorTest, DuplicateIds) {
  const Items it = MakeItems(K::kGaussian, 100, 3);
  const std::vector<std::string> flags = ItemFlags(K::kGaussian, it, "d");
  // Within the batch.
  RunResult r = Fails(
      Concat(Cmd("ingest", "g",
                 {"--ids", Write("dup.npy", MakeNpy(std::vector<int64_t>{500, 501, 500}, {3}))}),
             flags),
      1, {"500"});
  ExpectMentionsOneOf(r, {"duplicate", "exist", "unique", "more than once"});
  ExpectUnchanged();
  // Against an id already in the collection.
  r = Fails(
      Concat(Cmd("ingest", "g",
                 {"--ids", Write("old.npy", MakeNpy(std::vector<int64_t>{600, 3, 601}, {3}))}),
             flags),
      1, {"3"});
  ExpectMentionsOneOf(r, {"duplicate", "exist", "unique", "more than once"});
  ExpectUnchanged();
}

TEST_F(CliErrorTest, RemovingAnUnknownIdRemovesNothing) {
  const RunResult r =
      Fails(Cmd("remove", "g",
                {"--ids", Write("rm.npy", MakeNpy(std::vector<int64_t>{1, 2, 4242}, {3}))}),
            1, {"4242"});
  ExpectUnchanged();
  const std::vector<json> records =
      Ok(Cmd("get", "g", {"--ids", Write("g.npy", MakeNpy(std::vector<int64_t>{1, 2}, {2}))}))
          .JsonLines();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["found"], true);
  EXPECT_EQ(records[1]["found"], true);
}

TEST_F(CliErrorTest, IntegerFlagsAreBase10AndNeverClamped) {
  // strtoll would clamp this to INT64_MAX and remove that item instead.
  Fails(Cmd("remove", "g", {"--id", "99999999999999999999"}), 2, {"99999999999999999999", "range"});
  Fails(Cmd("remove", "g", {"--id", "-99999999999999999999"}), 2, {"range"});
  Fails(Cmd("remove", "g", {"--id", "0x3"}), 2, {"0x3"});
  ExpectUnchanged();
  // "010" is ten, not octal eight.
  const std::vector<json> records = Ok(Cmd("get", "g", {"--id", "010"})).JsonLines();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["id"], 10);
  EXPECT_EQ(records[0]["found"], false);
  // Unsigned flags do not wrap negative numbers.
  Fails(
      {"create", "--db", db_, "--collection", "s", "--kind", "point", "--dim", "2", "--seed", "-1"},
      2, {"-1"});
  Fails(Cmd("search", "g", {"--k", "4294967297", "--mean", "m.npy", "--var", "v.npy"}), 2,
        {"4294967297"});
  // Flags with their own checks (here: positive) get the same parsing.
  Fails(Cmd("search", "g", {"--k", "0x10", "--mean", "m.npy", "--var", "v.npy"}), 2, {"0x10"});
  const json created =
      Ok({"create", "--db", db_, "--collection", "ten", "--kind", "point", "--dim", "010"}).Json();
  EXPECT_EQ(created["created"]["dim"], 10);
}

TEST_F(CliErrorTest, IndexStringsThatWouldCrashAreRefusedAtCreate) {
  for (const char* factory : {"IVF0,Flat", "HNSW0", "NSG4", "IVF2,PQ0", "IVF100000000,Flat"}) {
    Fails({"create", "--db", db_, "--collection", "bad", "--kind", "gaussian", "--dim", "4",
           "--index", factory},
          1, {factory});
  }
  const json list = Ok({"list", "--db", db_}).Json();
  EXPECT_EQ(list["collections"], json::array({"g"}));
  ExpectUnchanged();
}

TEST_F(CliErrorTest, IngestTokenMakesARetrySafe) {
  const Items it = MakeItems(K::kGaussian, 100, 3);
  const std::vector<std::string> ingest =
      Concat(Cmd("ingest", "g", {"--token", "batch-7"}), ItemFlags(K::kGaussian, it, "tok"));
  const json first = Ok(ingest).Json();
  EXPECT_EQ(first["ingested"], 3);
  EXPECT_FALSE(first.contains("replayed"));
  const json again = Ok(ingest).Json();
  EXPECT_EQ(again["ingested"], 0);
  EXPECT_EQ(again["replayed"], true);
  EXPECT_EQ(again["first_id"], first["first_id"]);
  EXPECT_EQ(again["last_id"], first["last_id"]);
  EXPECT_EQ(again["sequence"], first["sequence"]);
  EXPECT_EQ(ItemCount("g"), kInitial + 3);
  // The token of another batch is refused, and nothing is written.
  const Items other = MakeItems(K::kGaussian, 200, 3);
  Fails(Concat(Cmd("ingest", "g", {"--token", "batch-7"}), ItemFlags(K::kGaussian, other, "o")), 1,
        {"batch-7", "different batch"});
  EXPECT_EQ(ItemCount("g"), kInitial + 3);
}

TEST_F(CliErrorTest, LostCurrentFileIsRefusedThenRepaired) {
  ASSERT_TRUE(fs::remove(fs::path(db_) / "store" / "CURRENT"));
  // create would have started a new, empty store over the old tables.
  Fails({"create", "--db", db_, "--collection", "new", "--kind", "point", "--dim", "2"}, 1,
        {"CURRENT", "repair"});
  Fails({"stats", "--db", db_}, 1, {"CURRENT"});
  const json repaired = Ok({"repair", "--db", db_}).Json();
  ASSERT_EQ(repaired["collections"].size(), 1u);
  EXPECT_EQ(repaired["collections"][0]["name"], "g");
  EXPECT_EQ(repaired["collections"][0]["items"], kInitial);
  ExpectUnchanged();
}

TEST_F(CliErrorTest, BackupCopiesTheDatabaseAndRefusesANonEmptyDirectory) {
  const json backup = Ok({"backup", "--db", db_, "--to", Path("bk")}).Json();
  ASSERT_EQ(backup["collections"].size(), 1u);
  EXPECT_EQ(backup["collections"][0]["name"], "g");
  EXPECT_EQ(backup["collections"][0]["items"], kInitial);
  const json copy = Ok({"stats", "--db", Path("bk"), "--collection", "g"}).Json();
  EXPECT_EQ(copy["items"], kInitial);
  EXPECT_EQ(copy["sequence"], backup["collections"][0]["sequence"]);
  Fails({"backup", "--db", db_, "--to", Path("bk")}, 1, {"not empty"});
  EXPECT_EQ(Ok({"verify", "--db", Path("bk")}).Json()["ok"], true);
  ExpectUnchanged();
}

// Every file under `dir` with its bytes.
std::map<std::string, std::string> DirectoryBytes(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      files[entry.path().string()] = cli_testing::ReadWholeFile(entry.path().string());
    }
  }
  return files;
}

TEST_F(CliErrorTest, VerifyReportsADamagedIndexFileAndChangesNothing) {
  const json clean = Ok({"verify", "--db", db_, "--collection", "g"}).Json();
  EXPECT_EQ(clean["ok"], true);
  EXPECT_EQ(clean["problems"].size(), 0u);
  EXPECT_EQ(clean["collections"][0]["items"], kInitial);

  const std::string file = (fs::path(db_) / "index" / "1.hidx").string();
  std::string bytes = cli_testing::ReadWholeFile(file);
  ASSERT_GT(bytes.size(), 60u);
  bytes[bytes.size() - 8] = char(bytes[bytes.size() - 8] ^ 0x01);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  const auto before = DirectoryBytes(db_);
  const std::vector<std::string> args = {"verify", "--db", db_};
  const RunResult r = Run(args);
  EXPECT_EQ(r.exit_code, 1) << Describe(args, r);
  EXPECT_NE(r.err.find("hedgedb: error: verify found 1 problem"), std::string::npos) << r.err;
  const json report = r.Json();
  EXPECT_EQ(report["ok"], false);
  ASSERT_EQ(report["problems"].size(), 1u) << r.out;
  EXPECT_EQ(report["problems"][0]["kind"], "index_corrupt");
  EXPECT_EQ(report["problems"][0]["collection"], "g");
  EXPECT_EQ(DirectoryBytes(db_), before);
  Fails({"verify", "--db", db_, "--collection", "nope"}, 1, {"nope"});
}

// Reals may be float64 and ids, labels and codes any integer type.
TEST_F(CliTest, AcceptsFloat64AndEveryIntegerType) {
  Create("g", K::kGaussian);
  const Items it = MakeItems(K::kGaussian, 0, 3);
  const std::vector<double> mean(it.mean.begin(), it.mean.end());
  const std::vector<double> var(it.var.begin(), it.var.end());
  const std::vector<uint16_t> ids = {7, 8, 65535};
  const std::vector<int8_t> labels = {-1, 0, 1};
  json j = Ok(Cmd("ingest", "g",
                  {"--mean", Write("m.npy", MakeNpy(NpyType::kFloat64, mean.data(), {3, kDim})),
                   "--var", Write("v.npy", MakeNpy(NpyType::kFloat64, var.data(), {3, kDim})),
                   "--ids", Write("i.npy", MakeNpy(NpyType::kUInt16, ids.data(), {3})), "--labels",
                   Write("l.npy", MakeNpy(NpyType::kInt8, labels.data(), {3}))}))
               .Json();
  EXPECT_EQ(j["last_id"], 65535);
  const std::vector<json> records = Ok(Cmd("get", "g", {"--id", "65535", "--id", "7"})).JsonLines();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["label"], 1);
  EXPECT_EQ(records[1]["label"], -1);
  EXPECT_EQ(records[0]["mean"][1].get<float>(), it.mean[2 * kDim + 1]);

  Create("c", K::kCodes);
  const Items codes = MakeItems(K::kCodes, 0, 2);
  const std::vector<uint8_t> small(codes.codes.begin(), codes.codes.end());
  j = Ok(Cmd("ingest", "c",
             {"--codes", Write("c.npy", MakeNpy(NpyType::kUInt8, small.data(), {2, kCodeDim}))}))
          .Json();
  EXPECT_EQ(j["ingested"], 2);
  const std::vector<json> got = Ok(Cmd("get", "c", {"--id", "1"})).JsonLines();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["codes"].get<std::vector<int32_t>>(),
            std::vector<int32_t>(codes.codes.begin() + kCodeDim, codes.codes.end()));
}

// JSON has no infinities: a codes score of -inf prints as null.
TEST_F(CliTest, MinusInfinityScoresPrintAsNull) {
  Create("c", K::kCodes);
  Ok(Concat(Cmd("ingest", "c"), ItemFlags(K::kCodes, MakeItems(K::kCodes, 0, 2), "c")));
  // Probability 0 for every symbol but item 0's first one.
  const Items item0 = MakeItems(K::kCodes, 0, 1);
  std::vector<float> logp(kCodeDim * kCodeK, -std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < kCodeDim; ++j) logp[j * kCodeK + item0.codes[j]] = 0.f;
  const std::vector<json> lines = Ok(Cmd("search", "c",
                                         {"--k", "2", "--exhaustive", "--logp",
                                          Write("inf.npy", MakeNpy(logp, {1, kCodeDim, kCodeK}))}))
                                      .JsonLines();
  ASSERT_EQ(lines.size(), 1u);
  ASSERT_EQ(lines[0]["results"].size(), 2u);
  EXPECT_EQ(lines[0]["results"][0]["id"], 0);
  EXPECT_EQ(lines[0]["results"][0]["score"], 0.0);
  EXPECT_TRUE(lines[0]["results"][1]["score"].is_null()) << lines[0];
}

TEST_F(CliTest, MogSampleDefaultIsAMultipleOfTheComponents) {
  json j = Ok({"create", "--db", db_, "--collection", "m3", "--kind", "mog", "--dim", "4",
               "--components", "3"})
               .Json();
  EXPECT_EQ(j["created"]["samples"], 9);
  j = Ok({"create", "--db", db_, "--collection", "m4", "--kind", "mog", "--dim", "4",
          "--components", "4"})
          .Json();
  EXPECT_EQ(j["created"]["samples"], 8);
  // An explicit count is the user's and is checked by the database.
  Fails({"create", "--db", db_, "--collection", "m3b", "--kind", "mog", "--dim", "4",
         "--components", "3", "--samples", "8"},
        1, {"samples"});
}

TEST_F(CliErrorTest, CreatingAnExistingCollectionFails) {
  Fails({"create", "--db", db_, "--collection", "g", "--kind", "point", "--dim", "3"}, 1, {"g"});
  const json j = Ok({"stats", "--db", db_, "--collection", "g"}).Json();
  EXPECT_EQ(j["kind"], "gaussian");
  ExpectUnchanged();
}

TEST_F(CliErrorTest, IdFlagsAndIdFilesAreExclusive) {
  const std::string ids = Write("ids.npy", MakeNpy(std::vector<int64_t>{1}, {1}));
  Fails(Cmd("get", "g"), 2, {"--ids"});
  Fails(Cmd("get", "g", {"--ids", ids, "--id", "2"}), 2, {"--id"});
  Fails(Cmd("remove", "g"), 2, {"--ids"});
  const std::vector<json> records = Ok(Cmd("get", "g", {"--id", "2", "--id", "12345"})).JsonLines();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["found"], true);
  EXPECT_EQ(records[1]["found"], false);
  EXPECT_EQ(Ok(Cmd("remove", "g", {"--id", "2", "--id", "3"})).Json()["removed"], 2);
  EXPECT_EQ(ItemCount("g"), kInitial - 2);
}

// Searching a collection without live items returns empty result lists, in
// both search modes, before any ingest and after everything was removed.
TEST_F(CliTest, SearchingAnEmptyCollectionReturnsNoResults) {
  for (K kind : {K::kPoint, K::kGaussian, K::kCodes}) {
    SCOPED_TRACE(KindFlag(kind));
    const std::string name = std::string("empty_") + KindFlag(kind);
    // Trained stage-1 indexes (Flat; PQ for codes), so searches use FAISS.
    Create(name, kind, kind == K::kCodes ? "" : "Flat");
    const std::vector<std::string> query = QueryFlags(kind, MakeItems(kind, 0, 2), name + "_q");
    auto expect_empty = [&](const std::vector<std::string>& mode) {
      const RunResult r = Run(Concat(Concat(Cmd("search", name, {"--k", "3"}), query), mode));
      ASSERT_EQ(r.exit_code, 0) << "exit 139 = SIGSEGV; stderr: " << r.err;
      const std::vector<json> lines = r.JsonLines();
      ASSERT_EQ(lines.size(), 2u);
      EXPECT_TRUE(lines[0]["results"].empty());
      EXPECT_TRUE(lines[1]["results"].empty());
    };
    expect_empty({});
    expect_empty({"--exhaustive"});
    Ok(Concat(Cmd("ingest", name), ItemFlags(kind, MakeItems(kind, 0, 3), name + "_items")));
    Ok(Cmd("remove", name, {"--id", "0", "--id", "1", "--id", "2"}));
    EXPECT_EQ(ItemCount(name), 0);
    expect_empty({});
    expect_empty({"--exhaustive"});
  }
}

// Payloads are bytes: every byte value goes in (--payloads-base64) and comes
// back unchanged in get and search, as "payload" when it is UTF-8 text and
// "payload_base64" otherwise.
TEST_F(CliTest, BinaryPayloadsRoundTripInGetAndSearch) {
  Create("bin", K::kGaussian, "Flat");
  // Python: base64.b64encode(bytes(range(256))); then "caf\xc3\xa9" (UTF-8).
  const std::string all_bytes =
      "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+"
      "P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+"
      "AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/"
      "wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w==";
  std::ofstream(Path("p64.txt")) << all_bytes << "\nY2Fmw6k=\n";
  const Items items = MakeItems(K::kGaussian, 0, 2);
  Ok(Concat(Cmd("ingest", "bin", {"--payloads", Path("p64.txt"), "--payloads-base64"}),
            ItemFlags(K::kGaussian, items, "bin")));
  const std::string ids = Write("bin_ids.npy", MakeNpy(std::vector<int64_t>{0, 1}, {2}));
  std::vector<json> records = Ok(Cmd("get", "bin", {"--ids", ids})).JsonLines();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["payload_base64"], all_bytes);
  EXPECT_FALSE(records[0].contains("payload"));
  EXPECT_EQ(records[1]["payload"], "caf\xc3\xa9");
  EXPECT_FALSE(records[1].contains("payload_base64"));
  std::vector<json> lines =
      Ok(Concat(Cmd("search", "bin", {"--k", "2", "--with-payload", "--exhaustive"}),
                QueryFlags(K::kGaussian, items, "bin_q")))
          .JsonLines();
  ASSERT_EQ(lines.size(), 2u);
  for (const json& line : lines) {
    for (const json& hit : line["results"]) {
      if (hit["id"] == 0) {
        EXPECT_EQ(hit["payload_base64"], all_bytes) << line;
      }
      if (hit["id"] == 1) {
        EXPECT_EQ(hit["payload"], "caf\xc3\xa9") << line;
      }
    }
  }
  // A line that is not base64 fails the batch, naming the file and line.
  std::ofstream(Path("bad64.txt")) << "Y2Fmw6k=\nnot base64!\n";
  Fails(Concat(Cmd("ingest", "bin", {"--payloads", Path("bad64.txt"), "--payloads-base64"}),
               ItemFlags(K::kGaussian, MakeItems(K::kGaussian, 2, 2), "bin2")),
        1, {Path("bad64.txt"), "line 2", "base64"});
  EXPECT_EQ(ItemCount("bin"), 2);
}

// Batches lost with the store's write-ahead log are reported when the
// collection opens: a warning on stderr and "lost_writes" in stats.
TEST_F(CliTest, LostWritesAreReportedOnStderrAndInStats) {
  Create("w", K::kGaussian, "Flat");
  Ok(Concat(Cmd("ingest", "w"), ItemFlags(K::kGaussian, MakeItems(K::kGaussian, 0, 4), "w1")));
  // This open moves batch 1 from the log into a table; batch 2 stays in the
  // log (closing does not flush it), the index file covers sequence 2.
  Ok(Concat(Cmd("ingest", "w"), ItemFlags(K::kGaussian, MakeItems(K::kGaussian, 4, 4), "w2")));
  for (const auto& e : fs::directory_iterator(fs::path(db_) / "store")) {
    if (e.path().extension() == ".log") fs::remove(e.path());
  }
  const RunResult r = Ok(Cmd("stats", "w"));
  const std::string expected =
      "collection 'w': lost writes: the index file covered sequence 2, the store has 1";
  EXPECT_EQ(r.Json()["lost_writes"].get<std::string>().rfind(expected, 0), 0u) << r.out;
  EXPECT_EQ(r.Json()["items"], 4);
  EXPECT_NE(r.err.find("hedgedb: warning: " + expected), std::string::npos) << r.err;
  // Reported once: the rebuilt index file matches the store.
  const RunResult again = Ok(Cmd("stats", "w"));
  EXPECT_FALSE(again.Json().contains("lost_writes"));
  EXPECT_EQ(again.err, "");
}

// ---------------------------------------------------------------- match parameters

// The default match parameters (a = 1, b = 0) cannot express a match: create
// says so (stderr and the JSON's "warning"), naming the fix, and so does a
// search whose score or eta reads them; good parameters, a score that does
// not read them, and codes collections get no warning.
TEST_F(CliTest, DefaultMatchParametersWarnNamingTheFix) {
  auto warned = [](const RunResult& r) {
    return r.err.find("hedgedb: warning: collection 'd' has match_b = 0 <= 0") != std::string::npos;
  };
  const RunResult created =
      Ok({"create", "--db", db_, "--collection", "d", "--kind", "gaussian", "--dim", "4"});
  EXPECT_TRUE(warned(created)) << created.err;
  for (const char* fix : {"--match-a/--match-b", "hedgedb train", "mls"}) {
    EXPECT_NE(created.err.find(fix), std::string::npos) << fix << "\n" << created.err;
  }
  EXPECT_NE(created.Json().value("warning", "").find("at most 0.5"), std::string::npos)
      << created.out;
  const Items items = MakeItems(K::kGaussian, 0, 6);
  Ok(Concat(Cmd("ingest", "d"), ItemFlags(K::kGaussian, items, "d")));
  const std::vector<std::string> query =
      ItemFlags(K::kGaussian, MakeItems(K::kGaussian, 0, 1), "q");
  const RunResult searched = Ok(Concat(Cmd("search", "d", {"--k", "1", "--exhaustive"}), query));
  EXPECT_TRUE(warned(searched)) << searched.err;
  // What the warning says: the item itself, found first, scores below 0.5
  // and its eta is at least 0.5.
  const json hit = searched.Json()["results"][0];
  EXPECT_EQ(hit["id"], 0);
  EXPECT_LT(hit["score"].get<double>(), 0.5);
  EXPECT_GE(hit["uncertainty"].get<double>(), 0.5);
  const RunResult mls = Ok(
      Concat(Cmd("search", "d", {"--k", "1", "--exhaustive", "--score", "mls", "--no-uncertainty"}),
             query));
  EXPECT_FALSE(warned(mls)) << mls.err;

  const RunResult good = Ok({"create", "--db", db_, "--collection", "g", "--kind", "gaussian",
                             "--dim", "4", "--match-a", "2", "--match-b", "3"});
  EXPECT_EQ(good.err.find("warning"), std::string::npos) << good.err;
  EXPECT_FALSE(good.Json().contains("warning")) << good.out;
  Ok(Concat(Cmd("ingest", "g"), ItemFlags(K::kGaussian, items, "g")));
  const RunResult good_search = Ok(Concat(Cmd("search", "g", {"--k", "1", "--exhaustive"}), query));
  EXPECT_EQ(good_search.err.find("warning"), std::string::npos) << good_search.err;
  EXPECT_GT(good_search.Json()["results"][0]["score"].get<double>(), 0.5);
  const RunResult codes = Ok({"create", "--db", db_, "--collection", "c", "--kind", "codes",
                              "--dim", "4", "--code-k", "4"});
  EXPECT_EQ(codes.err.find("warning"), std::string::npos) << codes.err;
}

// ---------------------------------------------------------------- generate

TEST_F(CliTest, GenerateWritesEveryKindWithTheDocumentedShapes) {
  struct Case {
    const char* kind;
    std::vector<std::pair<std::string, std::vector<int64_t>>> files;
  };
  const std::vector<Case> cases = {
      {"point", {{"vec", {40, 5}}, {"labels", {40}}, {"query.vec", {3, 5}}, {"query.labels", {3}}}},
      {"gaussian",
       {{"mean", {40, 5}},
        {"var", {40, 5}},
        {"labels", {40}},
        {"query.mean", {3, 5}},
        {"query.var", {3, 5}}}},
      {"mog",
       {{"mean", {40, 2, 5}},
        {"var", {40, 2, 5}},
        {"weights", {40, 2}},
        {"labels", {40}},
        {"query.weights", {3, 2}}}},
      {"codes",
       {{"codes", {40, 5}}, {"labels", {40}}, {"logp", {3, 5, 16}}, {"query.labels", {3}}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.kind);
    const std::string prefix = Path(std::string("gen_") + c.kind);
    const json j = Ok({"generate", "--kind", c.kind, "--n", "40", "--dim", "5", "--components", "2",
                       "--classes", "4", "--queries", "3", "--seed", "11", "--out", prefix})
                       .Json();
    EXPECT_EQ(j["n"], 40);
    for (const auto& [suffix, shape] : c.files) {
      SCOPED_TRACE(suffix);
      NpyArray a;
      const Status s = ReadNpy(prefix + "." + suffix + ".npy", &a);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(a.shape, shape);
    }
    NpyArray labels;
    ASSERT_TRUE(ReadNpy(prefix + ".labels.npy", &labels).ok());
    std::vector<int64_t> y;
    ASSERT_TRUE(NpyToInt64(labels, "labels", &y).ok());
    for (int64_t v : y) {
      EXPECT_GE(v, 0);
      EXPECT_LT(v, 4);
    }
  }
  // Variances are positive and spread widely; mog weights sum to one; code
  // tables are normalised log-probabilities.
  NpyArray a;
  std::vector<float> v;
  ASSERT_TRUE(ReadNpy(Path("gen_gaussian.var.npy"), &a).ok());
  ASSERT_TRUE(NpyToFloat32(a, "var", &v).ok());
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  EXPECT_GT(*lo, 0.f);
  EXPECT_GT(*hi / *lo, 10.f);
  ASSERT_TRUE(ReadNpy(Path("gen_mog.weights.npy"), &a).ok());
  ASSERT_TRUE(NpyToFloat32(a, "weights", &v).ok());
  for (size_t i = 0; i < v.size(); i += 2) EXPECT_NEAR(v[i] + v[i + 1], 1.f, 1e-5f);
  ASSERT_TRUE(ReadNpy(Path("gen_codes.logp.npy"), &a).ok());
  ASSERT_TRUE(NpyToFloat32(a, "logp", &v).ok());
  for (size_t row = 0; row < v.size(); row += 16) {
    double total = 0;
    for (size_t s = 0; s < 16; ++s) total += std::exp(double(v[row + s]));
    EXPECT_NEAR(total, 1.0, 1e-4);
  }
  // generate's 2 components into a collection of another count: the error
  // names the collection's count and the flag that sets it.
  Ok({"create", "--db", db_, "--collection", "one", "--kind", "mog", "--dim", "5"});
  Fails({"ingest", "--db", db_, "--collection", "one", "--mean", Path("gen_mog.mean.npy"), "--var",
         Path("gen_mog.var.npy"), "--weights", Path("gen_mog.weights.npy")},
        1, {"1-component collection", "create --components", "(n, 1, 5), got (40, 2, 5)"});
}

TEST_F(CliTest, SpreadQueriesGrowMoreUncertain) {
  Ok({"generate", "--kind", "gaussian", "--n", "10", "--dim", "32", "--queries", "5",
      "--spread-queries", "--out", Path("s")});
  NpyArray a;
  ASSERT_TRUE(ReadNpy(Path("s.query.var.npy"), &a).ok());
  std::vector<float> var;
  ASSERT_TRUE(NpyToFloat32(a, "var", &var).ok());
  double previous = 0;
  for (int q = 0; q < 5; ++q) {
    double mean_var = 0;
    for (int j = 0; j < 32; ++j) mean_var += var[q * 32 + j] / 32.0;
    EXPECT_GT(mean_var, previous * 1.5) << q;
    previous = mean_var;
  }
}

TEST_F(CliTest, GenerateIsDeterministicPerSeed) {
  const std::vector<std::string> base = {"generate", "--kind", "gaussian", "--n",
                                         "30",       "--dim",  "4",        "--seed"};
  Ok(Concat(base, {"5", "--out", Path("a")}));
  Ok(Concat(base, {"5", "--out", Path("b")}));
  Ok(Concat(base, {"6", "--out", Path("c")}));
  EXPECT_EQ(ReadWholeFile(Path("a.mean.npy")), ReadWholeFile(Path("b.mean.npy")));
  EXPECT_EQ(ReadWholeFile(Path("a.var.npy")), ReadWholeFile(Path("b.var.npy")));
  EXPECT_NE(ReadWholeFile(Path("a.mean.npy")), ReadWholeFile(Path("c.mean.npy")));
}

// Generated classes are recoverable by search: the demo's data is meaningful.
TEST_F(CliTest, GeneratedGaussiansAreSearchableByClass) {
  const std::string prefix = Path("demo");
  const json gen = Ok({"generate", "--kind", "gaussian", "--n", "600", "--dim", "16", "--classes",
                       "6", "--queries", "40", "--seed", "3", "--out", prefix})
                       .Json();
  Ok({"create", "--db", db_, "--collection", "demo", "--kind", "gaussian", "--dim", "16",
      "--match-b", gen["suggested_match_b"].dump()});
  json j = Ok({"ingest", "--db", db_, "--collection", "demo", "--mean", prefix + ".mean.npy",
               "--var", prefix + ".var.npy", "--labels", prefix + ".labels.npy"})
               .Json();
  EXPECT_EQ(j["ingested"], 600);
  NpyArray qlabels_npy;
  ASSERT_TRUE(ReadNpy(prefix + ".query.labels.npy", &qlabels_npy).ok());
  std::vector<int64_t> qlabels;
  ASSERT_TRUE(NpyToInt64(qlabels_npy, "labels", &qlabels).ok());
  const std::vector<json> lines =
      Ok({"search", "--db", db_, "--collection", "demo", "--mean", prefix + ".query.mean.npy",
          "--var", prefix + ".query.var.npy", "--k", "1", "--exhaustive"})
          .JsonLines();
  ASSERT_EQ(lines.size(), 40u);
  int correct = 0;
  for (size_t q = 0; q < lines.size(); ++q) {
    ASSERT_EQ(lines[q]["results"].size(), 1u);
    correct += lines[q]["results"][0]["label"] == qlabels[q];
  }
  // Chance is 1/6.
  EXPECT_GE(correct, 30) << correct << " of 40";
}

TEST_F(CliTest, CalibrateStoresAMapThatSearchAndStatsShow) {
  const std::string prefix = Path("cal");
  Ok({"generate", "--kind", "gaussian", "--n", "800", "--dim", "8", "--classes", "8", "--queries",
      "30", "--seed", "5", "--out", prefix});
  Ok({"create", "--db", db_, "--collection", "c", "--kind", "gaussian", "--dim", "8", "--index",
      "Flat"});
  Ok({"ingest", "--db", db_, "--collection", "c", "--mean", prefix + ".mean.npy", "--var",
      prefix + ".var.npy", "--labels", prefix + ".labels.npy"});
  const std::vector<std::string> query = {"--mean", prefix + ".query.mean.npy", "--var",
                                          prefix + ".query.var.npy"};
  auto search = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"search", "--db", db_, "--collection", "c"};
    args.insert(args.end(), query.begin(), query.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  // Before calibrating: no prob, and threshold search is refused.
  std::vector<json> lines = Ok(search({"--k", "3"})).JsonLines();
  EXPECT_FALSE(lines[0]["results"][0].contains("prob"));
  Fails(search({"--min-prob", "0.5"}), 1, {"calibrat"});
  Fails(search({}), 2, {"--k", "--min-prob"});
  Fails(search({"--k", "3", "--min-prob", "0.5"}), 2, {"excludes"});
  Fails(search({"--min-prob", "1.5"}), 2, {"min-prob"});
  // Range errors name the bound, not a 309-digit DBL_MAX.
  const RunResult zero_k = Fails(search({"--k", "0"}), 2, {"--k", "must be > 0, got 0"});
  EXPECT_LT(zero_k.err.size(), 200u) << zero_k.err;
  Fails({"calibrate", "--db", db_, "--collection", "c", "--top-ranks", "-1"}, 2,
        {"--top-ranks", "must be >= 0"});

  const json report =
      Ok({"calibrate", "--db", db_, "--collection", "c", "--plots", Path("plots")}).Json();
  EXPECT_EQ(report["score"], "mc");
  EXPECT_EQ(report["stored"], true);
  EXPECT_EQ(report["pairs"], 800 * 799);
  EXPECT_LT(report["after"]["ece"].get<double>(), 0.02);
  // The map reads each result's rank, gap and eta; the report gives the ECE
  // of the top-1 and top-10 and the top-1 per quartile of query eta.
  EXPECT_EQ(report["conditional"], true) << report.dump();
  EXPECT_NE(report["conditioned_on"].get<std::string>().find("query eta"), std::string::npos);
  for (const char* part : {"before", "after"}) {
    EXPECT_TRUE(report[part]["ece_top1"].is_number()) << part;
    EXPECT_TRUE(report[part]["ece_top10"].is_number()) << part;
    ASSERT_EQ(report[part]["eta_quartiles"].size(), 4u) << part;
    int64_t queries = 0;
    for (const json& g : report[part]["eta_quartiles"]) {
      queries += g["queries"].get<int64_t>();
      EXPECT_NEAR(g["gap"].get<double>(),
                  g["mean_top1_prob"].get<double>() - g["precision_at_1"].get<double>(), 1e-9);
    }
    EXPECT_EQ(queries, 800);
    EXPECT_TRUE(report[part]["worst_eta_gap"].is_number()) << part;
  }
  // The error-versus-reject areas: the oracle's is the least possible.
  const json& after = report["after"];
  EXPECT_LE(after["erc_area_oracle"].get<double>(), after["erc_area_eta"].get<double>());
  EXPECT_LE(after["erc_area_oracle"].get<double>(), after["erc_area_prob"].get<double>());
  EXPECT_TRUE(report["before"]["erc_area_prob"].is_number());
  // reliability.png, reliability_by_eta.png (one curve per eta quartile)
  // and uncertainty.png.
  ASSERT_EQ(report["pictures"].size(), 3u);
  EXPECT_NE(report["pictures"][1].get<std::string>().find("reliability_by_eta.png"),
            std::string::npos);
  for (const auto& path : report["pictures"]) {
    EXPECT_GT(fs::file_size(path.get<std::string>()), 1000u) << path;
  }
  lines = Ok(search({"--k", "3"})).JsonLines();
  for (const json& line : lines) {
    for (const json& hit : line["results"]) {
      ASSERT_TRUE(hit.contains("prob"));
      EXPECT_GE(hit["prob"].get<double>(), 0.0);
      EXPECT_LE(hit["prob"].get<double>(), 1.0);
    }
  }
  lines = Ok(search({"--min-prob", "0.3", "--max-results", "4"})).JsonLines();
  ASSERT_EQ(lines.size(), 30u);
  for (const json& line : lines) {
    EXPECT_LE(line["results"].size(), 4u);
    for (const json& hit : line["results"]) EXPECT_GE(hit["prob"].get<double>(), 0.3);
  }
  // Standard errors, and adaptive samples.
  lines = Ok(search({"--k", "3", "--samples", "auto", "--max-samples", "32"})).JsonLines();
  for (const json& hit : lines[0]["results"]) {
    EXPECT_GT(hit["std_error"].get<double>(), 0.0);
    EXPECT_GE(hit["samples"].get<int>(), 8);
    EXPECT_LE(hit["samples"].get<int>(), 32);
  }
  Fails(search({"--k", "3", "--samples", "0x10"}), 2, {"--samples"});
  Fails(search({"--k", "3", "--samples", "0"}), 2, {"--samples"});
  json stats = Ok({"stats", "--db", db_, "--collection", "c"}).Json();
  ASSERT_EQ(stats["calibrations"].size(), 1u);
  EXPECT_EQ(stats["calibrations"][0]["score"], "mc");
  EXPECT_EQ(stats["calibrations"][0]["conditional"], true);
  // --unconditional: the score alone, as maps before version 2.
  const json plain =
      Ok({"calibrate", "--db", db_, "--collection", "c", "--unconditional", "--dry-run"}).Json();
  EXPECT_EQ(plain["conditional"], false);
  EXPECT_NE(plain["method"], "conditional");

  // Conformal match sets: refused without conformal scores; with them, the
  // sets of --coverage are threshold searches, capped by --max-results.
  Fails(search({"--coverage", "0.9"}), 1, {"conformal-fraction"});
  Fails(search({"--coverage", "1.5"}), 2, {"--coverage"});
  Fails(search({"--coverage", "0.9", "--min-prob", "0.5"}), 2, {"excludes"});
  Fails(search({"--coverage", "0.9", "--k", "3"}), 2, {"excludes"});
  Fails(search({"--k", "3", "--max-results", "4"}), 2, {"--max-results needs"});
  const json conformal = Ok({"calibrate", "--db", db_, "--collection", "c", "--conformal-fraction",
                             "0.3", "--max-pairs", "20000"})
                             .Json();
  EXPECT_GT(conformal["conformal_queries"].get<int64_t>(), 0);
  Fails({"calibrate", "--db", db_, "--collection", "c", "--conformal-fraction", "1"}, 2,
        {"--conformal-fraction"});
  lines = Ok(search({"--coverage", "0.8", "--max-results", "50"})).JsonLines();
  ASSERT_EQ(lines.size(), 30u);
  for (const json& line : lines) EXPECT_LE(line["results"].size(), 50u);
  Fails(search({"--coverage", "0.999"}), 1, {"conformal queries"});
  Fails(search({"--k", "3", "--coverage-by-eta"}), 2, {"--coverage"});
  // 7 conformal queries, about 2 per quartile of eta: too few for 0.8.
  Fails(search({"--coverage", "0.8", "--coverage-by-eta"}), 1, {"conformal queries in quartile"});
  // Risk-controlled thresholds over the same held-out queries' non-matching
  // pairs.
  EXPECT_GT(conformal["held_out_non_matches"].get<int64_t>(), 299);
  lines =
      Ok(search({"--max-false-match-rate", "0.1", "--confidence", "0.9", "--max-results", "50"}))
          .JsonLines();
  ASSERT_EQ(lines.size(), 30u);
  Fails(search({"--max-false-match-rate", "0.1", "--k", "3"}), 2, {"excludes"});
  Fails(search({"--max-false-match-rate", "0.1", "--coverage", "0.8"}), 2, {"excludes"});
  Fails(search({"--max-false-match-rate", "1.5"}), 2, {"--max-false-match-rate"});
  Fails(search({"--k", "3", "--confidence", "0.9"}), 2, {"--confidence"});
  Fails(search({"--max-false-match-rate", "0.1", "--confidence", "1"}), 2, {"--confidence"});
  Fails(search({"--max-false-match-rate", "0.0000001"}), 1, {"held-out non-matching pairs"});
  Ok({"calibrate", "--db", db_, "--collection", "c"});
  Fails(search({"--max-false-match-rate", "0.1"}), 1, {"conformal-fraction"});

  // The table for people, a dry run that stores nothing, and removal.
  const RunResult table = Ok({"calibrate", "--db", db_, "--collection", "c", "--score", "csd",
                              "--dry-run", "--format", "table"});
  EXPECT_NE(table.out.find("calibrated (held out)"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("ECE@10"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("by quartile of query eta"), std::string::npos) << table.out;
  stats = Ok({"stats", "--db", db_, "--collection", "c"}).Json();
  EXPECT_EQ(stats["calibrations"].size(), 1u);
  Ok({"calibrate", "--db", db_, "--collection", "c", "--remove"});
  Fails({"calibrate", "--db", db_, "--collection", "c", "--remove"}, 1, {"no calibration"});
  stats = Ok({"stats", "--db", db_, "--collection", "c"}).Json();
  EXPECT_TRUE(stats["calibrations"].empty());
  // Held-out queries need their labels; unlabelled collections are refused.
  Fails({"calibrate", "--db", db_, "--collection", "c", "--mean", prefix + ".query.mean.npy",
         "--var", prefix + ".query.var.npy"},
        2, {"query-labels"});
  Ok({"calibrate", "--db", db_, "--collection", "c", "--mean", prefix + ".query.mean.npy", "--var",
      prefix + ".query.var.npy", "--query-labels", prefix + ".query.labels.npy", "--dry-run"});
  Ok({"create", "--db", db_, "--collection", "bare", "--kind", "gaussian", "--dim", "8"});
  Ok({"ingest", "--db", db_, "--collection", "bare", "--mean", prefix + ".mean.npy", "--var",
      prefix + ".var.npy"});
  Fails({"calibrate", "--db", db_, "--collection", "bare"}, 1, {"labelled items"});
}

// ingest --upsert replaces existing ids (vectors, label, payload) and adds
// new ones in one batch; it needs --ids.
TEST_F(CliTest, IngestUpsertReplacesExistingIds) {
  Create("u", K::kGaussian);
  Ok(Concat(Cmd("ingest", "u",
                {"--ids", Write("ids.npy", MakeNpy(std::vector<int64_t>{0, 1, 2}, {3})), "--labels",
                 Write("l1.npy", MakeNpy(std::vector<int64_t>{7, 7, 7}, {3}))}),
            ItemFlags(K::kGaussian, MakeItems(K::kGaussian, 0, 3), "u1")));
  // Without --upsert an existing id fails and names the flag's idea.
  const std::string up_ids = Write("up.npy", MakeNpy(std::vector<int64_t>{1, 2, 3}, {3}));
  const Items replacement = MakeItems(K::kGaussian, 10, 3);
  Fails(Concat(Cmd("ingest", "u", {"--ids", up_ids}), ItemFlags(K::kGaussian, replacement, "u2")),
        1, {"already exists", "upsert"});
  const json out = Ok(Concat(Cmd("ingest", "u",
                                 {"--ids", up_ids, "--upsert", "--labels",
                                  Write("l2.npy", MakeNpy(std::vector<int64_t>{9, 9, 9}, {3}))}),
                             ItemFlags(K::kGaussian, replacement, "u2")))
                       .Json();
  EXPECT_EQ(out["replaced"], 2);
  EXPECT_EQ(ItemCount("u"), 4);
  const std::vector<json> records =
      Ok(Cmd("get", "u", {"--ids", Write("g.npy", MakeNpy(std::vector<int64_t>{0, 1, 3}, {3}))}))
          .JsonLines();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0]["label"], 7);
  EXPECT_EQ(records[1]["label"], 9);
  EXPECT_FLOAT_EQ(records[1]["mean"][0].get<float>(), replacement.mean[0]);
  EXPECT_EQ(records[2]["label"], 9);
  // --upsert needs --ids.
  Fails(Concat(Cmd("ingest", "u", {"--upsert"}), ItemFlags(K::kGaussian, replacement, "u3")), 2,
        {"--ids"});
  EXPECT_EQ(ItemCount("u"), 4);
}

// Filters: --label, --label-not-in and --payload-equals (JSON or bare
// strings), ANDed; "passing" says how many items pass; bad filters are
// usage or engine errors naming the flag or field.
TEST_F(CliTest, SearchFiltersByLabelAndPayload) {
  Create("f", K::kGaussian);
  const Items items = MakeItems(K::kGaussian, 0, 12);
  std::vector<int64_t> labels;
  std::ofstream payloads(Path("payloads.txt"));
  for (int64_t i = 0; i < 12; ++i) {
    labels.push_back(i % 3);
    payloads << "{\"color\": \"" << (i % 2 ? "red" : "blue") << "\", \"n\": " << i << "}\n";
  }
  payloads.close();
  Ok(Concat(Cmd("ingest", "f",
                {"--labels", Write("labels.npy", MakeNpy(labels, {12})), "--payloads",
                 Path("payloads.txt")}),
            ItemFlags(K::kGaussian, items, "f")));
  const std::vector<std::string> query =
      QueryFlags(K::kGaussian, MakeItems(K::kGaussian, 3, 1), "q");
  auto ids_of = [&](const std::vector<std::string>& flags, int64_t* passing) {
    std::vector<std::string> args = Concat(Cmd("search", "f", {"--k", "20"}), query);
    args.insert(args.end(), flags.begin(), flags.end());
    const json line = Ok(args).Json();
    *passing = line.value("passing", int64_t(-1));
    std::set<int64_t> ids;
    for (const json& hit : line["results"]) ids.insert(hit["id"].get<int64_t>());
    return ids;
  };
  int64_t passing = 0;
  EXPECT_EQ(ids_of({"--label", "1"}, &passing), std::set<int64_t>({1, 4, 7, 10}));
  EXPECT_EQ(passing, 4);
  EXPECT_EQ(ids_of({"--label", "0,2"}, &passing).size(), 8u);
  EXPECT_EQ(ids_of({"--label-not-in", "0,2"}, &passing), std::set<int64_t>({1, 4, 7, 10}));
  EXPECT_EQ(ids_of({"--payload-equals", "color=red"}, &passing),
            std::set<int64_t>({1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(ids_of({"--payload-equals", "color=\"red\"", "--label", "1"}, &passing),
            std::set<int64_t>({1, 7}));
  EXPECT_EQ(ids_of({"--payload-equals", "n=5", "--payload-equals", "color=red"}, &passing),
            std::set<int64_t>({5}));
  EXPECT_TRUE(ids_of({"--payload-equals", "n=\"5\""}, &passing).empty());
  EXPECT_EQ(passing, 0);
  ids_of({}, &passing);
  EXPECT_EQ(passing, -1);  // no filter: no "passing"
  // Usage errors.
  std::vector<std::string> both = Concat(Cmd("search", "f", {"--k", "2"}), query);
  both.insert(both.end(), {"--label", "1", "--label-not-in", "2"});
  Fails(both, 2, {"--label"});
  std::vector<std::string> no_eq = Concat(Cmd("search", "f", {"--k", "2"}), query);
  no_eq.insert(no_eq.end(), {"--payload-equals", "color"});
  Fails(no_eq, 2, {"--payload-equals", "FIELD=VALUE"});
  std::vector<std::string> array = Concat(Cmd("search", "f", {"--k", "2"}), query);
  array.insert(array.end(), {"--payload-equals", "color=[1]"});
  Fails(array, 1, {"color", "string, number, boolean or null"});
}

// ---------------------------------------------------------------- fuse

// The product of the Gaussians of `rows` of `it`, per dimension, in double.
void ProductOfGaussians(const Items& it, const std::vector<int64_t>& rows,
                        std::vector<double>* mean, std::vector<double>* var) {
  mean->assign(kDim, 0.0);
  var->assign(kDim, 0.0);
  for (int64_t j = 0; j < kDim; ++j) {
    double precision = 0, sum = 0;
    for (int64_t i : rows) {
      precision += 1.0 / it.var[size_t(i * kDim + j)];
      sum += it.mean[size_t(i * kDim + j)] / double(it.var[size_t(i * kDim + j)]);
    }
    (*var)[size_t(j)] = 1.0 / precision;
    (*mean)[size_t(j)] = sum / precision;
  }
}

void ExpectFused(const json& line, const std::vector<double>& mean, const std::vector<double>& var,
                 double rel) {
  ASSERT_EQ(line["mean"].size(), size_t(kDim)) << line;
  ASSERT_EQ(line["var"].size(), size_t(kDim)) << line;
  for (size_t j = 0; j < size_t(kDim); ++j) {
    EXPECT_NEAR(line["mean"][j].get<double>(), mean[j], rel * (1 + std::fabs(mean[j]))) << j;
    EXPECT_NEAR(line["var"][j].get<double>(), var[j], rel * var[j]) << j;
  }
}

// Stored items by id and the same rows from files (with --std) fuse to the
// product of Gaussians; --store adds it as an item, --out-mean/--out-var
// write files that search reads, and --search prints what search prints.
TEST_F(CliErrorTest, FuseStoredItemsAndFilesToTheProductOfGaussians) {
  const Items it = MakeItems(K::kGaussian, 0, kInitial);  // the items of "g", ids 0..9
  std::vector<double> mean, var;
  ProductOfGaussians(it, {1, 3, 4}, &mean, &var);
  json line = Ok(Cmd("fuse", "g", {"--id", "1,3,4"})).Json();
  EXPECT_EQ(line["fused"], 3);
  ExpectFused(line, mean, var, 1e-6);
  // Repeated --id and an --ids file: the same.
  EXPECT_EQ(Ok(Cmd("fuse", "g", {"--id", "1", "--id", "3", "--id", "4"})).Json(), line);
  const std::string ids = Write("fuse_ids.npy", MakeNpy(std::vector<int64_t>{1, 3, 4}, {3}));
  EXPECT_EQ(Ok(Cmd("fuse", "g", {"--ids", ids})).Json(), line);

  // The same three rows from files, variances as standard deviations.
  std::vector<float> rows_mean, rows_std;
  for (int64_t i : {1, 3, 4}) {
    for (int64_t j = 0; j < kDim; ++j) {
      rows_mean.push_back(it.mean[size_t(i * kDim + j)]);
      rows_std.push_back(std::sqrt(it.var[size_t(i * kDim + j)]));
    }
  }
  const std::string mean_file = Write("fuse_mean.npy", MakeNpy(rows_mean, {3, kDim}));
  const std::string std_file = Write("fuse_std.npy", MakeNpy(rows_std, {3, kDim}));
  ExpectFused(Ok(Cmd("fuse", "g", {"--mean", mean_file, "--std", std_file})).Json(), mean, var,
              1e-5);
  ExpectUnchanged();  // printing stores nothing

  // Files of shape (1, D) that search reads; the line names them.
  const std::string out_mean = Path("fused_mean.npy"), out_var = Path("fused_var.npy");
  line =
      Ok(Cmd("fuse", "g", {"--id", "1,3,4", "--out-mean", out_mean, "--out-var", out_var})).Json();
  EXPECT_EQ(line["out_mean"], out_mean);
  EXPECT_FALSE(line.contains("mean"));
  NpyArray written;
  ASSERT_TRUE(ReadNpy(out_mean, &written).ok());
  EXPECT_EQ(written.shape, (std::vector<int64_t>{1, kDim}));

  // --search prints exactly the lines search prints for the fused query.
  const std::vector<std::string> search_flags = {"--k", "4", "--exhaustive", "--seed", "5"};
  const RunResult fused_search =
      Ok(Concat(Cmd("fuse", "g", {"--id", "1,3,4", "--search"}), search_flags));
  const RunResult plain_search =
      Ok(Concat(Cmd("search", "g", {"--mean", out_mean, "--var", out_var}), search_flags));
  EXPECT_EQ(fused_search.out, plain_search.out);
  ASSERT_EQ(fused_search.JsonLines().size(), 1u);
  EXPECT_EQ(fused_search.JsonLines()[0]["results"].size(), 4u);

  // --store: a new item with the fused embedding, label and payload.
  line = Ok(Cmd("fuse", "g",
                {"--id", "1,3,4", "--store", "--new-id", "500", "--new-label", "7", "--new-payload",
                 "person 7"}))
             .Json();
  EXPECT_EQ(line["id"], 500);
  EXPECT_EQ(ItemCount("g"), kInitial + 1);
  const json record = Ok(Cmd("get", "g", {"--id", "500"})).Json();
  EXPECT_EQ(record["label"], 7);
  EXPECT_EQ(record["payload"], "person 7");
  ExpectFused(record, mean, var, 1e-6);
  // Without --new-id the id continues after the largest.
  EXPECT_EQ(Ok(Cmd("fuse", "g", {"--id", "0,2", "--store"})).Json()["id"], 501);
  EXPECT_EQ(ItemCount("g"), kInitial + 2);
}

// Each error names its problem, exits non-zero and leaves the database as it
// was.
TEST_F(CliErrorTest, FuseErrorsNameTheProblemAndChangeNothing) {
  Fails(Cmd("fuse", "g", {"--id", "1,99", "--store"}), 1, {"no item with id 99"});
  Fails(Cmd("fuse", "g", {"--id", "1,3,1", "--store"}), 1, {"id 1 is given twice"});
  // An existing --new-id is refused by ingest, atomically.
  Fails(Cmd("fuse", "g", {"--id", "1,3", "--store", "--new-id", "2"}), 1, {"id 2 already exists"});
  // Items from both sources or from none, flags of the wrong mode.
  const Items two = MakeItems(K::kGaussian, 100, 2);
  Fails(Cmd("fuse", "g"), 2, {"give the items to fuse once"});
  Fails(Concat(Cmd("fuse", "g", {"--id", "1"}), ItemFlags(K::kGaussian, two, "both")), 2,
        {"give the items to fuse once"});
  Fails(Cmd("fuse", "g", {"--id", "1,2", "--k", "3"}), 2, {"--search"});
  Fails(Cmd("fuse", "g", {"--id", "1,2", "--new-label", "3"}), 2, {"--store"});
  Fails(Cmd("fuse", "g", {"--id", "1,2", "--search"}), 2, {"--k"});
  Fails(Cmd("fuse", "g", {"--id", "1,2", "--search", "--store", "--k", "2"}), 2, {"--store"});
  Fails(Cmd("fuse", "g", {"--id", "1,2", "--out-weights", Path("w.npy")}), 2, {"mog"});
  Fails(Cmd("fuse", "g", {"--id", "1,2", "--out-mean", Path("m.npy")}), 2, {"--out-var"});
  // Values ingest refuses: the same message.
  Items bad = MakeItems(K::kGaussian, 100, 3);
  bad.mean[5] = std::numeric_limits<float>::quiet_NaN();
  Fails(Concat(Cmd("fuse", "g", {"--store"}), ItemFlags(K::kGaussian, bad, "fnan")), 1,
        {"mean of item 1 is not finite"});
  bad = MakeItems(K::kGaussian, 100, 3);
  bad.var[9] = 0.0f;
  Fails(Concat(Cmd("fuse", "g", {"--store"}), ItemFlags(K::kGaussian, bad, "fzero")), 1,
        {"variance of item 2 must be > 0"});
  // An empty file: nothing to fuse.
  const std::string empty_mean = Write("e.mean.npy", MakeNpy(std::vector<float>{}, {0, kDim}));
  const std::string empty_var = Write("e.var.npy", MakeNpy(std::vector<float>{}, {0, kDim}));
  Fails(Cmd("fuse", "g", {"--mean", empty_mean, "--var", empty_var, "--store"}), 1, {"empty"});
  ExpectUnchanged();

  // Kinds that do not fuse, and why.
  Create("p", K::kPoint);
  Ok(Concat(Cmd("ingest", "p"), ItemFlags(K::kPoint, MakeItems(K::kPoint, 0, 3), "p")));
  Fails(Cmd("fuse", "p", {"--id", "0,1"}), 1, {"point", "no variance"});
  Create("codes", K::kCodes);
  Ok(Concat(Cmd("ingest", "codes"), ItemFlags(K::kCodes, MakeItems(K::kCodes, 0, 3), "k")));
  Fails(Cmd("fuse", "codes", {"--id", "0,1"}), 1, {"codes", "discrete"});
  Create("m", K::kMog);
  Ok(Concat(Cmd("ingest", "m"), ItemFlags(K::kMog, MakeItems(K::kMog, 0, 3), "m")));
  Fails(Cmd("fuse", "m", {"--id", "0,1,2", "--store"}), 1, {"2^3 components"});
  EXPECT_EQ(ItemCount("m"), 3);
  // One mixture fuses to itself, weights included.
  const json one = Ok(Cmd("fuse", "m", {"--id", "1"})).Json();
  const json stored = Ok(Cmd("get", "m", {"--id", "1"})).Json();
  EXPECT_EQ(one["weights"], stored["weights"]);
  EXPECT_EQ(one["mean"], stored["mean"]);
  EXPECT_EQ(one["var"], stored["var"]);

  const RunResult help = Ok({"fuse", "--help"});
  for (const char* flag : {"--ids", "--id", "--mean", "--std", "--store", "--new-id", "--search",
                           "--k", "--out-mean", "--out-var", "1/var = sum_i 1/var_i"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  }
}

// Search knobs have upper bounds, checked as usage errors (exit 2) before
// any work: --ef-search past 16,384 (FAISS would allocate per unit of it)
// and a --min-prob of nan (every comparison with NaN is false).
TEST_F(CliTest, SearchKnobsHaveBoundsAndNanIsRefused) {
  Create("h", K::kGaussian, "HNSW16");
  const Items it = MakeItems(K::kGaussian, 0, 30);
  Ok(Concat(Cmd("ingest", "h"), ItemFlags(K::kGaussian, it, "h")));
  const std::vector<std::string> query =
      ItemFlags(K::kGaussian, MakeItems(K::kGaussian, 0, 2), "q");
  Fails(Concat(Cmd("search", "h", {"--k", "3", "--ef-search", "2000000000"}), query), 2,
        {"--ef-search", "must be in [1, 16384], got 2000000000"});
  Fails(Concat(Cmd("search", "h", {"--k", "3", "--ef-search", "16385"}), query), 2,
        {"--ef-search", "16384"});
  Fails(Concat(Cmd("search", "h", {"--min-prob", "nan"}), query), 2, {"--min-prob", "nan"});
  const std::vector<json> lines =
      Ok(Concat(Cmd("search", "h", {"--k", "3", "--ef-search", "16384"}), query)).JsonLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["results"].size(), 3u);
  // k larger than the collection: every item once, nothing allocated for k.
  const std::vector<json> all =
      Ok(Concat(Cmd("search", "h", {"--k", "2000000000", "--exhaustive"}), query)).JsonLines();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["results"].size(), 30u);
}

// Read commands (stats, search, get, list) on collections whose IVF index
// is still untrained leave every file under index/ as it is.
TEST_F(CliTest, ReadCommandsDoNotRewriteUntrainedIndexFiles) {
  for (const char* name : {"a", "b", "c"}) {
    Create(name, K::kGaussian, "IVF16,Flat");
    Ok(Concat(Cmd("ingest", name), ItemFlags(K::kGaussian, MakeItems(K::kGaussian, 0, 5), name)));
  }
  auto snapshot = [&] {
    std::map<std::string, std::pair<uint64_t, int64_t>> files;
    for (const auto& e : fs::directory_iterator(Path("db/index"))) {
      struct stat st;
      EXPECT_EQ(::stat(e.path().c_str(), &st), 0);
      files[e.path().filename().string()] = {
          uint64_t(st.st_ino), int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    }
    return files;
  };
  const auto before = snapshot();
  ASSERT_EQ(before.size(), 6u);  // an index file and an arena snapshot each
  const json stats = Ok({"stats", "--db", db_}).Json();
  for (const json& c : stats["collections"]) {
    EXPECT_FALSE(c.value("index_trained", true)) << c;
    EXPECT_FALSE(c.contains("index_note")) << c;
  }
  Ok(Concat(Cmd("search", "b", {"--k", "2"}),
            ItemFlags(K::kGaussian, MakeItems(K::kGaussian, 0, 1), "q")));
  Ok(Cmd("get", "c", {"--id", "1"}));
  Ok({"list", "--db", db_});
  EXPECT_EQ(snapshot(), before);
}

// fuse writes each output to its own file: two flags naming one file (as
// given, or as another spelling of the same path) are a usage error.
TEST_F(CliErrorTest, FuseRefusesOutputsIntoOneFile) {
  const std::string same = Path("x.npy");
  Fails(Cmd("fuse", "g", {"--id", "1,2", "--out-mean", same, "--out-var", same}), 2,
        {"--out-mean and --out-var name the same file"});
  Fails(
      Cmd("fuse", "g", {"--id", "1,2", "--out-mean", same, "--out-var", dir_ + "/./sub/../x.npy"}),
      2, {"name the same file"});
  EXPECT_FALSE(fs::exists(same));
  const json j =
      Ok(Cmd("fuse", "g", {"--id", "1,2", "--out-mean", Path("m.npy"), "--out-var", Path("v.npy")}))
          .Json();
  EXPECT_EQ(j["out_mean"], Path("m.npy"));
  NpyArray mean, var;
  ASSERT_TRUE(ReadNpy(Path("m.npy"), &mean).ok());
  ASSERT_TRUE(ReadNpy(Path("v.npy"), &var).ok());
  EXPECT_NE(mean.bytes, var.bytes);
  ExpectUnchanged();
}

// Codes query tables may hold log(0) = -inf: calibrate fits on them (the
// pairs scoring -inf count as the lowest finite score) instead of failing
// on "score of pair 0 is infinite".
TEST_F(CliTest, CalibrateCodesQueriesHoldingLogZero) {
  const std::string prefix = Path("codes");
  Ok({"generate", "--kind", "codes", "--n", "400", "--dim", "6", "--classes", "4", "--queries",
      "60", "--seed", "3", "--out", prefix});
  Ok({"create", "--db", db_, "--collection", "c", "--kind", "codes", "--dim", "6", "--code-k",
      "16"});
  Ok({"ingest", "--db", db_, "--collection", "c", "--codes", prefix + ".codes.npy", "--labels",
      prefix + ".labels.npy"});
  NpyArray logp;
  ASSERT_TRUE(ReadNpy(prefix + ".logp.npy", &logp).ok());
  ASSERT_EQ(logp.type, NpyType::kFloat32);
  std::vector<float> tables(logp.bytes.size() / sizeof(float));
  std::memcpy(tables.data(), logp.bytes.data(), logp.bytes.size());
  for (size_t t = 0; t < tables.size(); t += 16) {  // all but each position's best symbol
    const size_t best =
        size_t(std::max_element(tables.begin() + t, tables.begin() + t + 16) - tables.begin());
    for (size_t s = t; s < t + 16; ++s) {
      if (s != best) tables[s] = -std::numeric_limits<float>::infinity();
    }
  }
  const std::string zero = Write("zero.logp.npy", MakeNpy(tables, logp.shape));
  const json report = Ok({"calibrate", "--db", db_, "--collection", "c", "--logp", zero,
                          "--query-labels", prefix + ".query.labels.npy"})
                          .Json();
  EXPECT_EQ(report["stored"], true);
  EXPECT_EQ(report["score"], "logprob");
}

// 0-row files ingest as a no-op with exit 0, as in Python (test_python_api.py).
TEST_F(CliTest, AZeroRowFileIngestsNothing) {
  Create("g", K::kGaussian);
  const std::string empty = Write("e.npy", MakeNpy(std::vector<float>{}, {0, kDim}));
  const json j = Ok(Cmd("ingest", "g", {"--mean", empty, "--var", empty})).Json();
  EXPECT_EQ(j["ingested"], 0);
  EXPECT_EQ(ItemCount("g"), 0);
}

}  // namespace
}  // namespace hedgedb
