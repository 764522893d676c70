#include "exec/kernel_time_model.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace vgpu {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool has(const std::string& s, const char* word) { return s.find(word) != std::string::npos; }

// `amount / rate`, or 0 when the rate is unknown.
double time_for(double amount, double rate) { return rate > 0 ? amount / rate : 0; }

}  // namespace

double KernelTimeModel::estimate(const GpuFigures& gpu, const LaunchSignature& signature,
                                 const LaunchHints& hints) {
  std::string name;
  LaunchShape shape;
  if (!decode_signature_header(signature, &name, &shape)) return kLaunchFloorS;
  const std::string lname = lower(name);

  const bool tensor_fragments = has(lname, "wmma") || has(lname, "hmma");
  if (has(lname, "gemm") || has(lname, "matmul") || tensor_fragments) {
    std::vector<int64_t> dims;
    for (int64_t v : signature_integers(signature)) {
      if (v > 0 && v <= kMaxGemmDim) dims.push_back(v);
      if (dims.size() == 3) break;
    }
    if (dims.size() == 3) {
      const double m = static_cast<double>(dims[0]), n = static_cast<double>(dims[1]),
                   k = static_cast<double>(dims[2]);
      double rate = gpu.fp32_flops, elem = 4;
      if (has(lname, "tf32")) {
        rate = gpu.tf32_tensor_flops;
      } else if (has(lname, "bf16") || has(lname, "fp16") || has(lname, "half") || has(lname, "hgemm") ||
                 tensor_fragments) {
        rate = gpu.bf16_tensor_flops, elem = 2;
      }
      const double flops = 2 * m * n * k;
      const double bytes = elem * (m * k + k * n + m * n);
      return std::max({kLaunchFloorS, time_for(flops, rate * kGemmEfficiency),
                       time_for(bytes, gpu.memory_bw)});
    }
  }

  // A grid-stride loop runs fewer threads than it has elements: an integer parameter larger than
  // the thread count that the launch's buffers can hold (one byte an element at least) is taken
  // as the element count. Asked only past the thread count, largest first.
  double items = static_cast<double>(shape.threads());
  if (hints.fits_in_a_buffer) {
    std::vector<int64_t> counts;
    for (int64_t v : signature_integers(signature))
      if (v > 0 && v < kMaxElementCount && static_cast<double>(v) > items) counts.push_back(v);
    std::sort(counts.rbegin(), counts.rend());
    for (int64_t v : counts) {
      if (hints.fits_in_a_buffer(static_cast<uint64_t>(v))) {
        items = static_cast<double>(v);
        break;
      }
    }
  }
  return std::max({kLaunchFloorS, time_for(items * kBytesPerThread, gpu.memory_bw),
                   time_for(items * kFlopsPerThread, gpu.fp32_flops)});
}

}  // namespace vgpu
