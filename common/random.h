// The seeding and normal-sampling rules shared by the scorers' sample banks,
// the trainers' samplers and the synthetic-data generator. Changing any of
// them changes every seeded result, so they live once, here.
#pragma once

#include <cmath>
#include <cstdint>

namespace hedgedb {

// One step of SplitMix64 (Steele, Lea and Flood): advances *state and returns
// a well-mixed 64-bit value.
inline uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A seed for the independent stream `stream` of `seed`: nearby seeds and
// streams map to unrelated values.
inline uint64_t StreamSeed(uint64_t seed, uint64_t stream) {
  uint64_t state = seed + 0x9e3779b97f4a7c15ull * stream;
  return SplitMix64(&state);
}

// Box-Muller: two independent standard normals from u1 in (0, 1] (so the log
// is finite) and u2 in [0, 1).
inline void BoxMuller(double u1, double u2, double* z0, double* z1) {
  constexpr double kTwoPi = 6.283185307179586476925;
  const double radius = std::sqrt(-2.0 * std::log(u1));
  *z0 = radius * std::cos(kTwoPi * u2);
  *z1 = radius * std::sin(kTwoPi * u2);
}

}  // namespace hedgedb
