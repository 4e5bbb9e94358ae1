// .npy reader and writer (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
//
// A file is: magic "\x93NUMPY", major and minor version bytes, the header
// length (uint16 LE for 1.0, uint32 LE for 2.0/3.0), then the header, a Python
// dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and a newline, then the raw C-order data.
//
// Data bytes are kept little-endian; the conversions below read them with
// memcpy, which assumes a little-endian host (checked at compile time).

#include "hedgedb/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "common/file_util.h"

namespace hedgedb {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "npy.cc stores and converts little-endian data in place");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// numpy aligns the data start to 64 bytes and leaves room after the header
// dict for the leading dimension to grow to 21 digits (numpy >= 1.24); doing
// the same makes our files byte-identical to numpy.save's.
constexpr size_t kArrayAlign = 64;
constexpr size_t kGrowthAxisMaxDigits = 21;
// Headers larger than this are not something a real writer produces; refusing
// them keeps a corrupt length field from allocating gigabytes.
constexpr uint32_t kMaxHeaderLen = 1u << 20;

struct TypeEntry {
  NpyType type;
  const char* code;  // without the byte-order character
  int size;
};
constexpr TypeEntry kTypes[] = {
    {NpyType::kFloat32, "f4", 4}, {NpyType::kFloat64, "f8", 8}, {NpyType::kInt8, "i1", 1},
    {NpyType::kUInt8, "u1", 1},   {NpyType::kInt16, "i2", 2},   {NpyType::kUInt16, "u2", 2},
    {NpyType::kInt32, "i4", 4},   {NpyType::kUInt32, "u4", 4},  {NpyType::kInt64, "i8", 8},
    {NpyType::kUInt64, "u8", 8},
};

std::string ErrnoText() { return std::strerror(errno); }

// Parses the subset of Python literal syntax that .npy headers use.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : text_(text), path_(path) {}

  Status Parse(std::string* descr, bool* fortran_order, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("header is not a dict literal");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      std::string key;
      HEDGEDB_RETURN_IF_ERROR(ParseString(&key, "a dict key"));
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after key '" + key + "'");
      SkipSpace();
      if (key == "descr") {
        if (have_descr) return Error("duplicate key 'descr'");
        if (Peek() == '[') {
          return Error("structured dtypes (a list 'descr') are not supported");
        }
        HEDGEDB_RETURN_IF_ERROR(ParseString(descr, "the 'descr' value"));
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_fortran) return Error("duplicate key 'fortran_order'");
        HEDGEDB_RETURN_IF_ERROR(ParseBool(fortran_order));
        have_fortran = true;
      } else if (key == "shape") {
        if (have_shape) return Error("duplicate key 'shape'");
        HEDGEDB_RETURN_IF_ERROR(ParseShape(shape));
        have_shape = true;
      } else {
        return Error("unexpected header key '" + key + "'");
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Error("expected ',' or '}' after the value of '" + key + "'");
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the header dict");
    if (!have_descr) return Error("header has no 'descr'");
    if (!have_fortran) return Error("header has no 'fortran_order'");
    if (!have_shape) return Error("header has no 'shape'");
    return Status::OK();
  }

 private:
  Status Error(const std::string& what) const {
    return Status::Corruption(path_ + ": malformed .npy header: " + what);
  }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Consume(char c) {
    if (Peek() != c || pos_ >= text_.size()) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  Status ParseString(std::string* out, const char* what) {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error(std::string("expected a string as ") + what);
    ++pos_;
    const size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) return Error(std::string("unterminated string in ") + what);
    *out = text_.substr(pos_, end - pos_);
    if (out->find('\\') != std::string::npos) {
      return Error(std::string("escape sequences are not supported in ") + what);
    }
    pos_ = end + 1;
    return Status::OK();
  }
  Status ParseBool(bool* out) {
    if (text_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      *out = true;
    } else if (text_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      *out = false;
    } else {
      return Error("'fortran_order' is not True or False");
    }
    return Status::OK();
  }
  Status ParseShape(std::vector<int64_t>* shape) {
    shape->clear();
    if (!Consume('(')) return Error("'shape' is not a tuple");
    while (true) {
      SkipSpace();
      if (Consume(')')) break;
      if (!std::isdigit(static_cast<unsigned char>(Peek()))) {
        return Error("'shape' holds something other than non-negative integers");
      }
      int64_t dim = 0;
      while (std::isdigit(static_cast<unsigned char>(Peek()))) {
        const int digit = text_[pos_++] - '0';
        if (dim > (std::numeric_limits<int64_t>::max() - digit) / 10) {
          return Error("a 'shape' dimension overflows int64");
        }
        dim = dim * 10 + digit;
      }
      // Python 2 era writers printed longs with an 'L' suffix.
      Consume('L');
      shape->push_back(dim);
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume(')')) break;
      return Error("expected ',' or ')' in 'shape'");
    }
    return Status::OK();
  }

  const std::string& text_;
  const std::string& path_;
  size_t pos_ = 0;
};

Status ParseDescr(const std::string& descr, const std::string& path, NpyType* type) {
  std::string code = descr;
  char order = '\0';
  if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) {
    order = code[0];
    code = code.substr(1);
  }
  if (!code.empty() && code[0] == 'O') {
    return Status::NotSupported(path + ": object arrays (dtype '" + descr +
                                "') are not supported; save numeric arrays");
  }
  for (const auto& e : kTypes) {
    if (code != e.code) continue;
    if (e.size == 1) {
      // Byte order is meaningless for one-byte types; numpy writes '|'.
      if (order == '>' || order == '<' || order == '|' || order == '=' || order == '\0') {
        *type = e.type;
        return Status::OK();
      }
    }
    if (order == '<') {
      *type = e.type;
      return Status::OK();
    }
    if (order == '>') {
      return Status::NotSupported(path + ": big-endian dtype '" + descr +
                                  "' is not supported; save it as little-endian ('<" + code + "')");
    }
    return Status::NotSupported(path + ": dtype '" + descr +
                                "' does not state little-endian byte order ('<" + code + "')");
  }
  return Status::NotSupported(path + ": unsupported dtype '" + descr +
                              "' (supported: float32, float64 and 8- to 64-bit integers)");
}

// Element count of `shape`, or -1 if count * element_size overflows int64.
int64_t CheckedByteCount(const std::vector<int64_t>& shape, int element_size) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / element_size / d) return -1;
    count *= d;
  }
  return count * element_size;
}

// Reads up to `n` bytes, stopping early only at end of file; sets *error on a
// read error.
size_t ReadUpTo(int fd, void* buf, size_t n, bool* error) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t total = 0;
  while (total < n) {
    const ssize_t r = ::read(fd, p + total, n - total);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *error = true;
      break;
    }
    if (r == 0) break;
    total += static_cast<size_t>(r);
  }
  return total;
}

// The complete prefix (magic, version, length, padded header) numpy.save
// writes for this dtype and shape.
std::string BuildHeader(NpyType type, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '";
  dict += NpyDescr(type);
  dict += "', 'fortran_order': False, 'shape': ";
  dict += NpyShapeString(shape);
  dict += ", }";
  if (!shape.empty()) {
    const size_t digits = std::to_string(shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  // Version 1.0 has a 16-bit length; numpy falls back to 2.0 when it overflows.
  for (int major : {1, 2}) {
    const size_t length_bytes = major == 1 ? 2 : 4;
    const size_t prefix = kMagicLen + 2 + length_bytes;
    const size_t unpadded = prefix + dict.size() + 1;  // + '\n'
    const size_t padding = (kArrayAlign - unpadded % kArrayAlign) % kArrayAlign;
    const size_t header_len = dict.size() + padding + 1;
    if (major == 1 && header_len > 0xffff) continue;
    std::string out(kMagic, kMagicLen);
    out += static_cast<char>(major);
    out += '\0';
    for (size_t i = 0; i < length_bytes; ++i)
      out += static_cast<char>((header_len >> (8 * i)) & 0xff);
    out += dict;
    out.append(padding, ' ');
    out += '\n';
    return out;
  }
  return std::string();  // unreachable: a 2.0 header holds 4 GiB
}

// The shortest decimal text that reads back as v: 0.5 as 0.5, 2.9 as 2.9,
// 1e-50 as 1e-50 (std::to_string would print 0.000000 for the last).
std::string ValueText(double v) {
  char text[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, v);
    if (!std::isfinite(v) || std::strtod(text, nullptr) == v) break;
  }
  return text;
}

template <typename T>
void ConvertInts(const NpyArray& array, std::vector<int64_t>* out) {
  const size_t n = array.bytes.size() / sizeof(T);
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, array.bytes.data() + i * sizeof(T), sizeof(T));
    (*out)[i] = static_cast<int64_t>(v);
  }
}

// Float -> int64 only when every value is an integer in range: ids and labels
// saved from a float array by accident are still exact.
template <typename T>
Status ConvertIntegralFloats(const NpyArray& array, const std::string& what,
                             std::vector<int64_t>* out) {
  const size_t n = array.bytes.size() / sizeof(T);
  out->resize(n);
  // 2^63 is exactly representable in float and double; int64 holds [-2^63, 2^63).
  const T limit = static_cast<T>(9223372036854775808.0);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, array.bytes.data() + i * sizeof(T), sizeof(T));
    if (!std::isfinite(v) || std::trunc(v) != v || v >= limit || v < -limit) {
      return Status::InvalidArgument(what + ": element " + std::to_string(i) + " (" +
                                     ValueText(double(v)) +
                                     ") is not an integer in int64's range; expected an "
                                     "integer array");
    }
    (*out)[i] = static_cast<int64_t>(v);
  }
  return Status::OK();
}

}  // namespace

int NpyElementSize(NpyType type) {
  for (const auto& e : kTypes)
    if (e.type == type) return e.size;
  return 0;
}

const char* NpyDescr(NpyType type) {
  switch (type) {
    case NpyType::kFloat32:
      return "<f4";
    case NpyType::kFloat64:
      return "<f8";
    case NpyType::kInt8:
      return "|i1";
    case NpyType::kUInt8:
      return "|u1";
    case NpyType::kInt16:
      return "<i2";
    case NpyType::kUInt16:
      return "<u2";
    case NpyType::kInt32:
      return "<i4";
    case NpyType::kUInt32:
      return "<u4";
    case NpyType::kInt64:
      return "<i8";
    case NpyType::kUInt64:
      return "<u8";
  }
  return "?";
}

std::string NpyShapeString(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  s += ")";
  return s;
}

int64_t NpyArray::element_count() const {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

Status ReadNpy(const std::string& path, NpyArray* array) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path + ": cannot open: " + ErrnoText());
  FdCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::IOError(path + ": cannot stat: " + ErrnoText());
  if (S_ISDIR(st.st_mode)) return Status::IOError(path + ": is a directory, not a .npy file");
  // Pipes and character devices (/dev/stdin, <(...)) have no size up front:
  // they are read to the end and checked against the header all the same.
  const bool sized = S_ISREG(st.st_mode);
  const uint64_t file_size = sized ? static_cast<uint64_t>(st.st_size) : 0;
  bool read_error = false;
  auto read_error_status = [&](const char* where) {
    return Status::IOError(path + ": read error in the " + where + ": " + ErrnoText());
  };

  uint8_t prefix[12];
  size_t got = ReadUpTo(fd, prefix, 10, &read_error);
  if (read_error) return read_error_status("header");
  if (got < 10 || std::memcmp(prefix, kMagic, kMagicLen) != 0) {
    return Status::Corruption(path + ": not a .npy file (missing the \\x93NUMPY magic)");
  }
  const int major = prefix[6], minor = prefix[7];
  if (major < 1 || major > 3 || minor != 0) {
    return Status::NotSupported(path + ": unsupported .npy format version " +
                                std::to_string(major) + "." + std::to_string(minor) +
                                " (supported: 1.0, 2.0, 3.0)");
  }
  uint32_t header_len = 0;
  size_t prefix_len = 10;
  if (major == 1) {
    header_len = static_cast<uint32_t>(prefix[8]) | (static_cast<uint32_t>(prefix[9]) << 8);
  } else {
    got = ReadUpTo(fd, prefix + 10, 2, &read_error);
    if (read_error) return read_error_status("header");
    if (got < 2) return Status::Corruption(path + ": truncated .npy header");
    prefix_len = 12;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<uint32_t>(prefix[8 + i]) << (8 * i);
  }
  if (header_len > kMaxHeaderLen) {
    return Status::Corruption(path + ": malformed .npy header: length " +
                              std::to_string(header_len) + " is implausibly large");
  }
  const auto truncated_header = [&](uint64_t size) {
    return Status::Corruption(path + ": truncated .npy header (header length " +
                              std::to_string(header_len) + ", file size " + std::to_string(size) +
                              ")");
  };
  if (sized && file_size < prefix_len + header_len) return truncated_header(file_size);
  std::string header(header_len, '\0');
  got = ReadUpTo(fd, header.data(), header_len, &read_error);
  if (read_error) return read_error_status("header");
  if (got < header_len) return truncated_header(prefix_len + got);
  // Version 3.0 headers are UTF-8; 1.0/2.0 latin-1. Everything we accept is
  // ASCII, and any non-ASCII byte fails the parse as unexpected text.
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  HEDGEDB_RETURN_IF_ERROR(HeaderParser(header, path).Parse(&descr, &fortran_order, &shape));
  NpyType type = NpyType::kFloat32;
  HEDGEDB_RETURN_IF_ERROR(ParseDescr(descr, path, &type));
  // numpy writes True for column-major (Fortran-contiguous) arrays; reading
  // them as C order would silently transpose them.
  if (fortran_order) {
    return Status::NotSupported(path + ": fortran_order True (column-major) arrays are not " +
                                "supported; save a C-order array (numpy.ascontiguousarray)");
  }
  const int64_t data_bytes = CheckedByteCount(shape, NpyElementSize(type));
  if (data_bytes < 0) {
    return Status::Corruption(path + ": shape " + NpyShapeString(shape) + " is too large");
  }
  const uint64_t expected = prefix_len + header_len + static_cast<uint64_t>(data_bytes);
  // `actual` < 0: a stream that goes on past the expected end.
  const auto size_mismatch = [&](int64_t actual) {
    const bool truncated = actual >= 0 && static_cast<uint64_t>(actual) < expected;
    return Status::Corruption(
        path + ": " + (truncated ? "truncated data" : "trailing bytes after the data") +
        ": header says " + NpyShapeString(shape) + " of " + descr + " (" +
        std::to_string(data_bytes) + " data bytes, file size " + std::to_string(expected) +
        ") but the file has " + (actual >= 0 ? std::to_string(actual) : std::string("more")) +
        " bytes");
  };
  // Check a regular file's size before allocating what a corrupt header asks for.
  if (sized && file_size != expected) return size_mismatch(static_cast<int64_t>(file_size));
  array->type = type;
  array->shape = std::move(shape);
  if (sized) {
    array->bytes.resize(static_cast<size_t>(data_bytes));
    got = ReadUpTo(fd, array->bytes.data(), array->bytes.size(), &read_error);
  } else {
    // A stream's header is unchecked until the data arrives: grow the buffer
    // with what is actually read, never to what the header declares.
    constexpr size_t kChunk = size_t(16) << 20;
    array->bytes.clear();
    got = 0;
    while (got < static_cast<size_t>(data_bytes)) {
      const size_t want = std::min(kChunk, static_cast<size_t>(data_bytes) - got);
      array->bytes.resize(got + want);
      const size_t n = ReadUpTo(fd, array->bytes.data() + got, want, &read_error);
      got += n;
      if (read_error || n < want) break;
    }
    array->bytes.resize(got);
  }
  if (read_error) return read_error_status("data");
  if (got < static_cast<size_t>(data_bytes)) {
    return size_mismatch(static_cast<int64_t>(prefix_len + header_len + got));
  }
  uint8_t extra;
  got = ReadUpTo(fd, &extra, 1, &read_error);
  if (read_error) return read_error_status("data");
  if (got > 0) return size_mismatch(-1);
  return Status::OK();
}

Status WriteNpy(const std::string& path, const NpyArray& array) {
  const int64_t data_bytes = CheckedByteCount(array.shape, NpyElementSize(array.type));
  if (data_bytes < 0) {
    return Status::InvalidArgument(path + ": cannot write shape " + NpyShapeString(array.shape));
  }
  if (static_cast<uint64_t>(data_bytes) != array.bytes.size()) {
    return Status::InvalidArgument(path + ": shape " + NpyShapeString(array.shape) + " of " +
                                   NpyDescr(array.type) + " needs " + std::to_string(data_bytes) +
                                   " bytes but the array holds " +
                                   std::to_string(array.bytes.size()));
  }
  const std::string header = BuildHeader(array.type, array.shape);
  // Readers see the old file or the complete new one, never a partial write.
  return WriteFileAtomically(
      path, {header, std::string_view(reinterpret_cast<const char*>(array.bytes.data()),
                                      array.bytes.size())});
}

Status NpyToFloat32(const NpyArray& array, const std::string& what, std::vector<float>* out) {
  switch (array.type) {
    case NpyType::kFloat32:
      out->resize(array.bytes.size() / sizeof(float));
      if (!out->empty()) std::memcpy(out->data(), array.bytes.data(), out->size() * sizeof(float));
      return Status::OK();
    case NpyType::kFloat64: {
      std::vector<double> wide(array.bytes.size() / sizeof(double));
      if (!wide.empty()) std::memcpy(wide.data(), array.bytes.data(), array.bytes.size());
      out->resize(wide.size());
      return DoublesToFloat32(wide.data(), wide.size(), what, out->data());
    }
    default:
      return Status::InvalidArgument(what + ": expected a float32 or float64 array, got " +
                                     NpyDescr(array.type));
  }
}

Status NpyToInt64(const NpyArray& array, const std::string& what, std::vector<int64_t>* out) {
  switch (array.type) {
    case NpyType::kInt8:
      ConvertInts<int8_t>(array, out);
      return Status::OK();
    case NpyType::kUInt8:
      ConvertInts<uint8_t>(array, out);
      return Status::OK();
    case NpyType::kInt16:
      ConvertInts<int16_t>(array, out);
      return Status::OK();
    case NpyType::kUInt16:
      ConvertInts<uint16_t>(array, out);
      return Status::OK();
    case NpyType::kInt32:
      ConvertInts<int32_t>(array, out);
      return Status::OK();
    case NpyType::kUInt32:
      ConvertInts<uint32_t>(array, out);
      return Status::OK();
    case NpyType::kInt64:
      ConvertInts<int64_t>(array, out);
      return Status::OK();
    case NpyType::kUInt64: {
      const size_t n = array.bytes.size() / sizeof(uint64_t);
      out->resize(n);
      for (size_t i = 0; i < n; ++i) {
        uint64_t v;
        std::memcpy(&v, array.bytes.data() + i * sizeof(v), sizeof(v));
        if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return Status::InvalidArgument(what + ": element " + std::to_string(i) + " (" +
                                         std::to_string(v) + ") does not fit in int64");
        }
        (*out)[i] = static_cast<int64_t>(v);
      }
      return Status::OK();
    }
    case NpyType::kFloat32:
      return ConvertIntegralFloats<float>(array, what, out);
    case NpyType::kFloat64:
      return ConvertIntegralFloats<double>(array, what, out);
  }
  return Status::Internal(what + ": unknown npy type");
}

Status DoublesToFloat32(const double* in, size_t n, const std::string& what, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const double v = in[i];
    const float f = static_cast<float>(v);
    if (std::isfinite(v) && (std::isinf(f) || (f == 0 && v != 0))) {
      return Status::InvalidArgument(what + ": element " + std::to_string(i) + " (" + ValueText(v) +
                                     ") is outside float32's range (it would be stored as " +
                                     (std::isinf(f) ? "an infinity" : "0") + ")");
    }
    out[i] = f;
  }
  return Status::OK();
}

Status NpyToInt32(const NpyArray& array, const std::string& what, std::vector<int32_t>* out) {
  std::vector<int64_t> wide;
  HEDGEDB_RETURN_IF_ERROR(NpyToInt64(array, what, &wide));
  out->resize(wide.size());
  for (size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] < std::numeric_limits<int32_t>::min() ||
        wide[i] > std::numeric_limits<int32_t>::max()) {
      return Status::InvalidArgument(what + ": element " + std::to_string(i) + " (" +
                                     std::to_string(wide[i]) + ") does not fit in int32");
    }
    (*out)[i] = static_cast<int32_t>(wide[i]);
  }
  return Status::OK();
}

bool NpyTypeOf(char kind, int item_size, NpyType* type) {
  const char code[3] = {kind, char('0' + item_size), '\0'};
  if (item_size < 1 || item_size > 8) return false;
  for (const auto& e : kTypes) {
    if (code == std::string(e.code)) {
      *type = e.type;
      return true;
    }
  }
  return false;
}

namespace {
// The NpyArray that BufferToInt64 / BufferToInt32 convert (a flat shape: the
// conversions read the bytes only).
Status BufferToNpy(char kind, int item_size, const void* data, size_t count,
                   const std::string& what, const std::string& dtype_name, NpyArray* array) {
  if (!NpyTypeOf(kind, item_size, &array->type)) {
    return Status::InvalidArgument(what + ": expected an integer array, got dtype " + dtype_name);
  }
  array->shape = {int64_t(count)};
  const auto* p = static_cast<const uint8_t*>(data);
  array->bytes.assign(p, p + (count > 0 ? count * size_t(item_size) : 0));
  return Status::OK();
}
}  // namespace

Status BufferToInt64(char kind, int item_size, const void* data, size_t count,
                     const std::string& what, const std::string& dtype_name,
                     std::vector<int64_t>* out) {
  NpyArray array;
  HEDGEDB_RETURN_IF_ERROR(BufferToNpy(kind, item_size, data, count, what, dtype_name, &array));
  return NpyToInt64(array, what, out);
}

Status BufferToInt32(char kind, int item_size, const void* data, size_t count,
                     const std::string& what, const std::string& dtype_name,
                     std::vector<int32_t>* out) {
  NpyArray array;
  HEDGEDB_RETURN_IF_ERROR(BufferToNpy(kind, item_size, data, count, what, dtype_name, &array));
  return NpyToInt32(array, what, out);
}

NpyArray MakeNpy(NpyType type, const void* data, std::vector<int64_t> shape) {
  NpyArray array;
  array.type = type;
  array.shape = std::move(shape);
  const size_t bytes = static_cast<size_t>(array.element_count()) * NpyElementSize(type);
  array.bytes.resize(bytes);
  if (bytes > 0) std::memcpy(array.bytes.data(), data, bytes);
  return array;
}

namespace {
// Copies all of `data` whatever the shape says, so that a mismatch is reported
// by WriteNpy instead of reading past the vector.
template <typename T>
NpyArray MakeFromVector(NpyType type, const std::vector<T>& data, std::vector<int64_t> shape) {
  NpyArray array;
  array.type = type;
  array.shape = std::move(shape);
  array.bytes.resize(data.size() * sizeof(T));
  if (!data.empty()) std::memcpy(array.bytes.data(), data.data(), array.bytes.size());
  return array;
}
}  // namespace

NpyArray MakeNpy(const std::vector<float>& data, std::vector<int64_t> shape) {
  return MakeFromVector(NpyType::kFloat32, data, std::move(shape));
}

NpyArray MakeNpy(const std::vector<int64_t>& data, std::vector<int64_t> shape) {
  return MakeFromVector(NpyType::kInt64, data, std::move(shape));
}

NpyArray MakeNpy(const std::vector<int32_t>& data, std::vector<int64_t> shape) {
  return MakeFromVector(NpyType::kInt32, data, std::move(shape));
}

}  // namespace hedgedb
