// Bootstrap over an engine-supplied allgather (e.g. its torch.distributed process group).
#include <cstring>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/error.h"

namespace symmar {
namespace {

class ExternalBootstrap : public Bootstrap {
 public:
  ExternalBootstrap(int rank, int nranks, symmarAllGatherFn fn, void* user)
      : Bootstrap(rank, nranks), fn_(fn), user_(user) {}

  symmarResult_t allGather(void* data, size_t bytes_per_rank) override {
    char* base = static_cast<char*>(data);
    send_.assign(base + rank() * bytes_per_rank, base + (rank() + 1) * bytes_per_rank);
    int rc = fn_(send_.data(), data, bytes_per_rank, user_);
    if (rc != 0) return fail(symmarSystemError, "bootstrap: the engine's allgather callback returned %d", rc);
    if (memcmp(base + rank() * bytes_per_rank, send_.data(), bytes_per_rank) != 0) {
      return fail(symmarInvalidArgument, "bootstrap: the engine's allgather did not place this rank's record at its rank");
    }
    return symmarSuccess;
  }

 private:
  symmarAllGatherFn fn_;
  void* user_;
  std::vector<char> send_;
};

}  // namespace

std::unique_ptr<Bootstrap> createExternalBootstrap(int rank, int nranks, symmarAllGatherFn fn, void* user) {
  return std::make_unique<ExternalBootstrap>(rank, nranks, fn, user);
}

}  // namespace symmar
