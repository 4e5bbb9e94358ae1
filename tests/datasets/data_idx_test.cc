#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "datasets/idx_reader.h"
#include "temp_dir.h"

namespace hedgedb {
namespace datasets {
namespace {

namespace fs = std::filesystem;
using testing_util::ReadBytes;
using testing_util::WriteBytes;

class IdxTest : public testing_util::TempDirTest {
 protected:
  // count x rows x cols images whose pixels are a simple function of their
  // position, so that any misplaced byte shows.
  static IdxImages MakeImages(int64_t count, int32_t rows, int32_t cols) {
    IdxImages images;
    images.count = count;
    images.rows = rows;
    images.cols = cols;
    for (int64_t i = 0; i < count * rows * cols; ++i) {
      images.pixels.push_back(static_cast<uint8_t>((i * 37 + 11) % 256));
    }
    return images;
  }
};

TEST_F(IdxTest, PlainAndGzipRoundTrip) {
  const IdxImages images = MakeImages(3, 4, 5);
  const std::vector<int64_t> labels = {7, 0, 255};
  for (const bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    const std::string images_path = Path(gzip ? "img.gz" : "img");
    const std::string labels_path = Path(gzip ? "lab.gz" : "lab");
    ASSERT_TRUE(WriteIdxImages(images_path, images, gzip).ok());
    ASSERT_TRUE(WriteIdxLabels(labels_path, labels, gzip).ok());

    const std::string raw = ReadBytes(images_path);
    ASSERT_GE(raw.size(), 4u);
    const bool has_gzip_magic =
        static_cast<uint8_t>(raw[0]) == 0x1f && static_cast<uint8_t>(raw[1]) == 0x8b;
    EXPECT_EQ(has_gzip_magic, gzip);
    if (!gzip) {
      // Big-endian magic 2051 and dimensions 3, 4, 5, then the pixels.
      EXPECT_EQ(raw.substr(0, 16), std::string("\x00\x00\x08\x03\x00\x00\x00\x03"
                                               "\x00\x00\x00\x04\x00\x00\x00\x05",
                                               16));
      EXPECT_EQ(raw.size(), 16u + 60u);
    }

    LabeledImages data;
    const Status s = ReadIdxLabeledImages(images_path, labels_path, &data);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(data.images.count, 3);
    EXPECT_EQ(data.images.rows, 4);
    EXPECT_EQ(data.images.cols, 5);
    EXPECT_EQ(data.images.pixels, images.pixels);
    EXPECT_EQ(data.labels, labels);
    EXPECT_EQ(data.images.image(2)[0], images.pixels[40]);
  }
}

TEST_F(IdxTest, ReadsConcatenatedGzipMembers) {
  // `cat a.gz b.gz` is a valid gzip file; split an images file in two members.
  const IdxImages images = MakeImages(2, 3, 3);
  ASSERT_TRUE(WriteIdxImages(Path("plain"), images, false).ok());
  const std::string plain = ReadBytes(Path("plain"));
  WriteBytes(Path("part1"), plain.substr(0, 10));
  WriteBytes(Path("part2"), plain.substr(10));
  ASSERT_EQ(std::system(("gzip -c " + Path("part1") + " > " + Path("joined.gz") + " && gzip -c " +
                         Path("part2") + " >> " + Path("joined.gz"))
                            .c_str()),
            0);
  IdxImages read;
  const Status s = ReadIdxImages(Path("joined.gz"), &read);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(read.pixels, images.pixels);
}

TEST_F(IdxTest, RejectsWrongMagic) {
  ASSERT_TRUE(WriteIdxLabels(Path("labels"), {1, 2, 3}, false).ok());
  IdxImages images;
  const Status s = ReadIdxImages(Path("labels"), &images);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(Path("labels")), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bad IDX magic 2049"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("labels file"), std::string::npos) << s.message();

  WriteBytes(Path("text"), "hello world, not an idx file");
  std::vector<int64_t> labels;
  const Status t = ReadIdxLabels(Path("text"), &labels);
  ASSERT_TRUE(t.IsCorruption()) << t.ToString();
  EXPECT_NE(t.message().find("not an IDX file"), std::string::npos) << t.message();
}

TEST_F(IdxTest, RejectsTruncatedAndTrailingData) {
  ASSERT_TRUE(WriteIdxImages(Path("img"), MakeImages(3, 4, 5), false).ok());
  const std::string bytes = ReadBytes(Path("img"));
  IdxImages images;

  WriteBytes(Path("short"), bytes.substr(0, bytes.size() - 1));
  Status s = ReadIdxImages(Path("short"), &images);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("75 bytes"), std::string::npos) << s.message();

  WriteBytes(Path("header_only"), bytes.substr(0, 10));
  s = ReadIdxImages(Path("header_only"), &images);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("truncated IDX header"), std::string::npos) << s.message();

  WriteBytes(Path("long"), bytes + "x");
  s = ReadIdxImages(Path("long"), &images);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("trailing data"), std::string::npos) << s.message();
}

TEST_F(IdxTest, RejectsZeroDimension) {
  std::string bytes("\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x05", 16);
  WriteBytes(Path("zero"), bytes);
  IdxImages images;
  const Status s = ReadIdxImages(Path("zero"), &images);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("dimension 1 is 0"), std::string::npos) << s.message();
}

TEST_F(IdxTest, RejectsTruncatedAndCorruptGzip) {
  ASSERT_TRUE(WriteIdxImages(Path("img.gz"), MakeImages(20, 28, 28), true).ok());
  const std::string bytes = ReadBytes(Path("img.gz"));
  IdxImages images;

  WriteBytes(Path("cut.gz"), bytes.substr(0, bytes.size() / 2));
  Status s = ReadIdxImages(Path("cut.gz"), &images);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("truncated gzip"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(Path("cut.gz")), std::string::npos) << s.message();

  // Damage the trailer's CRC: the data inflates but fails its check.
  std::string damaged = bytes;
  damaged[damaged.size() - 6] = static_cast<char>(damaged[damaged.size() - 6] ^ 0x55);
  WriteBytes(Path("crc.gz"), damaged);
  s = ReadIdxImages(Path("crc.gz"), &images);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("corrupt gzip"), std::string::npos) << s.message();
}

TEST_F(IdxTest, RejectsCountMismatchBetweenImagesAndLabels) {
  ASSERT_TRUE(WriteIdxImages(Path("img"), MakeImages(3, 2, 2), false).ok());
  ASSERT_TRUE(WriteIdxLabels(Path("lab"), {1, 2, 3, 4}, true).ok());
  LabeledImages data;
  const Status s = ReadIdxLabeledImages(Path("img"), Path("lab"), &data);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("3 images"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("4 labels"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(Path("lab")), std::string::npos) << s.message();
}

TEST_F(IdxTest, MissingFileIsNotFound) {
  IdxImages images;
  const Status s = ReadIdxImages(Path("absent"), &images);
  ASSERT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find(Path("absent")), std::string::npos);
}

TEST_F(IdxTest, WriterRejectsBadInput) {
  IdxImages images = MakeImages(2, 2, 2);
  images.pixels.pop_back();
  EXPECT_TRUE(WriteIdxImages(Path("x"), images, false).IsInvalidArgument());
  EXPECT_TRUE(WriteIdxLabels(Path("y"), {1, 256}, false).IsInvalidArgument());
  EXPECT_TRUE(WriteIdxLabels(Path("y"), {-1}, false).IsInvalidArgument());
}

TEST_F(IdxTest, LoadsMnistLayoutDirectoryWithBothSpellings) {
  const IdxImages train = MakeImages(4, 28, 28);
  const IdxImages test = MakeImages(2, 28, 28);
  // Debian spelling, gzip, for train; the original MNIST site's dotted
  // spelling, plain, for test.
  ASSERT_TRUE(WriteIdxImages(Path("train-images-idx3-ubyte.gz"), train, true).ok());
  ASSERT_TRUE(WriteIdxLabels(Path("train-labels-idx1-ubyte.gz"), {0, 1, 2, 3}, true).ok());
  ASSERT_TRUE(WriteIdxImages(Path("t10k-images.idx3-ubyte"), test, false).ok());
  ASSERT_TRUE(WriteIdxLabels(Path("t10k-labels.idx1-ubyte"), {9, 8}, false).ok());
  ImageSplits splits;
  const Status s = LoadMnistLayoutDir(dir_, &splits);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(splits.train.images.count, 4);
  EXPECT_EQ(splits.test.images.count, 2);
  EXPECT_EQ(splits.test.labels, (std::vector<int64_t>{9, 8}));

  fs::remove(Path("t10k-labels.idx1-ubyte"));
  const Status missing = LoadMnistLayoutDir(dir_, &splits);
  ASSERT_TRUE(missing.IsNotFound()) << missing.ToString();
  EXPECT_NE(missing.message().find("t10k-labels-idx1-ubyte"), std::string::npos)
      << missing.message();
}

TEST(PixelsToFloatTest, ScalesToUnitInterval) {
  const std::vector<uint8_t> pixels = {0, 51, 255};
  std::vector<float> out(3);
  PixelsToFloat(pixels.data(), 3, out.data());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 0.2f, 1e-7);
  EXPECT_NEAR(out[2], 1.0f, 1e-7);
}

TEST(FashionMnistTest, LoadsDebianPackage) {
  if (!fs::exists(std::string(kFashionMnistDefaultDir) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  ImageSplits splits;
  const Status s = LoadFashionMnist(&splits);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(splits.train.images.count, 60000);
  EXPECT_EQ(splits.test.images.count, 10000);
  EXPECT_EQ(splits.train.images.rows, 28);
  EXPECT_EQ(splits.train.images.cols, 28);
  // Fashion-MNIST is balanced: 6000 / 1000 items of each of its 10 labels.
  for (const auto& [split, per_label] :
       {std::make_pair(&splits.train, 6000), std::make_pair(&splits.test, 1000)}) {
    std::vector<int64_t> counts(10, 0);
    for (const int64_t label : split->labels) {
      ASSERT_GE(label, 0);
      ASSERT_LT(label, 10);
      ++counts[label];
    }
    for (int label = 0; label < 10; ++label) EXPECT_EQ(counts[label], per_label) << label;
  }
}

}  // namespace
}  // namespace datasets
}  // namespace hedgedb
