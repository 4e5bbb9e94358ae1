// The image pipeline (datasets/image_pipeline.h) from C++: ingesting a folder
// of real PNG files with a real (tiny, untrained) model file under both error
// policies, and querying it with exclude-self and recall@k.
#include "datasets/image_pipeline.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "encoders/engine_bridge.h"
#include "encoders/models/models.h"
#include "hedgedb/calibration.h"

namespace hedgedb::datasets {
namespace {

namespace fs = std::filesystem;
using encoders::Encoder;
using encoders::LoadModel;
using encoders::MakeEncoder;
using encoders::Method;
using encoders::ModelCalibration;
using encoders::ModelFileChecksum;
using encoders::ModelSpec;
using encoders::SaveModel;

class ImagePipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("hedgedb_image_pipeline_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    torch::manual_seed(5);
    torch::set_num_threads(1);
    // A tiny HIB model on 1 x 12 x 12 images with learned a, b.
    ModelSpec spec;
    spec.method = Method::kHib;
    spec.kind = Kind::kGaussian;
    spec.dim = 3;
    spec.input_shape = {1, 12, 12};
    spec.match_a = 2.5;
    spec.match_b = 0.5;
    spec.cnn.conv1_channels = 2;
    spec.cnn.conv2_channels = 3;
    spec.cnn.hidden = 8;
    Encoder encoder{nullptr};
    ASSERT_TRUE(MakeEncoder(spec, &encoder).ok());
    ASSERT_TRUE(SaveModel(Path("m.hdbm"), encoder).ok());
    ASSERT_TRUE(LoadImageEncoder(Path("m.hdbm"), &encoder_).ok());
    // 3 classes x 3 images: a bright square whose place depends on the class.
    for (int label = 0; label < 3; ++label) {
      for (int i = 0; i < 3; ++i) {
        std::vector<float> pixels(144, 0.05f * i);
        for (int y = 0; y < 4; ++y) {
          for (int x = 0; x < 4; ++x) pixels[(4 * label + y) * 12 + 2 + x + i] = 1.0f;
        }
        const std::string path =
            Path("images/" + std::to_string(label) + "/" + std::to_string(i) + ".png");
        ASSERT_TRUE(WriteImageFile(path, pixels.data(), 1, 12, 12).ok());
      }
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const {
    fs::create_directories((dir_ / name).parent_path());
    return (dir_ / name).string();
  }

  // A truncated PNG among the images of class 1.
  void AddBadImage() { std::ofstream(Path("images/1/bad.png"), std::ios::binary) << "\x89PNG\r\n"; }

  ImageSource Images() const {
    ImageSource source;
    EXPECT_TRUE(ListImageDirectory((dir_ / "images").string(), &source).ok());
    return source;
  }

  fs::path dir_;
  ImageEncoder encoder_;
};

TEST_F(ImagePipelineTest, LoadImageEncoderNamesTheFile) {
  ImageEncoder e;
  const Status s = LoadImageEncoder(Path("missing.hdbm"), &e);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing.hdbm"), std::string::npos) << s.ToString();
}

TEST_F(ImagePipelineTest, AbortPolicyWritesNothing) {
  AddBadImage();
  const ImageSource source = Images();
  ASSERT_EQ(source.size(), 10);
  IngestImagesOptions options;
  options.batch_size = 4;
  std::vector<std::string> reported;
  options.on_bad_image = [&](const ImageError& e) { reported.push_back(e.message); };
  IngestImagesResult result;
  const std::string db = Path("db");
  const Status s = IngestImages(db, "c", encoder_, source, options, &result);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bad.png"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("nothing was ingested"), std::string::npos) << s.ToString();
  // The hint names the option (the CLI names its flag, --on-error skip).
  EXPECT_NE(s.message().find("skipping bad images (skip_bad_images) ingests the others"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(s.message().find("--"), std::string::npos) << s.ToString();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(result.ingested, 0);
  EXPECT_FALSE(fs::exists(db));  // not even the database was created
}

TEST_F(ImagePipelineTest, AnotherModelsImagesAreRefused) {
  // A second model of the same kind and sizes (other weights): its
  // embeddings fit the collection's shape but not its space.
  torch::manual_seed(6);
  ModelSpec spec = encoder_.spec;
  Encoder other{nullptr};
  ASSERT_TRUE(MakeEncoder(spec, &other).ok());
  ASSERT_TRUE(SaveModel(Path("other.hdbm"), other).ok());
  ImageEncoder second;
  ASSERT_TRUE(LoadImageEncoder(Path("other.hdbm"), &second).ok());
  ASSERT_NE(ModelFileChecksum(Path("m.hdbm")), ModelFileChecksum(Path("other.hdbm")));

  const ImageSource source = Images();
  IngestImagesOptions options;
  options.metadata = R"({"images": {"fit": "exact"}, "note": "kept"})";
  IngestImagesResult result;
  const std::string db_path = Path("db");
  ASSERT_TRUE(IngestImages(db_path, "c", encoder_, source, options, &result).ok());
  ASSERT_EQ(result.ingested, 9);
  {
    // The collection records the model beside the caller's metadata.
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(Options(), db_path, &db).ok());
    CollectionSpec have;
    ASSERT_TRUE(db->DescribeCollection("c", &have).ok());
    const nlohmann::json metadata = nlohmann::json::parse(have.metadata);
    EXPECT_EQ(metadata["note"], "kept");
    EXPECT_EQ(metadata["images"]["fit"], "exact");
    EXPECT_EQ(metadata["images"]["model_checksum"], ModelFileChecksum(Path("m.hdbm")));
    EXPECT_EQ(metadata["images"]["model"], fs::absolute(Path("m.hdbm")).string());
  }
  options.existing = ExistingImages::kAdd;
  Status s = IngestImages(db_path, "c", second, source, options, &result);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("collection 'c' holds embeddings of another model"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("cannot join them"), std::string::npos) << s.ToString();
  EXPECT_EQ(result.ingested, 0);

  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options(), db_path, &db).ok());
  QueryImagesOptions query;
  query.search.k = 2;
  QueryImagesResult answers;
  s = QueryImages(*db, "c", second, source, query, nullptr, &answers);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("queries cannot be compared with them"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(answers.queries, 0);
  CollectionStats stats;
  ASSERT_TRUE(db->GetStats("c", &stats).ok());
  EXPECT_EQ(stats.items, 9);  // nothing of the other model joined
  // The collection's own model still queries it.
  EXPECT_TRUE(QueryImages(*db, "c", encoder_, source, query, nullptr, &answers).ok());
}

TEST_F(ImagePipelineTest, IngestThenQueryWithExcludeSelf) {
  AddBadImage();
  const ImageSource source = Images();
  IngestImagesOptions options;
  options.batch_size = 4;
  options.skip_bad_images = true;
  std::vector<std::string> progress;
  options.progress = [&](const char* stage, int64_t done, int64_t total) {
    progress.push_back(std::string(stage) + " " + std::to_string(done) + "/" +
                       std::to_string(total));
  };
  IngestImagesResult result;
  const std::string db_path = Path("db");
  Status s = IngestImages(db_path, "c", encoder_, source, options, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(result.created);
  EXPECT_EQ(result.images, 10);
  EXPECT_EQ(result.ingested, 9);
  EXPECT_EQ(result.first_id, 0);
  EXPECT_EQ(result.last_id, 8);
  EXPECT_EQ(result.batches, 3);
  ASSERT_EQ(result.skipped.size(), 1u);
  EXPECT_NE(result.skipped[0].message.find("bad.png"), std::string::npos);
  EXPECT_EQ(progress.back(), "ingest 10/10");

  {
    // Ingesting the same images again adds nothing (the default, kSkip):
    // the 9 stored are recognised by path; bad.png is new, and still bad.
    IngestImagesResult again;
    ASSERT_TRUE(IngestImages(db_path, "c", encoder_, source, options, &again).ok());
    EXPECT_EQ(again.already_present, 9);
    EXPECT_EQ(again.ingested, 0);
    ASSERT_EQ(again.skipped.size(), 1u);
    EXPECT_EQ(again.skipped[0].entry, result.skipped[0].entry);  // counted in `source`
    IngestImagesOptions refuse = options;
    refuse.existing = ExistingImages::kRefuse;
    const Status refused = IngestImages(db_path, "c", encoder_, source, refuse, &again);
    EXPECT_TRUE(refused.IsInvalidArgument()) << refused.ToString();
    EXPECT_NE(refused.message().find("9 of the 10 images"), std::string::npos)
        << refused.ToString();
    EXPECT_NE(refused.message().find(
                  "(existing skip ingests only the new ones, existing add adds them again)"),
              std::string::npos)
        << refused.ToString();
    EXPECT_EQ(refused.message().find("--"), std::string::npos) << refused.ToString();
  }
  {
    // The collection is the model's (engine_bridge.h) and, with kAdd, a
    // second ingest appends to it.
    IngestImagesResult again;
    IngestImagesOptions add = options;
    add.existing = ExistingImages::kAdd;
    ASSERT_TRUE(IngestImages(db_path, "c", encoder_, source, add, &again).ok());
    EXPECT_FALSE(again.created);
    EXPECT_EQ(again.first_id, 9);
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(Options(), db_path, &db).ok());
    CollectionSpec spec;
    ASSERT_TRUE(db->DescribeCollection("c", &spec).ok());
    EXPECT_EQ(spec.kind, Kind::kGaussian);
    EXPECT_FLOAT_EQ(spec.match_a, 2.5f);
    EXPECT_FLOAT_EQ(spec.match_b, 0.5f);
    int64_t removed = 0;
    std::vector<int64_t> second(9);
    for (int i = 0; i < 9; ++i) second[i] = 9 + i;
    ASSERT_TRUE(db->Remove("c", second.data(), second.size(), &removed).ok());
  }

  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options(), db_path, &db).ok());
  QueryImagesOptions query;
  query.batch_size = 4;
  query.skip_bad_images = true;
  query.exclude_self = true;
  query.search.k = 3;
  query.search.exhaustive = true;
  std::vector<ImageAnswer> answers;
  QueryImagesResult summary;
  s = QueryImages(
      *db, "c", encoder_, source, query, [&](const ImageAnswer& a) { answers.push_back(a); },
      &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.score, ScoreType::kMc);
  EXPECT_EQ(summary.queries, 9);
  EXPECT_EQ(summary.skipped, 1);
  EXPECT_EQ(summary.labelled, 9);
  EXPECT_EQ(summary.with_uncertainty, 9);
  ASSERT_EQ(answers.size(), 10u);
  // Answers and the skipped image come in source order.
  int64_t first_hit_sum[3] = {0, 0, 0};
  for (size_t q = 0; q < answers.size(); ++q) {
    const ImageAnswer& a = answers[q];
    EXPECT_EQ(a.query, static_cast<int64_t>(q));
    if (a.error != nullptr) {
      EXPECT_NE(a.image->path.find("bad.png"), std::string::npos);
      continue;
    }
    ASSERT_EQ(a.result.hits.size(), 3u);
    int64_t first = 3;
    for (size_t r = 0; r < a.result.hits.size(); ++r) {
      const SearchHit& hit = a.result.hits[r];
      EXPECT_FALSE(a.image->IsPayloadOf(hit.payload)) << "the query's own image came back";
      ImagePayload fields;
      EXPECT_TRUE(ParseImagePayload(hit.payload, &fields));
      if (first == 3 && hit.label == a.image->label) first = static_cast<int64_t>(r);
    }
    for (int m = 0; m < 3; ++m) first_hit_sum[m] += first <= m ? 1 : 0;
  }
  // Recall@1, @2 and @3 (k) as counted from the answers.
  ASSERT_EQ(summary.recall_ks, (std::vector<int>{1, 2, 3}));
  ASSERT_EQ(summary.recall_at_k.size(), 3u);
  for (int m = 0; m < 3; ++m) EXPECT_DOUBLE_EQ(summary.recall_at_k[m], first_hit_sum[m] / 9.0);

  // A collection of another shape is refused, naming both.
  CollectionSpec other = CollectionSpecForModel(encoder_.spec, "other");
  other.dim = 5;
  ASSERT_TRUE(db->CreateCollection(other).ok());
  s = QueryImages(*db, "other", encoder_, source, query, nullptr, &summary);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("does not match model"), std::string::npos) << s.ToString();
  // Without skipping, the bad image fails the queries.
  query.skip_bad_images = false;
  s = QueryImages(*db, "c", encoder_, source, query, nullptr, &summary);
  EXPECT_NE(s.message().find("bad.png"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("(skipping bad images (skip_bad_images) answers the other queries)"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(s.message().find("--"), std::string::npos) << s.ToString();
}

TEST_F(ImagePipelineTest, ImagesOfAnotherSizeNameTheFit) {
  // Every image 6 x 6 for a 12 x 12 model: under exact fit none can be used,
  // and the hints name the fit that converts them (ImageBatchOptions::fit).
  const std::vector<float> small(36, 0.5f);
  ASSERT_TRUE(WriteImageFile(Path("small/a.png"), small.data(), 1, 6, 6).ok());
  ASSERT_TRUE(WriteImageFile(Path("small/b.png"), small.data(), 1, 6, 6).ok());
  ImageSource source;
  ASSERT_TRUE(ListImageDirectory((dir_ / "small").string(), &source).ok());
  IngestImagesOptions options;
  IngestImagesResult result;
  const Status s = IngestImages(Path("db"), "c", encoder_, source, options, &result);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find(std::string("a.png: the image is 6 x 6 with 1 channel but the model "
                                         "takes 12 x 12 with 1 channel ") +
                             kExactFitHint),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("no image can be used as it is: fit resize or fit crop fits images "
                             "of other sizes to the model"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(s.message().find("--"), std::string::npos) << s.ToString();
  options.fit = ImageFit::kResize;
  EXPECT_TRUE(IngestImages(Path("db"), "c", encoder_, source, options, &result).ok());
  EXPECT_EQ(result.ingested, 2);
}

// A model file that carries a calibration map (as `train` writes one): a
// collection ingest-images creates starts with it, searches fill prob; a
// collection that existed keeps its own calibration (here: none).
TEST_F(ImagePipelineTest, NewCollectionStartsWithTheModelsCalibration) {
  // An mc map fitted on synthetic scores (true match probability score^2).
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> scores;
  std::vector<uint8_t> same;
  for (int i = 0; i < 2000; ++i) {
    scores.push_back(uniform(rng));
    same.push_back(uniform(rng) < scores.back() * scores.back());
  }
  ModelCalibration calibration;
  ASSERT_TRUE(FitCalibrationMap(ScoreType::kMc, scores.data(), same.data(), 2000, 0,
                                &calibration.map, &calibration.info)
                  .ok());
  ModelSpec spec;
  Encoder weights{nullptr};
  ASSERT_TRUE(LoadModel(Path("m.hdbm"), &spec, &weights).ok());
  ASSERT_TRUE(SaveModel(Path("calibrated.hdbm"), weights, &calibration).ok());
  ImageEncoder encoder;
  ASSERT_TRUE(LoadImageEncoder(Path("calibrated.hdbm"), &encoder).ok());
  EXPECT_EQ(encoder.calibration.map, calibration.map);

  const ImageSource source = Images();
  IngestImagesOptions options;
  options.batch_size = 4;
  IngestImagesResult result;
  const std::string db_path = Path("db");
  Status s = IngestImages(db_path, "c", encoder, source, options, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(result.created);
  EXPECT_TRUE(result.calibrated);
  EXPECT_TRUE(result.calibration_note.empty()) << result.calibration_note;
  // The model without a map makes an uncalibrated collection.
  ASSERT_TRUE(IngestImages(db_path, "plain", encoder_, source, options, &result).ok());
  EXPECT_TRUE(result.created);
  EXPECT_FALSE(result.calibrated);
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(Options(), db_path, &db).ok());
    CollectionStats stats;
    ASSERT_TRUE(db->GetStats("c", &stats).ok());
    ASSERT_EQ(stats.calibrations.size(), 1u);
    EXPECT_EQ(stats.calibrations[0].score, ScoreType::kMc);
    EXPECT_EQ(stats.calibrations[0].method, calibration.info.method);
    EXPECT_DOUBLE_EQ(stats.calibrations[0].base_rate, calibration.info.base_rate);
    ASSERT_TRUE(db->GetStats("plain", &stats).ok());
    EXPECT_TRUE(stats.calibrations.empty());

    QueryImagesOptions query;
    query.batch_size = 4;
    query.search.k = 3;
    query.search.exhaustive = true;
    int64_t hits = 0;
    QueryImagesResult summary;
    s = QueryImages(
        *db, "c", encoder, source, query,
        [&](const ImageAnswer& a) {
          for (const SearchHit& hit : a.result.hits) {
            EXPECT_TRUE(std::isfinite(hit.prob)) << "hit " << hit.id;
            EXPECT_GE(hit.prob, 0.0f);
            EXPECT_LE(hit.prob, 1.0f);
            ++hits;
          }
        },
        &summary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(hits, 27);
    ASSERT_TRUE(db->RemoveCalibration("c", ScoreType::kMc).ok());
  }
  // An existing collection is left as it is.
  options.existing = ExistingImages::kAdd;
  ASSERT_TRUE(IngestImages(db_path, "c", encoder, source, options, &result).ok());
  EXPECT_FALSE(result.created);
  EXPECT_FALSE(result.calibrated);
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options(), db_path, &db).ok());
  CollectionStats stats;
  ASSERT_TRUE(db->GetStats("c", &stats).ok());
  EXPECT_TRUE(stats.calibrations.empty());
  EXPECT_EQ(stats.items, 18);
  // An existing collection with a map of its own: `calibrated` says so
  // (searches report prob), though the model's map was not taken.
  ASSERT_TRUE(db->ImportCalibration("c", calibration.map, 0).ok());
  db.reset();
  ASSERT_TRUE(IngestImages(db_path, "c", encoder, source, options, &result).ok());
  EXPECT_FALSE(result.created);
  EXPECT_TRUE(result.calibrated);
}

TEST(ImagePipelineCutoffsTest, PowersOfTwoThenK) {
  EXPECT_EQ(RecallCutoffs(1), (std::vector<int>{1}));
  EXPECT_EQ(RecallCutoffs(5), (std::vector<int>{1, 2, 4, 5}));
  EXPECT_EQ(RecallCutoffs(8), (std::vector<int>{1, 2, 4, 8}));
}

}  // namespace
}  // namespace hedgedb::datasets
