// Progress text shared by the long-running commands' progress lines (train,
// evaluate): how long, in the units a person reads.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace hedgedb {
namespace encoders {

// "42s", "3m07s", "2h17m"; "?" for a negative or non-finite duration (an
// estimate without a pace yet).
inline std::string Duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = std::llround(seconds);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(s));
  }
  return buf;
}

}  // namespace encoders
}  // namespace hedgedb
