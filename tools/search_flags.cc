#include "tools/search_flags.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "tools/cli_util.h"
#include "tools/flag_checks.h"

namespace hedgedb {
namespace cli {

const std::vector<std::string>& ScoreFlagNames() {
  static const std::vector<std::string> names = {"default", "mc",    "csd",    "mls",
                                                 "l2",      "match", "logprob"};
  return names;
}

void AddSearchFlags(CLI::App* cmd, SearchFlags* flags) {
  SearchOptions& o = flags->options;
  cmd->add_option("--score", flags->score,
                  "Exact score: mc (Monte Carlo match probability), csd (closed-form expected "
                  "squared distance), mls (mutual likelihood), l2, match, logprob (codes); "
                  "default: mc for gaussian/mog, match for point, logprob for codes")
      ->capture_default_str()
      ->check(CLI::IsMember(ScoreFlagNames()));
  CLI::Option* candidates = cmd->add_option("--candidates", o.candidates,
                                            "Stage-1 candidate count (default: k * --oversampling)")
                                ->check(Positive());
  cmd->add_option("--oversampling", o.oversampling,
                  "Candidates per result when --candidates is not given (default: the count "
                  "fitted with the collection's index, stats' index_candidates / 10; 10 where "
                  "none is fitted)")
      ->check(Positive());
  cmd->add_flag("--exhaustive", o.exhaustive,
                "Score every item exactly, skipping FAISS (the ground truth)")
      ->excludes(candidates);
  cmd->add_option("--samples", flags->samples,
                  "Monte Carlo samples per side (default: the collection's), or auto: start "
                  "there and double K, up to --max-samples, for the candidates whose 95% "
                  "interval straddles the k-th boundary");
  cmd->add_option("--max-samples", o.max_samples, "Cap of --samples auto")
      ->capture_default_str()
      ->check(Positive());
  flags->seed_option =
      cmd->add_option("--seed", o.seed, "Monte Carlo seed (default: the collection's)");
  cmd->add_option("--nprobe", o.nprobe, "FAISS IVF nprobe (default: the index's)")
      ->check(Positive());
  cmd->add_option(
         "--ef-search", o.ef_search,
         "FAISS HNSW efSearch, at most " + std::to_string(kMaxEfSearch) + " (default: the index's)")
      ->check(NumberIn(1, kMaxEfSearch));
  cmd->add_flag("--no-uncertainty", flags->no_uncertainty,
                "Skip the uncertainty eta of results and queries (faster)");
  flags->min_prob_option =
      cmd->add_option("--min-prob", o.min_prob,
                      "Threshold search: every item whose calibrated probability is at least P "
                      "(in (0, 1]), best first, instead of the top k; needs a calibration of the "
                      "score (hedgedb calibrate)")
          ->check(NumberIn(0.0, 1.0));
  flags->coverage_option =
      cmd->add_option("--coverage", o.coverage,
                      "Conformal match set: the items whose calibrated probability clears the "
                      "threshold that holds a same-label item with this probability (in (0, 1)); "
                      "needs a calibration fitted with --conformal-fraction")
          ->check(NumberInOpen(0.0, 1.0))
          ->excludes(flags->min_prob_option);
  cmd->add_flag("--coverage-by-eta", o.coverage_by_eta,
                "With --coverage: the threshold of the query's quartile of eta among the "
                "conformal queries, so coverage holds within each quartile (gaussian, mog)")
      ->needs(flags->coverage_option);
  flags->false_match_option =
      cmd->add_option("--max-false-match-rate", o.max_false_match_rate,
                      "Risk-controlled threshold: the items whose calibrated probability clears "
                      "the smallest threshold whose false-match rate (the share of non-matching "
                      "pairs that clear it) is at most this (in (0, 1)) with --confidence; needs "
                      "a calibration fitted with --conformal-fraction")
          ->check(NumberInOpen(0.0, 1.0))
          ->excludes(flags->min_prob_option)
          ->excludes(flags->coverage_option);
  cmd->add_option("--confidence", o.confidence,
                  "With --max-false-match-rate: the probability that the bound holds (in (0, 1))")
      ->capture_default_str()
      ->check(NumberInOpen(0.0, 1.0))
      ->needs(flags->false_match_option);
  flags->max_results_option =
      cmd->add_option("--max-results", o.max_results,
                      "Threshold search, --coverage and --max-false-match-rate: at most this many results per query (the "
                      "line says \"truncated\": true when more qualified)")
          ->capture_default_str()
          ->check(Positive());
  CLI::Option* label_in =
      cmd->add_option("--label", flags->label_in,
                      "Filter: only items whose label is one of these (comma-separated)")
          ->delimiter(',');
  cmd->add_option("--label-not-in", flags->label_not_in,
                  "Filter: only items with no label or a label not among these (comma-separated)")
      ->delimiter(',')
      ->excludes(label_in);
  cmd->add_option("--payload-equals", flags->payload_equals,
                  "Filter: only items whose payload is a JSON object with top-level FIELD equal "
                  "to VALUE, as FIELD=VALUE (repeatable: all must hold). VALUE is read as JSON "
                  "(3, 2.5, true, null, \"3\"), and as a string when it is not JSON (color=red)");
}

SearchOptions ResolveSearchFlags(const SearchFlags& flags) {
  SearchOptions options = flags.options;
  if (!ParseScore(flags.score, &options.score)) {
    UsageError("unknown score '" + flags.score + "'");
  }
  options.has_seed = flags.seed_option != nullptr && flags.seed_option->count() > 0;
  if (flags.samples == "auto") {
    options.adaptive_samples = true;
  } else if (!flags.samples.empty()) {
    // Base 10, whole string, positive: "08" is 8, "0x10" and "8k" are errors.
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(flags.samples.c_str(), &end, 10);
    if (errno != 0 || end == flags.samples.c_str() || *end != '\0' || value < 1 ||
        value > 1000000) {
      UsageError("--samples must be a positive integer or auto, got '" + flags.samples + "'");
    }
    options.samples = int(value);
  }
  options.with_uncertainty = !flags.no_uncertainty;
  SearchFilter& filter = options.filter;
  if (!flags.label_in.empty()) {
    filter.label_rule = SearchFilter::LabelRule::kIn;
    filter.labels = flags.label_in;
  } else if (!flags.label_not_in.empty()) {
    filter.label_rule = SearchFilter::LabelRule::kNotIn;
    filter.labels = flags.label_not_in;
  }
  for (const std::string& condition : flags.payload_equals) {
    const size_t eq = condition.find('=');
    if (eq == std::string::npos || eq == 0) {
      UsageError("--payload-equals takes FIELD=VALUE, got '" + condition + "'");
    }
    std::string value = condition.substr(eq + 1);
    // Not JSON: the text itself, as a JSON string.
    if (!nlohmann::json::accept(value)) {
      try {
        value = nlohmann::json(value).dump();
      } catch (const nlohmann::json::exception&) {
        UsageError("--payload-equals: the value of '" + condition.substr(0, eq) +
                   "' is not UTF-8 text");
      }
    }
    filter.payload_equals.emplace_back(condition.substr(0, eq), value);
  }
  return options;
}

}  // namespace cli
}  // namespace hedgedb
