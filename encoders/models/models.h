// Encoder networks: a backbone that maps an input to a feature vector, and a
// head that maps the feature vector to an embedding of one of the hedgedb
// kinds (point, gaussian, mog, codes; docs/concepts.md).
//
// Modules follow the pytorch/examples C++ style: XxxImpl + TORCH_MODULE(Xxx).
// Everything needed to rebuild an encoder lives in ModelSpec (model_file.h),
// so that a model file can recreate the exact architecture before loading
// its weights. Build encoders with MakeEncoder(), which validates the spec and
// reports problems as a Status instead of throwing.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "encoders/models/model_file.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace hedgedb::encoders {

// ---------------------------------------------------------------------------
// Backbones: input batch -> [B, feature_dim] features.
// ---------------------------------------------------------------------------

// The shallow CNN of HIB section 4.1 / SPE appendix A.3 for 1 x 28 x (N*28)
// composites: two blocks of conv 5x5 (zero padding 2, stride 1) + ReLU +
// 2x2 max-pool, flattened, then (if hidden > 0) one fully connected layer with
// ReLU. The head's linear layer is the network's final FC layer. hidden = 0
// gives HIB's literal "2 conv + pool, then a fully connected layer mapping to
// D" (the FC being the head); hidden > 0 gives SPE's description of the HIB
// code (FC hidden + ReLU, then FC to the outputs).
class CnnBackboneImpl : public torch::nn::Module {
 public:
  CnnBackboneImpl(const std::vector<int64_t>& input_shape, const CnnOptions& options);
  // x: [B, C, H, W] -> [B, feature_dim()].
  torch::Tensor forward(torch::Tensor x);
  int64_t feature_dim() const { return feature_dim_; }

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc_{nullptr};
  int64_t flat_dim_ = 0;
  int64_t feature_dim_ = 0;
};
TORCH_MODULE(CnnBackbone);

// The F-statistic paper's CUB protocol: precomputed features (2048-d Inception
// pool features there) -> fully connected `hidden` ReLU units. The head maps
// the hidden units to the embedding.
class MlpBackboneImpl : public torch::nn::Module {
 public:
  MlpBackboneImpl(int64_t input_dim, int64_t hidden);
  // x: [B, input_dim] (any trailing shape is flattened) -> [B, hidden].
  torch::Tensor forward(torch::Tensor x);
  int64_t feature_dim() const { return hidden_; }

 private:
  torch::nn::Linear fc_{nullptr};
  int64_t hidden_ = 0;
};
TORCH_MODULE(MlpBackbone);

// A user network saved with torch.jit.save. Its forward(x) must return one
// tensor; the output is flattened to [B, feature_dim]. The script module's
// parameters are registered on this module (dots in names become "__"), so an
// optimizer over Encoder::parameters() fine-tunes them and the model file
// stores their trained values.
class TorchScriptBackboneImpl : public torch::nn::Module {
 public:
  // Takes ownership of an already loaded script module (see
  // LoadTorchScriptBackbone, which reports load errors as a Status).
  TorchScriptBackboneImpl(std::shared_ptr<torch::jit::Module> module, int64_t feature_dim);
  torch::Tensor forward(torch::Tensor x);
  int64_t feature_dim() const { return feature_dim_; }
  void train(bool on = true) override;

 private:
  std::shared_ptr<torch::jit::Module> module_;
  int64_t feature_dim_ = 0;
};
TORCH_MODULE(TorchScriptBackbone);

// Loads `path` with torch::jit::load and probes it with a zero batch of shape
// [2, input_shape...] to learn its feature dimension. Missing file -> NotFound;
// unreadable/corrupt file or a forward that fails -> InvalidArgument/Corruption
// with torch's message attached.
Status LoadTorchScriptBackbone(const std::string& path, const std::vector<int64_t>& input_shape,
                               TorchScriptBackbone* backbone);

// ---------------------------------------------------------------------------
// Heads: [B, F] features -> embedding tensors.
// ---------------------------------------------------------------------------

// What an encoder produces for a batch of B inputs. Which tensors are defined
// depends on the kind:
//   point:    point [B, D]
//   gaussian: mean [B, D], var [B, D] (> 0)
//   mog:      mean [B, C, D], var [B, C, D], weights [B, C] (HIB: uniform 1/C)
//   codes:    logits [B, d, k], log_probs [B, d, k] (log_softmax over k)
struct EncoderOutput {
  Kind kind = Kind::kPoint;
  torch::Tensor point;
  torch::Tensor mean;
  torch::Tensor var;
  torch::Tensor weights;
  torch::Tensor logits;
  torch::Tensor log_probs;
};

// z = W f + c.
class PointHeadImpl : public torch::nn::Module {
 public:
  PointHeadImpl(int64_t feature_dim, int64_t dim);
  torch::Tensor forward(torch::Tensor features);  // [B, D]

 private:
  torch::nn::Linear fc_{nullptr};
};
TORCH_MODULE(PointHead);

// HIB's single Gaussian: one linear layer with 2D outputs on the shared body,
// mean = first D, variance = softplus(last D) + min_variance. HIB does not
// say how Sigma is made positive; softplus is what SPE appendix B uses, and
// the small floor keeps log(var) finite when softplus underflows in float.
// Also the SPE head.
class GaussianHeadImpl : public torch::nn::Module {
 public:
  GaussianHeadImpl(int64_t feature_dim, int64_t dim, double min_variance);
  // Returns {mean [B, D], var [B, D]}.
  std::pair<torch::Tensor, torch::Tensor> forward(torch::Tensor features);

 private:
  torch::nn::Linear fc_{nullptr};
  int64_t dim_ = 0;
  double min_variance_ = 0;
};
TORCH_MODULE(GaussianHead);

// HIB's mixture: C branches (one linear layer each, 2D outputs) on the shared
// body; mixture weights are uniform 1/C (HIB writes the mixture without
// learned weights).
class MogHeadImpl : public torch::nn::Module {
 public:
  MogHeadImpl(int64_t feature_dim, int64_t dim, int64_t components, double min_variance);
  // Returns {mean [B, C, D], var [B, C, D], weights [B, C]}.
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> forward(torch::Tensor features);

 private:
  std::vector<GaussianHead> branches_;
};
TORCH_MODULE(MogHead);

// DIMCO supplementary: the code layer is factorised as two linear maps
// F -> hidden (128) -> d*k, with no non-linearity between them; logits are
// reshaped to [B, d, k] and normalised with a softmax per row (eq. 1-2).
class DimcoHeadImpl : public torch::nn::Module {
 public:
  DimcoHeadImpl(int64_t feature_dim, int64_t code_dims, int64_t code_k, int64_t hidden);
  // Returns logits [B, d, k].
  torch::Tensor forward(torch::Tensor features);

 private:
  torch::nn::Linear reduce_{nullptr}, expand_{nullptr};
  int64_t code_dims_ = 0;
  int64_t code_k_ = 0;
};
TORCH_MODULE(DimcoHead);

// ---------------------------------------------------------------------------
// Encoder = input normalisation + backbone + head + the learned scalars that
// the scores need (soft-contrastive a and b, SPE sigma_eps^2).
// ---------------------------------------------------------------------------
class EncoderImpl : public torch::nn::Module {
 public:
  // Prefer MakeEncoder(), which validates `spec` and never throws. This
  // constructor throws c10::Error on an invalid spec.
  explicit EncoderImpl(const ModelSpec& spec);

  // x: [B, input_shape...] raw inputs (e.g. pixels in [0, 1]); normalised
  // here with the spec's mean/std so callers never have to repeat it.
  // bf16_backbone: the backbone runs in bfloat16 under CPU autocast (its
  // weights stay float32; autocast casts them per call and the gradients
  // come back in float32), its features return as float32, and the heads
  // run in float32. For training steps (TrainOptions::bf16); what a model
  // embeds and validates is always float32.
  EncoderOutput forward(torch::Tensor x, bool bf16_backbone = false);
  // Backbone features only (after normalisation): [B, feature_dim].
  torch::Tensor features(torch::Tensor x);

  // Soft-contrastive match parameters (HIB eq. 2): a = softplus(a_raw) > 0,
  // b free. Softplus rather than exp: gradients stay bounded for large a.
  torch::Tensor match_a() const;
  torch::Tensor match_b() const;
  // Sets a (> 0) and b, for the methods whose loss does not learn them (SPE
  // fits them after training).
  void SetMatchParameters(double a, double b);
  // SPE class spread: sigma_eps^2 = softplus(sigma_eps_raw) > 0.
  torch::Tensor sigma_eps2() const;

  const ModelSpec& spec() const { return spec_; }
  // The spec with a, b, sigma_eps and feature_dim set from the current
  // parameters: what SaveModel writes into the header.
  ModelSpec CurrentSpec() const;

 private:
  ModelSpec spec_;
  int64_t feature_dim_ = 0;
  torch::nn::AnyModule backbone_;
  PointHead point_head_{nullptr};
  GaussianHead gaussian_head_{nullptr};
  MogHead mog_head_{nullptr};
  DimcoHead dimco_head_{nullptr};
  torch::Tensor input_mean_, input_std_;  // buffers, broadcastable to x
  torch::Tensor match_a_raw_, match_b_, sigma_eps_raw_;
};
TORCH_MODULE(Encoder);

// Builds an encoder for `spec` (TorchScript backbones are loaded from
// spec.backbone_path). The weights are freshly initialised; LoadModel() then
// overwrites them. Errors: InvalidArgument for an inconsistent spec, NotFound /
// Corruption for a TorchScript file that cannot be loaded.
Status MakeEncoder(const ModelSpec& spec, Encoder* encoder);

// DIMCO eq. 3: an item's code is the most probable symbol of every row,
// [B, d] int32 (what a codes collection stores; queries keep log_probs).
torch::Tensor CodesOf(const EncoderOutput& out);

// Inverse of softplus(x) = log(1 + e^x), for initialising the positive
// learned scalars from a spec.
double InverseSoftplus(double y);

}  // namespace hedgedb::encoders
