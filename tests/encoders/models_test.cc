// Encoder architectures, head shapes, spec validation, TorchScript backbones
// and the model file (round trip, corruption, mismatch).
#include "encoders/models/models.h"

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "common/spec_limits.h"
#include "encoders/models/model_file.h"
#include "script_module.h"
#include "temp_dir.h"

namespace hedgedb::encoders {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class ModelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(2);
    torch::manual_seed(0);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("hedgedb_models_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

ModelSpec CnnSpec(Method method, Kind kind) {
  ModelSpec spec;
  spec.method = method;
  spec.kind = kind;
  spec.dim = 3;
  spec.input_shape = {1, 28, 56};
  spec.input_mean = {0.1307};
  spec.input_std = {0.3081};
  spec.cnn.conv1_channels = 4;  // small: the tests check wiring, not accuracy
  spec.cnn.conv2_channels = 6;
  spec.cnn.hidden = 16;
  if (kind == Kind::kMog) spec.components = 2;
  if (kind == Kind::kCodes) {
    spec.code_dims = 5;
    spec.code_k = 8;
  }
  return spec;
}

ModelSpec MlpSpec(Method method, Kind kind) {
  ModelSpec spec = CnnSpec(method, kind);
  spec.backbone = BackboneType::kMlp;
  spec.input_shape = {20};
  spec.input_mean = {};
  spec.input_std = {};
  spec.mlp_hidden = 12;
  return spec;
}

Encoder MustMake(const ModelSpec& spec) {
  Encoder encoder{nullptr};
  Status s = MakeEncoder(spec, &encoder);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return encoder;
}

using testing_util::ReadBytes;
using testing_util::WriteBytes;

// Reflected CRCs, bitwise, written independently of model_file.cc to craft
// files that pass the checksum but are wrong in another way:
// 0x82F63B78 is CRC32C (format 2), 0xEDB88320 the CRC-32 of format 1.
uint32_t BitwiseCrc(const std::string& data, uint32_t polynomial) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (polynomial & (0u - (crc & 1u)));
  }
  return ~crc;
}

void PutU32(std::string* s, size_t offset, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*s)[offset + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

uint32_t GetU32(const std::string& s, size_t offset) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<uint8_t>(s[offset + i])) << (8 * i);
  return v;
}

// The checksum a file of the version at offset 8 carries.
uint32_t FileCrc(const std::string& file_without_crc) {
  return BitwiseCrc(file_without_crc, GetU32(file_without_crc, 8) == 1 ? 0xEDB88320u : 0x82F63B78u);
}

// Rewrites the trailing checksum of `file` for its version.
void Reseal(std::string* file) {
  PutU32(file, file->size() - 4, FileCrc(file->substr(0, file->size() - 4)));
}

uint64_t GetU64(const std::string& s, size_t offset) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(s[offset + i])) << (8 * i);
  return v;
}

std::string U64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

// A calibration map fitted on synthetic mc scores whose true probability of a
// match is score^2.
ModelCalibration SyntheticCalibration() {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> scores;
  std::vector<uint8_t> same;
  for (int i = 0; i < 2000; ++i) {
    const double p = uniform(rng);
    scores.push_back(p);
    same.push_back(uniform(rng) < p * p);
  }
  ModelCalibration c;
  const Status s = FitCalibrationMap(ScoreType::kMc, scores.data(), same.data(),
                                     static_cast<int64_t>(scores.size()), 0, &c.map, &c.info);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return c;
}

// Rebuilds a model file with a different header (and a valid checksum).
std::string WithHeader(const std::string& file, const std::string& header) {
  const uint64_t header_len = GetU64(file, 12);
  std::string payload_part = file.substr(20 + header_len, file.size() - 4 - 20 - header_len);
  std::string out = file.substr(0, 12) + U64(header.size()) + header + payload_part;
  out += std::string(4, '\0');
  Reseal(&out);
  return out;
}

void ExpectSameOutputs(const EncoderOutput& a, const EncoderOutput& b) {
  ASSERT_EQ(a.kind, b.kind);
  auto same = [](const torch::Tensor& x, const torch::Tensor& y) {
    ASSERT_EQ(x.defined(), y.defined());
    if (x.defined()) {
      EXPECT_TRUE(torch::equal(x, y));
    }
  };
  same(a.point, b.point);
  same(a.mean, b.mean);
  same(a.var, b.var);
  same(a.weights, b.weights);
  same(a.logits, b.logits);
  same(a.log_probs, b.log_probs);
}

TEST_F(ModelsTest, HeadShapesForEveryKind) {
  torch::Tensor x = torch::rand({3, 1, 28, 56});
  {
    Encoder e = MustMake(CnnSpec(Method::kSoftContrastive, Kind::kPoint));
    EncoderOutput out = e->forward(x);
    EXPECT_EQ(out.kind, Kind::kPoint);
    EXPECT_EQ(out.point.sizes(), c10::IntArrayRef({3, 3}));
    EXPECT_FALSE(out.mean.defined());
  }
  {
    Encoder e = MustMake(CnnSpec(Method::kHib, Kind::kGaussian));
    EncoderOutput out = e->forward(x);
    EXPECT_EQ(out.mean.sizes(), c10::IntArrayRef({3, 3}));
    EXPECT_EQ(out.var.sizes(), c10::IntArrayRef({3, 3}));
    EXPECT_TRUE((out.var > 0).all().item<bool>());
  }
  {
    Encoder e = MustMake(CnnSpec(Method::kHib, Kind::kMog));
    EncoderOutput out = e->forward(x);
    EXPECT_EQ(out.mean.sizes(), c10::IntArrayRef({3, 2, 3}));
    EXPECT_EQ(out.var.sizes(), c10::IntArrayRef({3, 2, 3}));
    EXPECT_TRUE(torch::allclose(out.weights, torch::full({3, 2}, 0.5)));
    // The branches are distinct layers: their means differ.
    EXPECT_FALSE(torch::allclose(out.mean.select(1, 0), out.mean.select(1, 1)));
  }
  {
    Encoder e = MustMake(CnnSpec(Method::kDimco, Kind::kCodes));
    EncoderOutput out = e->forward(x);
    EXPECT_EQ(out.logits.sizes(), c10::IntArrayRef({3, 5, 8}));
    EXPECT_TRUE(torch::allclose(out.log_probs.exp().sum(-1), torch::ones({3, 5}), 1e-5, 1e-5));
    EXPECT_TRUE(torch::allclose(out.log_probs, torch::log_softmax(out.logits, -1)));
    torch::Tensor codes = CodesOf(out);
    EXPECT_EQ(codes.sizes(), c10::IntArrayRef({3, 5}));
    EXPECT_EQ(codes.scalar_type(), torch::kInt);
    EXPECT_TRUE(torch::equal(codes, out.logits.argmax(-1).to(torch::kInt)));
  }
  {
    Encoder e = MustMake(CnnSpec(Method::kSpe, Kind::kGaussian));
    EXPECT_EQ(e->forward(x).mean.sizes(), c10::IntArrayRef({3, 3}));
  }
}

// A training step's bfloat16 backbone: the outputs are float32 and close to
// the float32 forward's (bfloat16 keeps 8 significant bits), but not equal
// (the backbone really ran in bfloat16); the weights keep float32 gradients;
// the autocast state is as before afterwards.
TEST_F(ModelsTest, Bf16BackboneRunsInBfloat16AndReturnsFloat32) {
  torch::manual_seed(3);
  torch::Tensor x = torch::rand({8, 1, 28, 56});
  Encoder e = MustMake(CnnSpec(Method::kHib, Kind::kGaussian));
  const EncoderOutput full = e->forward(x);
  const EncoderOutput half = e->forward(x, /*bf16_backbone=*/true);
  ASSERT_EQ(half.mean.scalar_type(), torch::kFloat32);
  ASSERT_EQ(half.var.scalar_type(), torch::kFloat32);
  EXPECT_FALSE(torch::equal(full.mean, half.mean));
  // Tolerance: a few bfloat16 roundings (2^-8 relative each) through two
  // conv layers and the hidden layer.
  const double scale = full.mean.abs().max().item<double>();
  EXPECT_LT((full.mean - half.mean).abs().max().item<double>(), 0.05 * scale + 1e-3);
  EXPECT_TRUE(torch::allclose(full.var, half.var, 0.1, 1e-4));
  EXPECT_FALSE(at::autocast::is_cpu_enabled());

  // Inside a caller's own autocast scope (nesting 1), the caller's state
  // comes back whole: enabled, and its nesting. (LibTorch 1.13's CPU autocast
  // takes no dtype but bfloat16, so a restored dtype cannot be told apart.)
  at::autocast::set_cpu_enabled(true);
  at::autocast::increment_nesting();
  {
    torch::NoGradGuard no_grad;
    e->forward(x, /*bf16_backbone=*/true);
  }
  EXPECT_TRUE(at::autocast::is_cpu_enabled());
  EXPECT_EQ(at::autocast::get_autocast_cpu_dtype(), at::kBFloat16);
  EXPECT_EQ(at::autocast::decrement_nesting(), 0);
  at::autocast::set_cpu_enabled(false);
  at::autocast::clear_cache();

  (half.mean.sum() + half.var.sum()).backward();
  int with_grad = 0;
  for (const auto& p : e->parameters()) {
    if (!p.grad().defined()) continue;
    EXPECT_EQ(p.scalar_type(), torch::kFloat32);
    EXPECT_EQ(p.grad().scalar_type(), torch::kFloat32);
    ++with_grad;
  }
  EXPECT_GT(with_grad, 4);  // the conv layers, the hidden layer, the heads
}

TEST_F(ModelsTest, BackboneSizes) {
  ModelSpec spec = CnnSpec(Method::kHib, Kind::kGaussian);
  EXPECT_EQ(MustMake(spec)->spec().feature_dim, 16);
  spec.cnn.hidden = 0;  // HIB's literal wording: the head's FC follows the pools
  EXPECT_EQ(MustMake(spec)->spec().feature_dim, 6 * 7 * 14);
  spec.input_shape = {1, 28, 84};  // N = 3
  EXPECT_EQ(MustMake(spec)->spec().feature_dim, 6 * 7 * 21);

  ModelSpec mlp = MlpSpec(Method::kFStatistic, Kind::kPoint);
  Encoder e = MustMake(mlp);
  EXPECT_EQ(e->spec().feature_dim, 12);
  EXPECT_EQ(e->forward(torch::rand({4, 20})).point.sizes(), c10::IntArrayRef({4, 3}));
  // The F-statistic CUB protocol sizes: 2048 -> 1024 ReLU -> embedding.
  ModelSpec cub;
  cub.method = Method::kFStatistic;
  cub.kind = Kind::kPoint;
  cub.dim = 500;
  cub.backbone = BackboneType::kMlp;
  cub.input_shape = {2048};
  Encoder cub_encoder = MustMake(cub);
  EXPECT_EQ(cub_encoder->spec().feature_dim, 1024);
}

TEST_F(ModelsTest, CnnEncodersStartWithXavierWeightsAndZeroBiases) {
  Encoder e = MustMake(CnnSpec(Method::kHib, Kind::kMog));
  int layers = 0;
  for (const auto& p : e->named_parameters()) {
    const std::string& name = p.key();
    if (name.size() > 5 && name.substr(name.size() - 5) == ".bias") {
      EXPECT_EQ(p.value().abs().max().item<float>(), 0.0f) << name;
      ++layers;
    } else if (name.size() > 7 && name.substr(name.size() - 7) == ".weight") {
      // Xavier uniform bound sqrt(6 / (fan_in + fan_out)).
      const torch::Tensor w = p.value();
      const int64_t receptive = w.dim() > 2 ? w[0][0].numel() : 1;
      const double bound = std::sqrt(6.0 / ((w.size(0) + w.size(1)) * receptive));
      EXPECT_LE(w.abs().max().item<float>(), bound * (1 + 1e-6)) << name;
    }
  }
  EXPECT_EQ(layers, 2 + 1 + 2);  // two convs, the hidden FC, two mixture branches
}

TEST_F(ModelsTest, WrongInputShapeThrowsFromForward) {
  Encoder e = MustMake(CnnSpec(Method::kHib, Kind::kGaussian));
  EXPECT_THROW(e->forward(torch::rand({2, 1, 28, 28})), c10::Error);
}

TEST_F(ModelsTest, NormalisationIsPartOfTheEncoder) {
  ModelSpec spec = MlpSpec(Method::kSoftContrastive, Kind::kPoint);
  spec.input_mean = {0.5};
  spec.input_std = {2.0};
  Encoder normalising = MustMake(spec);
  spec.input_mean = {};
  spec.input_std = {};
  Encoder plain = MustMake(spec);
  {
    torch::NoGradGuard no_grad;
    auto src = normalising->named_parameters();
    for (auto& p : plain->named_parameters()) p.value().copy_(src[p.key()]);
  }
  torch::Tensor x = torch::rand({3, 20});
  EXPECT_TRUE(
      torch::allclose(normalising->forward(x).point, plain->forward((x - 0.5) / 2.0).point));
}

TEST_F(ModelsTest, LearnedScalarsAreInitialisedFromTheSpec) {
  ModelSpec spec = CnnSpec(Method::kSpe, Kind::kGaussian);
  spec.match_a = 2.5;
  spec.match_b = -1.25;
  spec.sigma_eps2 = 0.3;
  Encoder e = MustMake(spec);
  EXPECT_NEAR(e->match_a().item<double>(), 2.5, 1e-6);
  EXPECT_NEAR(e->match_b().item<double>(), -1.25, 1e-6);
  EXPECT_NEAR(e->sigma_eps2().item<double>(), 0.3, 1e-6);
  // They are trainable parameters of the encoder.
  auto params = e->named_parameters();
  EXPECT_TRUE(params.contains("match_a_raw"));
  EXPECT_TRUE(params.contains("match_b"));
  EXPECT_TRUE(params.contains("sigma_eps_raw"));
}

TEST_F(ModelsTest, InvalidSpecsAreRejected) {
  Encoder e{nullptr};
  ModelSpec spec = CnnSpec(Method::kDimco, Kind::kPoint);
  EXPECT_TRUE(MakeEncoder(spec, &e).IsInvalidArgument());
  spec = CnnSpec(Method::kDimco, Kind::kCodes);
  spec.code_k = 300;
  EXPECT_TRUE(MakeEncoder(spec, &e).IsInvalidArgument());
  spec = CnnSpec(Method::kHib, Kind::kGaussian);
  spec.input_std = {1.0, 2.0};
  EXPECT_TRUE(MakeEncoder(spec, &e).IsInvalidArgument());
  spec = CnnSpec(Method::kHib, Kind::kGaussian);
  spec.input_shape = {20};
  EXPECT_TRUE(MakeEncoder(spec, &e).IsInvalidArgument());
  spec = CnnSpec(Method::kSpe, Kind::kMog);
  EXPECT_TRUE(MakeEncoder(spec, &e).IsInvalidArgument());
  spec = CnnSpec(Method::kHib, Kind::kGaussian);
  spec.match_a = 0;
  EXPECT_TRUE(MakeEncoder(spec, &e).IsInvalidArgument());
  EXPECT_TRUE(e.is_empty());
}

TEST_F(ModelsTest, SpecJsonRoundTrip) {
  ModelSpec spec = CnnSpec(Method::kHib, Kind::kMog);
  spec.match_a = 3.25;
  spec.backbone_path = "x/y.pt";
  ModelSpec back;
  ASSERT_TRUE(SpecFromJson(SpecToJson(spec), &back).ok());
  EXPECT_EQ(SpecToJson(back), SpecToJson(spec));
  EXPECT_TRUE(SpecFromJson("{\"format\": \"hedgedb-model\"}", &back).IsCorruption());
  EXPECT_TRUE(SpecFromJson("not json", &back).IsCorruption());
}

// The header of a model file `train` wrote before the spec's fields were
// listed once (model_fields.h): reading and writing it again gives the same
// bytes, so files keep their header (and checksum) across the change.
TEST_F(ModelsTest, AnOlderHeaderIsWrittenAgainByteForByte) {
  const std::string header = R"({
  "backbone": {
    "cnn_hidden": 500,
    "conv1_channels": 32,
    "conv2_channels": 64,
    "mlp_hidden": 16,
    "path": "",
    "type": "mlp"
  },
  "code_dims": 0,
  "code_k": 0,
  "components": 1,
  "data": {
    "bbox": false,
    "class_split": 0,
    "image_fit": "exact",
    "image_size": 0,
    "items": 2,
    "seed": 0,
    "source": "fashion-mnist",
    "test_total": 400,
    "train_total": 2000
  },
  "dim": 2,
  "dimco_hidden": 128,
  "feature_dim": 16,
  "format": "hedgedb-model",
  "input_mean": [
    0.2860405969804586
  ],
  "input_shape": [
    1,
    28,
    56
  ],
  "input_std": [
    0.3530242445185261
  ],
  "kind": "gaussian",
  "match_a": 0.9968764185905457,
  "match_b": 0.004972388502210379,
  "method": "hib",
  "min_variance": 1e-06,
  "sigma_eps2": 1.0
})";
  ModelSpec spec;
  ASSERT_TRUE(SpecFromJson(header, &spec).ok());
  EXPECT_EQ(SpecToJson(spec), header);
  // Without the recorded data (files before it was recorded) likewise.
  nlohmann::json older = nlohmann::json::parse(header);
  older.erase("data");
  ASSERT_TRUE(SpecFromJson(older.dump(2), &spec).ok());
  EXPECT_FALSE(spec.data.recorded);
  EXPECT_EQ(SpecToJson(spec), older.dump(2));
}

// The training data's settings survive the header; a header without them
// (older files) reads as "not recorded", and a bad record is Corruption.
TEST_F(ModelsTest, SpecJsonKeepsTheTrainingData) {
  ModelSpec spec = CnnSpec(Method::kHib, Kind::kGaussian);
  ModelSpec back;
  ASSERT_TRUE(SpecFromJson(SpecToJson(spec), &back).ok());
  EXPECT_FALSE(back.data.recorded);
  EXPECT_EQ(SpecToJson(spec).find("\"data\""), std::string::npos);
  spec.data.recorded = true;
  spec.data.source = "cub:/data/CUB_200_2011";
  spec.data.seed = 7;
  spec.data.image_size = 96;
  spec.data.bbox = true;
  spec.data.class_split = 20;
  spec.data.image_fit = "resize";
  ASSERT_TRUE(SpecFromJson(SpecToJson(spec), &back).ok());
  EXPECT_TRUE(back.data.recorded);
  EXPECT_EQ(back.data.source, "cub:/data/CUB_200_2011");
  EXPECT_EQ(back.data.seed, 7u);
  EXPECT_EQ(back.data.image_size, 96);
  EXPECT_TRUE(back.data.bbox);
  EXPECT_EQ(back.data.class_split, 20);
  EXPECT_EQ(back.data.image_fit, "resize");
  EXPECT_EQ(SpecToJson(back), SpecToJson(spec));
  std::string text = SpecToJson(spec);
  text.replace(text.find("\"resize\""), 8, "\"stretch\"");
  EXPECT_TRUE(SpecFromJson(text, &back).IsCorruption());
  text = SpecToJson(spec);
  text.replace(text.find("96"), 2, "-1");
  EXPECT_TRUE(SpecFromJson(text, &back).IsCorruption());
  // Wrong types and values outside the flags' bounds are Corruption, not a
  // crash or a wrapped number.
  const std::string good = SpecToJson(spec);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"seed\": 7", "\"seed\": -1"},
           {"\"seed\": 7", "\"seed\": 2.5"},
           {"\"bbox\": true", "\"bbox\": \"yes\""},
           {"\"image_size\": 96", "\"image_size\": 4"},
           {"\"image_size\": 96", "\"image_size\": 100000"},
           {"\"class_split\": 20", "\"class_split\": 5000"},
           {"\"items\": 0", "\"items\": 9"},
           {"\"source\": \"cub:/data/CUB_200_2011\"", "\"source\": 5"}}) {
    const Status s = SpecFromJson(with(from, to), &back);
    EXPECT_TRUE(s.IsCorruption()) << to << ": " << s.ToString();
  }
  std::string not_object = good;
  const size_t data_at = not_object.find("\"data\": {");
  ASSERT_NE(data_at, std::string::npos);
  not_object = not_object.substr(0, data_at) + "\"data\": 5, " +
               not_object.substr(not_object.find('}', data_at) + 3);
  EXPECT_TRUE(SpecFromJson(not_object, &back).IsCorruption()) << not_object;

  // Composites record their layout; a file from before it reads as "" (the
  // reference layout those files were built with); an unknown one is
  // Corruption.
  ModelSpec composites = CnnSpec(Method::kHib, Kind::kGaussian);
  composites.data.recorded = true;
  composites.data.source = "mnist";
  composites.data.items = 2;
  composites.data.composite_layout = "hib-scaled";
  ASSERT_TRUE(SpecFromJson(SpecToJson(composites), &back).ok());
  EXPECT_EQ(back.data.composite_layout, "hib-scaled");
  nlohmann::json old_file = nlohmann::json::parse(SpecToJson(composites));
  old_file["data"].erase("composite_layout");
  ASSERT_TRUE(SpecFromJson(old_file.dump(), &back).ok());
  EXPECT_EQ(back.data.composite_layout, "");
  for (const nlohmann::json& bad : {nlohmann::json("hob"), nlohmann::json(3)}) {
    nlohmann::json j = nlohmann::json::parse(SpecToJson(composites));
    j["data"]["composite_layout"] = bad;
    EXPECT_TRUE(SpecFromJson(j.dump(), &back).IsCorruption()) << bad;
  }
}

// Sizes in a header are JSON integers and bounded before anything is built:
// "dim": 2.5 was read as 2, and 10^9 mixture components allocated gigabytes
// before failing.
TEST_F(ModelsTest, SpecSizesMustBeIntegersWithinTheLimits) {
  const ModelSpec good = CnnSpec(Method::kHib, Kind::kMog);
  auto with = [&](const char* field, const nlohmann::json& value) {
    nlohmann::json j = nlohmann::json::parse(SpecToJson(good));
    j[field] = value;
    return j.dump();
  };
  ModelSpec back;
  for (const char* field : {"dim", "components", "code_dims", "feature_dim"}) {
    for (const nlohmann::json& value :
         {nlohmann::json(2.5), nlohmann::json(-1), nlohmann::json("3"), nlohmann::json(1e10)}) {
      Status s = SpecFromJson(with(field, value), &back);
      EXPECT_TRUE(s.IsCorruption()) << field << "=" << value.dump() << ": " << s.ToString();
      EXPECT_NE(s.message().find(field), std::string::npos) << s.ToString();
    }
  }
  nlohmann::json shape = nlohmann::json::parse(SpecToJson(good));
  shape["input_shape"] = {1, 28.5, 56};
  EXPECT_TRUE(SpecFromJson(shape.dump(), &back).IsCorruption());

  // Integers, but too large: refused by ValidateSpec, naming the field.
  ModelSpec huge = good;
  huge.components = 1000000000;
  Status s = ValidateSpec(huge);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("components"), std::string::npos) << s.ToString();
  huge = good;
  huge.dim = kMaxDim + 1;
  EXPECT_NE(ValidateSpec(huge).message().find("dim"), std::string::npos);
  // Every width within its limit, the weights together too many.
  huge = CnnSpec(Method::kHib, Kind::kGaussian);
  huge.backbone = BackboneType::kMlp;
  huge.input_shape = {3, 4096, 4096};
  huge.input_mean.clear();
  huge.input_std.clear();
  huge.mlp_hidden = 1024;
  s = ValidateSpec(huge);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("weights"), std::string::npos) << s.ToString();
  // The same through a whole model file with an intact checksum.
  huge = good;
  huge.components = 1000000000;
  ModelFileParts parts;
  s = ParseModelFile("m.hdbm", EncodeModelFile(huge, "w", nullptr), &parts);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("components"), std::string::npos) << s.ToString();
  EXPECT_TRUE(ValidateSpec(good).ok());
}

TEST_F(ModelsTest, SaveLoadRoundTripGivesIdenticalEmbeddings) {
  const std::vector<ModelSpec> specs = {
      CnnSpec(Method::kSoftContrastive, Kind::kPoint),
      CnnSpec(Method::kHib, Kind::kGaussian),
      CnnSpec(Method::kHib, Kind::kMog),
      CnnSpec(Method::kDimco, Kind::kCodes),
      CnnSpec(Method::kSpe, Kind::kGaussian),
      MlpSpec(Method::kFStatistic, Kind::kPoint),
  };
  for (const ModelSpec& spec : specs) {
    SCOPED_TRACE(std::string(MethodName(spec.method)) + "/" + KindName(spec.kind));
    Encoder original = MustMake(spec);
    {
      // Move the learned scalars away from their initial values.
      torch::NoGradGuard no_grad;
      original->named_parameters()["match_b"].fill_(0.75);
      original->named_parameters()["sigma_eps_raw"].fill_(-1.5);
    }
    original->eval();
    const std::string path = Path("model.hdbm");
    ASSERT_TRUE(SaveModel(path, original).ok());
    EXPECT_FALSE(fs::exists(path + ".tmp"));

    ModelSpec loaded_spec;
    Encoder loaded{nullptr};
    Status s = LoadModel(path, &loaded_spec, &loaded);
    ASSERT_TRUE(s.ok()) << s.ToString();
    loaded->eval();
    torch::Tensor x =
        spec.backbone == BackboneType::kCnn ? torch::rand({2, 1, 28, 56}) : torch::rand({2, 20});
    ExpectSameOutputs(original->forward(x), loaded->forward(x));
    EXPECT_EQ(SpecToJson(loaded_spec), SpecToJson(original->CurrentSpec()));
    EXPECT_DOUBLE_EQ(loaded_spec.match_b, 0.75);
    EXPECT_NEAR(loaded_spec.sigma_eps2, std::log1p(std::exp(-1.5)), 1e-6);
    EXPECT_EQ(loaded->match_a().item<float>(), original->match_a().item<float>());

    ModelSpec header;
    ASSERT_TRUE(ReadModelSpec(path, &header).ok());
    EXPECT_EQ(SpecToJson(header), SpecToJson(loaded_spec));
  }
}

TEST_F(ModelsTest, MissingAndCorruptFilesAreReported) {
  ModelSpec spec;
  Encoder e{nullptr};
  EXPECT_TRUE(LoadModel(Path("nope.hdbm"), &spec, &e).IsNotFound());
  EXPECT_TRUE(ReadModelSpec(Path("nope.hdbm"), &spec).IsNotFound());

  Encoder original = MustMake(CnnSpec(Method::kHib, Kind::kGaussian));
  const std::string path = Path("model.hdbm");
  ASSERT_TRUE(SaveModel(path, original).ok());
  const std::string good = ReadBytes(path);

  // A flipped byte in the weights: the checksum catches it.
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x5A;
  WriteBytes(path, flipped);
  Status s = LoadModel(path, &spec, &e);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s.ToString();

  // Truncated.
  WriteBytes(path, good.substr(0, good.size() - 100));
  EXPECT_TRUE(LoadModel(path, &spec, &e).IsCorruption());
  WriteBytes(path, good.substr(0, 10));
  EXPECT_TRUE(LoadModel(path, &spec, &e).IsCorruption());

  // Not a model file at all.
  WriteBytes(path, "this is a text file, not a model, and it is long enough to parse");
  s = LoadModel(path, &spec, &e);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("magic"), std::string::npos) << s.ToString();

  // A newer format version (with a valid checksum).
  std::string newer = good;
  PutU32(&newer, 8, kModelFileVersion + 1);
  Reseal(&newer);
  WriteBytes(path, newer);
  EXPECT_EQ(LoadModel(path, &spec, &e).code(), Status::Code::kNotSupported);

  // A valid container whose payload is not a torch archive.
  const uint64_t header_len = GetU64(good, 12);
  std::string garbage_payload(200, 'x');
  std::string bad_archive = good.substr(0, 20 + header_len) + U64(garbage_payload.size()) +
                            garbage_payload + std::string(4, '\0');
  Reseal(&bad_archive);
  WriteBytes(path, bad_archive);
  s = LoadModel(path, &spec, &e);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(e.is_empty());

  // The good bytes still load (the crafted files differ only where intended).
  WriteBytes(path, good);
  EXPECT_TRUE(LoadModel(path, &spec, &e).ok());
}

// A calibration map makes a format 3 file: read back byte for byte by
// ReadModelCalibration and LoadModel, covered by the checksum, its section
// lengths checked. The same model without a map is written as format 2.
TEST_F(ModelsTest, CalibrationMapTravelsInFormatThree) {
  Encoder original = MustMake(CnnSpec(Method::kHib, Kind::kGaussian));
  const ModelCalibration calibration = SyntheticCalibration();
  ASSERT_FALSE(calibration.empty());
  const std::string path = Path("model.hdbm");
  ASSERT_TRUE(SaveModel(path, original, &calibration).ok());
  const std::string file = ReadBytes(path);
  EXPECT_EQ(GetU32(file, 8), 3u);

  ModelCalibration read;
  Status s = ReadModelCalibration(path, &read);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(read.map, calibration.map);
  EXPECT_EQ(read.info.score, ScoreType::kMc);
  EXPECT_EQ(read.info.method, calibration.info.method);
  EXPECT_EQ(read.info.pairs, 2000);
  EXPECT_DOUBLE_EQ(read.info.base_rate, calibration.info.base_rate);
  EXPECT_DOUBLE_EQ(read.info.fit_base_rate, calibration.info.fit_base_rate);
  ModelSpec spec;
  Encoder loaded{nullptr};
  ModelCalibration loaded_calibration;
  s = LoadModel(path, &spec, &loaded, &loaded_calibration);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(loaded_calibration.map, calibration.map);
  ModelSpec header;
  ASSERT_TRUE(ReadModelSpec(path, &header).ok());
  EXPECT_EQ(SpecToJson(header), SpecToJson(original->CurrentSpec()));

  // A flipped byte of the map fails the checksum.
  std::string flipped = file;
  flipped[file.size() - 10] ^= 0x11;
  WriteBytes(path, flipped);
  s = ReadModelCalibration(path, &read);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  // Section lengths that disagree with the file, checksum intact.
  const uint64_t header_len = GetU64(file, 12);
  const uint64_t section_at = 28 + header_len + GetU64(file, 20 + header_len);
  std::string too_long = file;
  too_long.replace(section_at, 8, U64(file.size()));
  Reseal(&too_long);
  WriteBytes(path, too_long);
  s = LoadModel(path, &spec, &loaded, &loaded_calibration);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("calibration section"), std::string::npos) << s.ToString();
  std::string trailing = file.substr(0, file.size() - 4) + "x" + std::string(4, '\0');
  Reseal(&trailing);
  WriteBytes(path, trailing);
  EXPECT_TRUE(ReadModelCalibration(path, &read).IsCorruption());

  // Without a map: format 2, and no map comes back.
  ASSERT_TRUE(SaveModel(path, original).ok());
  EXPECT_EQ(GetU32(ReadBytes(path), 8), 2u);
  ASSERT_TRUE(ReadModelCalibration(path, &read).ok());
  EXPECT_TRUE(read.empty());
  loaded_calibration = calibration;
  ASSERT_TRUE(LoadModel(path, &spec, &loaded, &loaded_calibration).ok());
  EXPECT_TRUE(loaded_calibration.empty());
}

// The torch-free parse of a model file's bytes (what ReadModelSpec, LoadModel
// and the fuzz target use): header, weights bytes and calibration come back
// as encoded, and damage is named.
TEST_F(ModelsTest, ModelFileBytesParseWithoutTheWeights) {
  ModelSpec spec = CnnSpec(Method::kHib, Kind::kGaussian);
  const ModelCalibration calibration = SyntheticCalibration();
  const std::string file = EncodeModelFile(spec, "weights bytes", &calibration);
  ModelFileParts parts;
  Status s = ParseModelFile("m.hdbm", file, &parts);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(SpecToJson(parts.spec), SpecToJson(spec));
  EXPECT_EQ(parts.payload, "weights bytes");
  EXPECT_EQ(parts.calibration.map, calibration.map);
  EXPECT_EQ(parts.calibration.info.pairs, calibration.info.pairs);

  std::string damaged = file;
  damaged[30] ^= 1;
  s = ParseModelFile("m.hdbm", damaged, &parts);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("m.hdbm"), std::string::npos) << s.ToString();
  // A header that is valid JSON but an invalid model, checksum intact.
  spec.dim = 0;
  s = ParseModelFile("m.hdbm", EncodeModelFile(spec, "w", nullptr), &parts);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("invalid model"), std::string::npos) << s.ToString();
}

// Format 2 ends in a little-endian CRC32C; format 1 files (CRC-32, the
// layout otherwise the same) still load, and their checksum is still checked.
TEST_F(ModelsTest, FormatOneFilesStillLoad) {
  Encoder original = MustMake(CnnSpec(Method::kHib, Kind::kGaussian));
  original->eval();
  const std::string path = Path("model.hdbm");
  ASSERT_TRUE(SaveModel(path, original).ok());
  const std::string current = ReadBytes(path);
  ASSERT_EQ(GetU32(current, 8), 2u);
  EXPECT_EQ(GetU32(current, current.size() - 4),
            BitwiseCrc(current.substr(0, current.size() - 4), 0x82F63B78u));

  // The same file as format 1 wrote it: version 1, CRC-32.
  std::string old = current;
  PutU32(&old, 8, 1);
  PutU32(&old, old.size() - 4, BitwiseCrc(old.substr(0, old.size() - 4), 0xEDB88320u));
  WriteBytes(path, old);
  ModelSpec spec;
  Encoder loaded{nullptr};
  ModelCalibration calibration = SyntheticCalibration();
  Status s = LoadModel(path, &spec, &loaded, &calibration);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(calibration.empty());  // format 1 has no calibration section
  loaded->eval();
  const torch::Tensor x = torch::rand({2, 1, 28, 56});
  ExpectSameOutputs(original->forward(x), loaded->forward(x));
  ModelSpec header;
  ASSERT_TRUE(ReadModelSpec(path, &header).ok());
  EXPECT_EQ(SpecToJson(header), SpecToJson(original->CurrentSpec()));

  // A format 1 file is checked with CRC-32: a CRC32C there, or a flipped
  // byte, fails the checksum.
  std::string wrong_crc = old;
  PutU32(&wrong_crc, old.size() - 4, BitwiseCrc(old.substr(0, old.size() - 4), 0x82F63B78u));
  WriteBytes(path, wrong_crc);
  s = LoadModel(path, &spec, &loaded);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s.ToString();
  std::string flipped = old;
  flipped[old.size() / 2] ^= 0x21;
  WriteBytes(path, flipped);
  EXPECT_TRUE(ReadModelSpec(path, &spec).IsCorruption());

  // And a format 2 file with the old checksum is refused too.
  std::string mixed = current;
  PutU32(&mixed, mixed.size() - 4, BitwiseCrc(mixed.substr(0, mixed.size() - 4), 0xEDB88320u));
  WriteBytes(path, mixed);
  EXPECT_TRUE(LoadModel(path, &spec, &loaded).IsCorruption());
}

TEST_F(ModelsTest, WeightsThatDoNotFitTheHeaderAreRejected) {
  ModelSpec spec2 = CnnSpec(Method::kHib, Kind::kGaussian);
  Encoder original = MustMake(spec2);
  const std::string path = Path("model.hdbm");
  ASSERT_TRUE(SaveModel(path, original).ok());
  // Same weights, but the header claims D = 4: consistent checksum, wrong shapes.
  ModelSpec claimed = original->CurrentSpec();
  claimed.dim = 4;
  WriteBytes(path, WithHeader(ReadBytes(path), SpecToJson(claimed)));
  ModelSpec spec;
  Encoder e{nullptr};
  Status s = LoadModel(path, &spec, &e);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("do not match"), std::string::npos) << s.ToString();

  // Header says mog with 2 components: the weights have no second branch.
  claimed = original->CurrentSpec();
  claimed.kind = Kind::kMog;
  claimed.components = 2;
  ASSERT_TRUE(SaveModel(path, original).ok());
  WriteBytes(path, WithHeader(ReadBytes(path), SpecToJson(claimed)));
  EXPECT_TRUE(LoadModel(path, &spec, &e).IsCorruption());

  // A header that is not a valid model description.
  claimed = original->CurrentSpec();
  claimed.method = Method::kDimco;  // dimco cannot produce gaussians
  ASSERT_TRUE(SaveModel(path, original).ok());
  WriteBytes(path, WithHeader(ReadBytes(path), SpecToJson(claimed)));
  EXPECT_TRUE(LoadModel(path, &spec, &e).IsCorruption());
}

TEST_F(ModelsTest, LoadExpectingRejectsAModelOfAnotherShape) {
  Encoder original = MustMake(CnnSpec(Method::kHib, Kind::kGaussian));
  const std::string path = Path("model.hdbm");
  ASSERT_TRUE(SaveModel(path, original).ok());
  ModelSpec spec;
  Encoder e{nullptr};
  ModelSpec expected = CnnSpec(Method::kHib, Kind::kGaussian);
  EXPECT_TRUE(LoadModelExpecting(path, expected, &spec, &e).ok());
  expected.dim = 2;
  Status s = LoadModelExpecting(path, expected, &spec, &e);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("dim"), std::string::npos);
  expected = CnnSpec(Method::kHib, Kind::kMog);
  EXPECT_TRUE(LoadModelExpecting(path, expected, &spec, &e).IsInvalidArgument());
  expected = CnnSpec(Method::kSpe, Kind::kGaussian);
  EXPECT_TRUE(LoadModelExpecting(path, expected, &spec, &e).IsInvalidArgument());
  expected = CnnSpec(Method::kHib, Kind::kGaussian);
  expected.input_shape = {1, 28, 84};
  EXPECT_TRUE(LoadModelExpecting(path, expected, &spec, &e).IsInvalidArgument());
}

TEST_F(ModelsTest, TorchScriptBackbone) {
  const std::string script = Path("backbone.pt");
  WriteScriptModule(script);
  ModelSpec spec = MlpSpec(Method::kSoftContrastive, Kind::kPoint);
  spec.backbone = BackboneType::kTorchScript;
  spec.backbone_path = script;
  spec.input_shape = {4};
  Encoder e = MustMake(spec);
  ASSERT_FALSE(e.is_empty());
  EXPECT_EQ(e->spec().feature_dim, 6);
  torch::Tensor x = torch::rand({5, 4});
  EXPECT_EQ(e->forward(x).point.sizes(), c10::IntArrayRef({5, 3}));
  // The script's weight is a trainable parameter of the encoder.
  auto params = e->named_parameters();
  ASSERT_TRUE(params.contains("backbone.weight"));
  EXPECT_TRUE(params["backbone.weight"].requires_grad());
  e->forward(x).point.sum().backward();
  EXPECT_TRUE(params["backbone.weight"].grad().defined());

  // Fine-tuned script weights travel in the model file.
  {
    torch::NoGradGuard no_grad;
    params["backbone.weight"].mul_(-2.0);
  }
  e->eval();
  const std::string path = Path("model.hdbm");
  ASSERT_TRUE(SaveModel(path, e).ok());
  ModelSpec loaded_spec;
  Encoder loaded{nullptr};
  Status s = LoadModel(path, &loaded_spec, &loaded);
  ASSERT_TRUE(s.ok()) << s.ToString();
  loaded->eval();
  ExpectSameOutputs(e->forward(x), loaded->forward(x));
  EXPECT_EQ(loaded_spec.backbone_path, script);

  // A relative script path is found beside the model file.
  fs::create_directories(dir_ / "moved");
  WriteScriptModule(Path("moved/backbone.pt"));
  spec.backbone_path = "backbone.pt";
  ModelSpec header = e->CurrentSpec();
  header.backbone_path = "backbone.pt";
  ASSERT_FALSE(fs::exists("backbone.pt"));  // not in the working directory
  WriteBytes(Path("moved/model.hdbm"), WithHeader(ReadBytes(path), SpecToJson(header)));
  s = LoadModel(Path("moved/model.hdbm"), &loaded_spec, &loaded);
  ASSERT_TRUE(s.ok()) << s.ToString();
  loaded->eval();
  ExpectSameOutputs(e->forward(x), loaded->forward(x));  // weights come from the model file
}

TEST_F(ModelsTest, MissingOrCorruptTorchScriptGivesAClearError) {
  ModelSpec spec = MlpSpec(Method::kSoftContrastive, Kind::kPoint);
  spec.backbone = BackboneType::kTorchScript;
  spec.input_shape = {4};
  Encoder e{nullptr};

  spec.backbone_path = Path("missing.pt");
  Status s = MakeEncoder(spec, &e);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("missing.pt"), std::string::npos);

  spec.backbone_path = Path("corrupt.pt");
  WriteBytes(spec.backbone_path, "PK\x03\x04 definitely not a TorchScript archive");
  s = MakeEncoder(spec, &e);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("not a loadable TorchScript file"), std::string::npos);

  // A valid script whose forward does not accept the declared input shape.
  spec.backbone_path = Path("backbone.pt");
  WriteScriptModule(spec.backbone_path);
  spec.input_shape = {7};
  s = MakeEncoder(spec, &e);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(e.is_empty());

  // A model file that refers to a script that has since disappeared.
  spec.input_shape = {4};
  ASSERT_TRUE(MakeEncoder(spec, &e).ok());
  ASSERT_TRUE(SaveModel(Path("model.hdbm"), e).ok());
  fs::remove(spec.backbone_path);
  ModelSpec loaded_spec;
  Encoder loaded{nullptr};
  EXPECT_TRUE(LoadModel(Path("model.hdbm"), &loaded_spec, &loaded).IsNotFound());
}

}  // namespace
}  // namespace hedgedb::encoders
