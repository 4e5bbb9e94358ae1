#include "encoders/engine_bridge.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace hedgedb {
namespace encoders {
namespace {

bool NearlyEqual(float a, float b) {
  return std::fabs(a - b) <= 1e-5f * std::max(1.0f, std::max(std::fabs(a), std::fabs(b)));
}

// The shortest decimal form that reads back as the same float, as a JSON
// number prints ("1.0", "0.93").
std::string FloatText(float value) {
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer) - 1, value);
  if (ec != std::errc()) return nlohmann::json(static_cast<double>(value)).dump();
  *end = '\0';
  return nlohmann::json(std::strtod(buffer, nullptr)).dump();
}

}  // namespace

bool LearnsMatchParameters(Method method) {
  return method == Method::kSoftContrastive || method == Method::kHib;
}

bool HasMatchParameters(Method method) {
  return LearnsMatchParameters(method) || method == Method::kSpe;
}

float MatchA(const ModelSpec& model) {
  return HasMatchParameters(model.method) ? static_cast<float>(model.match_a) : 1.0f;
}

float MatchB(const ModelSpec& model) {
  return HasMatchParameters(model.method) ? static_cast<float>(model.match_b) : 0.0f;
}

ScoreType RankingScore(const ModelSpec& model) {
  return model.kind == Kind::kPoint ? ScoreType::kL2 : ModelScore(model);
}

ScoreType ModelScore(const ModelSpec& model) {
  switch (model.kind) {
    case Kind::kPoint:
      return ScoreType::kMatch;
    case Kind::kGaussian:
    case Kind::kMog:
      return model.method == Method::kSpe ? ScoreType::kMls : ScoreType::kMc;
    case Kind::kCodes:
      return ScoreType::kLogprob;
  }
  return ScoreType::kDefault;
}

int DefaultSamplesFor(const ModelSpec& model) {
  return model.kind == Kind::kMog ? DefaultSamples(static_cast<int>(model.components))
                                  : CollectionSpec().samples;
}

CollectionSpec CollectionSpecForModel(const ModelSpec& model, const std::string& name) {
  CollectionSpec spec;
  spec.name = name;
  spec.kind = model.kind;
  if (model.kind == Kind::kCodes) {
    spec.dim = static_cast<int>(model.code_dims);
    spec.code_k = static_cast<int>(model.code_k);
  } else {
    spec.dim = static_cast<int>(model.dim);
    spec.match_a = MatchA(model);
    spec.match_b = MatchB(model);
  }
  if (model.kind == Kind::kMog) spec.components = static_cast<int>(model.components);
  spec.samples = DefaultSamplesFor(model);
  return spec;
}

std::string DescribeForModel(const CollectionSpec& s) {
  std::string text = std::string(KindName(s.kind)) + " dim " + std::to_string(s.dim);
  if (s.kind == Kind::kMog) text += " components " + std::to_string(s.components);
  if (s.kind == Kind::kCodes) {
    text += " code-k " + std::to_string(s.code_k);
  } else {
    text += " match-a " + FloatText(s.match_a) + " match-b " + FloatText(s.match_b);
  }
  return text;
}

Status CheckCollectionFitsModel(const CollectionSpec& have, const ModelSpec& model,
                                const std::string& model_name) {
  const CollectionSpec want = CollectionSpecForModel(model, have.name);
  bool same = have.kind == want.kind && have.dim == want.dim;
  if (same && have.kind == Kind::kMog) same = have.components == want.components;
  if (same && have.kind == Kind::kCodes) same = have.code_k == want.code_k;
  if (same && have.kind != Kind::kCodes) {
    same = NearlyEqual(have.match_a, want.match_a) && NearlyEqual(have.match_b, want.match_b);
  }
  if (same) return Status::OK();
  return Status::InvalidArgument(
      "collection '" + have.name + "' (" + DescribeForModel(have) + ") does not match model '" +
      model_name + "' (" + DescribeForModel(want) +
      "): use the model the collection was made with, or another --collection");
}

}  // namespace encoders
}  // namespace hedgedb
