#include "exec/kernel_time_model.h"

#include <algorithm>
#include <cctype>
#include <string>

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

double KernelTimeModel::estimate(const GpuFigures& gpu, const LaunchSignature& signature) {
  std::string name;
  LaunchShape shape;
  if (!decode_signature_header(signature, &name, &shape)) return kLaunchFloorS;
  const std::string lname = lower(name);

  if (has(lname, "gemm") || has(lname, "matmul")) {
    std::vector<int64_t> dims;
    for (int64_t v : signature_integers(signature)) {
      if (v > 0 && v <= kMaxGemmDim) dims.push_back(v);
      if (dims.size() == 3) break;
    }
    if (dims.size() == 3) {
      const double m = static_cast<double>(dims[0]), n = static_cast<double>(dims[1]),
                   k = static_cast<double>(dims[2]);
      double rate = gpu.fp32_flops, elem = 4;
      if (has(lname, "bf16") || has(lname, "fp16") || has(lname, "half") || has(lname, "hgemm")) {
        rate = gpu.bf16_tensor_flops, elem = 2;
      } else if (has(lname, "tf32")) {
        rate = gpu.tf32_tensor_flops;
      }
      const double flops = 2 * m * n * k;
      const double bytes = elem * (m * k + k * n + m * n);
      return std::max({kLaunchFloorS, time_for(flops, rate * kGemmEfficiency),
                       time_for(bytes, gpu.memory_bw)});
    }
  }

  const double threads = static_cast<double>(shape.threads());
  return std::max({kLaunchFloorS, time_for(threads * kBytesPerThread, gpu.memory_bw),
                   time_for(threads * kFlopsPerThread, gpu.fp32_flops)});
}

}  // namespace vgpu
