// The conversions the Python binding applies to its array arguments
// (python/hedgedb_module.cc): integer arguments (ids, labels, codes) of any
// NumPy dtype through BufferToInt64 / BufferToInt32, float arguments through
// float64 and DoublesToFloat32. NumPy's own casts are not fuzzed here; the
// bytes, dtype and element count NumPy hands over are.
//
// Checked against an independent model of the rule (docs/python.md, "The
// API"): a dtype is taken iff it is one of f4 f8 i1 i2 i4 i8 u1 u2 u4 u8;
// an integer conversion succeeds iff every element is an integer that the
// target type holds, and then every value is exact; a refusal names an
// element that is indeed not convertible. A float64 -> float32 conversion
// is refused iff some finite element would become an infinity or 0, and
// otherwise gives the nearest float32 (NaN and infinities pass through).
//
// Input: byte 0 the dtype kind, byte 1 the item size (signed), byte 2 the
// target (bit 0: int32, else int64; bit 1: also the float path on the bytes
// read as float64), then the elements (the bytes that make a whole element).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "hedgedb/npy.h"

using namespace hedgedb;

namespace {

struct Dtype {
  char kind;
  int size;
};
constexpr Dtype kTaken[] = {{'f', 4}, {'f', 8}, {'i', 1}, {'i', 2}, {'i', 4},
                            {'i', 8}, {'u', 1}, {'u', 2}, {'u', 4}, {'u', 8}};

bool Taken(char kind, int size) {
  for (const Dtype& d : kTaken) {
    if (d.kind == kind && d.size == size) return true;
  }
  return false;
}

// Element i as an exact integer, or false if it is not one (a fraction,
// NaN, an infinity, or beyond what __int128 holds).
bool ExactInteger(char kind, int size, const uint8_t* p, __int128* value) {
  if (kind == 'f') {
    const double v = [&] {
      if (size == 4) {
        float f;
        std::memcpy(&f, p, 4);
        return double(f);
      }
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }();
    if (!std::isfinite(v) || std::trunc(v) != v || std::fabs(v) >= 0x1p100) return false;
    *value = __int128(v);
    return true;
  }
  // Little-endian bytes, sign-extended for 'i'.
  unsigned __int128 u = 0;
  for (int b = size - 1; b >= 0; --b) u = (u << 8) | p[b];
  if (kind == 'i' && (p[size - 1] & 0x80)) u -= (unsigned __int128)1 << (8 * size);
  *value = __int128(u);
  return true;
}

template <typename T>
bool Fits(__int128 v) {
  return v >= __int128(std::numeric_limits<T>::min()) &&
         v <= __int128(std::numeric_limits<T>::max());
}

// The index after "element " in a refusal, or -1.
long NamedElement(const std::string& message) {
  const size_t at = message.find("element ");
  if (at == std::string::npos) return -1;
  return std::strtol(message.c_str() + at + 8, nullptr, 10);
}

template <typename T>
void CheckInts(char kind, int size, const uint8_t* data, size_t count) {
  std::vector<T> out;
  const std::string what = "ids";
  Status s;
  if constexpr (std::is_same<T, int64_t>::value) {
    s = BufferToInt64(kind, size, data, count, what, "DT", &out);
  } else {
    s = BufferToInt32(kind, size, data, count, what, "DT", &out);
  }
  if (!Taken(kind, size)) {
    if (s.ok() || !s.IsInvalidArgument() ||
        s.message() != "ids: expected an integer array, got dtype DT") {
      __builtin_trap();
    }
    return;
  }
  bool all = true;
  std::vector<bool> bad(count);
  for (size_t i = 0; i < count; ++i) {
    __int128 v;
    bad[i] = !ExactInteger(kind, size, data + i * size_t(size), &v) || !Fits<T>(v);
    all = all && !bad[i];
  }
  if (s.ok() != all) __builtin_trap();
  if (s.ok()) {
    if (out.size() != count) __builtin_trap();
    for (size_t i = 0; i < count; ++i) {
      __int128 v;
      if (!ExactInteger(kind, size, data + i * size_t(size), &v) || v != __int128(out[i])) {
        __builtin_trap();
      }
    }
    return;
  }
  const long named = NamedElement(s.message());
  if (!s.IsInvalidArgument() || s.message().rfind(what + ": ", 0) != 0 || named < 0 ||
      size_t(named) >= count || !bad[size_t(named)]) {
    __builtin_trap();
  }
}

// Whether float32 cannot hold the finite double v: it would round to an
// infinity (|v| at or beyond the midpoint between FLT_MAX and 2^128) or to
// 0 (nonzero, at most half the smallest subnormal, 2^-150).
bool Unholdable(double v) {
  return std::isfinite(v) &&
         (std::fabs(v) >= 0x1.ffffffp127 || (v != 0 && std::fabs(v) <= 0x1p-150));
}

void CheckFloats(const uint8_t* data, size_t bytes) {
  std::vector<double> in(bytes / 8);
  if (!in.empty()) std::memcpy(in.data(), data, in.size() * 8);
  std::vector<float> out(in.size());
  const Status s = DoublesToFloat32(in.data(), in.size(), "vec", out.data());
  bool any = false;
  for (double v : in) any = any || Unholdable(v);
  if (s.ok() == any) __builtin_trap();
  if (!s.ok()) {
    const long named = NamedElement(s.message());
    if (!s.IsInvalidArgument() || s.message().rfind("vec: ", 0) != 0 || named < 0 ||
        size_t(named) >= in.size() || !Unholdable(in[size_t(named)])) {
      __builtin_trap();
    }
    return;
  }
  for (size_t i = 0; i < in.size(); ++i) {
    const double v = in[i];
    const float f = out[i];
    if (std::isnan(v)) {
      if (!std::isnan(f)) __builtin_trap();
      continue;
    }
    if (std::isinf(v)) {
      if (f != v) __builtin_trap();
      continue;
    }
    // Finite and holdable: a finite float32, no farther from v than either
    // neighbour, and 0 only for 0.
    if (!std::isfinite(f) || (f == 0) != (v == 0)) __builtin_trap();
    const double d = std::fabs(double(f) - v);
    const float up = std::nextafter(f, INFINITY), down = std::nextafter(f, -INFINITY);
    if ((std::isfinite(up) && std::fabs(double(up) - v) < d) ||
        (std::isfinite(down) && std::fabs(double(down) - v) < d)) {
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const char kind = char(data[0]);
  const int item_size = int(int8_t(data[1]));
  const uint8_t target = data[2];
  const uint8_t* elements = data + 3;
  const size_t bytes = size - 3;
  // A dtype with no whole element in the input still goes through the
  // dtype check (as an empty array does in Python).
  const size_t count = item_size > 0 ? bytes / size_t(item_size) : 0;
  if (target & 1) {
    CheckInts<int32_t>(kind, item_size, elements, count);
  } else {
    CheckInts<int64_t>(kind, item_size, elements, count);
  }
  if (target & 2) CheckFloats(elements, bytes);
  return 0;
}
