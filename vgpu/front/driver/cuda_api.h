// How vgpu's driver sources see cuda.h: with the toolkit's internal view, so that every ABI
// version of every entry point is declared under its real exported name (cuMemAlloc and
// cuMemAlloc_v2, cuMemcpy and cuMemcpy_ptds, ...) and no macro renames what we define.
// Every entry point vgpu implements is written with its exact exported symbol name.
#pragma once

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <cudaProfiler.h>

// The sim backend's library (VGPU_RENAME_ENTRIES) compiles every implementation as
// vgpu_impl_<symbol>: front/driver/checked_entries.cpp (which sets VGPU_NO_ENTRY_RENAMES, as does
// cuGetProcAddress's table) defines the exported names over them.
#if defined(VGPU_RENAME_ENTRIES) && !defined(VGPU_NO_ENTRY_RENAMES)
#include "entry_renames.h"
#endif

// An entry point of libcuda.so.1 (the version script decides what is really exported).
#define VGPU_EXPORT extern "C" __attribute__((visibility("default")))
