#include "encoders/models/model_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/enum_names.h"
#include "common/file_util.h"
#include "common/json_fields.h"
#include "common/spec_limits.h"
#include "encoders/models/model_fields.h"
#include "hedgedb/fields.h"

namespace hedgedb::encoders {
namespace {

constexpr char kMagic[8] = {'H', 'D', 'B', 'M', 'O', 'D', 'E', 'L'};
// magic + version + header length + payload length + crc.
constexpr size_t kFixedBytes = 8 + 4 + 8 + 8 + 4;

constexpr EnumName<BackboneType> kBackbones[] = {
    {BackboneType::kCnn, "cnn"},
    {BackboneType::kMlp, "mlp"},
    {BackboneType::kTorchScript, "torchscript"},
};

// The checksum of a file of `version` over its first n bytes: CRC32C, the
// project's checksum, from version 2; version 1 files carry a CRC-32 (IEEE
// 802.3), still read so that models trained before the change load.
uint32_t FileChecksum(uint32_t version, const char* data, size_t n) {
  if (version == 1) {
    return Crc32Ieee(data, n);
  }
  return Crc32c(data, n);
}

Status ReadModelFile(const std::string& path, std::string* contents) {
  const Status s = ReadWholeFile(path, contents);
  if (s.IsNotFound()) return Status::NotFound("model file '" + path + "' does not exist");
  if (!s.ok()) return Status::IOError("cannot read model file '" + path + "': " + s.message());
  return Status::OK();
}

// The bytes of a file's calibration section (format 3).
struct CalibrationSection {
  std::string info;  // JSON
  std::string map;
};

// Splits a model file into its checked header JSON, payload bytes and (format
// 3) calibration section; `section` may be null.
Status ParseContainer(const std::string& path, const std::string& file, std::string* header,
                      std::string* payload, CalibrationSection* section = nullptr) {
  if (file.size() < kFixedBytes) {
    return Status::Corruption("model file '" + path + "' is truncated (" +
                              std::to_string(file.size()) + " bytes)");
  }
  if (std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0) {
    return Status::Corruption("'" + path + "' is not a hedgedb model file (bad magic)");
  }
  // The version says which checksum the file carries.
  const uint32_t version = GetFixed<uint32_t>(file.data() + 8);
  if (version == 0) return Status::Corruption("model file '" + path + "' has format version 0");
  if (version > kModelFileVersion) {
    return Status::NotSupported("model file '" + path + "' has format version " +
                                std::to_string(version) + "; this build reads up to " +
                                std::to_string(kModelFileVersion));
  }
  const uint32_t stored_crc = GetFixed<uint32_t>(file.data() + file.size() - 4);
  if (FileChecksum(version, file.data(), file.size() - 4) != stored_crc) {
    return Status::Corruption("model file '" + path +
                              "' fails its checksum (damaged or truncated)");
  }
  const uint64_t header_len = GetFixed<uint64_t>(file.data() + 12);
  if (header_len > file.size() - kFixedBytes) {
    return Status::Corruption("model file '" + path + "': header length out of range");
  }
  // Bytes between the payload length and the checksum.
  const uint64_t rest = file.size() - kFixedBytes - header_len;
  const uint64_t payload_len = GetFixed<uint64_t>(file.data() + 20 + header_len);
  const uint64_t payload_at = 28 + header_len;
  if (version < 3 ? payload_len != rest : payload_len > rest) {
    return Status::Corruption("model file '" + path + "': payload length does not match file size");
  }
  *header = file.substr(20, header_len);
  *payload = file.substr(payload_at, payload_len);
  if (version < 3) return Status::OK();
  // Two length-prefixed fields that end exactly at the checksum.
  uint64_t at = payload_at + payload_len, left = rest - payload_len;
  std::string fields[2];
  for (std::string& field : fields) {
    const uint64_t len = left >= 8 ? GetFixed<uint64_t>(file.data() + at) : 0;
    if (left < 8 || len > left - 8) {
      return Status::Corruption("model file '" + path +
                                "': calibration section length out of range");
    }
    field = file.substr(at + 8, len);
    at += 8 + len;
    left -= 8 + len;
  }
  if (left != 0) {
    return Status::Corruption("model file '" + path +
                              "': calibration section does not match file size");
  }
  if (section != nullptr) {
    section->info = std::move(fields[0]);
    section->map = std::move(fields[1]);
  }
  return Status::OK();
}

Status CalibrationFromSection(const std::string& path, const CalibrationSection& section,
                              ModelCalibration* calibration) {
  *calibration = ModelCalibration();
  if (section.map.empty()) return Status::OK();
  try {
    const nlohmann::json j = nlohmann::json::parse(section.info);
    CalibrationInfo info;
    if (!ParseScore(j.at("score").get<std::string>(), &info.score) ||
        info.score == ScoreType::kDefault) {
      return Status::Corruption("model file '" + path + "': calibration of an unknown score");
    }
    info.method = j.at("method").get<std::string>();
    info.pairs = j.at("pairs").get<int64_t>();
    info.fit_base_rate = j.at("fit_base_rate").get<double>();
    info.base_rate = j.at("base_rate").get<double>();
    info.samples = j.at("samples").get<int>();
    info.reason = j.value("reason", "");
    calibration->info = std::move(info);
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption("model file '" + path + "': calibration info: " + e.what());
  }
  calibration->map = section.map;
  return Status::OK();
}

}  // namespace

std::string InputShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

const char* BackboneTypeName(BackboneType type) { return NameOfEnum(kBackbones, type); }

bool ParseBackboneType(const std::string& name, BackboneType* type) {
  return ParseEnumName(kBackbones, name, type);
}

namespace {

// Bounds every size before anything is allocated: a model's output must fit a
// collection (kMaxDim, kMaxComponents of common/spec_limits.h), and the weights of
// its dense layers (the bulk of every backbone and head here) must stay below
// kMaxModelParameters. A header claiming 10^9 mixture components is refused
// here instead of failing after gigabytes of allocation.
Status CheckModelSize(const ModelSpec& s) {
  auto bad = [](const std::string& msg) { return Status::InvalidArgument("model spec: " + msg); };
  auto at_most = [&](const char* field, int64_t v, int64_t limit) {
    return v <= limit ? Status::OK()
                      : bad(std::string(field) + " must be <= " + std::to_string(limit) + ", got " +
                            std::to_string(v));
  };
  HEDGEDB_RETURN_IF_ERROR(at_most("dim", s.dim, kMaxDim));
  HEDGEDB_RETURN_IF_ERROR(at_most("components", s.components, kMaxComponents));
  HEDGEDB_RETURN_IF_ERROR(at_most("code_dims", s.code_dims, kMaxDim));
  HEDGEDB_RETURN_IF_ERROR(at_most("dimco_hidden", s.dimco_hidden, kMaxLayerWidth));
  HEDGEDB_RETURN_IF_ERROR(at_most("conv1_channels", s.cnn.conv1_channels, kMaxLayerWidth));
  HEDGEDB_RETURN_IF_ERROR(at_most("conv2_channels", s.cnn.conv2_channels, kMaxLayerWidth));
  HEDGEDB_RETURN_IF_ERROR(at_most("cnn_hidden", s.cnn.hidden, kMaxLayerWidth));
  HEDGEDB_RETURN_IF_ERROR(at_most("mlp_hidden", s.mlp_hidden, kMaxLayerWidth));
  HEDGEDB_RETURN_IF_ERROR(at_most("feature_dim", s.feature_dim, kMaxLayerWidth));
  double inputs = 1;
  for (int64_t d : s.input_shape) {
    HEDGEDB_RETURN_IF_ERROR(at_most("an input_shape size", d, kMaxLayerWidth));
    inputs *= double(d);
  }
  // Dense-layer weights (double: the products cannot overflow).
  double params = 0;
  double features = double(s.feature_dim);
  switch (s.backbone) {
    case BackboneType::kCnn: {
      const double c = s.input_shape.empty() ? 1 : double(s.input_shape[0]);
      const double flat = s.input_shape.size() == 3
                              ? double(s.cnn.conv2_channels) * double(s.input_shape[1] / 4) *
                                    double(s.input_shape[2] / 4)
                              : 0;
      params += 25 * (c * double(s.cnn.conv1_channels) +
                      double(s.cnn.conv1_channels) * double(s.cnn.conv2_channels));
      features = s.cnn.hidden > 0 ? double(s.cnn.hidden) : flat;
      params += s.cnn.hidden > 0 ? flat * double(s.cnn.hidden) : 0;
      break;
    }
    case BackboneType::kMlp:
      params += inputs * double(s.mlp_hidden);
      features = double(s.mlp_hidden);
      break;
    case BackboneType::kTorchScript:
      break;  // its weights are in its own file
  }
  if (s.kind == Kind::kCodes) {
    params += features * double(s.dimco_hidden) +
              double(s.dimco_hidden) * double(s.code_dims) * double(s.code_k);
  } else {
    params += features * double(s.components) * (2 * double(s.dim) + 1);
  }
  if (params > double(kMaxModelParameters)) {
    return bad("the model would hold about " + std::to_string(int64_t(params)) +
               " weights, more than the limit of " + std::to_string(kMaxModelParameters));
  }
  return Status::OK();
}

}  // namespace

Status ValidateSpec(const ModelSpec& s) {
  auto bad = [](const std::string& msg) { return Status::InvalidArgument("model spec: " + msg); };
  if (!MethodAllowsKind(s.method, s.kind)) {
    return bad(std::string("method ") + MethodName(s.method) + " does not produce " +
               KindName(s.kind) + " embeddings");
  }
  if (s.kind == Kind::kCodes) {
    if (s.code_dims < 1) return bad("code_dims (d) must be >= 1");
    if (s.code_k < 2 || s.code_k > 256) return bad("code_k (k) must be in [2, 256]");
    if (s.dimco_hidden < 1) return bad("dimco_hidden must be >= 1");
  } else {
    if (s.dim < 1) return bad("dim (D) must be >= 1");
  }
  if (s.kind == Kind::kMog && s.components < 1) return bad("components (C) must be >= 1");
  if (s.kind != Kind::kMog && s.components != 1) {
    return bad("components must be 1 unless kind is mog");
  }
  if (!(s.match_a > 0) || !std::isfinite(s.match_a)) return bad("match_a must be > 0");
  if (!std::isfinite(s.match_b)) return bad("match_b must be finite");
  if (!(s.sigma_eps2 > 0) || !std::isfinite(s.sigma_eps2)) return bad("sigma_eps2 must be > 0");
  if (!(s.min_variance >= 0) || !std::isfinite(s.min_variance)) {
    return bad("min_variance must be >= 0");
  }
  if (s.input_shape.empty()) return bad("input_shape is empty");
  for (int64_t d : s.input_shape) {
    if (d < 1)
      return bad("input_shape " + InputShapeText(s.input_shape) + " has a non-positive size");
  }
  if (s.input_mean.size() != s.input_std.size()) {
    return bad("input_mean and input_std differ in length");
  }
  if (!s.input_mean.empty() && s.input_mean.size() != 1 &&
      static_cast<int64_t>(s.input_mean.size()) != s.input_shape[0]) {
    return bad("input_mean/std need 1 or " + std::to_string(s.input_shape[0]) + " values, got " +
               std::to_string(s.input_mean.size()));
  }
  for (double v : s.input_std) {
    if (!(v > 0) || !std::isfinite(v)) return bad("input_std values must be > 0");
  }
  for (double v : s.input_mean) {
    if (!std::isfinite(v)) return bad("input_mean values must be finite");
  }
  switch (s.backbone) {
    case BackboneType::kCnn:
      if (s.input_shape.size() != 3) {
        return bad("the cnn backbone needs a {C, H, W} input_shape, got " +
                   InputShapeText(s.input_shape));
      }
      if (s.input_shape[1] < 4 || s.input_shape[2] < 4) {
        return bad("the cnn backbone needs inputs of at least 4 x 4 (two 2x2 pools)");
      }
      if (s.cnn.conv1_channels < 1 || s.cnn.conv2_channels < 1 || s.cnn.hidden < 0) {
        return bad("cnn channel counts must be >= 1 and hidden >= 0");
      }
      break;
    case BackboneType::kMlp:
      if (s.mlp_hidden < 1) return bad("mlp_hidden must be >= 1");
      break;
    case BackboneType::kTorchScript:
      if (s.backbone_path.empty()) return bad("the torchscript backbone needs backbone_path");
      break;
  }
  if (s.feature_dim < 0) return bad("feature_dim must be >= 0");
  return CheckModelSize(s);
}

namespace {

// Writes the fields model_fields.h (and hedgedb/fields.h, for the
// calibration info) visit into a JSON object: enums by their stored names,
// groups as nested objects.
struct JsonFieldWriter {
  nlohmann::json* j;
  void operator()(const char* name, Method v) const { (*j)[name] = MethodName(v); }
  void operator()(const char* name, Kind v) const { (*j)[name] = KindName(v); }
  void operator()(const char* name, BackboneType v) const { (*j)[name] = BackboneTypeName(v); }
  void operator()(const char* name, ScoreType v) const { (*j)[name] = ScoreName(v); }
  void operator()(const char* name, const BackboneFields& v) const { Group(name, v); }
  void operator()(const char* name, const DataSettings& v) const { Group(name, v); }
  // Numbers, bools, text and lists of numbers as they are.
  template <typename T>
  void operator()(const char* name, const T& v) const {
    (*j)[name] = v;
  }
  template <typename T>
  void Group(const char* name, const T& v) const {
    nlohmann::json group = nlohmann::json::object();
    VisitFields(v, JsonFieldWriter{&group});
    (*j)[name] = std::move(group);
  }
};

// The calibration info as the model file stores it: every field
// hedgedb/fields.h visits (as `hedgedb stats` lists a stored map), of which
// CalibrationFromSection reads the ones a map needs.
std::string CalibrationInfoJson(const CalibrationInfo& info) {
  nlohmann::json j = nlohmann::json::object();
  VisitFields(info, JsonFieldWriter{&j});
  return j.dump();
}

}  // namespace

std::string SpecToJson(const ModelSpec& s) {
  nlohmann::json j;
  j["format"] = "hedgedb-model";
  VisitFields(s, JsonFieldWriter{&j});
  // A path that is not UTF-8 (the recorded data source) is written with
  // replacement characters rather than failing the save of a trained model.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status SpecFromJson(const std::string& text, ModelSpec* spec) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.value("format", "") != "hedgedb-model") {
      return Status::Corruption("model header is not a hedgedb-model description");
    }
    ModelSpec s;
    if (!ParseMethod(j.at("method").get<std::string>(), &s.method)) {
      return Status::Corruption("model header: unknown method '" +
                                j.at("method").get<std::string>() + "'");
    }
    if (!ParseKind(j.at("kind").get<std::string>(), &s.kind)) {
      return Status::Corruption("model header: unknown kind '" + j.at("kind").get<std::string>() +
                                "'");
    }
    // Sizes must be JSON integers (2.5 is not 2); ValidateSpec bounds them.
    const int64_t kMaxField = std::numeric_limits<int32_t>::max();
    HEDGEDB_RETURN_IF_ERROR(JsonInteger(j, "dim", 0, kMaxField, "model header", &s.dim));
    HEDGEDB_RETURN_IF_ERROR(
        JsonInteger(j, "components", 0, kMaxField, "model header", &s.components));
    HEDGEDB_RETURN_IF_ERROR(
        JsonInteger(j, "code_dims", 0, kMaxField, "model header", &s.code_dims));
    HEDGEDB_RETURN_IF_ERROR(JsonInteger(j, "code_k", 0, kMaxField, "model header", &s.code_k));
    HEDGEDB_RETURN_IF_ERROR(
        JsonInteger(j, "dimco_hidden", 0, kMaxField, "model header", &s.dimco_hidden));
    s.match_a = j.at("match_a").get<double>();
    s.match_b = j.at("match_b").get<double>();
    s.sigma_eps2 = j.at("sigma_eps2").get<double>();
    s.min_variance = j.at("min_variance").get<double>();
    const nlohmann::json& shape = j.at("input_shape");
    if (!shape.is_array()) return Status::Corruption("model header: input_shape is not an array");
    s.input_shape.clear();
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t size = 0;
      HEDGEDB_RETURN_IF_ERROR(JsonInteger(nlohmann::json{{"input_shape", shape[i]}}, "input_shape",
                                          0, kMaxField, "model header", &size));
      s.input_shape.push_back(size);
    }
    s.input_mean = j.at("input_mean").get<std::vector<double>>();
    s.input_std = j.at("input_std").get<std::vector<double>>();
    const auto& b = j.at("backbone");
    if (!ParseBackboneType(b.at("type").get<std::string>(), &s.backbone)) {
      return Status::Corruption("model header: unknown backbone '" +
                                b.at("type").get<std::string>() + "'");
    }
    s.backbone_path = b.at("path").get<std::string>();
    HEDGEDB_RETURN_IF_ERROR(
        JsonInteger(b, "conv1_channels", 0, kMaxField, "model header", &s.cnn.conv1_channels));
    HEDGEDB_RETURN_IF_ERROR(
        JsonInteger(b, "conv2_channels", 0, kMaxField, "model header", &s.cnn.conv2_channels));
    HEDGEDB_RETURN_IF_ERROR(
        JsonInteger(b, "cnn_hidden", 0, kMaxField, "model header", &s.cnn.hidden));
    HEDGEDB_RETURN_IF_ERROR(
        JsonInteger(b, "mlp_hidden", 0, kMaxField, "model header", &s.mlp_hidden));
    HEDGEDB_RETURN_IF_ERROR(
        JsonInteger(j, "feature_dim", 0, kMaxField, "model header", &s.feature_dim));
    if (j.contains("data")) {
      const nlohmann::json& d = j.at("data");
      s.data.recorded = true;
      s.data.source = d.at("source").get<std::string>();
      if (!d.at("seed").is_number_unsigned()) {
        return Status::Corruption("model header data: seed must be an integer >= 0, got " +
                                  d.at("seed").dump());
      }
      s.data.seed = d.at("seed").get<uint64_t>();
      for (auto [field, value] : {std::pair{"items", &s.data.items},
                                  {"train_total", &s.data.train_total},
                                  {"test_total", &s.data.test_total},
                                  {"image_size", &s.data.image_size},
                                  {"class_split", &s.data.class_split}}) {
        HEDGEDB_RETURN_IF_ERROR(JsonInteger(d, field, 0, kMaxField, "model header data", value));
      }
      // The commands use these as flag values: the flags' own bounds hold.
      const auto bad = [](const char* field, int64_t v, const char* range) {
        return Status::Corruption(std::string("model header data: ") + field + " " +
                                  std::to_string(v) + " is not in " + range);
      };
      if (s.data.items > 4) return bad("items", s.data.items, "[0, 4]");
      if (s.data.image_size != 0 && (s.data.image_size < 8 || s.data.image_size > 1024)) {
        return bad("image_size", s.data.image_size, "{0} or [8, 1024]");
      }
      if (s.data.class_split > 1000) return bad("class_split", s.data.class_split, "[0, 1000]");
      if (!d.at("bbox").is_boolean()) {
        return Status::Corruption("model header data: bbox must be true or false");
      }
      s.data.bbox = d.at("bbox").get<bool>();
      // Absent from model files written before the layout was recorded.
      s.data.composite_layout = d.value("composite_layout", std::string());
      if (s.data.composite_layout != "" && s.data.composite_layout != "reference" &&
          s.data.composite_layout != "hib" && s.data.composite_layout != "hib-scaled") {
        return Status::Corruption("model header data: unknown composite_layout '" +
                                  s.data.composite_layout + "'");
      }
      s.data.image_fit = d.at("image_fit").get<std::string>();
      if (s.data.image_fit != "" && s.data.image_fit != "exact" && s.data.image_fit != "resize") {
        return Status::Corruption("model header data: unknown image_fit '" + s.data.image_fit +
                                  "'");
      }
    }
    *spec = std::move(s);
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("model header: ") + e.what());
  }
  return Status::OK();
}

Status ParseModelFile(const std::string& path, const std::string& file, ModelFileParts* parts) {
  std::string header;
  CalibrationSection section;
  ModelFileParts out;
  HEDGEDB_RETURN_IF_ERROR(ParseContainer(path, file, &header, &out.payload, &section));
  HEDGEDB_RETURN_IF_ERROR(CalibrationFromSection(path, section, &out.calibration));
  HEDGEDB_RETURN_IF_ERROR(SpecFromJson(header, &out.spec));
  Status valid = ValidateSpec(out.spec);
  if (!valid.ok()) {
    return Status::Corruption("model file '" + path +
                              "' describes an invalid model: " + valid.message());
  }
  *parts = std::move(out);
  return Status::OK();
}

Status ReadModelFileParts(const std::string& path, ModelFileParts* parts) {
  std::string file;
  HEDGEDB_RETURN_IF_ERROR(ReadModelFile(path, &file));
  return ParseModelFile(path, file, parts);
}

Status ReadModelSpec(const std::string& path, ModelSpec* spec) {
  ModelFileParts parts;
  HEDGEDB_RETURN_IF_ERROR(ReadModelFileParts(path, &parts));
  *spec = std::move(parts.spec);
  return Status::OK();
}

std::string ModelFileChecksum(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file || file.tellg() < 4) return "";
  file.seekg(-4, std::ios::end);
  unsigned char bytes[4] = {};
  file.read(reinterpret_cast<char*>(bytes), 4);
  if (!file) return "";
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%02x%02x%02x%02x", bytes[3], bytes[2], bytes[1], bytes[0]);
  return hex;
}

Status ReadModelCalibration(const std::string& path, ModelCalibration* calibration) {
  ModelFileParts parts;
  HEDGEDB_RETURN_IF_ERROR(ReadModelFileParts(path, &parts));
  *calibration = std::move(parts.calibration);
  return Status::OK();
}

std::string EncodeModelFile(const ModelSpec& spec, const std::string& payload,
                            const ModelCalibration* calibration) {
  const std::string header = SpecToJson(spec);
  // Format 2 when there is no map: older builds keep reading such models.
  const bool with_map = calibration != nullptr && !calibration->empty();
  const uint32_t version = with_map ? kModelFileVersion : 2;
  std::string file(kMagic, sizeof(kMagic));
  PutFixed<uint32_t>(&file, version);
  PutFixed<uint64_t>(&file, header.size());
  file += header;
  PutFixed<uint64_t>(&file, payload.size());
  file += payload;
  if (with_map) {
    const std::string info = CalibrationInfoJson(calibration->info);
    PutFixed<uint64_t>(&file, info.size());
    file += info;
    PutFixed<uint64_t>(&file, calibration->map.size());
    file += calibration->map;
  }
  PutFixed<uint32_t>(&file, FileChecksum(version, file.data(), file.size()));
  return file;
}

}  // namespace hedgedb::encoders
