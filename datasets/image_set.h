// Image files as encoder input: listing a directory, a list file or an IDX
// file, decoding images with OpenCV (JPEG, PNG, BMP, TIFF, WebP, PGM/PPM, ...)
// and fitting them to a model's input shape, then presenting a decoded batch
// as an ItemSet so that EncoderModel::Embed runs unchanged.
//
// This header is torch- and OpenCV-free; image_set.cc holds the OpenCV code.
//
// Pixel convention: decoded images are floats in [0, 1] (8-bit / 255, 16-bit
// / 65535), channel-major {C, H, W}, colour channels in RGB order. They are
// NOT normalised here: the encoder applies the model file's input_mean /
// input_std in its forward pass (encoders/models/models.h), exactly as in training,
// so normalising here would apply it twice.
//
// Decoding is eager (DecodeImages) rather than inside ItemSet::render because
// render cannot report errors: a batch is decoded and checked first, and only
// the images that decoded are embedded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "datasets/idx_reader.h"
#include "encoders/data/encoder_data.h"
#include "hedgedb/status.h"

namespace hedgedb {
namespace datasets {

// What to do with an image whose size or channel count differs from the
// model's input shape.
enum class ImageFit {
  // Size and channel count must match exactly; anything else is an error
  // naming the file (the safe default: no silent distortion).
  kExact,
  // Convert channels (colour <-> gray, alpha dropped) and resize to H x W
  // (area interpolation when shrinking, bilinear when enlarging); the aspect
  // ratio may change.
  kResize,
  // Convert channels, crop the largest centred region with the model's aspect
  // ratio, then resize it to H x W (no distortion, borders may be cut).
  kCrop,
};
const char* ImageFitName(ImageFit fit);
bool ParseImageFit(const std::string& name, ImageFit* fit);

struct ImageInputOptions {
  // {C, H, W} of the model (ModelSpec::input_shape); C must be 1 or 3.
  std::vector<int64_t> input_shape;
  ImageFit fit = ImageFit::kExact;
  // Crop entries that have a bounding box to it (clamped to the image) before
  // fitting; a box that leaves nothing of the image is an error naming it.
  bool crop_to_box = false;
};

// Checks that `input_shape` is an image shape this reader can produce.
Status CheckImageInputShape(const std::vector<int64_t>& input_shape);

// One image to read: a file, or image number `idx_index` of an IDX file.
struct ImageEntry {
  std::string path;
  int64_t idx_index = -1;  // >= 0: an image inside the IDX images file `path`
  bool has_label = false;
  int64_t label = 0;
  std::string label_name;  // subfolder name or list-file label ("" if none)
  // Bounding box of the object in 0-based pixels (CUB/Cars annotations);
  // used when ImageInputOptions::crop_to_box is set.
  struct Box {
    double x = 0, y = 0, width = 0, height = 0;
  };
  bool has_box = false;
  Box box;

  // "path", or "path[index]" for an IDX image: how errors name the image.
  std::string Name() const;
  // The payload stored with the item: compact JSON
  //   {"path": "/abs/a/3/x.png", "label_name": "3"}     files (label_name if any)
  //   {"path": "/abs/t10k-images.idx3-ubyte", "index": 17}   IDX images
  // (the one writer of this format; ParseImagePayload is its reader).
  std::string Payload() const;
  // True if `payload` is this image's Payload() (same path and IDX index):
  // how a query recognises its own image among the hits.
  bool IsPayloadOf(const std::string& payload) const;
};

// The fields of an image item's payload (ImageEntry::Payload).
struct ImagePayload {
  std::string path;
  int64_t index = -1;      // IDX images only
  std::string label_name;  // "" if none
};
// Reads a payload ImageEntry::Payload() wrote; false for any other payload
// (not JSON, no "path", an "index" that is not an integer >= 0, or a
// "label_name" that is not a string).
bool ParseImagePayload(const std::string& payload, ImagePayload* fields);

// Images to read, in a fixed order. IDX sources keep the decoded IDX file here
// (its images are served from memory).
struct ImageSource {
  std::vector<ImageEntry> entries;
  std::shared_ptr<const IdxImages> idx_images;

  int64_t size() const { return static_cast<int64_t>(entries.size()); }
};

// The label of a class name: the number itself when the name is a decimal
// integer (e.g. folder "7" -> 7), otherwise a stable 53-bit FNV-1a hash of the
// name, so the same name gets the same label in every run and every ingest
// into the same collection (53 bits: exact as a JSON number everywhere).
int64_t LabelOfName(const std::string& name);

// True for file names with an extension OpenCV's imgcodecs reads (case-
// insensitive): jpg, jpeg, jpe, png, bmp, dib, tif, tiff, webp, pbm, pgm, ppm,
// pnm, pam, pxm, sr, ras, hdr, pic, exr, jp2.
bool IsImageFileName(const std::string& name);

// A directory of images. If it has subfolders, every subfolder holding images
// is a class (label from LabelOfName of the folder name) and images directly
// in `dir` are an error; otherwise it is a flat folder of unlabelled images.
// Files whose extension is not an image extension are ignored; entries are
// sorted by path. Paths are absolute. Errors: a missing or unreadable
// directory, a directory without images, a mixed layout.
Status ListImageDirectory(const std::string& dir, ImageSource* source);

// A list file: one image per line, "path" or "path,label"; blank lines and
// lines starting with '#' are skipped; surrounding spaces are trimmed. A
// relative path is relative to the list file's directory. The label is a name
// (LabelOfName). Errors name the list file and the line.
Status ReadImageListFile(const std::string& list_path, ImageSource* source);

// Every image of an IDX images file (gzip allowed), with the labels of an IDX
// labels file when `labels_path` is not empty (counts must match).
Status ReadIdxImageSource(const std::string& images_path, const std::string& labels_path,
                          ImageSource* source);

// Unlabelled entries for the given files, in the order given (paths made
// absolute). Existence is checked when decoding.
ImageSource ImageFilesSource(const std::vector<std::string>& paths);

// The end of the message of an image that decoded but does not fit the model
// under ImageFit::kExact: how a caller tells a size problem from an
// unreadable file.
inline constexpr char kExactFitHint[] = "(fit resize or crop converts it)";

// An image that could not be read or does not fit, with a message that starts
// with the image's name.
struct ImageError {
  int64_t entry = 0;  // index into ImageSource::entries
  std::string message;
};

// Decoded images of entries [first, first + count) of a source.
struct DecodedImages {
  std::vector<int64_t> input_shape;  // {C, H, W}
  std::vector<int64_t> entries;      // the entries that decoded, ascending
  std::vector<float> pixels;         // entries.size() x C x H x W, in [0, 1]
  std::vector<ImageError> errors;    // the entries that did not, ascending

  int64_t size() const { return static_cast<int64_t>(entries.size()); }
};

// Reads, decodes, checks and fits every image of the range. Per-image problems
// (missing file, unreadable or truncated data, wrong size or channels under
// kExact, an empty image) go to `out->errors`; the returned Status is an error
// only for bad arguments (an input shape that is not {1|3, H, W}, a range
// outside the source).
Status DecodeImages(const ImageSource& source, int64_t first, int64_t count,
                    const ImageInputOptions& options, DecodedImages* out);

// An ItemSet over decoded images (labels: the entries' labels, -1 where there
// is none), for EncoderModel::Embed. `images` is shared, not copied.
encoders::ItemSet DecodedImageItemSet(std::shared_ptr<const DecodedImages> images,
                                      const ImageSource& source);

// The share of a clean image's foreground (its non-zero values) that an
// occluded twin changed, i.e. how much of the objects occlusion hid; 0 for
// an all-zero image. Both images hold `floats` values.
double HiddenFraction(const float* clean, const float* occluded, int64_t floats);

// Writes a {C, H, W} float image (C = 1 or 3, RGB, values clamped to [0, 1]
// and rounded to 8 bits) to `path`; the extension picks the format (.png,
// .jpg, ...). `jpeg_quality` in [0, 100]. Errors name the file.
Status WriteImageFile(const std::string& path, const float* chw, int64_t channels, int64_t rows,
                      int64_t cols, int jpeg_quality = 95);

}  // namespace datasets
}  // namespace hedgedb
