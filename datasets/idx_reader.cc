#include "datasets/idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/file_util.h"

namespace hedgedb {
namespace datasets {

namespace {

// Refuse to inflate beyond this: a corrupt or malicious gzip stream must not
// exhaust memory (the largest real file, 60000 MNIST images, is 47 MB).
constexpr size_t kMaxDecompressedBytes = size_t{4} << 30;

Status ReadIdxFile(const std::string& path, std::string* bytes) {
  const Status s = ReadWholeFile(path, bytes);
  if (s.IsNotFound()) return Status::NotFound(path + ": no such file");
  return s;
}

bool IsGzip(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f &&
         static_cast<uint8_t>(bytes[1]) == 0x8b;
}

// Inflates a gzip file, including concatenated members (what `cat a.gz b.gz`
// produces and gzip -d accepts).
Status Gunzip(const std::string& path, const std::string& compressed, std::string* out) {
  out->clear();
  z_stream stream;
  std::memset(&stream, 0, sizeof(stream));
  // 16 + MAX_WBITS: gzip wrapper only.
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) {
    return Status::Internal(path + ": cannot initialise zlib");
  }
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  char buffer[1 << 16];
  Status status;
  for (;;) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    const int rc = inflate(&stream, Z_NO_FLUSH);
    out->append(buffer, sizeof(buffer) - stream.avail_out);
    if (out->size() > kMaxDecompressedBytes) {
      status = Status::Corruption(path + ": gzip data inflates beyond " +
                                  std::to_string(kMaxDecompressedBytes >> 20) + " MiB");
      break;
    }
    if (rc == Z_STREAM_END) {
      if (stream.avail_in == 0) break;
      // Another gzip member follows.
      if (inflateReset(&stream) != Z_OK) {
        status = Status::Internal(path + ": cannot reset zlib");
        break;
      }
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && stream.avail_in == 0) {
      status = Status::Corruption(path + ": truncated gzip stream (ends after " +
                                  std::to_string(out->size()) + " decompressed bytes)");
    } else {
      status = Status::Corruption(
          path + ": corrupt gzip data: " +
          (stream.msg != nullptr ? stream.msg : "zlib error " + std::to_string(rc)));
    }
    break;
  }
  inflateEnd(&stream);
  return status;
}

Status ReadMaybeGzip(const std::string& path, std::string* bytes) {
  std::string raw;
  HEDGEDB_RETURN_IF_ERROR(ReadIdxFile(path, &raw));
  if (!IsGzip(raw)) {
    *bytes = std::move(raw);
    return Status::OK();
  }
  return Gunzip(path, raw, bytes);
}

uint32_t ReadBigEndian32(const std::string& bytes, size_t offset) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + offset;
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

void AppendBigEndian32(uint32_t value, std::string* out) {
  out->push_back(static_cast<char>(value >> 24));
  out->push_back(static_cast<char>(value >> 16));
  out->push_back(static_cast<char>(value >> 8));
  out->push_back(static_cast<char>(value));
}

std::string MagicDescription(uint32_t magic) {
  char hex[16];
  std::snprintf(hex, sizeof(hex), "0x%08x", magic);
  return std::to_string(magic) + " (" + hex + ")";
}

// Parses the header of an unsigned-byte IDX file with `expected_dims`
// dimensions and checks the payload length. `what` is "images" or "labels".
Status ParseIdxHeader(const std::string& path, const std::string& bytes, uint32_t expected_magic,
                      const char* what, std::vector<int64_t>* dims) {
  if (bytes.size() < 4) {
    return Status::Corruption(path + ": too short for an IDX header (" +
                              std::to_string(bytes.size()) + " bytes)");
  }
  const uint32_t magic = ReadBigEndian32(bytes, 0);
  if (magic != expected_magic) {
    std::string hint;
    if (magic == kIdxImagesMagic || magic == kIdxLabelsMagic) {
      hint = magic == kIdxImagesMagic ? " (this is an images file)" : " (this is a labels file)";
    } else if ((magic >> 16) != 0) {
      hint = " (not an IDX file)";
    }
    return Status::Corruption(path + ": bad IDX magic " + MagicDescription(magic) + ", expected " +
                              MagicDescription(expected_magic) + " for " + what + hint);
  }
  const size_t num_dims = expected_magic & 0xff;
  const size_t header = 4 + 4 * num_dims;
  if (bytes.size() < header) {
    return Status::Corruption(path + ": truncated IDX header (" + std::to_string(bytes.size()) +
                              " bytes, need " + std::to_string(header) + ")");
  }
  dims->clear();
  uint64_t payload = 1;
  for (size_t d = 0; d < num_dims; ++d) {
    const uint32_t size = ReadBigEndian32(bytes, 4 + 4 * d);
    if (size == 0 || size > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
      return Status::Corruption(path + ": IDX dimension " + std::to_string(d) + " is " +
                                std::to_string(size));
    }
    dims->push_back(size);
    payload *= size;
    if (payload > kMaxDecompressedBytes) {
      return Status::Corruption(path + ": IDX dimensions describe more than " +
                                std::to_string(kMaxDecompressedBytes >> 20) + " MiB");
    }
  }
  const uint64_t expected = header + payload;
  if (bytes.size() != expected) {
    return Status::Corruption(path + ": " + what + " file has " + std::to_string(bytes.size()) +
                              " bytes but its header describes " + std::to_string(expected) +
                              (bytes.size() < expected ? " (truncated)" : " (trailing data)"));
  }
  return Status::OK();
}

Status WriteIdxFile(const std::string& path, const std::string& bytes, bool gzip) {
  if (!gzip) return WriteFileAtomically(path, {bytes});
  std::string data;
  {
    z_stream stream;
    std::memset(&stream, 0, sizeof(stream));
    if (deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
      return Status::Internal(path + ": cannot initialise zlib");
    }
    data.resize(deflateBound(&stream, bytes.size()) + 64);
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    stream.avail_in = static_cast<uInt>(bytes.size());
    stream.next_out = reinterpret_cast<Bytef*>(&data[0]);
    stream.avail_out = static_cast<uInt>(data.size());
    const int rc = deflate(&stream, Z_FINISH);
    data.resize(stream.total_out);
    deflateEnd(&stream);
    if (rc != Z_STREAM_END) return Status::Internal(path + ": gzip compression failed");
  }
  return WriteFileAtomically(path, {data});
}

bool FileExists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// The first existing spelling of an MNIST-layout file in `dir`.
Status FindMnistFile(const std::string& dir, const std::string& name,
                     const std::string& dotted_name, std::string* path) {
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  for (const std::string& candidate :
       {base + name + ".gz", base + name, base + dotted_name + ".gz", base + dotted_name}) {
    if (FileExists(candidate)) {
      *path = candidate;
      return Status::OK();
    }
  }
  return Status::NotFound(base + name + "[.gz]: no such file (nor " + dotted_name + "[.gz])");
}

Status LoadSplit(const std::string& dir, const std::string& prefix, LabeledImages* data) {
  std::string images_path;
  std::string labels_path;
  HEDGEDB_RETURN_IF_ERROR(FindMnistFile(dir, prefix + "-images-idx3-ubyte",
                                        prefix + "-images.idx3-ubyte", &images_path));
  HEDGEDB_RETURN_IF_ERROR(FindMnistFile(dir, prefix + "-labels-idx1-ubyte",
                                        prefix + "-labels.idx1-ubyte", &labels_path));
  return ReadIdxLabeledImages(images_path, labels_path, data);
}

}  // namespace

Status ReadIdxImages(const std::string& path, IdxImages* images) {
  std::string bytes;
  HEDGEDB_RETURN_IF_ERROR(ReadMaybeGzip(path, &bytes));
  std::vector<int64_t> dims;
  HEDGEDB_RETURN_IF_ERROR(ParseIdxHeader(path, bytes, kIdxImagesMagic, "images", &dims));
  images->count = dims[0];
  images->rows = static_cast<int32_t>(dims[1]);
  images->cols = static_cast<int32_t>(dims[2]);
  images->pixels.assign(bytes.begin() + 16, bytes.end());
  return Status::OK();
}

Status ReadIdxLabels(const std::string& path, std::vector<int64_t>* labels) {
  std::string bytes;
  HEDGEDB_RETURN_IF_ERROR(ReadMaybeGzip(path, &bytes));
  std::vector<int64_t> dims;
  HEDGEDB_RETURN_IF_ERROR(ParseIdxHeader(path, bytes, kIdxLabelsMagic, "labels", &dims));
  labels->resize(static_cast<size_t>(dims[0]));
  for (size_t i = 0; i < labels->size(); ++i) {
    (*labels)[i] = static_cast<uint8_t>(bytes[8 + i]);
  }
  return Status::OK();
}

Status ReadIdxLabeledImages(const std::string& images_path, const std::string& labels_path,
                            LabeledImages* data) {
  HEDGEDB_RETURN_IF_ERROR(ReadIdxImages(images_path, &data->images));
  HEDGEDB_RETURN_IF_ERROR(ReadIdxLabels(labels_path, &data->labels));
  if (static_cast<int64_t>(data->labels.size()) != data->images.count) {
    return Status::Corruption(images_path + " holds " + std::to_string(data->images.count) +
                              " images but " + labels_path + " holds " +
                              std::to_string(data->labels.size()) + " labels");
  }
  return Status::OK();
}

Status WriteIdxImages(const std::string& path, const IdxImages& images, bool gzip) {
  if (images.count < 1 || images.rows < 1 || images.cols < 1 ||
      static_cast<int64_t>(images.pixels.size()) != images.count * images.pixels_per_image()) {
    return Status::InvalidArgument(path + ": images " + std::to_string(images.count) + " x " +
                                   std::to_string(images.rows) + " x " +
                                   std::to_string(images.cols) + " do not match " +
                                   std::to_string(images.pixels.size()) + " pixels");
  }
  std::string bytes;
  AppendBigEndian32(kIdxImagesMagic, &bytes);
  AppendBigEndian32(static_cast<uint32_t>(images.count), &bytes);
  AppendBigEndian32(static_cast<uint32_t>(images.rows), &bytes);
  AppendBigEndian32(static_cast<uint32_t>(images.cols), &bytes);
  bytes.append(reinterpret_cast<const char*>(images.pixels.data()), images.pixels.size());
  return WriteIdxFile(path, bytes, gzip);
}

Status WriteIdxLabels(const std::string& path, const std::vector<int64_t>& labels, bool gzip) {
  if (labels.empty()) return Status::InvalidArgument(path + ": no labels to write");
  std::string bytes;
  AppendBigEndian32(kIdxLabelsMagic, &bytes);
  AppendBigEndian32(static_cast<uint32_t>(labels.size()), &bytes);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] > 255) {
      return Status::InvalidArgument(path + ": label " + std::to_string(labels[i]) + " at " +
                                     std::to_string(i) + " does not fit an unsigned byte");
    }
    bytes.push_back(static_cast<char>(labels[i]));
  }
  return WriteIdxFile(path, bytes, gzip);
}

Status LoadMnistLayoutDir(const std::string& dir, ImageSplits* splits) {
  HEDGEDB_RETURN_IF_ERROR(LoadSplit(dir, "train", &splits->train));
  HEDGEDB_RETURN_IF_ERROR(LoadSplit(dir, "t10k", &splits->test));
  const IdxImages& train = splits->train.images;
  const IdxImages& test = splits->test.images;
  if (train.rows != test.rows || train.cols != test.cols) {
    return Status::Corruption(dir + ": train images are " + std::to_string(train.rows) + " x " +
                              std::to_string(train.cols) + " but test images are " +
                              std::to_string(test.rows) + " x " + std::to_string(test.cols));
  }
  return Status::OK();
}

Status LoadFashionMnist(ImageSplits* splits, const std::string& dir) {
  return LoadMnistLayoutDir(dir, splits);
}

void PixelsToFloat(const uint8_t* pixels, int64_t count, float* out) {
  constexpr float kScale = 1.0f / 255.0f;
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(pixels[i]) * kScale;
}

}  // namespace datasets
}  // namespace hedgedb
