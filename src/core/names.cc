#include "core/names.h"

#include <strings.h>

#include <string>

namespace symmar {
namespace {
const char* const kAlgoNames[] = {"auto", "oneshot", "twoshot", "multimem", "nccl", "mpi"};
const char* const kLinkNames[] = {"unknown", "nvswitch", "nvlink", "pcie", "host"};
const char* const kDtypeNames[] = {"float32", "float16", "bfloat16", "int32", "float64"};
const char* const kOpNames[] = {"sum", "max", "min"};
// A value added to an enum in symmar.h needs its name here, or lookups would read past the end.
static_assert(sizeof(kAlgoNames) / sizeof(kAlgoNames[0]) == symmarNumAlgos, "an algorithm lacks a name");
static_assert(sizeof(kLinkNames) / sizeof(kLinkNames[0]) == symmarLinkHostMemory + 1, "a link lacks a name");
static_assert(sizeof(kDtypeNames) / sizeof(kDtypeNames[0]) == symmarNumTypes, "a dtype lacks a name");
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == symmarNumOps, "an op lacks a name");
}  // namespace

const char* algoName(int algo) { return validAlgo(algo) ? kAlgoNames[algo] : "unknown"; }

bool parseAlgoName(const char* name, symmarAlgo_t* algo) {
  for (int i = 0; i < symmarNumAlgos; ++i) {
    if (strcasecmp(name, kAlgoNames[i]) == 0) {
      *algo = static_cast<symmarAlgo_t>(i);
      return true;
    }
  }
  return false;
}

bool parseLinkName(const char* name, symmarLink_t* link) {
  for (int i = 1; i <= symmarLinkHostMemory; ++i) {
    if (strcasecmp(name, kLinkNames[i]) == 0) {
      *link = static_cast<symmarLink_t>(i);
      return true;
    }
  }
  return false;
}

const char* linkName(symmarLink_t link) {
  int i = static_cast<int>(link);
  return (i >= 0 && i <= symmarLinkHostMemory) ? kLinkNames[i] : "unknown";
}
const char* dtypeName(symmarDataType_t dtype) { return validDtype(dtype) ? kDtypeNames[dtype] : "unknown"; }
const char* opName(symmarRedOp_t op) { return validOp(op) ? kOpNames[op] : "unknown"; }

bool parseDtypeName(const char* name, symmarDataType_t* dtype) {
  for (int i = 0; i < symmarNumTypes; ++i) {
    if (strcasecmp(name, kDtypeNames[i]) == 0) {
      *dtype = static_cast<symmarDataType_t>(i);
      return true;
    }
  }
  return false;
}

bool parseOpName(const char* name, symmarRedOp_t* op) {
  for (int i = 0; i < symmarNumOps; ++i) {
    if (strcasecmp(name, kOpNames[i]) == 0) {
      *op = static_cast<symmarRedOp_t>(i);
      return true;
    }
  }
  return false;
}

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
