// Episodic accuracy on a 1-D case worked by hand: SPE's precision-weighted
// prototypes shrug off a corrupt support item that a prototypical network's
// plain mean follows.
#include "encoders/eval/episodes.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

namespace hedgedb::encoders {
namespace {

// Class 0: five items at 0; class 1: five items at 10; variance 0.01 each.
// In the corrupt twin only item 0 changes: mean 60, variance 10^4.
struct Fixture {
  Embeddings clean, corrupt;
  std::vector<int64_t> labels = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
};

Fixture Make(Kind kind, double sigma_eps2) {
  Fixture f;
  for (Embeddings* e : {&f.clean, &f.corrupt}) {
    e->kind = kind;
    e->n = 10;
    e->dim = 1;
    for (int i = 0; i < 10; ++i) {
      const bool moved = e == &f.corrupt && i == 0;
      const float mean = moved ? 60.0f : (i < 5 ? 0.0f : 10.0f);
      const float var = static_cast<float>((moved ? 1e4 : 0.01) + sigma_eps2);  // as stored
      (kind == Kind::kPoint ? e->vec : e->mean).push_back(mean);
      if (kind != Kind::kPoint) e->var.push_back(var);
    }
  }
  return f;
}

TEST(EpisodesTest, PrototypesByHand) {
  torch::set_num_threads(1);
  EpisodicOptions options;
  options.episodes = 200;
  options.shots = 4;
  options.queries = 1;
  options.seed = 3;

  // Prototypical network: when item 0 is in the support (4 episodes in 5),
  // class 0's prototype is (60 + 0 + 0 + 0) / 4 = 15; the class-0 query at
  // 0 is nearer class 1's prototype at 10 (10 < 15), the class-1 query
  // stays right: accuracy 0.5; otherwise 1. Expected 0.8 * 0.5 + 0.2 = 0.6.
  ModelSpec point;
  point.method = Method::kProtoNet;
  point.kind = Kind::kPoint;
  Fixture f = Make(Kind::kPoint, 0);
  EpisodeResult pn;
  Status s = EvaluateEpisodes(point, f.clean, f.corrupt, f.labels, options, &pn);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(pn.classes, 2);
  EXPECT_DOUBLE_EQ(pn.clean.mean, 1.0);
  EXPECT_DOUBLE_EQ(pn.clean.sd, 0.0);
  EXPECT_NEAR(pn.corrupt_support.mean, 0.6, 0.05);
  EXPECT_GT(pn.corrupt_support.sd, 0.1);
  // A corrupt query at 60 is nearer class 1's 10 than class 0's 0 in the
  // episodes where item 0 is the query (1 in 5): 0.2 * 0.5 + 0.8 = 0.9.
  EXPECT_NEAR(pn.corrupt_query.mean, 0.9, 0.05);

  // SPE: item 0 weighs 1 / 10^4 against 1 / 0.01 for the others, so class
  // 0's prototype stays near 60 * 1e-4 / 300 = 2e-5: every query is right.
  ModelSpec spe;
  spe.method = Method::kSpe;
  spe.kind = Kind::kGaussian;
  spe.sigma_eps2 = 0.001;
  f = Make(Kind::kGaussian, spe.sigma_eps2);
  EpisodeResult result;
  s = EvaluateEpisodes(spe, f.clean, f.corrupt, f.labels, options, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_DOUBLE_EQ(result.clean.mean, 1.0);
  EXPECT_DOUBLE_EQ(result.corrupt_support.mean, 1.0);

  // Too few items per class, a model without a rule, bad options.
  options.shots = 5;
  EXPECT_TRUE(
      EvaluateEpisodes(spe, f.clean, f.corrupt, f.labels, options, &result).IsInvalidArgument());
  options.shots = 4;
  ModelSpec hib = spe;
  hib.method = Method::kHib;
  EXPECT_FALSE(HasEpisodeRule(hib));
  EXPECT_TRUE(
      EvaluateEpisodes(hib, f.clean, f.corrupt, f.labels, options, &result).IsInvalidArgument());
  options.episodes = 0;
  EXPECT_TRUE(
      EvaluateEpisodes(spe, f.clean, f.corrupt, f.labels, options, &result).IsInvalidArgument());
}

}  // namespace
}  // namespace hedgedb::encoders
