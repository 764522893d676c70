#include "sim/exec/nccl_reduce.h"

#include <bit>
#include <cstring>
#include <string_view>

namespace vgpu::nccl_data {
namespace {

enum class Type { i8, u8, i32, u32, i64, u64, f16, bf16, f32, f64, f8, unknown };

Type type_of(std::string_view name) {
  static constexpr struct {
    std::string_view name;
    Type type;
  } kTypes[] = {{"ncclInt8", Type::i8},       {"ncclUint8", Type::u8},       {"ncclInt32", Type::i32},
                {"ncclUint32", Type::u32},    {"ncclInt64", Type::i64},      {"ncclUint64", Type::u64},
                {"ncclFloat16", Type::f16},   {"ncclBfloat16", Type::bf16},  {"ncclFloat32", Type::f32},
                {"ncclFloat64", Type::f64},   {"ncclFloat8e4m3", Type::f8},  {"ncclFloat8e5m2", Type::f8}};
  for (const auto& t : kTypes)
    if (t.name == name) return t.type;
  return Type::unknown;
}

size_t type_bytes(Type t) {
  switch (t) {
    case Type::i8: case Type::u8: case Type::f8: return 1;
    case Type::f16: case Type::bf16: return 2;
    case Type::i32: case Type::u32: case Type::f32: return 4;
    case Type::i64: case Type::u64: case Type::f64: return 8;
    default: return 0;
  }
}

// IEEE half and bfloat16 through float.
float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal
    exp = 113;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t man = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return sign | 0x7c00u | (man ? 0x200u : 0);
  if (exp >= 0x1f) return sign | 0x7c00u;
  if (exp <= 0) {
    if (exp < -10) return sign;
    man |= 0x800000u;
    const int shift = 14 - exp;
    uint32_t h = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return sign | static_cast<uint16_t>(h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (man >> 13);
  const uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // round to nearest even (may carry into exp)
  return sign | static_cast<uint16_t>(h);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN stays NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

template <class T> T apply(Op op, T a, T b) { return op == Op::prod ? a * b : a + b; }

// out[i] = parts[0][offset + i] op parts[1][offset + i] op ..., in rank order (every rank the same).
template <class T>
void reduce_native(Op op, const std::vector<std::vector<char>>& parts, size_t offset, size_t n, char* out) {
  for (size_t i = 0; i < n; ++i) {
    T acc;
    std::memcpy(&acc, parts[0].data() + (offset + i) * sizeof(T), sizeof(T));
    for (size_t r = 1; r < parts.size(); ++r) {
      T v;
      std::memcpy(&v, parts[r].data() + (offset + i) * sizeof(T), sizeof(T));
      acc = apply(op, acc, v);
    }
    std::memcpy(out + i * sizeof(T), &acc, sizeof(T));
  }
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void reduce_16(Op op, const std::vector<std::vector<char>>& parts, size_t offset, size_t n, char* out) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t raw;
    std::memcpy(&raw, parts[0].data() + (offset + i) * 2, 2);
    float acc = Load(raw);
    for (size_t r = 1; r < parts.size(); ++r) {
      std::memcpy(&raw, parts[r].data() + (offset + i) * 2, 2);
      acc = Load(Store(apply(op, acc, Load(raw))));  // rounded at each step, as each hop stores 16 bits
    }
    raw = Store(acc);
    std::memcpy(out + i * 2, &raw, 2);
  }
}

bool reduce(Type t, Op op, const std::vector<std::vector<char>>& parts, size_t offset, size_t n,
            char* out) {
  switch (t) {
    case Type::i8: reduce_native<int8_t>(op, parts, offset, n, out); return true;
    case Type::u8: reduce_native<uint8_t>(op, parts, offset, n, out); return true;
    case Type::i32: reduce_native<int32_t>(op, parts, offset, n, out); return true;
    case Type::u32: reduce_native<uint32_t>(op, parts, offset, n, out); return true;
    case Type::i64: reduce_native<int64_t>(op, parts, offset, n, out); return true;
    case Type::u64: reduce_native<uint64_t>(op, parts, offset, n, out); return true;
    case Type::f32: reduce_native<float>(op, parts, offset, n, out); return true;
    case Type::f64: reduce_native<double>(op, parts, offset, n, out); return true;
    case Type::f16: reduce_16<half_to_float, float_to_half>(op, parts, offset, n, out); return true;
    case Type::bf16: reduce_16<bf16_to_float, float_to_bf16>(op, parts, offset, n, out); return true;
    default: return false;  // fp8: no reduction here
  }
}

}  // namespace

std::string_view field(const char* s, size_t n) { return {s, strnlen(s, n)}; }

Op op_of_kernel(const std::string& name) {
  if (name.find("_Prod_") != std::string::npos) return Op::prod;
  if (name.find("_MinMax_") != std::string::npos) return Op::unknown;
  return Op::sum;  // _Sum_, _PreMulSum_, _SumPostDiv_, or the generic kernel
}

size_t count_bytes(const vgpu_nccl_task& task) {
  return task.count * type_bytes(type_of(field(task.datatype, sizeof task.datatype)));
}

bool sizes(const vgpu_nccl_task& task, int nranks, int rank, size_t* post, size_t* recv) {
  const size_t ts = type_bytes(type_of(field(task.datatype, sizeof task.datatype)));
  if (ts == 0 || nranks < 1 || rank < 0 || rank >= nranks) return false;
  const size_t n = task.count * ts, all = n * static_cast<size_t>(nranks);
  const std::string_view f = field(task.func, sizeof task.func);
  if (f == "AllReduce") {
    *post = n, *recv = n;
  } else if (f == "Reduce") {
    *post = n, *recv = rank == task.root ? n : 0;
  } else if (f == "ReduceScatter") {
    *post = all, *recv = n;
  } else if (f == "AllGather") {
    *post = n, *recv = all;
  } else if (f == "Broadcast") {
    *post = rank == task.root ? n : 0, *recv = n;
  } else {
    return false;
  }
  return true;
}

bool combine(const vgpu_nccl_task& task, int nranks, int rank, Op op,
                       const std::vector<std::vector<char>>& parts, char* recv, size_t recv_bytes) {
  size_t post = 0, want = 0;
  if (!sizes(task, nranks, rank, &post, &want) || want != recv_bytes || static_cast<int>(parts.size()) != nranks)
    return false;
  for (int r = 0; r < nranks; ++r) {
    size_t p = 0, ignored = 0;
    if (!sizes(task, nranks, r, &p, &ignored) || parts[r].size() != p) return false;  // a rank could not post
  }
  const Type t = type_of(field(task.datatype, sizeof task.datatype));
  const size_t ts = type_bytes(t), n = task.count;
  const std::string_view f = field(task.func, sizeof task.func);
  if (f == "AllGather") {
    for (int r = 0; r < nranks; ++r)
      if (n * ts > 0) std::memcpy(recv + r * n * ts, parts[r].data(), n * ts);
    return true;
  }
  if (f == "Broadcast") {
    if (task.root < 0 || task.root >= nranks) return false;
    if (n * ts > 0) std::memcpy(recv, parts[task.root].data(), n * ts);
    return true;
  }
  if (op == Op::unknown) return false;
  if (f == "Reduce" && rank != task.root) return true;  // nothing arrives
  const size_t offset = f == "ReduceScatter" ? static_cast<size_t>(rank) * n : 0;
  return reduce(t, op, parts, offset, n, recv);
}

}  // namespace vgpu::nccl_data
