// Comms spanning hosts, piece by piece: how ranks are grouped by host, the inter-host stage over an
// in-process exchange against the host-order sum, and the table rows keyed by hosts.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/host_layout.h"
#include "core/error.h"
#include "host/inter_host.h"
#include "plan/table.h"

using namespace symmar;

namespace {

TEST(HostLayout, HostsAreNumberedByTheirLowestRankAndLocalRanksByRankOrder) {
  const std::vector<uint64_t> hosts = {7, 9, 7, 9, 5, 5};  // ranks 0..5 on hosts A B A B C C
  const int want_host[] = {0, 1, 0, 1, 2, 2}, want_local[] = {0, 0, 1, 1, 0, 1};
  for (int r = 0; r < 6; ++r) {
    HostPlacement p = placeRanks(hosts, r);
    EXPECT_EQ(p.hosts, 3);
    EXPECT_EQ(p.host, want_host[r]) << r;
    EXPECT_EQ(p.local_rank, want_local[r]) << r;
    EXPECT_EQ(p.local_size, 2);
    EXPECT_TRUE(p.uniform);
  }
  EXPECT_EQ(ranksOnHost(hosts, 3), (std::vector<int>{1, 3}));
  EXPECT_EQ(ranksOnHost(hosts, 4), (std::vector<int>{4, 5}));
}

TEST(HostLayout, UnequalHostsAndOneHost) {
  HostPlacement p = placeRanks({1, 1, 2}, 2);
  EXPECT_EQ(p.hosts, 2);
  EXPECT_EQ(p.local_size, 1);
  EXPECT_FALSE(p.uniform);
  EXPECT_FALSE(placeRanks({1, 1, 2}, 0).uniform) << "every rank sees the same verdict";
  HostPlacement one = placeRanks({4, 4, 4}, 1);
  EXPECT_EQ(one.hosts, 1);
  EXPECT_EQ(one.local_rank, 1);
  EXPECT_EQ(one.local_size, 3);
  EXPECT_TRUE(one.uniform);
}

/// An in-process inter-host engine for H threads: each deposits its records, all meet, each takes
/// the records addressed to it. fail_host makes that host report a timeout instead (after its
/// records were delivered) and leave; a host left waiting for it gives up at the timeout.
struct Switchboard {
  explicit Switchboard(int hosts) : hosts(hosts), sent(static_cast<size_t>(hosts)) {}
  int hosts;
  int fail_host = -1;
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0, left = 0;
  uint64_t round = 0;
  std::vector<std::vector<const void*>> sent;

  bool meet(std::unique_lock<std::mutex>& lock, int& counter, int timeout_ms) {
    const uint64_t r = round;
    if (++counter == hosts) {
      counter = 0;
      ++round;
      cv.notify_all();
      return true;
    }
    return cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return round != r; });
  }
};

struct Port {
  Switchboard* board;
  int host;
};

symmarResult_t exchangeInProcess(const void* const* send, void* recv, size_t bytes, int timeout_ms, void* user) {
  Port* port = static_cast<Port*>(user);
  Switchboard& b = *port->board;
  std::unique_lock<std::mutex> lock(b.m);
  b.sent[static_cast<size_t>(port->host)].assign(send, send + b.hosts);
  if (!b.meet(lock, b.arrived, timeout_ms)) return symmarTimeout;
  for (int h = 0; h < b.hosts; ++h) {
    std::memcpy(static_cast<char*>(recv) + static_cast<size_t>(h) * bytes, b.sent[static_cast<size_t>(h)][port->host],
                bytes);
  }
  if (!b.meet(lock, b.left, timeout_ms)) return symmarTimeout;  // nobody reuses its sends before all copied
  return port->host == b.fail_host ? symmarTimeout : symmarSuccess;
}

/// The comm rank of host h's member in these tests: local index 1 of hosts of 2 ranks, so that no
/// host index or local index passes for it.
int commRankOf(int h) { return 2 * h + 1; }

/// Runs combine() on `hosts` threads; partial h holds values (h + 1) * (i % 7) - 3.25 * h. errors,
/// when given, receives each host's error text.
std::vector<std::vector<float>> combineOnThreads(int hosts, size_t count, std::vector<symmarResult_t>* results,
                                                 int fail_host = -1, int odd_sig_host = -1,
                                                 std::vector<std::string>* errors = nullptr) {
  Switchboard board(hosts);
  board.fail_host = fail_host;
  std::vector<std::vector<float>> out(static_cast<size_t>(hosts), std::vector<float>(count, -1.0f));
  results->assign(static_cast<size_t>(hosts), symmarSuccess);
  if (errors) errors->assign(static_cast<size_t>(hosts), "");
  std::vector<std::thread> threads;
  for (int h = 0; h < hosts; ++h) {
    threads.emplace_back([&, h] {
      Port port{&board, h};
      InterHostCarrier carrier;
      carrier.fn = exchangeInProcess;
      carrier.user = &port;
      carrier.name = "test";
      InterHost ih(carrier, hosts, h, commRankOf(h), 1000);
      for (const InterHost::Piece& p : ih.pieces(count, symmarFloat32)) {
        float* dst = static_cast<float*>(p.dst);
        for (size_t i = 0; i < p.count; ++i) dst[i] = (h + 1) * float((p.begin + i) % 7) - 3.25f * h;
      }
      (*results)[static_cast<size_t>(h)] = ih.combine(out[static_cast<size_t>(h)].data(), nullptr, count, symmarFloat32,
                                                      symmarSum, h == odd_sig_host ? 2 : 1);
      if (errors) (*errors)[static_cast<size_t>(h)] = threadLastError();
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(InterHost, MatchesTheHostOrderSumOnEveryHostFromZeroElementsToFewerThanHostsToMany) {
  for (size_t count : {size_t(0), size_t(1), size_t(1000), size_t(70001)}) {
    for (int hosts : {2, 3, 5}) {
      SCOPED_TRACE("count " + std::to_string(count) + " hosts " + std::to_string(hosts));
      std::vector<symmarResult_t> res;
      auto out = combineOnThreads(hosts, count, &res);
      for (int h = 0; h < hosts; ++h) ASSERT_EQ(res[static_cast<size_t>(h)], symmarSuccess);
      for (size_t i = 0; i < count; ++i) {
        float want = 0;  // host order, in float: the order the stage promises
        for (int h = 0; h < hosts; ++h) want += (h + 1) * float(i % 7) - 3.25f * h;
        ASSERT_EQ(out[0][i], want) << i;
      }
      for (int h = 1; h < hosts; ++h) EXPECT_EQ(out[static_cast<size_t>(h)], out[0]) << "host " << h;
    }
  }
}

TEST(InterHost, AnotherCallOnOneHostFailsOnEveryHost) {
  for (size_t count : {size_t(10), size_t(70001)}) {
    std::vector<symmarResult_t> res;
    std::vector<std::string> errors;
    combineOnThreads(3, count, &res, -1, /*odd_sig_host=*/1, &errors);
    for (symmarResult_t r : res) EXPECT_EQ(r, symmarInvalidUsage) << count;
    // Ranks are named as the comm numbers them, with their hosts: host 1's member is rank 3.
    EXPECT_NE(errors[0].find("rank 3 (host 1) made another call"), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find("than rank 1 (host 0)"), std::string::npos) << errors[0];
  }
}

TEST(InterHost, AnEngineTimeoutIsReportedAsATimeoutAndItsPeerDoesNotCompleteTheCallAlone) {
  for (size_t count : {size_t(0), size_t(10), size_t(70001)}) {
    std::vector<symmarResult_t> res;
    combineOnThreads(2, count, &res, /*fail_host=*/0);
    EXPECT_EQ(res[0], symmarTimeout) << count;
    // Host 1 got host 0's first-round record, but host 0 gave up: no second-round record follows.
    EXPECT_EQ(res[1], symmarTimeout) << count;
  }
}

TEST(TablesByHosts, ResolveFallsBackToTheTwoHostRowsThenToTheEmptyRow) {
  Tables t;
  TableRow one;
  one.arch = kArchHost;
  one.link = symmarLinkHostMemory;
  one.world = 2;
  one.source = "one host";
  one.entries[one.num_entries++] = {symmarAlgoOneShot, 1024};
  t.put(one);
  EXPECT_EQ(t.resolve(0, 0, symmarLinkHostMemory, 2, 2)->num_entries, 0) << "no hosts rows: flat";
  TableRow two = one;
  two.hosts = 2;
  two.source = "two hosts";
  t.put(two);
  EXPECT_EQ(t.resolve(0, 0, symmarLinkHostMemory, 2)->source, "one host") << "a single host keeps its row";
  EXPECT_EQ(t.resolve(0, 0, symmarLinkHostMemory, 2, 2)->source, "two hosts");
  EXPECT_EQ(t.resolve(0, 0, symmarLinkHostMemory, 1, 5)->source, "two hosts") << "5 hosts, 1 rank each";
  TableRow four = two;
  four.hosts = 4;
  four.source = "four hosts";
  t.put(four);
  EXPECT_EQ(t.resolve(0, 0, symmarLinkHostMemory, 2, 4)->source, "four hosts");
  EXPECT_EQ(t.resolve(0, 0, symmarLinkHostMemory, 2, 64)->source, "two hosts") << "more than 8: the 8-host key";
  EXPECT_EQ(t.rows().size(), 3u) << "rows of different host counts are different keys";
  const TableRow* builtin = Tables::builtin().resolve(0, 0, symmarLinkHostMemory, 2, 2);
  EXPECT_EQ(builtin->hosts, 2);
  EXPECT_GT(builtin->num_entries, 0);
}

TEST(TablesByHosts, TableFilesTakeAnOptionalHostsKey) {
  Tables t;
  ASSERT_EQ(t.loadJson(R"({"rows": [{"arch": "host", "link": "host", "world": [2, 3], "hosts": 3,
                          "algos": [{"algo": "twoshot", "max_bytes": "unbounded"}]}]})",
                       "test"),
            symmarSuccess);
  ASSERT_NE(t.find(kArchHost, symmarLinkHostMemory, 3, 3), nullptr);
  EXPECT_EQ(t.find(kArchHost, symmarLinkHostMemory, 3), nullptr);
  for (const char* bad : {"0", "9", "-1", "2.5", "\"2\"", "18446744073709551615", "4294967298"}) {
    std::string doc = std::string(R"({"rows": [{"arch": "host", "link": "host", "world": 2, "hosts": )") + bad +
                      R"(, "algos": []}]})";
    EXPECT_EQ(t.loadJson(doc, "test"), symmarInvalidArgument) << bad;
  }
}

}  // namespace
