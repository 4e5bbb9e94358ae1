#include "index/index_file.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "common/coding.h"
#include "common/crc32c.h"

namespace hedgedb {
namespace index {
namespace {

constexpr char kMagic[8] = {'H', 'E', 'D', 'G', 'E', 'I', 'D', 'X'};
constexpr size_t kCrcOffset = kIndexHeaderBytes - 4;

uint32_t FileCrc(std::string_view header, std::initializer_list<std::string_view> pieces) {
  uint32_t crc = Crc32c(header.data() + 8, kCrcOffset - 8);
  for (std::string_view piece : pieces) crc = Crc32c(piece.data(), piece.size(), crc);
  return crc;
}

constexpr uint32_t kUpkeepRecordVersion = 3;
// Records of version 1 end after oversampling (no imbalances); of version 2
// after the imbalances (no fitted_items).
constexpr uint32_t kOldestUpkeepRecordVersion = 1;

void PutString(std::string* out, const std::string& s) {
  PutFixed<uint32_t>(out, uint32_t(s.size()));
  out->append(s);
}

// Reads the record from the front, each Get failing once it would run past.
class RecordReader {
 public:
  explicit RecordReader(std::string_view bytes) : rest_(bytes) {}
  template <typename T>
  bool Get(T* value) {
    if (rest_.size() < sizeof(T)) return false;
    *value = GetFixed<T>(rest_.data());
    rest_.remove_prefix(sizeof(T));
    return true;
  }
  bool GetString(std::string* s) {
    uint32_t n = 0;
    if (!Get(&n) || rest_.size() < n) return false;
    s->assign(rest_.data(), n);
    rest_.remove_prefix(n);
    return true;
  }

 private:
  std::string_view rest_;
};

}  // namespace

std::string EncodeIndexFileHeader(uint32_t recall_bp, uint64_t sequence, uint64_t binding,
                                  std::initializer_list<std::string_view> pieces,
                                  uint32_t version) {
  uint64_t bytes = 0;
  for (std::string_view piece : pieces) bytes += piece.size();
  std::string header(kMagic, 8);
  PutFixed<uint32_t>(&header, version);
  PutFixed<uint32_t>(&header, recall_bp);
  PutFixed<uint64_t>(&header, sequence);
  PutFixed<uint64_t>(&header, binding);
  PutFixed<uint64_t>(&header, bytes);
  PutFixed<uint32_t>(&header, FileCrc(header, pieces));
  return header;
}

Status ParseIndexFileHeader(std::string_view header, uint64_t file_size, const std::string& path,
                            IndexFileHeader* out) {
  if (header.size() < kIndexHeaderBytes || file_size < kIndexHeaderBytes ||
      std::memcmp(header.data(), kMagic, 8) != 0) {
    return Status::Corruption("index file " + path + " has a bad header");
  }
  IndexFileHeader h;
  h.version = GetFixed<uint32_t>(header.data() + 8);
  h.recall_bp = GetFixed<uint32_t>(header.data() + 12);
  h.sequence = GetFixed<uint64_t>(header.data() + 16);
  h.binding = GetFixed<uint64_t>(header.data() + 24);
  h.blob_bytes = GetFixed<uint64_t>(header.data() + 32);
  h.crc = GetFixed<uint32_t>(header.data() + kCrcOffset);
  if (h.version < kOldestIndexFileVersion || h.version > kIndexFileVersion) {
    return Status::Corruption("index file " + path + " has format version " +
                              std::to_string(h.version) + ", this build reads " +
                              std::to_string(kOldestIndexFileVersion) + " to " +
                              std::to_string(kIndexFileVersion));
  }
  if (h.blob_bytes != file_size - kIndexHeaderBytes) {
    return Status::Corruption("index file " + path + " is truncated or has trailing bytes (" +
                              std::to_string(file_size) + " bytes, header says " +
                              std::to_string(kIndexHeaderBytes) + " + " +
                              std::to_string(h.blob_bytes) + ")");
  }
  *out = h;
  return Status::OK();
}

Status CheckIndexFileBlob(std::string_view header, const IndexFileHeader& parsed,
                          std::string_view blob, uint64_t binding, const std::string& path) {
  if (header.size() < kIndexHeaderBytes || blob.size() != parsed.blob_bytes ||
      FileCrc(header, {blob}) != parsed.crc) {
    return Status::Corruption("index file " + path + " fails its checksum");
  }
  if (parsed.binding != binding) {
    return Status::Corruption("index file " + path +
                              " belongs to another collection or database (binding mismatch)");
  }
  return Status::OK();
}

std::string EncodeUpkeepPrefix(std::string_view upkeep) {
  std::string prefix;
  PutFixed<uint32_t>(&prefix, uint32_t(upkeep.size()));
  prefix.append(upkeep);
  return prefix;
}

Status SplitIndexPayload(const IndexFileHeader& parsed, std::string_view payload,
                         const std::string& path, std::string_view* upkeep,
                         std::string_view* blob) {
  if (parsed.version < 3) {
    *upkeep = std::string_view();
    *blob = payload;
    return Status::OK();
  }
  if (payload.size() < 4 || GetFixed<uint32_t>(payload.data()) > payload.size() - 4) {
    return Status::Corruption("index file " + path + " has an upkeep record past its end");
  }
  const uint32_t n = GetFixed<uint32_t>(payload.data());
  *upkeep = payload.substr(4, n);
  *blob = payload.substr(4 + size_t(n));
  return Status::OK();
}

namespace {

template <typename T>
bool SameField(const T& a, const T& b) {
  return a == b;
}

bool SameField(double a, double b) {
  uint64_t x, y;
  std::memcpy(&x, &a, sizeof(x));
  std::memcpy(&y, &b, sizeof(y));
  return x == y;
}

}  // namespace

uint32_t EqualUpkeepFields(const IndexUpkeep& a, const IndexUpkeep& b) {
  // One name per field: a structured binding must name them all, so a field
  // added to IndexUpkeep fails to compile here until it is compared.
  const auto& [a_changes, a_checked_sequence, a_checked_time, a_checked_recall,
               a_retrained_sequence, a_retrained_time, a_retrains, a_fitted_knob, a_fitted_recall,
               a_retrain_reason, a_note, a_coarse_recall, a_oversampling, a_fitted_imbalance,
               a_checked_imbalance, a_fitted_items] = a;
  const auto& [b_changes, b_checked_sequence, b_checked_time, b_checked_recall,
               b_retrained_sequence, b_retrained_time, b_retrains, b_fitted_knob, b_fitted_recall,
               b_retrain_reason, b_note, b_coarse_recall, b_oversampling, b_fitted_imbalance,
               b_checked_imbalance, b_fitted_items] = b;
  uint32_t equal = 0;
  int field = 0;
  auto compare = [&](const auto& x, const auto& y) {
    if (SameField(x, y)) equal |= uint32_t(1) << field;
    ++field;
  };
  compare(a_changes, b_changes);
  compare(a_checked_sequence, b_checked_sequence);
  compare(a_checked_time, b_checked_time);
  compare(a_checked_recall, b_checked_recall);
  compare(a_retrained_sequence, b_retrained_sequence);
  compare(a_retrained_time, b_retrained_time);
  compare(a_retrains, b_retrains);
  compare(a_fitted_knob, b_fitted_knob);
  compare(a_fitted_recall, b_fitted_recall);
  compare(a_retrain_reason, b_retrain_reason);
  compare(a_note, b_note);
  compare(a_coarse_recall, b_coarse_recall);
  compare(a_oversampling, b_oversampling);
  compare(a_fitted_imbalance, b_fitted_imbalance);
  compare(a_checked_imbalance, b_checked_imbalance);
  compare(a_fitted_items, b_fitted_items);
  return field == kIndexUpkeepFields ? equal : 0;
}

std::string EncodeIndexUpkeep(const IndexUpkeep& u) {
  std::string out;
  PutFixed<uint32_t>(&out, kUpkeepRecordVersion);
  PutFixed<int64_t>(&out, u.changes_since_check);
  PutFixed<uint64_t>(&out, u.checked_sequence);
  PutFixed<int64_t>(&out, u.checked_time);
  PutFixed<double>(&out, u.checked_recall);
  PutFixed<uint64_t>(&out, u.retrained_sequence);
  PutFixed<int64_t>(&out, u.retrained_time);
  PutFixed<int64_t>(&out, u.retrains);
  PutFixed<int32_t>(&out, int32_t(u.fitted_knob));
  PutFixed<double>(&out, u.fitted_recall);
  PutString(&out, u.retrain_reason);
  PutString(&out, u.note);
  PutFixed<double>(&out, u.coarse_recall);
  PutFixed<int32_t>(&out, int32_t(u.oversampling));
  PutFixed<double>(&out, u.fitted_imbalance);
  PutFixed<double>(&out, u.checked_imbalance);
  PutFixed<int64_t>(&out, u.fitted_items);
  return out;
}

Status DecodeIndexUpkeep(std::string_view record, const std::string& path, IndexUpkeep* out) {
  RecordReader r(record);
  IndexUpkeep u;
  uint32_t version = 0;
  int32_t knob = 0, oversampling = 0;
  const bool ok = r.Get(&version) && version >= kOldestUpkeepRecordVersion &&
                  r.Get(&u.changes_since_check) && r.Get(&u.checked_sequence) &&
                  r.Get(&u.checked_time) && r.Get(&u.checked_recall) &&
                  r.Get(&u.retrained_sequence) && r.Get(&u.retrained_time) && r.Get(&u.retrains) &&
                  r.Get(&knob) && r.Get(&u.fitted_recall) && r.GetString(&u.retrain_reason) &&
                  r.GetString(&u.note) && r.Get(&u.coarse_recall) && r.Get(&oversampling) &&
                  (version < 2 || (r.Get(&u.fitted_imbalance) && r.Get(&u.checked_imbalance))) &&
                  (version < 3 || r.Get(&u.fitted_items));
  // An imbalance is NaN (not measured) or a finite ratio, >= 1 when
  // measured (>= 0 is what is checked: a damaged value must not retrain, or
  // never, at every check; a written one is never below 1).
  auto bad_imbalance = [](double x) { return !std::isnan(x) && !(x >= 0 && std::isfinite(x)); };
  if (!ok || u.changes_since_check < 0 || u.retrains < 0 || knob < 0 || oversampling < 0 ||
      u.fitted_items < 0 || oversampling > (1 << 20) || bad_imbalance(u.fitted_imbalance) ||
      bad_imbalance(u.checked_imbalance)) {
    return Status::Corruption("index file " + path + " has a damaged upkeep record");
  }
  u.fitted_knob = knob;
  u.oversampling = oversampling;
  *out = std::move(u);
  return Status::OK();
}

}  // namespace index
}  // namespace hedgedb
