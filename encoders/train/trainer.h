// The encoder trainer: builds the model for a method, draws batches with the
// method's sampler, minimises the method's loss with Adam, validates for early
// stopping, checkpoints and resumes, and writes the model file (with a
// calibration map fitted on the validation split). Torch-free interface:
// LibTorch stays out of the headers tools include, so the CLI and embedding
// programs compile without it.
//
// Methods (flag names; point and pn are aliases of softcon and protonet;
// the defaults below are MethodInfo's, encoders/models/methods.h) and their
// paper defaults:
//   point  soft contrastive loss (HIB eq. 3), point embeddings, D = 2,
//          HIB two-stream batches of 128 with balanced pairs
//   hib    VIB loss (HIB eq. 8), gaussian (C = 1) or mog (C > 1), D = 2,
//          beta = 1e-4, K = 8 samples, the same batches as point
//   spe    stochastic prototype embedding, gaussian, D = 2, intersection
//          sampler with 1 sample, learned sigma_eps; episodes over all
//          training classes (SPE's N-digit protocol), 5 support + 5 query
//   pn     prototypical network, point, D = 2, the same episodes
//   dimco  DIMCO codes, k = 16, d = 4 (DIMCO Fig. 2), 10 x 10 class-balanced
//          batches, lambda = 1
//   fstat  F-statistic loss, point, D = 500 and d = 3 (its CUB setting),
//          12 classes x up to 10 items, lr 2e-4
// The learning rate defaults to 1e-3 (HIB, SPE and DIMCO do not state theirs
// in our copies) except fstat's 2e-4 from its paper.
//
// Determinism: weights are initialised from the seed; every iteration t seeds
// torch's generator (Monte Carlo noise) and the occlusion RNG from (seed, t),
// and the sampler is replayed from its seed, so a run resumed from a
// checkpoint continues exactly as the uninterrupted run would have.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "encoders/data/encoder_data.h"
#include "encoders/models/model_file.h"
#include "hedgedb/status.h"

namespace hedgedb {
namespace encoders {

// HIB (hib).
struct HibTrainOptions {
  double beta = 1e-4;  // KL weight
  // How the match term is estimated from the K x K sample pairs:
  // "expected" = -E[log p(m|z1,z2)] (HIB eq. 8), "mc" = -log of the Monte
  // Carlo match probability (HIB eq. 5, Figure 2), which rewards hedging an
  // ambiguous input across its candidate classes. "mc" by default: with it
  // eta follows occlusion, with "expected" it does not (bench/RESULTS.md,
  // "The HIB match term, three seeds"). ParseHibLikelihood reads the names.
  HibLikelihood likelihood = HibLikelihood::kLogMonteCarloProbability;
  // Weight of PFE's mutual likelihood loss over same-label pairs with the
  // means held fixed (encoders/losses/losses.h, VarianceMlsLoss), which
  // teaches the variances how far an input's mean strays from its label's
  // others. 0 (HIB as published) by default; gaussian (components 1) only.
  double variance_mls = 0;
};

// Episodes (spe, pn): classes per episode (0 = all), support, query.
struct EpisodeTrainOptions {
  int n_way = 0;
  int n_support = 5;
  int n_query = 5;
};

// contrastive (HIB eq. 1).
struct ContrastiveTrainOptions {
  // The distance non-matching pairs are pushed beyond. Only its ratio to the
  // embedding's scale matters, and the loss sets that scale itself; HIB
  // appendix B sweeps it.
  double margin = 1.0;
};

// F-statistic (fstat).
struct FStatisticTrainOptions {
  int top_dims = 3;  // dimensions separated per class pair
};

struct TrainOptions {
  Method method = Method::kHib;  // ParseMethod reads the names
  // 0 (or empty) = the method's default.
  int64_t dim = 0;
  int64_t components = 1;
  int64_t code_dims = 0;
  int64_t code_k = 0;
  // The run's length, one of three (two given is an error): iterations; or
  // budget_items, training items seen in all (iterations = budget_items
  // over the items per batch, an episode's support and query counted), so
  // that pair and episodic methods get the same compute; or epochs, passes
  // over the training items. None: 10000 iterations.
  int64_t iterations = 0;
  int64_t budget_items = 0;
  double epochs = 0;
  int batch_size = 0;
  double lr = 0;
  uint64_t seed = 0;
  int threads = 0;         // 0: hardware cores
  // The backbone of each training step in bfloat16 (CPU autocast; the
  // weights, the heads, the loss, validation and the model file stay
  // float32). Speed and where it pays: docs/cli.md, "Faster steps".
  bool bf16 = false;
  double max_seconds = 0;  // stop after this wall time (0: no limit)

  // Monte Carlo samples K per side: HIB's loss, and the pairs SPE's match
  // parameters are fitted on after training.
  int samples = 8;
  // The options of one method each (the others ignore them).
  HibTrainOptions hib;
  EpisodeTrainOptions episodes;
  ContrastiveTrainOptions contrastive;
  FStatisticTrainOptions fstat;
  // A TorchScript backbone (torch.jit.save of a module mapping an input batch
  // to [B, F] features) instead of the built-in CNN/MLP; it is fine-tuned with
  // the head and its weights go into the model file, which names the script
  // relative to itself when it lies beside it (the two can move together),
  // else by absolute path.
  std::string backbone;
  // Built-in backbone for image data: "cnn" (HIB/SPE's shallow CNN) or "mlp"
  // (one hidden ReLU layer over the flattened pixels, many times more
  // iterations per second on a CPU; bench/RESULTS.md "Training setup").
  // Feature vectors always get the MLP.
  std::string arch = "cnn";
  // CNN sizes (-1: the model file defaults, 32/64 channels, 500 hidden);
  // MLP hidden width.
  int64_t cnn_conv1 = -1;
  int64_t cnn_conv2 = -1;
  int64_t cnn_hidden = -1;
  int64_t mlp_hidden = 1024;

  // Validation / early stopping (needs a validation split in the data).
  int64_t eval_every = 0;    // iterations between validations; 0: auto
  int64_t patience = 10;     // validations without improvement before stopping
  int64_t val_items = 1000;  // validation items scored

  int64_t checkpoint_every = 0;  // 0: no checkpoints by iteration count
  // A checkpoint at least this often (wall time, 0: never), so that a killed
  // run can be resumed. These checkpoints are removed when the run completes;
  // one written on a stop request (stop_requested) is kept.
  double checkpoint_seconds = 600;
  std::string checkpoint_path;  // default: <out>.ckpt
  std::string resume;           // checkpoint to continue from
  std::string out;              // model file (required)

  double progress_seconds = 5;  // progress line interval
  // Receives progress lines (default: stderr).
  std::function<void(const std::string&)> log;
  // Polled after every iteration (e.g. set by Ctrl-C): when it returns true,
  // training stops there as if out of time: a last validation keeps the best
  // model so far in `out` (without validation, the current one), a
  // checkpoint is written, and Train returns OK with TrainResult::interrupted.
  std::function<bool()> stop_requested;
};

struct TrainResult {
  int64_t iterations = 0;       // total, including those before a resume
  int64_t start_iteration = 0;  // > 0 when resumed
  double seconds = 0;
  double items_per_second = 0;  // training inputs through the network per second
  // Mean loss over consecutive windows of iterations (window, mean loss).
  std::vector<std::pair<int64_t, double>> loss_curve;
  double first_loss = 0;  // mean over the first window
  double last_loss = 0;   // mean over the last window
  bool validated = false;
  double best_validation = 0;  // MAP@R on the validation split
  int64_t best_iteration = 0;
  bool early_stopped = false;
  // Stopped by TrainOptions::stop_requested; `checkpoint` then names the
  // checkpoint to --resume from.
  bool interrupted = false;
  std::string checkpoint;
  // With a validation split, the model file carries a calibration map fitted
  // on it (model_file.h: ModelCalibration); `calibration` describes it. A
  // fit that failed leaves calibrated false and calibration_note says why.
  bool calibrated = false;
  CalibrationInfo calibration;
  std::string calibration_note;
  ModelSpec spec;  // what was written to `out`
};

// Fills in a method's defaults (dimensions, batch size, lr) and checks the
// options. InvalidArgument names the bad option.
Status ResolveTrainOptions(TrainOptions* options);

// Trains on data.train (validating on data.validation when it exists) and
// writes options.out, with a calibration map fitted on the validation items
// when there are any (TrainResult::calibrated). Errors: bad options, data the sampler cannot batch
// (e.g. classes with too few items), a checkpoint that does not match,
// torch errors during training (c10::Error is caught and reported).
Status Train(const TrainOptions& options, const EncoderData& data, TrainResult* result);

}  // namespace encoders
}  // namespace hedgedb
