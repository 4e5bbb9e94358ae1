// hedgedb as the storage backend of an application: create a collection of
// Gaussian embeddings, ingest a batch, close, reopen and search.
// Links only libhedgedb (no LibTorch, no FAISS or RocksDB headers).
#include <hedgedb/hedgedb.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

static int Fail(const char* what, const hedgedb::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DB_DIR\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int kDim = 16, kItems = 1000;

  std::vector<float> mean(kItems * kDim), var(kItems * kDim);
  std::vector<int64_t> labels(kItems);
  std::vector<std::string> payloads(kItems);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (int i = 0; i < kItems; ++i) {
    labels[i] = i % 10;
    payloads[i] = "photo-" + std::to_string(i) + ".jpg";
    for (int d = 0; d < kDim; ++d) {
      mean[i * kDim + d] = float(labels[i]) * (d % 10 == labels[i] ? 3.0f : 0.0f) + normal(rng) * 0.3f;
      var[i * kDim + d] = 0.01f + 0.05f * float(i % 7);
    }
  }

  {
    std::unique_ptr<hedgedb::DB> db;
    hedgedb::Status s = hedgedb::DB::Open(hedgedb::Options(), path, &db);
    if (!s.ok()) return Fail("open", s);
    hedgedb::CollectionSpec spec;
    spec.name = "photos";
    spec.kind = hedgedb::Kind::kGaussian;
    spec.dim = kDim;
    spec.index_factory = "Flat";
    spec.match_a = 1.0f;
    spec.match_b = 2.0f;
    s = db->CreateCollection(spec);
    if (!s.ok()) return Fail("create", s);
    hedgedb::IngestBatch batch;
    batch.data.n = kItems;
    batch.data.mean = mean.data();
    batch.data.var = var.data();
    batch.labels = labels.data();
    batch.payloads = payloads.data();
    std::vector<int64_t> ids;
    s = db->Ingest("photos", batch, &ids);
    if (!s.ok()) return Fail("ingest", s);
    std::printf("ingested %zu items, ids %lld..%lld\n", ids.size(), (long long)ids.front(),
                (long long)ids.back());
  }  // closing saves the index

  std::unique_ptr<hedgedb::DB> db;
  hedgedb::Status s = hedgedb::DB::Open(hedgedb::Options(), path, &db);
  if (!s.ok()) return Fail("reopen", s);
  hedgedb::EmbeddingView query;
  query.n = 1;
  query.mean = mean.data() + 3 * kDim;  // item 3 as the query
  query.var = var.data() + 3 * kDim;
  hedgedb::SearchOptions options;
  options.k = 5;
  options.with_payload = true;
  std::vector<hedgedb::SearchResult> results;
  s = db->Search("photos", query, options, &results);
  if (!s.ok()) return Fail("search", s);
  std::printf("query uncertainty %.4f\n", results[0].query_uncertainty);
  int same_label = 0;
  for (const auto& hit : results[0].hits) {
    std::printf("  id %lld  p(match) %.4f  uncertainty %.4f  label %lld  %s\n", (long long)hit.id,
                hit.score, hit.uncertainty, (long long)hit.label, hit.payload.c_str());
    same_label += hit.label == labels[3];
  }
  // The check the install test relies on: the query finds its own class.
  if (results[0].hits.size() != 5 || same_label != 5) {
    std::fprintf(stderr, "unexpected results\n");
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
