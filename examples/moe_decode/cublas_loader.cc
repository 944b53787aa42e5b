#include "cublas_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace moe {
namespace cublas {
namespace {

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*out && missing) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *out != nullptr;
}

Api g_api;
std::string g_error;
bool g_loaded = false;

void loadOnce() {
  std::vector<std::string> names;
  const char* env = getenv("MOE_CUBLAS_LIB");
  if (env && *env) {
    names.push_back(env);
  } else {
    names = {"libcublas.so.13", "libcublas.so"};
  }
  void* lib = nullptr;
  std::string tried;
  for (const std::string& n : names) {
    lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      g_api.library = n;
      break;
    }
    const char* e = dlerror();
    tried += "\n  " + n + ": " + (e ? e : "not found");
  }
  if (!lib) {
    g_error = "cannot load cuBLAS (set MOE_CUBLAS_LIB to its path):" + tried;
    return;
  }
  std::string missing;
  resolve(lib, "cublasCreate_v2", &g_api.create, &missing);
  resolve(lib, "cublasDestroy_v2", &g_api.destroy, &missing);
  resolve(lib, "cublasSetStream_v2", &g_api.setStream, &missing);
  resolve(lib, "cublasSetWorkspace_v2", &g_api.setWorkspace, &missing);
  resolve(lib, "cublasGemmEx", &g_api.gemmEx, &missing);
  resolve(lib, "cublasGemmBatchedEx", &g_api.gemmBatchedEx, &missing);
  resolve(lib, "cublasGetStatusString", &g_api.statusString, static_cast<std::string*>(nullptr));
  if (!missing.empty()) {
    g_error = g_api.library + " lacks required symbols: " + missing;
    dlclose(lib);
    return;
  }
  g_loaded = true;  // the library stays loaded for the life of the process
}

}  // namespace

const Api* load(std::string* error) {
  static std::once_flag once;
  std::call_once(once, loadOnce);
  if (!g_loaded && error) *error = g_error;
  return g_loaded ? &g_api : nullptr;
}

std::string statusText(const Api& api, Status s) {
  const char* text = api.statusString ? api.statusString(s) : nullptr;
  return text ? std::string(text) : "cuBLAS status " + std::to_string(s);
}

}  // namespace cublas
}  // namespace moe
