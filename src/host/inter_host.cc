#include "host/inter_host.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/error.h"
#include "host/host_reduce.h"

namespace symmar {

InterHost::InterHost(const InterHostCarrier& carrier, int hosts, int host, int rank, int timeout_ms)
    : carrier_(carrier),
      hosts_(hosts),
      host_(host),
      rank_(rank),
      timeout_ms_(timeout_ms),
      sends_(static_cast<size_t>(hosts)),
      srcs_(static_cast<size_t>(hosts)),
      expected_(static_cast<size_t>(hosts)) {}

InterHost::~InterHost() {
  if (carrier_.release) carrier_.release(carrier_.user);
  if (abandoned_) {
    // An engine that gave up on an exchange may still move its records (a receive matched before
    // it could be cancelled, a send that completes later): the buffers stay until the process ends.
    static std::mutex mutex;
    static auto* kept = new std::vector<std::vector<unsigned char>>;
    std::lock_guard<std::mutex> lock(mutex);
    for (std::vector<unsigned char>* b : {&send_, &recv_, &reduced_, &receipt_, &receipts_}) {
      kept->push_back(std::move(*b));
    }
  }
}

size_t InterHost::recordBytes(size_t span, size_t elem) {
  return sizeof(Header) + ((span * elem + 15) & ~size_t{15});
}

const std::vector<InterHost::Piece>& InterHost::pieces(size_t count, symmarDataType_t dtype) {
  const size_t elem = symmarTypeSize(dtype);
  const size_t n = static_cast<size_t>(hosts_);
  span_ = (count + n - 1) / n;
  const size_t record = recordBytes(span_, elem);
  if (send_.size() < record * n) send_.resize(record * n);
  pieces_.clear();
  for (size_t i = 0; i < n; ++i) {
    const size_t begin = std::min(count, i * span_);
    pieces_.push_back({begin, std::min(count - begin, span_), send_.data() + i * record + sizeof(Header)});
  }
  return pieces_;
}

void InterHost::writeHeader(unsigned char* record, uint64_t sig, size_t bytes) const {
  const Header h{sig, seq_, bytes, static_cast<uint64_t>(rank_)};
  std::memcpy(record, &h, sizeof(Header));
}

symmarResult_t InterHost::exchange(const std::vector<const void*>& send, size_t record, uint64_t sig,
                                   const std::vector<size_t>& expected, std::vector<unsigned char>* recv) {
  if (recv->size() < record * static_cast<size_t>(hosts_)) recv->resize(record * static_cast<size_t>(hosts_));
  clearThreadLastError();  // so only the engine's own report (if any) is quoted below
  const symmarResult_t res = carrier_.fn(send.data(), recv->data(), record, timeout_ms_, carrier_.user);
  if (res != symmarSuccess) {
    abandoned_ = true;
    // A timeout and a mismatch keep their codes; any other engine failure is a lost peer to the comm.
    const symmarResult_t code = res == symmarTimeout || res == symmarInvalidUsage ? res : symmarPeerFailure;
    const std::string said = threadLastError();
    return fail(code, "inter-host stage over %s failed (%s)%s%s", carrier_.name.c_str(), symmarGetErrorString(res),
                said.empty() ? "" : ": ", said.c_str());
  }
  for (int h = 0; h < hosts_; ++h) {
    Header theirs;
    std::memcpy(&theirs, recv->data() + static_cast<size_t>(h) * record, sizeof(Header));
    if (theirs.sig != sig || theirs.seq != seq_ || theirs.bytes != expected[static_cast<size_t>(h)]) {
      // The rank is the sender's word, only quoted (a record that makes no sense fails the call anyway).
      return fail(symmarInvalidUsage,
                  "collective mismatch across hosts: rank %lld (host %d) made another call (count, dtype, op or "
                  "algorithm) or another number of calls than rank %d (host %d); every rank must make the same calls "
                  "in the same order",
                  static_cast<long long>(theirs.rank), h, rank_, host_);
    }
  }
  return symmarSuccess;
}

symmarResult_t InterHost::combine(void* dst, void* dst2, size_t count, symmarDataType_t dtype, symmarRedOp_t op,
                                  uint64_t sig) {
  const size_t elem = symmarTypeSize(dtype);
  const size_t record = recordBytes(span_, elem);
  auto data = [&](size_t h) { return recv_.data() + h * record + sizeof(Header); };
  if (pieces_.back().begin + pieces_.back().count != count) {
    return fail(symmarInternalError, "inter-host stage: combine of %zu elements after pieces() of another count", count);
  }
  ++seq_;
  // Reduce-scatter: piece h of every partial goes to host h, which reduces it in host order.
  const Piece& mine = pieces_[static_cast<size_t>(host_)];
  for (size_t h = 0; h < pieces_.size(); ++h) {
    unsigned char* rec = send_.data() + h * record;
    writeHeader(rec, sig, pieces_[h].count * elem);
    sends_[h] = rec;
  }
  std::fill(expected_.begin(), expected_.end(), mine.count * elem);
  SYMMAR_CHECK(exchange(sends_, record, sig, expected_, &recv_));
  if (reduced_.size() < record) reduced_.resize(record);
  for (size_t h = 0; h < srcs_.size(); ++h) srcs_[h] = data(h);
  if (mine.count) reduceRanks(reduced_.data() + sizeof(Header), nullptr, srcs_.data(), hosts_, mine.count, dtype, op);
  // All-gather of the reduced pieces.
  ++seq_;
  writeHeader(reduced_.data(), sig, mine.count * elem);
  std::fill(sends_.begin(), sends_.end(), reduced_.data());
  for (size_t h = 0; h < pieces_.size(); ++h) expected_[h] = pieces_[h].count * elem;
  SYMMAR_CHECK(exchange(sends_, record, sig, expected_, &recv_));
  for (size_t h = 0; h < pieces_.size(); ++h) {
    const size_t bytes = pieces_[h].count * elem;
    if (!bytes) continue;
    copyBytes(static_cast<char*>(dst) + pieces_[h].begin * elem, data(h), bytes);
    if (dst2) copyBytes(static_cast<char*>(dst2) + pieces_[h].begin * elem, data(h), bytes);
  }
  return symmarSuccess;
}

const std::vector<InterHost::Piece>& InterHost::blocks(size_t count, symmarDataType_t dtype) {
  const size_t record = recordBytes(count, symmarTypeSize(dtype));
  const size_t n = static_cast<size_t>(hosts_);
  span_ = count;
  if (send_.size() < record * n) send_.resize(record * n);
  pieces_.clear();
  for (size_t i = 0; i < n; ++i) pieces_.push_back({0, count, send_.data() + i * record + sizeof(Header)});
  return pieces_;
}

symmarResult_t InterHost::receipts(uint64_t sig) {
  ++seq_;
  // A member, not the stack: an engine that gives up may still send from it after the return.
  receipt_.resize(sizeof(Header));
  writeHeader(receipt_.data(), sig, 0);
  std::fill(sends_.begin(), sends_.end(), receipt_.data());
  std::fill(expected_.begin(), expected_.end(), 0);
  return exchange(sends_, sizeof(Header), sig, expected_, &receipts_);
}

symmarResult_t InterHost::scatter(void* dst, size_t count, symmarDataType_t dtype, symmarRedOp_t op, uint64_t sig) {
  const size_t elem = symmarTypeSize(dtype);
  const size_t record = recordBytes(count, elem);
  if (span_ != count || pieces_.size() != static_cast<size_t>(hosts_) || pieces_[0].begin != 0) {
    return fail(symmarInternalError, "inter-host stage: scatter of %zu elements after blocks() of another count",
                count);
  }
  ++seq_;
  for (size_t h = 0; h < pieces_.size(); ++h) {
    unsigned char* rec = send_.data() + h * record;
    writeHeader(rec, sig, count * elem);
    sends_[h] = rec;
  }
  std::fill(expected_.begin(), expected_.end(), count * elem);
  SYMMAR_CHECK(exchange(sends_, record, sig, expected_, &recv_));
  for (size_t h = 0; h < srcs_.size(); ++h) srcs_[h] = recv_.data() + h * record + sizeof(Header);
  if (count) reduceRanks(dst, nullptr, srcs_.data(), hosts_, count, dtype, op);
  return receipts(sig);
}

symmarResult_t InterHost::gather(const void* src, size_t count, symmarDataType_t dtype, uint64_t sig) {
  const size_t elem = symmarTypeSize(dtype);
  const size_t record = recordBytes(count, elem);
  if (send_.size() < record) send_.resize(record);
  ++seq_;
  writeHeader(send_.data(), sig, count * elem);
  if (count) copyBytes(send_.data() + sizeof(Header), src, count * elem);
  std::fill(sends_.begin(), sends_.end(), send_.data());
  std::fill(expected_.begin(), expected_.end(), count * elem);
  gathered_record_ = record;
  SYMMAR_CHECK(exchange(sends_, record, sig, expected_, &recv_));
  return receipts(sig);
}

const void* InterHost::gathered(int h) const {
  return recv_.data() + static_cast<size_t>(h) * gathered_record_ + sizeof(Header);
}

}  // namespace symmar
