// Reduce-scatter and all-gather across pretended hosts (SYMMAR_HOST_ID), the inter-host stage over
// shared-memory mailboxes: every dtype, op and count (counts not divisible by anything, count 0,
// counts chunked by a small staging buffer), in place and not, staged and symmetric inputs, on hosts
// that hold consecutive ranks and on hosts that take ranks in turn (where a host's local index is
// not its rank's block), each result checked against the float64 reference (mp::runGatherCase).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "fault/shm_inter_host.h"
#include "mp/mp_util.h"

namespace {

struct Layout {
  int hosts;
  int per_host;
  bool interleaved;  ///< host of rank r: r % hosts (else r / per_host)
  bool full;         ///< the whole case matrix (else a subset that still covers every dtype)
};

std::string layoutName(const Layout& l) {
  return std::to_string(l.hosts) + "hostsOf" + std::to_string(l.per_host) + (l.interleaved ? "Interleaved" : "");
}

std::vector<mp::GatherCase> cases(bool full) {
  std::vector<mp::GatherCase> out;
  // 20000 elements per block take several chunks through the 64 KiB staging buffer below.
  const size_t counts[] = {0, 1, 7, 1000, 20000};
  const symmarDataType_t dtypes[] = {symmarFloat32, symmarFloat16, symmarBfloat16, symmarInt32, symmarFloat64};
  for (bool scatter : {true, false}) {
    for (symmarDataType_t dtype : dtypes) {
      for (symmarRedOp_t op : {symmarSum, symmarMax, symmarMin}) {
        if (!scatter && op != symmarSum) continue;
        for (size_t count : counts) {
          for (bool in_place : {false, true}) {
            if (!full && (op != symmarSum || count == 7) && dtype != symmarBfloat16) continue;
            out.push_back({scatter, dtype, op, count, in_place, symmarAlgoOneShot});
            if (op == symmarSum && dtype == symmarFloat32) {  // auto, and inputs from symmarMemAlloc
              out.push_back({scatter, dtype, op, count, in_place, symmarAlgoAuto});
              out.push_back({scatter, dtype, op, count, in_place, symmarAlgoOneShot, 1});
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace

class ScatterGatherAcrossHosts : public ::testing::TestWithParam<Layout> {};

TEST_P(ScatterGatherAcrossHosts, MatchTheReference) {
  const Layout l = GetParam();
  const int world = l.hosts * l.per_host;
  const std::vector<mp::GatherCase> all = cases(l.full);
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  fault::ShmInterHost engine(world, l.interleaved);
  const std::vector<int> status = mp::runForked(world, [&](int rank) {
    const int host = l.interleaved ? rank % l.hosts : rank / l.per_host;
    setenv("SYMMAR_HOST_ID", std::to_string(host).c_str(), 1);
    symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
    cfg.device = SYMMAR_DEVICE_CPU;
    cfg.timeout_ms = 20000;
    cfg.staging_bytes = 64 << 10;  // chunks: at most 32 KiB a half, records well inside a mailbox
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, world, id, rank, &cfg) != symmarSuccess) return 100;
    int hosts = 0, local_size = 0;
    if (symmarCommHostLayout(comm, &hosts, nullptr, nullptr, &local_size) != symmarSuccess || hosts != l.hosts ||
        local_size != l.per_host) {
      return 101;
    }
    if (engine.install(comm, rank) != symmarSuccess) return 102;
    // Lamport's forms serve one host only: refused before the call, on every rank alike.
    float x[8] = {}, y[8] = {};
    if (symmarAllGatherAlgo(x, y, 1, symmarFloat32, symmarAlgoLamport, comm, nullptr) != symmarUnsupported ||
        symmarReduceScatterAlgo(x, y, 1, symmarFloat32, symmarSum, symmarAlgoLamport, comm, nullptr) !=
            symmarUnsupported) {
      return 104;
    }
    int errors = 0;
    for (size_t i = 0; i < all.size(); ++i) errors += mp::runGatherCase(comm, rank, world, all[i], static_cast<int>(i));
    return (symmarCommDestroy(comm) == symmarSuccess ? 0 : 103) + (errors > 99 ? 99 : errors);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ScatterGatherAcrossHosts,
                         ::testing::Values(Layout{2, 2, false, true}, Layout{2, 2, true, true},
                                           Layout{3, 1, false, false}, Layout{2, 3, true, false},
                                           Layout{4, 2, true, false}),
                         [](const ::testing::TestParamInfo<Layout>& info) { return layoutName(info.param); });

// The host's barrier epochs and call numbers wrap during a run of reduce-scatters and all-gathers
// across two pretended hosts (the inter-host sequence is 64-bit): every result stays exact.
TEST(ScatterGatherAcrossHosts, CallsAcrossTheEpochWrap) {
  const int hosts = 2, per_host = 2, world = hosts * per_host;
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  fault::ShmInterHost engine(world, false);
  const std::vector<int> status = mp::runForked(world, [&](int rank) {
    setenv("SYMMAR_HOST_ID", std::to_string(rank / per_host).c_str(), 1);
    setenv("SYMMAR_EPOCH_START", "4294967100", 1);  // wraps after about 200 barriers
    symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
    cfg.device = SYMMAR_DEVICE_CPU;
    cfg.timeout_ms = 20000;
    cfg.staging_bytes = 16 << 10;  // the larger counts take several chunks, so several barriers
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, world, id, rank, &cfg) != symmarSuccess) return 100;
    if (engine.install(comm, rank) != symmarSuccess) return 102;
    int errors = 0;
    for (int call = 0; call < 500 && errors == 0; ++call) {
      const size_t count = 1 + static_cast<size_t>(call * 7919) % 3000;
      const mp::GatherCase c{call % 2 == 0, symmarInt32, symmarSum, count, call % 3 == 0, symmarAlgoOneShot};
      errors += mp::runGatherCase(comm, rank, world, c, call);
    }
    return (symmarCommDestroy(comm) == symmarSuccess ? 0 : 103) + (errors > 99 ? 99 : errors);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
}

// Calls planned before the inter-host engine was set had nothing to serve them (no fallback here):
// symmarUnsupported. Setting the engine changes what can serve, so the same calls after it are
// planned again and succeed, exact, instead of meeting what was remembered for the comm without it.
TEST(ScatterGatherAcrossHosts, CallsPlannedBeforeTheEngineArePlannedAgainAfterIt) {
  const int hosts = 2, per_host = 1, world = hosts * per_host;
  symmarUniqueId id;
  ASSERT_EQ(symmarGetUniqueId(&id), symmarSuccess);
  fault::ShmInterHost engine(world, false);
  const std::vector<int> status = mp::runForked(world, [&](int rank) {
    setenv("SYMMAR_HOST_ID", std::to_string(rank / per_host).c_str(), 1);
    symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
    cfg.device = SYMMAR_DEVICE_CPU;
    cfg.timeout_ms = 20000;
    symmarComm_t comm = nullptr;
    if (symmarCommInitRank(&comm, world, id, rank, &cfg) != symmarSuccess) return 100;
    float x[4] = {1, 2, 3, 4}, y[8] = {};
    for (int i = 0; i < 4; ++i) x[i] *= static_cast<float>(rank + 1);
    if (symmarAllReduce(x, y, 4, symmarFloat32, symmarSum, comm, nullptr) != symmarUnsupported ||
        symmarAllGather(x, y, 4, symmarFloat32, comm, nullptr) != symmarUnsupported) {
      return 101;
    }
    if (engine.install(comm, rank) != symmarSuccess) return 102;
    if (symmarAllReduce(x, y, 4, symmarFloat32, symmarSum, comm, nullptr) != symmarSuccess) return 103;
    for (int i = 0; i < 4; ++i) {
      if (y[i] != static_cast<float>(3 * (i + 1))) return 104;  // ranks 1 and 2 times i + 1
    }
    if (symmarAllGather(x, y, 4, symmarFloat32, comm, nullptr) != symmarSuccess) return 105;
    for (int r = 0; r < world; ++r) {
      for (int i = 0; i < 4; ++i) {
        if (y[4 * r + i] != static_cast<float>((r + 1) * (i + 1))) return 106;
      }
    }
    return symmarCommDestroy(comm) == symmarSuccess ? 0 : 107;
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
}
