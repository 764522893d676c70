// Clocks, power, temperature, performance state, ECC, BAR1, board strings, samples and
// per-process utilization: every answer from the device report (nvml/device_report.h), i.e. the
// catalog's board figures and the simulated activity, as a real H100 of the model would give
// them. What an SXM board does not have (a fan) stays NVML_ERROR_NOT_SUPPORTED, as on the real
// part.
#include <sys/time.h>

#include <algorithm>
#include <cstring>

#include "nvml/device_report.h"
#include "nvml/nvml_library.h"

using vgpu::inspect::DeviceReport;
using vgpu::nvml::copy_string;
using vgpu::nvml::Library;

namespace {

#define VGPU_NVML_DEVICE(device, out)                                               \
  if (nvmlReturn_t r_ = Library::get().check(device); r_ != NVML_SUCCESS) return r_; \
  if ((out) == nullptr) return NVML_ERROR_INVALID_ARGUMENT;                         \
  const nvmlDevice_st& dev = *(device)

DeviceReport report_of(const nvmlDevice_st& d) {
  return vgpu::inspect::device_report(d.facts, Library::get().live(d).activity);
}

unsigned milliwatts(double watts) { return static_cast<unsigned>(watts * 1000.0 + 0.5); }

unsigned long long now_us() {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  return static_cast<unsigned long long>(tv.tv_sec) * 1000000ull + static_cast<unsigned long long>(tv.tv_usec);
}

// The clock of `type` at the current/max/application setting; false for an unknown type.
bool clock_of(const DeviceReport& r, nvmlClockType_t type, nvmlClockId_t id, unsigned* out) {
  const bool current = id == NVML_CLOCK_ID_CURRENT;
  const bool boost = id == NVML_CLOCK_ID_CUSTOMER_BOOST_MAX;
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
      *out = current ? r.clock_graphics : boost ? r.max_graphics : r.app_graphics;
      return true;
    case NVML_CLOCK_SM:
      *out = current ? r.clock_sm : boost ? r.max_sm : r.app_graphics;
      return true;
    case NVML_CLOCK_MEM:
      *out = current ? r.clock_memory : boost ? r.max_memory : r.app_memory;
      return true;
    case NVML_CLOCK_VIDEO:
      *out = current ? r.clock_video : r.max_video;
      return true;
  }
  return false;
}

nvmlReturn_t clock_query(nvmlDevice_t device, nvmlClockType_t type, nvmlClockId_t id, unsigned* clock) {
  VGPU_NVML_DEVICE(device, clock);
  if (id > NVML_CLOCK_ID_CUSTOMER_BOOST_MAX) return NVML_ERROR_INVALID_ARGUMENT;
  return clock_of(report_of(dev), type, id, clock) ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t idle_engine(nvmlDevice_t device, unsigned* utilization, unsigned* period_us) {
  VGPU_NVML_DEVICE(device, utilization);
  (void)dev;
  if (period_us == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *utilization = 0;  // no video, JPEG or optical-flow work is simulated
  *period_us = 167000;
  return NVML_SUCCESS;
}

nvmlReturn_t ecc_check(nvmlMemoryErrorType_t error, nvmlEccCounterType_t counter) {
  if (error != NVML_MEMORY_ERROR_TYPE_CORRECTED && error != NVML_MEMORY_ERROR_TYPE_UNCORRECTED)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (counter != NVML_VOLATILE_ECC && counter != NVML_AGGREGATE_ECC) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

// ---- clocks ----------------------------------------------------------------------------------

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock) {
  return clock_query(device, type, NVML_CLOCK_ID_CURRENT, clock);
}
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock) {
  return clock_query(device, type, NVML_CLOCK_ID_CUSTOMER_BOOST_MAX, clock);
}
nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock) {
  return clock_query(device, type, NVML_CLOCK_ID_APP_CLOCK_TARGET, clock);
}
nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock) {
  return clock_query(device, type, NVML_CLOCK_ID_APP_CLOCK_DEFAULT, clock);
}
nvmlReturn_t nvmlDeviceGetMaxCustomerBoostClock(nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock) {
  return clock_query(device, type, NVML_CLOCK_ID_CUSTOMER_BOOST_MAX, clock);
}
nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, nvmlClockType_t type, nvmlClockId_t id, unsigned int* clock) {
  return clock_query(device, type, id, clock);
}

nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned int* count, unsigned int* clocks) {
  VGPU_NVML_DEVICE(device, count);
  const unsigned room = *count;
  *count = 1;  // HBM: one memory clock
  if (room < 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  if (clocks == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  clocks[0] = report_of(dev).max_memory;
  return NVML_SUCCESS;
}

// The graphics clocks the board can be locked to: max down to idle in 15 MHz steps (Hopper's).
nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device, unsigned int memoryClockMHz, unsigned int* count,
                                                  unsigned int* clocks) {
  VGPU_NVML_DEVICE(device, count);
  const DeviceReport r = report_of(dev);
  if (memoryClockMHz != r.max_memory) return NVML_ERROR_NOT_FOUND;
  std::vector<unsigned> list;
  for (unsigned c = r.max_graphics; c >= r.board->idle_sm_clock && c <= r.max_graphics; c -= 15) list.push_back(c);
  const unsigned room = *count;
  *count = static_cast<unsigned>(list.size());
  if (room < list.size()) return NVML_ERROR_INSUFFICIENT_SIZE;
  if (clocks == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::copy(list.begin(), list.end(), clocks);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long* reasons) {
  VGPU_NVML_DEVICE(device, reasons);
  *reasons = report_of(dev).clock_event_reasons;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return nvmlDeviceGetCurrentClocksEventReasons(device, reasons);
}
nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device, unsigned long long* reasons) {
  VGPU_NVML_DEVICE(device, reasons);
  (void)dev;
  *reasons = vgpu::inspect::kClockEventsSupported;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return nvmlDeviceGetSupportedClocksEventReasons(device, reasons);
}

// ---- performance state and power -------------------------------------------------------------

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t* pState) {
  VGPU_NVML_DEVICE(device, pState);
  *pState = static_cast<nvmlPstates_t>(report_of(dev).pstate);
  return NVML_SUCCESS;
}
// The deprecated name of the same query, still resolved by older clients.
nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t device, nvmlPstates_t* pState) {
  return nvmlDeviceGetPerformanceState(device, pState);
}
nvmlReturn_t nvmlDeviceGetSupportedPerformanceStates(nvmlDevice_t device, nvmlPstates_t* pstates, unsigned int size) {
  VGPU_NVML_DEVICE(device, pstates);
  (void)dev;
  if (size < 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  pstates[0] = NVML_PSTATE_0;
  for (unsigned i = 1; i < size; ++i) pstates[i] = NVML_PSTATE_UNKNOWN;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device, nvmlEnableState_t* mode) {
  VGPU_NVML_DEVICE(device, mode);
  (void)dev;
  *mode = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  VGPU_NVML_DEVICE(device, power);
  *power = milliwatts(report_of(dev).power_draw);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int* limit) {
  VGPU_NVML_DEVICE(device, limit);
  *limit = milliwatts(report_of(dev).power_limit);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int* defaultLimit) {
  return nvmlDeviceGetPowerManagementLimit(device, defaultLimit);
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* limit) {
  return nvmlDeviceGetPowerManagementLimit(device, limit);
}
nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int* minLimit,
                                                          unsigned int* maxLimit) {
  VGPU_NVML_DEVICE(device, minLimit);
  if (maxLimit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const DeviceReport r = report_of(dev);
  *minLimit = milliwatts(r.min_power_limit);
  *maxLimit = milliwatts(r.max_power_limit);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy) {
  VGPU_NVML_DEVICE(device, energy);
  *energy = report_of(dev).energy_mj;
  return NVML_SUCCESS;
}

// ---- temperature, fan ------------------------------------------------------------------------

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor, unsigned int* temp) {
  VGPU_NVML_DEVICE(device, temp);
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = report_of(dev).temp_gpu;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, nvmlTemperatureThresholds_t type, unsigned int* temp) {
  VGPU_NVML_DEVICE(device, temp);
  const DeviceReport r = report_of(dev);
  switch (type) {
    case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: *temp = r.temp_shutdown; return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: *temp = r.temp_slowdown; return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_MEM_MAX: *temp = r.temp_memory_max; return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_GPU_MAX: *temp = r.temp_max_operating; return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN:
    case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR:
    case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX:
    case NVML_TEMPERATURE_THRESHOLD_GPS_CURR: return NVML_ERROR_NOT_SUPPORTED;  // as on the real part
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}
nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int* speed) {
  VGPU_NVML_DEVICE(device, speed);
  (void)dev;
  return NVML_ERROR_NOT_SUPPORTED;  // SXM boards have no fan of their own
}

// ---- ECC (enabled, no errors), BAR1, board strings -------------------------------------------

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t* current, nvmlEnableState_t* pending) {
  VGPU_NVML_DEVICE(device, current);
  (void)dev;
  if (pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *current = *pending = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetDefaultEccMode(nvmlDevice_t device, nvmlEnableState_t* defaultMode) {
  VGPU_NVML_DEVICE(device, defaultMode);
  (void)dev;
  *defaultMode = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType, unsigned long long* eccCounts) {
  VGPU_NVML_DEVICE(device, eccCounts);
  (void)dev;
  if (nvmlReturn_t r = ecc_check(errorType, counterType); r != NVML_SUCCESS) return r;
  *eccCounts = 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetDetailedEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                            nvmlEccCounterType_t counterType, nvmlEccErrorCounts_t* eccCounts) {
  VGPU_NVML_DEVICE(device, eccCounts);
  (void)dev;
  if (nvmlReturn_t r = ecc_check(errorType, counterType); r != NVML_SUCCESS) return r;
  std::memset(eccCounts, 0, sizeof *eccCounts);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                             nvmlEccCounterType_t counterType, nvmlMemoryLocation_t location,
                                             unsigned long long* count) {
  VGPU_NVML_DEVICE(device, count);
  (void)dev;
  if (nvmlReturn_t r = ecc_check(errorType, counterType); r != NVML_SUCCESS) return r;
  if (location >= 8) return NVML_ERROR_INVALID_ARGUMENT;
  *count = 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrRows, unsigned int* uncRows,
                                       unsigned int* isPending, unsigned int* failureOccurred) {
  VGPU_NVML_DEVICE(device, corrRows);
  (void)dev;
  if (uncRows == nullptr || isPending == nullptr || failureOccurred == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *corrRows = *uncRows = *isPending = *failureOccurred = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t* bar1Memory) {
  VGPU_NVML_DEVICE(device, bar1Memory);
  const DeviceReport r = report_of(dev);
  bar1Memory->bar1Total = r.bar1_total;
  bar1Memory->bar1Used = r.bar1_used;
  bar1Memory->bar1Free = r.bar1_total - r.bar1_used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial, unsigned int length) {
  VGPU_NVML_DEVICE(device, serial);
  return copy_string(report_of(dev).serial, serial, length);
}
nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char* version, unsigned int length) {
  VGPU_NVML_DEVICE(device, version);
  return copy_string(report_of(dev).board->vbios, version, length);
}
nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char* partNumber, unsigned int length) {
  VGPU_NVML_DEVICE(device, partNumber);
  return copy_string(report_of(dev).board->board_part_number, partNumber, length);
}
nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t device, char* version, unsigned int length) {
  VGPU_NVML_DEVICE(device, version);
  return copy_string(report_of(dev).board->inforom_image, version, length);
}
nvmlReturn_t nvmlDeviceGetInforomVersion(nvmlDevice_t device, nvmlInforomObject_t object, char* version,
                                         unsigned int length) {
  VGPU_NVML_DEVICE(device, version);
  (void)dev;
  switch (object) {
    case NVML_INFOROM_OEM: return copy_string("2.1", version, length);
    case NVML_INFOROM_ECC: return copy_string("7.16", version, length);
    case NVML_INFOROM_POWER: return NVML_ERROR_NOT_SUPPORTED;  // as on an H100
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

// ---- PCIe ------------------------------------------------------------------------------------

// Bytes over PCIe in the last 20 ms: none is simulated as a sampled counter.
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter, unsigned int* value) {
  VGPU_NVML_DEVICE(device, value);
  (void)dev;
  if (counter != NVML_PCIE_UTIL_TX_BYTES && counter != NVML_PCIE_UTIL_RX_BYTES) return NVML_ERROR_INVALID_ARGUMENT;
  *value = 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int* value) {
  VGPU_NVML_DEVICE(device, value);
  (void)dev;
  *value = 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPcieSpeed(nvmlDevice_t device, unsigned int* pcieSpeed) {
  VGPU_NVML_DEVICE(device, pcieSpeed);
  const unsigned gen = report_of(dev).pcie_gen;
  static const unsigned kMbps[] = {0, 2500, 5000, 8000, 16000, 32000, 64000};
  *pcieSpeed = gen < 7 ? kMbps[gen] : 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPcieLinkMaxSpeed(nvmlDevice_t device, unsigned int* maxSpeed) {
  VGPU_NVML_DEVICE(device, maxSpeed);
  *maxSpeed = std::min(report_of(dev).pcie_gen_max, 6u);  // NVML_PCIE_LINK_MAX_SPEED_*: gen n -> n
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* maxLinkGenDevice) {
  VGPU_NVML_DEVICE(device, maxLinkGenDevice);
  *maxLinkGenDevice = report_of(dev).pcie_gen_max;
  return NVML_SUCCESS;
}

// ---- samples and per-process utilization -----------------------------------------------------

// One sample per call: the value now (NVML keeps a buffer of them; a monitor polling at its own
// period sees the same figures).
nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type, unsigned long long lastSeenTimeStamp,
                                  nvmlValueType_t* sampleValType, unsigned int* sampleCount, nvmlSample_t* samples) {
  VGPU_NVML_DEVICE(device, sampleCount);
  (void)lastSeenTimeStamp;
  if (sampleValType == nullptr || type >= NVML_SAMPLINGTYPE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
  if (type == NVML_MODULE_POWER_SAMPLES) return NVML_ERROR_NOT_SUPPORTED;
  if (samples == nullptr) {
    *sampleCount = 1;
    return NVML_SUCCESS;
  }
  if (*sampleCount < 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  const DeviceReport r = report_of(dev);
  unsigned v = 0;
  switch (type) {
    case NVML_TOTAL_POWER_SAMPLES: v = milliwatts(r.power_draw); break;
    case NVML_GPU_UTILIZATION_SAMPLES: v = r.util_gpu; break;
    case NVML_MEMORY_UTILIZATION_SAMPLES: v = r.util_memory; break;
    case NVML_PROCESSOR_CLK_SAMPLES: v = r.clock_graphics; break;
    case NVML_MEMORY_CLK_SAMPLES: v = r.clock_memory; break;
    default: v = 0; break;  // encoder, decoder, JPEG, OFA: idle
  }
  *sampleValType = NVML_VALUE_TYPE_UNSIGNED_INT;
  samples[0].timeStamp = now_us();
  samples[0].sampleValue.ullVal = 0;
  samples[0].sampleValue.uiVal = v;
  *sampleCount = 1;
  return NVML_SUCCESS;
}

// Each process holding memory on the device, with the device's utilization: the status region
// does not attribute kernels to processes, and one process per device is the common case.
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* processSamplesCount, unsigned long long lastSeenTimeStamp) {
  VGPU_NVML_DEVICE(device, processSamplesCount);
  (void)lastSeenTimeStamp;
  const vgpu::nvml::LiveDevice live = Library::get().live(dev);
  const unsigned n = static_cast<unsigned>(live.processes.size());
  if (n == 0) {
    *processSamplesCount = 0;
    return NVML_ERROR_NOT_FOUND;  // what NVML answers when no sample is newer
  }
  if (utilization == nullptr || *processSamplesCount < n) {
    *processSamplesCount = n;
    return utilization == nullptr ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
  }
  const DeviceReport r = vgpu::inspect::device_report(dev.facts, live.activity);
  const unsigned long long t = now_us();
  for (unsigned i = 0; i < n; ++i) {
    utilization[i] = {};
    utilization[i].pid = live.processes[i].first;
    utilization[i].timeStamp = t;
    utilization[i].smUtil = r.util_gpu;
    utilization[i].memUtil = r.util_memory;
  }
  *processSamplesCount = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int* utilization, unsigned int* samplingPeriodUs) {
  return idle_engine(device, utilization, samplingPeriodUs);
}
nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int* utilization, unsigned int* samplingPeriodUs) {
  return idle_engine(device, utilization, samplingPeriodUs);
}
nvmlReturn_t nvmlDeviceGetJpgUtilization(nvmlDevice_t device, unsigned int* utilization, unsigned int* samplingPeriodUs) {
  return idle_engine(device, utilization, samplingPeriodUs);
}
nvmlReturn_t nvmlDeviceGetOfaUtilization(nvmlDevice_t device, unsigned int* utilization, unsigned int* samplingPeriodUs) {
  return idle_engine(device, utilization, samplingPeriodUs);
}

// ---- display, accounting, module -------------------------------------------------------------

nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, nvmlEnableState_t* display) {
  VGPU_NVML_DEVICE(device, display);
  (void)dev;
  *display = NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, nvmlEnableState_t* isActive) {
  return nvmlDeviceGetDisplayMode(device, isActive);
}
nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t device, nvmlEnableState_t* mode) {
  return nvmlDeviceGetDisplayMode(device, mode);
}
nvmlReturn_t nvmlDeviceGetModuleId(nvmlDevice_t device, unsigned int* moduleId) {
  VGPU_NVML_DEVICE(device, moduleId);
  *moduleId = static_cast<unsigned>(dev.facts.local + 1);  // HGX modules are numbered from 1
  return NVML_SUCCESS;
}

}  // extern "C"
