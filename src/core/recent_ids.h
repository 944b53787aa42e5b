// A bounded memory of ids seen: a single-use check whose memory stays bounded however many ids a
// long-running process goes through.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>

namespace symmar {

/// The last `capacity` distinct 64-bit ids inserted; the oldest is forgotten first.
class RecentIds {
 public:
  explicit RecentIds(size_t capacity) : capacity_(capacity) {}
  /// Remembers id; false (and nothing changes) when it is already remembered.
  bool insert(uint64_t id) {
    if (!ids_.insert(id).second) return false;
    order_.push_back(id);
    if (order_.size() > capacity_) {
      ids_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }
  bool contains(uint64_t id) const { return ids_.count(id) != 0; }
  size_t size() const { return ids_.size(); }

 private:
  size_t capacity_;
  std::set<uint64_t> ids_;
  std::deque<uint64_t> order_;  ///< ids_ in the order they came
};

}  // namespace symmar
