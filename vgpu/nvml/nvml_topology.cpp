// NVLink, topology, P2P, affinity and field values: what NCCL's topology detection reads.
//
// The virtual NVLink fabric follows the configured cluster ([nvlink] present / nvswitch):
//  - with an NVSwitch, every GPU has the model's link count (18 on H100) and link l goes to
//    switch l % 4 of its node; a switch shows up as PCI address <node>:<0x05 + s>:00.0 (below
//    the GPU buses), remote device type SWITCH;
//    In a cluster of more than Library::kMaxEnumerated GPUs every link goes to switch 0 of the
//    node: NCCL sees every rank of a job on one host and fuses their topologies into one of at
//    most 256 XML elements; four switch targets per GPU (6 elements a GPU) overflow that at 64
//    GPUs, one (3 a GPU) fits. NCCL merges a node's NVSwitches into one anyway;
//  - without a switch, link l goes straight to peer (local + 1 + l % (n - 1)) % n of the node;
//  - without NVLink (or with one GPU and no switch) a GPU has no links.
// Topology: the same device is INTERNAL, devices of one virtual node are NODE (one host, one
// NUMA domain as far as a virtual device can tell), devices of different virtual nodes SYSTEM
// (they are on different hosts; NVML would never list them together on real hardware).
// P2P within a node: OK for every capability over NVLink; over PCIe only read/write/PCI.
// Between nodes: NOT_SUPPORTED. CPU and memory affinity: every CPU and NUMA node of this host.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "nvml/nvml_library.h"

using vgpu::nvml::Library;

namespace {

constexpr unsigned kSwitchesPerNode = 4;
constexpr unsigned kFirstSwitchBus = 0x05;

unsigned link_count(const nvmlDevice_st& d) {
  const Library& lib = Library::get();
  if (!lib.nvlink().present || d.facts.model == nullptr) return 0;
  if (!lib.nvlink().nvswitch && lib.devices_on_node(d) < 2) return 0;
  return static_cast<unsigned>(std::min(d.facts.model->nvlink_links, NVML_NVLINK_MAX_LINKS));
}

unsigned nvlink_version(const nvmlDevice_st& d) {
  switch (d.facts.model ? d.facts.model->cc_major : 0) {
    case 8: return NVML_NVLINK_VERSION_3_0;
    case 9: return NVML_NVLINK_VERSION_4_0;
    default: return NVML_NVLINK_VERSION_5_0;
  }
}

// Speed of one link in MB/s (per direction): the model's aggregate over its links.
unsigned link_speed_mbps(const nvmlDevice_st& d) {
  const unsigned links = link_count(d);
  const double bw = Library::get().nvlink().bw_per_gpu > 0 ? Library::get().nvlink().bw_per_gpu
                                                             : (d.facts.model ? d.facts.model->nvlink_bw : 0);
  return links ? static_cast<unsigned>(bw / links / 1e6) : 0;
}

// The peer at the other end of `link` when there is no switch.
const nvmlDevice_st* direct_peer(const nvmlDevice_st& d, unsigned link) {
  const Library& lib = Library::get();
  const int n = lib.devices_on_node(d);
  const int want = (d.facts.local + 1 + static_cast<int>(link) % (n - 1)) % n;
  for (const nvmlDevice_st& other : lib.devices())
    if (other.facts.node == d.facts.node && other.facts.local == want) return &other;
  return nullptr;
}

// Validates device, link and output; the link must exist on the device.
nvmlReturn_t check_link(nvmlDevice_t device, unsigned link, const void* out) {
  if (nvmlReturn_t r = Library::get().check(device); r != NVML_SUCCESS) return r;
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned links = link_count(*device);
  if (links == 0) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= links) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

void set_bits(unsigned long* set, unsigned size, unsigned bit) {
  const unsigned per = 8 * sizeof(unsigned long);
  if (bit / per < size) set[bit / per] |= 1ul << (bit % per);
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t* isActive) {
  if (nvmlReturn_t r = check_link(device, link, isActive); r != NVML_SUCCESS) return r;
  *isActive = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link, unsigned int* version) {
  if (nvmlReturn_t r = check_link(device, link, version); r != NVML_SUCCESS) return r;
  *version = nvlink_version(*device);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link,
                                           nvmlNvLinkCapability_t capability, unsigned int* capResult) {
  if (nvmlReturn_t r = check_link(device, link, capResult); r != NVML_SUCCESS) return r;
  switch (capability) {
    case NVML_NVLINK_CAP_P2P_SUPPORTED:
    case NVML_NVLINK_CAP_P2P_ATOMICS:
    case NVML_NVLINK_CAP_VALID: *capResult = 1; return NVML_SUCCESS;
    case NVML_NVLINK_CAP_SYSMEM_ACCESS:
    case NVML_NVLINK_CAP_SYSMEM_ATOMICS:
    case NVML_NVLINK_CAP_SLI_BRIDGE: *capResult = 0; return NVML_SUCCESS;
    default: return NVML_ERROR_INVALID_ARGUMENT;
  }
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci) {
  if (nvmlReturn_t r = check_link(device, link, pci); r != NVML_SUCCESS) return r;
  const nvmlDevice_st& d = *device;
  if (!Library::get().nvlink().nvswitch) {
    const nvmlDevice_st* peer = direct_peer(d, link);
    if (peer == nullptr) return NVML_ERROR_UNKNOWN;
    return nvmlDeviceGetPciInfo_v3(const_cast<nvmlDevice_t>(peer), pci);
  }
  std::memset(pci, 0, sizeof *pci);
  pci->domain = d.facts.pci_domain;
  const bool one_switch = Library::get().devices().size() > Library::kMaxEnumerated;
  pci->bus = kFirstSwitchBus + (one_switch ? 0 : link % kSwitchesPerNode);
  pci->device = 0;
  pci->pciDeviceId = 0x22A310DE;  // NVSwitch (third generation, as on HGX H100)
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", pci->domain & 0xffff,
                pci->bus, pci->device);
  std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", pci->domain, pci->bus, pci->device);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci) {
  return nvmlDeviceGetNvLinkRemotePciInfo_v2(device, link, pci);
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t* type) {
  if (nvmlReturn_t r = check_link(device, link, type); r != NVML_SUCCESS) return r;
  *type = Library::get().nvlink().nvswitch ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t* pathInfo) {
  Library& lib = Library::get();
  if (nvmlReturn_t r = lib.check(device1); r != NVML_SUCCESS) return r;
  if (nvmlReturn_t r = lib.check(device2); r != NVML_SUCCESS) return r;
  if (pathInfo == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *pathInfo = device1 == device2                            ? NVML_TOPOLOGY_INTERNAL
              : device1->facts.node == device2->facts.node ? NVML_TOPOLOGY_NODE
                                                            : NVML_TOPOLOGY_SYSTEM;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuP2PCapsIndex_t p2pIndex,
                                    nvmlGpuP2PStatus_t* p2pStatus) {
  Library& lib = Library::get();
  if (nvmlReturn_t r = lib.check(device1); r != NVML_SUCCESS) return r;
  if (nvmlReturn_t r = lib.check(device2); r != NVML_SUCCESS) return r;
  if (p2pStatus == nullptr || p2pIndex < NVML_P2P_CAPS_INDEX_READ || p2pIndex >= NVML_P2P_CAPS_INDEX_UNKNOWN)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (device1->facts.node != device2->facts.node) {
    *p2pStatus = NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED;
    return NVML_SUCCESS;
  }
  const bool nvlink = link_count(*device1) > 0 && link_count(*device2) > 0;
  switch (p2pIndex) {
    case NVML_P2P_CAPS_INDEX_READ:
    case NVML_P2P_CAPS_INDEX_WRITE:
    case NVML_P2P_CAPS_INDEX_PCI: *p2pStatus = NVML_P2P_STATUS_OK; break;
    default: *p2pStatus = nvlink ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED; break;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device, unsigned int cpuSetSize,
                                                 unsigned long* cpuSet, nvmlAffinityScope_t scope) {
  if (nvmlReturn_t r = Library::get().check(device); r != NVML_SUCCESS) return r;
  if (cpuSet == nullptr || cpuSetSize == 0 || scope > NVML_AFFINITY_SCOPE_SOCKET) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(cpuSet, 0, sizeof(unsigned long) * cpuSetSize);
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  for (long c = 0; c < std::max(cpus, 1L); ++c) set_bits(cpuSet, cpuSetSize, static_cast<unsigned>(c));
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize, unsigned long* cpuSet) {
  return nvmlDeviceGetCpuAffinityWithinScope(device, cpuSetSize, cpuSet, NVML_AFFINITY_SCOPE_NODE);
}

nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize, unsigned long* nodeSet,
                                         nvmlAffinityScope_t scope) {
  if (nvmlReturn_t r = Library::get().check(device); r != NVML_SUCCESS) return r;
  if (nodeSet == nullptr || nodeSetSize == 0 || scope > NVML_AFFINITY_SCOPE_SOCKET) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(nodeSet, 0, sizeof(unsigned long) * nodeSetSize);
  set_bits(nodeSet, nodeSetSize, 0);
  if (DIR* dir = opendir("/sys/devices/system/node")) {
    while (dirent* e = readdir(dir)) {
      unsigned n = 0;
      char tail = 0;
      if (std::sscanf(e->d_name, "node%u%c", &n, &tail) == 1) set_bits(nodeSet, nodeSetSize, n);
    }
    closedir(dir);
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t* values) {
  if (nvmlReturn_t r = Library::get().check(device); r != NVML_SUCCESS) return r;
  if (valuesCount < 0 || (valuesCount > 0 && values == nullptr)) return NVML_ERROR_INVALID_ARGUMENT;
  const nvmlDevice_st& d = *device;
  const unsigned links = link_count(d);
  const long long now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
  for (int i = 0; i < valuesCount; ++i) {
    nvmlFieldValue_t& v = values[i];
    v.timestamp = now_us;
    v.latencyUsec = 0;
    v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
    v.value.ullVal = 0;
    v.nvmlReturn = NVML_SUCCESS;
    const bool per_link_ok = v.scopeId < links;
    switch (v.fieldId) {
      case NVML_FI_DEV_NVLINK_LINK_COUNT: v.value.uiVal = links; break;
      case NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT:
        v.value.uiVal = Library::get().nvlink().nvswitch ? links : 0;
        break;
      case NVML_FI_DEV_C2C_LINK_COUNT: v.value.uiVal = 0; break;
      case NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON:
        if (links == 0) v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        else v.value.uiVal = link_speed_mbps(d);
        break;
      case NVML_FI_DEV_NVLINK_GET_SPEED:
      case NVML_FI_DEV_NVLINK_GET_STATE:
      case NVML_FI_DEV_NVLINK_GET_VERSION:
        if (links == 0) v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        else if (!per_link_ok) v.nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
        else if (v.fieldId == NVML_FI_DEV_NVLINK_GET_SPEED) v.value.uiVal = link_speed_mbps(d);
        else if (v.fieldId == NVML_FI_DEV_NVLINK_GET_STATE) v.value.uiVal = NVML_FEATURE_ENABLED;
        else v.value.uiVal = nvlink_version(d);
        break;
      default: v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED; break;
    }
  }
  return NVML_SUCCESS;
}

}  // extern "C"
