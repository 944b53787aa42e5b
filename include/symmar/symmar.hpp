/**
 * @file symmar.hpp
 * @brief Thin RAII C++ wrapper over the C ABI. Failures become symmar::Error exceptions here,
 *        on the C++ side only; the library itself never throws across its boundary.
 */
#ifndef SYMMAR_SYMMAR_HPP_
#define SYMMAR_SYMMAR_HPP_

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "symmar/symmar.h"

namespace symmar {

/// A failed call: code() is the result, what() the library's last-error text.
class Error : public std::runtime_error {
 public:
  Error(symmarResult_t code, const std::string& detail)
      : std::runtime_error(std::string(symmarGetErrorString(code)) + ": " + detail), code_(code) {}
  symmarResult_t code() const { return code_; }

 private:
  symmarResult_t code_;
};

/// Throws symmar::Error when res is not symmarSuccess (detail from comm, or the thread if NULL).
inline void check(symmarResult_t res, symmarComm_t comm = nullptr) {
  if (res != symmarSuccess) throw Error(res, symmarGetLastError(comm));
}

/// Owns a symmarComm_t; destroyed with the object. Movable, not copyable.
class Comm {
 public:
  Comm() = default;
  /// Collective: one rank of nranks meeting through id.
  Comm(int nranks, const symmarUniqueId& id, int rank, const symmarConfig_t* config = nullptr) {
    check(symmarCommInitRank(&comm_, nranks, id, rank, config));
  }
  /// Takes ownership of an existing handle.
  explicit Comm(symmarComm_t raw) : comm_(raw) {}
  /// nranks comms in this process (one per device entry; devices may repeat; empty = config's device).
  static std::vector<Comm> initAll(int nranks, const std::vector<int>& devices = {},
                                   const symmarConfig_t* config = nullptr) {
    std::vector<symmarComm_t> raw(static_cast<size_t>(nranks), nullptr);
    check(symmarCommInitAll(raw.data(), nranks, devices.empty() ? nullptr : devices.data(), config));
    std::vector<Comm> comms;
    for (symmarComm_t c : raw) comms.emplace_back(c);
    return comms;
  }
  ~Comm() {
    if (comm_) symmarCommDestroy(comm_);
  }
  Comm(Comm&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
  Comm& operator=(Comm&& other) noexcept {
    if (this != &other) {
      if (comm_) symmarCommDestroy(comm_);
      comm_ = std::exchange(other.comm_, nullptr);
    }
    return *this;
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  symmarComm_t get() const { return comm_; }
  int rank() const {
    int r = 0;
    check(symmarCommRank(comm_, &r), comm_);
    return r;
  }
  int size() const {
    int n = 0;
    check(symmarCommCount(comm_, &n), comm_);
    return n;
  }
  symmarTopology_t topology() const {
    symmarTopology_t t{};
    check(symmarCommTopology(comm_, &t), comm_);
    return t;
  }
  symmarAlgo_t plan(size_t count, symmarDataType_t dtype, symmarRedOp_t op = symmarSum) const {
    symmarAlgo_t a = symmarAlgoAuto;
    check(symmarCommPlan(comm_, count, dtype, op, &a), comm_);
    return a;
  }
  /// Allreduce; algo = symmarAlgoAuto lets the planner choose.
  void allReduce(const void* send, void* recv, size_t count, symmarDataType_t dtype, symmarRedOp_t op = symmarSum,
                 symmarAlgo_t algo = symmarAlgoAuto, void* stream = nullptr) {
    check(symmarAllReduceAlgo(send, recv, count, dtype, op, algo, comm_, stream), comm_);
  }
  void* memAlloc(size_t bytes) {
    void* p = nullptr;
    check(symmarMemAlloc(comm_, bytes, &p), comm_);
    return p;
  }
  void memFree(void* p) { check(symmarMemFree(comm_, p), comm_); }

 private:
  symmarComm_t comm_ = nullptr;
};

}  // namespace symmar

#endif  // SYMMAR_SYMMAR_HPP_
