// The model file (encoders/models/model_file.cc) up to the weights: magic,
// version, checksum, lengths, the calibration section and the spec JSON. The
// weights archive is LibTorch's and is not parsed here. Input: byte 0 bit 0 =
// fix the checksum first (CRC32C; version 1 files use CRC-32 and are left as
// they are), then the file. A file that parses must encode and parse again
// to the same spec and calibration.
#include <string>

#include "encoders/models/model_file.h"
#include "fuzz/fuzz_util.h"

using namespace hedgedb;
using namespace hedgedb::encoders;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) fuzz::FixTrailingCrc(&file);
  ModelFileParts parts;
  if (!ParseModelFile("fuzz.model", file, &parts).ok()) return 0;
  const std::string encoded = EncodeModelFile(parts.spec, parts.payload, &parts.calibration);
  ModelFileParts again;
  if (!ParseModelFile("again.model", encoded, &again).ok() ||
      SpecToJson(again.spec) != SpecToJson(parts.spec) || again.payload != parts.payload ||
      again.calibration.map != parts.calibration.map) {
    __builtin_trap();
  }
  return 0;
}
