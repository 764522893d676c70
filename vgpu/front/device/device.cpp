#include "front/device/device.h"

#include <fmt/format.h>

#include "simcore/gpu_board.h"
#include "status/status_region.h"

namespace vgpu {
namespace {

// PCI buses of the eight GPUs of an HGX H100 board, so that tools that print bus ids see
// familiar values; further GPUs of a node continue above them.
constexpr int kHgxBuses[] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};

PciAddress pci_for(int node, int local) {
  const int bus = local < 8 ? kHgxBuses[local] : 0xdc + (local - 8);
  return {node, bus & 0xff, 0};  // one PCI domain per virtual node keeps bus ids unique
}

// Stable across the processes of a job and across runs: "vgpu" + node + local index + model,
// so that every rank agrees on which UUID is which device (NCCL compares them).
CUuuid uuid_for(int node, int local, const std::string& model_id) {
  CUuuid u{};
  const char tag[4] = {'v', 'g', 'p', 'u'};
  for (int i = 0; i < 4; ++i) u.bytes[i] = tag[i];
  uint32_t h = 2166136261u;  // FNV-1a of the model id
  for (char c : model_id) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  const uint32_t fields[3] = {static_cast<uint32_t>(node), static_cast<uint32_t>(local), h};
  for (int f = 0; f < 3; ++f)
    for (int b = 0; b < 4; ++b) u.bytes[4 + 4 * f + b] = static_cast<char>(fields[f] >> (24 - 8 * b));
  return u;
}

// HGX boards hang half of their GPUs off each of the two host sockets; a node of one GPU
// (as the machines the attribute tables were measured on) reports socket 0.
int host_numa_for(int local, int gpus_per_node) {
  return gpus_per_node >= 2 ? local * 2 / gpus_per_node : 0;
}

}  // namespace

std::string uuid_string(const CUuuid& uuid) {
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", static_cast<uint8_t>(uuid.bytes[i]));
  }
  return s;
}

// Measured on an H100 80GB HBM3 (132 SMs, driver 580): cuDeviceTotalMem 85,017,493,504 and
// cuMemGetInfo free 84,465,090,560 right after the primary context was created. Most of a
// context's reservation is per-SM (local memory for every resident thread, the per-SM
// scheduling state), so other models scale the H100 measurement by SM count.
uint64_t context_overhead_bytes(int sm_count) {
  constexpr uint64_t kH100ContextOverhead = 552'402'944;
  constexpr int kH100Sms = 132;
  if (sm_count <= 0) sm_count = kH100Sms;
  return kH100ContextOverhead * static_cast<uint64_t>(sm_count) / kH100Sms;
}

std::vector<status::DeviceInfo> status_devices(const simcore::ClusterSpec& cluster) {
  std::vector<status::DeviceInfo> out;
  for (int i = 0; i < cluster.total_gpus(); ++i) {
    Device d(cluster, i, nullptr);
    const simcore::GpuBoard& board = simcore::gpu_board(cluster.model);
    out.push_back({d.name(), uuid_string(d.uuid()), d.pci().to_string(), d.capacity(),
                   board.max_sm_clock, board.idle_sm_clock});
  }
  return out;
}

std::string PciAddress::to_string() const {
  return fmt::format("{:08x}:{:02x}:{:02x}.0", domain, bus, device);
}

Device::Device(const simcore::ClusterSpec& cluster, int gpu, status::Writer* status)
    : gpu_(gpu),
      node_(cluster.node_of(gpu)),
      local_(cluster.local_index(gpu)),
      host_numa_(host_numa_for(local_, cluster.gpus_per_node)),
      model_(&cluster.model),
      uuid_(uuid_for(node_, local_, cluster.model.id)),
      pci_(pci_for(node_, local_)),
      capacity_(cluster.memory_bytes ? cluster.memory_bytes : cluster.model.memory_bytes),
      status_(status) {}

CUresult Device::attribute(int attribute, int* value) const {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = pci_.bus; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = pci_.device; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *value = pci_.domain; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: *value = node_; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: *value = host_numa_; return CUDA_SUCCESS;
    default: break;
  }
  auto it = model_->attributes.find(attribute);
  if (it == model_->attributes.end()) return CUDA_ERROR_INVALID_VALUE;
  *value = it->second;
  return CUDA_SUCCESS;
}

bool Device::reserve(uint64_t bytes) {
  uint64_t cur = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > capacity_ - cur) return false;
  } while (!used_.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed));
  if (status_) status_->add_memory(gpu_, static_cast<int64_t>(bytes));
  return true;
}

void Device::release(uint64_t bytes) {
  used_.fetch_sub(bytes, std::memory_order_relaxed);
  if (status_) status_->add_memory(gpu_, -static_cast<int64_t>(bytes));
}

}  // namespace vgpu
