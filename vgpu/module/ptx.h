// Kernels and globals of PTX text, read without compiling it:
// - `.entry name(.param .u64 a, .param .align 8 .b8 b[24], ...)`: each parameter is placed at
//   the next multiple of its alignment (explicit .align, else the element size), the block
//   ends after the last one; performance directives (.maxntid, .reqntid, .minnctapersm,
//   .maxnreg, .reqnctapercluster) are recorded; bodies are skipped, except that the `.shared`
//   variables declared in a body (nvcc demotes a kernel's __shared__ variables there) add up
//   to its static shared memory.
// - module-scope `.global` / `.const` variables (not `.extern` ones) with their sizes and
//   numeric initialisers (addresses of other symbols initialise to zero: they are not known
//   before the module is placed in memory).
#pragma once

#include "module/image.h"

#include <string_view>

namespace vgpu::module {

// Whether the text begins (after whitespace and comments) with a .version directive.
bool looks_like_ptx(std::string_view text);

// Parses PTX. With check_sm_arch > 0, refuses PTX whose .target is newer than that
// architecture (a driver could not JIT it). Throws ImageError (invalid_ptx for bad syntax).
ModuleImage parse_ptx(std::string_view text, int check_sm_arch);

}  // namespace vgpu::module
