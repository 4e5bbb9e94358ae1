#include "query/id_map.h"

#include <cassert>
#include <limits>
#include <stdexcept>
#include <utility>

namespace hedgedb {
namespace query {

size_t IdMap::Probe(int64_t id) const {
  size_t i = Home(id);
  while (slots_[i].row >= 0 && slots_[i].id != id) i = (i + 1) & mask_;
  return i;
}

bool IdMap::Set(int64_t id, int64_t row) {
  assert(row >= 0);  // -1 marks an empty slot
  Reserve(size_ + 1);
  Slot& s = slots_[Probe(id)];
  const bool fresh = s.row < 0;
  s.id = id;
  s.row = row;
  size_ += fresh;
  return fresh;
}

bool IdMap::Insert(int64_t id, int64_t row) {
  assert(row >= 0);
  Reserve(size_ + 1);
  Slot& s = slots_[Probe(id)];
  if (s.row >= 0) return false;
  s.id = id;
  s.row = row;
  ++size_;
  return true;
}

bool IdMap::Erase(int64_t id) {
  if (size_ == 0) return false;
  size_t hole = Probe(id);
  if (slots_[hole].row < 0) return false;
  // Backward-shift deletion: move each following entry of the run into the
  // hole when its home does not lie cyclically in (hole, its slot].
  for (size_t j = (hole + 1) & mask_; slots_[j].row >= 0; j = (j + 1) & mask_) {
    const size_t home = Home(slots_[j].id);
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole] = Slot();
  --size_;
  return true;
}

void IdMap::Reserve(size_t n) {
  // At least 4n/3 slots (up to 8n/3 once rounded up to a power of two) of 16
  // bytes must be addressable (a larger n is a caller's bug).
  if (n > std::numeric_limits<size_t>::max() / 64) throw std::length_error("IdMap::Reserve");
  if (Fits(n, slots_.size())) return;
  size_t capacity = 16;
  while (!Fits(n, capacity)) capacity *= 2;
  // Grow by doubling at least, so a stream of Sets rehashes O(log n) times.
  if (capacity < 2 * slots_.size()) capacity = 2 * slots_.size();
  Rehash(capacity);
}

void IdMap::Clear() {
  slots_.clear();
  mask_ = 0;
  shift_ = 64;
  size_ = 0;
}

void IdMap::Rehash(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot());
  mask_ = capacity - 1;
  shift_ = 64;
  for (size_t c = capacity; c > 1; c >>= 1) --shift_;
  for (const Slot& s : old) {
    if (s.row >= 0) slots_[Probe(s.id)] = s;
  }
}

}  // namespace query
}  // namespace hedgedb
