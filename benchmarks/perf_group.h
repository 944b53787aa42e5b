// The ranks of one benchmark run and the few collectives the harness itself needs (on the side,
// never inside a timed region): MPI processes, threads of one process, or a single rank.
#pragma once
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "symmar/symmar.h"

namespace perf {

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual double maxOf(double v) = 0;
  virtual long sumOf(long v) = 0;
  virtual void barrier() = 0;
  /// Gathers one value per rank (rank order) into every rank's out.
  virtual std::vector<double> gather(double v) = 0;
};

/// State shared by the threads of a local world.
class ThreadShared {
 public:
  explicit ThreadShared(int n) : n_(n), values_(n) {}
  std::vector<double> exchange(int rank, double v);

 private:
  int n_;
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<double> values_;
  std::vector<double> snapshot_;
  int arrived_ = 0;
  int readers_ = 0;
  unsigned long generation_ = 0;
};

std::unique_ptr<Group> makeThreadGroup(ThreadShared* shared, int rank, int size);
std::unique_ptr<Group> makeSingleGroup();
#ifdef SYMMAR_PERF_WITH_MPI
/// MPI_COMM_WORLD (MPI must be initialised).
std::unique_ptr<Group> makeMpiGroup();
#endif

}  // namespace perf
