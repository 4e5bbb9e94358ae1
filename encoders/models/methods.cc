#include "encoders/models/methods.h"

#include "common/enum_names.h"
#include "encoders/data/batch_samplers.h"

namespace hedgedb::encoders {
namespace {

// One row per Method, in the order help texts list them. The defaults are
// the papers' where they state them (trainer.h lists the sources); the
// learning rate is 1e-3 where our copies of HIB, SPE and DIMCO omit theirs.
constexpr MethodInfo kMethods[] = {
    {Method::kSoftContrastive, "softcon", "point", "soft contrastive", Kind::kPoint, false,
     ScoreType::kMatch, MatchParameters::kLearned, false, BatchFamily::kPairs, nullptr, 2, 0, 0,
     128, 1e-3},
    {Method::kHib, "hib", nullptr, "VIB, HIB eq. 8", Kind::kGaussian, true, ScoreType::kMc,
     MatchParameters::kLearned, false, BatchFamily::kPairs, nullptr, 2, 0, 0, 128, 1e-3},
    {Method::kSpe, "spe", nullptr, "stochastic prototype embedding", Kind::kGaussian, false,
     ScoreType::kMls, MatchParameters::kFitted, true, BatchFamily::kEpisodes, nullptr, 2, 0, 0, 0,
     1e-3},
    {Method::kProtoNet, "protonet", "pn", "prototypical network", Kind::kPoint, false,
     ScoreType::kMatch, MatchParameters::kNone, false, BatchFamily::kEpisodes, nullptr, 2, 0, 0, 0,
     1e-3},
    {Method::kDimco, "dimco", nullptr, "DIMCO", Kind::kCodes, false, ScoreType::kLogprob,
     MatchParameters::kNone, false, BatchFamily::kClassBalanced, &DimcoBatchOptions, 0, 4, 16, 0,
     1e-3},
    {Method::kFStatistic, "fstat", nullptr, "F-statistic", Kind::kPoint, false, ScoreType::kMatch,
     MatchParameters::kNone, false, BatchFamily::kClassBalanced, &FStatisticBatchOptions, 500, 0, 0,
     0, 2e-4},
    {Method::kContrastive, "contrastive", nullptr, "margin contrastive, HIB eq. 1", Kind::kPoint,
     false, ScoreType::kMatch, MatchParameters::kNone, false, BatchFamily::kPairs, nullptr, 2, 0, 0,
     128, 1e-3},
};
constexpr size_t kNumMethods = sizeof(kMethods) / sizeof(kMethods[0]);

constexpr EnumName<HibLikelihood> kHibLikelihoods[] = {
    {HibLikelihood::kExpectedLogLikelihood, "expected"},
    {HibLikelihood::kLogMonteCarloProbability, "mc"},
};

}  // namespace

const MethodInfo* FindMethodInfo(Method method) {
  for (const auto& e : kMethods)
    if (e.method == method) return &e;
  return nullptr;
}

const MethodInfo& GetMethodInfo(Method method) {
  const MethodInfo* m = FindMethodInfo(method);
  return m != nullptr ? *m : kMethods[0];
}

std::string MethodNamesText() {
  std::string text;
  for (size_t i = 0; i < kNumMethods; ++i) {
    text += i == 0 ? "" : (i + 1 == kNumMethods ? " or " : ", ");
    text += kMethods[i].name;
    if (kMethods[i].alias != nullptr) text += std::string(" (") + kMethods[i].alias + ")";
  }
  return text;
}

std::string MethodHelpText() {
  std::string text;
  for (size_t i = 0; i < kNumMethods; ++i) {
    const MethodInfo& m = kMethods[i];
    text += i == 0 ? "" : ", ";
    text += m.name;
    if (m.alias != nullptr) text += std::string(" or ") + m.alias;
    text += std::string(" (") + m.loss + "; " + KindName(m.kind);
    if (m.mixtures) text += std::string(", ") + KindName(Kind::kMog) + " with --components > 1";
    text += ")";
  }
  return text;
}

const char* MethodName(Method method) {
  const MethodInfo* m = FindMethodInfo(method);
  return m != nullptr ? m->name : "unknown";
}

bool ParseMethod(const std::string& name, Method* method) {
  for (const auto& e : kMethods) {
    if (name == e.name || (e.alias != nullptr && name == e.alias)) {
      *method = e.method;
      return true;
    }
  }
  return false;
}

bool MethodAllowsKind(Method method, Kind kind) {
  const MethodInfo* m = FindMethodInfo(method);
  return m != nullptr && (kind == m->kind || (m->mixtures && kind == Kind::kMog));
}

const char* HibLikelihoodName(HibLikelihood likelihood) {
  return NameOfEnum(kHibLikelihoods, likelihood);
}

bool ParseHibLikelihood(const std::string& name, HibLikelihood* likelihood) {
  return ParseEnumName(kHibLikelihoods, name, likelihood);
}

}  // namespace hedgedb::encoders
