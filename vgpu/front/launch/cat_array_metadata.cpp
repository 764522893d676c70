#include "front/launch/cat_array_metadata.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace vgpu {
namespace {

constexpr size_t kMaxDims = 4;  // CAT_ARRAY_MAX_INPUT_DIMS

constexpr size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

struct Layout {
  size_t n = 0, k = 0, index = 0;  // batch size, stride size, index type's bytes
  size_t offset = 0, dim_size = 0, n_elements = 0, contiguous = 0, strides = 0, stride_bytes = 0, size = 0;
};

Layout layout_of(size_t n, size_t k, size_t index) {
  Layout l{n, k, index};
  l.offset = 8 * n;
  l.dim_size = l.offset + index * n;
  l.n_elements = l.dim_size + index * n;
  l.contiguous = l.n_elements + index * n;
  l.stride_bytes = 2 * kMaxDims * index;
  l.strides = align_up(l.contiguous + n, index);
  l.size = align_up(l.strides + k * l.stride_bytes, 16);
  return l;
}

// The template's index type and integer arguments after the element type, from the mangled
// name: "...CatArrayBatchedCopy_vectorizedINS1_10OpaqueTypeILj2EEEjLi3ELi128ELi1ELi16ELi8EEE..."
// gives 'j' and {3, 128, 1, 16, 8}. The index type is the builtin letter just before the first
// "Li" that follows the kernel's name; false where the name does not read so.
// Only the first kTemplateInts are kept (D, n, k: the rest are the vectorized form's).
constexpr size_t kTemplateInts = 3;

bool template_arguments(std::string_view name, size_t* index, long (&ints)[kTemplateInts], size_t* count) {
  const size_t kernel = name.find("CatArrayBatchedCopy");
  if (kernel == std::string_view::npos || name.find("CatArrInputTensorMetadata") == std::string_view::npos)
    return false;
  // The first "Li" right after an index type's letter that closes the element type ("E").
  size_t at = kernel;
  for (;;) {
    at = name.find("Li", at + 1);
    if (at == std::string_view::npos) return false;
    if (at < 2 || name[at - 2] != 'E') continue;
    const char type = name[at - 1];
    if (type == 'j' || type == 'i') {
      *index = 4;
      break;
    }
    if (type == 'm' || type == 'l' || type == 'y' || type == 'x') {
      *index = 8;
      break;
    }
  }
  while (at + 2 < name.size() && name.compare(at, 2, "Li") == 0) {
    at += 2;
    long v = 0;
    size_t digits = 0;
    while (at < name.size() && name[at] >= '0' && name[at] <= '9' && digits < 9) {
      v = v * 10 + (name[at++] - '0');
      ++digits;
    }
    if (digits == 0 || at >= name.size() || name[at] != 'E') return false;
    ++at;
    if (*count < kTemplateInts) ints[(*count)++] = v;
  }
  return *count > 0;
}

}  // namespace

bool may_be_cat_metadata(size_t size) {
  // The batch sizes PyTorch's cat uses (CAT_ARRAY_BATCH_SIZE 128, smaller for wide elements)
  // and a margin, each with either stride size and index type.
  static const std::vector<size_t> sizes = [] {
    std::vector<size_t> v;
    for (size_t n : {16, 32, 64, 128, 256})
      for (size_t k : {size_t{1}, n})
        for (size_t index : {4, 8}) v.push_back(layout_of(n, k, index).size);
    return v;
  }();
  return std::find(sizes.begin(), sizes.end(), size) != sizes.end();
}

bool cat_kernel_of(std::string_view function_name, CatKernel* out) {
  size_t index = 0, count = 0;
  long ints[kTemplateInts] = {};
  if (!template_arguments(function_name, &index, ints, &count) || count < kTemplateInts) return false;
  const long dims = ints[0], n = ints[1], k = ints[2];
  if (dims < 1 || dims > static_cast<long>(kMaxDims) || n < 1 || n > 4096 || (k != 1 && k != n)) return false;
  *out = CatKernel{index, static_cast<size_t>(dims), static_cast<size_t>(n), static_cast<size_t>(k),
                   function_name.find("_contig") != std::string_view::npos ||
                       function_name.find("_vectorized") != std::string_view::npos};
  return true;
}

namespace {
// Sizes and strides of one TensorSizeStride<I, 4> at `at`: those past D zeroed.
void zero_past_dims(const CatKernel& cat, char* at) {
  const size_t i = cat.index_bytes, past = kMaxDims - cat.dims;
  std::memset(at + i * cat.dims, 0, i * past);
  std::memset(at + i * (kMaxDims + cat.dims), 0, i * past);
}
}  // namespace

bool zero_unused_cat_entries(const CatKernel& cat, uint32_t grid_y, char* bytes, size_t size) {
  const Layout l = layout_of(cat.batch, cat.strides, cat.index_bytes);
  if (l.size != size) return false;
  const size_t index = l.index;
  const size_t used = std::min<size_t>(grid_y, l.n);
  const size_t unused = l.n - used;
  std::memset(bytes + 8 * used, 0, 8 * unused);
  std::memset(bytes + l.offset + index * used, 0, index * unused);
  std::memset(bytes + l.dim_size + index * used, 0, index * unused);
  std::memset(bytes + l.n_elements + index * used, 0, index * unused);
  std::memset(bytes + l.contiguous + used, 0, unused);
  std::memset(bytes + l.contiguous + l.n, 0, l.strides - (l.contiguous + l.n));  // padding
  const size_t end = l.strides + l.k * l.stride_bytes;
  if (cat.contiguous) {
    std::memset(bytes + l.strides, 0, end - l.strides);
  } else {
    const size_t read = l.k == l.n ? used : l.k;
    std::memset(bytes + l.strides + l.stride_bytes * read, 0, l.stride_bytes * (l.k - read));
    for (size_t e = 0; e < read; ++e) zero_past_dims(cat, bytes + l.strides + l.stride_bytes * e);
  }
  std::memset(bytes + end, 0, l.size - end);  // tail padding
  return true;
}

bool zero_unused_cat_output_dims(const CatKernel& cat, char* bytes, size_t size) {
  if (size != 2 * kMaxDims * cat.index_bytes) return false;
  zero_past_dims(cat, bytes);
  return true;
}

}  // namespace vgpu
