// Status and Result: how errors cross the hedgedb API (LevelDB style).
// No exception escapes the public API; FAISS, RocksDB and Torch errors are
// translated into a Status at the boundary.
#pragma once

#include <string>
#include <utility>

#include "hedgedb/export.h"

namespace hedgedb {

class HEDGEDB_EXPORT Status {
 public:
  enum class Code {
    kOk = 0,
    kNotFound,
    kInvalidArgument,
    kCorruption,
    kIOError,
    kAlreadyExists,
    kNotSupported,
    kInternal,
  };

  Status() = default;  // OK

  static Status OK() { return Status(); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status InvalidArgument(std::string msg) {
    return Status(Code::kInvalidArgument, std::move(msg));
  }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status IOError(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  static Status AlreadyExists(std::string msg) {
    return Status(Code::kAlreadyExists, std::move(msg));
  }
  static Status NotSupported(std::string msg) {
    return Status(Code::kNotSupported, std::move(msg));
  }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsIOError() const { return code_ == Code::kIOError; }
  bool IsAlreadyExists() const { return code_ == Code::kAlreadyExists; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "Invalid argument: <message>", or "OK".
  std::string ToString() const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// Evaluates `expr` (a Status) and returns it from the enclosing function if not OK.
#define HEDGEDB_RETURN_IF_ERROR(expr)        \
  do {                                       \
    ::hedgedb::Status _hedgedb_s = (expr);   \
    if (!_hedgedb_s.ok()) return _hedgedb_s; \
  } while (0)

}  // namespace hedgedb
