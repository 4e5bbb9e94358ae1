// ReadCars196: the Stanford Cars-196 annotations (ROOT/cars_annos.mat) read
// with libmatio. Kept apart from benchmark_sets.cc so that only this file
// needs matio headers.
//
// The .mat file is untrusted input: every matio object is checked (class,
// shape, data pointer and size) before its data is read, because matio hands
// back whatever the file declares, and the struct/cell accessors dereference
// their data without checking it.
#include <matio.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "datasets/benchmark_sets.h"

namespace hedgedb {
namespace datasets {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kCarsClasses = 196;
constexpr int64_t kCarsTrainClasses = 98;  // 1-98 train, 99-196 test

// Owners, so that every return path frees what matio allocated.
struct MatVarFree {
  void operator()(matvar_t* v) const { Mat_VarFree(v); }
};
using MatVarPtr = std::unique_ptr<matvar_t, MatVarFree>;
struct MatClose {
  void operator()(mat_t* m) const { Mat_Close(m); }
};
using MatFilePtr = std::unique_ptr<mat_t, MatClose>;

// Number of elements (product of the dimensions); false if the dimensions are
// missing or overflow.
bool ElementCount(const matvar_t* v, size_t* count) {
  if (v->rank < 0 || (v->rank > 0 && v->dims == nullptr)) return false;
  size_t n = 1;
  for (int i = 0; i < v->rank; ++i) {
    const size_t d = v->dims[i];
    if (d != 0 && n > std::numeric_limits<size_t>::max() / d) return false;
    n *= d;
  }
  *count = n;
  return true;
}

// At most one dimension above 1 (a row or column vector, a scalar or empty).
bool IsVector(const matvar_t* v) {
  if (v->rank < 0 || (v->rank > 0 && v->dims == nullptr)) return false;
  int long_dims = 0;
  for (int i = 0; i < v->rank; ++i) long_dims += v->dims[i] > 1 ? 1 : 0;
  return long_dims <= 1;
}

const char* ClassName(matio_classes c) {
  switch (c) {
    case MAT_C_EMPTY:
      return "empty";
    case MAT_C_CELL:
      return "cell";
    case MAT_C_STRUCT:
      return "struct";
    case MAT_C_OBJECT:
      return "object";
    case MAT_C_CHAR:
      return "char";
    case MAT_C_SPARSE:
      return "sparse";
    case MAT_C_DOUBLE:
      return "double";
    case MAT_C_SINGLE:
      return "single";
    case MAT_C_INT8:
      return "int8";
    case MAT_C_UINT8:
      return "uint8";
    case MAT_C_INT16:
      return "int16";
    case MAT_C_UINT16:
      return "uint16";
    case MAT_C_INT32:
      return "int32";
    case MAT_C_UINT32:
      return "uint32";
    case MAT_C_INT64:
      return "int64";
    case MAT_C_UINT64:
      return "uint64";
    case MAT_C_FUNCTION:
      return "function";
    case MAT_C_OPAQUE:
      return "opaque";
  }
  return "unknown";
}

// "a 1 x 2 char", for messages about what was found instead.
std::string Describe(const matvar_t* v) {
  std::string dims;
  if (v->rank > 0 && v->dims != nullptr) {
    for (int i = 0; i < v->rank; ++i) {
      if (i > 0) dims += " x ";
      dims += std::to_string(v->dims[i]);
    }
  } else {
    dims = "dimensionless";
  }
  return "a " + dims + (v->isComplex ? " complex " : " ") + ClassName(v->class_type);
}

bool IsNumericClass(matio_classes c) {
  switch (c) {
    case MAT_C_DOUBLE:
    case MAT_C_SINGLE:
    case MAT_C_INT8:
    case MAT_C_UINT8:
    case MAT_C_INT16:
    case MAT_C_UINT16:
    case MAT_C_INT32:
    case MAT_C_UINT32:
    case MAT_C_INT64:
    case MAT_C_UINT64:
      return true;
    default:
      return false;
  }
}

template <typename T>
bool LoadAs(const matvar_t* v, double* value) {
  if (v->nbytes < sizeof(T)) return false;
  T x;
  std::memcpy(&x, v->data, sizeof(T));
  *value = static_cast<double>(x);
  return true;
}

// A real numeric 1 x 1 value of any numeric class (writers differ: double,
// uint8, uint16, ...); otherwise false, with `problem` saying what was found.
bool NumericScalar(const matvar_t* v, double* value, std::string* problem) {
  size_t count = 0;
  if (!IsNumericClass(v->class_type) || v->isComplex || !ElementCount(v, &count) || count != 1) {
    *problem = "expected a real numeric scalar, found " + Describe(v);
    return false;
  }
  if (v->data == nullptr) {
    *problem = "numeric scalar without data";
    return false;
  }
  // The data's in-memory type (data_type) decides how to read it; matio
  // normally converts it to the class's type, but do not rely on that.
  bool ok = false;
  switch (v->data_type) {
    case MAT_T_DOUBLE:
      ok = LoadAs<double>(v, value);
      break;
    case MAT_T_SINGLE:
      ok = LoadAs<float>(v, value);
      break;
    case MAT_T_INT8:
      ok = LoadAs<int8_t>(v, value);
      break;
    case MAT_T_UINT8:
      ok = LoadAs<uint8_t>(v, value);
      break;
    case MAT_T_INT16:
      ok = LoadAs<int16_t>(v, value);
      break;
    case MAT_T_UINT16:
      ok = LoadAs<uint16_t>(v, value);
      break;
    case MAT_T_INT32:
      ok = LoadAs<int32_t>(v, value);
      break;
    case MAT_T_UINT32:
      ok = LoadAs<uint32_t>(v, value);
      break;
    case MAT_T_INT64:
      ok = LoadAs<int64_t>(v, value);
      break;
    case MAT_T_UINT64:
      ok = LoadAs<uint64_t>(v, value);
      break;
    default:
      break;
  }
  if (!ok) {
    *problem = std::string("unreadable ") + ClassName(v->class_type) + " scalar data";
    return false;
  }
  if (!std::isfinite(*value)) {
    *problem = "the value is not finite";
    return false;
  }
  return true;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// A char row (or column) vector as UTF-8. MATLAB writes chars as UTF-16 or
// UTF-8, older writers as 8-bit (taken as Latin-1).
bool CharString(const matvar_t* v, std::string* text, std::string* problem) {
  size_t count = 0;
  if (v->class_type != MAT_C_CHAR || v->isComplex || !ElementCount(v, &count) || !IsVector(v)) {
    *problem = "expected a char string, found " + Describe(v);
    return false;
  }
  text->clear();
  if (count == 0) return true;
  // A corrupt file can declare any length; no path or class name is this long.
  constexpr size_t kMaxLength = 1 << 16;
  if (count > kMaxLength) {
    *problem = "implausibly long char string (" + std::to_string(count) + " characters)";
    return false;
  }
  if (v->data == nullptr) {
    *problem = "char string without data";
    return false;
  }
  const auto* bytes = static_cast<const unsigned char*>(v->data);
  switch (v->data_type) {
    case MAT_T_UTF8:
      // matio sizes UTF-8 data as one byte per element.
      if (v->nbytes < count) break;
      text->assign(reinterpret_cast<const char*>(bytes), count);
      return true;
    case MAT_T_UINT8:
    case MAT_T_INT8:
      if (v->nbytes < count) break;
      for (size_t i = 0; i < count; ++i) AppendUtf8(bytes[i], text);
      return true;
    case MAT_T_UINT16:
    case MAT_T_INT16:
    case MAT_T_UTF16: {
      if (v->nbytes / 2 < count) break;
      for (size_t i = 0; i < count; ++i) {
        uint16_t unit;
        std::memcpy(&unit, bytes + 2 * i, 2);
        uint32_t cp = unit;
        if (unit >= 0xD800 && unit <= 0xDBFF && i + 1 < count) {
          uint16_t low;
          std::memcpy(&low, bytes + 2 * (i + 1), 2);
          if (low >= 0xDC00 && low <= 0xDFFF) {
            cp = 0x10000 + ((static_cast<uint32_t>(unit) - 0xD800) << 10) + (low - 0xDC00);
            ++i;
          }
        }
        AppendUtf8(cp, text);
      }
      return true;
    }
    case MAT_T_UINT32:
    case MAT_T_INT32:
    case MAT_T_UTF32:
      if (v->nbytes / 4 < count) break;
      for (size_t i = 0; i < count; ++i) {
        uint32_t cp;
        std::memcpy(&cp, bytes + 4 * i, 4);
        AppendUtf8(cp, text);
      }
      return true;
    default:
      break;
  }
  *problem = "unreadable char string data";
  return false;
}

// The elements of a cell or struct array are matvar_t pointers in `data`;
// matio's accessors index it without checking it, so check it here.
bool HasPointerData(const matvar_t* v, size_t pointers) {
  if (pointers == 0) return true;
  return v->data != nullptr && v->nbytes / sizeof(matvar_t*) >= pointers;
}

// "" if `size` bytes at `data` are one complete, intact zlib stream, else
// what is wrong with them.
std::string InflateProblem(const unsigned char* data, uint32_t size) {
  z_stream z;
  std::memset(&z, 0, sizeof(z));
  if (inflateInit(&z) != Z_OK) return "cannot initialise zlib";
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = size;
  std::vector<unsigned char> out(1 << 16);
  std::string problem;
  for (;;) {
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_OK) continue;
    problem = z.avail_in == 0 ? "the zlib stream ends early"
                              : std::string("zlib: ") + (z.msg != nullptr ? z.msg : "error");
    break;
  }
  inflateEnd(&z);
  return problem;
}

// matio trusts the sizes it inflates from a compressed variable: a few
// flipped bytes in one can make it allocate gigabytes and spin. So the
// top-level elements of a v5 file are walked first: each must fit in the file,
// and each compressed one must inflate cleanly (zlib's checksum catches the
// damage). Files that are not v5 are refused before matio sees them: its v4
// reader allocates whatever name length the first bytes claim, and
// cars_annos.mat is a v5 file.
Status CheckMat5Elements(const std::string& mat_path) {
  std::ifstream in(mat_path, std::ios::binary);
  if (!in) return Status::IOError(mat_path + ": cannot open");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::IOError(mat_path + ": read error");
  constexpr size_t kHeaderSize = 128;
  const Status not_v5 =
      Status::Corruption(mat_path + ": not a MATLAB v5 MAT file (no 128-byte v5 header)");
  if (bytes.size() < kHeaderSize) return not_v5;
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  // The endian indicator "MI" as written by the file's machine.
  bool little_endian = false;
  if (b[126] == 'I' && b[127] == 'M') {
    little_endian = true;
  } else if (!(b[126] == 'M' && b[127] == 'I')) {
    return not_v5;
  }
  auto u16 = [&](size_t at) {
    return little_endian ? static_cast<uint32_t>(b[at] | b[at + 1] << 8)
                         : static_cast<uint32_t>(b[at] << 8 | b[at + 1]);
  };
  auto u32 = [&](size_t at) {
    return little_endian ? (u16(at) | u16(at + 2) << 16) : (u16(at) << 16 | u16(at + 2));
  };
  if (u16(124) != 0x0100) {
    return Status::Corruption(mat_path + ": MAT file version " + std::to_string(u16(124) >> 8) +
                              "." + std::to_string(u16(124) & 0xFF) +
                              " (HDF5-based v7.3?); expected a v5 file");
  }
  // The data elements inside an uncompressed matrix (flags, dimensions, name,
  // data, and the nested matrices of structs and cells) must fit in it too:
  // matio allocates what a nested tag claims (a flipped byte in a struct field
  // took it a minute and a gigabyte).
  // A matrix's dimensions (its second element) cannot claim more elements
  // than it has bytes: every element stores at least one byte (a struct or
  // cell element a nested matrix). Not so for sparse arrays, left as they are.
  // matio allocates what the dimensions claim before reading anything. A
  // matrix is empty (as MATLAB writes empty struct fields) or holds at least
  // its flags (16 bytes) and a dimensions tag (8): matio reads them whatever
  // the size, so a shorter one has its dimensions read from the bytes after
  // it (a 20-byte matrix claiming 2^29 doubles made it allocate 4 GB).
  // `field`: the matrix is a field of a struct, whose name matio skips as an
  // 8-byte tag without its data (names of fields are in the struct's header),
  // so a non-empty name would shift every read after it (a name of 11 bytes
  // made the name's padding a data tag claiming 2^64 - 7M bytes).
  auto header_fits = [&](size_t at, size_t end, bool field) {
    if (end == at) return true;
    if (end - at < 24) return false;
    // matio reads the array flags as one miUINT32 element of 8 bytes and the
    // dimensions as miINT32 whatever their tags say; a flags tag claiming
    // more would hide the elements after it from this walk (a flipped byte
    // made class_names' flags cover its cells, one of which then claimed 8 GB).
    if (u32(at) != MAT_T_UINT32 || u32(at + 4) != 8) return false;
    const uint32_t tag = u32(at + 16);
    const bool small_dims = (tag >> 16) != 0;
    if ((tag & 0xFFFF) != MAT_T_INT32) return false;
    const size_t n = small_dims ? tag >> 16 : u32(at + 20);
    const size_t data = small_dims ? at + 20 : at + 24;
    if (data > end || n > end - data) return false;
    // The array name follows the dimensions and is miINT8; a struct field's
    // must be empty (matio skips it unread). matio reads a name of another type as absent and
    // takes its data for the next tag (a flipped type byte made it allocate
    // 2^64 - 16M bytes).
    const size_t name = small_dims ? at + 24 : data + (n + 7) / 8 * 8;
    if (name > end || end - name < 8) return false;
    const uint32_t name_tag = u32(name);
    const bool name_ok = (name_tag >> 16) != 0
                             ? (name_tag & 0xFFFF) == MAT_T_INT8 && (name_tag >> 16) <= 4
                             : name_tag == MAT_T_INT8;
    if (!name_ok) return false;
    if (field && (name_tag >> 16) == 0 && u32(name + 4) != 0) return false;
    if ((u32(at + 8) & 0xFF) == MAT_C_SPARSE) return true;
    uint64_t product = 1;
    for (size_t i = 0; i + 4 <= n; i += 4) {
      const uint64_t d = u32(data + i);
      if (d == 0) return true;  // an empty array
      if (product > (end - at) / d) return false;
      product *= d;
    }
    return product <= end - at;
  };
  std::function<bool(size_t, size_t, int, bool)> nested_fit = [&](size_t at, size_t end, int depth,
                                                                  bool field) {
    if (depth > 16 || !header_fits(at, end, field)) return false;
    const bool is_struct = end > at && (u32(at + 8) & 0xFF) == MAT_C_STRUCT;
    while (end - at >= 8) {
      const uint32_t type = u32(at);
      if ((type >> 16) != 0) {  // small element
        at += 8;
        continue;
      }
      const size_t size = u32(at + 4);
      if (size > end - at - 8) return false;
      if (type == MAT_T_MATRIX && !nested_fit(at + 8, at + 8 + size, depth + 1, is_struct)) {
        return false;
      }
      at += 8 + std::min<size_t>((size + 7) / 8 * 8, end - at - 8);
    }
    return true;
  };
  size_t pos = kHeaderSize;
  for (int element = 1; bytes.size() - pos >= 8; ++element) {
    const uint32_t type = u32(pos);
    const uint32_t size = u32(pos + 4);
    if ((type >> 16) != 0) {  // a small element: its data is inside the tag
      pos += 8;
      continue;
    }
    const size_t available = bytes.size() - pos - 8;
    if (size > available) {
      return Status::Corruption(mat_path + ": truncated: data element " + std::to_string(element) +
                                " needs " + std::to_string(size) + " bytes, " +
                                std::to_string(available) + " remain");
    }
    if (type == MAT_T_MATRIX && !nested_fit(pos + 8, pos + 8 + size, 0, false)) {
      return Status::Corruption(mat_path + ": data element " + std::to_string(element) +
                                " holds a malformed element (larger than its parent, or a "
                                "matrix without its flags, dimensions and name)");
    }
    if (type == MAT_T_COMPRESSED) {
      const std::string problem = InflateProblem(b + pos + 8, size);
      if (!problem.empty()) {
        return Status::Corruption(mat_path + ": compressed data element " +
                                  std::to_string(element) + " is corrupt (" + problem + ")");
      }
    }
    pos += 8 + size;
  }
  return Status::OK();
}

// The class names of `class_names`, or an empty vector if the variable is
// absent (label names are then the ids).
Status ReadClassNames(mat_t* mat, const std::string& mat_path, std::vector<std::string>* names) {
  names->clear();
  MatVarPtr var(Mat_VarReadInfo(mat, "class_names"));
  if (var == nullptr) return Status::OK();
  var.reset(Mat_VarRead(mat, "class_names"));
  const std::string where = mat_path + ": variable 'class_names': ";
  if (var == nullptr) return Status::Corruption(where + "cannot be read (truncated or corrupt)");
  size_t count = 0;
  if (var->class_type != MAT_C_CELL || !ElementCount(var.get(), &count) || !IsVector(var.get())) {
    return Status::Corruption(where + "expected a cell array of char strings, found " +
                              Describe(var.get()));
  }
  if (count != static_cast<size_t>(kCarsClasses)) {
    return Status::Corruption(where + "expected " + std::to_string(kCarsClasses) +
                              " class names, found " + std::to_string(count));
  }
  if (!HasPointerData(var.get(), count)) {
    return Status::Corruption(where + "cell array without data");
  }
  const auto* cells = static_cast<matvar_t* const*>(var->data);
  for (size_t i = 0; i < count; ++i) {
    const std::string cell_where = mat_path + ": class_names{" + std::to_string(i + 1) + "}: ";
    if (cells[i] == nullptr) return Status::Corruption(cell_where + "missing (truncated file?)");
    std::string name, problem;
    if (!CharString(cells[i], &name, &problem)) return Status::Corruption(cell_where + problem);
    names->push_back(std::move(name));
  }
  return Status::OK();
}

// Reads the existing `mat_path`; entries go to `source` only if all are valid.
Status ReadMat(const fs::path& root_path, const std::string& mat_path, BenchmarkSplit split,
               int64_t train_classes, ImageSource* source) {
  int64_t min_label = 0, max_label = 0;
  HEDGEDB_RETURN_IF_ERROR(CheckMat5Elements(mat_path));

  MatFilePtr mat(Mat_Open(mat_path.c_str(), MAT_ACC_RDONLY));
  if (mat == nullptr) {
    return Status::Corruption(mat_path + ": not a MATLAB MAT file (or a corrupt one)");
  }
  // Reading the header first tells a missing variable from an unreadable one.
  MatVarPtr annotations(Mat_VarReadInfo(mat.get(), "annotations"));
  if (annotations == nullptr) {
    return Status::Corruption(mat_path + ": no variable 'annotations'");
  }
  annotations.reset(Mat_VarRead(mat.get(), "annotations"));
  if (annotations == nullptr) {
    return Status::Corruption(mat_path +
                              ": variable 'annotations' cannot be read (truncated or corrupt)");
  }
  size_t count = 0;
  if (annotations->class_type != MAT_C_STRUCT || !ElementCount(annotations.get(), &count) ||
      !IsVector(annotations.get())) {
    return Status::Corruption(mat_path +
                              ": variable 'annotations': expected a 1 x N struct array, " +
                              "found " + Describe(annotations.get()));
  }
  if (count == 0) return Status::Corruption(mat_path + ": variable 'annotations' is empty");

  const unsigned num_fields = Mat_VarGetNumberOfFields(annotations.get());
  char* const* field_names = Mat_VarGetStructFieldnames(annotations.get());
  if (num_fields == 0) {
    return Status::Corruption(mat_path +
                              ": variable 'annotations' has no fields (truncated file?)");
  }
  const char* const kFields[] = {"relative_im_path", "bbox_x1", "bbox_y1",
                                 "bbox_x2",          "bbox_y2", "class"};
  for (const char* wanted : kFields) {
    bool found = false;
    for (unsigned f = 0; f < num_fields && field_names != nullptr && !found; ++f) {
      found = field_names[f] != nullptr && std::strcmp(field_names[f], wanted) == 0;
    }
    if (!found) {
      return Status::Corruption(mat_path + ": variable 'annotations' has no field '" + wanted +
                                "'");
    }
  }
  if (count > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      count > std::numeric_limits<size_t>::max() / num_fields ||
      !HasPointerData(annotations.get(), count * num_fields)) {
    return Status::Corruption(mat_path + ": variable 'annotations': struct array without data");
  }

  std::vector<std::string> class_names;
  HEDGEDB_RETURN_IF_ERROR(ReadClassNames(mat.get(), mat_path, &class_names));

  // Every annotation is checked, whatever the split, so that a file is either
  // valid or not; `source` stays empty on error.
  std::vector<ImageEntry> entries;
  for (size_t i = 0; i < count; ++i) {
    const std::string where = mat_path + ": annotation " + std::to_string(i + 1) + ": ";
    auto field = [&](const char* name, matvar_t** v) -> Status {
      *v = Mat_VarGetStructFieldByName(annotations.get(), name, i);
      if (*v == nullptr) return Status::Corruption(where + "field '" + name + "' is missing");
      return Status::OK();
    };
    auto number = [&](const char* name, double* value) -> Status {
      matvar_t* v = nullptr;
      HEDGEDB_RETURN_IF_ERROR(field(name, &v));
      std::string problem;
      if (!NumericScalar(v, value, &problem)) {
        return Status::Corruption(where + "field '" + name + "': " + problem);
      }
      return Status::OK();
    };

    matvar_t* path_var = nullptr;
    HEDGEDB_RETURN_IF_ERROR(field("relative_im_path", &path_var));
    std::string relative, problem;
    if (!CharString(path_var, &relative, &problem)) {
      return Status::Corruption(where + "field 'relative_im_path': " + problem);
    }
    if (relative.empty()) {
      return Status::Corruption(where + "field 'relative_im_path' is empty");
    }
    if (relative.find('\0') != std::string::npos) {
      return Status::Corruption(where + "field 'relative_im_path' contains a NUL character");
    }

    double x1 = 0, y1 = 0, x2 = 0, y2 = 0, class_value = 0;
    HEDGEDB_RETURN_IF_ERROR(number("bbox_x1", &x1));
    HEDGEDB_RETURN_IF_ERROR(number("bbox_y1", &y1));
    HEDGEDB_RETURN_IF_ERROR(number("bbox_x2", &x2));
    HEDGEDB_RETURN_IF_ERROR(number("bbox_y2", &y2));
    HEDGEDB_RETURN_IF_ERROR(number("class", &class_value));
    if (class_value != std::floor(class_value) || class_value < 1 ||
        class_value > static_cast<double>(kCarsClasses)) {
      char text[64];
      std::snprintf(text, sizeof(text), "%.17g", class_value);
      return Status::Corruption(where + "field 'class': class id " + text +
                                " is not an integer in 1.." + std::to_string(kCarsClasses));
    }
    if (x2 < x1 || y2 < y1) {
      char text[160];
      std::snprintf(text, sizeof(text), "empty bounding box x1 %g y1 %g x2 %g y2 %g", x1, y1, x2,
                    y2);
      return Status::Corruption(where + "fields 'bbox_x1..bbox_y2': " + text +
                                " (x2 < x1 or y2 < y1)");
    }

    const int64_t label = static_cast<int64_t>(class_value);
    min_label = min_label == 0 ? label : std::min(min_label, label);
    max_label = std::max(max_label, label);
    const bool train = label <= train_classes;
    if ((split == BenchmarkSplit::kTrain && !train) || (split == BenchmarkSplit::kTest && train)) {
      continue;
    }
    ImageEntry e;
    HEDGEDB_RETURN_IF_ERROR(ResolveUnderRoot(root_path.string(), relative,
                                             where + "field 'relative_im_path'", &e.path));
    e.has_label = true;
    e.label = label;
    e.label_name = class_names.empty() || class_names[label - 1].empty() ? std::to_string(label)
                                                                         : class_names[label - 1];
    // MATLAB boxes are 1-based and inclusive; ImageEntry boxes are 0-based,
    // half-open.
    e.has_box = true;
    e.box.x = x1 - 1;
    e.box.y = y1 - 1;
    e.box.width = x2 - x1 + 1;
    e.box.height = y2 - y1 + 1;
    entries.push_back(std::move(e));
  }
  if (entries.empty()) {
    return EmptySplitError(mat_path, "Cars-196", split, train_classes, kCarsClasses, min_label,
                           max_label);
  }
  source->entries = std::move(entries);
  return Status::OK();
}

}  // namespace

Status ReadCars196(const std::string& root, BenchmarkSplit split, ImageSource* source,
                   int64_t class_split) {
  *source = ImageSource();
  int64_t train_classes = 0;
  HEDGEDB_RETURN_IF_ERROR(
      TrainClassesOf(class_split, kCarsTrainClasses, kCarsClasses, &train_classes));
  std::error_code ec;
  const fs::path root_path = fs::absolute(root, ec).lexically_normal();
  if (ec) return Status::InvalidArgument(root + ": cannot resolve the Cars-196 root");
  const std::string mat_path = (root_path / "cars_annos.mat").string();
  if (!fs::is_directory(root_path, ec)) {
    if (fs::exists(root_path, ec)) {
      return Status::InvalidArgument(mat_path + ": the Cars-196 root " + root +
                                     " is not a directory");
    }
    return Status::NotFound(mat_path + ": not found (the Cars-196 root " + root +
                            " does not exist)");
  }
  if (!fs::exists(mat_path, ec)) return Status::NotFound(mat_path + ": no such file");
  if (!fs::is_regular_file(mat_path, ec)) {
    return Status::InvalidArgument(mat_path + ": not a regular file");
  }
  try {
    return ReadMat(root_path, mat_path, split, train_classes, source);
  } catch (const std::bad_alloc&) {
    // Sizes taken from a corrupt file; the matio objects are freed by then.
    *source = ImageSource();
    return Status::Corruption(mat_path + ": out of memory (corrupt sizes in the file?)");
  }
}

}  // namespace datasets
}  // namespace hedgedb
