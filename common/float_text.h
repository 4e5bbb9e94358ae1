// FloatText: a float as error messages print it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace hedgedb {

// The fewest significant digits, 6 to 9, that read back as the same float:
// 70000 prints as 70000, not 70000.0000; the float just above a bound as
// 32736.002, not as the bound it exceeds (which "%g" would print, making an
// error read "32736 is outside +-32736").
inline std::string FloatText(float v) {
  char text[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, double(v));
    if (std::strtof(text, nullptr) == v) break;
  }
  return text;
}

}  // namespace hedgedb
