#include "encoders/data/encoder_data.h"

#include <algorithm>
#include <utility>

namespace hedgedb {
namespace encoders {

int64_t ItemSet::item_floats() const {
  int64_t n = 1;
  for (int64_t d : input_shape) n *= d;
  return n;
}

std::vector<float> ItemSet::Render(const std::vector<int64_t>& items, bool corrupt) const {
  std::vector<float> out(items.size() * item_floats());
  if (!items.empty()) render(items, corrupt, out.data());
  return out;
}

Status SelectSplit(const EncoderData& data, const std::string& split, const ItemSet** set) {
  if (split == "train") {
    *set = &data.train;
  } else if (split == "validation") {
    if (data.validation.size() == 0) {
      return Status::InvalidArgument("there is no validation split (set val_fraction)");
    }
    *set = &data.validation;
  } else if (split == "test") {
    *set = &data.test;
  } else if (split == "test-seen") {
    if (data.test_seen.size() == 0) {
      return Status::InvalidArgument(
          "split test-seen: " + data.description +
          " has no test items of classes seen in training (its test classes are disjoint from "
          "the training classes); use split test");
    }
    *set = &data.test_seen;
  } else if (split == "test-unseen") {
    *set = &data.test_unseen;
  } else {
    return Status::InvalidArgument("unknown split '" + split +
                                   "' (expected train, validation, test, test-seen, test-unseen)");
  }
  return Status::OK();
}

std::vector<int64_t> SubsetItems(const ItemSet& set, int64_t max_items, uint64_t seed) {
  std::vector<int64_t> items(set.size());
  for (int64_t i = 0; i < set.size(); ++i) items[i] = i;
  if (max_items <= 0 || max_items >= set.size()) return items;
  SeededRng rng(SeededRng::DeriveSeed(seed, 0x5375));
  for (int64_t i = 0; i < max_items; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng.UniformInt(items.size() - i));
    std::swap(items[i], items[j]);
  }
  items.resize(max_items);
  std::sort(items.begin(), items.end());
  return items;
}

}  // namespace encoders
}  // namespace hedgedb
