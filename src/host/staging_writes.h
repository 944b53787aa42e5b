// How a rank writes what its peers will read from staging: plain stores, or non-temporal
// (streaming) stores that go to memory without first taking each line into the writer's cache.
// Plain stores are the faster kind while the peer's core shares a cache with this one: the peer
// then reads the lines from that cache. But a plain store to a line the peer read before must first
// take it from the peer's cache, and on some machines that costs 10x more from time to time (a VM
// whose two vCPUs the host places apart: a 2-rank two-shot of 256 KiB took 105-140 us instead of
// 13-14, steady for seconds, docs/performance/host-allreduce.md). Streaming stores cost the same in
// every state (about 26 us there). So a rank times its plain staging writes and streams for a while
// after two in a row that ran at less than kSlowBytesPerNs, then tries plain stores again, and
// streams again at once, for twice as long, if that try is slow too. One slow write alone is not
// the state but a moment (the rank descheduled mid-copy: isolated writes at 0.2-3 GB/s among fast
// ones were seen in runs that were fast throughout), and 64 streamed chunks after it made a whole
// round of 1 MiB calls run at the streaming cost. The choice is each rank's own: both kinds store
// the same bytes, fenced before the barrier that publishes them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace symmar {

class StagingWrites {
 public:
  /// What SYMMAR_HOST_STREAM asks: plain stores only, streaming stores only, or the timed choice.
  enum class Mode { kPlain = 0, kStream = 1, kAuto = 2 };
  /// Writes smaller than this are not timed (the clock's cost and noise would dominate) and stay plain.
  static constexpr size_t kTimedFromBytes = 4 << 10;
  /// A plain write slower than this many bytes a nanosecond (4 GB/s) switches to streaming. Fast
  /// handoffs ran at 10-50 GB/s and copies from memory at 5-11 there; the slow state at 1.7-2.3.
  static constexpr double kSlowBytesPerNs = 4.0;
  /// Slow timed plain writes in a row that start the streaming.
  static constexpr uint32_t kSlowWritesToStream = 2;
  /// Streamed writes before plain stores are tried again, at first.
  static constexpr uint32_t kStreamedWrites = 64;
  /// The most streamed writes between two tries: each try that finds plain writes still slow
  /// doubles the run up to this. A try in the slow state costs about 5x a streamed write (2 ranks,
  /// 1 MiB: 473 against 87 us), and in pairs of processes that stayed in that state for their whole
  /// life a try every 65 writes cost about 6 us a call on average at 1 MiB; one in 1025 costs 0.4.
  /// A return to the fast state is then found within 1024 writes.
  static constexpr uint32_t kMaxStreamedWrites = 1024;

  explicit StagingWrites(Mode mode = Mode::kAuto) : mode_(mode) {}

  /// Whether the next staging write of `bytes` streams.
  bool streams(size_t bytes) const {
    if (mode_ != Mode::kAuto) return mode_ == Mode::kStream;
    return bytes >= kTimedFromBytes && streamed_left_ > 0;
  }
  /// Whether a plain write of `bytes` is to be timed (and its time given to afterPlain).
  bool times(size_t bytes) const { return mode_ == Mode::kAuto && bytes >= kTimedFromBytes; }
  /// A timed plain write of `bytes` took `ns` nanoseconds.
  void afterPlain(size_t bytes, uint64_t ns) {
    const bool slow = static_cast<double>(bytes) < kSlowBytesPerNs * static_cast<double>(ns);
    slow_in_row_ = slow ? slow_in_row_ + 1 : 0;
    if (slow && (trying_plain_ || slow_in_row_ >= kSlowWritesToStream)) {
      if (trying_plain_) run_ = std::min(2 * run_, kMaxStreamedWrites);
      streamed_left_ = run_;
      slow_in_row_ = 0;
    } else if (!slow) {
      run_ = kStreamedWrites;
    }
    trying_plain_ = false;
  }
  /// A streamed write was made.
  void afterStreamed() {
    if (streamed_left_ > 0 && --streamed_left_ == 0) trying_plain_ = true;
  }

 private:
  Mode mode_;
  uint32_t streamed_left_ = 0;
  uint32_t run_ = kStreamedWrites;  // streamed writes the next streaming run makes
  uint32_t slow_in_row_ = 0;        // timed plain writes in a row that ran slow
  bool trying_plain_ = false;       // the next timed plain write is the try after a streaming run
};

}  // namespace symmar
