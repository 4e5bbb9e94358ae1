// Image files as encoder input (datasets/image_set.h): decoding PNG/JPEG/PGM/
// PPM written in the test, fitting to a model's shape, the errors for bad
// files, directory/list/IDX sources, and embedding decoded images with an
// EncoderModel exactly as the raw pixels would be.
#include "datasets/image_set.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "datasets/idx_reader.h"
#include "encoders/embedder.h"
#include "encoders/models/model_file.h"
#include "encoders/models/models.h"

namespace hedgedb::datasets {
namespace {

namespace fs = std::filesystem;
using encoders::Embeddings;
using encoders::Encoder;
using encoders::EncoderModel;
using encoders::ItemSet;
using encoders::MakeEncoder;
using encoders::Method;
using encoders::ModelSpec;
using encoders::SaveModel;

class ImageSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("hedgedb_image_set_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const {
    fs::create_directories((dir_ / name).parent_path());
    return (dir_ / name).string();
  }

  // 2-item Fashion-MNIST composites (two test images side by side), {1, 28, 56}
  // floats in [0, 1] as the trainer renders them (PixelsToFloat of 8-bit
  // pixels, so a PNG of them must decode to the same floats).
  static std::vector<float> Composites(int count, std::vector<int64_t>* labels = nullptr) {
    static IdxImages images;
    static std::vector<int64_t> base_labels;
    if (images.count == 0) {
      const std::string dir = kFashionMnistDefaultDir;
      EXPECT_TRUE(ReadIdxImages(dir + "/t10k-images-idx3-ubyte.gz", &images).ok());
      EXPECT_TRUE(ReadIdxLabels(dir + "/t10k-labels-idx1-ubyte.gz", &base_labels).ok());
    }
    std::vector<float> out(static_cast<size_t>(count) * 28 * 56);
    for (int i = 0; i < count; ++i) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t* src = images.image(2 * i + half);
        for (int y = 0; y < 28; ++y) {
          for (int x = 0; x < 28; ++x) {
            PixelsToFloat(src + y * 28 + x, 1, &out[i * 28 * 56 + y * 56 + half * 28 + x]);
          }
        }
      }
      if (labels != nullptr) labels->push_back(base_labels[2 * i] * 10 + base_labels[2 * i + 1]);
    }
    return out;
  }

  static std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  static void Spit(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  }

  // Decodes one file; returns the error message ("" on success).
  static std::string DecodeOne(const std::string& path, const std::vector<int64_t>& shape,
                               ImageFit fit, std::vector<float>* pixels = nullptr) {
    const ImageSource source = ImageFilesSource({path});
    ImageInputOptions options;
    options.input_shape = shape;
    options.fit = fit;
    DecodedImages decoded;
    EXPECT_TRUE(DecodeImages(source, 0, 1, options, &decoded).ok());
    if (pixels != nullptr) *pixels = decoded.pixels;
    EXPECT_EQ(decoded.size() + static_cast<int64_t>(decoded.errors.size()), 1);
    return decoded.errors.empty() ? "" : decoded.errors[0].message;
  }

  fs::path dir_;
};

const std::vector<int64_t> kGray28x56 = {1, 28, 56};

// A minimal 8-bit PNG writer (stored deflate blocks), for colour types
// WriteImageFile does not write: 4 (gray + alpha) and 6 (RGBA).
uint32_t Crc32(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::string BigEndian32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string PngChunk(const std::string& type, const std::string& data) {
  return BigEndian32(static_cast<uint32_t>(data.size())) + type + data +
         BigEndian32(Crc32(type + data));
}

std::string Png(int width, int height, int color_type, const std::vector<uint8_t>& pixels) {
  const int channels = color_type == 6 ? 4 : color_type == 4 ? 2 : color_type == 2 ? 3 : 1;
  std::string raw;
  for (int y = 0; y < height; ++y) {
    raw.push_back('\0');  // filter: none
    for (int x = 0; x < width * channels; ++x) {
      raw.push_back(static_cast<char>(pixels[y * width * channels + x]));
    }
  }
  uint32_t a = 1, b = 0;  // Adler-32
  for (unsigned char c : raw) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  const uint16_t n = static_cast<uint16_t>(raw.size());
  std::string zlib = {'\x78',
                      '\x01',
                      '\x01',
                      static_cast<char>(n & 0xFF),
                      static_cast<char>(n >> 8),
                      static_cast<char>(~n & 0xFF),
                      static_cast<char>((~n >> 8) & 0xFF)};
  zlib += raw + BigEndian32((b << 16) | a);
  const std::string header = BigEndian32(width) + BigEndian32(height) +
                             std::string{8, static_cast<char>(color_type), 0, 0, 0};
  return std::string("\x89PNG\r\n\x1a\n", 8) + PngChunk("IHDR", header) + PngChunk("IDAT", zlib) +
         PngChunk("IEND", "");
}

TEST_F(ImageSetTest, PngRoundTripIsExactAndJpegIsClose) {
  const std::vector<float> image = Composites(1);
  const std::string png = Path("a.png"), jpg = Path("a.jpg");
  ASSERT_TRUE(WriteImageFile(png, image.data(), 1, 28, 56).ok());
  ASSERT_TRUE(WriteImageFile(jpg, image.data(), 1, 28, 56, 100).ok());
  std::vector<float> decoded;
  ASSERT_EQ(DecodeOne(png, kGray28x56, ImageFit::kExact, &decoded), "");
  ASSERT_EQ(decoded.size(), image.size());
  for (size_t i = 0; i < image.size(); ++i) ASSERT_EQ(decoded[i], image[i]) << i;
  ASSERT_EQ(DecodeOne(jpg, kGray28x56, ImageFit::kExact, &decoded), "");
  double mean_abs = 0;
  for (size_t i = 0; i < image.size(); ++i) mean_abs += std::fabs(decoded[i] - image[i]);
  mean_abs /= image.size();
  EXPECT_LT(mean_abs, 0.02);  // quality 100: small, non-zero loss
}

TEST_F(ImageSetTest, ColourIsRgbChannelMajorAndConvertedOnlyWhenAsked) {
  // 2 x 3 colour image: red, green, blue / white, black, grey.
  const float rgb[3][6] = {{1, 0, 0, 1, 0, 0.4f}, {0, 1, 0, 1, 0, 0.4f}, {0, 0, 1, 1, 0, 0.4f}};
  std::vector<float> chw;
  for (const auto& plane : rgb) chw.insert(chw.end(), plane, plane + 6);
  const std::string path = Path("c.png");
  ASSERT_TRUE(WriteImageFile(path, chw.data(), 3, 2, 3).ok());
  std::vector<float> out;
  ASSERT_EQ(DecodeOne(path, {3, 2, 3}, ImageFit::kExact, &out), "");
  ASSERT_EQ(out.size(), 18u);
  for (size_t i = 0; i < 18; ++i) EXPECT_NEAR(out[i], chw[i], 1.0 / 255) << i;

  // A colour file for a grayscale model: an error under exact, converted
  // under resize (OpenCV's luma weights: red 0.299, green 0.587, blue 0.114).
  const std::string error = DecodeOne(path, {1, 2, 3}, ImageFit::kExact);
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("3 channels"), std::string::npos) << error;
  ASSERT_EQ(DecodeOne(path, {1, 2, 3}, ImageFit::kResize, &out), "");
  ASSERT_EQ(out.size(), 6u);
  EXPECT_NEAR(out[0], 0.299, 0.01);
  EXPECT_NEAR(out[1], 0.587, 0.01);
  EXPECT_NEAR(out[2], 0.114, 0.01);
  EXPECT_NEAR(out[3], 1.0, 0.01);

  // And a grayscale file for a colour model: replicated channels.
  const std::vector<float> gray = {0.2f, 0.6f};
  ASSERT_TRUE(WriteImageFile(Path("g.png"), gray.data(), 1, 1, 2).ok());
  EXPECT_NE(DecodeOne(Path("g.png"), {3, 1, 2}, ImageFit::kExact), "");
  ASSERT_EQ(DecodeOne(Path("g.png"), {3, 1, 2}, ImageFit::kResize, &out), "");
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(out[c * 2], 0.2, 1.0 / 255);
    EXPECT_NEAR(out[c * 2 + 1], 0.6, 1.0 / 255);
  }
}

TEST_F(ImageSetTest, ResizeAndCentreCrop) {
  // 20 x 60 gray image: left third 0, middle third 0.5, right third 1.
  std::vector<float> image(20 * 60);
  for (int y = 0; y < 20; ++y) {
    for (int x = 0; x < 60; ++x) image[y * 60 + x] = x < 20 ? 0.0f : x < 40 ? 0.5f : 1.0f;
  }
  const std::string path = Path("wide.pgm");
  ASSERT_TRUE(WriteImageFile(path, image.data(), 1, 20, 60).ok());
  const std::string error = DecodeOne(path, {1, 10, 10}, ImageFit::kExact);
  EXPECT_NE(error.find(path), std::string::npos);
  EXPECT_NE(error.find("20 x 60"), std::string::npos) << error;
  EXPECT_NE(error.find("10 x 10"), std::string::npos) << error;
  std::vector<float> out;
  // Resize squeezes all three thirds into 10 x 10.
  ASSERT_EQ(DecodeOne(path, {1, 10, 10}, ImageFit::kResize, &out), "");
  ASSERT_EQ(out.size(), 100u);
  EXPECT_NEAR(out[0], 0.0, 0.01);
  EXPECT_NEAR(out[9], 1.0, 0.01);
  // Crop keeps the centred 20 x 20 window: the middle third only.
  ASSERT_EQ(DecodeOne(path, {1, 10, 10}, ImageFit::kCrop, &out), "");
  for (float v : out) ASSERT_NEAR(v, 0.5, 0.01);
}

TEST_F(ImageSetTest, SixteenBitAndAlphaAreHandled) {
  // A 16-bit binary PGM: 1 x 2 pixels 0x8000 and 0xFFFF.
  const std::string pgm = Path("deep.pgm");
  Spit(pgm, std::string("P5\n2 1\n65535\n") + std::string("\x80\x00\xff\xff", 4));
  std::vector<float> out;
  ASSERT_EQ(DecodeOne(pgm, {1, 1, 2}, ImageFit::kExact, &out), "");
  EXPECT_NEAR(out[0], 32768.0 / 65535.0, 1e-6);
  EXPECT_FLOAT_EQ(out[1], 1.0f);

  // An RGBA PNG: 1 x 2 pixels red (alpha 0) and blue (alpha 255). Alpha is
  // dropped, the colour kept, in RGB order.
  const std::string rgba = Path("alpha.png");
  Spit(rgba, Png(2, 1, /*color_type=*/6, {255, 0, 0, 0, 0, 0, 255, 255}));
  ASSERT_EQ(DecodeOne(rgba, {3, 1, 2}, ImageFit::kExact, &out), "");
  EXPECT_EQ(out, (std::vector<float>{1, 0, 0, 0, 0, 1}));
  // Gray + alpha counts as one channel (OpenCV decodes it as BGRA with equal
  // colour channels).
  const std::string gray_alpha = Path("gray_alpha.png");
  Spit(gray_alpha, Png(2, 1, /*color_type=*/4, {255, 0, 51, 255}));
  ASSERT_EQ(DecodeOne(gray_alpha, {1, 1, 2}, ImageFit::kExact, &out), "");
  EXPECT_EQ(out, (std::vector<float>{1.0f, 51 * (1.0f / 255.0f)}));
  // So is a colour image whose channels are all equal (grey content saved as
  // RGB), while a coloured one is not (tested above).
  const std::string grey_rgb = Path("grey_rgb.png");
  Spit(grey_rgb, Png(2, 1, /*color_type=*/2, {10, 10, 10, 200, 200, 200}));
  ASSERT_EQ(DecodeOne(grey_rgb, {1, 1, 2}, ImageFit::kExact, &out), "");
  EXPECT_EQ(out, (std::vector<float>{10 * (1.0f / 255.0f), 200 * (1.0f / 255.0f)}));
}

TEST_F(ImageSetTest, BadFilesAreReportedByName) {
  const std::vector<float> image = Composites(1);
  const std::string png = Path("good.png"), jpg = Path("good.jpg");
  ASSERT_TRUE(WriteImageFile(png, image.data(), 1, 28, 56).ok());
  ASSERT_TRUE(WriteImageFile(jpg, image.data(), 1, 28, 56).ok());
  const std::string png_bytes = Slurp(png), jpg_bytes = Slurp(jpg);

  struct Case {
    std::string name, bytes, needle;
  };
  const std::vector<Case> cases = {
      {"half.png", png_bytes.substr(0, png_bytes.size() / 2), "truncated"},
      {"noend.png", png_bytes.substr(0, png_bytes.size() - 12), "truncated"},
      {"half.jpg", jpg_bytes.substr(0, jpg_bytes.size() / 2), "truncated"},
      {"noeoi.jpg", jpg_bytes.substr(0, jpg_bytes.size() - 2), "truncated"},
      {"garbage.png", std::string(300, 'x'), "not a readable image"},
      {"empty.png", "", "empty file"},
  };
  for (const Case& c : cases) {
    const std::string path = Path(c.name);
    Spit(path, c.bytes);
    const std::string error = DecodeOne(path, kGray28x56, ImageFit::kExact);
    EXPECT_EQ(error.rfind(path, 0), 0u) << c.name << ": " << error;
    EXPECT_NE(error.find(c.needle), std::string::npos) << c.name << ": " << error;
  }
  const std::string missing = DecodeOne(Path("missing.png"), kGray28x56, ImageFit::kExact);
  EXPECT_NE(missing.find("missing.png: no such file"), std::string::npos) << missing;
  fs::create_directories(dir_ / "folder.png");
  EXPECT_NE(DecodeOne((dir_ / "folder.png").string(), kGray28x56, ImageFit::kExact)
                .find("not a regular file"),
            std::string::npos);
  // The intact files still decode.
  EXPECT_EQ(DecodeOne(png, kGray28x56, ImageFit::kExact), "");
  EXPECT_EQ(DecodeOne(jpg, kGray28x56, ImageFit::kExact), "");
}

TEST_F(ImageSetTest, ABatchKeepsTheGoodImagesAndListsTheBadOnes) {
  const std::vector<float> images = Composites(3);
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) {
    paths.push_back(Path("b" + std::to_string(i) + ".png"));
    ASSERT_TRUE(WriteImageFile(paths.back(), images.data() + i * 28 * 56, 1, 28, 56).ok());
  }
  paths.insert(paths.begin() + 1, Path("nope.png"));
  const ImageSource source = ImageFilesSource(paths);
  ImageInputOptions options;
  options.input_shape = kGray28x56;
  DecodedImages decoded;
  ASSERT_TRUE(DecodeImages(source, 0, 4, options, &decoded).ok());
  EXPECT_EQ(decoded.entries, (std::vector<int64_t>{0, 2, 3}));
  ASSERT_EQ(decoded.errors.size(), 1u);
  EXPECT_EQ(decoded.errors[0].entry, 1);
  ASSERT_EQ(decoded.pixels.size(), 3u * 28 * 56);
  EXPECT_EQ(decoded.pixels[2 * 28 * 56 + 300], images[2 * 28 * 56 + 300]);
  // Bad arguments are a Status, not a per-image error.
  EXPECT_FALSE(DecodeImages(source, 2, 3, options, &decoded).ok());
  options.input_shape = {2, 28, 56};
  EXPECT_FALSE(DecodeImages(source, 0, 1, options, &decoded).ok());
  options.input_shape = {64};
  EXPECT_FALSE(DecodeImages(source, 0, 1, options, &decoded).ok());
}

TEST_F(ImageSetTest, DirectoryListAndIdxSources) {
  const std::vector<float> image = Composites(1);
  for (const char* name : {"cls/7/a.png", "cls/7/sub/b.jpg", "cls/shoe/c.png", "cls/shoe/x.txt",
                           "cls/.hidden/d.png", "flat/b.png", "flat/a.PNG"}) {
    if (std::string(name).find(".txt") != std::string::npos) {
      Spit(Path(name), "not an image");
    } else {
      ASSERT_TRUE(WriteImageFile(Path(name), image.data(), 1, 28, 56).ok());
    }
  }
  ImageSource source;
  ASSERT_TRUE(ListImageDirectory((dir_ / "cls").string(), &source).ok());
  ASSERT_EQ(source.size(), 3);
  EXPECT_EQ(source.entries[0].path, (dir_ / "cls/7/a.png").string());
  EXPECT_EQ(source.entries[1].path, (dir_ / "cls/7/sub/b.jpg").string());
  EXPECT_EQ(source.entries[0].label, 7);
  EXPECT_EQ(source.entries[1].label, 7);
  EXPECT_EQ(source.entries[2].label, LabelOfName("shoe"));
  EXPECT_EQ(source.entries[2].label_name, "shoe");
  const nlohmann::json payload = nlohmann::json::parse(source.entries[2].Payload());
  EXPECT_EQ(payload["path"], (dir_ / "cls/shoe/c.png").string());
  EXPECT_EQ(payload["label_name"], "shoe");

  ASSERT_TRUE(ListImageDirectory((dir_ / "flat").string(), &source).ok());
  ASSERT_EQ(source.size(), 2);
  EXPECT_FALSE(source.entries[0].has_label);
  EXPECT_EQ(fs::path(source.entries[0].path).filename(), "a.PNG");

  // Mixed layout, missing and image-less directories.
  ASSERT_TRUE(WriteImageFile(Path("cls/top.png"), image.data(), 1, 28, 56).ok());
  Status s = ListImageDirectory((dir_ / "cls").string(), &source);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("top.png"), std::string::npos) << s.ToString();
  s = ListImageDirectory((dir_ / "none").string(), &source);
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_NE(s.message().find("none"), std::string::npos);
  fs::create_directories(dir_ / "empty");
  EXPECT_FALSE(ListImageDirectory((dir_ / "empty").string(), &source).ok());

  // List file: relative paths against the list's folder, labels as names.
  Spit(Path("lists/l.csv"), "# comment\n../flat/b.png, 3\n\n" + Path("cls/shoe/c.png") + ",shoe\n");
  ASSERT_TRUE(ReadImageListFile(Path("lists/l.csv"), &source).ok());
  ASSERT_EQ(source.size(), 2);
  EXPECT_EQ(source.entries[0].path, (dir_ / "flat/b.png").string());
  EXPECT_EQ(source.entries[0].label, 3);
  EXPECT_EQ(source.entries[1].label, LabelOfName("shoe"));
  Spit(Path("lists/mixed.csv"), "a.png,1\nb.png\n");
  s = ReadImageListFile(Path("lists/mixed.csv"), &source);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("mixed.csv:2"), std::string::npos) << s.ToString();
  EXPECT_TRUE(ReadImageListFile(Path("lists/absent.csv"), &source).IsNotFound());

  // IDX: images with labels; entries are named file[index].
  IdxImages idx;
  idx.count = 2;
  idx.rows = 28;
  idx.cols = 56;
  for (float v : Composites(2)) idx.pixels.push_back(static_cast<uint8_t>(std::lround(v * 255)));
  ASSERT_TRUE(WriteIdxImages(Path("i.idx"), idx, /*gzip=*/true).ok());
  ASSERT_TRUE(WriteIdxLabels(Path("l.idx"), {4, 9}, /*gzip=*/false).ok());
  ASSERT_TRUE(ReadIdxImageSource(Path("i.idx"), Path("l.idx"), &source).ok());
  ASSERT_EQ(source.size(), 2);
  EXPECT_EQ(source.entries[1].label, 9);
  EXPECT_EQ(source.entries[1].Name(), Path("i.idx") + "[1]");
  EXPECT_EQ(nlohmann::json::parse(source.entries[1].Payload())["index"], 1);
  ImageInputOptions options;
  options.input_shape = kGray28x56;
  DecodedImages decoded;
  ASSERT_TRUE(DecodeImages(source, 0, 2, options, &decoded).ok());
  ASSERT_EQ(decoded.size(), 2);
  float expected = 0;
  PixelsToFloat(&idx.pixels[28 * 56 + 400], 1, &expected);
  EXPECT_EQ(decoded.pixels[28 * 56 + 400], expected);
  options.input_shape = {1, 28, 28};
  ASSERT_TRUE(DecodeImages(source, 0, 2, options, &decoded).ok());
  ASSERT_EQ(decoded.errors.size(), 2u);
  EXPECT_NE(decoded.errors[0].message.find("i.idx[0]"), std::string::npos);
  ASSERT_TRUE(WriteIdxLabels(Path("l3.idx"), {1, 2, 3}, false).ok());
  EXPECT_FALSE(ReadIdxImageSource(Path("i.idx"), Path("l3.idx"), &source).ok());
}

TEST_F(ImageSetTest, LabelsOfNames) {
  EXPECT_EQ(LabelOfName("42"), 42);
  EXPECT_EQ(LabelOfName("007"), 7);
  EXPECT_EQ(LabelOfName("cat"), LabelOfName("cat"));
  EXPECT_NE(LabelOfName("cat"), LabelOfName("dog"));
  EXPECT_GE(LabelOfName("cat"), 0);
  EXPECT_LT(LabelOfName("cat"), int64_t{1} << 53);
  EXPECT_TRUE(IsImageFileName("x.JPEG"));
  EXPECT_FALSE(IsImageFileName("x.txt"));
  EXPECT_FALSE(IsImageFileName(".png"));
}

// Decoded PNGs embed exactly like the raw [0, 1] pixels: the reader does not
// normalise (the encoder does, with the model file's mean/std).
TEST_F(ImageSetTest, DecodedImagesEmbedLikeTheirPixels) {
  torch::manual_seed(3);
  torch::set_num_threads(2);
  ModelSpec spec;
  spec.method = Method::kHib;
  spec.kind = Kind::kGaussian;
  spec.dim = 3;
  spec.input_shape = kGray28x56;
  spec.input_mean = {0.286};
  spec.input_std = {0.353};
  spec.cnn.conv1_channels = 4;
  spec.cnn.conv2_channels = 6;
  spec.cnn.hidden = 16;
  Encoder encoder{nullptr};
  ASSERT_TRUE(MakeEncoder(spec, &encoder).ok());
  ASSERT_TRUE(SaveModel(Path("m.hdbm"), encoder).ok());
  std::unique_ptr<EncoderModel> model;
  ASSERT_TRUE(EncoderModel::Load(Path("m.hdbm"), &model).ok());

  std::vector<int64_t> labels;
  const int n = 5;
  const std::vector<float> pixels = Composites(n, &labels);
  std::vector<std::string> paths;
  for (int i = 0; i < n; ++i) {
    paths.push_back(Path(std::to_string(labels[i]) + "/" + std::to_string(i) + ".png"));
    ASSERT_TRUE(WriteImageFile(paths.back(), pixels.data() + i * 28 * 56, 1, 28, 56).ok());
  }
  const ImageSource source = ImageFilesSource(paths);
  ImageInputOptions options;
  options.input_shape = spec.input_shape;
  auto decoded = std::make_shared<DecodedImages>();
  ASSERT_TRUE(DecodeImages(source, 0, n, options, decoded.get()).ok());
  ASSERT_EQ(decoded->size(), n);
  const ItemSet from_files = DecodedImageItemSet(decoded, source);
  EXPECT_EQ(from_files.labels, std::vector<int64_t>(n, -1));  // files given without labels

  ItemSet from_pixels;
  from_pixels.labels.assign(n, 0);
  from_pixels.input_shape = spec.input_shape;
  from_pixels.render = [&pixels](const std::vector<int64_t>& items, bool, float* out) {
    for (size_t i = 0; i < items.size(); ++i) {
      std::copy_n(pixels.data() + items[i] * 28 * 56, 28 * 56, out + i * 28 * 56);
    }
  };
  const std::vector<int64_t> items = {0, 1, 2, 3, 4};
  Embeddings a, b;
  ASSERT_TRUE(model->Embed(from_files, items, false, &a, /*batch_size=*/2).ok());
  ASSERT_TRUE(model->Embed(from_pixels, items, false, &b).ok());
  ASSERT_EQ(a.mean.size(), 15u);
  for (size_t i = 0; i < a.mean.size(); ++i) {
    EXPECT_NEAR(a.mean[i], b.mean[i], 1e-5) << i;
    EXPECT_NEAR(a.var[i], b.var[i], 1e-5) << i;
  }
  // Different images give different embeddings (the check above is not vacuous).
  EXPECT_GT(std::fabs(a.mean[0] - a.mean[3]) + std::fabs(a.mean[1] - a.mean[4]), 1e-4);
}

// The payload writer/reader pair of image items.
TEST(ImagePayloadTest, RoundTrip) {
  ImageEntry file;
  file.path = "/data/birds/3/x.png";
  file.label_name = "3";
  ImagePayload fields;
  ASSERT_TRUE(ParseImagePayload(file.Payload(), &fields));
  EXPECT_EQ(fields.path, file.path);
  EXPECT_EQ(fields.index, -1);
  EXPECT_EQ(fields.label_name, "3");
  EXPECT_TRUE(file.IsPayloadOf(file.Payload()));

  ImageEntry idx;
  idx.path = "/data/t10k.idx";
  idx.idx_index = 17;
  ASSERT_TRUE(ParseImagePayload(idx.Payload(), &fields));
  EXPECT_EQ(fields.index, 17);
  EXPECT_EQ(fields.label_name, "");
  EXPECT_TRUE(idx.IsPayloadOf(idx.Payload()));
  ImageEntry other = idx;
  other.idx_index = 18;
  EXPECT_FALSE(other.IsPayloadOf(idx.Payload()));
  EXPECT_FALSE(file.IsPayloadOf(idx.Payload()));
  EXPECT_FALSE(ParseImagePayload("plain text", &fields));
  EXPECT_FALSE(ParseImagePayload("{\"id\": 3}", &fields));
  // Found by fuzzing: a negative index parsed, but the payload written back
  // for it had no index (a plain file), so the two did not agree.
  EXPECT_FALSE(
      ParseImagePayload("{\"index\":-7,\"path\":\"/data/t10k-images.idx3-ubyte\"}", &fields));
  EXPECT_FALSE(ParseImagePayload("{\"index\":2.5,\"path\":\"a.idx\"}", &fields));
  EXPECT_FALSE(ParseImagePayload("{\"index\":\"3\",\"path\":\"a.idx\"}", &fields));
  EXPECT_FALSE(ParseImagePayload("{\"label_name\":3,\"path\":\"a.png\"}", &fields));
  EXPECT_FALSE(file.IsPayloadOf(""));
}

// The hidden fraction of occluded images.
TEST(OcclusionTest, HiddenFraction) {
  const float clean[] = {0, 1, 1, 1, 1};
  const float occluded[] = {0, 0, 1, 0, 1};
  EXPECT_DOUBLE_EQ(HiddenFraction(clean, occluded, 5), 0.5);
  const float zeros[] = {0, 0};
  EXPECT_DOUBLE_EQ(HiddenFraction(zeros, zeros, 2), 0.0);
}

}  // namespace
}  // namespace hedgedb::datasets
