// A CUDA_ARRAY3D_DESCRIPTOR in one line, for the array tests of both backends.
#pragma once

#include <cuda.h>

#include <cstddef>

inline CUDA_ARRAY3D_DESCRIPTOR array_desc(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch,
                                          unsigned flags = 0) {
  CUDA_ARRAY3D_DESCRIPTOR a{};
  a.Width = w;
  a.Height = h;
  a.Depth = d;
  a.Format = f;
  a.NumChannels = ch;
  a.Flags = flags;
  return a;
}
