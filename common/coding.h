// Fixed-width little-endian encoding of the binary formats (record values,
// index file headers), independent of the host's byte order.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace hedgedb {

// Appends the little-endian bytes of an integer (or float) to *out.
template <typename T>
void PutFixed(std::string* out, T value) {
  static_assert(std::is_arithmetic<T>::value, "integers and floats only");
  using U =
      std::conditional_t<sizeof(T) == 8, uint64_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t,
                                            std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>>>;
  U bits;
  std::memcpy(&bits, &value, sizeof(T));
  for (size_t i = 0; i < sizeof(T); ++i) out->push_back(char((bits >> (8 * i)) & 0xFF));
}

// Reads the little-endian integer (or float) at p (sizeof(T) bytes).
template <typename T>
T GetFixed(const char* p) {
  static_assert(std::is_arithmetic<T>::value, "integers and floats only");
  using U =
      std::conditional_t<sizeof(T) == 8, uint64_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t,
                                            std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>>>;
  U bits = 0;
  for (size_t i = 0; i < sizeof(T); ++i) bits |= U(uint8_t(p[i])) << (8 * i);
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

}  // namespace hedgedb
