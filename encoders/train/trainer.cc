#include "encoders/train/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <system_error>
#include <thread>

#include "encoders/data/batch_samplers.h"
#include "encoders/embedder.h"
#include "encoders/engine_bridge.h"
#include "encoders/eval/evaluation.h"
#include "encoders/losses/losses.h"
#include "encoders/models/models.h"
#include "encoders/progress.h"
#include "hedgedb/calibration.h"
#include "hedgedb/score.h"

namespace hedgedb {
namespace encoders {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
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
        o.n_way = options.episodes.n_way;
        o.n_support = options.episodes.n_support;
        o.n_query = options.episodes.n_query;
        o.seed = seed;
        HEDGEDB_RETURN_IF_ERROR(EpisodeSampler::Create(labels, o, &s->episodes_));
        if (options.episodes.n_query < 1) {
          return Status::InvalidArgument("n_query must be >= 1 for training");
        }
        s->items_per_batch_ = static_cast<int64_t>(s->episodes_->n_way()) *
                              (options.episodes.n_support + options.episodes.n_query);
        break;
      }
      case BatchFamily::kClassBalanced: {
        ClassBalancedOptions o = GetMethodInfo(options.method).class_batches(seed);
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

// The losses' code, one case per method: the one switch over Method left,
// since the method table (encoders/models/methods.h) is torch-free; it names
// each loss and the batch family whose TrainBatch fields the case reads.
LossOutput ComputeLoss(const TrainOptions& options, Method method, Encoder& encoder,
                       const EncoderOutput& out, const TrainBatch& batch) {
  switch (method) {
    case Method::kSoftContrastive:
    case Method::kContrastive:
    case Method::kHib: {
      const torch::Tensor first = Int64Tensor(batch.first), second = Int64Tensor(batch.second);
      const torch::Tensor match =
          torch::tensor(std::vector<int64_t>(batch.match.begin(), batch.match.end()))
              .to(torch::kBool);
      if (method == Method::kContrastive) {
        return ContrastiveLoss(out.point.index_select(0, first), out.point.index_select(0, second),
                               match, options.contrastive.margin);
      }
      if (method == Method::kSoftContrastive) {
        return SoftContrastiveLoss(out.point.index_select(0, first),
                                   out.point.index_select(0, second), match, encoder->match_a(),
                                   encoder->match_b());
      }
      HibOptions hib;
      hib.samples = options.samples;
      hib.beta = options.hib.beta;
      hib.likelihood = options.hib.likelihood;
      hib.variance_mls = options.hib.variance_mls;
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
      f.top_dims = options.fstat.top_dims;
      return FStatisticLoss(out.point, Int64Tensor(batch.slots), f);
    }
  }
  TORCH_CHECK(false, "unknown method");
}

ModelSpec MakeSpec(const TrainOptions& options, const EncoderData& data) {
  const MethodInfo& m = GetMethodInfo(options.method);
  ModelSpec spec;
  spec.method = m.method;
  spec.kind = m.mixtures && options.components > 1 ? Kind::kMog : m.kind;
  spec.dim = options.dim;
  spec.components = spec.kind == Kind::kMog ? options.components : 1;
  if (spec.kind == Kind::kCodes) {
    spec.code_dims = options.code_dims;
    spec.code_k = options.code_k;
  }
  spec.input_shape = data.train.input_shape;
  spec.input_mean = data.input_mean;
  spec.input_std = data.input_std;
  spec.data = data.settings;
  if (!options.backbone.empty()) {
    // Absolute, so that the model file finds the script from anywhere.
    spec.backbone = BackboneType::kTorchScript;
    spec.backbone_path = std::filesystem::absolute(options.backbone).lexically_normal().string();
  } else if (spec.input_shape.size() == 3 && options.arch == "cnn") {
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

// Removes a checkpoint's files (model, state, best model); missing ones are
// fine.
void RemoveCheckpoint(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", ".state", ".best"}) std::filesystem::remove(path + suffix, ec);
}

// Iterations timed for the up-front estimate of the run's duration.
constexpr int64_t kEstimateIterations = 20;

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

// Rows `rows` of `e`, in that order.
Embeddings SelectRows(const Embeddings& e, const std::vector<int64_t>& rows) {
  Embeddings out = e;
  out.n = static_cast<int64_t>(rows.size());
  auto take = [&](const auto& from, auto* to, int64_t width) {
    if (from.empty()) return;
    to->clear();
    for (int64_t r : rows)
      to->insert(to->end(), from.begin() + r * width, from.begin() + (r + 1) * width);
  };
  const int64_t cd = e.components * e.dim;
  take(e.vec, &out.vec, e.dim);
  take(e.mean, &out.mean, cd);
  take(e.var, &out.var, cd);
  take(e.weights, &out.weights, e.components);
  take(e.codes, &out.codes, e.dim);
  take(e.logp, &out.logp, e.dim * e.code_k);
  return out;
}

// Fits the calibration map of a model with `spec` on the embeddings `e` of
// `items` of the validation split: every sampled query item paired with every
// other item, scored as a collection created from the model scores them
// (engine bridge: spec, score, samples and seed), at most max_pairs pairs. The
// embeddings are the validation's (stored occlusions), so the pairs look like
// the ones validation ranked. Each query's pairs are ranked and carry its eta
// (gaussian/mog), so the map may be conditional, as DB::Calibrate's is: a
// collection that starts with this map (ingest-images) gives the best match
// of an uncertain query the probability such queries earn.
Status FitValidationCalibration(const ModelSpec& spec, const Embeddings& e,
                                const ItemSet& validation, const std::vector<int64_t>& items,
                                uint64_t seed, ModelCalibration* calibration) {
  constexpr int64_t kMaxPairs = 1000000;
  const int64_t n = e.n;
  if (n < 2) return Status::InvalidArgument("fewer than 2 validation items");
  // Whole query rows until the cap, drawn with a fixed seed.
  std::vector<int64_t> queries(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) queries[size_t(i)] = i;
  const int64_t max_queries = std::max<int64_t>(1, kMaxPairs / (n - 1));
  if (n > max_queries) {
    SeededRng rng(SeededRng::DeriveSeed(seed, 0xCA11B));
    rng.Shuffle(&queries);
    queries.resize(size_t(max_queries));
    std::sort(queries.begin(), queries.end());
  }
  const CollectionSpec collection = CollectionSpecForModel(spec, "calibration");
  ScoreOptions options;
  options.score = ModelScore(spec);  // samples and seed: the collection's
  std::vector<float> matrix;
  HEDGEDB_RETURN_IF_ERROR(
      ScoreMatrix(collection, SelectRows(e, queries).View(), e.View(), options, &matrix));
  std::vector<int64_t> item_labels(static_cast<size_t>(n)), query_labels;
  for (int64_t i = 0; i < n; ++i)
    item_labels[size_t(i)] = validation.labels[size_t(items[size_t(i)])];
  for (const int64_t q : queries) query_labels.push_back(item_labels[size_t(q)]);
  std::vector<float> query_eta;  // empty: the kind has none
  if (e.kind == Kind::kGaussian || e.kind == Kind::kMog) {
    HEDGEDB_RETURN_IF_ERROR(
        ItemUncertainties(collection, SelectRows(e, queries).View(), options, &query_eta));
  }
  ModelCalibration fitted;
  CalibrationReport report;
  HEDGEDB_RETURN_IF_ERROR(CalibrateScoreMatrix(
      options.score, matrix.data(), int64_t(queries.size()), n, query_labels.data(),
      item_labels.data(), queries.data(), query_eta.empty() ? nullptr : query_eta.data(), seed,
      &fitted.map, &report));
  fitted.info = report.info;
  if (options.score == ScoreType::kMc) fitted.info.samples = collection.samples;
  *calibration = std::move(fitted);
  return Status::OK();
}

// SPE's loss learns no match parameters, yet the uncertainty eta that the
// database computes for every Gaussian (HIB eq. 9) scores with eq. 5's a and
// b: at a = 1, b = 0 it cannot fall below 0.5 whatever the embedding. So they
// are fitted after training, with the embeddings frozen, by maximum
// likelihood of eq. 5's Monte Carlo match probability (as HIB's loss fits
// them) on balanced validation pairs: up to kPairs matching and as many
// non-matching, K = `samples` draws per side, all seeded. `e`: the embeddings
// of `items` of the validation split, as stored (s^2 + sigma_eps^2).
Status FitMatchParameters(const Embeddings& e, const ItemSet& validation,
                          const std::vector<int64_t>& items, uint64_t seed, int64_t samples,
                          double* a, double* b) {
  constexpr int64_t kPairs = 2000;
  constexpr int kSteps = 400;
  if (e.kind != Kind::kGaussian || e.n < 2) {
    return Status::InvalidArgument("match parameters: needs at least 2 Gaussian validation items");
  }
  SeededRng rng(SeededRng::DeriveSeed(seed, 0xAB5));
  std::vector<int64_t> first, second;
  std::vector<float> match;
  int64_t same = 0, different = 0;
  for (int64_t tries = 0; tries < 100 * kPairs && (same < kPairs || different < kPairs); ++tries) {
    const int64_t i = int64_t(rng.UniformInt(uint64_t(e.n)));
    const int64_t j = int64_t(rng.UniformInt(uint64_t(e.n)));
    if (i == j) continue;
    const bool m =
        validation.labels[size_t(items[size_t(i)])] == validation.labels[size_t(items[size_t(j)])];
    if (m ? same >= kPairs : different >= kPairs) continue;
    ++(m ? same : different);
    first.push_back(i);
    second.push_back(j);
    match.push_back(m ? 1.0f : 0.0f);
  }
  if (same == 0 || different == 0) {
    return Status::InvalidArgument("match parameters: validation pairs of one kind only");
  }
  const int64_t pairs = int64_t(match.size());
  const auto rows = [&](const std::vector<float>& values) {  // from_blob only reads: clone
    return torch::from_blob(const_cast<float*>(values.data()), {e.n, e.dim}, torch::kFloat).clone();
  };
  const torch::Tensor mean = rows(e.mean), sd = rows(e.var).sqrt();
  const torch::Tensor i1 = torch::tensor(first, torch::kLong);
  const torch::Tensor i2 = torch::tensor(second, torch::kLong);
  const torch::Tensor y = torch::from_blob(match.data(), {pairs}, torch::kFloat).clone();
  torch::Generator generator = at::detail::createCPUGenerator(seed);
  const auto draw = [&](const torch::Tensor& index) {  // [P, K, D]
    const torch::Tensor noise = at::randn({pairs, samples, e.dim}, generator);
    return mean.index_select(0, index).unsqueeze(1) +
           sd.index_select(0, index).unsqueeze(1) * noise;
  };
  // [P, K, 1, D] against [P, 1, K, D]: every sample pair of every item pair.
  const torch::Tensor z1 = draw(i1).unsqueeze(2), z2 = draw(i2).unsqueeze(1);
  torch::Tensor a_raw = torch::tensor(InverseSoftplus(1.0)).requires_grad_(true);
  torch::Tensor b_param = torch::tensor(0.0).requires_grad_(true);
  torch::optim::Adam optimizer({a_raw, b_param}, torch::optim::AdamOptions(0.05));
  for (int step = 0; step < kSteps; ++step) {
    optimizer.zero_grad();
    const torch::Tensor p =
        torch::sigmoid(MatchLogit(z1, z2, torch::softplus(a_raw), b_param)).mean({1, 2});
    torch::binary_cross_entropy(p.clamp(1e-6, 1 - 1e-6), y).backward();
    optimizer.step();
  }
  *a = torch::softplus(a_raw).item<double>();
  *b = b_param.item<double>();
  if (!std::isfinite(*a) || !(*a > 0) || !std::isfinite(*b)) {
    return Status::Internal("match parameters: the fit diverged");
  }
  return Status::OK();
}

// One training run, in the steps Run() takes: build the model and optimizer
// (fresh, or from a checkpoint), set up the data (batches, schedule,
// validation subset), the iteration loop (a step, progress lines, validation
// with early stopping, checkpoints), and saving the result.
class TrainingRun {
 public:
  TrainingRun(const TrainOptions& options, const EncoderData& data)
      : options_(options),
        data_(data),
        method_(&GetMethodInfo(options.method)),
        log_(options.log ? options.log : [](const std::string& line) {
          std::fprintf(stderr, "%s\n", line.c_str());
        }) {}

  Status Run(TrainResult* result) {
    torch::set_num_threads(options_.threads);
    if (data_.train.size() == 0) return Status::InvalidArgument("the training split is empty");
    HEDGEDB_RETURN_IF_ERROR(BuildModel());
    HEDGEDB_RETURN_IF_ERROR(SetUpData());
    HEDGEDB_RETURN_IF_ERROR(Loop());
    return Finish(result);
  }

 private:
  std::string Tag() const { return "[train " + std::string(MethodName(options_.method)) + "]"; }

  // The encoder (new, or the checkpoint's weights), the optimizer and, when
  // resuming, the loop counters and the best model so far.
  Status BuildModel() {
    const ModelSpec spec = MakeSpec(options_, data_);
    HEDGEDB_RETURN_IF_ERROR(ValidateSpec(spec));
    if (!options_.resume.empty()) {
      ModelSpec loaded;
      HEDGEDB_RETURN_IF_ERROR(LoadModelExpecting(options_.resume, spec, &loaded, &encoder_));
    } else {
      torch::manual_seed(SeededRng::DeriveSeed(options_.seed, 0x1417));
      HEDGEDB_RETURN_IF_ERROR(MakeEncoder(spec, &encoder_));
    }
    encoder_->train();
    optimizer_ = std::make_unique<torch::optim::Adam>(encoder_->parameters(),
                                                      torch::optim::AdamOptions(options_.lr));
    if (!options_.resume.empty()) {
      HEDGEDB_RETURN_IF_ERROR(LoadCheckpointState(options_.resume, optimizer_.get(), &state_));
      if (std::filesystem::exists(options_.resume + ".best")) {
        HEDGEDB_RETURN_IF_ERROR(CopyFile(options_.resume + ".best", options_.out));
      }
    }
    return Status::OK();
  }

  // The batch sampler (replayed to the checkpoint's iteration), the number of
  // iterations, the validation subset and schedule; logs the run's outline.
  Status SetUpData() {
    HEDGEDB_RETURN_IF_ERROR(
        BatchSource::Create(options_, method_->family, data_.train.labels, &source_));
    total_ = options_.iterations;
    const double per_batch = static_cast<double>(source_->items_per_batch());
    if (options_.budget_items > 0) {
      total_ = static_cast<int64_t>(std::ceil(options_.budget_items / per_batch));
    } else if (options_.epochs > 0) {
      total_ = static_cast<int64_t>(std::ceil(options_.epochs * data_.train.size() / per_batch));
    }
    if (total_ <= 0) total_ = 10000;
    if (state_.iteration > total_) {
      return Status::InvalidArgument("the checkpoint is at iteration " +
                                     std::to_string(state_.iteration) +
                                     ", past the run's iterations " + std::to_string(total_));
    }
    // Replay the sampler so that a resumed run sees the batches the
    // uninterrupted run would have seen.
    for (int64_t t = 0; t < state_.iteration; ++t) source_->Next();

    validating_ = data_.validation.size() > 0;
    if (validating_) val_items_ = SubsetItems(data_.validation, options_.val_items, options_.seed);
    eval_every_ =
        options_.eval_every > 0 ? options_.eval_every : std::max<int64_t>(100, total_ / 20);
    checkpoint_path_ =
        options_.checkpoint_path.empty() ? options_.out + ".ckpt" : options_.checkpoint_path;
    window_ = std::max<int64_t>(1, std::min<int64_t>(50, total_ / 10));

    log_(Tag() + " " + data_.description + ": " + std::to_string(data_.train.size()) +
         " training items, " + std::to_string(data_.num_train_classes) + " classes, " +
         std::to_string(source_->items_per_batch()) + " items/batch, " + std::to_string(total_) +
         " iterations" +
         (state_.iteration > 0 ? ", resuming at " + std::to_string(state_.iteration) : "") +
         (validating_ ? ", validating on " + std::to_string(val_items_.size()) + " items" : "") +
         ", " + std::to_string(torch::get_num_threads()) + " threads" +
         (options_.bf16 ? ", bfloat16 backbone" : ""));
    return Status::OK();
  }

  // Iterations until the total, an early stop or the time budget.
  Status Loop() {
    r_.start_iteration = state_.iteration;
    start_ = Clock::now();
    last_progress_ = start_;
    last_checkpoint_ = start_;
    int64_t t = state_.iteration;
    bool stop = false;
    while (t < total_ && !stop) {
      HEDGEDB_RETURN_IF_ERROR(Step(t));
      ++t;
      const double elapsed = Seconds(start_);
      const bool out_of_time = options_.max_seconds > 0 && elapsed >= options_.max_seconds;
      const bool interrupted = options_.stop_requested && options_.stop_requested();
      if (t - r_.start_iteration == std::min<int64_t>(kEstimateIterations, total_)) {
        LogEstimate(t, elapsed);
      }
      if (Seconds(last_progress_) >= options_.progress_seconds || t == total_ || out_of_time ||
          interrupted) {
        LogProgress(t, elapsed);
      }
      if (validating_ && (t % eval_every_ == 0 || t == total_ || out_of_time || interrupted)) {
        HEDGEDB_RETURN_IF_ERROR(ValidateAndKeepBest(t, &stop));
      }
      if (options_.checkpoint_every > 0 && t % options_.checkpoint_every == 0) {
        HEDGEDB_RETURN_IF_ERROR(Checkpoint(t));
      } else if (interrupted || (options_.checkpoint_seconds > 0 && t < total_ && !stop &&
                                 Seconds(last_checkpoint_) >= options_.checkpoint_seconds)) {
        HEDGEDB_RETURN_IF_ERROR(Checkpoint(t));
        timed_checkpoint_ = true;
      }
      if (interrupted) {
        r_.interrupted = true;
        r_.checkpoint = checkpoint_path_;
        log_(Tag() + " stopped on request at iteration " + std::to_string(t) + "; " +
             (validating_ ? "the best model so far (iteration " +
                                std::to_string(state_.best_iteration) + ") is kept"
                          : "the model at this iteration is kept") +
             "; resuming from " + checkpoint_path_ + " continues the run");
        break;
      }
      if (out_of_time) {
        log_(Tag() + " time budget of " + Duration(options_.max_seconds) +
             " reached at iteration " + std::to_string(t));
        break;
      }
    }
    // Checkpoints written only because time passed served a run that could
    // have been killed; it completed, so they go (iteration-count ones stay,
    // as asked, and so does the one a stop request wrote). So does the
    // checkpoint this run resumed from, when it is the run's own (a resumed
    // run that completes within checkpoint_seconds writes none of its own).
    std::error_code same_error;
    const bool resumed_own =
        !options_.resume.empty() &&
        std::filesystem::equivalent(options_.resume, checkpoint_path_, same_error);
    if ((timed_checkpoint_ || resumed_own) && !r_.interrupted && options_.checkpoint_every == 0) {
      RemoveCheckpoint(checkpoint_path_);
    }
    if (window_count_ > 0) r_.loss_curve.emplace_back(t, window_sum_ / window_count_);
    r_.iterations = t;
    return Status::OK();
  }

  // One optimisation step on batch t (seeded by t, so a resumed run repeats
  // it), and its loss in the curve and the progress sums.
  Status Step(int64_t t) {
    const auto step_start = Clock::now();
    torch::manual_seed(SeededRng::DeriveSeed(options_.seed, 2 * static_cast<uint64_t>(t) + 1));
    SeededRng occlusion_rng(SeededRng::DeriveSeed(options_.seed, 2 * static_cast<uint64_t>(t) + 2));
    const TrainBatch batch = source_->Next();
    const int64_t n = static_cast<int64_t>(batch.items.size());
    pixels_.resize(n * data_.train.item_floats());
    data_.train.render_train(batch.items, &occlusion_rng, pixels_.data());
    std::vector<int64_t> sizes = {n};
    sizes.insert(sizes.end(), data_.train.input_shape.begin(), data_.train.input_shape.end());
    const torch::Tensor x = torch::from_blob(pixels_.data(), sizes, torch::kFloat32);

    optimizer_->zero_grad();
    const EncoderOutput out = encoder_->forward(x, options_.bf16);
    const LossOutput loss = ComputeLoss(options_, method_->method, encoder_, out, batch);
    const double loss_value = loss.loss.item<double>();
    if (!std::isfinite(loss_value)) {
      return Status::Internal("the " + std::string(MethodName(options_.method)) + " loss became " +
                              std::to_string(loss_value) + " at iteration " + std::to_string(t) +
                              " (try a lower lr)");
    }
    loss.loss.backward();
    optimizer_->step();
    step_seconds_ += Seconds(step_start);
    items_seen_ += n;

    window_sum_ += loss_value;
    if (++window_count_ == window_) {
      r_.loss_curve.emplace_back(t + 1, window_sum_ / window_count_);
      window_sum_ = 0;
      window_count_ = 0;
    }
    progress_loss_ += loss_value;
    ++progress_count_;
    for (const auto& [name, value] : loss.terms) progress_terms_[name] += value;
    return Status::OK();
  }

  // After the first iterations, once: how long the whole run will take at
  // their pace, and what stops it first.
  void LogEstimate(int64_t t, double elapsed) {
    const double per_iteration = elapsed / std::max<int64_t>(1, t - r_.start_iteration);
    const double all = (total_ - r_.start_iteration) * per_iteration;
    std::string text = Tag() + " estimate at the first iterations' pace: " + Duration(all) +
                       " for " + std::to_string(total_ - r_.start_iteration) + " iterations";
    if (options_.max_seconds > 0 && options_.max_seconds < all) {
      text += "; the time budget (max_seconds) stops it after " + Duration(options_.max_seconds) +
              ", near iteration " +
              std::to_string(r_.start_iteration +
                             static_cast<int64_t>(options_.max_seconds / per_iteration));
    }
    if (validating_) text += " (validations add to it)";
    text += "; Ctrl-C stops early and keeps the best model so far";
    log_(text);
  }

  // "iter t/total loss ... (terms) items/s ETA": the mean since the last line.
  void LogProgress(int64_t t, double elapsed) {
    const double rate = items_seen_ / std::max(step_seconds_, 1e-9);
    const double per_iteration = elapsed / std::max<int64_t>(1, t - r_.start_iteration);
    double eta = (total_ - t) * per_iteration;
    if (options_.max_seconds > 0) eta = std::min(eta, options_.max_seconds - elapsed);
    char line[512];
    std::snprintf(line, sizeof(line), "[train %s] iter %lld/%lld loss %.5f",
                  MethodName(options_.method), static_cast<long long>(t),
                  static_cast<long long>(total_), progress_loss_ / progress_count_);
    std::string text = line;
    std::string terms;
    for (const auto& [name, value] : progress_terms_) {
      std::snprintf(line, sizeof(line), "%s%s %.4g", terms.empty() ? "" : ", ", name.c_str(),
                    value / progress_count_);
      terms += line;
    }
    if (!terms.empty()) text += " (" + terms + ")";
    std::snprintf(line, sizeof(line), " %.0f items/s ETA %s", rate, Duration(eta).c_str());
    log_(text + line);
    last_progress_ = Clock::now();
    progress_loss_ = 0;
    progress_count_ = 0;
    progress_terms_.clear();
  }

  // Validation MAP@R at iteration t: a better model is saved to --out;
  // `patience` validations without improvement set *stop.
  Status ValidateAndKeepBest(int64_t t, bool* stop) {
    state_.iteration = t;
    double map_at_r = 0;
    HEDGEDB_RETURN_IF_ERROR(
        Validate(encoder_, data_.validation, val_items_, options_.seed, &map_at_r));
    r_.validated = true;
    char line[160];
    const bool improved = map_at_r > state_.best_validation;
    std::snprintf(line, sizeof(line), "[train %s] iter %lld validation MAP@R %.4f%s",
                  MethodName(options_.method), static_cast<long long>(t), map_at_r,
                  improved ? " (best, saved)" : "");
    log_(line);
    if (improved) {
      state_.best_validation = map_at_r;
      state_.best_iteration = t;
      state_.evals_without_improvement = 0;
      HEDGEDB_RETURN_IF_ERROR(SaveModel(options_.out, encoder_));
    } else if (++state_.evals_without_improvement >= options_.patience) {
      *stop = true;
      r_.early_stopped = true;
      log_(Tag() + " early stop: no validation improvement in " +
           std::to_string(options_.patience) + " validations; best at iteration " +
           std::to_string(state_.best_iteration));
    }
    return Status::OK();
  }

  Status Checkpoint(int64_t t) {
    last_checkpoint_ = Clock::now();
    state_.iteration = t;
    HEDGEDB_RETURN_IF_ERROR(SaveCheckpoint(checkpoint_path_, encoder_, *optimizer_, state_));
    // The best model so far travels with the checkpoint, so a resumed run
    // that never beats it still ends with it in --out.
    if (validating_ && r_.validated) {
      HEDGEDB_RETURN_IF_ERROR(CopyFile(options_.out, checkpoint_path_ + ".best"));
    }
    return Status::OK();
  }

  // Saves the last model unless validation chose the best one, adds the
  // calibration map, and reports.
  Status Finish(TrainResult* result) {
    if (!validating_) HEDGEDB_RETURN_IF_ERROR(SaveModel(options_.out, encoder_));
    if (validating_) HEDGEDB_RETURN_IF_ERROR(AddCalibration());
    r_.seconds = Seconds(start_);
    r_.items_per_second = items_seen_ / std::max(step_seconds_, 1e-9);
    if (!r_.loss_curve.empty()) {
      r_.first_loss = r_.loss_curve.front().second;
      r_.last_loss = r_.loss_curve.back().second;
    }
    r_.best_validation = state_.best_validation;
    r_.best_iteration = state_.best_iteration;
    HEDGEDB_RETURN_IF_ERROR(ReadModelSpec(options_.out, &r_.spec));
    *result = std::move(r_);
    return Status::OK();
  }

  // Fits, on one embedding of the validation items, what the saved model
  // gets after training: SPE's match a, b (FitMatchParameters) and the
  // calibration map of its search score; then rewrites the model file once.
  // A fit that fails (too few pairs, one class) leaves that part out (a = 1,
  // b = 0; no map) and says so: training still succeeded.
  Status AddCalibration() {
    const Clock::time_point start = Clock::now();
    ModelSpec spec;
    Encoder saved{nullptr};
    HEDGEDB_RETURN_IF_ERROR(LoadModel(options_.out, &spec, &saved));
    const std::unique_ptr<EncoderModel> model = EncoderModel::Borrow(saved);
    Embeddings e;
    HEDGEDB_RETURN_IF_ERROR(model->Embed(data_.validation, val_items_, /*corrupt=*/true, &e));
    if (method_->match == MatchParameters::kFitted) {
      double a = 1.0, b = 0.0;
      const Status fit = FitMatchParameters(e, data_.validation, val_items_, options_.seed,
                                            options_.samples, &a, &b);
      if (fit.ok()) {
        saved->SetMatchParameters(a, b);
        char line[120];
        std::snprintf(line, sizeof(line),
                      " match parameters fitted on validation pairs: a %.4g, b %.4g", a, b);
        log_(Tag() + line);
      } else {
        log_(Tag() + " match parameters not fitted (a = 1, b = 0): " + fit.message());
      }
    }
    ModelCalibration calibration;
    const Status fit = FitValidationCalibration(model->spec(), e, data_.validation, val_items_,
                                                options_.seed, &calibration);
    HEDGEDB_RETURN_IF_ERROR(SaveModel(options_.out, saved, fit.ok() ? &calibration : nullptr));
    if (!fit.ok()) {
      r_.calibration_note = "no calibration map: " + fit.message();
      log_(Tag() + " " + r_.calibration_note);
      return Status::OK();
    }
    char line[200];
    std::snprintf(line, sizeof(line),
                  " calibration map (%s, %s) on %lld validation pairs, base rate %.4g (%.1f s)",
                  ScoreName(calibration.info.score), calibration.info.method.c_str(),
                  static_cast<long long>(calibration.info.pairs), calibration.info.base_rate,
                  Seconds(start));
    log_(Tag() + line);
    r_.calibration = calibration.info;
    r_.calibrated = true;
    return Status::OK();
  }

  const TrainOptions& options_;
  const EncoderData& data_;
  const MethodInfo* method_;
  const std::function<void(const std::string&)> log_;

  Encoder encoder_{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer_;
  LoopState state_;

  std::unique_ptr<BatchSource> source_;
  int64_t total_ = 0;
  bool validating_ = false;
  std::vector<int64_t> val_items_;
  int64_t eval_every_ = 0;
  std::string checkpoint_path_;
  int64_t window_ = 1;  // iterations per loss-curve point

  TrainResult r_;
  Clock::time_point start_, last_progress_, last_checkpoint_;
  bool timed_checkpoint_ = false;  // a checkpoint_seconds checkpoint was written
  double step_seconds_ = 0;
  int64_t items_seen_ = 0;
  double window_sum_ = 0;
  int64_t window_count_ = 0;
  double progress_loss_ = 0;
  int64_t progress_count_ = 0;
  std::map<std::string, double> progress_terms_;
  std::vector<float> pixels_;
};

}  // namespace

Status ResolveTrainOptions(TrainOptions* o) {
  const MethodInfo* m = FindMethodInfo(o->method);
  if (m == nullptr) {
    return Status::InvalidArgument("unknown method (expected " + MethodNamesText() + ")");
  }
  if (o->out.empty()) return Status::InvalidArgument("out (the output model path) is required");
  if (o->components < 1) return Status::InvalidArgument("components must be >= 1");
  if (o->components > 1 && !m->mixtures) {
    return Status::InvalidArgument("components > 1 (mixtures) needs method hib");
  }
  if (m->kind == Kind::kCodes) {
    if (o->dim != 0) {
      return Status::InvalidArgument("dimco takes code_dims and code_k, not dim");
    }
    if (o->code_dims == 0) o->code_dims = m->code_dims;
    if (o->code_k == 0) o->code_k = m->code_k;
    if (o->code_dims < 1) return Status::InvalidArgument("code_dims must be >= 1");
    if (o->code_k < 2 || o->code_k > 256) {
      return Status::InvalidArgument("code_k must be in [2, 256]");
    }
  } else {
    if (o->code_dims != 0 || o->code_k != 0) {
      return Status::InvalidArgument("code_dims and code_k apply to method dimco only");
    }
    if (o->dim == 0) o->dim = m->dim;
    if (o->dim < 1) return Status::InvalidArgument("dim must be >= 1");
    if (m->method == Method::kFStatistic && o->dim < o->fstat.top_dims) {
      return Status::InvalidArgument("fstat needs dim >= its top dimensions (fstat_top_dims " +
                                     std::to_string(o->fstat.top_dims) + ")");
    }
  }
  if (o->arch != "cnn" && o->arch != "mlp") {
    return Status::InvalidArgument("arch must be cnn or mlp, not \"" + o->arch + "\"");
  }
  if (o->mlp_hidden < 1) return Status::InvalidArgument("mlp_hidden must be >= 1");
  if (o->batch_size == 0) o->batch_size = m->batch_size;
  if (o->batch_size < 0) return Status::InvalidArgument("batch_size must be positive");
  if (m->family == BatchFamily::kPairs && o->batch_size % 2 != 0) {
    return Status::InvalidArgument("batch_size must be even (half random stream, half partners)");
  }
  if (o->lr == 0) o->lr = m->lr;
  if (!(o->lr > 0) || !std::isfinite(o->lr)) return Status::InvalidArgument("lr must be > 0");
  if (o->iterations < 0) return Status::InvalidArgument("iterations must be >= 0");
  if (o->budget_items < 0) return Status::InvalidArgument("budget_items must be >= 0");
  if (o->epochs < 0) return Status::InvalidArgument("epochs must be >= 0");
  if ((o->iterations > 0) + (o->budget_items > 0) + (o->epochs > 0) > 1) {
    return Status::InvalidArgument(
        "iterations and budget_items and epochs must not be combined: each sets the run's length");
  }
  if (o->samples < 1) return Status::InvalidArgument("samples must be >= 1");
  if (m->mixtures && o->samples % o->components != 0) {
    // Stratified mixture sampling needs K to be a multiple of C.
    o->samples =
        (o->samples / static_cast<int>(o->components) + 1) * static_cast<int>(o->components);
  }
  if (!(o->contrastive.margin > 0) || !std::isfinite(o->contrastive.margin)) {
    return Status::InvalidArgument("margin must be > 0");
  }
  if (o->hib.beta < 0) return Status::InvalidArgument("beta must be >= 0");
  if (!(o->hib.variance_mls >= 0) || !std::isfinite(o->hib.variance_mls)) {
    return Status::InvalidArgument("variance_mls must be a finite number >= 0");
  }
  if (o->hib.variance_mls > 0 && (o->method != Method::kHib || o->components != 1)) {
    return Status::InvalidArgument(
        "variance_mls needs method hib with gaussian embeddings (components 1)");
  }
  std::error_code ec;
  if (!o->backbone.empty() && !std::filesystem::is_regular_file(o->backbone, ec)) {
    return Status::NotFound("backbone " + o->backbone + ": no such file");
  }
  if (o->patience < 1) return Status::InvalidArgument("patience must be >= 1");
  if (o->checkpoint_every < 0 || o->eval_every < 0 || o->max_seconds < 0) {
    return Status::InvalidArgument("checkpoint_every, eval_every and max_seconds must be >= 0");
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
    return TrainingRun(resolved, data).Run(result);
  } catch (const c10::Error& e) {
    return Status::Internal("training failed: " + std::string(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return Status::Internal(std::string("training failed: ") + e.what());
  }
}

}  // namespace encoders
}  // namespace hedgedb
