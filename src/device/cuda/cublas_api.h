// cuBLAS, loaded when a session first needs it instead of linked: linking it makes every process
// that links Hearth (each test, each `hearth` run, GPU or not) load and relocate half a gigabyte
// of libcublas/libcublasLt at start-up, about 0.5 s each. Only the few entry points Hearth calls.
#pragma once

#include <cublas_v2.h>

namespace hearth::gpu {

// cublasGemmEx is overloaded in C++ (cublas_api.h adds a wrapper taking a cudaDataType compute
// type); this is the library's own entry point.
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void*, const void*, cudaDataType, int,
                                        const void*, cudaDataType, int, const void*, void*,
                                        cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  CublasGemmEx gemm_ex = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// The library, loaded on the first call (thread-safe; the table is immutable afterwards and the
// library stays loaded for the life of the process). Throws hearth::Error naming the library when
// it or one of the entry points cannot be found.
const CublasApi& cublas();

}  // namespace hearth::gpu
