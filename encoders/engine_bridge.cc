#include "encoders/engine_bridge.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
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
  return GetMethodInfo(method).match == MatchParameters::kLearned;
}

bool HasMatchParameters(Method method) {
  return GetMethodInfo(method).match != MatchParameters::kNone;
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

ScoreType ModelScore(const ModelSpec& model) { return GetMethodInfo(model.method).score; }

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

namespace {

// The checksum and path of the model the collection's metadata records
// (RecordModelInMetadata); false when it records none.
bool RecordedModel(const CollectionSpec& spec, std::string* checksum, std::string* model) {
  const nlohmann::json metadata =
      nlohmann::json::parse(spec.metadata, nullptr, /*allow_exceptions=*/false);
  if (!metadata.is_object() || !metadata.contains("images") || !metadata["images"].is_object()) {
    return false;
  }
  const nlohmann::json& record = metadata["images"];
  if (!record.contains("model_checksum") || !record["model_checksum"].is_string()) return false;
  *checksum = record["model_checksum"].get<std::string>();
  *model = record.contains("model") && record["model"].is_string()
               ? record["model"].get<std::string>()
               : std::string("?");
  return !checksum->empty();
}

bool RecordsModel(const CollectionSpec& spec) {
  std::string checksum, model;
  return RecordedModel(spec, &checksum, &model);
}

}  // namespace

Status CheckCollectionFitsModel(const CollectionSpec& have, const ModelSpec& model,
                                const std::string& model_name) {
  const CollectionSpec want = CollectionSpecForModel(model, have.name);
  bool same = have.kind == want.kind && have.dim == want.dim;
  if (same && have.kind == Kind::kMog) same = have.components == want.components;
  if (same && have.kind == Kind::kCodes) same = have.code_k == want.code_k;
  // a and b tell models apart only where the collection records none:
  // calibrate may refit them (docs/calibration.md, "Match parameters"), and
  // a recorded model is checked by its checksum (CheckCollectionModel).
  if (same && have.kind != Kind::kCodes && !RecordsModel(have)) {
    same = NearlyEqual(have.match_a, want.match_a) && NearlyEqual(have.match_b, want.match_b);
  }
  if (same) return Status::OK();
  return Status::InvalidArgument(
      "collection '" + have.name + "' (" + DescribeForModel(have) + ") does not match model '" +
      model_name + "' (" + DescribeForModel(want) +
      "): use the model the collection was made with, or another collection");
}

Status RecordModelInMetadata(const std::string& metadata, const std::string& model_path,
                             std::string* out) {
  nlohmann::json record =
      metadata.empty() ? nlohmann::json::object()
                       : nlohmann::json::parse(metadata, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) {
    return Status::InvalidArgument(
        "the collection's metadata must be a JSON object to record its model in, got '" + metadata +
        "'");
  }
  nlohmann::json& images = record["images"];
  if (images.is_null()) images = nlohmann::json::object();
  if (!images.is_object()) {
    return Status::InvalidArgument(
        "the collection's metadata holds an \"images\" entry that is not an object: '" + metadata +
        "'");
  }
  images["model"] = std::filesystem::absolute(model_path).lexically_normal().string();
  images["model_checksum"] = ModelFileChecksum(model_path);
  *out = record.dump();
  return Status::OK();
}

Status CheckCollectionModel(const CollectionSpec& spec, const std::string& model_path,
                            ModelUse use) {
  std::string have, recorded;
  if (!RecordedModel(spec, &have, &recorded)) return Status::OK();  // no record: any model
  const std::string now = ModelFileChecksum(model_path);
  if (have == now) return Status::OK();
  return Status::InvalidArgument(
      "collection '" + spec.name + "' holds embeddings of another model (" + recorded +
      ", checksum " + have + "); '" + model_path + "' (checksum " + now +
      ") embeds into another space, so " +
      (use == ModelUse::kIngest ? "its embeddings cannot join them"
                                : "its queries cannot be compared with them") +
      ": use the collection's model, or ingest into a new collection");
}

}  // namespace encoders
}  // namespace hedgedb
