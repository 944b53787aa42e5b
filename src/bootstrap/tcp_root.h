// Rank 0's side of the unique-id bootstrap: accepts exactly the comm's ranks on the id's listener
// and keeps the listener for the life of the comm, so the id stays single-use: a second rank 0
// cannot listen on it, and a rank that arrives after the comm formed is told so at once.
#pragma once
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "bootstrap/wire.h"
#include "symmar/symmar.h"

namespace symmar {

class HelloReader;

/// Whether a rank 0 in this network namespace holds the claim of the id with this nonce, i.e. still
/// serves it (forms its comm, or refuses latecomers while the comm lives). Takes nothing: a rank 0
/// that claims the id at the same time is not disturbed.
bool idClaimed(uint64_t nonce);

class RootListener {
 public:
  RootListener();
  ~RootListener();
  RootListener(const RootListener&) = delete;
  RootListener& operator=(const RootListener&) = delete;

  /// Claims the id on this host for the life of this object: exactly one rank 0 per id, even
  /// among processes that inherited the id's listener through fork. symmarInvalidUsage when
  /// another rank 0 holds it.
  symmarResult_t claim(uint64_t nonce);
  /// Takes ownership of listener and accepts nranks-1 distinct ranks that prove nonce, within
  /// timeout_ms. Connections that say nothing, say something else or come from another id do not
  /// delay the others. A duplicate rank, a wrong size or a bad rank fails the comm on every rank
  /// that joined (each is told why). On success peers[r] is rank r's connection and the listener
  /// goes on refusing latecomers until destruction.
  symmarResult_t acceptAll(int listener, uint64_t nonce, int nranks, int timeout_ms, std::vector<int>* peers);

 private:
  void serve(uint64_t nonce, int nranks);

  int listener_ = -1;
  std::unique_ptr<HelloReader> reader_;  // connections not yet judged, kept across formation
  int claim_ = -1;          // abstract Unix socket named after the id's nonce: bound by one process at a time
  int wake_[2] = {-1, -1};  // a pipe: destruction writes to it to stop the service thread
  std::thread thread_;
};

}  // namespace symmar
