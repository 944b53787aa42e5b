// cuBLAS reached at run time through dlopen, so that moe_decode starts (and runs its host
// variant) on machines without a GPU driver or without cuBLAS. Only the handful of functions the
// GPU model calls are resolved, through minimal declarations of our own (values from cublas_api.h
// and library_types.h, stable across cuBLAS 12 and 13).
#pragma once
#include <cuda_runtime.h>

#include <string>

namespace moe {
namespace cublas {

using Handle = void*;  // cublasHandle_t
using Status = int;    // cublasStatus_t
constexpr Status kSuccess = 0;
constexpr int kOpN = 0;             // CUBLAS_OP_N
constexpr int kGemmDefault = -1;    // CUBLAS_GEMM_DEFAULT
constexpr int kComputeF32 = 68;     // CUBLAS_COMPUTE_32F
constexpr int kDataF32 = 0;         // CUDA_R_32F
constexpr int kDataBf16 = 14;       // CUDA_R_16BF

struct Api {
  Status (*create)(Handle*);
  Status (*destroy)(Handle);
  Status (*setStream)(Handle, cudaStream_t);
  Status (*setWorkspace)(Handle, void*, size_t);
  Status (*gemmEx)(Handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* a, int a_type,
                   int lda, const void* b, int b_type, int ldb, const void* beta, void* c, int c_type, int ldc,
                   int compute, int algo);
  Status (*gemmBatchedEx)(Handle, int transa, int transb, int m, int n, int k, const void* alpha,
                          const void* const a[], int a_type, int lda, const void* const b[], int b_type, int ldb,
                          const void* beta, void* const c[], int c_type, int ldc, int batch, int compute, int algo);
  const char* (*statusString)(Status);  // may be null (then the numeric code is printed)
  std::string library;                  // the name that loaded
};

/// Loads cuBLAS once per process (env MOE_CUBLAS_LIB, else libcublas.so.13, else libcublas.so).
/// Returns null with *error set when it cannot be loaded or lacks a required symbol. Thread-safe.
const Api* load(std::string* error);

/// "CUBLAS_STATUS_..." (or the number) for messages.
std::string statusText(const Api& api, Status s);

}  // namespace cublas
}  // namespace moe
