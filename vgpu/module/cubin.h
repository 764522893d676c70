// Kernels and globals of a cubin (see elf_reader.h and nv_info.h for the formats).
//
// Conventions of nvcc's output this relies on:
// - a kernel is an STT_FUNC symbol with STO_CUDA_ENTRY (0x10) in st_other, its code in
//   .text.<name>; its attributes in the SHT_CUDA_INFO section .nv.info.<name> whose sh_info is
//   the .text section; its static shared memory is the size of .nv.shared.<name>.
// - register count, frame size: module-wide .nv.info records keyed by symbol index (older
//   toolkits: bits 24..31 of the .text section's sh_info).
// - globals are STT_OBJECT symbols in .nv.global (zero-initialised, NOBITS), .nv.global.init
//   (initialised) and .nv.constant<bank> sections; st_value is the offset in the section;
//   STO_CUDA_MANAGED (0x04) marks __managed__ variables.
// - sm_90 and later reserve shared memory at the start of every .nv.shared.<name> (the symbol
//   .nv.reservedSmem.cap gives its size when present and not 0, else 1 KiB), which the real
//   driver does not count in a kernel's static shared size.
#pragma once

#include "module/elf_reader.h"
#include "module/image.h"

#include <span>

namespace vgpu::module {

// The SM architecture a cubin was built for (its e_flags), or 0 if unreadable.
int cubin_arch(const ElfFile& elf);

// Parses a cubin. With check_sm_arch > 0, refuses (no_binary_for_gpu) a cubin that cannot run
// on that architecture. Throws ImageError.
ModuleImage parse_cubin(std::span<const uint8_t> bytes, int check_sm_arch);

}  // namespace vgpu::module
