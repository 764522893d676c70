// The lines of VGPU_QUERY_TRACE (common/query_trace.h), written in one place for both backends so
// that the passthrough's trace (the real driver's answers) and the sim's compare word for word.
// Each backend calls these from its query entry points after the answer is known, and only when
// query_trace::enabled(): `fn` is the function's or kernel's NAME (the backend's cuFuncGetName /
// cuKernelGetName), never its handle, so that the lines of two processes compare.
//
// A line is "<api> <arguments> -> <CUDA error name>[ <answer>]", e.g.
//   cuFuncGetAttribute fn=_Z6kernelPf attr=NUM_REGS(4) -> CUDA_SUCCESS 32
//   cuOccupancyMaxActiveClusters fn=... grid=2x66x1 block=384x1x1 smem=232448 attrs=[CLUSTER_DIMENSION(4)=2x1x1] -> CUDA_SUCCESS 66
// The answer is read (through the out-parameter pointers the call was given) and written only
// when the call succeeded: the out-parameter of a refused call holds nothing meaningful.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/query_trace.h"
#include "front/driver/cuda_api.h"

namespace vgpu::query_trace {

// "MULTIPROCESSOR_COUNT(16)" (cuda.h's name without its prefix, and the number).
std::string device_attribute_text(int attr);
// "NUM_REGS(4)"; an attribute newer than this table: "4".
std::string function_attribute_text(int attr);
// "grid=AxBxC block=AxBxC smem=N attrs=[NAME(id)=value ...]": what identifies a launch config
// (the stream is left out: it is a handle).
std::string launch_config_text(const CUlaunchConfig* config);

// The generic line; every helper below writes through it.
void line(std::string_view api, std::string_view args, CUresult r, std::string_view answer = {});

void device_attribute(int dev, int attr, CUresult r, const int* value);
// cuFuncGetAttribute (dev < 0) and cuKernelGetAttribute (dev: the ordinal the program passed).
void function_attribute(const char* api, const char* fn, int dev, int attr, CUresult r, const int* value);
// cuFuncSetAttribute and cuKernelSetAttribute.
void set_function_attribute(const char* api, const char* fn, int dev, int attr, int value, CUresult r);
void max_active_blocks(const char* api, const char* fn, int block, size_t smem, unsigned flags,
                       CUresult r, const int* blocks);
void max_potential_block_size(const char* api, const char* fn, bool smem_callback, size_t smem,
                              int block_limit, unsigned flags, CUresult r, const int* min_grid,
                              const int* block);
void available_dynamic_smem(const char* fn, int blocks, int block, CUresult r, const size_t* bytes);
// cuOccupancyMaxActiveClusters and cuOccupancyMaxPotentialClusterSize.
void cluster_query(const char* api, const char* fn, const CUlaunchConfig* config, CUresult r,
                   const int* value);
void mem_info(CUresult r, const size_t* free, const size_t* total);
void context_limit(int limit, CUresult r, const size_t* value);
// cuModuleGetFunction, cuLibraryGetKernel, cuModuleGetGlobal...: the name asked for.
void lookup(const char* api, const char* name, CUresult r);
// cuModuleLoadData, cuLibraryLoadData, ...: only whether the image was accepted.
void load(const char* api, CUresult r);

// A call of a private-table slot whose meaning vgpu does not know (or only guesses), as the six
// integer registers it was called with, x86-64 style:
//   private 1734dc26[4] args=p,p,1,12,p,0 -> 0 out=[a0:5,0 a1:p,0 a4:?]
// An argument that looks like a user-space address is "p" (addresses differ between runs and
// backends); after a call that returned 0, the two 64-bit words each such argument points at are
// shown (an address among them "p" again, a string as "text"; "?" where nothing can be read
// there, read with process_vm_readv so that a wrong guess never faults). `table` is the UUID's
// first 8 hex digits.
void private_slot(std::string_view table, size_t slot, const uintptr_t (&regs)[6], uint64_t result);

}  // namespace vgpu::query_trace
