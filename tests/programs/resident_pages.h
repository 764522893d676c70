// Pages of a range resident in host memory (mincore: for memfd memory, the file's pages), for the
// sim backend's memory tests (device memory there is host memory).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vtest {

// SIZE_MAX when mincore fails.
inline size_t resident_pages(uintptr_t ptr, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = ptr / page * page;
  const size_t n = (ptr + bytes - first + page - 1) / page;
  std::vector<unsigned char> v(n);
  if (mincore(reinterpret_cast<void*>(first), n * page, v.data()) != 0) return SIZE_MAX;
  size_t count = 0;
  for (unsigned char c : v) count += c & 1;
  return count;
}

}  // namespace vtest
