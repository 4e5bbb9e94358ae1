// The record codec of the store (storage/record_store.cc): a RocksDB record
// key and value decoded for a collection whose rows have a given size.
// Input: byte 0 = row size / 4, byte 1 bit 0 = fix the checksum first, 12 key
// bytes, then the value. A decoded record must encode and decode to itself.
#include "fuzz/fuzz_util.h"
#include "storage/record_store.h"

using namespace hedgedb;
using storage::RecordStore;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 14) return 0;
  const size_t row_bytes = size_t(data[0]) * 4;
  const bool fix_crc = (data[1] & 1) != 0;
  const std::string key(reinterpret_cast<const char*>(data + 2), 12);
  std::string value(reinterpret_cast<const char*>(data + 14), size - 14);
  if (fix_crc) fuzz::FixTrailingCrc(&value);
  storage::StoredRecord record;
  if (!RecordStore::DecodeRecord(key, value, row_bytes, &record).ok()) return 0;
  if (record.row.size() != row_bytes) __builtin_trap();
  storage::RecordWrite w;
  w.id = record.id;
  w.has_label = record.has_label;
  w.label = record.label;
  w.row = record.row.data();
  const std::string encoded = RecordStore::EncodeRecord(record.sequence, w, row_bytes);
  storage::StoredRecord again;
  if (!RecordStore::DecodeRecord(key, encoded, row_bytes, &again).ok() || again.id != record.id ||
      again.sequence != record.sequence || again.has_label != record.has_label ||
      (record.has_label && again.label != record.label) || again.row != record.row) {
    __builtin_trap();
  }
  return 0;
}
