#include "front/launch/kernel_time_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
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

// M, N, K of a library GEMM that passes them inside a parameter struct (cuBLAS), as the product
// M*N*K (0: none found). Two layouts are recognised, and the larger product is taken (the
// fallback must never time a GEMM faster than the hardware could run it):
// - three consecutive words that are all sizes (xmma/CUTLASS parameter blocks: M, N, K);
// - TMA descriptors (nvjet): 8-byte-aligned pairs of "size - 1" words, whose distinct sizes
//   are the GEMM's dimensions.
// A word that is the upper half of a host pointer (its lower half is no size) is no size.
// With `fits` (the launch's buffers known), a candidate M, N, K counts only when at least two of
// its three matrices (M*K, K*N, M*N, one byte an element at least) fit in one of the launch's
// buffers: a GEMM's output and one operand are always in memory (an implicit-GEMM convolution
// builds only its input operand on the fly), while strides and byte counts side by side in a
// parameter block (cuDNN's, 917504 x 16384 x 256) describe no matrices that exist: taken as
// sizes they timed a 7-GFLOP convolution at 834 ms.
// `max_outputs` (0: unknown): the most outputs the grid computes (a tile kernel's blocks times
// its tile, from a name such as xmma's "tilesize64x64x32"): some pairing of the three sizes must
// give an output that small. cuDNN's weight-gradient kernel (126 blocks of 64x64 tiles) carries
// 14336 x 14336 x 16384 in its words.
double struct_gemm_volume(const LaunchSignature& signature, int64_t max_dim,
                          const std::function<bool(uint64_t)>& fits, double max_outputs) {
  double best = 0;
  auto is_dim = [max_dim](uint32_t v) { return v >= 1 && v <= static_cast<uint64_t>(max_dim); };
  auto plausible = [&fits, max_outputs](double m, double n, double k) {
    if (max_outputs > 0 && std::min({m * n, n * k, m * k}) > max_outputs) return false;
    if (!fits) return true;
    const int held = int(fits(static_cast<uint64_t>(m * k))) + int(fits(static_cast<uint64_t>(k * n))) +
                     int(fits(static_cast<uint64_t>(m * n)));
    return held >= 2;
  };
  for (const std::vector<uint32_t>& w : signature_struct_words(signature)) {
    auto size_at = [&](size_t i) {
      if (!is_dim(w[i])) return false;
      return i % 2 == 0 || is_dim(w[i - 1]) || w[i - 1] == 0;
    };
    for (size_t i = 0; i + 2 < w.size(); ++i)
      if (size_at(i) && size_at(i + 1) && size_at(i + 2) && plausible(w[i], w[i + 1], w[i + 2]))
        best = std::max(best, double(w[i]) * w[i + 1] * w[i + 2]);
    std::vector<double> dims;
    for (size_t i = 0; i + 1 < w.size(); i += 2) {
      for (uint32_t v : {w[i], w[i + 1]}) {
        const uint64_t d = uint64_t{v} + 1;
        if (v >= 15 && d % 8 == 0 && is_dim(v) && std::find(dims.begin(), dims.end(), double(d)) == dims.end() &&
            (uint64_t{w[i]} + 1) % 8 == 0 && (uint64_t{w[i + 1]} + 1) % 8 == 0 && w[i] >= 15 && w[i + 1] >= 15)
          dims.push_back(double(d));
      }
    }
    std::sort(dims.rbegin(), dims.rend());
    double m = 0, n = 0, k = 0;
    if (dims.size() >= 3) m = dims[0], n = dims[1], k = dims[2];
    else if (dims.size() == 2) m = dims[0], n = dims[1], k = dims[1];
    else if (dims.size() == 1) m = n = k = dims[0];
    if (m > 0 && plausible(m, n, k)) best = std::max(best, m * n * k);
  }
  return best;
}

}  // namespace

double KernelTimeModel::estimate(const GpuFigures& gpu, const LaunchSignature& signature,
                                 const LaunchHints& hints) {
  std::string name;
  LaunchShape shape;
  if (!decode_signature_header(signature, &name, &shape)) return kLaunchFloorS;
  const std::string lname = lower(name);

  // Tensor-core kernels by name: WMMA/HMMA fragments, cuBLAS's nvjet kernels.
  const bool tensor_fragments = has(lname, "wmma") || has(lname, "hmma") || has(lname, "nvjet");
  // A launch of less than a warp is no GEMM (cuDNN's one-thread workspace initialiser is named
  // after the implicit GEMM it serves).
  if ((has(lname, "gemm") || has(lname, "matmul") || has(lname, "xmma") || has(lname, "cutlass") ||
       tensor_fragments) && shape.threads() >= 32) {
    double rate = gpu.fp32_flops, elem = 4;
    if (has(lname, "tf32")) {
      rate = gpu.tf32_tensor_flops;
    } else if (has(lname, "bf16") || has(lname, "fp16") || has(lname, "half") || has(lname, "hgemm") ||
               tensor_fragments) {
      rate = gpu.bf16_tensor_flops, elem = 2;
    }
    std::vector<int64_t> dims;
    for (int64_t v : signature_integers(signature)) {
      if (v > 0 && v <= kMaxGemmDim) dims.push_back(v);
      if (dims.size() == 3) break;
    }
    if (dims.size() == 3) {
      const double m = static_cast<double>(dims[0]), n = static_cast<double>(dims[1]),
                   k = static_cast<double>(dims[2]);
      const double flops = 2 * m * n * k;
      const double bytes = elem * (m * k + k * n + m * n);
      return std::max({kLaunchFloorS, time_for(flops, rate * kGemmEfficiency),
                       time_for(bytes, gpu.memory_bw)});
    }
    // Library GEMMs pass their sizes in a parameter struct: only the volume is known, so the
    // bytes are those of a cube of that volume (never more than the real three matrices).
    // A tile kernel that is not persistent covers its output with its blocks.
    double max_outputs = 0;
    const size_t at = lname.find("tilesize");
    unsigned tile_m = 0, tile_n = 0;
    if (at != std::string::npos && !has(lname, "persistent") &&
        std::sscanf(lname.c_str() + at, "tilesize%ux%u", &tile_m, &tile_n) == 2)
      max_outputs = static_cast<double>(shape.blocks()) * tile_m * tile_n;
    const double volume = struct_gemm_volume(hints.unmasked ? hints.unmasked() : signature, kMaxGemmDim,
                                             hints.fits_in_a_buffer, max_outputs);
    if (volume > 0) {
      const double side = std::cbrt(volume);
      return std::max({kLaunchFloorS, time_for(2 * volume, rate * kGemmEfficiency),
                       time_for(elem * 3 * side * side, gpu.memory_bw)});
    }
  }

  // cuFFT's kernels each handle n elements a thread (the template argument EPT<n>, in the mangled
  // name as "EPTIJLj<n>E"), each read and written once as a complex value: 8 + 8 bytes in single
  // precision, twice that in double (the element type "d" after the sizes' "j"). Timed by their
  // threads alone, a pass over a 2^24-point transform took 5 us where its 256 MiB of traffic
  // takes 80 us.
  const size_t ept = name.find("EPTIJLj");
  unsigned per_thread = 0;
  if (ept != std::string::npos && std::sscanf(name.c_str() + ept, "EPTIJLj%uE", &per_thread) == 1 &&
      per_thread > 0 && per_thread <= 1024) {
    const double bytes_each = kBytesPerThread * (name.find("Ejd") != std::string::npos ? 2 : 1);
    const double elements = static_cast<double>(shape.threads()) * per_thread;
    return std::max({kLaunchFloorS, time_for(elements * bytes_each, gpu.memory_bw),
                     time_for(elements * kFlopsPerThread, gpu.fp32_flops)});
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
