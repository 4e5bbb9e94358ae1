// Payload text of the command line: payload files (one payload per line,
// optionally base64) and how payload bytes are shown in JSON. No CLI state,
// so the fuzz target (fuzz/payload_lines_fuzzer.cc) calls it as is.
#pragma once

#include <string>
#include <vector>

namespace hedgedb {
namespace cli {

// Standard base64 with '=' padding.
std::string Base64Encode(const std::string& bytes);
// Standard padded base64 only; false on any other character or length.
bool Base64Decode(const std::string& text, std::string* bytes);
// Well-formed UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF.
bool IsValidUtf8(const std::string& s);

// Splits `text` into one payload per line ('\n'; a trailing '\r' is dropped,
// and a final newline ends the last line rather than starting an empty one).
// With `base64`, each line is decoded. False, with *problem naming the line,
// if a line is not valid base64.
bool SplitPayloadLines(const std::string& text, bool base64, std::vector<std::string>* lines,
                       std::string* problem);

}  // namespace cli
}  // namespace hedgedb
