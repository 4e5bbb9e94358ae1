// Batch samplers for encoder training and evaluation pairs (torch-free).
//
// Samplers return index lists into a data set (and pair lists as positions
// into the batch); the trainer gathers the items and turns them into tensors.
// Every sampler is deterministic under its seed: the same labels, options and
// seed give the same sequence of batches on every platform (see SeededRng).
//
//   HibTwoStreamSampler   HIB section 2.3: a random stream plus a same-class
//                         partner stream, shuffled into one batch; pairs with
//                         balanced positives for the soft contrastive / VIB loss.
//   EpisodeSampler        SPE / prototypical networks: n_way classes x
//                         (n_support + n_query) items.
//   ClassBalancedSampler  DIMCO (10 classes x 10 items) and F-statistic
//                         (12 classes x up to 10 items) batches.
//   SampleVerificationPairs  fixed evaluation pairs, half matching (HIB: 10k).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "hedgedb/status.h"

namespace hedgedb {
namespace encoders {

// The random source of the encoders' data code. std::mt19937_64's output
// sequence is fixed by the C++ standard, but std::uniform_*_distribution and
// std::shuffle are implementation-defined; so every conversion here is
// explicit and portable:
//   UniformInt(n):  rejection sampling on 64-bit draws (unbiased);
//   UniformReal():  the top 53 bits of one draw times 2^-53, in [0, 1);
//   Shuffle:        Fisher-Yates from the back with UniformInt.
// The same seed therefore gives the same data on every compiler and platform.
class SeededRng {
 public:
  explicit SeededRng(uint64_t seed) : engine_(seed) {}

  // A seed for an independent stream `stream` of `seed` (SplitMix64 mixing),
  // so that e.g. the class split and the occlusions of a data set do not
  // shift when another part changes how many numbers it draws.
  static uint64_t DeriveSeed(uint64_t seed, uint64_t stream);

  uint64_t NextU64() { return engine_(); }
  // Uniform in [0, n); n must be > 0.
  uint64_t UniformInt(uint64_t n);
  // Uniform in [lo, hi] (inclusive); requires lo <= hi.
  int64_t UniformIntInclusive(int64_t lo, int64_t hi);
  // Uniform in [0, 1) with 53 random bits.
  double UniformReal() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // True with probability p (p <= 0: never, p >= 1: always).
  bool Bernoulli(double p) { return UniformReal() < p; }

  template <typename T>
  void Shuffle(std::vector<T>* values) {
    for (size_t i = values->size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(UniformInt(i));
      std::swap((*values)[i - 1], (*values)[j]);
    }
  }

 private:
  std::mt19937_64 engine_;
};

// Item indices grouped by label. Classes are kept in ascending label order and
// the items of a class in ascending index order, so everything derived from a
// LabelIndex is independent of hash-map iteration order.
class LabelIndex {
 public:
  explicit LabelIndex(const std::vector<int64_t>& labels);

  int64_t num_items() const { return num_items_; }
  int64_t num_classes() const { return static_cast<int64_t>(classes_.size()); }
  // Ascending.
  const std::vector<int64_t>& classes() const { return classes_; }
  // Items of the class at position `class_slot` of classes().
  const std::vector<int64_t>& items(int64_t class_slot) const { return items_[class_slot]; }
  // Position of `label` in classes(), or -1.
  int64_t SlotOf(int64_t label) const;

 private:
  int64_t num_items_ = 0;
  std::vector<int64_t> classes_;
  std::vector<std::vector<int64_t>> items_;
};

// ---------------------------------------------------------------------------
// HIB two streams.

// A pair of batch positions (indices into PairBatch::indices).
struct BatchPair {
  int32_t first = 0;
  int32_t second = 0;
  bool match = false;  // the two items have the same label
};

struct PairBatch {
  std::vector<int64_t> indices;  // data set indices, in shuffled batch order
  std::vector<BatchPair> pairs;
  int64_t num_matching_pairs = 0;
};

enum class HibPairMode {
  // Every matching pair of the batch plus as many non-matching pairs drawn
  // uniformly (without replacement) from the batch's non-matching pairs: the
  // loss sees positives and negatives in equal numbers ("we encourage a balance
  // of m = 0 and m = 1 pair samples within each SGD minibatch"). Default.
  kBalanced,
  // All unordered pairs of batch positions.
  kAllPairs,
};

struct HibSamplerOptions {
  int batch_size = 128;  // HIB section 4; even: half random stream, half partners
  HibPairMode pair_mode = HibPairMode::kBalanced;
  uint64_t seed = 0;
};

// HIB section 2.3: "two streams of input sample images. One samples images
// from the training set at random and the other selects images from specific
// class labels, and then these are randomly shuffled to produce the final
// batch." The random stream walks a fresh random permutation of the data set
// each epoch (batch_size / 2 items per batch); the class stream draws, for each
// random-stream item, a different item of the same class. Items of classes
// with a single item cannot have a partner and are left out of the random
// stream. Positions are then shuffled and the pairs computed on the shuffled
// batch; two positions holding the same data item (a partner drawn twice) never
// form a pair.
class HibTwoStreamSampler {
 public:
  // Errors: odd or non-positive batch size, no class with at least two items,
  // fewer such items than batch_size / 2 (the random stream's share).
  static Status Create(const std::vector<int64_t>& labels, const HibSamplerOptions& options,
                       std::unique_ptr<HibTwoStreamSampler>* sampler);

  PairBatch Next();
  // Completed passes of the random stream over the eligible items.
  int64_t epoch() const { return epoch_; }

 private:
  HibTwoStreamSampler(const std::vector<int64_t>& labels, const HibSamplerOptions& options);

  std::vector<int64_t> labels_;
  LabelIndex index_;
  HibSamplerOptions options_;
  SeededRng rng_;
  std::vector<int64_t> eligible_;  // items whose class has >= 2 items
  std::vector<int64_t> order_;     // current epoch's permutation of eligible_
  size_t cursor_ = 0;
  int64_t epoch_ = 0;
};

// ---------------------------------------------------------------------------
// SPE / prototypical network episodes.

struct EpisodeOptions {
  // Classes per episode; 0 = every class with enough items. The SPE paper's
  // N-digit protocol uses all classes per episode for 2-digit MNIST (70
  // training / 30 unseen test classes). Its other settings (shots per class,
  // 3-digit ways) are lost from our copy of the paper, so they are not
  // defaulted from it: set them explicitly.
  int n_way = 0;
  int n_support = 5;
  int n_query = 5;
  uint64_t seed = 0;
};

// One episode. Support and query lists are class-major: the items of
// classes[0] first, then classes[1], ...; *_slot gives each item's class
// position in `classes` (the episode-local target of the classification loss).
struct Episode {
  std::vector<int64_t> classes;  // labels, in episode order
  std::vector<int64_t> support;  // n_way * n_support data set indices
  std::vector<int32_t> support_slot;
  std::vector<int64_t> query;  // n_way * n_query data set indices
  std::vector<int32_t> query_slot;
};

// Each episode draws n_way classes uniformly without replacement among the
// classes with at least n_support + n_query items, then n_support + n_query
// distinct items of each class uniformly without replacement (support and
// query are disjoint).
class EpisodeSampler {
 public:
  // Errors: n_support < 1, n_query < 0 (0 allowed for support-only episodes),
  // fewer eligible classes than n_way (the message counts them).
  static Status Create(const std::vector<int64_t>& labels, const EpisodeOptions& options,
                       std::unique_ptr<EpisodeSampler>* sampler);

  Episode Next();
  int n_way() const { return n_way_; }

 private:
  EpisodeSampler(const std::vector<int64_t>& labels, const EpisodeOptions& options);

  LabelIndex index_;
  EpisodeOptions options_;
  SeededRng rng_;
  std::vector<int64_t> eligible_slots_;
  int n_way_ = 0;
};

// ---------------------------------------------------------------------------
// Class-balanced batches (DIMCO, F-statistic).

struct ClassBalancedOptions {
  int classes_per_batch = 10;
  int items_per_class = 10;
  // Classes with fewer items than items_per_class but at least this many
  // contribute all their items ("up to" items_per_class); classes below it are
  // never drawn. Equal to items_per_class for exactly balanced batches.
  int min_items_per_class = 10;
  uint64_t seed = 0;
};

// DIMCO section 5.3: "balanced batches of 100 images consisting of 10
// different classes" (10 x 10).
ClassBalancedOptions DimcoBatchOptions(uint64_t seed = 0);
// F-statistic paper section 3: "we randomly select 12 identities, with up to
// 10 samples of each identity"; a class needs 2 items for a within-class
// variance, so smaller classes are skipped.
ClassBalancedOptions FStatisticBatchOptions(uint64_t seed = 0);

struct ClassBatch {
  std::vector<int64_t> classes;  // labels, in batch order
  std::vector<int64_t> indices;  // class-major data set indices
  std::vector<int32_t> slot;     // class position in `classes` per index
};

// Each batch draws classes_per_batch classes uniformly without replacement
// among the eligible ones and min(items_per_class, class size) distinct items
// of each uniformly without replacement.
class ClassBalancedSampler {
 public:
  // Errors: non-positive sizes, min_items_per_class outside
  // [1, items_per_class], fewer eligible classes than classes_per_batch.
  static Status Create(const std::vector<int64_t>& labels, const ClassBalancedOptions& options,
                       std::unique_ptr<ClassBalancedSampler>* sampler);

  ClassBatch Next();

 private:
  ClassBalancedSampler(const std::vector<int64_t>& labels, const ClassBalancedOptions& options);

  LabelIndex index_;
  ClassBalancedOptions options_;
  SeededRng rng_;
  std::vector<int64_t> eligible_slots_;
};

// ---------------------------------------------------------------------------
// Evaluation pairs.

struct VerificationPair {
  int64_t first = 0;
  int64_t second = 0;
  bool match = false;
};

// HIB section 4.3: "p(m|x1, x2) for 10k pairs of test images, half of which
// are matches and half are not". Matching pairs: a uniformly random item of a
// class with >= 2 items and a different item of its class; non-matching pairs:
// two uniformly random items with different labels. num_pairs / 2 (rounded up)
// matching pairs come first, then the non-matching ones. Pairs may repeat.
// Errors: num_pairs < 1, no class with two items, a single class.
Status SampleVerificationPairs(const std::vector<int64_t>& labels, int64_t num_pairs, uint64_t seed,
                               std::vector<VerificationPair>* pairs);

}  // namespace encoders
}  // namespace hedgedb
