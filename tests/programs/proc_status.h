// One field of /proc/self/status in kB (RssAnon, RssFile, VmHWM, ...), for the memory programs
// (gpt2_step_memory_program.cu, module_memory_program.cpp); -1 when absent.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

inline long status_kb(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') v = std::strtol(line + n + 1, nullptr, 10);
  std::fclose(f);
  return v;
}
