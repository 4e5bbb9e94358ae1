// NearestCentroids (the IVF list assignment of adds and of k-means) against
// FAISS's own k = 1 search over a flat L2 index, and the IVF it fills against
// one FAISS fills by itself.
#include "index/nearest_centroid.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "index/nearest_centroid_isa.h"
#include "tests/kernel_isas.h"

namespace hedgedb {
namespace index {
namespace {

std::vector<float> Normal(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(NearestCentroids, EqualsFaissFlatSearchAcrossBlockEdges) {
  // Row and centroid counts off the block sizes (256 rows, 1024 centroids).
  for (const auto& [n, k, d] : std::vector<std::tuple<int64_t, int64_t, int>>{
           {1, 1, 3}, {300, 7, 65}, {513, 1024, 16}, {1000, 1500, 33}, {257, 2049, 8}}) {
    const std::vector<float> x = Normal(n * d, 1), c = Normal(k * d, 2);
    faiss::IndexFlatL2 flat(d);
    flat.add(k, c.data());
    std::vector<faiss::Index::idx_t> want(static_cast<size_t>(n));
    std::vector<float> want_distances(static_cast<size_t>(n));
    flat.search(n, x.data(), 1, want_distances.data(), want.data());
    std::vector<int64_t> got(static_cast<size_t>(n), -7);
    std::vector<float> distances(static_cast<size_t>(n));
    NearestCentroids(x.data(), n, c.data(), k, d, got.data(), distances.data());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], want[i]) << "n=" << n << " k=" << k << " d=" << d << " row " << i;
      EXPECT_NEAR(distances[i], want_distances[i], 1e-3f * (1 + want_distances[i]));
    }
    // Without distances: the same labels.
    std::vector<int64_t> again(static_cast<size_t>(n));
    NearestCentroids(x.data(), n, c.data(), k, d, again.data(), nullptr);
    EXPECT_EQ(again, got);
  }
}

TEST(NearestCentroids, TiesGoToTheFirstCentroidAndEveryRowGetsOne) {
  const int d = 4;
  // Centroids 0 and 2 coincide, 1 and 3 coincide; 1500 copies of one more
  // pair spread the tie over two centroid blocks.
  std::vector<float> c = {1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0};
  for (int j = 0; j < 1500; ++j) c.insert(c.end(), {5, 5, 5, 5});
  const int64_t k = int64_t(c.size()) / d;
  const std::vector<float> x = {0.9f, 0, 0, 0, 0, 1.1f, 0, 0, 5, 5, 5, 5};
  std::vector<int64_t> got(3, -1);
  NearestCentroids(x.data(), 3, c.data(), k, d, got.data(), nullptr);
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 4}));
  // Rows that are not finite still get a list (never -1, which FAISS would
  // drop).
  const std::vector<float> bad = {NAN, 0, 0, 0};
  NearestCentroids(bad.data(), 1, c.data(), k, d, got.data(), nullptr);
  EXPECT_GE(got[0], 0);
  EXPECT_LT(got[0], k);
}

TEST(NearestCentroids, KMeansAndAddFillTheIvfAsFaissDoes) {
  // The same IVF trained and filled by FAISS alone and with
  // NearestCentroidIndex as its clustering index and NearestCentroids'
  // lists: identical lists.
  const int d = 12;
  const int64_t nlist = 32, n = 39 * nlist;
  const std::vector<float> x = Normal(n * d, 3);
  faiss::IndexFlatL2 q1(d), q2(d);
  faiss::IndexIVFFlat plain(&q1, d, nlist), fast(&q2, d, nlist);
  plain.train(n, x.data());
  NearestCentroidIndex assigner(d);
  fast.clustering_index = &assigner;
  fast.train(n, x.data());
  fast.clustering_index = nullptr;
  ASSERT_EQ(q1.ntotal, nlist);
  ASSERT_EQ(q2.ntotal, nlist);
  for (int64_t j = 0; j < nlist * d; ++j) {
    ASSERT_NEAR(q1.get_xb()[j], q2.get_xb()[j], 1e-4f) << "centroid value " << j;
  }
  std::vector<faiss::Index::idx_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = 1000 + i;
  plain.add_with_ids(n, x.data(), ids.data());
  std::vector<int64_t> lists(static_cast<size_t>(n));
  NearestCentroids(x.data(), n, q2.get_xb(), nlist, d, lists.data(), nullptr);
  fast.add_core(n, x.data(), ids.data(), lists.data());
  for (int64_t list = 0; list < nlist; ++list) {
    ASSERT_EQ(plain.invlists->list_size(list), fast.invlists->list_size(list)) << list;
    const size_t size = plain.invlists->list_size(list);
    const faiss::Index::idx_t* a = plain.invlists->get_ids(list);
    const faiss::Index::idx_t* b = fast.invlists->get_ids(list);
    EXPECT_TRUE(std::equal(a, a + size, b)) << list;
  }
}

// The row minimum follows the SIMD level (SetKernelIsa(kPortable) runs the
// baseline version), and every level's labels and distances equal the
// portable level's bit for bit (nearest_centroid_impl.h: the same operations
// in every version).
TEST(NearestCentroids, EveryLevelRunsItsVersionAndMatchesPortableExactly) {
  const int64_t n = 700, k = 1500;
  const int d = 19;
  const std::vector<float> x = Normal(n * d, 4), c = Normal(k * d, 5);
  std::vector<int64_t> want(static_cast<size_t>(n));
  std::vector<float> want_distances(static_cast<size_t>(n));
  {
    const testing_util::ScopedKernelIsa portable_level(KernelIsa::kPortable);
    ASSERT_TRUE(portable_level.ok());
    EXPECT_EQ(ActiveRowMinimum(), &portable::RowMinimum);
    NearestCentroids(x.data(), n, c.data(), k, d, want.data(), want_distances.data());
  }
  for (KernelIsa isa : testing_util::SupportedKernelIsas()) {
    const testing_util::ScopedKernelIsa forced(isa);
    ASSERT_TRUE(forced.ok());
    const RowMinimumFn expected =
        isa == KernelIsa::kAvx512 ? HEDGEDB_SIMD_X86_ONLY(&avx512::RowMinimum)
        : isa == KernelIsa::kAvx2 ? HEDGEDB_SIMD_X86_ONLY(&avx2::RowMinimum)
                                  : &portable::RowMinimum;
    EXPECT_EQ(ActiveRowMinimum(), expected) << KernelIsaName(isa);
    std::vector<int64_t> got(static_cast<size_t>(n), -1);
    std::vector<float> distances(static_cast<size_t>(n));
    NearestCentroids(x.data(), n, c.data(), k, d, got.data(), distances.data());
    EXPECT_EQ(got, want) << KernelIsaName(isa);
    EXPECT_EQ(0, std::memcmp(distances.data(), want_distances.data(), n * sizeof(float)))
        << KernelIsaName(isa);
  }
}

}  // namespace
}  // namespace index
}  // namespace hedgedb
