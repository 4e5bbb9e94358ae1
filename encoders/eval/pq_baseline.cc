#include "encoders/eval/pq_baseline.h"

#include <faiss/impl/ProductQuantizer.h>

#include <algorithm>
#include <cstdio>
#include <exception>

namespace hedgedb {
namespace encoders {

Status ParsePqSpec(const std::string& text, PqOptions* options) {
  int m = 0, b = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%dx%d%c", &m, &b, &tail) != 2 || m < 1 || b < 1 || b > 16) {
    return Status::InvalidArgument(
        "product quantizer '" + text +
        "': expected MxB, M >= 1 sub-codes of B = 1..16 bits (e.g. 2x8)");
  }
  options->subquantizers = m;
  options->bits = b;
  return Status::OK();
}

Status PqRetrieval(const Embeddings& train, const Embeddings& probes, const Embeddings& gallery,
                   const std::vector<int64_t>& labels, const PqOptions& options,
                   RetrievalMetrics* metrics, const RetrievalOptions& retrieval) {
  if (train.kind != Kind::kPoint || probes.kind != Kind::kPoint || gallery.kind != Kind::kPoint) {
    return Status::InvalidArgument("product quantization needs point embeddings");
  }
  const int64_t d = probes.dim;
  if (train.dim != d || gallery.dim != d) {
    return Status::InvalidArgument("product quantization: embedding dimensions differ");
  }
  if (options.subquantizers < 1 || d % options.subquantizers != 0 || options.bits < 1 ||
      options.bits > 16) {
    return Status::InvalidArgument(
        "product quantization: " + std::to_string(options.subquantizers) +
        " sub-codes do not divide dimension " + std::to_string(d) + " (or bits outside 1..16)");
  }
  const int64_t centroids = int64_t{1} << options.bits;
  const int64_t n_train = std::min(train.n, options.max_train);
  if (n_train < centroids) {
    return Status::InvalidArgument("product quantization: " + std::to_string(n_train) +
                                   " training items for " + std::to_string(centroids) +
                                   " centroids per sub-code");
  }
  if (static_cast<int64_t>(labels.size()) != probes.n || gallery.n != probes.n) {
    return Status::InvalidArgument("product quantization: probes, gallery and labels differ");
  }
  const size_t m = static_cast<size_t>(options.subquantizers);
  const size_t ksub = static_cast<size_t>(centroids);
  std::vector<int32_t> codes(static_cast<size_t>(gallery.n) * m);
  std::vector<float> tables;  // per probe: M x 2^B squared distances
  try {
    faiss::ProductQuantizer pq(static_cast<size_t>(d), m, static_cast<size_t>(options.bits));
    pq.cp.seed = static_cast<int>(options.seed & 0x7fffffff);
    pq.verbose = false;
    pq.train(static_cast<size_t>(n_train), train.vec.data());
    std::vector<uint8_t> packed(static_cast<size_t>(gallery.n) * pq.code_size);
    pq.compute_codes(gallery.vec.data(), packed.data(), static_cast<size_t>(gallery.n));
    for (int64_t i = 0; i < gallery.n; ++i) {
      faiss::PQDecoderGeneric decoder(packed.data() + size_t(i) * pq.code_size, options.bits);
      for (size_t j = 0; j < m; ++j) codes[size_t(i) * m + j] = int32_t(decoder.decode());
    }
    tables.resize(static_cast<size_t>(probes.n) * m * ksub);
    pq.compute_distance_tables(static_cast<size_t>(probes.n), probes.vec.data(), tables.data());
  } catch (const std::exception& e) {
    return Status::Internal(std::string("product quantization failed: ") + e.what());
  }
  // Similarity = minus the ADC squared distance.
  const SimilarityRowFn rows = [&](int64_t q, float* row) {
    const float* table = tables.data() + size_t(q) * m * ksub;
    for (int64_t i = 0; i < gallery.n; ++i) {
      float distance = 0;
      for (size_t j = 0; j < m; ++j) distance += table[j * ksub + size_t(codes[size_t(i) * m + j])];
      row[i] = -distance;
    }
  };
  return EvaluateRetrieval(rows, probes.n, labels, labels, retrieval, metrics);
}

}  // namespace encoders
}  // namespace hedgedb
