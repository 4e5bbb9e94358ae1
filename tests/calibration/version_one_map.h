// A calibration map as version 1 of the format stored it (before the
// conditional maps): the bytes laid out by hand, as that encoder wrote them.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "common/coding.h"
#include "common/crc32c.h"
#include "hedgedb/types.h"

namespace hedgedb {
namespace calibration {
namespace testing {

// A Platt map of score mc: logit p = slope logit s + intercept, fitted and
// calibrated at base_rate, 1000 pairs, 8 samples, sequence 7.
inline std::string VersionOnePlattMap(double slope, double intercept, double base_rate) {
  std::string out;
  PutFixed<uint32_t>(&out, 0x4D434448);
  PutFixed<uint16_t>(&out, 1);
  PutFixed<uint32_t>(&out, 0);
  PutFixed<uint8_t>(&out, uint8_t(1) /* platt */);
  PutFixed<uint8_t>(&out, uint8_t(ScoreType::kMc));
  PutFixed<double>(&out, base_rate);
  PutFixed<double>(&out, base_rate);
  PutFixed<int64_t>(&out, 1000);
  PutFixed<int32_t>(&out, 8);
  PutFixed<uint64_t>(&out, 7);
  PutFixed<uint32_t>(&out, 2);
  PutFixed<double>(&out, slope);
  PutFixed<double>(&out, intercept);
  PutFixed<uint32_t>(&out, 0);  // no knots
  PutFixed<uint8_t>(&out, uint8_t(1) /* platt */);
  PutFixed<uint64_t>(&out, 0);
  PutFixed<uint8_t>(&out, 0);
  for (int i = 0; i < 3; ++i) PutFixed<double>(&out, std::nan(""));
  PutFixed<uint32_t>(&out, 0);  // no candidates
  const std::string reason = "fitted by version 1";
  PutFixed<uint32_t>(&out, uint32_t(reason.size()));
  out += reason;
  std::string size;
  PutFixed<uint32_t>(&size, uint32_t(out.size() + 4));
  out.replace(6, 4, size);
  PutFixed<uint32_t>(&out, Crc32c(out.data(), out.size()));
  return out;
}

}  // namespace testing
}  // namespace calibration
}  // namespace hedgedb
