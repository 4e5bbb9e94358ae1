// The two pictures of a calibration report, for `calibrate` and `evaluate`:
// the reliability diagram (raw score and held-out calibrated probability)
// and the uncertainty-vs-accuracy curve of the queries' best matches.
#pragma once

#include <string>
#include <vector>

#include "hedgedb/calibration.h"

namespace hedgedb {
namespace cli {

// Writes <dir>/<prefix>reliability.png and <dir>/<prefix>uncertainty.png
// (the directory is created) and returns their paths; fails naming the file.
// The uncertainty curve is left out when the queries have no uncertainty
// and no probability.
std::vector<std::string> WriteCalibrationPictures(const CalibrationReport& report,
                                                  const std::string& dir, const std::string& title,
                                                  const std::string& prefix = "");

}  // namespace cli
}  // namespace hedgedb
