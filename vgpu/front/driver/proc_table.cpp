// cuGetProcAddress's table, generated from the toolkit's typedefs (see gen_driver_surface.py).
// Taking the address of each symbol here binds to whichever definition won the link: vgpu's
// implementation where there is one, the weak unimplemented stub otherwise.
// Not the implementations: the exported definitions (checked_entries.cpp in the sim backend).
#define VGPU_NO_ENTRY_RENAMES 1

#include <iterator>

#include "front/driver/entry_points.h"

// Entry points that cuGetProcAddress serves but libcuda.so.1 does not export by name.
#define VGPU_ENTRY(sym, params, args, forwarded)
#define VGPU_HIDDEN_ENTRY(sym) namespace vgpu::hidden { CUresult CUDAAPI sym(); }
// Graphics interop: exported under the real driver's names (declared without parameters: the
// table only takes their addresses).
#define VGPU_INTEROP_ENTRY(sym) extern "C" CUresult CUDAAPI sym();
#include "entries.inc"
#undef VGPU_ENTRY
#undef VGPU_HIDDEN_ENTRY
#undef VGPU_INTEROP_ENTRY
using namespace vgpu::hidden;

namespace vgpu {
namespace {
const ProcEntry kProcTable[] = {
#include "proc_table.inc"
};
}  // namespace
const ProcEntry* proc_table_begin() { return std::begin(kProcTable); }
const ProcEntry* proc_table_end() { return std::end(kProcTable); }
}  // namespace vgpu
