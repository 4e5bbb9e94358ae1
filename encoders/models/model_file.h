// The trained-model file: one file with the weights and everything needed to
// use them (the layout is below). This header is torch-free so that tools can
// read a model's description (kind, dimensions, a/b, ...) without LibTorch
// types; SaveModel/LoadModel (model_weights.cc) take the Encoder from
// encoders/models/models.h.
//
// File layout (all integers little-endian):
//   offset 0   8 bytes  magic "HDBMODEL"
//          8   u32      format version (kModelFileVersion)
//         12   u64      header length H
//         20   H bytes  header: UTF-8 JSON, the ModelSpec (see SpecToJson)
//      20+H    u64      payload length P
//      28+H    P bytes  payload: torch::serialize::OutputArchive with every
//                       parameter and buffer of the Encoder, by its name
//   28+H+P     (format 3 only) the calibration section:
//              u64      info length I
//              I bytes  info: UTF-8 JSON of ModelCalibration::info
//              u64      map length M
//              M bytes  the encoded calibration map (FitCalibrationMap)
//   end - 4    u32      CRC32C (common/crc32c.h) of all preceding bytes;
//                       format version 1 files carry a CRC-32 (IEEE 802.3)
//                       instead and are still read
// A model without a calibration map is written as format 2 (the same bytes as
// before format 3), so builds that read only formats 1 and 2 still load it.
// The file is written to "<path>.tmp" and renamed over <path>, so a crash
// never leaves a half-written model under the final name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "encoders/data/data_settings.h"
#include "encoders/models/methods.h"
#include "hedgedb/calibration.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb::encoders {

class Encoder;  // encoders/models/models.h

// The newest format this build reads and writes. 3: a calibration section
// after the weights; 2: the checksum is CRC32C (1: CRC-32; read, never
// written).
inline constexpr uint32_t kModelFileVersion = 3;

enum class BackboneType {
  kCnn,          // HIB/SPE shallow CNN on images
  kMlp,          // MLP over precomputed feature vectors
  kTorchScript,  // user network saved with torch.jit.save
};
const char* BackboneTypeName(BackboneType type);
bool ParseBackboneType(const std::string& name, BackboneType* type);

// Sizes of the HIB/SPE CNN. The exact filter counts and hidden width are
// stripped from our copies of both papers (SPE appendix A.3 describes the
// HIB code as conv 5x5 pad 2 -> ReLU -> pool, conv 5x5 (more filters) ->
// ReLU -> pool, FC + ReLU, FC to the outputs); these defaults are the usual
// MNIST values and are recorded in every model file.
struct CnnOptions {
  int64_t conv1_channels = 32;
  int64_t conv2_channels = 64;
  int64_t hidden = 500;  // 0: no hidden FC layer (HIB's literal wording)
};

// Everything needed to rebuild and use an encoder.
struct ModelSpec {
  Method method = Method::kHib;
  Kind kind = Kind::kGaussian;

  // Embedding size: D (point/gaussian/mog), C (mog), d and k (codes).
  int64_t dim = 2;
  int64_t components = 1;
  int64_t code_dims = 0;
  int64_t code_k = 0;
  int64_t dimco_hidden = 128;  // DIMCO's factorised code layer width

  // Learned scalars, written at save time from the encoder's parameters and
  // used to initialise them when a new encoder is built from this spec.
  double match_a = 1.0;  // soft-contrastive a > 0
  double match_b = 0.0;  // soft-contrastive b
  // SPE class spread sigma_eps^2 > 0. SPE appendix B initialises it from the
  // episode's support size and D; that formula is stripped from our copy of
  // the paper, so the trainer chooses the initial value here. Embeddings of
  // an SPE model carry it: their variance is s^2 + sigma_eps^2.
  double sigma_eps2 = 1.0;

  // Floor added to softplus variances (gaussian/mog heads).
  double min_variance = 1e-6;

  // Per-item input shape without the batch dimension: {C, H, W} for images,
  // {F} for feature vectors.
  std::vector<int64_t> input_shape = {1, 28, 56};
  // Input normalisation x' = (x - mean) / std, one value per channel (images)
  // or per feature / a single value (vectors). Empty: no normalisation.
  std::vector<double> input_mean;
  std::vector<double> input_std;

  BackboneType backbone = BackboneType::kCnn;
  // TorchScript file (kTorchScript only). LoadModel resolves a relative path
  // against the working directory first, then the model file's directory.
  std::string backbone_path;
  CnnOptions cnn;
  int64_t mlp_hidden = 1024;  // kMlp: F -> mlp_hidden ReLU -> head
  // Backbone output size; filled in when the encoder is built (0 = unknown).
  int64_t feature_dim = 0;
  // The data the model was trained on ("data" in the header; absent in
  // files written before it was recorded: data.recorded is false).
  DataSettings data;
};

// The calibration map a model file may carry: fitted by `train` on its
// validation split for the model's score (engine_bridge.h: ModelScore), so
// that a collection created from the model starts calibrated
// (DB::ImportCalibration takes `map`).
struct ModelCalibration {
  std::string map;  // encoded map; empty: the model has none
  // score, method, pairs, fit_base_rate, base_rate, samples and reason of the
  // fit (sequence is 0).
  CalibrationInfo info;
  bool empty() const { return map.empty(); }
};

// Size limits of a model spec (besides the collection limits kMaxDim and
// kMaxComponents of common/spec_limits.h): the width of any layer or input side,
// and the dense-layer weights of backbone plus head (1 GiB of float32).
constexpr int64_t kMaxLayerWidth = 65536;
constexpr int64_t kMaxModelParameters = int64_t(1) << 28;

// Checks internal consistency (kind vs method, positive sizes, k in [2,256],
// mean/std sizes, ...) and the size limits above, before anything is built.
// InvalidArgument with the first problem found.
Status ValidateSpec(const ModelSpec& spec);

// JSON text of a spec, and back. SpecFromJson reports unknown enum names,
// missing or mistyped fields as Corruption.
std::string SpecToJson(const ModelSpec& spec);
Status SpecFromJson(const std::string& json, ModelSpec* spec);

// "[1, 28, 56]": an input shape for messages.
std::string InputShapeText(const std::vector<int64_t>& shape);

// A model file's parts after every check that needs no LibTorch: magic,
// version, checksum, the lengths, the calibration section and the header
// JSON (SpecFromJson + ValidateSpec). The weights stay unread bytes.
struct ModelFileParts {
  ModelSpec spec;
  std::string payload;  // the weights archive
  ModelCalibration calibration;
};

// Parses the bytes `file` of the model file `path` (named in errors).
Status ParseModelFile(const std::string& path, const std::string& file, ModelFileParts* parts);
// Reads `path` and parses it (NotFound, IOError, or ParseModelFile's errors).
Status ReadModelFileParts(const std::string& path, ModelFileParts* parts);

// The bytes of a model file with `spec` as header and `payload` as weights;
// format 3 with the calibration section when `calibration` holds a map, else
// format 2.
std::string EncodeModelFile(const ModelSpec& spec, const std::string& payload,
                            const ModelCalibration* calibration);

// Reads and checks a model file up to the weights (ReadModelFileParts) and
// returns its header. Torch-free; usable to create a collection of the right
// kind before loading any weights.
Status ReadModelSpec(const std::string& path, ModelSpec* spec);

// The identity of a model file: the checksum its last 4 bytes hold (the
// trailer above), as 8 hex digits; "" when the file cannot be read. Two files
// with the same weights and header have the same checksum wherever they lie,
// so it names the model, not the path (engine_bridge.h, CheckCollectionModel).
std::string ModelFileChecksum(const std::string& path);

// The calibration map of a model file (empty for format 1 and 2 files and
// models trained without one), after the same checks as ReadModelSpec.
Status ReadModelCalibration(const std::string& path, ModelCalibration* calibration);

// Writes the encoder's CurrentSpec() and all its parameters and buffers, and
// the calibration map when `calibration` holds one (format 3; else format 2).
Status SaveModel(const std::string& path, const Encoder& encoder,
                 const ModelCalibration* calibration = nullptr);

// Reads a model file, rebuilds the encoder from its header and loads the
// weights. Errors:
//   NotFound    the file does not exist
//   IOError     it cannot be read
//   Corruption  bad magic, truncated, CRC mismatch, unreadable archive, or
//               weights that do not match the header's architecture
//   NotSupported a newer format version
// On success *spec is the header (with feature_dim filled in) and
// *calibration (if not null) the file's calibration map, if any.
Status LoadModel(const std::string& path, ModelSpec* spec, Encoder* encoder,
                 ModelCalibration* calibration = nullptr);

// Like LoadModel, but also rejects (InvalidArgument) a file whose method,
// kind, dimensions or input shape differ from `expected` — for callers that
// need a specific model, e.g. to match an existing collection.
Status LoadModelExpecting(const std::string& path, const ModelSpec& expected, ModelSpec* spec,
                          Encoder* encoder);

}  // namespace hedgedb::encoders
