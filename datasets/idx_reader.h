// IDX files (the MNIST / Fashion-MNIST layout), plain or gzip-compressed.
//
// Layout: a big-endian 32-bit magic 0x0000TTDD (TT = element type, DD = number
// of dimensions), DD big-endian 32-bit dimension sizes, then the elements in
// row-major order. We read unsigned-byte images (magic 2051 = 0x00000803:
// count x rows x cols) and unsigned-byte labels (magic 2049 = 0x00000801:
// count). Gzip is detected by its magic bytes (1f 8b), not by the file name.
//
// Every error names the file and the problem (wrong magic, zero dimension,
// truncated or oversized data, corrupt gzip stream, count mismatch between an
// images file and its labels file).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hedgedb/status.h"

namespace hedgedb {
namespace datasets {

constexpr uint32_t kIdxImagesMagic = 2051;
constexpr uint32_t kIdxLabelsMagic = 2049;

// Where Debian's dataset-fashion-mnist package installs the data.
constexpr const char kFashionMnistDefaultDir[] = "/usr/share/datasets/fashion-mnist";

// count x rows x cols unsigned-byte images, row-major (raw pixel values 0-255).
struct IdxImages {
  int64_t count = 0;
  int32_t rows = 0;
  int32_t cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols

  int64_t pixels_per_image() const { return static_cast<int64_t>(rows) * cols; }
  const uint8_t* image(int64_t i) const { return pixels.data() + i * pixels_per_image(); }
};

// Images with one label each (labels[i] belongs to images.image(i)).
struct LabeledImages {
  IdxImages images;
  std::vector<int64_t> labels;
};

// A data set's own train/test split.
struct ImageSplits {
  LabeledImages train;
  LabeledImages test;
};

Status ReadIdxImages(const std::string& path, IdxImages* images);
Status ReadIdxLabels(const std::string& path, std::vector<int64_t>* labels);
// Reads both and checks that they hold the same number of items.
Status ReadIdxLabeledImages(const std::string& images_path, const std::string& labels_path,
                            LabeledImages* data);

// Writers (gzip-compressed when `gzip`), for fixtures and exports. Written to a
// temporary file and renamed, so a reader never sees half a file. Labels must
// fit in an unsigned byte.
Status WriteIdxImages(const std::string& path, const IdxImages& images, bool gzip);
Status WriteIdxLabels(const std::string& path, const std::vector<int64_t>& labels, bool gzip);

// Loads the train and test splits of an MNIST-layout directory: for each of
// train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte it takes the first file that exists among "<name>.gz",
// "<name>" and the dotted spelling of the original MNIST site
// ("train-images.idx3-ubyte", with and without ".gz"). Errors name the missing
// file. Works for Fashion-MNIST, MNIST and KMNIST alike.
Status LoadMnistLayoutDir(const std::string& dir, ImageSplits* splits);
// LoadMnistLayoutDir on the Fashion-MNIST directory (default: Debian's).
Status LoadFashionMnist(ImageSplits* splits, const std::string& dir = kFashionMnistDefaultDir);

// Pixel value / 255: the [0, 1] floats the encoders take.
void PixelsToFloat(const uint8_t* pixels, int64_t count, float* out);

}  // namespace datasets
}  // namespace hedgedb
