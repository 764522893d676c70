// cuGetErrorName / cuGetErrorString for every CUresult cuda.h defines (generated table).
#include <algorithm>
#include <cstring>
#include <iterator>

#include "front/driver/cuda_api.h"

namespace {
struct ErrorText {
  int code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
#include "errors.inc"
};
// Programs pass any integer as a CUresult: read it as one, without a load of the enum type
// (a value outside the enum is allowed here, not undefined behaviour).
const ErrorText* find(const CUresult& error) {
  int code;
  std::memcpy(&code, &error, sizeof code);
  auto it = std::find_if(std::begin(kErrors), std::end(kErrors),
                         [code](const ErrorText& e) { return e.code == code; });
  return it == std::end(kErrors) ? nullptr : it;
}
}  // namespace

namespace vgpu {
const char* error_name(CUresult r) {
  const ErrorText* e = find(r);
  return e ? e->name : "unknown error";
}
}  // namespace vgpu

// Like the real driver: an unknown code gives CUDA_ERROR_INVALID_VALUE and a NULL string.
VGPU_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = find(error);
  *pStr = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

VGPU_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = find(error);
  *pStr = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
