// The answer to a thread's last question, kept for the next question asked with the same key:
// what LastCopyPath (last_copy_path.h: a copy's path between two addresses) and LastLaunchDevice
// (launch_device.h: a virtual device's fixed facts) keep, one slot each, on hot paths where the
// same question mostly repeats. The key must hold everything the answer depends on (the backend's
// state as `owner`, a generation where the answer can go stale). Not thread-safe: one per thread;
// constant-initializable (thread_local constinit).
#pragma once

namespace vgpu::pt {

template <class Key, class Value>
class LastAnswer {
 public:
  // The kept answer if it was given for `key`, else `compute()`'s, kept.
  template <class Compute>
  const Value& of(const Key& key, Compute&& compute) {
    if (!known_ || !(key_ == key)) {
      value_ = compute();
      key_ = key;
      known_ = true;
    }
    return value_;
  }

 private:
  Key key_{};
  Value value_{};
  bool known_ = false;
};

}  // namespace vgpu::pt
