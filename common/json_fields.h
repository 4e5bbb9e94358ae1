// Reading integer fields of stored JSON (collection descriptors, model file
// headers) without nlohmann's silent conversions: get<int>() turns 2.5 into 2
// and wraps 1e10. Header-only: nlohmann-json is header-only too.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "hedgedb/status.h"

namespace hedgedb {

// Reads j[field] into *out when it is a JSON integer in [lo, hi]; otherwise
// returns Corruption "<what>: <field> must be an integer in [lo, hi], got V".
// A missing field is also Corruption.
inline Status JsonInteger(const nlohmann::json& j, const char* field, int64_t lo, int64_t hi,
                          const std::string& what, int64_t* out) {
  auto it = j.find(field);
  if (it == j.end()) return Status::Corruption(what + ": " + field + " is missing");
  const nlohmann::json& v = *it;
  const bool in_range = v.is_number_integer() &&
                        !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) &&
                        v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  if (!in_range) {
    return Status::Corruption(what + ": " + field + " must be an integer in [" +
                              std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                              v.dump());
  }
  *out = v.get<int64_t>();
  return Status::OK();
}

}  // namespace hedgedb
