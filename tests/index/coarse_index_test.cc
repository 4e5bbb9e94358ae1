// The two coarse indexes on their own: the codes index writes codes and IVF
// lists into FAISS by hand, so its rankings are checked against the exact
// DIMCO sums; the vector index ranks Gaussians by the expected squared
// distance; both remove, save, load and refuse files that are not theirs.
#include "index/coarse_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <set>

#include "common/row_layout.h"
#include "engine/engine_test_util.h"

namespace hedgedb {
namespace index {
namespace {

CollectionSpec CodesSpec(const std::string& factory) {
  CollectionSpec s;
  s.name = "codes";
  s.kind = Kind::kCodes;
  s.dim = 6;
  s.code_k = 5;  // padded to 8 inside the index (3-bit codes)
  s.index_factory = factory;
  return s;
}

struct CodesData {
  std::vector<uint8_t> codes;  // n x d
  std::vector<int64_t> ids;
};

CodesData RandomCodes(const CollectionSpec& s, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  CodesData d;
  for (int64_t i = 0; i < n * s.dim; ++i) d.codes.push_back(uint8_t(rng() % uint64_t(s.code_k)));
  for (int64_t i = 0; i < n; ++i) d.ids.push_back(1000 + i);
  return d;
}

// A log-softmax table (d x k) with one -inf entry (log 0).
std::vector<float> RandomTable(const CollectionSpec& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> table;
  for (int i = 0; i < s.dim; ++i) {
    std::vector<float> logits(size_t(s.code_k));
    for (float& l : logits) l = normal(rng);
    double z = 0;
    for (float l : logits) z += std::exp(double(l));
    for (float l : logits) table.push_back(float(l - std::log(z)));
  }
  table[1] = -INFINITY;
  return table;
}

// The exact top-k ids by the DIMCO score sum_i L[i, c_i] over live items.
std::vector<int64_t> ExactTop(const CollectionSpec& s, const CodesData& d,
                              const std::vector<float>& table, const std::set<int64_t>& removed,
                              size_t k) {
  std::vector<std::pair<double, int64_t>> scored;
  for (size_t r = 0; r < d.ids.size(); ++r) {
    if (removed.count(d.ids[r])) continue;
    double score = 0;
    for (int i = 0; i < s.dim; ++i) score += table[size_t(i) * s.code_k + d.codes[r * s.dim + i]];
    scored.emplace_back(-score, d.ids[r]);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<int64_t> top;
  for (size_t j = 0; j < k && j < scored.size(); ++j) top.push_back(scored[j].second);
  return top;
}

// Ids whose exact score ties the k-th best are interchangeable; compare sets of
// scores instead of ids where ties are likely (small alphabets), so compare
// the exact scores of what the index returned with the exact top scores.
std::vector<double> ScoresOf(const CollectionSpec& s, const CodesData& d,
                             const std::vector<float>& table, const std::vector<int64_t>& ids) {
  std::vector<double> out;
  for (int64_t id : ids) {
    const size_t r = size_t(id - 1000);
    double score = 0;
    for (int i = 0; i < s.dim; ++i) score += table[size_t(i) * s.code_k + d.codes[r * s.dim + i]];
    out.push_back(score);
  }
  return out;
}

class CodesIndexTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CodesIndexTest, RanksByTheExactDimcoScoreBeforeAndAfterRemovalAndReload) {
  const CollectionSpec spec = CodesSpec(GetParam());
  std::unique_ptr<CoarseIndex> index;
  ASSERT_TRUE(CoarseIndex::Create(spec, &index).ok());
  const CodesData data = RandomCodes(spec, 600, 1);
  if (!index->is_trained()) {
    ASSERT_GT(index->train_rows_wanted(), 0);
    ASSERT_TRUE(index->Train(data.codes.data(), 600).ok());
  }
  ASSERT_TRUE(index->Add(data.codes.data(), 600, data.ids.data()).ok());
  EXPECT_EQ(index->ntotal(), 600);
  CoarseSearchKnobs all_lists;
  all_lists.nprobe = 4;  // every list of IVF4
  std::set<int64_t> removed;
  auto check = [&](CoarseIndex* idx, const char* when) {
    for (uint64_t seed = 10; seed < 15; ++seed) {
      const std::vector<float> table = RandomTable(spec, seed);
      std::vector<int64_t> labels;
      ASSERT_TRUE(idx->Search(table.data(), 1, 10, all_lists, &labels).ok());
      for (int64_t id : labels) EXPECT_EQ(removed.count(id), 0u) << when;
      const std::vector<double> got = ScoresOf(spec, data, table, labels);
      const std::vector<double> want =
          ScoresOf(spec, data, table, ExactTop(spec, data, table, removed, 10));
      ASSERT_EQ(got.size(), want.size()) << when;
      for (size_t j = 0; j < got.size(); ++j) EXPECT_NEAR(got[j], want[j], 1e-4) << when;
    }
  };
  check(index.get(), "after add");
  std::vector<int64_t> gone;
  for (int64_t id = 1000; id < 1600; id += 3) gone.push_back(id);
  bool physical = false;
  ASSERT_TRUE(index->Remove(gone.data(), int64_t(gone.size()), &physical).ok());
  EXPECT_TRUE(physical);
  removed.insert(gone.begin(), gone.end());
  EXPECT_EQ(index->ntotal(), 600 - int64_t(gone.size()));
  check(index.get(), "after remove");

  ::hedgedb::testing::TempDir dir;
  const std::string path = dir.path() + "/c.hidx";
  ASSERT_TRUE(index->Save(path, 7, /*binding=*/42).ok());
  std::unique_ptr<CoarseIndex> loaded;
  uint64_t sequence = 0;
  ASSERT_TRUE(CoarseIndex::Load(spec, path, 42, &loaded, &sequence).ok());
  EXPECT_EQ(sequence, 7u);
  EXPECT_EQ(loaded->ntotal(), index->ntotal());
  check(loaded.get(), "after reload");
  EXPECT_TRUE(CoarseIndex::Load(spec, path, 43, &loaded, &sequence).IsCorruption());
}

INSTANTIATE_TEST_SUITE_P(Factories, CodesIndexTest, ::testing::Values("PQ", "IVF4,PQ", "IVF1,PQ"));

TEST(VectorIndexTest, GaussianCandidatesComeInExpectedSquaredDistanceOrder) {
  CollectionSpec spec;
  spec.name = "g";
  spec.kind = Kind::kGaussian;
  spec.dim = 4;
  spec.index_factory = "Flat";
  std::unique_ptr<CoarseIndex> index;
  ASSERT_TRUE(CoarseIndex::Create(spec, &index).ok());
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uni(0.01f, 2.0f);
  const int64_t n = 200;
  std::vector<float> rows;  // [mu (4), var (4)] per item
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    for (int d = 0; d < 4; ++d) rows.push_back(normal(rng));
    for (int d = 0; d < 4; ++d) rows.push_back(uni(rng));
    ids.push_back(i * 10);
  }
  ASSERT_TRUE(index->Add(rows.data(), n, ids.data()).ok());
  const std::vector<float> query = {0.1f, -0.2f, 0.3f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  std::vector<int64_t> labels;
  ASSERT_TRUE(index->Search(query.data(), 1, 20, CoarseSearchKnobs(), &labels).ok());
  std::vector<std::pair<double, int64_t>> truth;
  for (int64_t i = 0; i < n; ++i) {
    double e = 0;  // ||mu_q - mu||^2 + tr S (the query's own trace is a constant)
    for (int d = 0; d < 4; ++d) {
      const double diff = query[d] - rows[size_t(i) * 8 + d];
      e += diff * diff + rows[size_t(i) * 8 + 4 + d];
    }
    truth.emplace_back(e, ids[i]);
  }
  std::sort(truth.begin(), truth.end());
  for (size_t j = 0; j < 20; ++j) EXPECT_EQ(labels[j], truth[j].second) << j;
}

// MeasureRecall (the collection's check of its index as items change) is
// the fraction of a brute-force exact top-100 that a search at each knob
// returns, for 100 rows spread over [query_first, n); at the tuned knob over
// all rows it is what TuneKnobs measured.
TEST(VectorIndexTest, MeasureRecallIsTheExactTopsFractionAtEachKnob) {
  CollectionSpec spec;
  spec.name = "p";
  spec.kind = Kind::kPoint;
  spec.dim = 8;
  spec.index_factory = "IVF64,Flat";
  std::unique_ptr<CoarseIndex> index;
  ASSERT_TRUE(CoarseIndex::Create(spec, &index).ok());
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  const int64_t n = 5000, D = 8, k = 100;
  std::vector<float> rows;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    for (int d = 0; d < D; ++d) rows.push_back(normal(rng));
    ids.push_back(7 * i + 1);
  }
  ASSERT_TRUE(index->Train(rows.data(), n).ok());
  ASSERT_TRUE(index->Add(rows.data(), n, ids.data()).ok());
  ASSERT_TRUE(index->TuneKnobs(rows.data(), ids.data(), n, k, 0.95).ok());
  const int tuned = index->default_knobs().nprobe;
  std::vector<CoarseSearchKnobs> knobs(3);
  knobs[0].nprobe = 1;
  knobs[1].nprobe = tuned;
  knobs[2].nprobe = 64;  // every list: exact
  std::vector<double> recalls;
  ASSERT_TRUE(index->MeasureRecall(rows.data(), ids.data(), n, k, 0, knobs, &recalls).ok());
  ASSERT_EQ(recalls.size(), 3u);
  EXPECT_DOUBLE_EQ(recalls[1], index->coarse_recall());  // the same measurement
  EXPECT_DOUBLE_EQ(recalls[2], 1.0);
  EXPECT_LT(recalls[0], recalls[1]);
  // Brute force: queries rows first + q * span / 100, exact top-100 by L2.
  for (const int64_t first : {int64_t(0), n - 1000}) {
    ASSERT_TRUE(index->MeasureRecall(rows.data(), ids.data(), n, k, first, knobs, &recalls).ok());
    for (size_t j = 0; j < knobs.size(); ++j) {
      const int64_t span = n - first;
      int64_t hits = 0;
      for (int64_t q = 0; q < 100; ++q) {
        const float* x = rows.data() + (first + q * span / 100) * D;
        std::vector<std::pair<double, int64_t>> all;
        for (int64_t i = 0; i < n; ++i) {
          double e = 0;
          for (int d = 0; d < D; ++d)
            e += double(x[d] - rows[size_t(i * D + d)]) * (x[d] - rows[size_t(i * D + d)]);
          all.emplace_back(e, ids[size_t(i)]);
        }
        std::partial_sort(all.begin(), all.begin() + k, all.end());
        std::set<int64_t> truth;
        for (int64_t i = 0; i < k; ++i) truth.insert(all[size_t(i)].second);
        std::vector<int64_t> labels;
        ASSERT_TRUE(index->Search(x, 1, k, knobs[j], &labels).ok());
        for (int64_t l : labels) hits += truth.count(l);
      }
      // Ties at the 100th distance could differ; random floats have none.
      EXPECT_NEAR(recalls[j], double(hits) / (100.0 * k), 1e-12)
          << "first " << first << " knob " << j;
    }
  }
  // Codes and Flat indexes have no knob to measure.
  spec.index_factory = "Flat";
  ASSERT_TRUE(CoarseIndex::Create(spec, &index).ok());
  ASSERT_TRUE(index->Add(rows.data(), n, ids.data()).ok());
  EXPECT_EQ(index->MeasureRecall(rows.data(), ids.data(), n, k, 0, knobs, &recalls).code(),
            Status::Code::kNotSupported);
}

TEST(VectorIndexTest, FilesOfAnotherStructureOrDamagedAreRefused) {
  CollectionSpec spec;
  spec.name = "g";
  spec.kind = Kind::kPoint;
  spec.dim = 4;
  spec.index_factory = "IVF2,Flat";
  std::unique_ptr<CoarseIndex> index;
  ASSERT_TRUE(CoarseIndex::Create(spec, &index).ok());
  std::vector<float> rows(400);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  for (float& v : rows) v = normal(rng);
  std::vector<int64_t> ids(100);
  for (int64_t i = 0; i < 100; ++i) ids[i] = i;
  ASSERT_TRUE(index->Train(rows.data(), 100).ok());
  ASSERT_TRUE(index->Add(rows.data(), 100, ids.data()).ok());
  ::hedgedb::testing::TempDir dir;
  const std::string path = dir.path() + "/v.hidx";
  ASSERT_TRUE(index->Save(path, 3, 9).ok());
  std::unique_ptr<CoarseIndex> loaded;
  uint64_t sequence = 0;
  ASSERT_TRUE(CoarseIndex::Load(spec, path, 9, &loaded, &sequence).ok());
  CollectionSpec other = spec;
  other.index_factory = "IVF4,Flat";  // another list count
  Status s = CoarseIndex::Load(other, path, 9, &loaded, &sequence);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  other.index_factory = "Flat";
  EXPECT_TRUE(CoarseIndex::Load(other, path, 9, &loaded, &sequence).IsCorruption());
  const uintmax_t size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 1);
  s = CoarseIndex::Load(spec, path, 9, &loaded, &sequence);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(
      CoarseIndex::Load(spec, dir.path() + "/none.hidx", 9, &loaded, &sequence).IsNotFound());
}

// A saved Flat index comes back as an IndexFlatL2; it is the same structure
// and loads (it was refused, so every open rebuilt Flat indexes).
TEST(VectorIndexTest, SavedFlatIndexesLoad) {
  for (Kind kind : {Kind::kPoint, Kind::kGaussian}) {
    CollectionSpec spec = ::hedgedb::testing::MakeSpec("f", kind, 4, "Flat");
    std::unique_ptr<CoarseIndex> index;
    ASSERT_TRUE(CoarseIndex::Create(spec, &index).ok());
    ::hedgedb::testing::Batch b = ::hedgedb::testing::RandomBatch(spec, 10, 0, 1);
    std::vector<float> rows;
    for (int64_t i = 0; i < 10; ++i) {
      if (kind == Kind::kPoint) {
        rows.insert(rows.end(), b.vec.begin() + i * 4, b.vec.begin() + (i + 1) * 4);
      } else {
        rows.insert(rows.end(), b.mean.begin() + i * 4, b.mean.begin() + (i + 1) * 4);
        rows.insert(rows.end(), b.var.begin() + i * 4, b.var.begin() + (i + 1) * 4);
      }
    }
    ASSERT_TRUE(index->Add(rows.data(), 10, b.ids.data()).ok());
    ::hedgedb::testing::TempDir dir;
    const std::string path = dir.path() + "/f.hidx";
    ASSERT_TRUE(index->Save(path, 3, 9).ok());
    std::unique_ptr<CoarseIndex> loaded;
    uint64_t sequence = 0;
    Status s = CoarseIndex::Load(spec, path, 9, &loaded, &sequence);
    ASSERT_TRUE(s.ok()) << KindName(kind) << ": " << s.ToString();
    EXPECT_EQ(loaded->ntotal(), 10);
  }
}

// What a half-float index (SQfp16) would store as an infinity, its add
// refuses, naming the item's id (the ingest check keeps such items out; this
// keeps out any that reach the index otherwise, e.g. records written before
// that check). An IVF checks what it stores: the residual against the
// item's list centroid, which can exceed 65504 when the value does not.
TEST(VectorIndexTest, HalfFloatIndexesRefuseToAddWhatTheyCannotEncode) {
  for (const std::string factory : {"SQfp16", "HNSW8,SQfp16", "IVF2,SQfp16"}) {
    SCOPED_TRACE(factory);
    const bool ivf = factory.rfind("IVF", 0) == 0;
    CollectionSpec spec = ::hedgedb::testing::MakeSpec("p", Kind::kPoint, 4, factory);
    std::unique_ptr<CoarseIndex> index;
    ASSERT_TRUE(CoarseIndex::Create(spec, &index).ok());
    // Trained on points around -30000: the IVF's centroids lie there.
    std::mt19937_64 rng(5);
    std::normal_distribution<float> normal;
    const int64_t n = 1000;
    std::vector<float> rows(size_t(n) * 4);
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (float& v : rows) v = -30000.0f + normal(rng);
    for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = i;
    if (!index->is_trained()) {
      ASSERT_TRUE(index->Train(rows.data(), n).ok());
    }
    ASSERT_TRUE(index->Add(rows.data(), n, ids.data()).ok());
    // 40000: a half holds it, but not its residual (about 70000) under an IVF.
    std::vector<float> far = {1.0f, 40000.0f, 1.0f, 1.0f};
    const int64_t far_id = 77;
    Status s = index->Add(far.data(), 1, &far_id);
    if (ivf) {
      EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
      EXPECT_NE(s.ToString().find("vector value less its list's centroid 7000"), std::string::npos)
          << s.ToString();
      EXPECT_NE(s.ToString().find("of item id 77 (coarse dimension 1)"), std::string::npos)
          << s.ToString();
      EXPECT_EQ(index->ntotal(), n);
    } else {
      EXPECT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(index->ntotal(), n + 1);
    }
    far[1] = -65505.0f;  // beyond a half even as it is (residual 35505 under the IVF)
    far[2] = 70000.0f;   // beyond either way
    const int64_t far_id2 = 78;
    s = index->Add(far.data(), 1, &far_id2);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.ToString().find(ivf ? "of item id 78 (coarse dimension 2)"
                                    : "vector value -65505 of item id 78 (coarse dimension 1)"),
              std::string::npos)
        << s.ToString();
    EXPECT_NE(s.ToString().find("largest magnitude 65504"), std::string::npos) << s.ToString();
  }
}

// The ingest check's bound (CheckCoarseRange): 65504 for a flat or HNSW
// half-float store, 32736 under an IVF (the residual is at most about twice
// the value); any finite value for float and 8-bit encodings.
TEST(VectorIndexTest, CoarseRangeBoundsPerFactory) {
  struct Case {
    std::string factory;
    float limit;
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (const Case& c : {Case{"SQfp16", 65504.0f}, Case{"HNSW8,SQfp16", 65504.0f},
                        Case{"IVF2,SQfp16", 32736.0f}, Case{"IVF2_HNSW8,SQfp16", 32736.0f},
                        Case{"IVF2,Flat", inf}, Case{"IVF2,SQ8", inf}, Case{"HNSW8", inf}}) {
    SCOPED_TRACE(c.factory);
    CollectionSpec spec = ::hedgedb::testing::MakeSpec("p", Kind::kPoint, 4, c.factory);
    FactoryShape shape;
    ASSERT_TRUE(CheckFactoryString(spec, c.factory, &shape).ok());
    EXPECT_EQ(CoarseValueLimit(shape), c.limit);
    const float at = std::isinf(c.limit) ? 1e30f : c.limit;
    std::vector<float> row = {0.0f, -at, at, 0.0f};
    const int64_t id = 9;
    EXPECT_TRUE(CoarseIndex::CheckCoarseRange(spec, row.data(), 1, &id).ok());
    if (std::isinf(c.limit)) continue;
    row[2] = std::nextafter(c.limit, inf);
    Status s = CoarseIndex::CheckCoarseRange(spec, row.data(), 1, &id);
    EXPECT_TRUE(s.IsInvalidArgument());
    EXPECT_NE(s.ToString().find("of item id 9 (coarse dimension 2)"), std::string::npos)
        << s.ToString();
  }
}

}  // namespace
}  // namespace index
}  // namespace hedgedb
