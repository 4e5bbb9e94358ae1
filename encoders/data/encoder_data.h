// The data the trainer, the embedder and the evaluation read, behind one
// torch-free interface: an ItemSet renders items as float inputs, an
// EncoderData holds the splits of one data set. The readers that fill them
// from files (IDX composites, CUB/Cars images, feature files) are the data-set
// library's (datasets/load_data.h), so that a program that only embeds does
// not link them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "encoders/data/batch_samplers.h"
#include "encoders/data/data_settings.h"
#include "hedgedb/status.h"

namespace hedgedb {
namespace encoders {

// A fixed list of items that can be rendered as float inputs.
struct ItemSet {
  std::vector<int64_t> labels;
  // Per-item input shape, e.g. {1, 28, 56} or {F}.
  std::vector<int64_t> input_shape;
  // Writes items `items` (indices into labels) to `out`, item-major, each
  // item_floats() values. `corrupt`: the stored corrupt twin (images only;
  // ignored where there is none).
  std::function<void(const std::vector<int64_t>& items, bool corrupt, float* out)> render;
  // Training rendering with fresh augmentation (occlusion with the training
  // probability); equal to render(items, false, out) for features.
  std::function<void(const std::vector<int64_t>& items, SeededRng* rng, float* out)> render_train;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t item_floats() const;
  // Items [first, first + n) as floats.
  std::vector<float> Render(const std::vector<int64_t>& items, bool corrupt) const;
};

struct EncoderData {
  std::string description;   // e.g. "fashion-mnist 2-item composites"
  bool has_corrupt = false;  // test sets have a corrupt twin
  int64_t num_train_classes = 0;
  // Input normalisation the model should use (per channel / per feature).
  std::vector<double> input_mean, input_std;
  ItemSet train;
  ItemSet validation;  // empty when val_fraction is 0
  ItemSet test;        // composites: seen + unseen test classes (HIB's test set)
  // Composites: test classes seen in training, and unseen ones. Features and
  // CUB/Cars test on classes disjoint from training's: test_unseen is test,
  // and test_seen is empty (SelectSplit refuses it).
  ItemSet test_seen;
  ItemSet test_unseen;
  // Composites: the number of values of the item at each position, leftmost
  // first (label = sum_p item_p * prod_{q > p} factor_sizes[q]); these are
  // the factors the disentanglement metrics score. Empty for other data.
  std::vector<int64_t> factor_sizes;
  // The settings the data was loaded with (a trained model records them).
  DataSettings settings;
};

// Picks the split by name: train, validation, test, test-seen, test-unseen.
Status SelectSplit(const EncoderData& data, const std::string& split, const ItemSet** set);

// A subset of `set`: at most max_items items drawn uniformly without
// replacement (seeded), kept in ascending order. max_items <= 0: all.
std::vector<int64_t> SubsetItems(const ItemSet& set, int64_t max_items, uint64_t seed);

}  // namespace encoders
}  // namespace hedgedb
