#include "encoders/embedder.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "encoders/models/models.h"
#include "hedgedb/npy.h"

// OpenBLAS's thread count (SetEncoderThreads); null where the process has no
// OpenBLAS.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace hedgedb {
namespace encoders {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void AppendTensor(const torch::Tensor& t, std::vector<float>* out) {
  const torch::Tensor c = t.to(torch::kFloat32).contiguous();
  const float* p = c.data_ptr<float>();
  out->insert(out->end(), p, p + c.numel());
}

}  // namespace

struct EncoderModel::Impl {
  Encoder encoder{nullptr};
  ModelCalibration calibration;
};

EncoderModel::EncoderModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EncoderModel::~EncoderModel() = default;

Status EncoderModel::Load(const std::string& path, std::unique_ptr<EncoderModel>* model) {
  auto impl = std::make_unique<Impl>();
  ModelSpec spec;
  HEDGEDB_RETURN_IF_ERROR(LoadModel(path, &spec, &impl->encoder, &impl->calibration));
  model->reset(new EncoderModel(std::move(impl)));
  return Status::OK();
}

std::unique_ptr<EncoderModel> EncoderModel::Borrow(const Encoder& encoder) {
  auto impl = std::make_unique<Impl>();
  impl->encoder = encoder;  // a module holder: shares the same modules
  return std::unique_ptr<EncoderModel>(new EncoderModel(std::move(impl)));
}

ModelSpec EncoderModel::spec() const { return impl_->encoder->CurrentSpec(); }

const ModelCalibration& EncoderModel::calibration() const { return impl_->calibration; }

Status EncoderModel::Embed(const ItemSet& set, const std::vector<int64_t>& items, bool corrupt,
                           Embeddings* out, int64_t batch_size) const {
  Encoder& encoder = impl_->encoder;
  const ModelSpec& spec = encoder->spec();
  if (set.input_shape != spec.input_shape) {
    return Status::InvalidArgument("the model expects inputs of shape " +
                                   ShapeText(spec.input_shape) + " but the data has " +
                                   ShapeText(set.input_shape));
  }
  if (batch_size < 1) return Status::InvalidArgument("embedding batch size must be >= 1");
  Embeddings e;
  e.kind = spec.kind;
  e.n = static_cast<int64_t>(items.size());
  e.dim = spec.kind == Kind::kCodes ? spec.code_dims : spec.dim;
  e.components = spec.kind == Kind::kMog ? spec.components : 1;
  e.code_k = spec.kind == Kind::kCodes ? spec.code_k : 0;

  const bool was_training = encoder->is_training();
  encoder->eval();
  try {
    torch::NoGradGuard no_grad;
    std::vector<int64_t> shape = set.input_shape;
    for (size_t first = 0; first < items.size(); first += batch_size) {
      const size_t last = std::min(items.size(), first + static_cast<size_t>(batch_size));
      const std::vector<int64_t> batch(items.begin() + first, items.begin() + last);
      std::vector<float> pixels = set.Render(batch, corrupt);
      std::vector<int64_t> sizes = {static_cast<int64_t>(batch.size())};
      sizes.insert(sizes.end(), shape.begin(), shape.end());
      const torch::Tensor x = torch::from_blob(pixels.data(), sizes, torch::kFloat32);
      const EncoderOutput y = encoder->forward(x);
      switch (e.kind) {
        case Kind::kPoint:
          AppendTensor(y.point, &e.vec);
          break;
        case Kind::kGaussian:
          AppendTensor(y.mean, &e.mean);
          AppendTensor(y.var, &e.var);
          break;
        case Kind::kMog:
          AppendTensor(y.mean, &e.mean);
          AppendTensor(y.var, &e.var);
          AppendTensor(y.weights, &e.weights);
          break;
        case Kind::kCodes: {
          AppendTensor(y.log_probs, &e.logp);
          const torch::Tensor codes = y.log_probs.argmax(-1).to(torch::kInt32).contiguous();
          const int32_t* p = codes.data_ptr<int32_t>();
          e.codes.insert(e.codes.end(), p, p + codes.numel());
          break;
        }
      }
    }
  } catch (const c10::Error& err) {
    encoder->train(was_training);
    return Status::InvalidArgument(std::string("embedding failed: ") +
                                   err.what_without_backtrace());
  }
  encoder->train(was_training);
  if (GetMethodInfo(spec.method).sigma_eps2) {
    // An SPE instance lies around its class prototype with the extra spread
    // sigma_eps^2 (SPE eq. 3): the distribution that is stored, searched
    // (MLS) and evaluated is N(mu, s^2 + sigma_eps^2), so that a collection's
    // `mls` search ranks exactly as the evaluation did. One rule, here.
    const float offset = static_cast<float>(spec.sigma_eps2);
    for (float& v : e.var) v += offset;
  }
  *out = std::move(e);
  return Status::OK();
}

int SetEncoderThreads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(threads);
  // torch::set_num_threads sets the OpenMP team (its own loops, oneDNN) but
  // not OpenBLAS's pthread pool, which reads OPENBLAS_NUM_THREADS or
  // OMP_NUM_THREADS once when it loads. Two processes given the same
  // `threads` then embed with the same thread counts whatever their
  // environment says (a Python process and the `hedgedb` it starts agree to
  // the bit). Weak: a LibTorch built on another BLAS has no such symbol.
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(threads);
  return torch::get_num_threads();
}

EmbeddingView Embeddings::View() const {
  EmbeddingView v;
  v.n = n;
  v.vec = vec.empty() ? nullptr : vec.data();
  v.mean = mean.empty() ? nullptr : mean.data();
  v.var = var.empty() ? nullptr : var.data();
  v.weights = weights.empty() ? nullptr : weights.data();
  v.codes = codes.empty() ? nullptr : codes.data();
  v.logp = logp.empty() ? nullptr : logp.data();
  return v;
}

Status WriteEmbeddings(const std::string& prefix, const Embeddings& e,
                       const std::vector<int64_t>& ids, const std::vector<int64_t>& labels,
                       std::vector<std::string>* written) {
  if (static_cast<int64_t>(ids.size()) != e.n || static_cast<int64_t>(labels.size()) != e.n) {
    return Status::InvalidArgument("ids/labels count does not match the embeddings");
  }
  std::vector<std::pair<std::string, NpyArray>> files;
  const int64_t n = e.n;
  switch (e.kind) {
    case Kind::kPoint:
      files.emplace_back(".vec.npy", MakeNpy(e.vec, {n, e.dim}));
      break;
    case Kind::kGaussian:
      files.emplace_back(".mean.npy", MakeNpy(e.mean, {n, e.dim}));
      files.emplace_back(".var.npy", MakeNpy(e.var, {n, e.dim}));
      break;
    case Kind::kMog:
      files.emplace_back(".mean.npy", MakeNpy(e.mean, {n, e.components, e.dim}));
      files.emplace_back(".var.npy", MakeNpy(e.var, {n, e.components, e.dim}));
      files.emplace_back(".weights.npy", MakeNpy(e.weights, {n, e.components}));
      break;
    case Kind::kCodes:
      files.emplace_back(".codes.npy", MakeNpy(e.codes, {n, e.dim}));
      files.emplace_back(".logp.npy", MakeNpy(e.logp, {n, e.dim, e.code_k}));
      break;
  }
  files.emplace_back(".ids.npy", MakeNpy(ids, {n}));
  files.emplace_back(".labels.npy", MakeNpy(labels, {n}));
  if (written != nullptr) written->clear();
  for (const auto& [suffix, array] : files) {
    const std::string path = prefix + suffix;
    HEDGEDB_RETURN_IF_ERROR(WriteNpy(path, array));
    if (written != nullptr) written->push_back(path);
  }
  return Status::OK();
}

}  // namespace encoders
}  // namespace hedgedb
