// VGPU_SIM_MEMORY_REPORT=FILE (issue 23: host memory per rank): at exit the sim driver appends
// one JSON line to FILE (`%p` = the process id) saying what the process holds (RssAnon, RssFile,
// RssShmem, VmHWM, malloc's bytes in use) and how much of it is the driver's: the module tables
// it keeps (an estimate from their sizes) and the device memory the program touched (resident
// pages behind the live allocations: by mincore, and split by /proc/self/pagemap into private
// pages written, memfd pages, pages swapped and pages only read, which map the kernel's zero page
// and cost nothing), and what wrote device memory, by path (host-to-device, device-to-device,
// peer copies, memsets, NCCL's data mover: bytes stored, and bytes of whole pages released
// instead because they were to hold zeros). A rank's own memory can so be split into the
// driver's and the program's in a real job (tests/programs/gpt2_step_memory_program measures the
// same stages from the inside; tests/programs/memory_report_summary.py sums a job's lines).
#pragma once

namespace vgpu {

class DriverState;

// Registers the report at exit when VGPU_SIM_MEMORY_REPORT is set (once per process).
void arm_memory_report();

}  // namespace vgpu
