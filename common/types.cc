#include "hedgedb/types.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "common/enum_names.h"
#include "hedgedb/match_parameters.h"

namespace hedgedb {

namespace {
struct KindEntry {
  Kind kind;
  const char* name;
};
constexpr KindEntry kKinds[] = {{Kind::kPoint, "point"},
                                {Kind::kGaussian, "gaussian"},
                                {Kind::kMog, "mog"},
                                {Kind::kCodes, "codes"}};
struct ScoreEntry {
  ScoreType score;
  const char* name;
};
constexpr ScoreEntry kScores[] = {{ScoreType::kDefault, "default"}, {ScoreType::kMc, "mc"},
                                  {ScoreType::kCsd, "csd"},         {ScoreType::kMls, "mls"},
                                  {ScoreType::kL2, "l2"},           {ScoreType::kMatch, "match"},
                                  {ScoreType::kLogprob, "logprob"}};
}  // namespace

const char* VarianceFormName(VarianceForm form) {
  switch (form) {
    case VarianceForm::kVar:
      return "var";
    case VarianceForm::kStd:
      return "std";
    case VarianceForm::kLogVar:
      return "log_var";
    case VarianceForm::kLogStd:
      break;
  }
  return "log_std";
}

bool ParseVarianceForm(const std::string& name, VarianceForm* form) {
  for (VarianceForm f :
       {VarianceForm::kVar, VarianceForm::kStd, VarianceForm::kLogVar, VarianceForm::kLogStd}) {
    if (name == VarianceFormName(f)) {
      *form = f;
      return true;
    }
  }
  return false;
}

Status ToVariance(VarianceForm form, const float* in, int64_t items, int64_t per_item, float* out) {
  const int64_t n = items * per_item;
  for (int64_t i = 0; i < n; ++i) {
    const double x = in[i];
    double v = x;
    bool ok = std::isfinite(x);
    switch (form) {
      case VarianceForm::kVar:
        break;
      case VarianceForm::kStd:
        ok = ok && x > 0;
        v = x * x;
        break;
      case VarianceForm::kLogVar:
        v = std::exp(x);
        break;
      case VarianceForm::kLogStd:
        v = std::exp(2 * x);
        break;
    }
    const float f = static_cast<float>(v);
    // var itself is checked by the engine (> 0, finite), which names it.
    if (form != VarianceForm::kVar && (!ok || !(f > 0) || !std::isfinite(f))) {
      char value[32];
      std::snprintf(value, sizeof(value), "%g", x);
      return Status::InvalidArgument(
          std::string(VarianceFormName(form)) + " of item " + std::to_string(i / per_item) +
          " (value " + std::to_string(i % per_item) + ") is " + value +
          (ok                           ? ", whose variance is outside float's range"
           : form == VarianceForm::kStd ? ": a std must be finite and > 0"
                                        : ": it must be finite"));
    }
    out[i] = f;
  }
  return Status::OK();
}

std::string MatchParametersNote(const CollectionSpec& spec, ScoreType score, bool uncertainty) {
  if (spec.kind == Kind::kCodes || spec.match_b > 0) return std::string();
  const ScoreType resolved = ResolveScore(spec.kind, score);
  const bool reads_ab = resolved == ScoreType::kMc || resolved == ScoreType::kMatch;
  // Points have no eta.
  if (!reads_ab && !(uncertainty && spec.kind != Kind::kPoint)) return std::string();
  char b[32];
  std::snprintf(b, sizeof(b), "%g", double(spec.match_b));
  return "collection '" + spec.name + "' has match_b = " + b +
         " <= 0 (the default is 0): the match probability sigmoid(-a * ||z1 - z2|| + b) is then "
         "at most 0.5 for every pair, so mc and match scores stay below 0.5, an item against "
         "itself included, and every uncertainty eta is at least 0.5. Create the collection "
         "with the encoder's learned match_a and match_b (its training reports them; synthetic "
         "data generators suggest some for their data), or calibrate the collection on labelled "
         "items, which fits them, or search with score mls, csd or l2, which do not use them";
}

int DefaultSamples(int components) {
  const int k = CollectionSpec().samples;
  const int c = components > 0 ? components : 1;
  return c * ((k + c - 1) / c);
}

namespace {
constexpr EnumName<RowFormat> kRowFormats[] = {{RowFormat::kFloat32, "float32"},
                                               {RowFormat::kFloat16, "float16"},
                                               {RowFormat::kBfloat16, "bfloat16"}};
}  // namespace

const char* RowFormatName(RowFormat format) { return NameOfEnum(kRowFormats, format); }

bool ParseRowFormat(const std::string& name, RowFormat* format) {
  return ParseEnumName(kRowFormats, name, format);
}

const char* KindName(Kind kind) {
  for (const auto& e : kKinds)
    if (e.kind == kind) return e.name;
  return "unknown";
}

bool ParseKind(const std::string& name, Kind* kind) {
  for (const auto& e : kKinds) {
    if (name == e.name) {
      *kind = e.kind;
      return true;
    }
  }
  return false;
}

const char* ScoreName(ScoreType score) {
  for (const auto& e : kScores)
    if (e.score == score) return e.name;
  return "unknown";
}

bool ParseScore(const std::string& name, ScoreType* score) {
  for (const auto& e : kScores) {
    if (name == e.name) {
      *score = e.score;
      return true;
    }
  }
  return false;
}

ScoreType ResolveScore(Kind kind, ScoreType score) {
  switch (kind) {
    case Kind::kPoint:
      return score == ScoreType::kDefault || score == ScoreType::kMc ? ScoreType::kMatch : score;
    case Kind::kGaussian:
    case Kind::kMog:
      return score == ScoreType::kDefault ? ScoreType::kMc : score;
    case Kind::kCodes:
      return score == ScoreType::kDefault ? ScoreType::kLogprob : score;
  }
  return score;
}

}  // namespace hedgedb
