// NumPy .npy files (format versions 1.0-3.0, C order, little-endian): the array
// format of the hedgedb command line and of the encoders' outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hedgedb/export.h"
#include "hedgedb/status.h"

namespace hedgedb {

enum class NpyType {
  kFloat32,
  kFloat64,
  kInt8,
  kUInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64
};

struct NpyArray {
  NpyType type = NpyType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // element_count() * element size, little-endian

  int64_t element_count() const;
  bool is_float() const { return type == NpyType::kFloat32 || type == NpyType::kFloat64; }
};

// Bytes per element of `type` (1, 2, 4 or 8).
HEDGEDB_EXPORT int NpyElementSize(NpyType type);
// The dtype string written to headers: "<f4", "|u1", "<i8", ...
HEDGEDB_EXPORT const char* NpyDescr(NpyType type);
// A shape as Python prints it: "()", "(3,)", "(3, 4)". For error messages.
HEDGEDB_EXPORT std::string NpyShapeString(const std::vector<int64_t>& shape);

// Reads `path`. Errors name the file: missing, not .npy, unsupported dtype
// (e.g. big-endian, object, Fortran order) or truncated.
HEDGEDB_EXPORT Status ReadNpy(const std::string& path, NpyArray* array);
// Writes atomically (tmp file + rename). The header is format 1.0 (2.0 only if
// it would not fit in 1.0), padded with spaces to a multiple of 64 bytes and laid
// out exactly as numpy.save writes it.
HEDGEDB_EXPORT Status WriteNpy(const std::string& path, const NpyArray& array);

// Element conversions; `what` names the array in error messages. ToFloat32
// accepts float arrays only; ToInt64 accepts integer arrays only (and
// float arrays whose values are all integral).
HEDGEDB_EXPORT Status NpyToFloat32(const NpyArray& array, const std::string& what,
                                   std::vector<float>* out);
HEDGEDB_EXPORT Status NpyToInt64(const NpyArray& array, const std::string& what,
                                 std::vector<int64_t>* out);
// float64 -> float32 for NpyToFloat32 and the Python binding: a finite value
// that float32 cannot hold (beyond its range, or nonzero but below its
// smallest subnormal, 1.4e-45, so that it would become 0) is refused naming
// the element and its value, instead of turning into an infinity or a 0
// that a later check would print as if it had been given.
HEDGEDB_EXPORT Status DoublesToFloat32(const double* in, size_t n, const std::string& what,
                                       float* out);
// NpyToInt64, and every value must fit in int32 (DIMCO code symbols).
HEDGEDB_EXPORT Status NpyToInt32(const NpyArray& array, const std::string& what,
                                 std::vector<int32_t>* out);
// The NpyType of a NumPy dtype given by its kind character ('f', 'i', 'u')
// and item size in bytes; false for every other dtype (bool, float16,
// complex, strings, objects), which the conversions above do not take. The
// Python binding reads its integer arguments through this and NpyToInt64, so
// that it takes exactly what the command line takes from a .npy file.
HEDGEDB_EXPORT bool NpyTypeOf(char kind, int item_size, NpyType* type);

// The Python binding's integer arguments (ids, labels, codes): `count`
// elements of the NumPy dtype (`kind`, `item_size`) at `data`, C order,
// native byte order, converted by NpyToInt64 / NpyToInt32, so that Python
// takes exactly what the command line takes from a .npy file. A dtype that
// NpyTypeOf does not take is refused as "<what>: expected an integer array,
// got dtype <dtype_name>" (dtype_name: as NumPy prints it, e.g. "bool").
// fuzz/py_args_fuzzer.cc checks that a value is refused exactly when it has
// no exact integer of the target type.
HEDGEDB_EXPORT Status BufferToInt64(char kind, int item_size, const void* data, size_t count,
                                    const std::string& what, const std::string& dtype_name,
                                    std::vector<int64_t>* out);
HEDGEDB_EXPORT Status BufferToInt32(char kind, int item_size, const void* data, size_t count,
                                    const std::string& what, const std::string& dtype_name,
                                    std::vector<int32_t>* out);

// These copy all of `data`; WriteNpy reports a size that does not match `shape`.
HEDGEDB_EXPORT NpyArray MakeNpy(const std::vector<float>& data, std::vector<int64_t> shape);
HEDGEDB_EXPORT NpyArray MakeNpy(const std::vector<int64_t>& data, std::vector<int64_t> shape);
HEDGEDB_EXPORT NpyArray MakeNpy(const std::vector<int32_t>& data, std::vector<int64_t> shape);
// Any element type: `data` holds element_count(shape) elements of `type`,
// little-endian.
HEDGEDB_EXPORT NpyArray MakeNpy(NpyType type, const void* data, std::vector<int64_t> shape);

}  // namespace hedgedb
