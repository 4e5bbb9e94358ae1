#include "datasets/image_set.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <system_error>
#include <utility>

namespace hedgedb {
namespace datasets {

using encoders::ItemSet;
using encoders::SeededRng;

namespace {

namespace fs = std::filesystem;

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

std::string Trim(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

std::string Lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool IsHidden(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name[0] == '.';
}

// Reads a whole file; the message names the file and what went wrong.
bool ReadFileBytes(const std::string& path, std::vector<uint8_t>* bytes, std::string* error) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    *error = path + ": no such file";
    return false;
  }
  if (!fs::is_regular_file(status)) {
    *error = path + ": not a regular file";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = path + ": cannot open (" + std::strerror(errno) + ")";
    return false;
  }
  bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) {
    *error = path + ": read error";
    return false;
  }
  if (bytes->empty()) {
    *error = path + ": empty file";
    return false;
  }
  return true;
}

// libjpeg decodes a truncated JPEG "successfully" (grey fill and a warning on
// stderr), so a cut-off file would be embedded as if it were whole. Walk the
// marker segments to the end-of-image marker instead: entropy-coded data can
// only contain FF 00 (stuffing) and FF D0..D7 (restarts), so the first other
// marker after a scan is found reliably; running out of bytes before EOI (FF D9)
// means the file is truncated. Thumbnails inside APPn segments are skipped by
// their length, so their own EOI does not count.
bool JpegIsComplete(const std::vector<uint8_t>& b) {
  size_t i = 2;  // after SOI
  while (i + 1 < b.size()) {
    if (b[i] != 0xFF) return false;  // not at a marker: damaged structure
    const uint8_t marker = b[i + 1];
    if (marker == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (marker == 0xD9) return true;                             // EOI
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // no length
      i += 2;
      continue;
    }
    if (i + 3 >= b.size()) return false;
    const size_t length = (static_cast<size_t>(b[i + 2]) << 8) | b[i + 3];
    if (length < 2) return false;
    i += 2 + length;
    if (marker != 0xDA) continue;  // not a scan
    // Entropy-coded data up to the next marker that is not stuffing/restart.
    while (i + 1 < b.size()) {
      if (b[i] == 0xFF && b[i + 1] != 0x00 && !(b[i + 1] >= 0xD0 && b[i + 1] <= 0xD7)) break;
      ++i;
    }
  }
  return false;
}

// A PNG's chunks must run up to IEND; a file cut anywhere before that is
// truncated (libpng would otherwise accept some cuts after the image data).
bool PngIsComplete(const std::vector<uint8_t>& b) {
  size_t i = 8;  // after the signature
  while (i + 8 <= b.size()) {
    const size_t length = (static_cast<size_t>(b[i]) << 24) |
                          (static_cast<size_t>(b[i + 1]) << 16) |
                          (static_cast<size_t>(b[i + 2]) << 8) | b[i + 3];
    const bool is_end = std::memcmp(&b[i + 4], "IEND", 4) == 0;
    if (length > b.size()) return false;
    i += 12 + length;  // length, type, data, CRC
    if (i > b.size()) return false;
    if (is_end) return true;
  }
  return false;
}

bool StartsWith(const std::vector<uint8_t>& b, const char* magic, size_t n) {
  return b.size() >= n && std::memcmp(b.data(), magic, n) == 0;
}

std::string ShapeText(int64_t channels, int64_t rows, int64_t cols) {
  return std::to_string(rows) + " x " + std::to_string(cols) + " with " + std::to_string(channels) +
         (channels == 1 ? " channel" : " channels");
}

// Converts a decoded image (1 gray, 2 gray+alpha, 3 BGR, 4 BGRA; 8/16-bit or
// float) to `options`' {C, H, W} floats in [0, 1], RGB. Returns "" or the
// problem (without the file name).
std::string FitImage(const cv::Mat& decoded, const ImageInputOptions& options, float* out) {
  const int want_c = static_cast<int>(options.input_shape[0]);
  const int want_h = static_cast<int>(options.input_shape[1]);
  const int want_w = static_cast<int>(options.input_shape[2]);
  if (decoded.empty() || decoded.rows < 1 || decoded.cols < 1) return "the image is empty";
  // 8-bit samples scale exactly as PixelsToFloat (the training pixels), so a
  // lossless file of a training image gives bit-identical inputs.
  float scale = 1.0f;
  switch (decoded.depth()) {
    case CV_8U:
      scale = 1.0f / 255.0f;
      break;
    case CV_16U:
      scale = 1.0f / 65535.0f;
      break;
    case CV_32F:
      break;  // HDR / EXR: already floats
    default:
      return "unsupported pixel type (expected 8-bit, 16-bit or float samples)";
  }
  const int channels = decoded.channels();
  if (channels < 1 || channels > 4) {
    return "unsupported channel count " + std::to_string(channels);
  }
  // Alpha is not a colour channel, and a colour image whose three channels are
  // identical is grayscale content: OpenCV decodes gray+alpha PNGs as BGRA,
  // and many tools save gray pictures as RGB.
  int colour_channels = channels >= 3 ? 3 : 1;
  if (colour_channels == 3 && want_c == 1) {
    cv::Mat blue, green, red;
    cv::extractChannel(decoded, blue, 0);
    cv::extractChannel(decoded, green, 1);
    cv::extractChannel(decoded, red, 2);
    if (cv::norm(blue, green, cv::NORM_INF) == 0 && cv::norm(green, red, cv::NORM_INF) == 0) {
      colour_channels = 1;
    }
  }
  if (options.fit == ImageFit::kExact) {
    if (colour_channels != want_c || decoded.rows != want_h || decoded.cols != want_w) {
      return "the image is " + ShapeText(colour_channels, decoded.rows, decoded.cols) +
             " but the model takes " + ShapeText(want_c, want_h, want_w) + " " + kExactFitHint;
    }
  }
  // Channels first (alpha dropped), at the source size.
  cv::Mat image;
  if (want_c == 1) {
    if (channels == 1) {
      image = decoded;
    } else if (channels == 2) {
      cv::extractChannel(decoded, image, 0);
    } else {
      cv::cvtColor(decoded, image, channels == 3 ? cv::COLOR_BGR2GRAY : cv::COLOR_BGRA2GRAY);
    }
  } else {
    switch (channels) {
      case 1:
        cv::cvtColor(decoded, image, cv::COLOR_GRAY2RGB);
        break;
      case 2: {
        cv::Mat gray;
        cv::extractChannel(decoded, gray, 0);
        cv::cvtColor(gray, image, cv::COLOR_GRAY2RGB);
        break;
      }
      case 3:
        cv::cvtColor(decoded, image, cv::COLOR_BGR2RGB);
        break;
      default:
        cv::cvtColor(decoded, image, cv::COLOR_BGRA2RGB);
        break;
    }
  }
  if (options.fit == ImageFit::kCrop) {
    // Largest centred window with the model's aspect ratio want_w / want_h.
    int crop_w = image.cols, crop_h = image.rows;
    if (static_cast<int64_t>(image.cols) * want_h > static_cast<int64_t>(image.rows) * want_w) {
      crop_w = std::max(
          1, static_cast<int>(std::lround(static_cast<double>(image.rows) * want_w / want_h)));
    } else {
      crop_h = std::max(
          1, static_cast<int>(std::lround(static_cast<double>(image.cols) * want_h / want_w)));
    }
    image = image(cv::Rect((image.cols - crop_w) / 2, (image.rows - crop_h) / 2, crop_w, crop_h));
  }
  if (image.rows != want_h || image.cols != want_w) {
    const bool shrinking = image.rows >= want_h && image.cols >= want_w;
    cv::Mat resized;
    cv::resize(image, resized, cv::Size(want_w, want_h), 0, 0,
               shrinking ? cv::INTER_AREA : cv::INTER_LINEAR);
    image = resized;
  }
  cv::Mat floats;
  image.convertTo(floats, CV_32F);  // exact for 8- and 16-bit integers
  // Interleaved HWC -> planar CHW, scaled to [0, 1].
  const int64_t plane = static_cast<int64_t>(want_h) * want_w;
  for (int y = 0; y < want_h; ++y) {
    const float* row = floats.ptr<float>(y);
    for (int x = 0; x < want_w; ++x) {
      for (int c = 0; c < want_c; ++c) {
        const float v = row[x * want_c + c] * scale;
        if (!std::isfinite(v)) return "the image has non-finite pixel values";
        out[c * plane + static_cast<int64_t>(y) * want_w + x] = v;
      }
    }
  }
  return "";
}

// Decodes one entry into `out` (C*H*W floats); returns "" or a message that
// starts with the entry's name.
std::string DecodeEntry(const ImageSource& source, const ImageEntry& entry,
                        const ImageInputOptions& options, float* out) {
  cv::Mat decoded;
  if (entry.idx_index >= 0) {
    const IdxImages* idx = source.idx_images.get();
    if (idx == nullptr || entry.idx_index >= idx->count) {
      return entry.Name() + ": no such image in the IDX file";
    }
    // A read-only view of the IDX pixels (cv::Mat does not copy or write).
    decoded =
        cv::Mat(idx->rows, idx->cols, CV_8UC1, const_cast<uint8_t*>(idx->image(entry.idx_index)));
  } else {
    std::vector<uint8_t> bytes;
    std::string error;
    if (!ReadFileBytes(entry.path, &bytes, &error)) return error;
    if (StartsWith(bytes, "\xFF\xD8\xFF", 3) && !JpegIsComplete(bytes)) {
      return entry.Name() + ": truncated or corrupt JPEG (no end-of-image marker)";
    }
    if (StartsWith(bytes, "\x89PNG\r\n\x1a\n", 8) && !PngIsComplete(bytes)) {
      return entry.Name() + ": truncated or corrupt PNG (chunks end before IEND)";
    }
    try {
      decoded = cv::imdecode(bytes, cv::IMREAD_UNCHANGED);
    } catch (const cv::Exception& e) {
      return entry.Name() + ": cannot decode the image (" + e.msg + ")";
    }
    if (decoded.empty()) {
      return entry.Name() + ": not a readable image (corrupt, truncated or unsupported format)";
    }
  }
  if (options.crop_to_box && entry.has_box) {
    // Pixels [x, x + width) x [y, y + height), clamped to the image.
    // Clamped as doubles first: annotation values may be far outside int.
    const ImageEntry::Box& b = entry.box;
    const double cols = decoded.cols, rows = decoded.rows;
    const int x0 = static_cast<int>(std::clamp(std::floor(b.x), 0.0, cols));
    const int y0 = static_cast<int>(std::clamp(std::floor(b.y), 0.0, rows));
    const int x1 = static_cast<int>(std::clamp(std::ceil(b.x + b.width), 0.0, cols));
    const int y1 = static_cast<int>(std::clamp(std::ceil(b.y + b.height), 0.0, rows));
    if (!(b.width > 0 && b.height > 0) || !std::isfinite(b.x + b.width) ||
        !std::isfinite(b.y + b.height) || x1 <= x0 || y1 <= y0) {
      char box[160];
      std::snprintf(box, sizeof(box), "bounding box x %g y %g width %g height %g", b.x, b.y,
                    b.width, b.height);
      return entry.Name() + ": the " + box + " leaves nothing of the " +
             std::to_string(decoded.cols) + " x " + std::to_string(decoded.rows) + " image";
    }
    decoded = decoded(cv::Rect(x0, y0, x1 - x0, y1 - y0));
  }
  try {
    const std::string problem = FitImage(decoded, options, out);
    if (!problem.empty()) return entry.Name() + ": " + problem;
  } catch (const cv::Exception& e) {
    return entry.Name() + ": cannot convert the image (" + e.msg + ")";
  }
  return "";
}

const std::vector<std::string>& ImageExtensions() {
  static const std::vector<std::string> kExtensions = {
      ".jpg", ".jpeg", ".jpe", ".png", ".bmp", ".dib", ".tif", ".tiff", ".webp", ".pbm", ".pgm",
      ".ppm", ".pnm",  ".pam", ".pxm", ".sr",  ".ras", ".hdr", ".pic",  ".exr",  ".jp2"};
  return kExtensions;
}

// Images under `dir`, recursively, sorted; hidden files and folders skipped.
Status CollectImages(const fs::path& dir, bool recursive, std::vector<std::string>* paths) {
  std::error_code ec;
  auto add = [&](const fs::directory_entry& e) {
    std::error_code file_ec;
    if (e.is_regular_file(file_ec) && IsImageFileName(e.path().filename().string())) {
      paths->push_back(AbsolutePath(e.path().string()));
    }
  };
  if (recursive) {
    fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (IsHidden(it->path())) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      add(*it);
    }
  } else {
    fs::directory_iterator it(dir, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (!IsHidden(it->path())) add(*it);
    }
  }
  if (ec) return Status::IOError(dir.string() + ": cannot list (" + ec.message() + ")");
  std::sort(paths->begin(), paths->end());
  return Status::OK();
}

}  // namespace

const char* ImageFitName(ImageFit fit) {
  switch (fit) {
    case ImageFit::kExact:
      return "exact";
    case ImageFit::kResize:
      return "resize";
    case ImageFit::kCrop:
      return "crop";
  }
  return "?";
}

bool ParseImageFit(const std::string& name, ImageFit* fit) {
  for (ImageFit f : {ImageFit::kExact, ImageFit::kResize, ImageFit::kCrop}) {
    if (name == ImageFitName(f)) {
      *fit = f;
      return true;
    }
  }
  return false;
}

Status CheckImageInputShape(const std::vector<int64_t>& shape) {
  if (shape.size() != 3 || (shape[0] != 1 && shape[0] != 3) || shape[1] < 1 || shape[2] < 1 ||
      shape[1] > 1 << 15 || shape[2] > 1 << 15) {
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return Status::InvalidArgument("the model's input shape " + text +
                                   "] is not an image shape {C, H, W} with C = 1 or 3");
  }
  return Status::OK();
}

std::string ImageEntry::Name() const {
  return idx_index >= 0 ? path + "[" + std::to_string(idx_index) + "]" : path;
}

std::string ImageEntry::Payload() const {
  nlohmann::json j;
  j["path"] = path;
  if (idx_index >= 0) j["index"] = idx_index;
  if (!label_name.empty()) j["label_name"] = label_name;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool ImageEntry::IsPayloadOf(const std::string& payload) const {
  ImagePayload fields;
  return ParseImagePayload(payload, &fields) && fields.path == path && fields.index == idx_index;
}

bool ParseImagePayload(const std::string& payload, ImagePayload* fields) {
  const nlohmann::json j = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("path") || !j["path"].is_string()) return false;
  // Payload() writes "index" only for an IDX record (>= 0) and "label_name"
  // only as a string: anything else is not a payload it wrote (a negative
  // index would read back as a plain file).
  if (j.contains("index") && (!j["index"].is_number_integer() || j["index"].get<int64_t>() < 0)) {
    return false;
  }
  if (j.contains("label_name") && !j["label_name"].is_string()) return false;
  *fields = ImagePayload();
  fields->path = j["path"].get<std::string>();
  if (j.contains("index")) fields->index = j["index"].get<int64_t>();
  if (j.contains("label_name")) fields->label_name = j["label_name"].get<std::string>();
  return true;
}

double HiddenFraction(const float* clean, const float* occluded, int64_t floats) {
  int64_t foreground = 0, hidden = 0;
  for (int64_t p = 0; p < floats; ++p) {
    if (clean[p] == 0.0f) continue;
    ++foreground;
    hidden += occluded[p] != clean[p];
  }
  return foreground > 0 ? static_cast<double>(hidden) / static_cast<double>(foreground) : 0.0;
}

int64_t LabelOfName(const std::string& name) {
  const bool decimal =
      !name.empty() && name.size() <= 18 &&
      std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (decimal) return std::stoll(name);
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a 64
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return static_cast<int64_t>(hash & ((uint64_t{1} << 53) - 1));
}

bool IsImageFileName(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0) return false;
  const std::string ext = Lowercase(name.substr(dot));
  const auto& known = ImageExtensions();
  return std::find(known.begin(), known.end(), ext) != known.end();
}

Status ListImageDirectory(const std::string& dir, ImageSource* source) {
  *source = ImageSource();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return fs::exists(dir, ec) ? Status::InvalidArgument(dir + ": not a directory")
                               : Status::NotFound(dir + ": no such directory");
  }
  std::vector<std::string> top_files;
  HEDGEDB_RETURN_IF_ERROR(CollectImages(dir, /*recursive=*/false, &top_files));
  // Class folders: every visible subfolder that holds images (at any depth).
  std::vector<fs::path> subdirs;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code dir_ec;
    if (!IsHidden(it->path()) && it->is_directory(dir_ec)) subdirs.push_back(it->path());
  }
  if (ec) return Status::IOError(dir + ": cannot list (" + ec.message() + ")");
  std::sort(subdirs.begin(), subdirs.end());
  std::vector<ImageEntry> labelled;
  for (const fs::path& sub : subdirs) {
    std::vector<std::string> files;
    HEDGEDB_RETURN_IF_ERROR(CollectImages(sub, /*recursive=*/true, &files));
    const std::string name = sub.filename().string();
    for (std::string& f : files) {
      ImageEntry e;
      e.path = std::move(f);
      e.has_label = true;
      e.label_name = name;
      e.label = LabelOfName(name);
      labelled.push_back(std::move(e));
    }
  }
  if (!labelled.empty() && !top_files.empty()) {
    return Status::InvalidArgument(
        dir + ": has both class subfolders and images directly inside (e.g. " + top_files[0] +
        "); use subfolders only (labelled) or a flat folder (unlabelled)");
  }
  if (labelled.empty() && top_files.empty()) {
    return Status::InvalidArgument(dir + ": no image files (.png, .jpg, ...) found");
  }
  if (!labelled.empty()) {
    source->entries = std::move(labelled);
  } else {
    for (std::string& f : top_files) {
      ImageEntry e;
      e.path = std::move(f);
      source->entries.push_back(std::move(e));
    }
  }
  return Status::OK();
}

Status ReadImageListFile(const std::string& list_path, ImageSource* source) {
  *source = ImageSource();
  std::ifstream in(list_path);
  if (!in) {
    std::error_code ec;
    return fs::exists(list_path, ec) ? Status::IOError(list_path + ": cannot open")
                                     : Status::NotFound(list_path + ": no such list file");
  }
  const fs::path base = fs::path(AbsolutePath(list_path)).parent_path();
  std::string line;
  int64_t line_number = 0;
  int64_t first_labelled_line = 0, first_unlabelled_line = 0;
  while (std::getline(in, line)) {
    ++line_number;
    const std::string text = Trim(line);
    if (text.empty() || text[0] == '#') continue;
    const std::string where = list_path + ":" + std::to_string(line_number) + ": ";
    ImageEntry e;
    // The label is after the last comma, so paths may contain commas as long
    // as the line has a label column.
    const size_t comma = text.rfind(',');
    std::string path = comma == std::string::npos ? text : Trim(text.substr(0, comma));
    if (comma != std::string::npos) {
      e.label_name = Trim(text.substr(comma + 1));
      if (e.label_name.empty()) {
        return Status::InvalidArgument(where + "empty label after ','");
      }
      e.has_label = true;
      e.label = LabelOfName(e.label_name);
    }
    if (path.empty()) return Status::InvalidArgument(where + "empty image path");
    const fs::path p(path);
    e.path = AbsolutePath(p.is_absolute() ? path : (base / p).string());
    int64_t& first_of_kind = e.has_label ? first_labelled_line : first_unlabelled_line;
    if (first_of_kind == 0) first_of_kind = line_number;
    if (first_labelled_line != 0 && first_unlabelled_line != 0) {
      return Status::InvalidArgument(
          where + "lines " + std::to_string(first_labelled_line) + " and " +
          std::to_string(first_unlabelled_line) +
          " differ: give a label on every line ('path,label') or on none");
    }
    source->entries.push_back(std::move(e));
  }
  if (in.bad()) return Status::IOError(list_path + ": read error");
  if (source->entries.empty()) {
    return Status::InvalidArgument(list_path + ": the list holds no image paths");
  }
  return Status::OK();
}

Status ReadIdxImageSource(const std::string& images_path, const std::string& labels_path,
                          ImageSource* source) {
  *source = ImageSource();
  auto images = std::make_shared<IdxImages>();
  HEDGEDB_RETURN_IF_ERROR(ReadIdxImages(images_path, images.get()));
  std::vector<int64_t> labels;
  if (!labels_path.empty()) {
    HEDGEDB_RETURN_IF_ERROR(ReadIdxLabels(labels_path, &labels));
    if (static_cast<int64_t>(labels.size()) != images->count) {
      return Status::InvalidArgument(labels_path + ": " + std::to_string(labels.size()) +
                                     " labels for the " + std::to_string(images->count) +
                                     " images of " + images_path);
    }
  }
  const std::string path = AbsolutePath(images_path);
  source->entries.resize(images->count);
  for (int64_t i = 0; i < images->count; ++i) {
    ImageEntry& e = source->entries[i];
    e.path = path;
    e.idx_index = i;
    if (!labels.empty()) {
      e.has_label = true;
      e.label = labels[i];
    }
  }
  source->idx_images = std::move(images);
  return Status::OK();
}

ImageSource ImageFilesSource(const std::vector<std::string>& paths) {
  ImageSource source;
  for (const std::string& p : paths) {
    ImageEntry e;
    e.path = AbsolutePath(p);
    source.entries.push_back(std::move(e));
  }
  return source;
}

Status DecodeImages(const ImageSource& source, int64_t first, int64_t count,
                    const ImageInputOptions& options, DecodedImages* out) {
  *out = DecodedImages();
  HEDGEDB_RETURN_IF_ERROR(CheckImageInputShape(options.input_shape));
  if (first < 0 || count < 0 || first + count > source.size()) {
    return Status::InvalidArgument("image range [" + std::to_string(first) + ", " +
                                   std::to_string(first + count) + ") is outside the " +
                                   std::to_string(source.size()) + " images");
  }
  const int64_t floats = options.input_shape[0] * options.input_shape[1] * options.input_shape[2];
  out->input_shape = options.input_shape;
  out->pixels.resize(count * floats);
  for (int64_t i = first; i < first + count; ++i) {
    float* slot = out->pixels.data() + out->size() * floats;
    std::string error = DecodeEntry(source, source.entries[i], options, slot);
    if (error.empty()) {
      out->entries.push_back(i);
    } else {
      out->errors.push_back({i, std::move(error)});
    }
  }
  out->pixels.resize(out->size() * floats);
  return Status::OK();
}

ItemSet DecodedImageItemSet(std::shared_ptr<const DecodedImages> images,
                            const ImageSource& source) {
  ItemSet set;
  set.input_shape = images->input_shape;
  for (int64_t entry : images->entries) {
    const ImageEntry& e = source.entries[entry];
    set.labels.push_back(e.has_label ? e.label : -1);
  }
  const int64_t floats = set.item_floats();
  set.render = [images, floats](const std::vector<int64_t>& items, bool, float* out) {
    for (size_t i = 0; i < items.size(); ++i) {
      const float* src = images->pixels.data() + items[i] * floats;
      std::copy(src, src + floats, out + i * floats);
    }
  };
  auto render = set.render;
  // Stored images have no augmentation: training renders them as they are.
  set.render_train = [render](const std::vector<int64_t>& items, SeededRng*, float* out) {
    render(items, false, out);
  };
  return set;
}

Status WriteImageFile(const std::string& path, const float* chw, int64_t channels, int64_t rows,
                      int64_t cols, int jpeg_quality) {
  if ((channels != 1 && channels != 3) || rows < 1 || cols < 1) {
    return Status::InvalidArgument(path + ": cannot write an image of " +
                                   ShapeText(channels, rows, cols) + " (need 1 or 3 channels)");
  }
  if (!IsImageFileName(path)) {
    return Status::InvalidArgument(path + ": unknown image extension (use .png, .jpg, ...)");
  }
  const int c = static_cast<int>(channels);
  cv::Mat image(static_cast<int>(rows), static_cast<int>(cols), CV_8UC(c));
  const int64_t plane = rows * cols;
  for (int64_t y = 0; y < rows; ++y) {
    uint8_t* row = image.ptr<uint8_t>(static_cast<int>(y));
    for (int64_t x = 0; x < cols; ++x) {
      for (int ch = 0; ch < c; ++ch) {
        // Planar RGB -> interleaved BGR, OpenCV's channel order.
        const float v = chw[(c == 3 ? 2 - ch : ch) * plane + y * cols + x];
        const float clamped = std::isfinite(v) ? std::min(1.0f, std::max(0.0f, v)) : 0.0f;
        row[x * c + ch] = static_cast<uint8_t>(std::lround(clamped * 255.0f));
      }
    }
  }
  const std::vector<int> params = {cv::IMWRITE_JPEG_QUALITY,
                                   std::min(100, std::max(0, jpeg_quality))};
  try {
    if (!cv::imwrite(path, image, params)) {
      return Status::IOError(path + ": cannot write the image");
    }
  } catch (const cv::Exception& e) {
    return Status::IOError(path + ": cannot write the image (" + e.msg + ")");
  }
  return Status::OK();
}

}  // namespace datasets
}  // namespace hedgedb
