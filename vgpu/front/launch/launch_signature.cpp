#include "front/launch/launch_signature.h"

#include "front/launch/cat_array_metadata.h"
#include "front/launch/elementwise_metadata.h"
#include "front/launch/tensor_list_metadata.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace vgpu {
namespace {

constexpr std::string_view kMagic{"vgpu-sig3\0", 10};

// No address, host or device, lies below this (Linux never maps the first 64 KiB:
// vm.mmap_min_addr): smaller values (most sizes and counts) skip `is_pointer`, which takes locks.
constexpr uint64_t kLowestAddress = 0x10000;

// `v` little-endian at `at`.
void pack_u32(char* at, uint32_t v) {
  at[0] = static_cast<char>(v & 0xff);
  at[1] = static_cast<char>((v >> 8) & 0xff);
  at[2] = static_cast<char>((v >> 16) & 0xff);
  at[3] = static_cast<char>((v >> 24) & 0xff);
}

void put_u32(std::string& out, uint32_t v) {
  char bytes[4];
  pack_u32(bytes, v);
  out.append(bytes, 4);
}

uint32_t get_u32(std::string_view s, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(s[at + i])} << (8 * i);
  return v;
}

}  // namespace

std::string LaunchSignature::hex() const {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

LaunchSignature build_launch_signature(std::string_view function_name, const LaunchShape& shape,
                                       std::span<const ParamSlot> slots,
                                       std::span<const uint8_t> params,
                                       const std::function<bool(uint64_t)>& is_pointer) {
  LaunchSignature sig;
  build_launch_signature(function_name, shape, slots, params, is_pointer, &sig);
  return sig;
}

void build_launch_signature(std::string_view function_name, const LaunchShape& shape,
                            std::span<const ParamSlot> slots, std::span<const uint8_t> params,
                            const std::function<bool(uint64_t)>& is_pointer, LaunchSignature* sig) {
  std::string& out = sig->bytes;
  out.clear();
  out.reserve(kMagic.size() + function_name.size() + 1 + 28 + params.size() + 5 * slots.size());
  out.append(kMagic);
  out.append(function_name);
  out.push_back('\0');
  // The shape's seven words in one append (every launch builds a signature).
  char words[7 * 4];
  for (int i = 0; i < 3; ++i) pack_u32(words + 4 * i, shape.grid[static_cast<size_t>(i)]);
  for (int i = 0; i < 3; ++i) pack_u32(words + 12 + 4 * i, shape.block[static_cast<size_t>(i)]);
  pack_u32(words + 24, shape.dynamic_shared);
  out.append(words, sizeof words);
  CatKernel cat;                 // a torch.cat kernel's arguments, once its inputs' struct is seen
  bool cat_output_next = false;  // the next by-value parameter is its output's sizes and strides
  ElementwiseKernel elementwise;  // read from the name once a parameter could be one of its structs
  bool elementwise_known = false;
  for (const ParamSlot& slot : slots) {
    const bool inside = slot.offset <= params.size() && slot.size <= params.size() - slot.offset;
    if (!inside) {  // defensive: the caller validated; record the slot's size only
      out.push_back('v');
      put_u32(out, 0);
      continue;
    }
    const uint8_t* p = params.data() + slot.offset;
    if (slot.size == 8 && is_pointer) {
      uint64_t value;
      std::memcpy(&value, p, 8);
      if (value >= kLowestAddress && is_pointer(value)) {
        out.push_back('p');
        continue;
      }
    }
    out.push_back('v');
    put_u32(out, slot.size);
    const size_t at = out.size();
    out.append(reinterpret_cast<const char*>(p), slot.size);
    // PyTorch's multi-tensor-apply struct: the entries past the launch's tensors and blocks are
    // stale or garbage, and the kernel reads none of them (tensor_list_metadata.h).
    if (may_be_tensor_list(slot.size))
      zero_unused_tensor_list_entries(function_name, shape.grid[0], out.data() + at, slot.size);
    // torch.cat's batch of inputs: the entries past the batch's (grid.y) are stack garbage, and
    // so are the output's sizes and strides past its dimensions, in the parameter after it
    // (cat_array_metadata.h).
    if (cat_output_next) {
      zero_unused_cat_output_dims(cat, out.data() + at, slot.size);
      cat_output_next = false;
    } else if (may_be_cat_metadata(slot.size) && cat_kernel_of(function_name, &cat)) {
      cat_output_next = zero_unused_cat_entries(cat, shape.grid[1], out.data() + at, slot.size);
    }
    // The loaders, storers and offset calculators of PyTorch's elementwise kernels: padding and
    // dimensions past the tensors' (elementwise_metadata.h).
    if (may_be_elementwise_struct(slot.size)) {
      if (!elementwise_known) {
        elementwise = elementwise_kernel_of(function_name);
        elementwise_known = true;
      }
      if (elementwise.any()) zero_unused_elementwise_bytes(elementwise, out.data() + at, slot.size);
    }
    // Structs passed by value often carry pointers (PyTorch's TensorIterator kernels pass their
    // data pointers in an array inside one parameter) and host stack garbage in their unused
    // parts: every 8-byte-aligned word of a larger parameter that is a device or host address
    // is zeroed, as a pointer parameter is left out. After the structs' own cleaning, which
    // reads the values and zeroes garbage that could pair with a neighbouring word into an
    // address (the output strides of torch.cat: a stride of 1 beside the upper half of a stack
    // address read as a host address in one process and not in another, 2026-11-28).
    if (slot.size > 8 && is_pointer) {
      for (uint32_t w = 0; w + 8 <= slot.size; w += 8) {
        if ((slot.offset + w) % 8 != 0) continue;
        uint64_t value;
        std::memcpy(&value, out.data() + at + w, 8);
        if (value >= kLowestAddress && is_pointer(value)) std::memset(out.data() + at + w, 0, 8);
      }
    }
  }
}

namespace {

// Calls `each` with the bytes of every by-value parameter the signature holds, in order
// (pointer parameters carry no bytes); stops at the first malformed record.
template <class Each> void for_each_value(const LaunchSignature& signature, Each each) {
  const std::string_view s = signature.bytes;
  if (s.size() < kMagic.size() || s.substr(0, kMagic.size()) != kMagic) return;
  size_t at = s.find('\0', kMagic.size());
  if (at == std::string_view::npos) return;
  at += 1 + 7 * 4;
  while (at < s.size()) {
    const char tag = s[at++];
    if (tag == 'p') continue;
    if (tag != 'v' || at + 4 > s.size()) break;
    const uint32_t size = get_u32(s, at);
    at += 4;
    if (size > s.size() - at) break;
    each(s.substr(at, size));
    at += size;
  }
}

}  // namespace

std::vector<int64_t> signature_integers(const LaunchSignature& signature) {
  std::vector<int64_t> ints;
  for_each_value(signature, [&ints](std::string_view v) {
    if (v.size() == 4) {
      int32_t x;
      std::memcpy(&x, v.data(), 4);
      ints.push_back(x);
    } else if (v.size() == 8) {
      int64_t x;
      std::memcpy(&x, v.data(), 8);
      ints.push_back(x);
    }
  });
  return ints;
}

std::vector<std::vector<uint32_t>> signature_struct_words(const LaunchSignature& signature) {
  std::vector<std::vector<uint32_t>> out;
  for_each_value(signature, [&out](std::string_view v) {
    if (v.size() <= 8) return;
    std::vector<uint32_t> words(v.size() / 4);
    std::memcpy(words.data(), v.data(), words.size() * 4);
    out.push_back(std::move(words));
  });
  return out;
}

uint64_t signature_work_key(const LaunchSignature& signature) {
  const std::string_view s = signature.bytes;
  if (s.size() < kMagic.size() || s.substr(0, kMagic.size()) != kMagic) return 1;
  const size_t nul = s.find('\0', kMagic.size());
  if (nul == std::string_view::npos || s.size() - (nul + 1) < 7 * 4) return 1;
  std::string key(s.substr(0, nul + 1 + 7 * 4));  // magic, name, shape
  key.reserve(s.size());
  for_each_value(signature, [&key](std::string_view v) {
    const uint32_t size = static_cast<uint32_t>(v.size());
    key.append(reinterpret_cast<const char*>(&size), 4);
    std::vector<uint32_t> words((v.size() + 3) / 4, 0);
    std::memcpy(words.data(), v.data(), v.size());
    for (size_t i = 0; i < words.size(); ++i) {
      // An 8-byte word that reads as an x86-64 user address no longer mapped (stale stack or heap
      // pointers, which pointer masking cannot recognise): its high half is small but differs
      // from process to process (address-space layout randomisation).
      const bool address = i % 2 == 0 && i + 1 < words.size() && words[i] >= (1u << 24) &&
                           words[i + 1] >= 0x5500u && words[i + 1] < 0x8000u;
      if (address) words[i + 1] = 0xffffffffu;
      const uint32_t w = words[i] >= (1u << 24) ? 0xffffffffu : words[i];
      key.append(reinterpret_cast<const char*>(&w), 4);
    }
  });
  const uint64_t h = std::hash<std::string_view>{}(key);
  return h == 0 ? 1 : h;
}

bool decode_signature_header(const LaunchSignature& signature, std::string* name, LaunchShape* shape) {
  const std::string_view s = signature.bytes;
  if (s.size() < kMagic.size() || s.substr(0, kMagic.size()) != kMagic) return false;
  const size_t nul = s.find('\0', kMagic.size());
  if (nul == std::string_view::npos || s.size() - (nul + 1) < 7 * 4) return false;
  if (name) name->assign(s.substr(kMagic.size(), nul - kMagic.size()));
  if (shape) {
    size_t at = nul + 1;
    for (auto& v : shape->grid) v = get_u32(s, at), at += 4;
    for (auto& v : shape->block) v = get_u32(s, at), at += 4;
    shape->dynamic_shared = get_u32(s, at);
  }
  return true;
}

std::optional<LaunchSignature> without_flag_bytes(const LaunchSignature& signature) {
  if (!decode_signature_header(signature, nullptr, nullptr)) return std::nullopt;
  LaunchSignature out = signature;
  std::string& s = out.bytes;
  size_t at = s.find('\0', kMagic.size()) + 1 + 7 * 4;
  while (at < s.size()) {
    const char tag = s[at++];
    if (tag == 'p') continue;
    if (tag != 'v' || s.size() - at < 4) return std::nullopt;
    const uint32_t size = get_u32(s, at);
    at += 4;
    if (size > s.size() - at) return std::nullopt;
    if (size == 1) s[at] = 0;
    at += size;
  }
  return out;
}

}  // namespace vgpu
