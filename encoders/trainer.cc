#include "encoders/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "encoders/batch_samplers.h"
#include "encoders/embedder.h"
#include "encoders/evaluation.h"
#include "encoders/losses.h"
#include "encoders/models.h"

namespace hedgedb {
namespace encoders {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

std::string Duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = std::llround(seconds);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(s));
  }
  return buf;
}

enum class BatchFamily { kPairs, kEpisodes, kClassBalanced };

// The batches each method trains on (names: model_file.h's table).
struct MethodDefaults {
  Method method;
  BatchFamily family;
};

constexpr MethodDefaults kMethodTable[] = {
    {Method::kSoftContrastive, BatchFamily::kPairs},
    {Method::kHib, BatchFamily::kPairs},
    {Method::kSpe, BatchFamily::kEpisodes},
    {Method::kProtoNet, BatchFamily::kEpisodes},
    {Method::kDimco, BatchFamily::kClassBalanced},
    {Method::kFStatistic, BatchFamily::kClassBalanced},
};

const MethodDefaults* FindMethod(Method method) {
  for (const auto& m : kMethodTable) {
    if (method == m.method) return &m;
  }
  return nullptr;
}

// One training batch: the data set items to render plus what the loss needs.
struct TrainBatch {
  std::vector<int64_t> items;
  // Pairs (point, hib): positions into items.
  std::vector<int64_t> first, second;
  std::vector<uint8_t> match;
  // Episodes and class-balanced batches: class slot per item; the first
  // num_support items are the episode's support set.
  std::vector<int64_t> slots;
  int64_t num_support = 0;
};

// Draws batches with the method's sampler (batch_samplers.h).
class BatchSource {
 public:
  static Status Create(const TrainOptions& options, BatchFamily family,
                       const std::vector<int64_t>& labels, std::unique_ptr<BatchSource>* source) {
    auto s = std::unique_ptr<BatchSource>(new BatchSource());
    s->family_ = family;
    const uint64_t seed = SeededRng::DeriveSeed(options.seed, 0x5a4d);
    switch (family) {
      case BatchFamily::kPairs: {
        HibSamplerOptions o;
        o.batch_size = options.batch_size;
        o.seed = seed;
        HEDGEDB_RETURN_IF_ERROR(HibTwoStreamSampler::Create(labels, o, &s->pairs_));
        s->items_per_batch_ = options.batch_size;
        break;
      }
      case BatchFamily::kEpisodes: {
        EpisodeOptions o;
        o.n_way = options.n_way;
        o.n_support = options.n_support;
        o.n_query = options.n_query;
        o.seed = seed;
        HEDGEDB_RETURN_IF_ERROR(EpisodeSampler::Create(labels, o, &s->episodes_));
        if (options.n_query < 1) {
          return Status::InvalidArgument("--n-query must be >= 1 for training");
        }
        s->items_per_batch_ =
            static_cast<int64_t>(s->episodes_->n_way()) * (options.n_support + options.n_query);
        break;
      }
      case BatchFamily::kClassBalanced: {
        ClassBalancedOptions o = options.method == Method::kDimco ? DimcoBatchOptions(seed)
                                                                  : FStatisticBatchOptions(seed);
        if (options.batch_size > 0) {
          o.classes_per_batch = std::max(2, options.batch_size / o.items_per_class);
        }
        // Small data sets: as many classes as there are (the loss needs >= 2).
        const LabelIndex index(labels);
        int64_t eligible = 0;
        for (int64_t c = 0; c < index.num_classes(); ++c) {
          eligible += static_cast<int64_t>(index.items(c).size()) >= o.min_items_per_class;
        }
        if (eligible >= 2 && eligible < o.classes_per_batch) {
          o.classes_per_batch = static_cast<int>(eligible);
        }
        HEDGEDB_RETURN_IF_ERROR(ClassBalancedSampler::Create(labels, o, &s->classes_));
        s->items_per_batch_ = static_cast<int64_t>(o.classes_per_batch) * o.items_per_class;
        break;
      }
    }
    *source = std::move(s);
    return Status::OK();
  }

  int64_t items_per_batch() const { return items_per_batch_; }

  TrainBatch Next() {
    TrainBatch b;
    switch (family_) {
      case BatchFamily::kPairs: {
        PairBatch p = pairs_->Next();
        b.items = std::move(p.indices);
        for (const BatchPair& pair : p.pairs) {
          b.first.push_back(pair.first);
          b.second.push_back(pair.second);
          b.match.push_back(pair.match ? 1 : 0);
        }
        break;
      }
      case BatchFamily::kEpisodes: {
        Episode e = episodes_->Next();
        b.items = e.support;
        b.items.insert(b.items.end(), e.query.begin(), e.query.end());
        for (int32_t s : e.support_slot) b.slots.push_back(s);
        for (int32_t s : e.query_slot) b.slots.push_back(s);
        b.num_support = static_cast<int64_t>(e.support.size());
        break;
      }
      case BatchFamily::kClassBalanced: {
        ClassBatch c = classes_->Next();
        b.items = std::move(c.indices);
        for (int32_t s : c.slot) b.slots.push_back(s);
        break;
      }
    }
    return b;
  }

 private:
  BatchSource() = default;
  BatchFamily family_ = BatchFamily::kPairs;
  std::unique_ptr<HibTwoStreamSampler> pairs_;
  std::unique_ptr<EpisodeSampler> episodes_;
  std::unique_ptr<ClassBalancedSampler> classes_;
  int64_t items_per_batch_ = 0;
};

torch::Tensor Int64Tensor(const std::vector<int64_t>& v) { return torch::tensor(v, torch::kInt64); }

EncoderOutput SelectRows(const EncoderOutput& out, const torch::Tensor& rows) {
  EncoderOutput s;
  s.kind = out.kind;
  auto pick = [&](const torch::Tensor& t) {
    return t.defined() ? t.index_select(0, rows) : torch::Tensor();
  };
  s.point = pick(out.point);
  s.mean = pick(out.mean);
  s.var = pick(out.var);
  s.weights = pick(out.weights);
  s.logits = pick(out.logits);
  s.log_probs = pick(out.log_probs);
  return s;
}

LossOutput ComputeLoss(const TrainOptions& options, Method method, Encoder& encoder,
                       const EncoderOutput& out, const TrainBatch& batch) {
  switch (method) {
    case Method::kSoftContrastive:
    case Method::kHib: {
      const torch::Tensor first = Int64Tensor(batch.first), second = Int64Tensor(batch.second);
      const torch::Tensor match =
          torch::tensor(std::vector<int64_t>(batch.match.begin(), batch.match.end()))
              .to(torch::kBool);
      if (method == Method::kSoftContrastive) {
        return SoftContrastiveLoss(out.point.index_select(0, first),
                                   out.point.index_select(0, second), match, encoder->match_a(),
                                   encoder->match_b());
      }
      HibOptions hib;
      hib.samples = options.samples;
      hib.beta = options.beta;
      hib.likelihood = options.hib_likelihood == "mc" ? HibLikelihood::kLogMonteCarloProbability
                                                      : HibLikelihood::kExpectedLogLikelihood;
      return HibLoss(SelectRows(out, first), SelectRows(out, second), match, encoder->match_a(),
                     encoder->match_b(), hib);
    }
    case Method::kSpe:
    case Method::kProtoNet: {
      const int64_t ns = batch.num_support;
      const int64_t n = static_cast<int64_t>(batch.items.size());
      const torch::Tensor slots = Int64Tensor(batch.slots);
      const torch::Tensor s_labels = slots.slice(0, 0, ns), q_labels = slots.slice(0, ns, n);
      if (method == Method::kProtoNet) {
        return ProtoNetLoss(out.point.slice(0, 0, ns), s_labels, out.point.slice(0, ns, n),
                            q_labels);
      }
      SpeOptions spe;
      return SpeLoss(out.mean.slice(0, 0, ns), out.var.slice(0, 0, ns), s_labels,
                     out.mean.slice(0, ns, n), out.var.slice(0, ns, n), q_labels,
                     encoder->sigma_eps2(), spe);
    }
    case Method::kDimco:
      return DimcoLoss(out.log_probs, Int64Tensor(batch.slots), DimcoOptions());
    case Method::kFStatistic: {
      FStatisticOptions f;
      f.top_dims = options.fstat_top_dims;
      return FStatisticLoss(out.point, Int64Tensor(batch.slots), f);
    }
  }
  TORCH_CHECK(false, "unknown method");
}

ModelSpec MakeSpec(const TrainOptions& options, const EncoderData& data) {
  const MethodDefaults* m = FindMethod(options.method);
  ModelSpec spec;
  spec.method = m->method;
  switch (m->method) {
    case Method::kSoftContrastive:
    case Method::kProtoNet:
    case Method::kFStatistic:
      spec.kind = Kind::kPoint;
      break;
    case Method::kHib:
      spec.kind = options.components > 1 ? Kind::kMog : Kind::kGaussian;
      break;
    case Method::kSpe:
      spec.kind = Kind::kGaussian;
      break;
    case Method::kDimco:
      spec.kind = Kind::kCodes;
      break;
  }
  spec.dim = options.dim;
  spec.components = spec.kind == Kind::kMog ? options.components : 1;
  if (spec.kind == Kind::kCodes) {
    spec.code_dims = options.code_dims;
    spec.code_k = options.code_k;
  }
  spec.input_shape = data.train.input_shape;
  spec.input_mean = data.input_mean;
  spec.input_std = data.input_std;
  if (!options.backbone.empty()) {
    // Absolute, so that the model file finds the script from anywhere.
    spec.backbone = BackboneType::kTorchScript;
    spec.backbone_path = std::filesystem::absolute(options.backbone).lexically_normal().string();
  } else if (spec.input_shape.size() == 3) {
    spec.backbone = BackboneType::kCnn;
    if (options.cnn_conv1 >= 0) spec.cnn.conv1_channels = options.cnn_conv1;
    if (options.cnn_conv2 >= 0) spec.cnn.conv2_channels = options.cnn_conv2;
    if (options.cnn_hidden >= 0) spec.cnn.hidden = options.cnn_hidden;
  } else {
    spec.backbone = BackboneType::kMlp;
    spec.mlp_hidden = options.mlp_hidden;
  }
  return spec;
}

// Checkpoint: a model file at `path` plus `path`.state with the optimizer and
// the loop counters.
struct LoopState {
  int64_t iteration = 0;
  double best_validation = -1;
  int64_t best_iteration = 0;
  int64_t evals_without_improvement = 0;
};

Status SaveCheckpoint(const std::string& path, const Encoder& encoder,
                      torch::optim::Adam& optimizer, const LoopState& state) {
  const std::string state_path = path + ".state";
  try {
    torch::serialize::OutputArchive archive;
    torch::serialize::OutputArchive optimizer_archive;
    optimizer.save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
    archive.write("iteration", torch::tensor(state.iteration, torch::kInt64));
    archive.write("best_validation", torch::tensor(state.best_validation, torch::kFloat64));
    archive.write("best_iteration", torch::tensor(state.best_iteration, torch::kInt64));
    archive.write("evals_without_improvement",
                  torch::tensor(state.evals_without_improvement, torch::kInt64));
    archive.save_to(state_path + ".tmp");
  } catch (const c10::Error& e) {
    return Status::IOError("cannot write checkpoint state '" + state_path +
                           "': " + e.what_without_backtrace());
  }
  HEDGEDB_RETURN_IF_ERROR(SaveModel(path, encoder));
  std::error_code ec;
  std::filesystem::rename(state_path + ".tmp", state_path, ec);
  if (ec) return Status::IOError("cannot rename checkpoint state to '" + state_path + "'");
  return Status::OK();
}

Status LoadCheckpointState(const std::string& path, torch::optim::Adam* optimizer,
                           LoopState* state) {
  const std::string state_path = path + ".state";
  if (!std::filesystem::exists(state_path)) {
    return Status::NotFound("checkpoint state '" + state_path +
                            "' is missing (a checkpoint is the model file plus its .state)");
  }
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(state_path);
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    optimizer->load(optimizer_archive);
    // A fresh tensor per read: reading into a defined tensor of another
    // dtype would reinterpret its storage.
    auto read = [&](const char* key) {
      torch::Tensor t;
      archive.read(key, t);
      return t;
    };
    state->iteration = read("iteration").item<int64_t>();
    state->best_validation = read("best_validation").item<double>();
    state->best_iteration = read("best_iteration").item<int64_t>();
    state->evals_without_improvement = read("evals_without_improvement").item<int64_t>();
  } catch (const c10::Error& e) {
    return Status::Corruption("cannot read checkpoint state '" + state_path +
                              "': " + e.what_without_backtrace());
  }
  if (state->iteration < 0) return Status::Corruption("checkpoint state has a negative iteration");
  return Status::OK();
}

// Copies through a temporary file and a rename, like the model files.
Status CopyFile(const std::string& from, const std::string& to) {
  std::error_code ec;
  std::filesystem::copy_file(from, to + ".tmp", std::filesystem::copy_options::overwrite_existing,
                             ec);
  if (!ec) std::filesystem::rename(to + ".tmp", to, ec);
  if (ec) return Status::IOError("cannot copy '" + from + "' to '" + to + "': " + ec.message());
  return Status::OK();
}

// MAP@R of the validation items (their stored training-style occlusions)
// with the evaluation's similarity.
Status Validate(const Encoder& encoder, const ItemSet& validation,
                const std::vector<int64_t>& items, uint64_t seed, double* map_at_r) {
  std::unique_ptr<EncoderModel> model = EncoderModel::Borrow(encoder);
  Embeddings e;
  HEDGEDB_RETURN_IF_ERROR(model->Embed(validation, items, /*corrupt=*/true, &e));
  std::vector<int64_t> labels;
  for (int64_t i : items) labels.push_back(validation.labels[i]);
  Similarity similarity;
  similarity.spec = model->spec();
  similarity.samples = similarity.spec.kind == Kind::kMog
                           ? static_cast<int>(similarity.spec.components) *
                                 std::max<int>(1, 8 / static_cast<int>(similarity.spec.components))
                           : 8;
  similarity.seed = seed;
  RetrievalMetrics metrics;
  HEDGEDB_RETURN_IF_ERROR(
      EvaluateRetrievalOn(similarity, e, e, labels, &metrics, /*reachable_only=*/true));
  *map_at_r = metrics.map_at_r;
  return Status::OK();
}

Status TrainImpl(const TrainOptions& options, const EncoderData& data, TrainResult* result) {
  const MethodDefaults* method = FindMethod(options.method);
  auto log = options.log ? options.log : [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
  };
  torch::set_num_threads(options.threads);
  if (data.train.size() == 0) return Status::InvalidArgument("the training split is empty");

  ModelSpec spec = MakeSpec(options, data);
  HEDGEDB_RETURN_IF_ERROR(ValidateSpec(spec));
  Encoder encoder{nullptr};
  LoopState state;
  if (!options.resume.empty()) {
    ModelSpec loaded;
    HEDGEDB_RETURN_IF_ERROR(LoadModelExpecting(options.resume, spec, &loaded, &encoder));
  } else {
    torch::manual_seed(SeededRng::DeriveSeed(options.seed, 0x1417));
    HEDGEDB_RETURN_IF_ERROR(MakeEncoder(spec, &encoder));
  }
  encoder->train();
  torch::optim::Adam optimizer(encoder->parameters(), torch::optim::AdamOptions(options.lr));
  if (!options.resume.empty()) {
    HEDGEDB_RETURN_IF_ERROR(LoadCheckpointState(options.resume, &optimizer, &state));
    if (std::filesystem::exists(options.resume + ".best")) {
      HEDGEDB_RETURN_IF_ERROR(CopyFile(options.resume + ".best", options.out));
    }
  }

  std::unique_ptr<BatchSource> source;
  HEDGEDB_RETURN_IF_ERROR(BatchSource::Create(options, method->family, data.train.labels, &source));
  int64_t total = options.iterations;
  if (total <= 0 && options.epochs > 0) {
    total = static_cast<int64_t>(
        std::ceil(options.epochs * data.train.size() / source->items_per_batch()));
  }
  if (total <= 0) total = 10000;
  if (state.iteration > total) {
    return Status::InvalidArgument("the checkpoint is at iteration " +
                                   std::to_string(state.iteration) + ", past --iterations " +
                                   std::to_string(total));
  }
  // Replay the sampler so that a resumed run sees the batches the
  // uninterrupted run would have seen.
  for (int64_t t = 0; t < state.iteration; ++t) source->Next();

  const bool validating = data.validation.size() > 0;
  const std::vector<int64_t> val_items =
      validating ? SubsetItems(data.validation, options.val_items, options.seed)
                 : std::vector<int64_t>();
  const int64_t eval_every =
      options.eval_every > 0 ? options.eval_every : std::max<int64_t>(100, total / 20);
  const std::string checkpoint_path =
      options.checkpoint_path.empty() ? options.out + ".ckpt" : options.checkpoint_path;
  const int64_t window = std::max<int64_t>(1, std::min<int64_t>(50, total / 10));

  log("[train " + std::string(MethodName(options.method)) + "] " + data.description + ": " +
      std::to_string(data.train.size()) + " training items, " +
      std::to_string(data.num_train_classes) + " classes, " +
      std::to_string(source->items_per_batch()) + " items/batch, " + std::to_string(total) +
      " iterations" +
      (state.iteration > 0 ? ", resuming at " + std::to_string(state.iteration) : "") +
      (validating ? ", validating on " + std::to_string(val_items.size()) + " items" : "") + ", " +
      std::to_string(torch::get_num_threads()) + " threads");

  TrainResult r;
  r.start_iteration = state.iteration;
  const auto start = Clock::now();
  auto last_progress = start;
  double step_seconds = 0;
  int64_t items_seen = 0;
  double window_sum = 0;
  int64_t window_count = 0;
  double progress_loss = 0;
  int64_t progress_count = 0;
  std::map<std::string, double> progress_terms;
  std::vector<float> pixels;

  auto validate = [&](int64_t iteration, bool* stop) -> Status {
    double map_at_r = 0;
    HEDGEDB_RETURN_IF_ERROR(Validate(encoder, data.validation, val_items, options.seed, &map_at_r));
    r.validated = true;
    char line[160];
    const bool improved = map_at_r > state.best_validation;
    std::snprintf(line, sizeof(line), "[train %s] iter %lld validation MAP@R %.4f%s",
                  MethodName(options.method), static_cast<long long>(iteration), map_at_r,
                  improved ? " (best, saved)" : "");
    log(line);
    if (improved) {
      state.best_validation = map_at_r;
      state.best_iteration = iteration;
      state.evals_without_improvement = 0;
      HEDGEDB_RETURN_IF_ERROR(SaveModel(options.out, encoder));
    } else if (++state.evals_without_improvement >= options.patience) {
      *stop = true;
    }
    return Status::OK();
  };

  int64_t t = state.iteration;
  bool stop = false;
  while (t < total && !stop) {
    const auto step_start = Clock::now();
    torch::manual_seed(SeededRng::DeriveSeed(options.seed, 2 * static_cast<uint64_t>(t) + 1));
    SeededRng occlusion_rng(SeededRng::DeriveSeed(options.seed, 2 * static_cast<uint64_t>(t) + 2));
    const TrainBatch batch = source->Next();
    const int64_t n = static_cast<int64_t>(batch.items.size());
    pixels.resize(n * data.train.item_floats());
    data.train.render_train(batch.items, &occlusion_rng, pixels.data());
    std::vector<int64_t> sizes = {n};
    sizes.insert(sizes.end(), data.train.input_shape.begin(), data.train.input_shape.end());
    const torch::Tensor x = torch::from_blob(pixels.data(), sizes, torch::kFloat32);

    optimizer.zero_grad();
    const EncoderOutput out = encoder->forward(x);
    const LossOutput loss = ComputeLoss(options, method->method, encoder, out, batch);
    const double loss_value = loss.loss.item<double>();
    if (!std::isfinite(loss_value)) {
      return Status::Internal("the " + std::string(MethodName(options.method)) + " loss became " +
                              std::to_string(loss_value) + " at iteration " + std::to_string(t) +
                              " (try a lower --lr)");
    }
    loss.loss.backward();
    optimizer.step();
    ++t;
    step_seconds += Seconds(step_start);
    items_seen += n;

    window_sum += loss_value;
    if (++window_count == window) {
      r.loss_curve.emplace_back(t, window_sum / window_count);
      window_sum = 0;
      window_count = 0;
    }
    progress_loss += loss_value;
    ++progress_count;
    for (const auto& [name, value] : loss.terms) progress_terms[name] += value;

    const double elapsed = Seconds(start);
    const bool out_of_time = options.max_seconds > 0 && elapsed >= options.max_seconds;
    if (Seconds(last_progress) >= options.progress_seconds || t == total || out_of_time) {
      const double rate = items_seen / std::max(step_seconds, 1e-9);
      const double per_iteration = elapsed / std::max<int64_t>(1, t - r.start_iteration);
      double eta = (total - t) * per_iteration;
      if (options.max_seconds > 0) eta = std::min(eta, options.max_seconds - elapsed);
      char line[512];
      std::snprintf(line, sizeof(line), "[train %s] iter %lld/%lld loss %.5f",
                    MethodName(options.method), static_cast<long long>(t),
                    static_cast<long long>(total), progress_loss / progress_count);
      std::string text = line;
      std::string terms;
      for (const auto& [name, value] : progress_terms) {
        std::snprintf(line, sizeof(line), "%s%s %.4g", terms.empty() ? "" : ", ", name.c_str(),
                      value / progress_count);
        terms += line;
      }
      if (!terms.empty()) text += " (" + terms + ")";
      std::snprintf(line, sizeof(line), " %.0f items/s ETA %s", rate, Duration(eta).c_str());
      log(text + line);
      last_progress = Clock::now();
      progress_loss = 0;
      progress_count = 0;
      progress_terms.clear();
    }
    if (validating && (t % eval_every == 0 || t == total || out_of_time)) {
      state.iteration = t;
      HEDGEDB_RETURN_IF_ERROR(validate(t, &stop));
      if (stop) {
        r.early_stopped = true;
        log("[train " + std::string(MethodName(options.method)) +
            "] early stop: no validation improvement in " + std::to_string(options.patience) +
            " validations; best at iteration " + std::to_string(state.best_iteration));
      }
    }
    if (options.checkpoint_every > 0 && t % options.checkpoint_every == 0) {
      state.iteration = t;
      HEDGEDB_RETURN_IF_ERROR(SaveCheckpoint(checkpoint_path, encoder, optimizer, state));
      // The best model so far travels with the checkpoint, so a resumed run
      // that never beats it still ends with it in --out.
      if (validating && r.validated) {
        HEDGEDB_RETURN_IF_ERROR(CopyFile(options.out, checkpoint_path + ".best"));
      }
    }
    if (out_of_time) {
      log("[train " + std::string(MethodName(options.method)) + "] time budget of " +
          Duration(options.max_seconds) + " reached at iteration " + std::to_string(t));
      break;
    }
  }
  if (window_count > 0) r.loss_curve.emplace_back(t, window_sum / window_count);
  if (!validating) HEDGEDB_RETURN_IF_ERROR(SaveModel(options.out, encoder));

  r.iterations = t;
  r.seconds = Seconds(start);
  r.items_per_second = items_seen / std::max(step_seconds, 1e-9);
  if (!r.loss_curve.empty()) {
    r.first_loss = r.loss_curve.front().second;
    r.last_loss = r.loss_curve.back().second;
  }
  r.best_validation = state.best_validation;
  r.best_iteration = state.best_iteration;
  HEDGEDB_RETURN_IF_ERROR(ReadModelSpec(options.out, &r.spec));
  *result = std::move(r);
  return Status::OK();
}

}  // namespace

Status ResolveTrainOptions(TrainOptions* o) {
  const MethodDefaults* m = FindMethod(o->method);
  if (m == nullptr) {
    return Status::InvalidArgument("unknown method (expected " + MethodNamesText() + ")");
  }
  if (o->out.empty()) return Status::InvalidArgument("an output model path (--out) is required");
  if (o->components < 1) return Status::InvalidArgument("--components must be >= 1");
  if (o->components > 1 && m->method != Method::kHib) {
    return Status::InvalidArgument("--components > 1 (mixtures) needs --method hib");
  }
  if (m->method == Method::kDimco) {
    if (o->dim != 0) {
      return Status::InvalidArgument("dimco takes --code-dim and --code-k, not --dim");
    }
    if (o->code_dims == 0) o->code_dims = 4;
    if (o->code_k == 0) o->code_k = 16;
    if (o->code_dims < 1) return Status::InvalidArgument("--code-dim must be >= 1");
    if (o->code_k < 2 || o->code_k > 256) {
      return Status::InvalidArgument("--code-k must be in [2, 256]");
    }
  } else {
    if (o->code_dims != 0 || o->code_k != 0) {
      return Status::InvalidArgument("--code-dim/--code-k apply to --method dimco only");
    }
    if (o->dim == 0) o->dim = m->method == Method::kFStatistic ? 500 : 2;
    if (o->dim < 1) return Status::InvalidArgument("--dim must be >= 1");
    if (m->method == Method::kFStatistic && o->dim < o->fstat_top_dims) {
      return Status::InvalidArgument("fstat needs --dim >= its top dimensions (" +
                                     std::to_string(o->fstat_top_dims) + ")");
    }
  }
  if (o->batch_size == 0 && m->family == BatchFamily::kPairs) o->batch_size = 128;
  if (o->batch_size < 0) return Status::InvalidArgument("--batch-size must be positive");
  if (m->family == BatchFamily::kPairs && o->batch_size % 2 != 0) {
    return Status::InvalidArgument("--batch-size must be even (half random stream, half partners)");
  }
  if (o->lr == 0) o->lr = m->method == Method::kFStatistic ? 2e-4 : 1e-3;
  if (!(o->lr > 0) || !std::isfinite(o->lr)) return Status::InvalidArgument("--lr must be > 0");
  if (o->iterations < 0 || o->epochs < 0) {
    return Status::InvalidArgument("--iterations and --epochs must be >= 0");
  }
  if (o->samples < 1) return Status::InvalidArgument("--samples must be >= 1");
  if (m->method == Method::kHib && o->samples % o->components != 0) {
    // Stratified mixture sampling needs K to be a multiple of C.
    o->samples =
        (o->samples / static_cast<int>(o->components) + 1) * static_cast<int>(o->components);
  }
  if (o->beta < 0) return Status::InvalidArgument("--beta must be >= 0");
  std::error_code ec;
  if (!o->backbone.empty() && !std::filesystem::is_regular_file(o->backbone, ec)) {
    return Status::NotFound("--backbone " + o->backbone + ": no such file");
  }
  if (o->hib_likelihood != "expected" && o->hib_likelihood != "mc") {
    return Status::InvalidArgument("--hib-likelihood must be expected or mc, got '" +
                                   o->hib_likelihood + "'");
  }
  if (o->patience < 1) return Status::InvalidArgument("--patience must be >= 1");
  if (o->checkpoint_every < 0 || o->eval_every < 0 || o->max_seconds < 0) {
    return Status::InvalidArgument("--checkpoint-every, --eval-every, --max-seconds must be >= 0");
  }
  if (o->threads <= 0) {
    o->threads = std::max(1u, std::thread::hardware_concurrency());
  }
  return Status::OK();
}

Status Train(const TrainOptions& options, const EncoderData& data, TrainResult* result) {
  TrainOptions resolved = options;
  HEDGEDB_RETURN_IF_ERROR(ResolveTrainOptions(&resolved));
  try {
    return TrainImpl(resolved, data, result);
  } catch (const c10::Error& e) {
    return Status::Internal("training failed: " + std::string(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return Status::Internal(std::string("training failed: ") + e.what());
  }
}

}  // namespace encoders
}  // namespace hedgedb
