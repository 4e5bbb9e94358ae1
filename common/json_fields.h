// JSON numbers in and out. Reading integer fields of stored JSON (collection
// descriptors, model file headers) without nlohmann's silent conversions:
// get<int>() turns 2.5 into 2 and wraps 1e10. Writing floats as the floats
// they are, so every front end (CLI lines, Python dicts) shows one text.
// Header-only: nlohmann-json is header-only too.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
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

// A float as the JSON number with the shortest decimal form that reads back
// as the same float (0.93f prints as 0.93, not 0.9300000071525879); null
// when it is not finite.
inline nlohmann::json JsonFloat(float value) {
  if (!std::isfinite(value)) return nullptr;
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) return static_cast<double>(value);
  *end = '\0';
  return std::strtod(buf, nullptr);
}

inline nlohmann::json JsonFloats(const float* values, size_t n) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) out.push_back(JsonFloat(values[i]));
  return out;
}

// Row-major `rows` x `cols` floats as nested arrays.
inline nlohmann::json JsonFloatMatrix(const float* values, size_t rows, size_t cols) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t r = 0; r < rows; ++r) out.push_back(JsonFloats(values + r * cols, cols));
  return out;
}

}  // namespace hedgedb
