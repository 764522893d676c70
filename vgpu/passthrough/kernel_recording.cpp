#include "passthrough/kernel_recording.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "cupti_profiler/recorder.h"
#include "exec/kernel_time_db.h"
#include "passthrough/passthrough_state.h"

namespace vgpu::pt {
namespace {

// What a launch signature needs to know about a function, asked once per function.
struct FunctionFacts {
  bool ok = false;
  std::string name;
  std::vector<ParamSlot> slots;
  uint32_t block_bytes = 0;  // packed parameter block size
};

FunctionFacts describe(CUfunction f) {
  FunctionFacts facts;
  const char* name = nullptr;
  // cudart hands context-independent kernels (CUkernel) to cuLaunchKernel as well.
  if (VGPU_REAL("cuFuncGetName", CUresult (*)(const char**, CUfunction))(&name, f) != CUDA_SUCCESS &&
      VGPU_REAL("cuKernelGetName", CUresult (*)(const char**, CUkernel))(&name, reinterpret_cast<CUkernel>(f)) !=
          CUDA_SUCCESS)
    return facts;
  facts.name = name ? name : "";
  auto func_info = VGPU_REAL("cuFuncGetParamInfo", CUresult (*)(CUfunction, size_t, size_t*, size_t*));
  auto kernel_info = VGPU_REAL("cuKernelGetParamInfo", CUresult (*)(CUkernel, size_t, size_t*, size_t*));
  for (size_t i = 0; i < 4096; ++i) {
    size_t off = 0, size = 0;
    if ((!func_info || func_info(f, i, &off, &size) != CUDA_SUCCESS) &&
        (!kernel_info || kernel_info(reinterpret_cast<CUkernel>(f), i, &off, &size) != CUDA_SUCCESS))
      break;
    facts.slots.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(size)});
    facts.block_bytes = std::max<uint32_t>(facts.block_bytes, static_cast<uint32_t>(off + size));
  }
  facts.ok = true;
  return facts;
}

// The packed parameter block of a launch, from kernelParams (one pointer per parameter) or from
// `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE); false when neither describes it.
bool pack_params(const FunctionFacts& facts, void** params, void** extra, std::vector<uint8_t>* out) {
  out->assign(facts.block_bytes, 0);
  if (params != nullptr) {
    for (size_t i = 0; i < facts.slots.size(); ++i)
      if (params[i] != nullptr) std::memcpy(out->data() + facts.slots[i].offset, params[i], facts.slots[i].size);
    return true;
  }
  if (extra == nullptr) return facts.slots.empty();
  const void* buffer = nullptr;
  size_t size = 0;
  for (size_t i = 0; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = extra[i + 1];
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) size = *static_cast<size_t*>(extra[i + 1]);
  }
  if (buffer == nullptr || size < facts.block_bytes) return false;
  std::memcpy(out->data(), buffer, facts.block_bytes);
  return true;
}

class Recording final : public KernelRecording {
 public:
  Recording(std::unique_ptr<cupti::Recorder> recorder, std::string db_path)
      : recorder_(std::move(recorder)), db_path_(std::move(db_path)) {
    recorder_->set_sink([this](const cupti::Completed& c) { completed(c); });
  }

  bool begin(CUfunction f, const LaunchShape& shape, void** params, void** extra) override {
    PassState* s = PassState::get();
    if (s == nullptr) return false;
    const FunctionFacts& facts = facts_for(f);
    std::vector<uint8_t> block;
    if (!facts.ok || !pack_params(facts, params, extra, &block)) return false;
    const LaunchSignature sig = build_launch_signature(
        facts.name, shape, facts.slots, block, [s](uint64_t v) { return s->is_device_pointer(v); });
    int v = 0;
    if (s->current_device(&v) != CUDA_SUCCESS) return false;
    KernelTimeDb* db = db_for(s->physical(v));
    if (db == nullptr) return false;
    uint64_t tag;
    {
      std::lock_guard l(pending_mu_);
      tag = ++next_tag_;
      pending_.emplace(tag, Pending{sig, db});
    }
    recorder_->begin_op(tag);
    return true;
  }

  void end() override { recorder_->end_op(); }
  void flush() override {
    recorder_->flush();
    const cupti::RecorderStats st = recorder_->stats();
    size_t waiting;
    {
      std::lock_guard l(pending_mu_);
      waiting = pending_.size();
    }
    log::debug("kernel recording: {} launches tagged, {} ops delivered, {} ops waiting for a tag, {} untagged "
               "dropped, {} untimed, {} lost by CUPTI, {} buffers, {} launches still waiting", next_tag_,
               st.delivered, st.pending, st.untagged_dropped, st.untimed, st.cupti_dropped, st.buffers, waiting);
  }

 private:
  struct Pending {
    LaunchSignature signature;
    KernelTimeDb* db;
  };

  const FunctionFacts& facts_for(CUfunction f) {
    {
      std::shared_lock l(facts_mu_);
      if (auto it = facts_.find(f); it != facts_.end()) return it->second;
    }
    FunctionFacts facts = describe(f);
    std::unique_lock l(facts_mu_);
    return facts_.emplace(f, std::move(facts)).first->second;
  }

  // One database per physical GPU model, named as the real driver names the GPU.
  KernelTimeDb* db_for(int physical) {
    char name[256] = {};
    if (VGPU_REAL("cuDeviceGetName", CUresult (*)(char*, int, CUdevice))(name, sizeof name, physical) != CUDA_SUCCESS)
      return nullptr;
    std::lock_guard l(db_mu_);
    auto& db = dbs_[name];
    if (!db) db = std::make_unique<KernelTimeDb>(db_path_, name);
    return db.get();
  }

  void completed(const cupti::Completed& c) {
    log::trace("kernel recording: tag {} kind {} {} ns", c.tag, static_cast<int>(c.kind), c.end_ns - c.start_ns);
    if (c.kind != cupti::OpKind::kernel || c.end_ns <= c.start_ns) return;
    Pending p;
    {
      std::lock_guard l(pending_mu_);
      auto it = pending_.find(c.tag);
      if (it == pending_.end()) return;
      p = std::move(it->second);
      pending_.erase(it);
    }
    p.db->record(p.signature, c.end_ns - c.start_ns);
  }

  std::unique_ptr<cupti::Recorder> recorder_;
  std::string db_path_;
  std::shared_mutex facts_mu_;
  std::unordered_map<CUfunction, FunctionFacts> facts_;
  std::mutex db_mu_;
  std::map<std::string, std::unique_ptr<KernelTimeDb>> dbs_;
  std::mutex pending_mu_;
  uint64_t next_tag_ = 0;
  std::unordered_map<uint64_t, Pending> pending_;
};

Recording* make() {
  const std::string path = KernelTimeDb::path_from_environment();
  if (path.empty()) return nullptr;
  cupti::RecorderOptions options;
  // VGPU_MEASURE=serialize: CUPTI runs kernels one at a time, so each is measured alone even
  // when several virtual devices share the GPU (not for jobs whose ranks wait on each other
  // inside kernels, as NCCL's do).
  if (const char* m = std::getenv("VGPU_MEASURE"); m && std::strcmp(m, "serialize") == 0)
    options.serialize_kernels = true;
  auto recorder = cupti::Recorder::start(options);
  if (!recorder) {
    log::always("vgpu passthrough: VGPU_KERNEL_DB is set but CUPTI could not be started; "
                "kernel durations are not recorded");
    return nullptr;
  }
  auto* r = new Recording(std::move(recorder), path);  // lives until exit; flushed there
  std::atexit([] { if (KernelRecording* k = KernelRecording::get()) k->flush(); });
  log::info("passthrough: recording kernel durations into {}", path);
  return r;
}

}  // namespace

KernelRecording* KernelRecording::get() {
  static Recording* recording = make();
  return recording;
}

}  // namespace vgpu::pt
