// Fixture for check_globals.py (never compiled): four process-wide mutable variables, each
// marked BAD, among declarations that are fine.
#include <mutex>

namespace vgpu::pt {
namespace {

std::mutex g_mu;                     // BAD: namespace-scope mutable
int g_count = 0;                     // BAD: namespace-scope mutable
constexpr int kLimit = 4;            // fine: constant
const char* const kName = "x";       // fine: constant
thread_local int t_depth;            // fine: per-thread
int helper(int a, int b);            // fine: a function

}  // namespace

class Piece {
 public:
  static Piece& get();               // fine: a function
  static constexpr double kWait = 1; // fine: constant
};

Piece& Piece::get() {
  static Piece* p = new Piece;       // BAD: function-local mutable
  return *p;
}

int limit() {
  static const int n = kLimit * 2;   // fine: immutable once made
  static std::mutex mu;              // BAD: function-local mutable
  std::lock_guard l(mu);
  return n;
}

}  // namespace vgpu::pt
