// The tools' module table (6e163fbe): the functions of a module, through the public
// enumeration calls, so that a function found here is the same handle cuModuleGetFunction and
// cuModuleEnumerateFunctions give.
#include <vector>

#include "common/log.h"
#include "sim/darkapi/slots.h"

namespace vgpu::darkapi::slots {

uint64_t module_functions(CUcontext, CUmodule module, FunctionVisitor visit, void* opaque) {
  unsigned count = 0;
  if (cuModuleGetFunctionCount(&count, module) != CUDA_SUCCESS) return 0;
  std::vector<CUfunction> functions(count);
  if (count > 0 && cuModuleEnumerateFunctions(functions.data(), count, module) != CUDA_SUCCESS) return 0;
  if (visit == nullptr) {
    log::warn("tools_module[7]: no visitor given for module {}", static_cast<const void*>(module));
    return 0;
  }
  for (CUfunction f : functions) visit(opaque, f);
  return functions.size();
}

}  // namespace vgpu::darkapi::slots
