// What one task of an NCCL collective leaves in a rank's recv buffer, from every rank's part:
// the arithmetic of nccl_data.h, on host bytes only (no driver, no exchange), so that it can be
// tested on its own. All-reduce, reduce, reduce-scatter (sum or prod, in rank order, the same on
// every rank; 16-bit floats rounded at each step as each hop stores them), all-gather and
// broadcast; every NCCL datatype but fp8 for reductions (fp8 is copied, not reduced).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "contracts/nccl_plugin.h"

namespace vgpu::nccl_data {

enum class Op { sum, prod, unknown };

// The reduction NCCL's kernel `name` performs: `_Prod_` a product, `_MinMax_` not known (min and
// max share that kernel), anything else a sum (`_Sum_`, `_PreMulSum_`, `_SumPostDiv_`, and the
// generic kernel, whose name does not say).
Op op_of_kernel(const std::string& name);

// A fixed-size text field of the contract (not always terminated).
std::string_view field(const char* s, size_t n);

// The bytes of `task`'s count of its datatype; 0 for a datatype not known.
size_t count_bytes(const vgpu_nccl_task& task);

// What rank `rank` posts of `task` and what its recv buffer receives, in bytes; false for a
// function or datatype not handled (Send, Recv, an unknown datatype).
bool sizes(const vgpu_nccl_task& task, int nranks, int rank, size_t* post, size_t* recv);

// The result of `task` for rank `rank` from every rank's part (parts[r], as each posted),
// written to `recv` (`recv_bytes`, as sizes() says). False when a part has the wrong size (a
// rank could not post), or the reduction or datatype is not handled.
bool combine(const vgpu_nccl_task& task, int nranks, int rank, Op op, const std::vector<std::vector<char>>& parts,
             char* recv, size_t recv_bytes);

}  // namespace vgpu::nccl_data
