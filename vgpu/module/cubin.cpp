#include "module/cubin.h"

#include "module/fatbin.h"
#include "module/nv_info.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace vgpu::module {
namespace {

constexpr uint32_t kDefaultReservedShared = 1024;

uint32_t product(const std::array<uint32_t, 3>& d) {
  const uint64_t p = uint64_t{d[0]} * d[1] * d[2];
  return static_cast<uint32_t>(std::min<uint64_t>(p, UINT32_MAX));
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

class CubinReader {
 public:
  explicit CubinReader(std::span<const uint8_t> bytes) : elf_(bytes) {
    const auto& sections = elf_.sections();
    for (size_t i = 0; i < sections.size(); ++i) by_name_.emplace(sections[i].name, i);
    function_attrs_.resize(elf_.symbols().size());
    if (const ElfSection* info = find(".nv.info")) read_function_attributes(elf_.data(*info), function_attrs_);
    // Kernel info sections point (sh_info) at the kernel's .text section.
    kernel_info_.assign(sections.size(), nullptr);
    for (const ElfSection& s : sections)
      if (starts_with(s.name, ".nv.info.") && s.info < sections.size()) kernel_info_[s.info] = &s;
    reserved_shared_ = reserved_shared();
  }

  const ElfFile& elf() const { return elf_; }

  ModuleImage read() {
    ModuleImage image;
    bool any_entry = false;
    for (const ElfSymbol& s : elf_.symbols())
      any_entry |= s.type == kSttFunc && s.section != 0 && (s.other & kStoCudaEntry);
    std::unordered_set<std::string_view> seen;
    for (const ElfSymbol& s : elf_.symbols()) {
      if (s.type != kSttFunc || s.section == 0) continue;
      // Without entry flags (older toolkits) a function with its own info section is a kernel.
      const bool kernel = any_entry ? (s.other & kStoCudaEntry) != 0 : info_for(s) != nullptr;
      if (kernel && seen.insert(s.name).second) image.kernels.push_back(kernel_info(s));
    }
    seen.clear();
    for (const ElfSymbol& s : elf_.symbols()) {
      if (s.type != kSttObject || s.section == 0) continue;
      const ElfSection& sec = elf_.sections()[s.section];
      if (!starts_with(sec.name, ".nv.global") && !starts_with(sec.name, ".nv.constant")) continue;
      if (seen.insert(s.name).second) image.globals.push_back(global_info(s, sec));
    }
    return image;
  }

 private:
  const ElfSection* find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &elf_.sections()[it->second];
  }

  const ElfSection* info_for(const ElfSymbol& s) const {
    if (const ElfSection* info = kernel_info_[s.section]) return info;
    return find(".nv.info." + std::string(s.name));
  }

  uint32_t reserved_shared() const {
    bool reserves = find(".nv.shared.reserved.0") != nullptr;
    for (const ElfSymbol& s : elf_.symbols()) {
      // A cap of 0 is no size: cuBLASLt 13's sm_90 cutlass_75 kernels carry one beside a 1 KiB
      // .nv.shared.<name> and no static shared memory (an H200 answered their default
      // MAX_DYNAMIC_SHARED_SIZE_BYTES as 49152, driver 580.159.04, 2026-11-26): the default then.
      if (s.name == ".nv.reservedSmem.cap" && s.value > 0)
        return static_cast<uint32_t>(std::min<uint64_t>(s.value, UINT32_MAX));
      reserves |= starts_with(s.name, ".nv.reservedSmem");
    }
    return reserves ? kDefaultReservedShared : 0;
  }

  KernelInfo kernel_info(const ElfSymbol& s) const {
    KernelInfo k;
    k.name = std::string(s.name);
    KernelAttributes attrs;
    if (const ElfSection* info = info_for(s)) attrs = read_kernel_attributes(elf_.data(*info));

    std::sort(attrs.params.begin(), attrs.params.end(),
              [](const KernelParam& a, const KernelParam& b) { return a.ordinal < b.ordinal; });
    uint32_t end = 0;
    for (size_t i = 0; i < attrs.params.size(); ++i) {
      const KernelParam& p = attrs.params[i];
      if (p.ordinal != i) fail("kernel {}: parameter ordinals are not 0..{}", k.name, attrs.params.size() - 1);
      if (uint64_t{p.offset} + p.size > UINT32_MAX) fail("kernel {}: parameter {} overflows", k.name, i);
      k.params.push_back({p.offset, p.size});
      end = std::max<uint32_t>(end, p.offset + p.size);
    }
    k.param_bytes = attrs.param_bytes.value_or(attrs.param_cbank_size.value_or(end));
    if (end > k.param_bytes)
      fail("kernel {}: parameters end at byte {}, past the {}-byte parameter block", k.name, end, k.param_bytes);

    if (const ElfSection* shared = find(".nv.shared." + k.name)) {
      const uint64_t bytes = shared->size > reserved_shared_ ? shared->size - reserved_shared_ : 0;
      k.shared_bytes = static_cast<uint32_t>(std::min<uint64_t>(bytes, UINT32_MAX));
    }
    const FunctionAttributes& f = function_attrs_[s.index];
    k.local_bytes = f.frame_bytes;
    if (f.registers) {
      k.registers = *f.registers;
    } else {
      const uint32_t packed = elf_.sections()[s.section].info >> 24;
      if (packed != 0) k.registers = static_cast<int>(packed);
    }
    // 0xff is ptxas' "no cap" value.
    if (attrs.max_registers && *attrs.max_registers != 0xff) k.max_registers = *attrs.max_registers;
    k.max_ntid = attrs.max_ntid;
    k.req_ntid = attrs.req_ntid;
    k.cluster_dims = attrs.cluster_dims;
    k.max_threads = product(k.max_ntid) != 0 ? product(k.max_ntid) : product(k.req_ntid);
    k.barriers = attrs.barriers;
    return k;
  }

  GlobalInfo global_info(const ElfSymbol& s, const ElfSection& sec) const {
    GlobalInfo g;
    g.name = std::string(s.name);
    g.size = s.size;
    g.space = starts_with(sec.name, ".nv.constant") ? GlobalSpace::constant : GlobalSpace::global;
    g.managed = (s.other & kStoCudaManaged) != 0;
    // The variable lies inside its section, also in one without file bytes (.nv.global is
    // NOBITS): its size is what the driver allocates, so a flipped bit in the symbol must not
    // claim gigabytes the section never had.
    if (checked_add(s.value, s.size, "global variable") > sec.size)
      fail("ELF: global {} [{}, +{}) lies outside its section {} of {} bytes", s.name, s.value, s.size,
           sec.name, sec.size);
    if (sec.type != kShtNobits) {
      const ByteView bytes = elf_.data(sec).sub(s.value, s.size, "global variable initialiser");
      g.init.assign(bytes.data(), bytes.data() + bytes.size());
    }
    return g;
  }

  ElfFile elf_;
  std::unordered_map<std::string_view, size_t> by_name_;
  std::vector<FunctionAttributes> function_attrs_;
  std::vector<const ElfSection*> kernel_info_;
  uint32_t reserved_shared_ = 0;
};

}  // namespace

int cubin_arch(const ElfFile& elf) {
  // ELF ABI version 8 (CUDA 13, OS ABI 0x41) moved the SM number from bits 0..7 to 8..15.
  if (elf.os_abi() == 0x41 || elf.abi_version() >= 8) return static_cast<int>((elf.flags() >> 8) & 0xff);
  return static_cast<int>(elf.flags() & 0xff);
}

ModuleImage parse_cubin(std::span<const uint8_t> bytes, int check_sm_arch) {
  CubinReader reader(bytes);
  const int arch = cubin_arch(reader.elf());
  if (check_sm_arch > 0 && arch > 0 && !sass_runs_on(static_cast<uint32_t>(arch), false, check_sm_arch))
    fail_kind(ErrorKind::no_binary_for_gpu, "cubin built for sm_{} cannot run on sm_{}", arch, check_sm_arch);
  ModuleImage image = reader.read();
  image.sm_arch = arch;
  image.kind = ImageKind::cubin;
  return image;
}

}  // namespace vgpu::module
