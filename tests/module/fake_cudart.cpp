#include "fake_cudart.h"

#include <cstdint>

namespace module_test {
namespace {

Registrations& state() {
  static Registrations r;
  return r;
}

void* g_handle_storage[4];

}  // namespace

const Registrations& registrations() { return state(); }

}  // namespace module_test


// Signatures as nvcc's host code calls them (crt/host_runtime.h); types simplified to what the
// test reads. Registration runs from static constructors, before main.
extern "C" {

__attribute__((visibility("default"))) void** __cudaRegisterFatBinary(void* fat_cubin) {
  module_test::state().fatbins.push_back(fat_cubin);
  return module_test::g_handle_storage;
}

__attribute__((visibility("default"))) void __cudaRegisterFatBinaryEnd(void**) {}

__attribute__((visibility("default"))) void __cudaUnregisterFatBinary(void**) {}

__attribute__((visibility("default"))) void __cudaRegisterFunction(void**, const char*, char*, const char* device_name,
                                                                   int, void*, void*, void*, void*, int*) {
  module_test::state().functions.emplace_back(device_name);
}

__attribute__((visibility("default"))) void __cudaRegisterVar(void**, char*, char*, const char* device_name, int,
                                                              size_t size, int constant, int) {
  module_test::state().vars.push_back({device_name, size, constant != 0, false});
}

__attribute__((visibility("default"))) void __cudaRegisterManagedVar(void**, void**, char*, const char* device_name,
                                                                     int, size_t size, int constant, int) {
  module_test::state().vars.push_back({device_name, size, constant != 0, true});
}

__attribute__((visibility("default"))) char __cudaInitModule(void**) { return 1; }

// Launch paths of the kernel stubs: never called by the tests.
__attribute__((visibility("default"))) int __cudaPopCallConfiguration(void*, void*, size_t*, void*) { return 1; }
__attribute__((visibility("default"))) int __cudaLaunchKernel(const void*, ...) { return 1; }
__attribute__((visibility("default"))) int __cudaGetKernel(void**, const void*) { return 1; }

}  // extern "C"
