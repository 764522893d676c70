// The per-launch cost of the passthrough's virtual timeline (vgpu/passthrough/virtual_timeline.h,
// which placed its ops through simcore's Engine from 9a45f9a to the callcost2 branch and by the
// engine's rule itself since) against the timeline before the engine (baseline_timeline.h),
// measured in one run, alternating, best of kRounds each.
//
//   passthrough_timeline_bench [ops]
//
// Workloads, as the passthrough's entry points drive the timeline:
//   settled   launches of known duration on 4 streams, every 8th waiting for an event of another
//   measured  launches whose duration is read later, resolved every 256 submissions (as
//             VirtualTime::submit does), the last one forced
// Prints ns per op for each and new/baseline. Needs no GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "baseline_timeline.h"
#include "passthrough/virtual_timeline.h"

namespace {

constexpr int kStreams = 4;
constexpr int kRounds = 5;
constexpr size_t kResolveEvery = 256;

template <class Timeline, class Ref>
double settled(int ops) {
  Timeline tl;
  int handles[kStreams] = {};
  std::vector<Ref> tails(kStreams);
  const auto t0 = std::chrono::steady_clock::now();
  double clock = 0;
  for (int i = 0; i < ops; ++i) {
    const int s = i % kStreams;
    clock += 1e-6;
    std::vector<Ref> waits;
    if (i % 8 == 7) waits.push_back(tails[static_cast<size_t>((s + 1) % kStreams)]);
    tails[static_cast<size_t>(s)] =
        tl.append({nullptr, &handles[s]}, vgpu::timing::StreamKind::blocking, 0, clock, 2e-6, waits, 0, true);
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (tl.pending() != 0) std::abort();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / ops;
}

template <class Timeline, class Ref, class Op>
double measured(int ops) {
  Timeline tl;
  int handles[kStreams] = {};
  const auto measure = [](const Op&, auto /*start*/, bool) { return 2e-6; };
  const auto t0 = std::chrono::steady_clock::now();
  double clock = 0;
  Ref last;
  for (int i = 0; i < ops; ++i) {
    clock += 1e-6;
    last = tl.append({nullptr, &handles[i % kStreams]}, vgpu::timing::StreamKind::blocking, 0, clock, -1, {},
                     static_cast<uint64_t>(i + 1), true);
    if (static_cast<size_t>(i + 1) % kResolveEvery == 0) tl.resolve(measure);
  }
  tl.resolve(measure, last);
  const auto t1 = std::chrono::steady_clock::now();
  if (tl.pending() != 0) std::abort();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / ops;
}

}  // namespace

int main(int argc, char** argv) {
  const int ops = argc > 1 ? std::atoi(argv[1]) : 1000000;
  if (ops <= 0) {
    std::fprintf(stderr, "usage: %s [ops > 0]\n", argv[0]);
    return 2;
  }
  namespace pt = vgpu::pt;
  double s_new = 1e300, s_old = 1e300, m_new = 1e300, m_old = 1e300;
  for (int r = 0; r < kRounds; ++r) {
    s_old = std::min(s_old, settled<pt::baseline::VirtualTimeline, pt::baseline::OpRef>(ops));
    s_new = std::min(s_new, settled<pt::VirtualTimeline, pt::OpRef>(ops));
    m_old = std::min(m_old, measured<pt::baseline::VirtualTimeline, pt::baseline::OpRef, pt::baseline::TimedOp>(ops));
    m_new = std::min(m_new, measured<pt::VirtualTimeline, pt::OpRef, pt::TimedOp>(ops));
  }
  std::printf("%-10s %14s %14s %10s\n", "workload", "baseline ns/op", "current ns/op", "ratio");
  std::printf("%-10s %14.1f %14.1f %10.2f\n", "settled", s_old, s_new, s_new / s_old);
  std::printf("%-10s %14.1f %14.1f %10.2f\n", "measured", m_old, m_new, m_new / m_old);
  return 0;
}
