#include "hedgedb/status.h"

namespace hedgedb {

std::string Status::ToString() const {
  const char* prefix = "OK";
  switch (code_) {
    case Code::kOk:
      return "OK";
    case Code::kNotFound:
      prefix = "Not found";
      break;
    case Code::kInvalidArgument:
      prefix = "Invalid argument";
      break;
    case Code::kCorruption:
      prefix = "Corruption";
      break;
    case Code::kIOError:
      prefix = "IO error";
      break;
    case Code::kAlreadyExists:
      prefix = "Already exists";
      break;
    case Code::kNotSupported:
      prefix = "Not supported";
      break;
    case Code::kInternal:
      prefix = "Internal error";
      break;
  }
  return std::string(prefix) + ": " + message_;
}

}  // namespace hedgedb
