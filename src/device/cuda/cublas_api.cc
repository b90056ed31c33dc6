#include "device/cuda/cublas_api.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "core/error.h"

namespace hearth::gpu {
namespace {

template <typename F>
void bind(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) fail("cuBLAS (", HEARTH_CUBLAS_SONAME, ") has no ", name);
}

CublasApi load() {
  // The soname of the toolkit Hearth was built with, from the loader's search path (the binary's
  // run path includes the toolkit's library folder), then from that folder itself.
  void* lib = dlopen(HEARTH_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const std::string path = std::string(HEARTH_CUDA_LIBRARY_DIR) + "/" + HEARTH_CUBLAS_SONAME;
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!lib) fail("cannot load cuBLAS (", HEARTH_CUBLAS_SONAME, "): ", dlerror());
  CublasApi api;
  bind(lib, "cublasCreate_v2", api.create);
  bind(lib, "cublasDestroy_v2", api.destroy);
  bind(lib, "cublasSetStream_v2", api.set_stream);
  bind(lib, "cublasSetWorkspace_v2", api.set_workspace);
  bind(lib, "cublasGemmEx", api.gemm_ex);
  bind(lib, "cublasGetStatusName", api.status_name);
  bind(lib, "cublasGetStatusString", api.status_string);
  return api;
}

}  // namespace

const CublasApi& cublas() {
  // A process-wide loaded library: loaded once, read-only afterwards.
  static std::once_flag once;
  static CublasApi api;
  std::call_once(once, [] { api = load(); });
  return api;
}

}  // namespace hearth::gpu
