#include "query/item_filter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace hedgedb {
namespace query {
namespace {

// The key of a JSON scalar under equality: numbers by value (3, 3.0 and 3e0
// are one key; integers beyond 2^53 keep their exact value), strings, booleans
// and null by type and value. False for arrays and objects.
bool ValueKey(const nlohmann::json& v, std::string* key) {
  if (v.is_string()) {
    *key = "s" + v.get<std::string>();
  } else if (v.is_boolean()) {
    *key = v.get<bool>() ? "t" : "f";
  } else if (v.is_null()) {
    *key = "n";
  } else if (v.is_number_unsigned()) {
    *key = "i" + std::to_string(v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    *key = "i" + std::to_string(v.get<int64_t>());
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::nearbyint(d) == d && std::fabs(d) < 9.2e18) {
      *key = "i" + std::to_string(int64_t(d));  // 3.0 is the integer 3
    } else {
      char buf[40];
      std::snprintf(buf, sizeof(buf), "d%.17g", d);
      *key = buf;
    }
  } else {
    return false;
  }
  return true;
}

}  // namespace

Status CompileFilter(const SearchFilter& filter, CompiledFilter* out) {
  *out = CompiledFilter();
  out->label_rule = filter.label_rule;
  if (filter.label_rule != SearchFilter::LabelRule::kAny) {
    if (filter.labels.empty()) {
      return Status::InvalidArgument(
          std::string("the label filter '") +
          (filter.label_rule == SearchFilter::LabelRule::kIn ? "in" : "not in") +
          "' needs at least one label");
    }
    out->labels = filter.labels;
    std::sort(out->labels.begin(), out->labels.end());
    out->labels.erase(std::unique(out->labels.begin(), out->labels.end()), out->labels.end());
    // Spans up to 1 MiB of bytes get a lookup table (the usual class labels).
    const uint64_t span = uint64_t(out->labels.back()) - uint64_t(out->labels.front());
    if (out->labels.size() > 4 && span < (uint64_t(1) << 20)) {
      out->label_bits.assign(size_t(span) + 1, 0);
      for (int64_t l : out->labels)
        out->label_bits[size_t(uint64_t(l) - uint64_t(out->labels.front()))] = 1;
    }
  }
  for (const auto& [field, text] : filter.payload_equals) {
    if (field.empty()) return Status::InvalidArgument("a payload filter names an empty field");
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
      return Status::InvalidArgument("payload filter on '" + field + "': the value " + text +
                                     " is not JSON (write a string with its quotes: \"" + text +
                                     "\")");
    }
    std::string key;
    if (!ValueKey(value, &key)) {
      return Status::InvalidArgument("payload filter on '" + field +
                                     "': the value must be a string, number, boolean or null, "
                                     "got " +
                                     text);
    }
    out->payload.emplace_back(field, std::move(key));
  }
  return Status::OK();
}

void PayloadFieldIndex::Add(int64_t row, std::string_view payload) {
  // A UTF-8 byte-order mark before the JSON text is skipped, as RFC 8259
  // lets a parser do (editors on Windows write one); the payload keeps it.
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (payload.substr(0, kBom.size()) == kBom) payload.remove_prefix(kBom.size());
  // JSON text holds no NUL byte (strings escape it), but the parser stops at
  // one as at the end: {"a":3} followed by a NUL and anything is not JSON.
  if (payload.find('\0') != std::string_view::npos) return;
  // Cheap rejection: most non-JSON payloads (paths, free text) start otherwise.
  const size_t first = payload.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || payload[first] != '{') return;
  const nlohmann::json doc = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return;
  std::string key;
  for (const auto& [field, value] : doc.items()) {
    if (ValueKey(value, &key)) rows_[field][key].push_back(row);
  }
}

const std::vector<int64_t>* PayloadFieldIndex::Rows(const std::string& field,
                                                    const std::string& value_key) const {
  auto f = rows_.find(field);
  if (f == rows_.end()) return nullptr;
  auto v = f->second.find(value_key);
  return v == f->second.end() ? nullptr : &v->second;
}

}  // namespace query
}  // namespace hedgedb
