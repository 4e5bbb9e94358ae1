// Payload files of `ingest --payloads` (tools/payload_text.cc): the line
// splitter, base64 and the UTF-8 check that decides how `get` shows a payload.
// The first byte picks plain (even) or base64 (odd) lines. Checked: decoded
// base64 lines encode and split back to the same bytes; every input encodes
// and decodes to itself; a payload is valid UTF-8 exactly when the JSON
// library can print it as a string (else `get` would fail on it).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/payload_text.h"

using namespace hedgedb::cli;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool base64 = (data[0] & 1) != 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::string decoded;
  if (!Base64Decode(Base64Encode(text), &decoded) || decoded != text) __builtin_trap();

  bool printable = true;
  try {
    (void)nlohmann::json(text).dump();
  } catch (const nlohmann::json::exception&) {
    printable = false;
  }
  if (IsValidUtf8(text) != printable) __builtin_trap();

  std::vector<std::string> lines;
  std::string problem;
  if (!SplitPayloadLines(text, base64, &lines, &problem)) {
    if (!base64 || problem.empty()) __builtin_trap();
    return 0;
  }
  if (lines.size() > text.size()) __builtin_trap();
  if (!base64) {
    for (const std::string& line : lines) {
      if (line.find('\n') != std::string::npos) __builtin_trap();
    }
    return 0;
  }
  std::string again;
  for (const std::string& line : lines) again += Base64Encode(line) + "\n";
  std::vector<std::string> lines_again;
  if (!SplitPayloadLines(again, true, &lines_again, &problem) || lines_again != lines) {
    __builtin_trap();
  }
  return 0;
}
