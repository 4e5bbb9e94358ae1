// Size limits of a collection spec, checked when a collection is created
// (query/collection.cc) and when a model file is read (a model's output must
// fit a collection; encoders/models/model_file.cc).
#pragma once

namespace hedgedb {

constexpr int kMaxDim = 65536;         // D, or d for codes
constexpr int kMaxComponents = 256;    // C of a mixture
constexpr int kMaxCodeAlphabet = 256;  // k of codes (one byte per code)

}  // namespace hedgedb
