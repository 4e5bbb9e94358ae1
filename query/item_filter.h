// Filtered search: which items of a collection pass a SearchFilter.
//
// Label conditions read the collection's in-memory row labels. Payload
// conditions read a PayloadFieldIndex, an inverted index of the payloads'
// top-level JSON scalar fields (field -> value -> rows). The collection
// builds it from the record store at the first search with a payload
// condition and keeps it current from then on, so a collection that never
// filters on payloads pays nothing for it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {
namespace query {

// A checked SearchFilter, with each payload value turned into the key the
// index stores it under.
struct CompiledFilter {
  SearchFilter::LabelRule label_rule = SearchFilter::LabelRule::kAny;
  std::vector<int64_t> labels;                               // sorted, unique
  std::vector<std::pair<std::string, std::string>> payload;  // (field, value key)

  bool empty() const { return label_rule == SearchFilter::LabelRule::kAny && payload.empty(); }
  // The label conditions alone (called once per live item: a byte lookup
  // where the labels span a small range, a binary search otherwise).
  bool PassesLabel(bool has_label, int64_t label) const {
    if (label_rule == SearchFilter::LabelRule::kAny) return true;
    bool listed = false;
    if (has_label) {
      if (!label_bits.empty()) {
        const uint64_t offset = uint64_t(label) - uint64_t(labels.front());
        listed = offset < label_bits.size() && label_bits[size_t(offset)];
      } else {
        listed = std::binary_search(labels.begin(), labels.end(), label);
      }
    }
    return label_rule == SearchFilter::LabelRule::kIn ? listed : !listed;
  }

  // labels[0] .. labels.back() as bytes, when that span is small.
  std::vector<uint8_t> label_bits;
};

// InvalidArgument naming the condition: a label rule with no labels, an
// empty field name, a value that is not JSON text or is an array/object.
Status CompileFilter(const SearchFilter& filter, CompiledFilter* out);

class PayloadFieldIndex {
 public:
  // Indexes the scalar top-level fields of row `row`'s payload; a payload
  // that is not a JSON object adds nothing. Rows come in any order.
  void Add(int64_t row, std::string_view payload);
  // The rows whose payload had `field` with the value of `value_key`
  // (dead rows included: callers check liveness); nullptr: none.
  const std::vector<int64_t>* Rows(const std::string& field, const std::string& value_key) const;

 private:
  std::unordered_map<std::string, std::unordered_map<std::string, std::vector<int64_t>>> rows_;
};

}  // namespace query
}  // namespace hedgedb
