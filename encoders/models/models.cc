#include "encoders/models/models.h"

#include <ATen/autocast_mode.h>
#include <torch/script.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>
#include <utility>

namespace hedgedb::encoders {
namespace {

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

std::string ShapeString(c10::IntArrayRef shape) {
  std::ostringstream out;
  out << shape;
  return out.str();
}

// Dots are not allowed in nn::Module parameter names.
std::string SanitizeName(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '.') {
      out += "__";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

double InverseSoftplus(double y) {
  // softplus(x) = log(1 + e^x); inverse log(e^y - 1) = y + log(1 - e^-y).
  return y + std::log(-std::expm1(-y));
}

// ---------------------------------------------------------------------------
// Backbones
// ---------------------------------------------------------------------------

CnnBackboneImpl::CnnBackboneImpl(const std::vector<int64_t>& input_shape,
                                 const CnnOptions& options) {
  TORCH_CHECK(input_shape.size() == 3, "CNN backbone needs a {C, H, W} input shape");
  const int64_t channels = input_shape[0];
  // Padding 2 keeps 5x5 convolutions size-preserving, so only the two 2x2
  // pools (floor division) change the spatial size.
  conv1_ = register_module(
      "conv1",
      torch::nn::Conv2d(
          torch::nn::Conv2dOptions(channels, options.conv1_channels, 5).stride(1).padding(2)));
  conv2_ = register_module(
      "conv2",
      torch::nn::Conv2d(torch::nn::Conv2dOptions(options.conv1_channels, options.conv2_channels, 5)
                            .stride(1)
                            .padding(2)));
  const int64_t height = input_shape[1] / 2 / 2;
  const int64_t width = input_shape[2] / 2 / 2;
  TORCH_CHECK(height > 0 && width > 0, "CNN backbone: input ", input_shape[1], "x", input_shape[2],
              " is too small for two 2x2 pools");
  flat_dim_ = options.conv2_channels * height * width;
  if (options.hidden > 0) {
    fc_ = register_module("fc", torch::nn::Linear(flat_dim_, options.hidden));
    feature_dim_ = options.hidden;
  } else {
    feature_dim_ = flat_dim_;
  }
}

torch::Tensor CnnBackboneImpl::forward(torch::Tensor x) {
  x = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);
  x = torch::max_pool2d(torch::relu(conv2_->forward(x)), 2);
  x = x.flatten(1);
  if (!fc_.is_empty()) x = torch::relu(fc_->forward(x));
  return x;
}

MlpBackboneImpl::MlpBackboneImpl(int64_t input_dim, int64_t hidden) : hidden_(hidden) {
  fc_ = register_module("fc", torch::nn::Linear(input_dim, hidden));
}

torch::Tensor MlpBackboneImpl::forward(torch::Tensor x) {
  return torch::relu(fc_->forward(x.flatten(1)));
}

TorchScriptBackboneImpl::TorchScriptBackboneImpl(std::shared_ptr<torch::jit::Module> module,
                                                 int64_t feature_dim)
    : module_(std::move(module)), feature_dim_(feature_dim) {
  // Register the script module's tensors (shared storage, not copies) so that
  // parameters(), optimizers, to() and the model file see them.
  for (const auto& p : module_->named_parameters(/*recurse=*/true)) {
    register_parameter(SanitizeName(p.name), p.value, p.value.requires_grad());
  }
  for (const auto& b : module_->named_buffers(/*recurse=*/true)) {
    register_buffer(SanitizeName(b.name), b.value);
  }
}

torch::Tensor TorchScriptBackboneImpl::forward(torch::Tensor x) {
  torch::Tensor out = module_->forward({x}).toTensor();
  return out.flatten(1);
}

void TorchScriptBackboneImpl::train(bool on) {
  torch::nn::Module::train(on);
  module_->train(on);
}

Status LoadTorchScriptBackbone(const std::string& path, const std::vector<int64_t>& input_shape,
                               TorchScriptBackbone* backbone) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return Status::NotFound("TorchScript backbone '" + path + "' does not exist");
  }
  auto module = std::make_shared<torch::jit::Module>();
  try {
    *module = torch::jit::load(path, torch::kCPU);
  } catch (const c10::Error& e) {
    return Status::Corruption(
        "TorchScript backbone '" + path +
        "' is not a loadable TorchScript file: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status::Corruption("TorchScript backbone '" + path +
                              "' is not a loadable TorchScript file: " + e.what());
  }
  // Probe with a zero batch of two to learn (and check) the feature size.
  int64_t feature_dim = 0;
  try {
    torch::NoGradGuard no_grad;
    std::vector<int64_t> shape = {2};
    shape.insert(shape.end(), input_shape.begin(), input_shape.end());
    module->eval();
    c10::IValue out = module->forward({torch::zeros(shape)});
    if (!out.isTensor()) {
      return Status::InvalidArgument("TorchScript backbone '" + path +
                                     "': forward must return one tensor");
    }
    torch::Tensor t = out.toTensor();
    if (t.dim() < 1 || t.size(0) != 2) {
      return Status::InvalidArgument("TorchScript backbone '" + path + "': output shape " +
                                     ShapeString(t.sizes()) + " has no batch dimension");
    }
    feature_dim = t.numel() / 2;
    module->train();
  } catch (const std::exception& e) {
    // Script errors arrive as c10::Error or torch::jit::JITException (a
    // std::runtime_error); both say what went wrong.
    std::string shape = "[2";
    for (int64_t d : input_shape) shape += ", " + std::to_string(d);
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    return Status::InvalidArgument(
        "TorchScript backbone '" + path + "' fails on an input of shape " + shape +
        "]: " + (c10_error ? c10_error->what_without_backtrace() : e.what()));
  }
  *backbone = TorchScriptBackbone(module, feature_dim);
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Heads
// ---------------------------------------------------------------------------

PointHeadImpl::PointHeadImpl(int64_t feature_dim, int64_t dim) {
  fc_ = register_module("fc", torch::nn::Linear(feature_dim, dim));
}

torch::Tensor PointHeadImpl::forward(torch::Tensor features) { return fc_->forward(features); }

GaussianHeadImpl::GaussianHeadImpl(int64_t feature_dim, int64_t dim, double min_variance)
    : dim_(dim), min_variance_(min_variance) {
  fc_ = register_module("fc", torch::nn::Linear(feature_dim, 2 * dim));
}

std::pair<torch::Tensor, torch::Tensor> GaussianHeadImpl::forward(torch::Tensor features) {
  torch::Tensor out = fc_->forward(features);
  torch::Tensor mean = out.narrow(-1, 0, dim_);
  torch::Tensor var = torch::softplus(out.narrow(-1, dim_, dim_)) + min_variance_;
  return {mean, var};
}

MogHeadImpl::MogHeadImpl(int64_t feature_dim, int64_t dim, int64_t components,
                         double min_variance) {
  for (int64_t c = 0; c < components; ++c) {
    branches_.push_back(register_module("branch" + std::to_string(c),
                                        GaussianHead(feature_dim, dim, min_variance)));
  }
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> MogHeadImpl::forward(
    torch::Tensor features) {
  std::vector<torch::Tensor> means, vars;
  for (auto& branch : branches_) {
    auto [mean, var] = branch->forward(features);
    means.push_back(mean);
    vars.push_back(var);
  }
  const auto components = static_cast<int64_t>(branches_.size());
  torch::Tensor weights =
      torch::full({features.size(0), components}, 1.0 / components, features.options());
  return {torch::stack(means, 1), torch::stack(vars, 1), weights};
}

DimcoHeadImpl::DimcoHeadImpl(int64_t feature_dim, int64_t code_dims, int64_t code_k, int64_t hidden)
    : code_dims_(code_dims), code_k_(code_k) {
  reduce_ = register_module("reduce", torch::nn::Linear(feature_dim, hidden));
  expand_ = register_module("expand", torch::nn::Linear(hidden, code_dims * code_k));
}

torch::Tensor DimcoHeadImpl::forward(torch::Tensor features) {
  // A product of two matrices, no non-linearity: DIMCO's parameter-saving
  // factorisation of one D -> d*k linear layer.
  return expand_->forward(reduce_->forward(features)).view({-1, code_dims_, code_k_});
}

// ---------------------------------------------------------------------------
// Encoder
// ---------------------------------------------------------------------------

EncoderImpl::EncoderImpl(const ModelSpec& spec) : spec_(spec) {
  Status valid = ValidateSpec(spec);
  TORCH_CHECK(valid.ok(), valid.ToString());

  switch (spec.backbone) {
    case BackboneType::kCnn: {
      CnnBackbone cnn(spec.input_shape, spec.cnn);
      feature_dim_ = cnn->feature_dim();
      backbone_ = torch::nn::AnyModule(cnn);
      break;
    }
    case BackboneType::kMlp: {
      MlpBackbone mlp(Product(spec.input_shape), spec.mlp_hidden);
      feature_dim_ = mlp->feature_dim();
      backbone_ = torch::nn::AnyModule(mlp);
      break;
    }
    case BackboneType::kTorchScript: {
      TorchScriptBackbone script{nullptr};
      Status s = LoadTorchScriptBackbone(spec.backbone_path, spec.input_shape, &script);
      TORCH_CHECK(s.ok(), s.ToString());
      feature_dim_ = script->feature_dim();
      backbone_ = torch::nn::AnyModule(script);
      break;
    }
  }
  TORCH_CHECK(spec.feature_dim == 0 || spec.feature_dim == feature_dim_, "model spec says ",
              "feature_dim ", spec.feature_dim, " but the backbone produces ", feature_dim_);
  spec_.feature_dim = feature_dim_;
  register_module("backbone", backbone_.ptr());

  switch (spec.kind) {
    case Kind::kPoint:
      point_head_ = register_module("head", PointHead(feature_dim_, spec.dim));
      break;
    case Kind::kGaussian:
      gaussian_head_ =
          register_module("head", GaussianHead(feature_dim_, spec.dim, spec.min_variance));
      break;
    case Kind::kMog:
      mog_head_ = register_module(
          "head", MogHead(feature_dim_, spec.dim, spec.components, spec.min_variance));
      break;
    case Kind::kCodes:
      dimco_head_ = register_module(
          "head", DimcoHead(feature_dim_, spec.code_dims, spec.code_k, spec.dimco_hidden));
      break;
  }

  if (!spec.input_mean.empty()) {
    // Broadcast shape {1, n, 1, ...}: one value per channel / feature.
    std::vector<int64_t> shape(spec.input_shape.size() + 1, 1);
    shape[1] = static_cast<int64_t>(spec.input_mean.size());
    input_mean_ =
        register_buffer("input_mean", torch::tensor(spec.input_mean, torch::kFloat).view(shape));
    input_std_ =
        register_buffer("input_std", torch::tensor(spec.input_std, torch::kFloat).view(shape));
  }

  match_a_raw_ = register_parameter("match_a_raw",
                                    torch::tensor(InverseSoftplus(spec.match_a), torch::kFloat));
  match_b_ = register_parameter("match_b", torch::tensor(spec.match_b, torch::kFloat));
  sigma_eps_raw_ = register_parameter(
      "sigma_eps_raw", torch::tensor(InverseSoftplus(spec.sigma_eps2), torch::kFloat));

  if (spec.backbone == BackboneType::kCnn) {
    // SPE appendix A.3 (the HIB MNIST network): Xavier-uniform weights and
    // zero biases for every convolution and fully connected layer.
    torch::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* conv = module->as<torch::nn::Conv2d>()) {
        torch::nn::init::xavier_uniform_(conv->weight);
        torch::nn::init::zeros_(conv->bias);
      } else if (auto* linear = module->as<torch::nn::Linear>()) {
        torch::nn::init::xavier_uniform_(linear->weight);
        torch::nn::init::zeros_(linear->bias);
      }
    }
  }
}

torch::Tensor EncoderImpl::features(torch::Tensor x) {
  const auto& shape = spec_.input_shape;
  TORCH_CHECK(x.dim() == static_cast<int64_t>(shape.size()) + 1, "encoder input must be [B, ",
              c10::IntArrayRef(shape), "], got ", ShapeString(x.sizes()));
  for (size_t i = 0; i < shape.size(); ++i) {
    TORCH_CHECK(x.size(static_cast<int64_t>(i) + 1) == shape[i], "encoder input must be [B, ",
                c10::IntArrayRef(shape), "], got ", ShapeString(x.sizes()));
  }
  x = x.to(match_b_.dtype());
  if (input_mean_.defined()) x = (x - input_mean_) / input_std_;
  return backbone_.forward(x);
}

namespace {

// CPU autocast to bfloat16 for its scope, as torch.autocast("cpu",
// torch.bfloat16) does: the previous state comes back at the end, and the
// cast weights cached inside the scope are dropped when the outermost scope
// ends.
class CpuBf16Autocast {
 public:
  CpuBf16Autocast()
      : was_enabled_(at::autocast::is_cpu_enabled()),
        was_dtype_(at::autocast::get_autocast_cpu_dtype()) {
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~CpuBf16Autocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_cpu_enabled(was_enabled_);
    at::autocast::set_autocast_cpu_dtype(was_dtype_);
  }
  CpuBf16Autocast(const CpuBf16Autocast&) = delete;
  CpuBf16Autocast& operator=(const CpuBf16Autocast&) = delete;

 private:
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

}  // namespace

EncoderOutput EncoderImpl::forward(torch::Tensor x, bool bf16_backbone) {
  torch::Tensor f;
  {
    std::optional<CpuBf16Autocast> autocast;
    if (bf16_backbone) autocast.emplace();
    f = features(std::move(x));
  }
  // The heads (and every loss after them) in the model's own precision: D
  // is small and the variances span decades that bfloat16's 8-bit mantissa
  // would round. (A no-op for a float32 backbone; a TorchScript backbone
  // that returns another type is cast to the heads' here too.)
  f = f.to(match_b_.dtype());
  EncoderOutput out;
  out.kind = spec_.kind;
  switch (spec_.kind) {
    case Kind::kPoint:
      out.point = point_head_->forward(f);
      break;
    case Kind::kGaussian:
      std::tie(out.mean, out.var) = gaussian_head_->forward(f);
      break;
    case Kind::kMog:
      std::tie(out.mean, out.var, out.weights) = mog_head_->forward(f);
      break;
    case Kind::kCodes:
      out.logits = dimco_head_->forward(f);
      out.log_probs = torch::log_softmax(out.logits, -1);
      break;
  }
  return out;
}

torch::Tensor EncoderImpl::match_a() const { return torch::softplus(match_a_raw_); }
torch::Tensor EncoderImpl::match_b() const { return match_b_; }

void EncoderImpl::SetMatchParameters(double a, double b) {
  torch::NoGradGuard no_grad;
  match_a_raw_.fill_(InverseSoftplus(a));
  match_b_.fill_(b);
}
torch::Tensor EncoderImpl::sigma_eps2() const { return torch::softplus(sigma_eps_raw_); }

ModelSpec EncoderImpl::CurrentSpec() const {
  ModelSpec spec = spec_;
  spec.match_a = match_a().item<double>();
  spec.match_b = match_b().item<double>();
  spec.sigma_eps2 = sigma_eps2().item<double>();
  spec.feature_dim = feature_dim_;
  return spec;
}

torch::Tensor CodesOf(const EncoderOutput& out) {
  TORCH_CHECK(out.kind == Kind::kCodes && out.log_probs.defined(), "CodesOf needs a codes output");
  return out.log_probs.argmax(-1).to(torch::kInt);
}

Status MakeEncoder(const ModelSpec& spec, Encoder* encoder) {
  HEDGEDB_RETURN_IF_ERROR(ValidateSpec(spec));
  if (spec.backbone == BackboneType::kTorchScript) {
    // Load once here to report a missing/corrupt file with its own code.
    TorchScriptBackbone probe{nullptr};
    HEDGEDB_RETURN_IF_ERROR(LoadTorchScriptBackbone(spec.backbone_path, spec.input_shape, &probe));
    if (spec.feature_dim != 0 && spec.feature_dim != probe->feature_dim()) {
      return Status::InvalidArgument(
          "model spec says feature_dim " + std::to_string(spec.feature_dim) + " but '" +
          spec.backbone_path + "' produces " + std::to_string(probe->feature_dim()));
    }
  }
  try {
    *encoder = Encoder(spec);
  } catch (const c10::Error& e) {
    return Status::InvalidArgument(std::string("cannot build encoder: ") +
                                   e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("cannot build encoder: ") + e.what());
  }
  return Status::OK();
}

}  // namespace hedgedb::encoders
