#include "sim/exec/compute_beside_collectives.h"

#include <algorithm>

#include "simcore/engine.h"

namespace vgpu {

ComputeBesideCollectives::ComputeBesideCollectives(simcore::Engine& engine, double moving, double waiting)
    : engine_(engine), overlap_(moving, waiting) {}

std::vector<uint64_t>* ComputeBesideCollectives::untimed(int gpu) {
  if (gpu < 0 || gpu >= timing::CollectiveOverlap::kMaxDevices) return nullptr;
  if (static_cast<size_t>(gpu) >= untimed_.size()) untimed_.resize(static_cast<size_t>(gpu) + 1);
  return &untimed_[static_cast<size_t>(gpu)];
}

double ComputeBesideCollectives::kernel(int gpu, std::span<const uint64_t> after, double not_before,
                                        double seconds, bool* remembered, double* carried) {
  *remembered = false;
  *carried = 0;
  if (!enabled() || overlap_.quiet_after(gpu, not_before)) return seconds;
  double start = not_before;
  for (uint64_t e : after)
    if (auto iv = engine_.query(e)) start = std::max(start, iv->finish);
  *remembered = true;
  return overlap_.kernel_finish(gpu, start, seconds, carried) - start;
}

void ComputeBesideCollectives::kernel_placed(int gpu, uint64_t event) {
  std::vector<uint64_t>* list = enabled() && event != simcore::kNoEvent ? untimed(gpu) : nullptr;
  if (list == nullptr) return;
  if (list->size() >= kUntimedKept) list->erase(list->begin(), list->begin() + kUntimedKept / 2);
  list->push_back(event);
}

void ComputeBesideCollectives::collective_placed(int gpu, uint64_t event, double resident) {
  std::vector<uint64_t>* list = enabled() ? untimed(gpu) : nullptr;
  if (list == nullptr) return;
  // The kernels placed before it: their intervals now, for the debt of those inside it.
  for (uint64_t e : *list)
    if (auto iv = engine_.query(e)) overlap_.kernel_ran(gpu, iv->start, iv->finish);
  list->clear();
  if (auto iv = engine_.query(event)) overlap_.collective(gpu, std::min(resident, iv->start), iv->start, iv->finish);
}

}  // namespace vgpu
