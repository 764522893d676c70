// libcupti, opened with dlopen and its entry points resolved by name, so that vgpu runs (without
// measurements) where CUPTI is not installed. Types come from the toolkit's CUPTI headers.
#pragma once

#include <cupti.h>

#include <string>
#include <string_view>
#include <vector>

namespace vgpu::cupti {

struct CuptiLibrary {
  std::string path;  // what was opened
  CUptiResult (*GetResultString)(CUptiResult, const char**) = nullptr;
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityDisable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityFlushAll)(uint32_t) = nullptr;
  CUptiResult (*ActivityGetNextRecord)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*ActivityPushExternalCorrelationId)(CUpti_ExternalCorrelationKind, uint64_t) = nullptr;
  CUptiResult (*ActivityPopExternalCorrelationId)(CUpti_ExternalCorrelationKind, uint64_t*) = nullptr;
  // Optional (nullptr when this CUPTI lacks them).
  CUptiResult (*ActivityFlushPeriod)(uint32_t) = nullptr;
  // For Recorder::expect_kernel; without them it returns false and only the tag join works.
  CUptiResult (*GetStreamIdEx)(CUcontext, CUstream, uint8_t, uint32_t*) = nullptr;
  CUptiResult (*GetContextId)(CUcontext, uint32_t*) = nullptr;

  // "CUPTI_ERROR_..." for a result code (the library's own text when it has one).
  std::string error_name(CUptiResult r) const;
};

// Where to look, in order. `explicit_path` (VGPU_CUPTI_LIBRARY) is the only candidate when set.
// `cuda_home` is CUDA_HOME (may be empty); `loaded_objects` are the paths of the shared objects
// already mapped into the process, from which python site-packages folders are derived (a torch
// process has loaded nvidia/cu13/lib/libcudart.so.13 from there).
std::vector<std::string> cupti_candidates(std::string_view explicit_path, std::string_view cuda_home,
                                          const std::vector<std::string>& loaded_objects);

// Opens the first candidate that loads and exports every entry point above. Kept loaded for the
// life of the process (CUPTI's threads outlive any one recorder), so repeated calls are cheap and
// return the same object. nullptr with `error` set when none works.
const CuptiLibrary* load_cupti(std::string* error);

}  // namespace vgpu::cupti
