// The model file's weights: SaveModel, LoadModel (LibTorch). The container,
// header and calibration section are parsed torch-free in model_file.cc.
#include <c10/util/Exception.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "common/file_util.h"
#include "encoders/models/model_file.h"
#include "encoders/models/models.h"

namespace hedgedb::encoders {

Status SaveModel(const std::string& path, const Encoder& encoder,
                 const ModelCalibration* calibration) {
  if (encoder.is_empty()) return Status::InvalidArgument("SaveModel: empty encoder");
  std::string payload;
  ModelSpec spec;
  try {
    spec = encoder->CurrentSpec();
    if (spec.backbone == BackboneType::kTorchScript) {
      // A script beside the model file is named relative to it, so that the
      // two can move together (LoadModel looks beside the model first).
      std::error_code ec;
      const auto script = std::filesystem::absolute(spec.backbone_path, ec).lexically_normal();
      const auto model_dir = std::filesystem::absolute(path, ec).lexically_normal().parent_path();
      if (!ec && script.parent_path() == model_dir) spec.backbone_path = script.filename().string();
    }
    torch::serialize::OutputArchive archive;
    for (const auto& p : encoder->named_parameters(/*recurse=*/true)) {
      archive.write(p.key(), c10::IValue(p.value().detach().cpu()));
    }
    for (const auto& b : encoder->named_buffers(/*recurse=*/true)) {
      archive.write(b.key(), c10::IValue(b.value().detach().cpu()));
    }
    std::ostringstream stream;
    archive.save_to(stream);
    payload = std::move(stream).str();
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("SaveModel: cannot serialise weights: ") +
                            e.what_without_backtrace());
  }
  return WriteFileAtomically(path, {EncodeModelFile(spec, payload, calibration)});
}

Status LoadModel(const std::string& path, ModelSpec* spec, Encoder* encoder,
                 ModelCalibration* calibration) {
  ModelFileParts parts;
  HEDGEDB_RETURN_IF_ERROR(ReadModelFileParts(path, &parts));
  ModelSpec& parsed = parts.spec;
  const std::string& payload = parts.payload;
  if (parsed.backbone == BackboneType::kTorchScript) {
    // A relative script path is looked up beside the model file first (so a
    // model directory can be moved), then from the working directory.
    std::error_code ec;
    const std::filesystem::path script(parsed.backbone_path);
    const std::filesystem::path beside = std::filesystem::path(path).parent_path() / script;
    if (script.is_relative() && std::filesystem::exists(beside, ec)) {
      parsed.backbone_path = beside.string();
    }
  }
  Encoder built{nullptr};
  HEDGEDB_RETURN_IF_ERROR(MakeEncoder(parsed, &built));
  try {
    torch::serialize::InputArchive archive;
    std::istringstream stream(payload);
    archive.load_from(stream, torch::kCPU);
    std::set<std::string> expected;
    torch::NoGradGuard no_grad;
    auto load_one = [&](const std::string& name, torch::Tensor& target) -> Status {
      expected.insert(name);
      c10::IValue value;
      if (!archive.try_read(name, value) || !value.isTensor()) {
        return Status::Corruption("model file '" + path + "': weights do not match its header (" +
                                  "no tensor '" + name + "')");
      }
      const torch::Tensor loaded = value.toTensor();
      if (loaded.sizes() != target.sizes()) {
        std::ostringstream msg;
        msg << "model file '" << path << "': weights do not match its header ('" << name
            << "' has shape " << loaded.sizes() << ", the architecture needs " << target.sizes()
            << ")";
        return Status::Corruption(msg.str());
      }
      target.copy_(loaded);
      return Status::OK();
    };
    for (auto& p : built->named_parameters(/*recurse=*/true)) {
      HEDGEDB_RETURN_IF_ERROR(load_one(p.key(), p.value()));
    }
    for (auto& b : built->named_buffers(/*recurse=*/true)) {
      HEDGEDB_RETURN_IF_ERROR(load_one(b.key(), b.value()));
    }
    for (const auto& key : archive.keys()) {
      if (!expected.count(key)) {
        return Status::Corruption("model file '" + path +
                                  "': weights do not match its header (unexpected tensor '" + key +
                                  "')");
      }
    }
  } catch (const c10::Error& e) {
    return Status::Corruption("model file '" + path +
                              "': cannot read weights: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status::Corruption("model file '" + path + "': cannot read weights: " + e.what());
  }
  *spec = built->CurrentSpec();
  *encoder = built;
  if (calibration != nullptr) *calibration = std::move(parts.calibration);
  return Status::OK();
}

Status LoadModelExpecting(const std::string& path, const ModelSpec& expected, ModelSpec* spec,
                          Encoder* encoder) {
  ModelSpec found;
  HEDGEDB_RETURN_IF_ERROR(ReadModelSpec(path, &found));
  auto mismatch = [&](const std::string& what, const std::string& want, const std::string& got) {
    return Status::InvalidArgument("model file '" + path + "' does not match: " + what + " is " +
                                   got + ", expected " + want);
  };
  if (found.method != expected.method) {
    return mismatch("method", MethodName(expected.method), MethodName(found.method));
  }
  if (found.kind != expected.kind) {
    return mismatch("kind", KindName(expected.kind), KindName(found.kind));
  }
  if (found.kind == Kind::kCodes) {
    if (found.code_dims != expected.code_dims) {
      return mismatch("code_dims", std::to_string(expected.code_dims),
                      std::to_string(found.code_dims));
    }
    if (found.code_k != expected.code_k) {
      return mismatch("code_k", std::to_string(expected.code_k), std::to_string(found.code_k));
    }
  } else if (found.dim != expected.dim) {
    return mismatch("dim", std::to_string(expected.dim), std::to_string(found.dim));
  }
  if (found.components != expected.components) {
    return mismatch("components", std::to_string(expected.components),
                    std::to_string(found.components));
  }
  if (found.input_shape != expected.input_shape) {
    return mismatch("input_shape", InputShapeText(expected.input_shape),
                    InputShapeText(found.input_shape));
  }
  return LoadModel(path, spec, encoder);
}

}  // namespace hedgedb::encoders
