// The search flags shared by `search` (queries from embedding files) and
// `query-image` (queries from image files): the exact score, stage-1
// candidates, Monte Carlo samples and seed, FAISS knobs and uncertainty.
// --k stays with each command (required for search, 5 for query-image).
#pragma once

#include <string>
#include <vector>

#include "hedgedb/types.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace hedgedb {
namespace cli {

// The values --score accepts (search, query-image, calibrate).
const std::vector<std::string>& ScoreFlagNames();

struct SearchFlags {
  SearchOptions options;  // k is set by the command
  std::string score = "default";
  std::string samples;  // "" (the collection's), a positive integer, or "auto"

  bool no_uncertainty = false;
  // Filter flags, turned into options.filter by ResolveSearchFlags.
  std::vector<int64_t> label_in, label_not_in;
  std::vector<std::string> payload_equals;  // "field=value"
  CLI::Option* seed_option = nullptr;       // set by AddSearchFlags
  CLI::Option* min_prob_option = nullptr;   // set by AddSearchFlags
  CLI::Option* coverage_option = nullptr;   // set by AddSearchFlags
  CLI::Option* false_match_option = nullptr;  // set by AddSearchFlags
  CLI::Option* max_results_option = nullptr;
};

// Adds --score, --candidates, --oversampling, --exhaustive, --samples,
// --seed, --nprobe, --ef-search, --no-uncertainty, --min-prob, --coverage,
// --max-results and the filter flags (--label, --label-not-in,
// --payload-equals) to `cmd`.
void AddSearchFlags(CLI::App* cmd, SearchFlags* flags);

// The SearchOptions the flags ask for (score parsed, has_seed and
// with_uncertainty filled in); an unknown score is a usage error.
SearchOptions ResolveSearchFlags(const SearchFlags& flags);

}  // namespace cli
}  // namespace hedgedb
