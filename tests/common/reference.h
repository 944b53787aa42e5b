// The tests' one reference for allreduce results: per-rank input patterns, the float64 reduction
// across ranks, the fp16/bf16 number formats written from the IEEE 754 definitions, and the
// comparison of a result with its reference.
//
// Nothing here includes or calls the library's own conversions (src/core/numeric.h): a rounding bug
// there must show up as a difference, not be repeated by the oracle. E4M3 has its own independent
// reference in e4m3_reference.h (a search over every code), included here for one place to look.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "e4m3_reference.h"
#include "symmar/symmar.h"

/// Reference values and conversions for the tests, independent of the library's code.
namespace testref {

/// @name IEEE 754 binary16 (fp16) and bfloat16, to and from fp32
/// Encoding rounds to nearest, ties to even, overflows to infinity, keeps the sign of zero and
/// of infinity, and turns any NaN into a quiet NaN of the same sign (the payload is not kept).
/// Decoding is exact, subnormals included.
/// @{
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
uint16_t floatToBf16(float f);
float bf16ToFloat(uint16_t b);
/// @}

/// @name Elements of a buffer of any dtype
/// @{
/// Bytes of one element of dtype (the reference's own table, not symmarTypeSize).
size_t elementSize(symmarDataType_t dtype);
/// Stores v as element i, rounded to dtype. fp16 and bf16 go through fp32 first (v -> float ->
/// 16 bits), which is how a caller holding fp32 data fills such a buffer; int32 truncates.
void storeElement(void* buf, symmarDataType_t dtype, size_t i, double v);
/// Element i of a buffer of dtype, widened exactly to double.
double loadElement(const void* buf, symmarDataType_t dtype, size_t i);
/// v as a rank holds it after storing it in dtype: storeElement then loadElement.
double roundTo(symmarDataType_t dtype, double v);
/// @}

/// @name Deterministic per-rank inputs
/// @{
/// Small integers in [-8, 8], varied by rank, index and call: exact in every dtype, and so are
/// their sums over up to 8 ranks (|sum| <= 64 needs 7 significand bits; bf16 has 8).
double smallIntInput(int rank, size_t i, int call = 0);
/// Fractional values in [-1, 1] (multiples of 1e-6): sums round, so they are compared within
/// sumTolerance.
double fractionalInput(int rank, size_t i);
/// Fills count elements of dtype with smallIntInput(rank, i, call).
void fillSmallInts(symmarDataType_t dtype, void* dst, size_t count, int rank, int call = 0);
/// @}

/// @name Float64 reduction across ranks
/// @{
/// acc op x in float64.
double combine(symmarRedOp_t op, double acc, double x);
/// The float64 reduction, in rank order, of value(r) for r in [0, world), each value first rounded
/// to dtype as rank r stores it.
template <typename ValueOfRank>
double reduceRanks(symmarDataType_t dtype, symmarRedOp_t op, int world, ValueOfRank value) {
  double acc = roundTo(dtype, value(0));
  for (int r = 1; r < world; ++r) acc = combine(op, acc, roundTo(dtype, value(r)));
  return acc;
}
/// Element-wise float64 reduction of every rank's input buffer (count elements of dtype each).
std::vector<double> reduceBuffers(symmarDataType_t dtype, symmarRedOp_t op, const std::vector<const void*>& inputs,
                                  size_t count);
std::vector<double> reduceBuffers(symmarDataType_t dtype, symmarRedOp_t op,
                                  const std::vector<std::vector<unsigned char>>& inputs, size_t count);
/// @}

/// @name Comparing a result with its reference
/// @{
/// Absolute error allowed for a float sum over world ranks whose float64 reference is ref. fp32 and
/// fp64 sums round once per rank: world units of the format's epsilon, scaled by |ref| + 1 (the 1
/// covers partial sums larger than a cancelling result). fp16 and bf16 are summed in fp32 and
/// rounded to 16 bits at the end: one epsilon of max(1, |ref|). int32 sums are exact: 0.
double sumTolerance(symmarDataType_t dtype, double ref, int world);
/// True when got is within tol of want; false for NaN on either side.
inline bool within(double got, double want, double tol) { return std::fabs(got - want) <= tol; }

/// How a result must match its reference.
enum class Match {
  kExact,         ///< the same value (exact data, or max/min that pick one input)
  kSumTolerance,  ///< within sumTolerance(dtype, want, world)
};
/// Checks count elements of dtype at got against want. Returns "" when all match, else a line that
/// names the first element that does not.
std::string checkResult(symmarDataType_t dtype, const void* got, const double* want, size_t count, int world,
                        Match match);
/// @}

/// @name Bitwise identity across ranks
/// @{
/// FNV-1a 64 over bytes; h continues an earlier digest. Ranks compare digests of their outputs.
constexpr uint64_t kDigestStart = 14695981039346656037ull;
uint64_t digest(const void* data, size_t bytes, uint64_t h = kDigestStart);
/// @}

}  // namespace testref
