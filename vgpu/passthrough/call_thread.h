// What a thread's timed calls keep from call to call under the passthrough backend, in one
// thread-local that each call looks up once, with its Pause (thread_clock.h), and hands down.
//
// Why: each thread-local of a shared library is a call to __tls_get_addr at each use (~11
// instructions; -mtls-dialect=gnu2 is slower for a library loaded by dlopen, as libcuda is:
// docs/results.md, callcost6). The thread's clock, its last stream target and its last event's
// device were three lookups of a ~740-instruction cuEventRecord and a settled launch's clock and
// target two (issue 21). Constant-initialized and trivially destructible: no guard, one lookup.
// Not thread-safe: each thread has its own.
#pragma once

#include <cstdint>

#include "front/driver/cuda_api.h"
#include "passthrough/last_copy_path.h"
#include "passthrough/record_memo.h"
#include "timing/stream_order.h"

namespace vgpu::timing {
class ThreadClock;
}

namespace vgpu::pt {

class VirtualTime;

// The calling thread's last stream argument resolved, and its last context's virtual device:
// every timed call resolves its stream, and a thread mostly submits to the same one, so the
// common case takes no lock and no map. Valid while the owner's generation is unchanged (a
// stream or context destroyed bumps it). (VirtualTime::target.)
struct TargetCache {
  const void* owner = nullptr;
  uint64_t generation = 0;
  CUstream stream = nullptr;  // a stream handle (StreamArg::handle)
  CUcontext context = nullptr;
  timing::StreamKind kind = timing::StreamKind::legacy;
  CUcontext device_context = nullptr;  // the context whose device is `device`
  int device = -1;
};

// The calling thread's last event asked about by event_device() and its device: a thread records
// the same few events over and over (every cuEventRecord asks). Valid while the owner's event
// generation is unchanged (an event created or destroyed bumps it: a handle may come back for
// another device). (VirtualTime::event_device.)
struct EventDeviceCache {
  const void* owner = nullptr;
  uint64_t generation = 0;
  CUevent event = nullptr;
  int device = -1;
};

// On cache lines of its own: a settled event record reads the first only, the clock pointer and
// the record memo (it was at a 16-byte offset, two lines; issue 21).
struct alignas(64) CallThread {
  timing::ThreadClock* clock = nullptr;  // timing::this_thread_clock(), once looked up
  // The thread's last settled event record (record_memo.h, VirtualTimeline::memo_for).
  RecordMemo record;
  // VirtualTime::get() once it is made (after cuInit; it is never destroyed): its lookup through
  // the backend's root (a static's guard, two acquire loads, two calls) on every timed call.
  VirtualTime* virtual_time = nullptr;
  // timing::charge_driver_time(passthrough), asked once a thread (the setting is read once a
  // process): the out-of-line call and its static's guard were ~20 instructions of every timed
  // call (Pause::real). -1: not asked yet.
  int8_t charges_driver = -1;
  TargetCache target;
  EventDeviceCache event_device;
  // Whether the thread asked for its slot (thread_clock.h, ThreadSlot): once, on its first call.
  bool slot_asked = false;
  // Whether log lines at trace level are written (log::threshold(), fixed for the process),
  // asked once a thread: VirtualTime::submit asked it on every launch and copy, a call and a
  // static's guard on a cache line of its own (issue 21). -1: not asked yet.
  int8_t traces = -1;
  // The thread's submissions so far (VirtualTime::submit resolves every kResolveEvery of them).
  uint32_t submissions = 0;
  // The path of the thread's last copy between two addresses (timed_copy_api.cpp): a
  // thread-local of its own was a second lookup on every copy.
  LastCopyPath last_copy_path;
  LastCopyPrice last_copy_price;  // the same for its price
  // The thread's launch state (launch_api.cpp's LaunchThread, a thread-local of its own there, as
  // it is not constant-initializable), once made: its lookup was two calls to __tls_get_addr a
  // launch. Lives as long as the thread.
  void* launch = nullptr;
};

// The calling thread's.
CallThread& this_call_thread();

}  // namespace vgpu::pt
