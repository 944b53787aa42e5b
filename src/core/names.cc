#include "core/names.h"

#include <strings.h>

#include <cstdint>
#include <string>

namespace symmar {
namespace {
const char* const kAlgoNames[] = {"auto", "oneshot", "twoshot", "multimem", "nccl", "mpi", "lamport"};
const char* const kLinkNames[] = {"unknown", "nvswitch", "nvlink", "pcie", "host", "pcie-nop2p"};
const char* const kDtypeNames[] = {"float32", "float16", "bfloat16", "int32", "float64"};
const char* const kOpNames[] = {"sum", "max", "min"};
// A value added to an enum in symmar.h needs its name here, or lookups would read past the end.
static_assert(sizeof(kAlgoNames) / sizeof(kAlgoNames[0]) == symmarNumAlgos, "an algorithm lacks a name");
static_assert(sizeof(kLinkNames) / sizeof(kLinkNames[0]) == symmarNumLinks, "a link lacks a name");
static_assert(sizeof(kDtypeNames) / sizeof(kDtypeNames[0]) == symmarNumTypes, "a dtype lacks a name");
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == symmarNumOps, "an op lacks a name");
/// Parses name (any case) as the enum value of its index in names[first..N); false, with *out
/// untouched, when no entry matches.
template <typename E, size_t N>
bool parseName(const char* const (&names)[N], const char* name, E* out, int first = 0) {
  for (int i = first; i < static_cast<int>(N); ++i) {
    if (strcasecmp(name, names[i]) == 0) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

}  // namespace

const char* algoName(int algo) { return validAlgo(algo) ? kAlgoNames[algo] : "unknown"; }

bool parseAlgoName(const char* name, symmarAlgo_t* algo) { return parseName(kAlgoNames, name, algo); }

std::string algoNameList(const char* sep) {
  std::string out;
  for (int a = symmarAlgoAuto + 1; a < symmarNumAlgos; ++a) out += (out.empty() ? "" : sep) + std::string(kAlgoNames[a]);
  return out;
}

// "unknown" (index 0) is not a link a table or a user can name.
bool parseLinkName(const char* name, symmarLink_t* link) { return parseName(kLinkNames, name, link, 1); }

const char* linkName(symmarLink_t link) {
  int i = static_cast<int>(link);
  return (i >= 0 && i < symmarNumLinks) ? kLinkNames[i] : "unknown";
}
const char* dtypeName(symmarDataType_t dtype) { return validDtype(dtype) ? kDtypeNames[dtype] : "unknown"; }
const char* opName(symmarRedOp_t op) { return validOp(op) ? kOpNames[op] : "unknown"; }

const char* collectiveName(Collective coll) {
  switch (coll) {
    case Collective::kAllReduce: return "allreduce";
    case Collective::kReduceScatter: return "reducescatter";
    case Collective::kAllGather: return "allgather";
    case Collective::kAddRmsNorm:
      return "addrmsnorm";
  }
  return "unknown";
}

bool parseCollectiveName(const char* name, Collective* coll) {
  for (Collective c :
       {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather, Collective::kAddRmsNorm}) {
    if (name && strcasecmp(name, collectiveName(c)) == 0) {
      *coll = c;
      return true;
    }
  }
  return false;
}

bool parseDtypeName(const char* name, symmarDataType_t* dtype) { return parseName(kDtypeNames, name, dtype); }

bool parseOpName(const char* name, symmarRedOp_t* op) { return parseName(kOpNames, name, op); }

bool parseAlgoList(const char* list, uint32_t* mask) {
  std::string text(list);
  uint32_t result = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    symmarAlgo_t algo;
    if (!item.empty()) {
      if (!parseAlgoName(item.c_str(), &algo) || algo == symmarAlgoAuto) return false;
      result |= algoBit(algo);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  *mask = result;
  return true;
}

}  // namespace symmar
