// The model-to-collection rules (encoders/engine_bridge.h) and the one
// recall@k.
#include "encoders/engine_bridge.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "encoders/eval/metrics.h"

namespace hedgedb::encoders {
namespace {

ModelSpec Model(Method method, Kind kind) {
  ModelSpec m;
  m.method = method;
  m.kind = kind;
  m.dim = 4;
  m.match_a = 3.5;
  m.match_b = 1.25;
  return m;
}

TEST(EngineBridgeTest, LearnedMatchParametersOnlyForSoftconAndHib) {
  for (Method m : {Method::kSoftContrastive, Method::kHib}) EXPECT_TRUE(LearnsMatchParameters(m));
  for (Method m : {Method::kSpe, Method::kProtoNet, Method::kDimco, Method::kFStatistic}) {
    EXPECT_FALSE(LearnsMatchParameters(m));
  }
  const CollectionSpec softcon =
      CollectionSpecForModel(Model(Method::kSoftContrastive, Kind::kPoint), "c");
  EXPECT_EQ(softcon.name, "c");
  EXPECT_EQ(softcon.kind, Kind::kPoint);
  EXPECT_EQ(softcon.dim, 4);
  EXPECT_FLOAT_EQ(softcon.match_a, 3.5f);
  EXPECT_FLOAT_EQ(softcon.match_b, 1.25f);
  // Methods that learn no a, b score with the defaults whatever the file holds.
  const CollectionSpec protonet =
      CollectionSpecForModel(Model(Method::kProtoNet, Kind::kPoint), "c");
  EXPECT_FLOAT_EQ(protonet.match_a, 1.0f);
  EXPECT_FLOAT_EQ(protonet.match_b, 0.0f);
  // SPE's a, b are fitted after training (for eta), and used.
  EXPECT_FALSE(LearnsMatchParameters(Method::kSpe));
  EXPECT_TRUE(HasMatchParameters(Method::kSpe));
  const CollectionSpec spe = CollectionSpecForModel(Model(Method::kSpe, Kind::kGaussian), "c");
  EXPECT_FLOAT_EQ(spe.match_a, 3.5f);
  EXPECT_FLOAT_EQ(spe.match_b, 1.25f);
}

TEST(EngineBridgeTest, KindsAndSizes) {
  ModelSpec mog = Model(Method::kHib, Kind::kMog);
  mog.components = 3;
  const CollectionSpec m = CollectionSpecForModel(mog, "m");
  EXPECT_EQ(m.components, 3);
  EXPECT_EQ(m.samples, 9);  // 8 rounded up to a multiple of C
  ModelSpec codes = Model(Method::kDimco, Kind::kCodes);
  codes.code_dims = 6;
  codes.code_k = 16;
  const CollectionSpec c = CollectionSpecForModel(codes, "c");
  EXPECT_EQ(c.kind, Kind::kCodes);
  EXPECT_EQ(c.dim, 6);
  EXPECT_EQ(c.code_k, 16);
  EXPECT_EQ(c.samples, 8);
}

TEST(EngineBridgeTest, ScorePerMethod) {
  // Points: the collection kind's default (match), so that a collection of
  // the model needs no --score; evaluate ranks by l2, which orders alike.
  for (Method m :
       {Method::kSoftContrastive, Method::kProtoNet, Method::kFStatistic, Method::kContrastive}) {
    EXPECT_EQ(ModelScore(Model(m, Kind::kPoint)), ScoreType::kMatch);
    EXPECT_EQ(ModelScore(Model(m, Kind::kPoint)), ResolveScore(Kind::kPoint, ScoreType::kDefault));
    EXPECT_EQ(RankingScore(Model(m, Kind::kPoint)), ScoreType::kL2);
  }
  EXPECT_EQ(RankingScore(Model(Method::kHib, Kind::kGaussian)), ScoreType::kMc);
  EXPECT_EQ(ModelScore(Model(Method::kHib, Kind::kGaussian)), ScoreType::kMc);
  EXPECT_EQ(ModelScore(Model(Method::kHib, Kind::kMog)), ScoreType::kMc);
  EXPECT_EQ(ModelScore(Model(Method::kSpe, Kind::kGaussian)), ScoreType::kMls);
  EXPECT_EQ(ModelScore(Model(Method::kDimco, Kind::kCodes)), ScoreType::kLogprob);
}

TEST(EngineBridgeTest, CollectionMustFitTheModel) {
  const ModelSpec hib = Model(Method::kHib, Kind::kGaussian);
  CollectionSpec have = CollectionSpecForModel(hib, "faces");
  EXPECT_TRUE(CheckCollectionFitsModel(have, hib, "m.hdbm").ok());
  have.match_a = 1.0f;
  Status s = CheckCollectionFitsModel(have, hib, "m.hdbm");
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("collection 'faces' (gaussian dim 4 match-a 1.0 match-b 1.25)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("model 'm.hdbm' (gaussian dim 4 match-a 3.5"), std::string::npos);
  have = CollectionSpecForModel(hib, "faces");
  have.dim = 7;
  EXPECT_FALSE(CheckCollectionFitsModel(have, hib, "m.hdbm").ok());
}

// Two real model files (EncodeModelFile's bytes) that differ in their
// header, hence in their checksums.
class ModelRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hedgedb_engine_bridge_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    ModelSpec spec = Model(Method::kHib, Kind::kGaussian);
    spec.input_shape = {1, 8, 8};
    for (const char* name : {"a.hdbm", "b.hdbm"}) {
      std::ofstream(Path(name), std::ios::binary) << EncodeModelFile(spec, "weights", nullptr);
      spec.match_a += 1;
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const char* name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(ModelRecordTest, ACollectionTakesOnlyTheModelItRecords) {
  const std::string a = ModelFileChecksum(Path("a.hdbm")), b = ModelFileChecksum(Path("b.hdbm"));
  ASSERT_EQ(a.size(), 8u);
  ASSERT_NE(a, b);
  EXPECT_EQ(ModelFileChecksum(Path("missing.hdbm")), "");

  CollectionSpec spec;
  spec.name = "g";
  ASSERT_TRUE(RecordModelInMetadata(R"({"images": {"fit": "resize"}, "x": 1})", Path("a.hdbm"),
                                    &spec.metadata)
                  .ok());
  const nlohmann::json record = nlohmann::json::parse(spec.metadata);
  EXPECT_EQ(record["x"], 1);  // the caller's fields stay
  EXPECT_EQ(record["images"]["fit"], "resize");
  EXPECT_EQ(record["images"]["model_checksum"], a);
  EXPECT_EQ(record["images"]["model"], Path("a.hdbm"));

  EXPECT_TRUE(CheckCollectionModel(spec, Path("a.hdbm"), ModelUse::kIngest).ok());
  EXPECT_TRUE(CheckCollectionModel(spec, Path("a.hdbm"), ModelUse::kQuery).ok());
  Status s = CheckCollectionModel(spec, Path("b.hdbm"), ModelUse::kIngest);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  for (const std::string& part :
       {"collection 'g' holds embeddings of another model (" + Path("a.hdbm") + ", checksum " + a,
        "'" + Path("b.hdbm") + "' (checksum " + b + ")", std::string("cannot join them")}) {
    EXPECT_NE(s.message().find(part), std::string::npos) << part << "\n" << s.message();
  }
  s = CheckCollectionModel(spec, Path("b.hdbm"), ModelUse::kQuery);
  EXPECT_NE(s.message().find("its queries cannot be compared with them"), std::string::npos)
      << s.message();

  // No record (made by `create`, or before collections kept one): any model.
  for (const char* metadata : {"", "free text", R"({"images": {"fit": "exact"}})"}) {
    spec.metadata = metadata;
    EXPECT_TRUE(CheckCollectionModel(spec, Path("b.hdbm"), ModelUse::kIngest).ok()) << metadata;
  }
  // Metadata the record cannot join is refused, naming it.
  std::string out;
  s = RecordModelInMetadata("free text", Path("a.hdbm"), &out);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("must be a JSON object"), std::string::npos) << s.message();
  s = RecordModelInMetadata(R"({"images": 3})", Path("a.hdbm"), &out);
  EXPECT_NE(s.message().find("\"images\" entry that is not an object"), std::string::npos)
      << s.message();
}

TEST_F(ModelRecordTest, ARecordedModelAllowsRefittedMatchParameters) {
  // calibrate may refit a collection's a and b: a collection that records
  // its model is checked by the model's checksum, not by a and b; one that
  // records none still by a and b (they are what tells models apart then).
  ModelSpec model = Model(Method::kHib, Kind::kGaussian);
  model.input_shape = {1, 8, 8};
  CollectionSpec have = CollectionSpecForModel(model, "g");
  have.match_b += 2.5f;
  EXPECT_TRUE(CheckCollectionFitsModel(have, model, "a.hdbm").IsInvalidArgument());
  ASSERT_TRUE(RecordModelInMetadata("", Path("a.hdbm"), &have.metadata).ok());
  EXPECT_TRUE(CheckCollectionFitsModel(have, model, "a.hdbm").ok());
  EXPECT_TRUE(CheckCollectionModel(have, Path("a.hdbm"), ModelUse::kIngest).ok());
  EXPECT_TRUE(CheckCollectionModel(have, Path("b.hdbm"), ModelUse::kIngest).IsInvalidArgument());
  have.dim += 1;  // the shape of the embeddings is checked either way
  EXPECT_FALSE(CheckCollectionFitsModel(have, model, "a.hdbm").ok());
}

TEST(EngineBridgeTest, RecallAtKFromFirstHits) {
  // Ranks of the first same-label result; 3 = none among 3 results.
  const std::vector<double> r = RecallAtK({0, 1, 3, 2}, {1, 2, 3});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_DOUBLE_EQ(r[0], 0.25);
  EXPECT_DOUBLE_EQ(r[1], 0.5);
  EXPECT_DOUBLE_EQ(r[2], 0.75);
  EXPECT_EQ(RecallAtK({}, {1}), std::vector<double>{0.0});
}

}  // namespace
}  // namespace hedgedb::encoders
