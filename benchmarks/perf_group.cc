#include "perf_group.h"

#include <algorithm>

#ifdef SYMMAR_PERF_WITH_MPI
#include <mpi.h>
#endif

namespace perf {

std::vector<double> ThreadShared::exchange(int rank, double v) {
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait(lock, [&] { return readers_ == 0; });  // the previous round has been read by all
  values_[rank] = v;
  unsigned long gen = generation_;
  if (++arrived_ == n_) {
    snapshot_ = values_;
    arrived_ = 0;
    readers_ = n_;
    ++generation_;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return generation_ != gen; });
  }
  std::vector<double> out = snapshot_;
  if (--readers_ == 0) cv_.notify_all();
  return out;
}

namespace {

class ThreadGroup : public Group {
 public:
  ThreadGroup(ThreadShared* shared, int rank, int size) : shared_(shared), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<double> gather(double v) override { return shared_->exchange(rank_, v); }
  double maxOf(double v) override {
    auto all = gather(v);
    return *std::max_element(all.begin(), all.end());
  }
  long sumOf(long v) override {
    long total = 0;
    for (double x : gather(static_cast<double>(v))) total += static_cast<long>(x);
    return total;
  }
  void barrier() override { gather(0); }

 private:
  ThreadShared* shared_;
  int rank_, size_;
};

class SingleGroup : public Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  double maxOf(double v) override { return v; }
  long sumOf(long v) override { return v; }
  void barrier() override {}
  std::vector<double> gather(double v) override { return {v}; }
};

#ifdef SYMMAR_PERF_WITH_MPI
class MpiGroup : public Group {
 public:
  MpiGroup() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  double maxOf(double v) override {
    double out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
  }
  long sumOf(long v) override {
    long out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return out;
  }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  std::vector<double> gather(double v) override {
    std::vector<double> out(size_);
    MPI_Allgather(&v, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
    return out;
  }

 private:
  int rank_ = 0, size_ = 1;
};
#endif

}  // namespace

std::unique_ptr<Group> makeThreadGroup(ThreadShared* shared, int rank, int size) {
  return std::make_unique<ThreadGroup>(shared, rank, size);
}
std::unique_ptr<Group> makeSingleGroup() { return std::make_unique<SingleGroup>(); }
#ifdef SYMMAR_PERF_WITH_MPI
std::unique_ptr<Group> makeMpiGroup() { return std::make_unique<MpiGroup>(); }
#endif

}  // namespace perf
