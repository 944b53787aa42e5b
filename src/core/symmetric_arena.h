// Offset allocator for symmetric heaps. Every rank runs the same sequence of collective
// alloc/free calls on its own arena, so equal sequences give equal offsets on every rank; the
// caller verifies that with an allgather. Not thread-safe (collectives are serialised per comm).
#pragma once
#include <cstddef>
#include <map>

namespace symmar {

class SymmetricArena {
 public:
  static constexpr size_t kAlign = 256;
  explicit SymmetricArena(size_t capacity) : capacity_(capacity) {}
  /// First fit; false when no hole is large enough.
  bool allocate(size_t bytes, size_t* offset);
  /// False when offset is not the start of a live block.
  bool release(size_t offset);
  bool contains(size_t offset, size_t bytes, size_t* block_offset) const;
  size_t capacity() const { return capacity_; }
  size_t used() const;

 private:
  size_t capacity_;
  std::map<size_t, size_t> live_;  // offset -> rounded size
};

inline bool SymmetricArena::allocate(size_t bytes, size_t* offset) {
  if (bytes == 0 || bytes > capacity_) return false;
  size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
  size_t cursor = 0;
  for (const auto& [start, len] : live_) {
    if (start - cursor >= size) break;
    cursor = start + len;
  }
  if (cursor > capacity_ || capacity_ - cursor < size) return false;
  live_[cursor] = size;
  *offset = cursor;
  return true;
}

inline bool SymmetricArena::release(size_t offset) { return live_.erase(offset) == 1; }

inline bool SymmetricArena::contains(size_t offset, size_t bytes, size_t* block_offset) const {
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return false;
  --it;
  if (offset - it->first > it->second || bytes > it->second - (offset - it->first)) return false;
  if (block_offset) *block_offset = it->first;
  return true;
}

inline size_t SymmetricArena::used() const {
  size_t total = 0;
  for (const auto& [start, len] : live_) total += len;
  return total;
}

}  // namespace symmar
