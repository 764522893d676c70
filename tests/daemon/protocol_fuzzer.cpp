// libFuzzer target for the vgpud protocol decoder (built only when meson's compiler is clang).
// The input is a byte stream as a peer would send it: it is split into frames and each is
// decoded; a decoded frame must re-encode to a fixed point. Any crash, sanitizer report or
// abort here is a bug in protocol.cpp.
//
// Build and run (from the repository root):
//   CC=clang-14 CXX=clang++-14 meson setup build-fuzz -Db_sanitize=address,undefined \
//       -Db_lundef=false
//   meson compile -C build-fuzz daemon_protocol_fuzzer
//   mkdir -p /tmp/vgpud-corpus
//   ./build-fuzz/tests/daemon/daemon_protocol_fuzzer /tmp/vgpud-corpus -max_total_time=300 \
//       -rss_limit_mb=512 -max_len=4096
// (-rss_limit_mb well under the 16 MiB frame cap times a few catches any over-allocation.)
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace simcore::wire;
  std::span<const uint8_t> rest(data, size);
  while (!rest.empty()) {
    DecodeError err;
    const size_t n = split_frame(rest, &err);
    if (err != DecodeError::kNone || n == 0) {
      // Also decode the remainder as if it were a whole frame: the decoder must refuse it.
      (void)decode_frame(rest);
      break;
    }
    if (n > rest.size()) std::abort();
    Decoded d = decode_frame(rest.first(n));
    if (d.frame) {
      std::vector<uint8_t> once, twice;
      if (!append_frame(once, *d.frame)) std::abort();
      Decoded again = decode_frame(once);
      if (!again.frame || !append_frame(twice, *again.frame) || once != twice) std::abort();
    } else if (d.error == DecodeError::kNone) {
      std::abort();
    }
    rest = rest.subspan(n);
  }
  return 0;
}
