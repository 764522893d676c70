// The JIT linker of the sim backend (cuLinkCreate, cuLinkAddData, cuLinkAddFile,
// cuLinkComplete, cuLinkDestroy): what NVRTC users (hashcat, numba, the ptxjit sample) call to
// turn PTX or cubins into a loadable image. Nothing is compiled; each code input is parsed as
// cuModuleLoadData would parse it (vgpu/module), so a broken input fails at the call that adds
// it, with the real driver's error (CUDA_ERROR_INVALID_PTX, _INVALID_IMAGE, _NO_BINARY_FOR_GPU).
//
// The linked image: the one code input as it came (PTX, cubin or fat binary), or, for several
// PTX inputs, one PTX text holding all their functions (the first input's header, the bodies of
// the others). Several cubins cannot be merged without a device linker: CUDA_ERROR_NOT_SUPPORTED.
// Device libraries (CU_JIT_INPUT_LIBRARY / OBJECT, e.g. libcudadevrt.a) only resolve calls made
// by device code, which never runs here: accepted, not parsed. The image stays valid until
// cuLinkDestroy, as the real driver's.
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "sim/core/context.h"
#include "sim/core/handle_table.h"
#include "sim/exec/module_api_util.h"
#include "module/image.h"

namespace vgpu {

struct LinkInput {
  CUjitInputType type;
  std::vector<uint8_t> bytes;
  std::string name;
};

struct LinkState {
  int sm_arch = 0;
  std::mutex mu;
  std::vector<LinkInput> code;  // PTX, cubin, fat binary: in the order added
  int libraries = 0;
  std::vector<uint8_t> output;  // cuLinkComplete's image
};

}  // namespace vgpu

namespace {

using vgpu::LinkInput;
using vgpu::LinkState;

// The link states live with the module manager; nullptr before cuInit.
vgpu::HandleTable<LinkState>* states() {
  vgpu::DriverState* d = vgpu::DriverState::get();
  return d ? &d->modules().link_states() : nullptr;
}

CUresult parse_error(const char* call, const std::string& name, const vgpu::module::ParseError& e) {
  vgpu::log::warn("{}: input '{}' refused: {}", call, name, e.message);
  switch (e.kind) {
    case vgpu::module::ErrorKind::invalid_ptx: return CUDA_ERROR_INVALID_PTX;
    case vgpu::module::ErrorKind::no_binary_for_gpu: return CUDA_ERROR_NO_BINARY_FOR_GPU;
    case vgpu::module::ErrorKind::unsupported: return CUDA_ERROR_NOT_SUPPORTED;
    case vgpu::module::ErrorKind::file_not_found: return CUDA_ERROR_FILE_NOT_FOUND;
    default: return CUDA_ERROR_INVALID_IMAGE;
  }
}

CUresult add(const char* call, CUlinkState handle, CUjitInputType type, std::vector<uint8_t> bytes,
             const char* name) {
  auto* table = states();
  if (table == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  auto s = table->find(handle);
  if (!s) {
    vgpu::log::warn("{}: not a live link state", call);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const std::string shown = name ? name : "(unnamed)";
  switch (type) {
    case CU_JIT_INPUT_PTX:
      if (bytes.empty() || bytes.back() != 0) bytes.push_back(0);  // the size may leave out the NUL
      [[fallthrough]];
    case CU_JIT_INPUT_CUBIN:
    case CU_JIT_INPUT_FATBINARY: {
      auto parsed = vgpu::module::parse_image(bytes, s->sm_arch);
      if (!parsed.ok()) {
        const CUresult r = parse_error(call, shown, parsed.error());
        // Declared as PTX, whatever it turned out to be: the PTX compiler's error.
        return type == CU_JIT_INPUT_PTX && r == CUDA_ERROR_INVALID_IMAGE ? CUDA_ERROR_INVALID_PTX : r;
      }
      std::lock_guard lock(s->mu);
      s->code.push_back({type, std::move(bytes), shown});
      return CUDA_SUCCESS;
    }
    case CU_JIT_INPUT_OBJECT:
    case CU_JIT_INPUT_LIBRARY: {
      std::lock_guard lock(s->mu);
      ++s->libraries;
      return CUDA_SUCCESS;
    }
    default:  // NVVM IR needs the link-time optimizer, which the sim backend does not have
      vgpu::log::warn("{}: input type {} of '{}' is not supported by vgpu", call, static_cast<int>(type), shown);
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

// The PTX texts as one module: the first input whole, then each other's lines without the
// header directives only a module's start may carry.
std::vector<uint8_t> merge_ptx(const std::vector<LinkInput>& inputs) {
  std::string out(reinterpret_cast<const char*>(inputs[0].bytes.data()));
  for (size_t i = 1; i < inputs.size(); ++i) {
    const std::string text(reinterpret_cast<const char*>(inputs[i].bytes.data()));
    out += "\n// linked from " + inputs[i].name + "\n";
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(at, end - at);
      const size_t first = line.find_first_not_of(" \t");
      const std::string word = first == std::string::npos ? "" : line.substr(first);
      if (word.rfind(".version", 0) != 0 && word.rfind(".target", 0) != 0 && word.rfind(".address_size", 0) != 0)
        out += line + "\n";
      at = end + 1;
    }
  }
  return std::vector<uint8_t>(out.begin(), out.end() + 1);  // with the NUL
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuLinkCreate_v2(unsigned int numOptions, CUjit_option* options, void** optionValues,
                                             CUlinkState* stateOut) {
  VGPU_CALL_SCOPE();
  vgpu::DriverState* d = vgpu::DriverState::get();
  if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (stateOut == nullptr || (numOptions > 0 && (options == nullptr || optionValues == nullptr))) {
    vgpu::log::warn("cuLinkCreate: null argument");
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto ctx = d->contexts().current();
  if (!ctx) {
    vgpu::log::warn("cuLinkCreate: no current context on this thread");
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  auto s = std::make_shared<LinkState>();
  const auto& model = d->device(ctx->device())->model();
  s->sm_arch = model.cc_major * 10 + model.cc_minor;
  // The log buffers the program hands in are left as empty strings: nothing to report.
  for (unsigned int i = 0; i < numOptions; ++i)
    if ((options[i] == CU_JIT_INFO_LOG_BUFFER || options[i] == CU_JIT_ERROR_LOG_BUFFER) && optionValues[i])
      for (unsigned int j = 0; j < numOptions; ++j)
        if (options[j] == (options[i] == CU_JIT_INFO_LOG_BUFFER ? CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
                                                                : CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) &&
            reinterpret_cast<uintptr_t>(optionValues[j]) > 0)
          static_cast<char*>(optionValues[i])[0] = '\0';
  CUlinkState h = vgpu::mint_handle<CUlinkState>(vgpu::HandleKind::link_state);
  states()->add(h, std::move(s));
  *stateOut = h;
  return CUDA_SUCCESS;
}
VGPU_EXPORT CUresult CUDAAPI cuLinkCreate(unsigned int numOptions, CUjit_option* options, void** optionValues,
                                          CUlinkState* stateOut) {
  return cuLinkCreate_v2(numOptions, options, optionValues, stateOut);
}

VGPU_EXPORT CUresult CUDAAPI cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void* data, size_t size,
                                              const char* name, unsigned int, CUjit_option*, void**) {
  VGPU_CALL_SCOPE();
  if (data == nullptr || size == 0) {
    vgpu::log::warn("cuLinkAddData: no data");
    return CUDA_ERROR_INVALID_VALUE;
  }
  const auto* p = static_cast<const uint8_t*>(data);
  return add("cuLinkAddData", state, type, std::vector<uint8_t>(p, p + size), name);
}
VGPU_EXPORT CUresult CUDAAPI cuLinkAddData(CUlinkState state, CUjitInputType type, void* data, size_t size,
                                           const char* name, unsigned int n, CUjit_option* o, void** v) {
  return cuLinkAddData_v2(state, type, data, size, name, n, o, v);
}

VGPU_EXPORT CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char* path,
                                              unsigned int, CUjit_option*, void**) {
  VGPU_CALL_SCOPE();
  if (path == nullptr) {
    vgpu::log::warn("cuLinkAddFile: null path");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (states() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!states()->find(state)) return CUDA_ERROR_INVALID_HANDLE;
  auto file = vgpu::module::read_image_file(path);
  if (!file.ok()) return parse_error("cuLinkAddFile", path, file.error());
  return add("cuLinkAddFile", state, type, std::move(file).value(), path);
}
VGPU_EXPORT CUresult CUDAAPI cuLinkAddFile(CUlinkState state, CUjitInputType type, const char* path, unsigned int n,
                                           CUjit_option* o, void** v) {
  return cuLinkAddFile_v2(state, type, path, n, o, v);
}

VGPU_EXPORT CUresult CUDAAPI cuLinkComplete(CUlinkState state, void** cubinOut, size_t* sizeOut) {
  VGPU_CALL_SCOPE();
  if (states() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  auto s = states()->find(state);
  if (!s) {
    vgpu::log::warn("cuLinkComplete: not a live link state");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (cubinOut == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(s->mu);
  if (s->code.empty()) {
    vgpu::log::warn("cuLinkComplete: nothing to link");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (s->code.size() == 1) {
    s->output = s->code[0].bytes;
  } else {
    for (const LinkInput& in : s->code)
      if (in.type != CU_JIT_INPUT_PTX) {
        vgpu::log::warn("cuLinkComplete: linking {} inputs with a cubin or fat binary among them is not supported by "
                        "vgpu (no device linker)", s->code.size());
        return CUDA_ERROR_NOT_SUPPORTED;
      }
    s->output = merge_ptx(s->code);
    if (auto parsed = vgpu::module::parse_image(s->output, s->sm_arch); !parsed.ok())
      return parse_error("cuLinkComplete", "the linked PTX", parsed.error());
  }
  *cubinOut = s->output.data();
  if (sizeOut) *sizeOut = s->output.size();
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuLinkDestroy(CUlinkState state) {
  VGPU_CALL_SCOPE();
  if (states() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!states()->remove(state)) {
    vgpu::log::warn("cuLinkDestroy: not a live link state");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return CUDA_SUCCESS;
}
