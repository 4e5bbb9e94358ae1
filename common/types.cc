#include "hedgedb/types.h"

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

int DefaultSamples(int components) {
  const int k = CollectionSpec().samples;
  const int c = components > 0 ? components : 1;
  return c * ((k + c - 1) / c);
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
