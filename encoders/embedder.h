// Running a trained encoder over a data set and writing the embeddings as the
// .npy files `hedgedb ingest` / `hedgedb search` read. Torch-free interface
// (the LibTorch encoder lives behind a pointer), so tools and the evaluation
// compile without LibTorch headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "encoders/data/encoder_data.h"
#include "encoders/models/model_file.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {
namespace encoders {

class Encoder;  // encoders/models/models.h

// Embeddings of n items in the engine's layout (include/hedgedb/types.h):
//   point:    vec n x D
//   gaussian: mean, var n x D
//   mog:      mean, var n x C x D; weights n x C
//   codes:    codes n x d (argmax symbol per code dimension, the item form)
//             and logp n x d x k (log-probability tables, the query form)
struct Embeddings {
  Kind kind = Kind::kPoint;
  int64_t n = 0;
  int64_t dim = 0;  // D, or d for codes
  int64_t components = 1;
  int64_t code_k = 0;
  std::vector<float> vec, mean, var, weights, logp;
  std::vector<int32_t> codes;

  // The engine's view of these embeddings (borrowed pointers).
  EmbeddingView View() const;
  // Floats per row of mean/var (D or C*D).
  int64_t row_floats() const { return components * dim; }
};

// A loaded (or borrowed) encoder that embeds items in inference mode.
class EncoderModel {
 public:
  ~EncoderModel();
  EncoderModel(const EncoderModel&) = delete;
  EncoderModel& operator=(const EncoderModel&) = delete;

  // Loads a model file (see LoadModel for the errors).
  static Status Load(const std::string& path, std::unique_ptr<EncoderModel>* model);
  // Shares the modules of a live encoder (the trainer's validation).
  static std::unique_ptr<EncoderModel> Borrow(const Encoder& encoder);

  // The current spec (learned a, b and sigma_eps^2 included).
  ModelSpec spec() const;
  // The model file's calibration map (empty when it has none, or borrowed).
  const ModelCalibration& calibration() const;

  // Embeds `items` of `set` (corrupt: the stored corrupt twin) in batches of
  // `batch_size`, without gradients and in eval mode (the encoder's training
  // flag is restored afterwards). InvalidArgument when the set's input shape
  // differs from the model's.
  Status Embed(const ItemSet& set, const std::vector<int64_t>& items, bool corrupt, Embeddings* out,
               int64_t batch_size = 256) const;

 private:
  struct Impl;
  explicit EncoderModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Sets LibTorch's intra-op threads and OpenBLAS's (so that the environment
// does not decide them); threads <= 0 uses the hardware cores
// (torch's own default may report 1 on small machines).
// Returns the count in use.
int SetEncoderThreads(int threads);

// Writes PREFIX.vec.npy (point), PREFIX.mean/.var.npy (gaussian), plus
// PREFIX.weights.npy (mog), PREFIX.codes.npy (int32) and PREFIX.logp.npy
// (codes); then PREFIX.ids.npy and PREFIX.labels.npy (int64). `written` gets
// the paths in that order.
Status WriteEmbeddings(const std::string& prefix, const Embeddings& embeddings,
                       const std::vector<int64_t>& ids, const std::vector<int64_t>& labels,
                       std::vector<std::string>* written);

}  // namespace encoders
}  // namespace hedgedb
