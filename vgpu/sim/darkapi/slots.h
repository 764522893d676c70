// vgpu's implementations of the private-table slots whose meaning is known. Signatures are
// the runtime's (established by ZLUDA's dark_api and measured on a 580 driver with
// tests/darkapi/real_driver_probe.cpp); catalog.cpp places each in its table and slot.
#pragma once

#include <cstddef>
#include <cstdint>

#include "front/driver/cuda_api.h"

namespace vgpu::darkapi::slots {

// ---- cudart_interface (6bd5fb6c) ----
// [1] A module from a __fatBinC_Wrapper_t (magic 0x466243b1, version, fat binary, ...), as
// runtimes before lazy loading registered their kernels; plain fat binaries are accepted too.
CUresult module_from_fatbin_wrapper(CUmodule* module, const void* wrapper);
// [2] The primary context of `device`, WITHOUT retaining it: measured, the context stays
// inactive (cuDevicePrimaryCtxGetState active=0) and a later cuDevicePrimaryCtxRetain returns
// the same handle. An invalid ordinal gives CUDA_ERROR_INVALID_DEVICE.
CUresult primary_context(CUcontext* out, CUdevice device);
// [6] As [1], with three further arguments the runtime passes as null/0.
CUresult module_from_fatbin_wrapper_ex(CUmodule* module, const void* wrapper, void* arg3,
                                       void* arg4, unsigned int arg5);
// [7] Takes one word and returns nothing; a no-op for every runtime seen so far.
void cudart_slot7(size_t arg);
// [8] As [6] with the fat binary first and the module second.
CUresult module_from_fatbin_ex(const void* fatbin, CUmodule* module, void* arg3, void* arg4,
                               unsigned int arg5);
// [12] Loads the PTX compiler/libnvvm in the real driver; nothing to load here.
CUresult load_compilers();

// ---- tools_callback_hooks (a094798c) ----
// [2], [6] Zeroed buffers through which a profiler would switch runtime callbacks on
// (measured: sizes 1024 and 14, all zero without a profiler). Return nothing.
void callback_buffer1(void** ptr, size_t* size);
void callback_buffer2(void** ptr, size_t* size);

// ---- tools_tls (42d85a81) ----
// [2] The calling thread's current context (null when none); measured to return success.
CUresult current_context(CUcontext* out);

// ---- context_local_storage (c693336e): see context_local_storage.h ----
using ClsDestructor = void (*)(CUcontext ctx, void* key, void* value);
CUresult cls_put(CUcontext ctx, void* key, void* value, ClsDestructor destructor);
CUresult cls_delete(CUcontext ctx, void* key);
CUresult cls_get(void** value, CUcontext ctx, void* key);

// ---- context_checks (263e8860) ----
// [2] Measured: writes 0 to *flags, leaves *detail alone, returns success. A handle that is no
// context of the driver is refused here (CUDA_ERROR_INVALID_CONTEXT), as the public calls refuse it.
CUresult context_check(CUcontext ctx, uint32_t* flags, const void** detail);
// [3] Measured: returns 0.
uint32_t context_check_global();

// ---- integrity_check (d4082055) ----
// [1] See integrity.h.
CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t* out);

// ---- context_info (21318c60) ----
// [4] Measured: the same id as cuCtxGetId.
CUresult context_id(CUcontext ctx, unsigned long long* id);
// [51] and [39]: cuBLAS (cuBLASLt) calls them before the first GEMM on a context, [51] as
// (ctx, 0, out, 0, 7, p), then [39] as (ctx, p2, out, 3, 7, p3); p, p2, p3 point into the
// library. Public analyses of NVIDIA's tools libraries name this table the tools' context
// interface (CU_ETID_ToolsContext); what the two slots compute is not known, and they could
// not be traced on a real driver here. Answered so that GEMMs run, as another clean-room
// driver (SCUDA) answers them: [51] writes the address of a zeroed block of the context (the
// same block for every call on that context, kept until exit) and returns success; [39]
// writes null and returns success. A null `out` is CUDA_ERROR_INVALID_VALUE.
CUresult context_object(CUcontext ctx, uint64_t arg1, void** out, uint64_t arg3, uint64_t kind, const void* arg5);
CUresult context_lookup(CUcontext ctx, const void* arg1, void** out, uint64_t arg3, uint64_t kind,
                        const void* arg5);

// ---- library_1734dc26 ----
// [4] (&layout, &other): cuBLASLt's question before a Hopper GEMM with clusters, the GPU's TPC
// layout it places clusters by; [13] (layout, other) gives both blocks back. See
// library_slots.cpp (read from libcublasLt and checked against an H200's answers).
uint32_t library_slot4(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, uintptr_t a4, uintptr_t a5);
uint32_t library_slot13(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, uintptr_t a4, uintptr_t a5);

// ---- tools_module (6e163fbe) ----
// [7] Calls `visit(opaque, f)` for every function of `module` and returns how many it
// visited (0 for a bad module). cuFFT calls it as (ctx, module, visit, &out) on a module of one
// kernel that it loaded itself, with a `visit` that stores f in *out, and treats any count but 1
// as failure. Public analyses of NVIDIA's tools libraries name this table CU_ETID_ToolsModule;
// another clean-room driver (SCUDA) reads the slot the same way (it counts and calls back).
using FunctionVisitor = void (*)(void* opaque, CUfunction f);
uint64_t module_functions(CUcontext ctx, CUmodule module, FunctionVisitor visit, void* opaque);

}  // namespace vgpu::darkapi::slots
