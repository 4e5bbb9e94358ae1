// Image item payloads (datasets/image_set.cc, ParseImagePayload): the
// payload bytes a query-image or export-images reads back from the store,
// and the class-name -> label rule. A payload that parses must print
// (ImageEntry::Payload) and parse to the same fields.
#include <string>

#include "datasets/image_set.h"

using namespace hedgedb;
using hedgedb::datasets::ImageEntry;
using hedgedb::datasets::ImagePayload;
using hedgedb::datasets::LabelOfName;
using hedgedb::datasets::ParseImagePayload;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string payload(reinterpret_cast<const char*>(data), size);
  (void)LabelOfName(payload);
  ImagePayload fields;
  if (!ParseImagePayload(payload, &fields)) return 0;
  ImageEntry entry;
  entry.path = fields.path;
  entry.idx_index = fields.index;
  entry.label_name = fields.label_name;
  ImagePayload again;
  if (!ParseImagePayload(entry.Payload(), &again) || again.path != fields.path ||
      again.index != fields.index || again.label_name != fields.label_name) {
    __builtin_trap();
  }
  return 0;
}
