// VGPU_QUERY_TRACE: what a program asked the driver and what it was answered, one line per call.
//
//   VGPU_QUERY_TRACE=/tmp/q.txt ./program
//
// appends one line per query-type driver call (device and function attributes, occupancy and
// cluster queries, memory info, limits, module and library loads and name lookups) to the file,
// in both backends and in the same words, so that the trace of a program under the passthrough
// (the real driver's answers) and under the sim backend (the sim's) compare line by line
// (`diff <(sort -u a) <(sort -u b)`). Why: a library that chooses among kernels by what the
// driver says (cuBLASLt's heuristic) chooses differently when one answer differs, and which
// one is found only by comparing. The lines name no pointer, process or thread, so that runs
// compare; the typed formatting lives in front/driver/query_lines.h.
//
// The file is opened once, on the first line, for appending (several processes of a job may
// share it: each line is one write() on an O_APPEND descriptor, so lines stay whole). Unset or
// empty: off, and a query costs one predictable branch.
#pragma once

#include <string_view>

namespace vgpu::query_trace {

// True when VGPU_QUERY_TRACE names a file (read once).
bool enabled();

// Appends `text` and a newline to the trace file; does nothing when the trace is off or the
// file cannot be opened (one warn line says why, once).
void write_line(std::string_view text);

}  // namespace vgpu::query_trace
