#include "front/driver/query_lines.h"

#include <fmt/format.h>

#include <sys/uio.h>
#include <unistd.h>

#include <cstring>

#include "front/driver/entry_points.h"
#include "simcore/gpu_catalog.h"

namespace vgpu::query_trace {
namespace {

const char* or_unknown(const char* s) { return s != nullptr && s[0] != '\0' ? s : "?"; }

// The answer's text, read only after a successful call.
template <class T> std::string answer(CUresult r, const T* value) {
  return r == CUDA_SUCCESS && value != nullptr ? fmt::format("{}", *value) : std::string();
}

std::string_view without_prefix(const char* name, std::string_view prefix) {
  std::string_view n = name;
  if (n.substr(0, prefix.size()) == prefix) n.remove_prefix(prefix.size());
  return n;
}

}  // namespace

std::string device_attribute_text(int attr) {
  const char* name = simcore::cu_device_attribute_name(attr);
  if (name == nullptr) return fmt::format("{}", attr);
  return fmt::format("{}({})", without_prefix(name, "CU_DEVICE_ATTRIBUTE_"), attr);
}

std::string function_attribute_text(int attr) {
  static constexpr const char* kNames[] = {
      "MAX_THREADS_PER_BLOCK", "SHARED_SIZE_BYTES", "CONST_SIZE_BYTES", "LOCAL_SIZE_BYTES",
      "NUM_REGS", "PTX_VERSION", "BINARY_VERSION", "CACHE_MODE_CA",
      "MAX_DYNAMIC_SHARED_SIZE_BYTES", "PREFERRED_SHARED_MEMORY_CARVEOUT",
      "CLUSTER_SIZE_MUST_BE_SET", "REQUIRED_CLUSTER_WIDTH", "REQUIRED_CLUSTER_HEIGHT",
      "REQUIRED_CLUSTER_DEPTH", "NON_PORTABLE_CLUSTER_SIZE_ALLOWED",
      "CLUSTER_SCHEDULING_POLICY_PREFERENCE"};
  static_assert(std::size(kNames) == CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE + 1);
  if (attr >= 0 && attr < static_cast<int>(std::size(kNames))) return fmt::format("{}({})", kNames[attr], attr);
  return fmt::format("{}", attr);
}

std::string launch_config_text(const CUlaunchConfig* c) {
  if (c == nullptr) return "config=null";
  std::string out = fmt::format("grid={}x{}x{} block={}x{}x{} smem={} attrs=[", c->gridDimX, c->gridDimY,
                                c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ, c->sharedMemBytes);
  for (unsigned i = 0; i < c->numAttrs && c->attrs != nullptr; ++i) {
    const CUlaunchAttribute& a = c->attrs[i];
    if (i > 0) out += ' ';
    switch (a.id) {
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        out += fmt::format("CLUSTER_DIMENSION(4)={}x{}x{}", a.value.clusterDim.x, a.value.clusterDim.y,
                           a.value.clusterDim.z);
        break;
      case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
        out += fmt::format("PREFERRED_CLUSTER_DIMENSION(11)={}x{}x{}", a.value.preferredClusterDim.x,
                           a.value.preferredClusterDim.y, a.value.preferredClusterDim.z);
        break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        out += fmt::format("CLUSTER_SCHEDULING_POLICY_PREFERENCE(5)={}",
                           static_cast<int>(a.value.clusterSchedulingPolicyPreference));
        break;
      default: {
        // Unknown to this table: the first four 32-bit words of the value (no attribute of
        // cuda.h 13 with a pointer in them is one a query takes).
        unsigned w[4];
        static_assert(sizeof(a.value) >= sizeof(w));
        std::memcpy(w, &a.value, sizeof(w));
        out += fmt::format("{}={:#x},{:#x},{:#x},{:#x}", static_cast<int>(a.id), w[0], w[1], w[2], w[3]);
      }
    }
  }
  out += ']';
  return out;
}

void line(std::string_view api, std::string_view args, CUresult r, std::string_view answer) {
  if (!enabled()) return;
  std::string text = fmt::format("{}{}{} -> {}", api, args.empty() ? "" : " ", args, error_name(r));
  if (r == CUDA_SUCCESS && !answer.empty()) text += fmt::format(" {}", answer);
  write_line(text);
}

void device_attribute(int dev, int attr, CUresult r, const int* value) {
  line("cuDeviceGetAttribute", fmt::format("dev={} attr={}", dev, device_attribute_text(attr)), r, answer(r, value));
}

void function_attribute(const char* api, const char* fn, int dev, int attr, CUresult r, const int* value) {
  const std::string device = dev >= 0 ? fmt::format(" dev={}", dev) : std::string();
  line(api, fmt::format("fn={}{} attr={}", or_unknown(fn), device, function_attribute_text(attr)), r,
       answer(r, value));
}

void set_function_attribute(const char* api, const char* fn, int dev, int attr, int value, CUresult r) {
  const std::string device = dev >= 0 ? fmt::format(" dev={}", dev) : std::string();
  line(api, fmt::format("fn={}{} attr={} value={}", or_unknown(fn), device, function_attribute_text(attr), value),
       r);
}

void max_active_blocks(const char* api, const char* fn, int block, size_t smem, unsigned flags, CUresult r,
                       const int* blocks) {
  line(api, fmt::format("fn={} block={} smem={} flags={}", or_unknown(fn), block, smem, flags), r,
       answer(r, blocks));
}

void max_potential_block_size(const char* api, const char* fn, bool smem_callback, size_t smem,
                              int block_limit, unsigned flags, CUresult r, const int* min_grid,
                              const int* block) {
  line(api,
       fmt::format("fn={} smem={} limit={} flags={}", or_unknown(fn),
                   smem_callback ? std::string("callback") : fmt::format("{}", smem), block_limit, flags),
       r, r == CUDA_SUCCESS ? fmt::format("min_grid={} block={}", *min_grid, *block) : std::string());
}

void available_dynamic_smem(const char* fn, int blocks, int block, CUresult r, const size_t* bytes) {
  line("cuOccupancyAvailableDynamicSMemPerBlock",
       fmt::format("fn={} blocks={} block={}", or_unknown(fn), blocks, block), r, answer(r, bytes));
}

void cluster_query(const char* api, const char* fn, const CUlaunchConfig* config, CUresult r,
                   const int* value) {
  line(api, fmt::format("fn={} {}", or_unknown(fn), launch_config_text(config)), r, answer(r, value));
}

void mem_info(CUresult r, const size_t* free, const size_t* total) {
  line("cuMemGetInfo", {}, r,
       fmt::format("free={} total={}", answer(r, free), answer(r, total)));
}

void context_limit(int limit, CUresult r, const size_t* value) {
  line("cuCtxGetLimit", fmt::format("limit={}", limit), r, answer(r, value));
}

void lookup(const char* api, const char* name, CUresult r) {
  line(api, fmt::format("name={}", name != nullptr ? name : "null"), r);
}

void load(const char* api, CUresult r) { line(api, {}, r); }

namespace {

bool looks_like_address(uint64_t v) { return v >= 0x10000 && v < 0x800000000000ull; }

std::string word_text(uint64_t v) {
  if (looks_like_address(v)) return "p";
  return v < 0x10000 ? fmt::format("{}", v) : fmt::format("{:#x}", v);
}

// Reads `n` bytes at `address` of this process without faulting; false where nothing is mapped.
bool read_safely(uintptr_t address, void* out, size_t n) {
  iovec local{out, n};
  iovec remote{reinterpret_cast<void*>(address), n};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

// The 16 bytes as a quoted string when they start with at least 4 printable characters (a name
// a library passes, say), else "".
std::string text_at(const uint64_t (&words)[2]) {
  char bytes[sizeof words];
  std::memcpy(bytes, words, sizeof bytes);
  size_t n = 0;
  while (n < sizeof bytes && bytes[n] >= 0x20 && bytes[n] < 0x7f) ++n;
  if (n < 4 || (n < sizeof bytes && bytes[n] != '\0')) return {};
  return fmt::format("\"{}{}\"", std::string_view(bytes, n), n == sizeof bytes ? "..." : "");
}

}  // namespace

void private_slot(std::string_view table, size_t slot, const uintptr_t (&regs)[6], uint64_t result) {
  if (!enabled()) return;
  std::string args, out;
  for (int i = 0; i < 6; ++i) {
    args += (i ? "," : "") + word_text(regs[i]);
    if (result != 0 || !looks_like_address(regs[i])) continue;
    uint64_t words[2];
    out += fmt::format("{}a{}:", out.empty() ? "" : " ", i);
    uint8_t probe = 0;
    if (!read_safely(regs[i], words, sizeof words)) {
      out += "?";
    } else if (const std::string text = text_at(words);
               !text.empty() && !(looks_like_address(words[0]) && read_safely(words[0], &probe, 1))) {
      // A string, unless its bytes are a mapped address (a heap address's low 6 bytes are often
      // printable characters followed by two zeros).
      out += text;
    } else {
      out += word_text(words[0]) + "," + word_text(words[1]);
    }
  }
  std::string text = fmt::format("private {}[{}] args={} -> {}", table, slot, args, result);
  if (!out.empty()) text += fmt::format(" out=[{}]", out);
  write_line(text);
}

}  // namespace vgpu::query_trace
