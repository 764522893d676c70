#include "module/nv_info.h"

namespace vgpu::module {
namespace {

std::array<uint32_t, 3> read_dims(const NvInfoRecord& r) {
  if (r.payload.size() < 12) fail("EIATTR {:#x}: {}-byte payload, expected 12", r.attribute, r.payload.size());
  return {r.payload.u32(0, "EIATTR dims"), r.payload.u32(4, "EIATTR dims"), r.payload.u32(8, "EIATTR dims")};
}

}  // namespace

std::vector<NvInfoRecord> read_nv_info(const ByteView& section) {
  std::vector<NvInfoRecord> records;
  uint64_t pos = 0;
  while (pos < section.size()) {
    NvInfoRecord r;
    r.format = section.u8(pos, "EIATTR record");
    r.attribute = section.u8(pos + 1, "EIATTR record");
    const uint16_t half = section.u16(pos + 2, "EIATTR record");
    pos += 4;
    switch (r.format) {
      case kEifmtNval:
        break;
      case kEifmtBval:
      case kEifmtHval:
        r.value = r.format == kEifmtBval ? static_cast<uint16_t>(half & 0xff) : half;
        break;
      case kEifmtSval:
        r.payload = section.sub(pos, half, "EIATTR payload");
        pos += half;
        break;
      default:
        fail("EIATTR record at offset {} has unknown format {}", pos - 4, r.format);
    }
    pos = (pos + 3) & ~uint64_t{3};
    records.push_back(r);
  }
  return records;
}

KernelAttributes read_kernel_attributes(const ByteView& section) {
  KernelAttributes a;
  for (const NvInfoRecord& r : read_nv_info(section)) {
    const bool sval = r.format == kEifmtSval;
    switch (r.attribute) {
      case kEiattrKparamInfo:
      case kEiattrKparamInfoV2: {
        if (!sval || r.payload.size() < 12) fail("EIATTR_KPARAM_INFO: malformed record");
        KernelParam p;
        p.ordinal = r.payload.u16(4, "KPARAM_INFO");
        p.offset = r.payload.u16(6, "KPARAM_INFO");
        const uint32_t word = r.payload.u32(8, "KPARAM_INFO");
        // V1 packs the size into the top 14 bits (the low bits hold alignment and bank);
        // V2, used once a parameter outgrows that, keeps it in the low 16 bits (sm_100 sets
        // flags in the top byte; parameters never exceed 32764 bytes).
        p.size = r.attribute == kEiattrKparamInfo ? (word >> 18) & 0x3fff : word & 0xffff;
        a.params.push_back(p);
        break;
      }
      case kEiattrCbankParamSize:
        if (r.format != kEifmtHval) fail("EIATTR_CBANK_PARAM_SIZE: malformed record");
        a.param_bytes = r.value;
        break;
      case kEiattrParamCbank:
        // u32 symbol of the bank section, u16 offset of the parameters in it, u16 their size.
        if (!sval || r.payload.size() < 8) fail("EIATTR_PARAM_CBANK: malformed record");
        a.param_cbank_size = r.payload.u16(6, "PARAM_CBANK");
        break;
      case kEiattrMaxregCount:
        if (r.format == kEifmtHval || r.format == kEifmtBval) a.max_registers = r.value;
        break;
      case kEiattrMaxThreads:
        if (sval) a.max_ntid = read_dims(r);
        break;
      case kEiattrReqntid:
        if (sval) a.req_ntid = read_dims(r);
        break;
      case kEiattrCtaPerCluster:
        if (sval) a.cluster_dims = read_dims(r);
        break;
      case kEiattrNumBarriers:
        if (r.format == kEifmtHval || r.format == kEifmtBval) a.barriers = r.value;
        break;
      default:
        break;  // everything else (exit offsets, SW workarounds, ...) says nothing we report
    }
  }
  return a;
}

void read_function_attributes(const ByteView& section, std::span<FunctionAttributes> attrs) {
  for (const NvInfoRecord& r : read_nv_info(section)) {
    if (r.format != kEifmtSval) continue;
    if (r.attribute != kEiattrRegcount && r.attribute != kEiattrFrameSize && r.attribute != kEiattrMinStackSize &&
        r.attribute != kEiattrMaxStackSize)
      continue;
    if (r.payload.size() < 8) fail("EIATTR {:#x}: {}-byte payload, expected 8", r.attribute, r.payload.size());
    const uint32_t symbol = r.payload.u32(0, "EIATTR symbol");
    const uint32_t value = r.payload.u32(4, "EIATTR value");
    if (symbol >= attrs.size()) continue;  // names a symbol that does not exist: ignore
    FunctionAttributes& f = attrs[symbol];
    switch (r.attribute) {
      case kEiattrRegcount: f.registers = static_cast<int>(value & 0xffff); break;
      case kEiattrFrameSize: f.frame_bytes = value; break;
      case kEiattrMinStackSize: f.min_stack_bytes = value; break;
      default: f.max_stack_bytes = value; break;
    }
  }
}

}  // namespace vgpu::module
