// A stand-in for the few cudart entry points that nvcc's host code calls, so that a test can
// link an nvcc-built host object and see what its static constructor registers: the fat binary
// wrapper (exactly what __cudaRegisterFatBinary hands to the driver), and the kernels and
// variables cudart would look up by name.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace module_test {

struct RegisteredVar {
  std::string name;
  size_t size = 0;
  bool constant = false;
  bool managed = false;
};

struct Registrations {
  std::vector<const void*> fatbins;     // the argument of each __cudaRegisterFatBinary call
  std::vector<std::string> functions;   // device names given to __cudaRegisterFunction
  std::vector<RegisteredVar> vars;
};

const Registrations& registrations();

}  // namespace module_test
