#include "encoders/data/batch_samplers.h"

#include <algorithm>
#include <limits>
#include <string>

#include "common/random.h"

namespace hedgedb {
namespace encoders {

uint64_t SeededRng::DeriveSeed(uint64_t seed, uint64_t stream) {
  // Nearby seeds and streams map to unrelated mt19937_64 seeds.
  return StreamSeed(seed, stream);
}

uint64_t SeededRng::UniformInt(uint64_t n) {
  // Reject the lowest (2^64 mod n) values so that every residue is equally
  // likely.
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t r = engine_();
    if (r >= threshold) return r % n;
  }
}

int64_t SeededRng::UniformIntInclusive(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span == std::numeric_limits<uint64_t>::max()) return static_cast<int64_t>(engine_());
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + UniformInt(span + 1));
}

namespace {

// The first `count` entries of `pool` become a uniform sample without
// replacement (partial Fisher-Yates); count <= pool->size().
void PartialShuffle(std::vector<int64_t>* pool, size_t count, SeededRng* rng) {
  for (size_t i = 0; i < count; ++i) {
    const size_t j = i + static_cast<size_t>(rng->UniformInt(pool->size() - i));
    std::swap((*pool)[i], (*pool)[j]);
  }
}

// `count` distinct values drawn uniformly from `values`.
std::vector<int64_t> SampleWithoutReplacement(const std::vector<int64_t>& values, size_t count,
                                              SeededRng* rng) {
  std::vector<int64_t> pool = values;
  PartialShuffle(&pool, count, rng);
  pool.resize(count);
  return pool;
}

}  // namespace

LabelIndex::LabelIndex(const std::vector<int64_t>& labels)
    : num_items_(static_cast<int64_t>(labels.size())) {
  classes_ = labels;
  std::sort(classes_.begin(), classes_.end());
  classes_.erase(std::unique(classes_.begin(), classes_.end()), classes_.end());
  items_.resize(classes_.size());
  for (int64_t i = 0; i < num_items_; ++i) items_[SlotOf(labels[i])].push_back(i);
}

int64_t LabelIndex::SlotOf(int64_t label) const {
  const auto it = std::lower_bound(classes_.begin(), classes_.end(), label);
  if (it == classes_.end() || *it != label) return -1;
  return it - classes_.begin();
}

// ---------------------------------------------------------------------------

HibTwoStreamSampler::HibTwoStreamSampler(const std::vector<int64_t>& labels,
                                         const HibSamplerOptions& options)
    : labels_(labels), index_(labels), options_(options), rng_(options.seed) {
  for (int64_t slot = 0; slot < index_.num_classes(); ++slot) {
    if (index_.items(slot).size() < 2) continue;
    eligible_.insert(eligible_.end(), index_.items(slot).begin(), index_.items(slot).end());
  }
  std::sort(eligible_.begin(), eligible_.end());
}

Status HibTwoStreamSampler::Create(const std::vector<int64_t>& labels,
                                   const HibSamplerOptions& options,
                                   std::unique_ptr<HibTwoStreamSampler>* sampler) {
  if (options.batch_size < 2 || options.batch_size % 2 != 0) {
    return Status::InvalidArgument("HIB sampler: batch size must be even and >= 2, got " +
                                   std::to_string(options.batch_size));
  }
  std::unique_ptr<HibTwoStreamSampler> created(new HibTwoStreamSampler(labels, options));
  if (created->eligible_.empty()) {
    return Status::InvalidArgument(
        "HIB sampler: no class has two items, so no matching pair can be formed (" +
        std::to_string(labels.size()) + " items, " + std::to_string(created->index_.num_classes()) +
        " classes)");
  }
  const size_t half = static_cast<size_t>(options.batch_size / 2);
  if (half > created->eligible_.size()) {
    return Status::InvalidArgument("HIB sampler: batch size " + std::to_string(options.batch_size) +
                                   " needs " + std::to_string(half) +
                                   " random-stream items but only " +
                                   std::to_string(created->eligible_.size()) +
                                   " items belong to classes with two or more items");
  }
  *sampler = std::move(created);
  return Status::OK();
}

PairBatch HibTwoStreamSampler::Next() {
  const size_t half = static_cast<size_t>(options_.batch_size / 2);
  // Random stream: consecutive slices of a per-epoch permutation. A slice that
  // would cross the epoch end starts a new permutation instead, so that no
  // item appears twice in the random stream of one batch.
  if (order_.empty() || cursor_ + half > order_.size()) {
    if (!order_.empty()) ++epoch_;
    order_ = eligible_;
    rng_.Shuffle(&order_);
    cursor_ = 0;
  }
  std::vector<int64_t> stream(order_.begin() + cursor_, order_.begin() + cursor_ + half);
  cursor_ += half;

  // Class stream: for each random-stream item, another item of its class.
  std::vector<int64_t> batch = stream;
  for (const int64_t item : stream) {
    const std::vector<int64_t>& same = index_.items(index_.SlotOf(labels_[item]));
    int64_t partner = item;
    while (partner == item) partner = same[rng_.UniformInt(same.size())];
    batch.push_back(partner);
  }
  // Shuffle positions: indices[p] = batch[permutation[p]].
  std::vector<int32_t> permutation(batch.size());
  for (size_t p = 0; p < permutation.size(); ++p) permutation[p] = static_cast<int32_t>(p);
  rng_.Shuffle(&permutation);

  PairBatch out;
  out.indices.resize(batch.size());
  for (size_t p = 0; p < batch.size(); ++p) out.indices[p] = batch[permutation[p]];

  const int32_t size = static_cast<int32_t>(out.indices.size());
  std::vector<BatchPair> negatives;
  for (int32_t a = 0; a < size; ++a) {
    for (int32_t b = a + 1; b < size; ++b) {
      // A partner can be drawn twice or coincide with a random-stream item;
      // a pair of one item with itself carries no signal.
      if (out.indices[a] == out.indices[b]) continue;
      const bool match = labels_[out.indices[a]] == labels_[out.indices[b]];
      if (match || options_.pair_mode == HibPairMode::kAllPairs) {
        out.pairs.push_back({a, b, match});
        if (match) ++out.num_matching_pairs;
      } else {
        negatives.push_back({a, b, false});
      }
    }
  }
  if (options_.pair_mode == HibPairMode::kBalanced) {
    // As many negatives as positives, uniformly without replacement; the
    // batch's own negatives are few only when it holds very few classes.
    const size_t count = std::min(negatives.size(), static_cast<size_t>(out.num_matching_pairs));
    for (size_t i = 0; i < count; ++i) {
      const size_t j = i + static_cast<size_t>(rng_.UniformInt(negatives.size() - i));
      std::swap(negatives[i], negatives[j]);
      out.pairs.push_back(negatives[i]);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------

EpisodeSampler::EpisodeSampler(const std::vector<int64_t>& labels, const EpisodeOptions& options)
    : index_(labels), options_(options), rng_(options.seed) {
  const size_t needed =
      static_cast<size_t>(options.n_support) + static_cast<size_t>(options.n_query);
  for (int64_t slot = 0; slot < index_.num_classes(); ++slot) {
    if (index_.items(slot).size() >= needed) eligible_slots_.push_back(slot);
  }
  n_way_ = options.n_way > 0 ? options.n_way : static_cast<int>(eligible_slots_.size());
}

Status EpisodeSampler::Create(const std::vector<int64_t>& labels, const EpisodeOptions& options,
                              std::unique_ptr<EpisodeSampler>* sampler) {
  if (options.n_way < 0 || options.n_support < 1 || options.n_query < 0) {
    return Status::InvalidArgument("episode sampler: need n_way >= 0 (0 = all classes), " +
                                   std::string("n_support >= 1 and n_query >= 0; got n_way ") +
                                   std::to_string(options.n_way) + ", n_support " +
                                   std::to_string(options.n_support) + ", n_query " +
                                   std::to_string(options.n_query));
  }
  std::unique_ptr<EpisodeSampler> created(new EpisodeSampler(labels, options));
  const size_t eligible = created->eligible_slots_.size();
  if (eligible == 0 || eligible < static_cast<size_t>(created->n_way_)) {
    return Status::InvalidArgument(
        "episode sampler: " + std::to_string(eligible) + " of " +
        std::to_string(created->index_.num_classes()) + " classes have at least " +
        std::to_string(options.n_support + options.n_query) +
        " items (n_support + n_query), need " + std::to_string(std::max(created->n_way_, 1)));
  }
  *sampler = std::move(created);
  return Status::OK();
}

Episode EpisodeSampler::Next() {
  Episode episode;
  const std::vector<int64_t> slots =
      SampleWithoutReplacement(eligible_slots_, static_cast<size_t>(n_way_), &rng_);
  const size_t per_class = static_cast<size_t>(options_.n_support + options_.n_query);
  for (size_t c = 0; c < slots.size(); ++c) {
    episode.classes.push_back(index_.classes()[slots[c]]);
    const std::vector<int64_t> items =
        SampleWithoutReplacement(index_.items(slots[c]), per_class, &rng_);
    for (size_t i = 0; i < per_class; ++i) {
      if (i < static_cast<size_t>(options_.n_support)) {
        episode.support.push_back(items[i]);
        episode.support_slot.push_back(static_cast<int32_t>(c));
      } else {
        episode.query.push_back(items[i]);
        episode.query_slot.push_back(static_cast<int32_t>(c));
      }
    }
  }
  return episode;
}

// ---------------------------------------------------------------------------

ClassBalancedOptions DimcoBatchOptions(uint64_t seed) {
  ClassBalancedOptions options;
  options.classes_per_batch = 10;
  options.items_per_class = 10;
  options.min_items_per_class = 10;
  options.seed = seed;
  return options;
}

ClassBalancedOptions FStatisticBatchOptions(uint64_t seed) {
  ClassBalancedOptions options;
  options.classes_per_batch = 12;
  options.items_per_class = 10;
  options.min_items_per_class = 2;
  options.seed = seed;
  return options;
}

ClassBalancedSampler::ClassBalancedSampler(const std::vector<int64_t>& labels,
                                           const ClassBalancedOptions& options)
    : index_(labels), options_(options), rng_(options.seed) {
  for (int64_t slot = 0; slot < index_.num_classes(); ++slot) {
    if (index_.items(slot).size() >= static_cast<size_t>(options.min_items_per_class)) {
      eligible_slots_.push_back(slot);
    }
  }
}

Status ClassBalancedSampler::Create(const std::vector<int64_t>& labels,
                                    const ClassBalancedOptions& options,
                                    std::unique_ptr<ClassBalancedSampler>* sampler) {
  if (options.classes_per_batch < 1 || options.items_per_class < 1 ||
      options.min_items_per_class < 1 || options.min_items_per_class > options.items_per_class) {
    return Status::InvalidArgument(
        "class-balanced sampler: need classes_per_batch >= 1 and 1 <= min_items_per_class <= "
        "items_per_class; got " +
        std::to_string(options.classes_per_batch) + " classes, " +
        std::to_string(options.items_per_class) + " items, min " +
        std::to_string(options.min_items_per_class));
  }
  std::unique_ptr<ClassBalancedSampler> created(new ClassBalancedSampler(labels, options));
  if (created->eligible_slots_.size() < static_cast<size_t>(options.classes_per_batch)) {
    return Status::InvalidArgument(
        "class-balanced sampler: " + std::to_string(created->eligible_slots_.size()) + " of " +
        std::to_string(created->index_.num_classes()) + " classes have at least " +
        std::to_string(options.min_items_per_class) + " items, need " +
        std::to_string(options.classes_per_batch));
  }
  *sampler = std::move(created);
  return Status::OK();
}

ClassBatch ClassBalancedSampler::Next() {
  ClassBatch batch;
  const std::vector<int64_t> slots = SampleWithoutReplacement(
      eligible_slots_, static_cast<size_t>(options_.classes_per_batch), &rng_);
  for (size_t c = 0; c < slots.size(); ++c) {
    batch.classes.push_back(index_.classes()[slots[c]]);
    const std::vector<int64_t>& members = index_.items(slots[c]);
    const size_t count = std::min(members.size(), static_cast<size_t>(options_.items_per_class));
    for (const int64_t item : SampleWithoutReplacement(members, count, &rng_)) {
      batch.indices.push_back(item);
      batch.slot.push_back(static_cast<int32_t>(c));
    }
  }
  return batch;
}

// ---------------------------------------------------------------------------

Status SampleVerificationPairs(const std::vector<int64_t>& labels, int64_t num_pairs, uint64_t seed,
                               std::vector<VerificationPair>* pairs) {
  if (num_pairs < 1) {
    return Status::InvalidArgument("verification pairs: need at least one pair, asked for " +
                                   std::to_string(num_pairs));
  }
  const LabelIndex index(labels);
  if (index.num_classes() < 2) {
    return Status::InvalidArgument(
        "verification pairs: non-matching pairs need two classes, the labels have " +
        std::to_string(index.num_classes()));
  }
  std::vector<int64_t> with_partner;
  for (int64_t slot = 0; slot < index.num_classes(); ++slot) {
    if (index.items(slot).size() < 2) continue;
    with_partner.insert(with_partner.end(), index.items(slot).begin(), index.items(slot).end());
  }
  if (with_partner.empty()) {
    return Status::InvalidArgument(
        "verification pairs: no class has two items, so no matching pair exists");
  }
  std::sort(with_partner.begin(), with_partner.end());

  SeededRng rng(seed);
  pairs->clear();
  pairs->reserve(static_cast<size_t>(num_pairs));
  const int64_t num_matching = (num_pairs + 1) / 2;
  for (int64_t i = 0; i < num_matching; ++i) {
    const int64_t first = with_partner[rng.UniformInt(with_partner.size())];
    const std::vector<int64_t>& same = index.items(index.SlotOf(labels[first]));
    int64_t second = first;
    while (second == first) second = same[rng.UniformInt(same.size())];
    pairs->push_back({first, second, true});
  }
  const uint64_t n = labels.size();
  for (int64_t i = num_matching; i < num_pairs; ++i) {
    const int64_t first = static_cast<int64_t>(rng.UniformInt(n));
    int64_t second = first;
    while (labels[second] == labels[first]) second = static_cast<int64_t>(rng.UniformInt(n));
    pairs->push_back({first, second, false});
  }
  return Status::OK();
}

}  // namespace encoders
}  // namespace hedgedb
