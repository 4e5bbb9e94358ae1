// Database subcommands: create, ingest, search, calibrate, get, remove, fuse,
// stats, list, drop, repair, backup, verify.
// Each one parses its flags, calls hedgedb::DB and prints JSON to stdout.

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hedgedb/db.h"
#include "hedgedb/fuse.h"
#include "hedgedb/match_parameters.h"
#include "hedgedb/types.h"
#include "tools/calibration_pictures.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"
#include "tools/search_flags.h"

namespace hedgedb {
namespace cli {
namespace {

const std::vector<std::string> kKindNames = {"point", "gaussian", "mog", "codes"};
const std::vector<std::string> kRowFormatNames = {"float32", "float16", "bfloat16"};

void AddDbOption(CLI::App* cmd, std::string* db) {
  cmd->add_option("--db", *db, "Database directory")->required();
}

// --read-only, of the commands that only read (search, get, stats, list,
// backup).
void AddReadOnlyFlag(CLI::App* cmd, bool* read_only) {
  cmd->add_flag("--read-only", *read_only,
                "Open the database read-only, beside a process that holds it open for writing: "
                "see its acknowledged batches as of now, write nothing");
}

Access ReadAccess(bool read_only) { return read_only ? Access::kReadOnly : Access::kRead; }

void AddCollectionOption(CLI::App* cmd, std::string* collection, bool required = true) {
  CLI::Option* opt = cmd->add_option("--collection", *collection, "Collection name");
  if (required) opt->required();
}

// ---------------------------------------------------------------- create

struct CreateArgs {
  std::string db;
  CollectionSpec spec;
  std::string kind = "gaussian";
  std::string row_format = "float32";
  CLI::Option* samples_option = nullptr;
};

// MatchParametersNote names the fix by the collection's fields; here they
// are flags, and the commands that give good values.
std::string CommandLineNote(const std::string& note) {
  if (note.empty()) return note;
  return note +
         " (on the command line: create --match-a/--match-b; hedgedb train prints them, hedgedb "
         "generate suggests some for its data; hedgedb calibrate fits them)";
}

void RunCreate(CreateArgs& args) {
  if (!ParseKind(args.kind, &args.spec.kind)) UsageError("unknown kind '" + args.kind + "'");
  if (!ParseRowFormat(args.row_format, &args.spec.row_format)) {
    UsageError("unknown row format '" + args.row_format + "' (float32, float16 or bfloat16)");
  }
  if (args.spec.kind == Kind::kCodes && args.spec.row_format != RowFormat::kFloat32) {
    UsageError("--row-format " + args.row_format +
               " applies to point, gaussian and mog collections only (codes are stored as bytes)");
  }
  if (args.spec.kind == Kind::kCodes && args.spec.code_k == 0) {
    UsageError("--code-k is required for a codes collection");
  }
  // Mixture sampling is stratified (the same count per component): without an
  // explicit --samples, round the default up to a multiple of C rather than
  // make every mog user with C not dividing 8 pass one.
  if (args.spec.kind == Kind::kMog && args.samples_option->count() == 0) {
    args.spec.samples = DefaultSamples(args.spec.components);
  }
  std::unique_ptr<DB> db = OpenDatabase(args.db, /*create_if_missing=*/true);
  Check(db->CreateCollection(args.spec));
  nlohmann::json out;
  // The spec as stored, with the index the collection actually built (an
  // empty --index means the kind's default, which stats names too).
  CollectionStats stats;
  Check(db->GetStats(args.spec.name, &stats));
  out["created"] = SpecDisplayJson(stats.spec);
  // Match parameters that cannot express a match (the defaults): created,
  // but said here, where they can still be chosen (MatchParametersNote).
  const std::string note = CommandLineNote(MatchParametersNote(stats.spec));
  if (!note.empty()) {
    out["warning"] = note;
    std::fprintf(stderr, "hedgedb: warning: %s\n", note.c_str());
  }
  PrintJsonLine(out);
}

void RegisterCreate(CLI::App& app) {
  auto args = std::make_shared<CreateArgs>();
  CLI::App* cmd = app.add_subcommand("create", "Create a collection (and the database if needed)");
  AddDbOption(cmd, &args->db);
  AddCollectionOption(cmd, &args->spec.name);
  cmd->add_option("--kind", args->kind, "Embedding kind")
      ->required()
      ->check(CLI::IsMember(kKindNames));
  cmd->add_option("--dim", args->spec.dim, "D for point/gaussian/mog; d (code length) for codes")
      ->required()
      ->check(Positive());
  cmd->add_option("--components", args->spec.components, "mog: mixture components C")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--code-k", args->spec.code_k, "codes: alphabet size k (2..256)")
      ->check(CLI::Range(2, 256));
  cmd->add_option("--row-format", args->row_format,
                  "How item rows store means and variances: float32, or float16/bfloat16 at half "
                  "the memory and disk (rounded to nearest; float16 refuses values beyond its "
                  "range and variances that would round to 0 (at or below 2^-25); codes ignore it)")
      ->capture_default_str()
      ->check(CLI::IsMember(kRowFormatNames));
  cmd->add_option("--index", args->spec.index_factory,
                  "FAISS factory string of the coarse index, e.g. Flat, HNSW32, IVF1024,Flat "
                  "(default: the kind's default)");
  cmd->add_option("--match-a", args->spec.match_a,
                  "Match probability sigmoid(-a*||z1-z2|| + b): a (> 0)")
      ->capture_default_str();
  cmd->add_option("--match-b", args->spec.match_b, "Match probability: b")->capture_default_str();
  cmd->add_option("--metadata", args->spec.metadata,
                  "Free UTF-8 text kept with the collection (at most 4096 bytes; stats prints it)");
  args->samples_option =
      cmd->add_option("--samples", args->spec.samples,
                      "Default Monte Carlo samples per side (mog: a multiple of C; the default is "
                      "rounded up to one)")
          ->capture_default_str()
          ->check(Positive());
  cmd->add_option("--seed", args->spec.seed, "Default Monte Carlo seed")->capture_default_str();
  cmd->callback([args] { RunCreate(*args); });
}

// ---------------------------------------------------------------- ingest

// The batch is durable now: acknowledge it before the index work that
// closing the database does (training, saving the index file); an index that
// could not take the batch is a warning, not a failure.
void PrintAcknowledgement(const nlohmann::json& out, const IngestResult& result) {
  PrintJsonLine(out);
  std::fflush(stdout);
  if (!result.index_warning.empty()) {
    std::fprintf(stderr, "hedgedb: warning: %s\n", result.index_warning.c_str());
  }
}

struct IngestArgs {
  std::string db, collection, ids, labels, payloads, token;
  bool payloads_base64 = false;
  bool upsert = false;
  EmbeddingFiles files;
};

void RunIngest(const IngestArgs& args) {
  std::unique_ptr<DB> db = OpenDatabase(args.db, false);
  const CollectionSpec spec = DescribeOrFail(*db, args.collection);
  LoadedEmbeddings data;
  data.Load(args.files, spec, /*for_query=*/false);
  const int64_t n = data.rows();

  IngestBatch batch;
  batch.data = data.view();
  std::vector<int64_t> ids, labels;
  std::vector<std::string> payloads;
  if (!args.ids.empty()) {
    ids = ReadIntVector(args.ids, "ids", n);
    batch.ids = ids.data();
  }
  if (!args.labels.empty()) {
    labels = ReadIntVector(args.labels, "labels", n);
    batch.labels = labels.data();
  }
  if (!args.payloads.empty()) {
    payloads = ReadPayloadLines(args.payloads, n, args.payloads_base64);
    batch.payloads = payloads.data();
  }
  batch.token = args.token;
  batch.upsert = args.upsert;
  nlohmann::json out;
  out["ingested"] = n;
  IngestResult result;
  if (n > 0) {
    std::vector<int64_t> written;
    Check(db->Ingest(args.collection, batch, &written, &result));
    if (written.size() != static_cast<size_t>(n)) {
      Fail("the database acknowledged " + std::to_string(written.size()) + " ids for " +
           std::to_string(n) + " items");
    }
    out["first_id"] = written.front();
    out["last_id"] = written.back();
    out["sequence"] = result.sequence;
    if (args.upsert) out["replaced"] = result.replaced;
    if (result.replayed) {
      out["ingested"] = 0;
      out["replayed"] = true;
    }
  }
  PrintAcknowledgement(out, result);
}

void RegisterIngest(CLI::App& app) {
  auto args = std::make_shared<IngestArgs>();
  CLI::App* cmd = app.add_subcommand("ingest", "Add a batch of items to a collection, atomically");
  cmd->footer(
      "Give the files of the collection's kind: --vec (point), --mean --var (gaussian), "
      "--mean --var [--weights] (mog), --codes (codes). Prints {\"ingested\": N, \"first_id\": "
      "a, \"last_id\": b, \"sequence\": s} as soon as the batch is durable. Without --ids or "
      "--token, a retry after a crash may write the batch twice.");
  AddDbOption(cmd, &args->db);
  AddCollectionOption(cmd, &args->collection);
  CLI::Option* ids =
      cmd->add_option("--ids", args->ids,
                      "Item ids, N integers, new and unique (.npy; default: continue after the "
                      "largest id the collection has held)");
  cmd->add_flag("--upsert", args->upsert,
                "Replace the items whose --ids exist (vectors, label and payload; an item given "
                "no label or payload keeps none) and add the others, in one atomic batch; "
                "prints \"replaced\": how many existed")
      ->needs(ids);
  cmd->add_option("--labels", args->labels, "Item labels, N integers (.npy)");
  CLI::Option* payloads =
      cmd->add_option("--payloads", args->payloads,
                      "Text file with one payload per line (N lines), e.g. image paths or JSON");
  cmd->add_flag("--payloads-base64", args->payloads_base64,
                "Each --payloads line is base64 (any bytes, newlines included)")
      ->needs(payloads);
  cmd->add_option("--token", args->token,
                  "Batch token (at most 256 bytes) that makes a retry safe: a batch whose token "
                  "the collection already committed is not written again, and its ids are "
                  "printed with \"replayed\": true");
  AddEmbeddingOptions(cmd, &args->files, /*for_query=*/false);
  cmd->callback([args] { RunIngest(*args); });
}

// ---------------------------------------------------------------- search

// --k, the search flags and --with-payload: what `search` and `fuse --search`
// share.
struct TopKFlags {
  SearchFlags search;
  CLI::Option* k_option = nullptr;
};

void AddTopKFlags(CLI::App* cmd, TopKFlags* flags) {
  flags->k_option =
      cmd->add_option("--k", flags->search.options.k, "Results per query (or give --min-prob)")
          ->check(Positive());
  AddSearchFlags(cmd, &flags->search);
  flags->k_option->excludes(flags->search.min_prob_option);
  flags->k_option->excludes(flags->search.coverage_option);
  flags->k_option->excludes(flags->search.false_match_option);
  cmd->add_flag("--with-payload", flags->search.options.with_payload,
                "Print each result's payload (one record read per result)");
}

SearchOptions ResolveTopKFlags(const TopKFlags& flags) {
  const SearchOptions options = ResolveSearchFlags(flags.search);
  const bool threshold =
      options.min_prob != 0 || options.coverage != 0 || options.max_false_match_rate != 0;
  if (flags.k_option->count() == 0 && !threshold) {
    UsageError(
        "give --k (top-k search), --min-prob (threshold search), --coverage (conformal set) or "
        "--max-false-match-rate (risk-controlled threshold)");
  }
  if (flags.search.max_results_option->count() > 0 && !threshold) {
    UsageError("--max-results needs --min-prob, --coverage or --max-false-match-rate");
  }
  return options;
}

// Searches and prints one JSON line per query, as `search` documents.
void SearchAndPrint(DB& db, const std::string& collection, const EmbeddingView& queries,
                    const SearchOptions& options) {
  std::vector<SearchResult> results;
  Check(db.Search(collection, queries, options, &results));
  for (size_t q = 0; q < results.size(); ++q) {
    PrintJsonLine(SearchResultToJson(static_cast<int64_t>(q), results[q]));
  }
}

struct SearchArgs {
  std::string db, collection;
  EmbeddingFiles files;
  TopKFlags top_k;
  bool read_only = false;
};

void RunSearch(SearchArgs& args) {
  const SearchOptions options = ResolveTopKFlags(args.top_k);
  std::unique_ptr<DB> db = OpenDatabase(args.db, false, ReadAccess(args.read_only));
  const CollectionSpec spec = DescribeOrFail(*db, args.collection);
  LoadedEmbeddings queries;
  queries.Load(args.files, spec, /*for_query=*/true);
  SearchAndPrint(*db, args.collection, queries.view(), options);
  // After the results (a failed search says only why it failed): what
  // their numbers are worth with these match parameters.
  const std::string note =
      CommandLineNote(MatchParametersNote(spec, options.score, options.with_uncertainty));
  if (!note.empty()) std::fprintf(stderr, "hedgedb: warning: %s\n", note.c_str());
}

void RegisterSearch(CLI::App& app) {
  auto args = std::make_shared<SearchArgs>();
  CLI::App* cmd =
      app.add_subcommand("search", "Top-k search: FAISS candidates, then exact rescoring");
  cmd->footer(
      "Queries: --vec (point), --mean --var [--weights] (gaussian/mog), --logp (codes). Prints "
      "one JSON line per query, best result first: {\"query\": q, \"query_uncertainty\": eta, "
      "\"results\": [{\"id\", \"score\", \"prob\", \"uncertainty\", \"label\"}, ...]} "
      "(prob, uncertainty and label only where they exist: prob is the calibrated probability "
      "that the item shares the query's label, once the collection is calibrated for the "
      "score; mc results also carry std_error and samples). A score of -inf (a codes query giving "
      "an item's symbol probability 0) prints "
      "as null. With a filter (--label, --label-not-in, --payload-equals) the line also says "
      "\"passing\": how many items pass it; when fewer than k do, the results are exactly "
      "those.");
  AddDbOption(cmd, &args->db);
  AddReadOnlyFlag(cmd, &args->read_only);
  AddCollectionOption(cmd, &args->collection);
  AddEmbeddingOptions(cmd, &args->files, /*for_query=*/true);
  AddTopKFlags(cmd, &args->top_k);
  cmd->callback([args] { RunSearch(*args); });
}

// ---------------------------------------------------------------- calibrate

struct CalibrateArgs {
  std::string db, collection, score = "default", query_labels, plots, format = "json";
  std::string match_parameters = "auto";
  EmbeddingFiles queries;
  CalibrateOptions options;
  CLI::Option* seed_option = nullptr;
  bool remove = false;
};

void RunCalibrate(CalibrateArgs& args) {
  CalibrateOptions& o = args.options;
  if (!ParseScore(args.score, &o.score)) UsageError("unknown score '" + args.score + "'");
  if (!ParseMatchParameters(args.match_parameters, &o.match_parameters)) {
    UsageError("unknown --match-parameters '" + args.match_parameters + "' (auto, fit or keep)");
  }
  o.has_seed = args.seed_option->count() > 0;
  std::unique_ptr<DB> db = OpenDatabase(args.db, false);
  const CollectionSpec spec = DescribeOrFail(*db, args.collection);
  nlohmann::json out;
  out["collection"] = args.collection;
  out["score"] = ScoreName(ResolveScore(spec.kind, o.score));
  if (args.remove) {
    Check(db->RemoveCalibration(args.collection, o.score));
    out["removed"] = true;
    PrintJsonLine(out);
    return;
  }
  LoadedEmbeddings queries;
  std::vector<int64_t> labels;
  const bool held_out =
      !args.queries.vec.empty() || !args.queries.mean.empty() || !args.queries.logp.empty();
  if (held_out != !args.query_labels.empty()) {
    UsageError("held-out queries need --query-labels, and --query-labels needs the queries");
  }
  if (held_out) {
    queries.Load(args.queries, spec, /*for_query=*/true);
    labels = ReadIntVector(args.query_labels, "query labels", queries.rows());
    o.queries = queries.view();
    o.query_labels = labels.data();
  }
  CalibrationReport report;
  Check(db->Calibrate(args.collection, o, &report));
  out.update(CalibrationReportToJson(report));
  if (!args.plots.empty()) {
    out["pictures"] = WriteCalibrationPictures(report, args.plots, args.collection);
  }
  if (args.format == "json") {
    PrintJsonLine(out);
    return;
  }
  std::printf(
      "calibration of '%s', score %s: %s on %lld pairs from %lld queries (%.2f%% match)%s\n",
      args.collection.c_str(), ScoreName(report.info.score), report.info.method.c_str(),
      static_cast<long long>(report.info.pairs), static_cast<long long>(report.queries),
      100.0 * report.info.base_rate, report.stored ? "" : " [not stored: --dry-run]");
  if (report.match_parameters_fitted) {
    std::printf(
        "  match parameters fitted to the labelled pairs: match_a %g -> %g, match_b %g -> %g%s\n",
        report.match_a_before, report.match_a, report.match_b_before, report.match_b,
        report.stored ? " (stored; the collection's other maps were removed)" : "");
  }
  if (!report.match_parameters_note.empty()) {
    std::printf("  %s\n", report.match_parameters_note.c_str());
  }
  std::printf("  %s\n", report.info.reason.c_str());
  if (report.info.conditional) {
    std::printf("  conditioned on: %s\n", report.info.conditioned_on.c_str());
  }
  if (report.info.conformal_queries > 0) {
    std::printf(
        "  conformal match sets and false-match bounds: %lld queries kept out of the fit, with "
        "%lld non-matching pairs\n",
        static_cast<long long>(report.info.conformal_queries),
        static_cast<long long>(report.info.held_out_non_matches));
  }
  std::printf("  %-24s %8s %8s %8s %8s %9s %12s %16s\n", "", "ECE", "ECE@1", "ECE@10", "Brier",
              "log loss", "precision@1", "mean top-1 prob");
  auto row = [](const char* name, const CalibrationQuality& q) {
    std::printf("  %-24s %8.4f %8.4f %8.4f %8.4f %9.4f %12.3f %16.3f\n", name, q.ece, q.ece_top1,
                q.ece_top10, q.brier, q.log_loss, q.precision_at_1, q.mean_top1_prob);
  };
  row("raw score", report.before);
  row("calibrated (held out)", report.after);
  // Top-1 calibration within quartiles of query eta.
  auto quartiles = [](const char* name, const CalibrationQuality& q) {
    if (q.eta_quartiles.empty() || std::isnan(q.worst_eta_gap)) return;
    std::printf("  %s, top-1 by quartile of query eta (worst gap %.3f):\n", name, q.worst_eta_gap);
    std::printf("    %-21s %8s %12s %12s %8s\n", "eta", "queries", "mean top-1 p", "precision@1",
                "gap");
    for (const EtaGroupQuality& g : q.eta_quartiles) {
      char range[64];
      std::snprintf(range, sizeof(range), "%.4g - %.4g", g.eta_lo, g.eta_hi);
      std::printf("    %-21s %8lld %12.3f %12.3f %+8.3f\n", range,
                  static_cast<long long>(g.queries), g.mean_top1_prob, g.precision_at_1, g.gap);
    }
  };
  quartiles("raw score", report.before);
  quartiles("calibrated (held out)", report.after);
  // Abstention: how well each confidence puts the wrong top-1 answers last.
  const CalibrationQuality& a = report.after;
  if (!std::isnan(a.erc_area_oracle)) {
    auto area = [](double v) {
      char text[16];
      std::snprintf(text, sizeof(text), "%.4f", v);
      return std::isnan(v) ? std::string("-") : std::string(text);
    };
    std::printf(
        "  error-versus-reject area of the top-1 (lower is better): by eta %s, by p %s, by raw "
        "score %s; oracle %s, no information %s\n",
        area(a.erc_area_eta).c_str(), area(a.erc_area_prob).c_str(),
        area(report.before.erc_area_prob).c_str(), area(a.erc_area_oracle).c_str(),
        area(1 - a.precision_at_1).c_str());
  }
  for (const auto& path : out.value("pictures", nlohmann::json::array())) {
    std::printf("  picture: %s\n", path.get<std::string>().c_str());
  }
  std::fflush(stdout);
}

void RegisterCalibrate(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Fit and store the map from a score to P(same label) on labelled pairs, and report its "
      "quality before and after");
  cmd->footer(
      "Pairs: each sampled labelled item of the collection against every other labelled item "
      "(the collection's own base rate), or held-out queries (--vec / --mean --var / --logp "
      "with --query-labels) against every labelled item. The method (platt, beta, isotonic, or "
      "conditional: on the score, the result's rank, its gap to the next score and the query's "
      "and item's eta) is chosen by held-out log loss, cross-fitted by query. \"after\" is "
      "measured on queries the map was not "
      "fitted on. Prints one JSON line; searches then return \"prob\" and accept --min-prob. "
      "See docs/calibration.md.");
  AddDbOption(cmd, &args->db);
  AddCollectionOption(cmd, &args->collection);
  cmd->add_option("--score", args->score,
                  "Score to calibrate (default: the kind's default score); each score has its "
                  "own map")
      ->capture_default_str()
      ->check(CLI::IsMember(ScoreFlagNames()));
  cmd->add_option("--samples", args->options.samples,
                  "Monte Carlo samples per side of the pair scores (default: the collection's)")
      ->check(Positive());
  args->seed_option =
      cmd->add_option("--seed", args->options.seed, "Monte Carlo seed (default: the collection's)");
  cmd->add_option("--max-pairs", args->options.max_pairs,
                  "At most this many labelled pairs (queries are sampled to fit)")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--top-ranks", args->options.top_ranks,
                  "Fit on each query's best R items only (0: on all its pairs)")
      ->capture_default_str()
      ->check(NonNegative());
  cmd->add_option("--sample-seed", args->options.sample_seed,
                  "Seed of the query sample and of the held-out split")
      ->capture_default_str();
  AddEmbeddingOptions(cmd, &args->queries, /*for_query=*/true);
  cmd->add_option("--query-labels", args->query_labels,
                  "Labels of the held-out queries, a 1-d integer .npy");
  cmd->add_option("--conformal-fraction", args->options.conformal_fraction,
                  "Keep this fraction of the queries out of the fit, for conformal match sets "
                  "(search --coverage)")
      ->check(CLI::Range(0.0, 0.999999));
  cmd->add_flag("--unconditional", args->options.unconditional,
                "Calibrate the score alone (platt, beta or isotonic), not the map conditional on "
                "rank, gap and eta");
  cmd->add_option("--match-parameters", args->match_parameters,
                  "gaussian and mog: auto fits match_a and match_b to the labelled items when "
                  "they cannot express a match (match_b <= 0, as the defaults), fit always, keep "
                  "never; fitted ones replace the collection's, and its other maps are removed")
      ->capture_default_str()
      ->check(CLI::IsMember(std::vector<std::string>{"auto", "fit", "keep"}));
  cmd->add_flag("--dry-run", args->options.dry_run, "Fit and report, but store nothing");
  cmd->add_option("--format", args->format, "json (one line) or table (for people)")
      ->capture_default_str()
      ->check(CLI::IsMember(std::vector<std::string>{"json", "table"}));
  cmd->add_option("--plots", args->plots,
                  "Directory for reliability.png (raw and calibrated) and uncertainty.png "
                  "(precision@1 as the most uncertain queries are dropped)");
  CLI::Option* remove = cmd->add_flag(
      "--remove", args->remove, "Delete the stored calibration of the score instead of fitting");
  remove->excludes(cmd->get_option("--dry-run"));
  remove->excludes(cmd->get_option("--match-parameters"));
  cmd->callback([args] { RunCalibrate(*args); });
}

// ---------------------------------------------------------------- get / remove

struct IdsArgs {
  std::string db, collection, ids_file;
  std::vector<int64_t> ids;  // --id, repeatable
  bool read_only = false;
};

// The ids of --ids FILE or of the --id flags (exactly one of the two).
std::vector<int64_t> IdsOf(const IdsArgs& args) {
  if (args.ids_file.empty() == args.ids.empty()) UsageError("give either --ids FILE or --id ID");
  return args.ids_file.empty() ? args.ids : ReadIntVector(args.ids_file, "ids", -1);
}

void RunGet(const IdsArgs& args) {
  const std::vector<int64_t> ids = IdsOf(args);
  std::unique_ptr<DB> db = OpenDatabase(args.db, false, ReadAccess(args.read_only));
  const CollectionSpec spec = DescribeOrFail(*db, args.collection);
  std::vector<Record> records;
  Check(db->Get(args.collection, ids.data(), ids.size(), &records));
  for (const Record& record : records) PrintJsonLine(RecordToJson(record, spec));
}

void RunRemove(const IdsArgs& args) {
  const std::vector<int64_t> ids = IdsOf(args);
  std::unique_ptr<DB> db = OpenDatabase(args.db, false);
  DescribeOrFail(*db, args.collection);
  int64_t removed = 0;
  Check(db->Remove(args.collection, ids.data(), ids.size(), &removed));
  nlohmann::json out;
  out["removed"] = removed;
  PrintJsonLine(out);
}

// --ids FILE or --id ID (repeatable, or a comma-separated list).
void AddIdsOptions(CLI::App* cmd, IdsArgs* args) {
  CLI::Option* file = cmd->add_option("--ids", args->ids_file, "Item ids, a 1-d integer .npy");
  cmd->add_option("--id", args->ids,
                  "An item id (repeatable, or comma-separated: --id 3,7,9); instead of --ids")
      ->delimiter(',')
      ->excludes(file);
}

void RegisterIdsCommand(CLI::App& app, const char* name, const char* description,
                        void (*run)(const IdsArgs&), bool reads_only) {
  auto args = std::make_shared<IdsArgs>();
  CLI::App* cmd = app.add_subcommand(name, description);
  AddDbOption(cmd, &args->db);
  if (reads_only) AddReadOnlyFlag(cmd, &args->read_only);
  AddCollectionOption(cmd, &args->collection);
  AddIdsOptions(cmd, args.get());
  cmd->callback([args, run] { run(*args); });
}

// ---------------------------------------------------------------- fuse

struct FuseArgs {
  IdsArgs items;  // db, collection and the stored items' ids
  EmbeddingFiles files;
  bool store = false, search = false;
  std::string out_mean, out_var, out_weights, payload;
  CLI::Option* new_id = nullptr;
  CLI::Option* label = nullptr;
  int64_t new_id_value = 0, label_value = 0;
  TopKFlags top_k;
};

// The embeddings of stored items, fused by id: read with DB::Get, in the
// item layout of the collection's kind (FuseGaussians refuses the kinds it
// does not fuse before it reads the rows).
struct StoredItems {
  std::vector<float> mean, var, weights;
  EmbeddingView view;
};

void ReadStoredItems(DB& db, const std::string& collection, const std::vector<int64_t>& ids,
                     StoredItems* items) {
  std::set<int64_t> seen;
  for (int64_t id : ids) {
    // Fusing an item twice would count its evidence twice.
    if (!seen.insert(id).second) Fail("id " + std::to_string(id) + " is given twice");
  }
  std::vector<Record> records;
  Check(db.Get(collection, ids.data(), ids.size(), &records));
  for (const Record& r : records) {
    if (!r.found) {
      Fail("no item with id " + std::to_string(r.id) + " in collection '" + collection + "'");
    }
    items->mean.insert(items->mean.end(), r.mean.begin(), r.mean.end());
    items->var.insert(items->var.end(), r.var.begin(), r.var.end());
    items->weights.insert(items->weights.end(), r.weights.begin(), r.weights.end());
  }
  items->view.n = static_cast<int64_t>(records.size());
  if (!items->mean.empty()) items->view.mean = items->mean.data();
  if (!items->var.empty()) items->view.var = items->var.data();
  if (!items->weights.empty()) items->view.weights = items->weights.data();
}

void WriteNpyOrFail(const std::string& path, const NpyArray& array) {
  const Status s = WriteNpy(path, array);
  if (!s.ok()) Fail(s.message());
}

void RunFuse(FuseArgs& args) {
  const IdsArgs& by_id = args.items;
  const EmbeddingFiles& f = args.files;
  const bool from_ids = !by_id.ids_file.empty() || !by_id.ids.empty();
  bool from_files = false;
  for (const std::string* file :
       {&f.vec, &f.mean, &f.var, &f.std, &f.log_var, &f.log_std, &f.weights, &f.codes}) {
    from_files = from_files || !file->empty();
  }
  if (from_ids == from_files) {
    UsageError(
        "give the items to fuse once: stored items (--ids FILE or --id ID) or embeddings from "
        "files (--mean with --var, --std, --log-var or --log-std)");
  }
  // Two outputs written into one file would leave only the last of them.
  const std::pair<const char*, const std::string*> outputs[] = {
      {"--out-mean", &args.out_mean},
      {"--out-var", &args.out_var},
      {"--out-weights", &args.out_weights}};
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = i + 1; j < 3; ++j) {
      if (outputs[i].second->empty() || outputs[j].second->empty()) continue;
      std::error_code e1, e2;
      const std::filesystem::path a = std::filesystem::weakly_canonical(*outputs[i].second, e1);
      const std::filesystem::path b = std::filesystem::weakly_canonical(*outputs[j].second, e2);
      if (*outputs[i].second == *outputs[j].second || (!e1 && !e2 && a == b)) {
        UsageError(std::string(outputs[i].first) + " and " + outputs[j].first +
                   " name the same file '" + *outputs[j].second + "'");
      }
    }
  }
  SearchOptions options;
  if (args.search) options = ResolveTopKFlags(args.top_k);
  std::unique_ptr<DB> db = OpenDatabase(by_id.db, false);
  const CollectionSpec spec = DescribeOrFail(*db, by_id.collection);
  if (!args.out_weights.empty() && spec.kind != Kind::kMog) {
    UsageError("--out-weights applies to mog collections only");
  }
  StoredItems stored;
  LoadedEmbeddings loaded;
  if (from_ids) {
    ReadStoredItems(*db, by_id.collection, IdsOf(by_id), &stored);
  } else {
    loaded.Load(f, spec, /*for_query=*/false);
  }
  const EmbeddingView& items = from_ids ? stored.view : loaded.view();
  std::vector<float> mean, var, weights;
  Check(FuseGaussians(spec, items, &mean, &var, &weights));

  EmbeddingView fused;
  fused.n = 1;
  fused.mean = mean.data();
  fused.var = var.data();
  if (!weights.empty()) fused.weights = weights.data();
  // As one row of an ingest or search file: (1, D), or (1, C, D) for mog.
  const int64_t d = spec.dim;
  const std::vector<int64_t> shape = spec.kind == Kind::kMog
                                         ? std::vector<int64_t>{1, int64_t(weights.size()), d}
                                         : std::vector<int64_t>{1, d};
  if (!args.out_mean.empty()) WriteNpyOrFail(args.out_mean, MakeNpy(mean, shape));
  if (!args.out_var.empty()) WriteNpyOrFail(args.out_var, MakeNpy(var, shape));
  if (!args.out_weights.empty()) {
    WriteNpyOrFail(args.out_weights, MakeNpy(weights, {1, int64_t(weights.size())}));
  }
  if (args.search) {
    SearchAndPrint(*db, by_id.collection, fused, options);
    return;
  }
  nlohmann::json out;
  out["fused"] = items.n;
  if (args.store) {
    IngestBatch batch;
    batch.data = fused;
    if (args.new_id->count() > 0) batch.ids = &args.new_id_value;
    if (args.label->count() > 0) batch.labels = &args.label_value;
    if (!args.payload.empty()) batch.payloads = &args.payload;
    std::vector<int64_t> written;
    IngestResult result;
    Check(db->Ingest(by_id.collection, batch, &written, &result));
    out["id"] = written.at(0);
    out["sequence"] = result.sequence;
    PrintAcknowledgement(out, result);
    return;
  }
  if (!args.out_mean.empty()) {
    // The arrays went to files; the line says where.
    out["out_mean"] = args.out_mean;
    out["out_var"] = args.out_var;
    if (!args.out_weights.empty()) out["out_weights"] = args.out_weights;
  } else if (spec.kind == Kind::kMog) {
    out["weights"] = JsonFloats(weights.data(), weights.size());
    out["mean"] = JsonFloatMatrix(mean.data(), weights.size(), size_t(d));
    out["var"] = JsonFloatMatrix(var.data(), weights.size(), size_t(d));
  } else {
    out["mean"] = JsonFloats(mean.data(), mean.size());
    out["var"] = JsonFloats(var.data(), var.size());
  }
  PrintJsonLine(out);
}

void RegisterFuse(CLI::App& app) {
  auto args = std::make_shared<FuseArgs>();
  CLI::App* cmd = app.add_subcommand(
      "fuse",
      "Template fusion: merge several Gaussian embeddings of one subject into one (the product "
      "of the Gaussians), then print it, store it or search with it");
  cmd->footer(
      "Per dimension: 1/var = sum_i 1/var_i and mean = var * sum_i mean_i/var_i, so each item "
      "counts by its precision (docs/cli.md, \"Template fusion\"). The items are stored ones "
      "(--ids FILE or --id 3,7,9) or the rows of files given as for ingest (--mean with --var, "
      "--std, --log-var or --log-std). Defined for gaussian collections; for mog only where the "
      "product of n mixtures (C^n components) fits the collection's C: one item or C = 1; point "
      "and codes collections are refused. Prints {\"fused\": n, \"mean\": [...], \"var\": "
      "[...]}; with --out-mean/--out-var the arrays go to .npy files of shape (1, D) (mog: "
      "(1, C, D)) that ingest and search read; --store prints {\"fused\": n, \"id\": i, "
      "\"sequence\": s}; --search prints the lines of hedgedb search for the one fused query. "
      "On any error nothing is written to the database.");
  AddDbOption(cmd, &args->items.db);
  AddCollectionOption(cmd, &args->items.collection);
  AddIdsOptions(cmd, &args->items);
  AddEmbeddingOptions(cmd, &args->files, /*for_query=*/false);
  CLI::Option* out_mean =
      cmd->add_option("--out-mean", args->out_mean, "Write the fused mean to this .npy file");
  CLI::Option* out_var = cmd->add_option("--out-var", args->out_var,
                                         "Write the fused variances to this .npy file (with "
                                         "--out-mean: the printed line then names the files)");
  out_mean->needs(out_var);
  out_var->needs(out_mean);
  cmd->add_option("--out-weights", args->out_weights,
                  "mog: write the fused component weights to this .npy file");
  CLI::Option* store =
      cmd->add_flag("--store", args->store, "Store the fused embedding as a new item (atomically)");
  args->new_id = cmd->add_option("--new-id", args->new_id_value,
                                 "--store: the new item's id (default: after the largest id the "
                                 "collection has held)")
                     ->needs(store);
  args->label = cmd->add_option("--new-label", args->label_value, "--store: the new item's label")
                    ->needs(store);
  cmd->add_option("--new-payload", args->payload, "--store: the new item's payload (text)")
      ->needs(store);
  CLI::Option* search =
      cmd->add_flag("--search", args->search,
                    "Search the collection with the fused embedding (as hedgedb search; give --k "
                    "or --min-prob)")
          ->excludes(store);
  const size_t before = cmd->get_options().size();
  AddTopKFlags(cmd, &args->top_k);
  const std::vector<CLI::Option*> all = cmd->get_options();
  for (size_t i = before; i < all.size(); ++i) all[i]->needs(search);
  cmd->callback([args] { RunFuse(*args); });
}

// ---------------------------------------------------------------- stats / list / drop

struct CollectionArgs {
  std::string db, collection;
  bool read_only = false;  // stats, list
};

void RunStats(const CollectionArgs& args) {
  std::unique_ptr<DB> db = OpenDatabase(args.db, false, ReadAccess(args.read_only));
  std::vector<std::string> names;
  if (args.collection.empty()) {
    Check(db->ListCollections(&names));
  } else {
    names.push_back(args.collection);
  }
  nlohmann::json all = nlohmann::json::array();
  std::string first_error;
  for (const std::string& name : names) {
    CollectionStats stats;
    const Status s = db->GetStats(name, &stats);
    if (!args.collection.empty()) Check(s);
    if (s.ok()) {
      all.push_back(StatsToJson(stats));
    } else {
      // A damaged collection is listed with its error; the others still are.
      all.push_back({{"name", name}, {"error", s.ToString()}});
      if (first_error.empty()) first_error = s.ToString();
    }
  }
  if (args.collection.empty()) {
    nlohmann::json out;
    out["collections"] = std::move(all);
    PrintJsonLine(out);
  } else {
    PrintJsonLine(all[0]);
  }
  if (!first_error.empty()) Fail("a collection cannot be opened: " + first_error);
}

void RunList(const CollectionArgs& args) {
  std::unique_ptr<DB> db = OpenDatabase(args.db, false, ReadAccess(args.read_only));
  std::vector<std::string> names;
  Check(db->ListCollections(&names));
  nlohmann::json out;
  out["collections"] = names;
  PrintJsonLine(out);
}

void RunDrop(const CollectionArgs& args) {
  std::unique_ptr<DB> db = OpenDatabase(args.db, false);
  Check(db->DropCollection(args.collection));
  nlohmann::json out;
  out["dropped"] = args.collection;
  PrintJsonLine(out);
}

void RunRepair(const CollectionArgs& args) {
  RepairReport report;
  Check(RepairDB(args.db, &report));
  // Open every collection once: their index files are rebuilt from what the
  // repair salvaged.
  std::unique_ptr<DB> db = OpenDatabase(args.db, false);
  std::vector<std::string> names;
  Check(db->ListCollections(&names));
  nlohmann::json collections = nlohmann::json::array();
  for (const std::string& name : names) {
    CollectionStats stats;
    const Status s = db->GetStats(name, &stats);
    nlohmann::json j = {{"name", name}};
    if (s.ok()) {
      j["items"] = stats.items;
      j["max_id"] = stats.max_id;
    } else {
      j["error"] = s.ToString();
    }
    for (const RepairCollection& c : report.collections) {
      if (c.name != name) continue;
      j["restored_from_snapshot"] = c.restored;
      if (c.lost_records > 0) j["lost_records"] = c.lost_records;
      if (c.lost_payloads > 0) j["lost_payloads"] = c.lost_payloads;
      if (c.possibly_lost) j["possibly_lost"] = true;
      if (!c.note.empty()) j["note"] = c.note;
    }
    collections.push_back(std::move(j));
  }
  nlohmann::json out;
  out["repaired"] = args.db;
  out["set_aside"] = report.set_aside;
  out["complete"] = report.complete();
  if (report.lost_catalog_entries > 0) out["lost_catalog_entries"] = report.lost_catalog_entries;
  if (report.catalog_possibly_lost) out["catalog_possibly_lost"] = true;
  out["collections"] = std::move(collections);
  PrintJsonLine(out);
  if (!report.complete()) {
    Fail(
        "repair could not recover everything (see lost_records, lost_payloads, possibly_lost); "
        "the damaged table files are kept in " +
        args.db + "/store/lost/");
  }
}

struct BackupArgs {
  std::string db, to;
  bool read_only = false;
};

void RunBackup(const BackupArgs& args) {
  std::unique_ptr<DB> db = OpenDatabase(args.db, false, ReadAccess(args.read_only));
  BackupResult result;
  Check(db->Backup(args.to, &result));
  nlohmann::json collections = nlohmann::json::array();
  for (const BackupCollection& c : result.collections) {
    collections.push_back({{"name", c.name},
                           {"items", c.items},
                           {"sequence", c.sequence},
                           {"index_copied", c.index_copied}});
  }
  nlohmann::json out;
  out["backup"] = args.to;
  out["collections"] = std::move(collections);
  PrintJsonLine(out);
}

nlohmann::json FindingsToJson(const std::vector<VerifyFinding>& findings) {
  nlohmann::json all = nlohmann::json::array();
  for (const VerifyFinding& f : findings) {
    nlohmann::json j = {{"kind", f.kind}};
    if (!f.collection.empty()) j["collection"] = f.collection;
    if (f.has_ids) {
      j["first_id"] = f.first_id;
      j["last_id"] = f.last_id;
      j["count"] = f.count;
    }
    j["detail"] = f.detail;
    all.push_back(std::move(j));
  }
  return all;
}

void RunVerify(const CollectionArgs& args) {
  // Read-only: the database is not opened for writing (no index rebuild).
  VerifyReport report;
  Check(VerifyDB(args.db, args.collection, &report));
  nlohmann::json collections = nlohmann::json::array();
  for (const VerifyCollection& c : report.collections) {
    nlohmann::json j = {{"name", c.name}, {"items", c.items}, {"sequence", c.sequence}};
    j["index_present"] = c.index_present;
    if (c.index_present) {
      j["index_sequence"] = c.index_sequence;
      j["index_ids"] = c.index_ids;
      j["index_tombstones"] = c.index_tombstones;
    }
    collections.push_back(std::move(j));
  }
  nlohmann::json out;
  out["ok"] = report.ok();
  out["problems"] = FindingsToJson(report.problems);
  out["notes"] = FindingsToJson(report.notes);
  out["collections"] = std::move(collections);
  PrintJsonLine(out);
  if (!report.ok()) {
    Fail("verify found " + std::to_string(report.problems.size()) + " problem(s), the first: " +
         report.problems.front().kind + ": " + report.problems.front().detail);
  }
}

void RegisterCollectionCommands(CLI::App& app) {
  auto stats = std::make_shared<CollectionArgs>();
  CLI::App* cmd = app.add_subcommand(
      "stats", "Print collection statistics as JSON (of all collections by default)");
  AddDbOption(cmd, &stats->db);
  AddReadOnlyFlag(cmd, &stats->read_only);
  AddCollectionOption(cmd, &stats->collection, /*required=*/false);
  cmd->callback([stats] { RunStats(*stats); });

  auto list = std::make_shared<CollectionArgs>();
  cmd = app.add_subcommand("list", "List the collections of a database");
  AddDbOption(cmd, &list->db);
  AddReadOnlyFlag(cmd, &list->read_only);
  cmd->callback([list] { RunList(*list); });

  auto drop = std::make_shared<CollectionArgs>();
  cmd = app.add_subcommand("drop",
                           "Delete a collection, its records and its index (damaged ones too)");
  AddDbOption(cmd, &drop->db);
  AddCollectionOption(cmd, &drop->collection);
  cmd->callback([drop] { RunDrop(*drop); });

  auto repair = std::make_shared<CollectionArgs>();
  cmd = app.add_subcommand(
      "repair",
      "Repair a damaged record store (RocksDB repair: salvages every readable file; records of "
      "a table set aside come back from the collection's arena snapshot where it agrees with "
      "the rest), then rebuild every index; prints what each collection holds afterwards, and "
      "exits 1 if anything readable could not be kept");
  cmd->footer(
      "Run it when a command reports that the store is damaged, with no other process using the "
      "database. Take a copy of the directory first: records in unreadable files are lost.");
  AddDbOption(cmd, &repair->db);
  cmd->callback([repair] { RunRepair(*repair); });

  auto backup = std::make_shared<BackupArgs>();
  cmd = app.add_subcommand(
      "backup",
      "Copy the database into a new or empty directory (a RocksDB checkpoint, hard links where "
      "possible, plus the index files); prints each collection's items and sequence");
  cmd->footer(
      "The command opens the database like any other command, so no other process may write "
      "it meanwhile, unless --read-only: the copy then holds every batch the writer "
      "acknowledged before the command started (the reader's view, copied key by key; a "
      "program that keeps the database open can also back it up with DB::Backup while it "
      "writes). Restore by opening the copy's directory.");
  AddDbOption(cmd, &backup->db);
  AddReadOnlyFlag(cmd, &backup->read_only);
  cmd->add_option("--to", backup->to, "Backup directory (must not exist, or be empty)")->required();
  cmd->callback([backup] { RunBackup(*backup); });

  auto verify = std::make_shared<CollectionArgs>();
  cmd = app.add_subcommand(
      "verify",
      "Check every record, payload, calibration and index file without changing anything; "
      "prints the problems found as JSON, exit code 1 if there are any");
  AddDbOption(cmd, &verify->db);
  AddCollectionOption(cmd, &verify->collection, /*required=*/false);
  cmd->callback([verify] { RunVerify(*verify); });
}

}  // namespace

void RegisterEngineCommands(CLI::App& app) {
  RegisterCreate(app);
  RegisterIngest(app);
  RegisterSearch(app);
  RegisterCalibrate(app);
  RegisterIdsCommand(app, "get",
                     "Print stored items by id, one JSON line each (\"found\": false if unknown)",
                     RunGet, /*reads_only=*/true);
  RegisterIdsCommand(app, "remove", "Remove items by id; an unknown id fails and removes nothing",
                     RunRemove, /*reads_only=*/false);
  RegisterFuse(app);
  RegisterCollectionCommands(app);
}

}  // namespace cli
}  // namespace hedgedb
