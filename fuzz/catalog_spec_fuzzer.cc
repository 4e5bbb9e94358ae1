// The catalog's collection spec JSON (storage::SpecFromJson): a spec that
// parses must print and parse to the same JSON.
#include <string>

#include "storage/record_store.h"

using namespace hedgedb;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  CollectionSpec spec;
  if (!storage::SpecFromJson(json, &spec).ok()) return 0;
  const std::string printed = storage::SpecToJson(spec);
  CollectionSpec again;
  if (!storage::SpecFromJson(printed, &again).ok() || storage::SpecToJson(again) != printed) {
    __builtin_trap();
  }
  return 0;
}
