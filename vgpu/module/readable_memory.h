// Whether memory of this process can be read, asked without touching it. cuModuleLoadData and
// friends get only a pointer; the image's own headers say how far it extends, and a corrupt
// header can claim gigabytes past the real bytes. Every range the parser is about to read at
// such a pointer is checked here first, so a lie in a header is an error, not a segfault.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vgpu::module {

// True if every byte of [p, p + n) is mapped readable now (each page is probed through
// process_vm_readv, which the kernel checks against the page tables and protections). Where the
// kernel refuses the probe itself (seccomp), it answers true: the old, unchecked behaviour.
bool readable(const void* p, uint64_t n) noexcept;

// strnlen that stops at the first unreadable page: the length of the NUL-terminated text at p,
// or `cap` if no NUL lies within cap readable bytes; *unreadable is set if it stopped at a page
// it could not read.
uint64_t readable_strnlen(const char* p, uint64_t cap, bool* unreadable) noexcept;

}  // namespace vgpu::module
