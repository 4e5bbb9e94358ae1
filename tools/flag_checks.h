// Validators for numeric flags whose messages name the bound: CLI11's
// PositiveNumber and NonNegativeNumber report "not in range 0.000000 to
// <309 digits>" for a value out of range.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

namespace hedgedb {
namespace cli {

// The value (any number type) is > 0, or >= 0.
inline CLI::Validator NumberAtLeast(bool strictly_positive) {
  return CLI::Validator(
      [strictly_positive](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "'" + text + "' is not a number";
        if (strictly_positive ? value > 0 : value >= 0) return std::string();
        return std::string(strictly_positive ? "must be > 0" : "must be >= 0") + ", got " + text;
      },
      strictly_positive ? "POSITIVE" : "NONNEGATIVE");
}
inline CLI::Validator Positive() { return NumberAtLeast(true); }
inline CLI::Validator NonNegative() { return NumberAtLeast(false); }
// The value is in [lo, hi]; NaN is refused (CLI::Range lets it through, as
// every comparison with NaN is false).
inline CLI::Validator NumberIn(double lo, double hi) {
  char range[64];
  std::snprintf(range, sizeof(range), "[%g, %g]", lo, hi);
  const std::string bounds = range;
  return CLI::Validator(
      [lo, hi, bounds](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "'" + text + "' is not a number";
        if (value >= lo && value <= hi) return std::string();
        return "must be in " + bounds + ", got " + text;
      },
      bounds);
}

// The value is in (lo, hi): a probability a guarantee is about (coverage,
// a false-match rate, a confidence), where either end means nothing.
inline CLI::Validator NumberInOpen(double lo, double hi) {
  char range[64];
  std::snprintf(range, sizeof(range), "(%g, %g)", lo, hi);
  const std::string bounds = range;
  return CLI::Validator(
      [lo, hi, bounds](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "'" + text + "' is not a number";
        if (value > lo && value < hi) return std::string();
        return "must be in " + bounds + ", got " + text;
      },
      bounds);
}

}  // namespace cli
}  // namespace hedgedb
