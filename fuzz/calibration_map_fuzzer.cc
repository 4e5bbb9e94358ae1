// The stored calibration map (calibration/calibration_map.cc): Decode accepts
// only what Encode of a valid map produces, so a decoded map re-encodes to the
// same bytes. Input: byte 0 bit 0 = fix the checksum first, then the bytes.
#include <string>

#include "calibration/calibration_map.h"
#include "fuzz/fuzz_util.h"

using namespace hedgedb;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) fuzz::FixTrailingCrc(&bytes);
  calibration::CalibrationMap map;
  if (!calibration::CalibrationMap::Decode(bytes, &map).ok()) return 0;
  if (!map.Validate().ok() || map.Encode() != bytes) __builtin_trap();
  for (double s : {-1e300, -1.0, 0.0, 0.5, 1.0, 1e300}) {
    const double p = map.Apply(s);
    if (!(p >= 0.0 && p <= 1.0)) __builtin_trap();
  }
  return 0;
}
