// Comms spanning hosts: where a rank sits, the engine that carries the inter-host stage, the row
// and the description of the hierarchical path.
#include <string>

#include "api/comm.h"
#include "api/guard.h"
#include "core/names.h"

using namespace symmar;

namespace symmar {

const TableRow* resolveRow(const symmarComm& comm, Collective coll) {
  const HostPlacement& p = comm.placement;
  if (p.hosts == 1) {
    return comm.tables.resolve(comm.topo.cc_major, comm.topo.cc_minor, comm.topo.link, comm.nranks, 1, coll);
  }
  // Hosts of unequal size have no hierarchical path, and their ranks per host differ, so no key of
  // theirs would be the same on every rank: one row for all, empty (the fallback serves).
  static const TableRow kFlat = [] {
    TableRow r;
    r.source = "hosts with different numbers of ranks: flat, the fallback serves every call";
    return r;
  }();
  const bool gpu = comm.gpu();
  if (!p.uniform || (gpu && comm.inter_host.empty())) return &kFlat;
  // Across hosts the row is the hierarchical one of the link within a host: the GPUs' link, or host
  // memory (on the host backend the link is unknown until an engine is set, but the plan must not
  // change when one is).
  const symmarLink_t link = gpu ? comm.topo.link : symmarLinkHostMemory;
  return comm.tables.resolve(comm.topo.cc_major, comm.topo.cc_minor, link, p.local_size, p.hosts, coll);
}

std::string describeHosts(const symmarComm& comm) {
  const HostPlacement& p = comm.placement;
  if (p.hosts == 1) return "";
  std::string text = "; hosts " + std::to_string(p.hosts);
  const bool gpu = comm.gpu();
  if (!p.uniform) return text + " with unequal numbers of ranks: flat (the fallback serves every call)";
  text += " x " + std::to_string(p.local_size) + " ranks";
  if (comm.inter_host.empty()) {
    return text + (gpu ? ": NCCL serves every call (its own hierarchy)"
                       : ", no inter-host engine: flat (the fallback serves every call)");
  }
  return text + ": hierarchical (" + (gpu ? "the kernels" : "shared memory") + " within a host, " + comm.inter_host +
         " between hosts, partials reduced in host order)";
}

}  // namespace symmar

extern "C" {

symmarResult_t symmarCommHostLayout(symmarComm_t comm, int* hosts, int* host, int* local_rank, int* local_size) {
  return guardedComm(comm, [&] {
    if (hosts) *hosts = comm->placement.hosts;
    if (host) *host = comm->placement.host;
    if (local_rank) *local_rank = comm->placement.local_rank;
    if (local_size) *local_size = comm->placement.local_size;
    return symmarSuccess;
  });
}

symmarResult_t symmarCommSetInterHost(symmarComm_t comm, symmarInterHostExchangeFn fn, void (*release)(void*),
                                      void* user, const char* name) {
  return guardedCollective(comm, [&] {
    const HostPlacement& p = comm->placement;
    // What every rank sees alike is refused at once, without a collective step.
    if (p.hosts == 1) return fail(symmarUnsupported, "symmarCommSetInterHost: every rank of this comm is on one host");
    if (!p.uniform) {
      return fail(symmarUnsupported,
                  "symmarCommSetInterHost: the %d hosts have different numbers of ranks; the "
                  "hierarchical path needs as many on each (the fallback serves)",
                  p.hosts);
    }
    if (comm->gpu()) {
      return fail(symmarUnsupported, "symmarCommSetInterHost: a GPU comm's inter-host stage is NCCL's");
    }
    // What may differ between ranks is agreed: either every rank takes its engine or none does.
    const char* why =
        !fn ? "fn is NULL" : (!comm->inter_host.empty() ? "an inter-host engine is already set" : nullptr);
    int first_failed = -1;
    SYMMAR_CHECK(agreeAll(*comm->bootstrap, why == nullptr, &first_failed));
    if (why) return fail(fn ? symmarInvalidUsage : symmarInvalidArgument, "symmarCommSetInterHost: %s", why);
    if (first_failed >= 0) {
      return fail(symmarInvalidUsage, "symmarCommSetInterHost: rank %d could not set its engine, so no rank does",
                  first_failed);
    }
    InterHostCarrier carrier;
    carrier.fn = fn;
    carrier.release = release;
    carrier.user = user;
    carrier.name = name && *name ? name : "an engine";
    SYMMAR_CHECK(comm->backend->setInterHost(carrier));
    comm->inter_host = carrier.name;
    comm->topo.link = symmarLinkHostMemory;  // the shared-memory forms now serve, hierarchically
    comm->available.forget();                // what could serve before was planned for the old link
    return symmarSuccess;
  });
}

}  // extern "C"
