// The buffer a fat binary entry is decompressed into. It lives only while the image is parsed,
// and its size varies from kilobytes to tens of megabytes from one image to the next (cuBLASLt
// holds 1,600 for sm_90). From malloc, such buffers leave the heap fragmented once freed: glibc
// raises its mmap threshold to the largest block freed, later ones come from the heap, and the
// small tables kept between them pin its pages. A process loading a CUDA library's modules kept
// 3 to 4 times the driver's live bytes as RssAnon that way (issue 23, docs/results.md
// "2026-11-26 sim backend memory"). Large buffers are mapped here instead, so freeing one gives
// its pages back to the system at once.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

namespace vgpu::module {

// A growable byte buffer: appends are memcpy / memset (a std::vector with an allocator of its own
// constructs byte by byte, which made the decompressor 20-60% slower in debug builds).
class ByteBuffer {
 public:
  // From here up, storage is a mapping of its own; below, operator new: a small buffer leaves at
  // most a small hole, and a mapping each would cost a system call (and under the sanitizers
  // their shadow memory) per parse.
  static constexpr size_t kMapFrom = size_t{1} << 20;

  ByteBuffer() = default;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;
  ByteBuffer(ByteBuffer&& o) noexcept : data_(o.data_), size_(o.size_), capacity_(o.capacity_) {
    o.data_ = nullptr;
    o.size_ = o.capacity_ = 0;
  }
  ByteBuffer& operator=(ByteBuffer&& o) noexcept {
    if (this != &o) {
      deallocate(data_, capacity_);
      data_ = o.data_;
      size_ = o.size_;
      capacity_ = o.capacity_;
      o.data_ = nullptr;
      o.size_ = o.capacity_ = 0;
    }
    return *this;
  }
  ~ByteBuffer() { deallocate(data_, capacity_); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  const uint8_t* begin() const { return data_; }
  const uint8_t* end() const { return data_ + size_; }
  uint8_t& operator[](size_t i) { return data_[i]; }
  const uint8_t& operator[](size_t i) const { return data_[i]; }

  void reserve(size_t n) {
    if (n > capacity_) reallocate(n);
  }
  void append(const uint8_t* p, size_t n) {
    if (n == 0) return;
    make_room(n);
    std::memcpy(data_ + size_, p, n);
    size_ += n;
  }
  void append(size_t n, uint8_t b) {
    if (n == 0) return;
    make_room(n);
    std::memset(data_ + size_, b, n);
    size_ += n;
  }
  void push_back(uint8_t b) {
    make_room(1);
    data_[size_++] = b;
  }
  // New bytes are zero.
  void resize(size_t n) {
    if (n > size_) append(n - size_, 0);
    else size_ = n;
  }

 private:
  void make_room(size_t n) {
    if (n <= capacity_ - size_) return;
    if (n > SIZE_MAX / 2 - size_) throw std::bad_alloc();
    reallocate(std::max(size_ + n, capacity_ * 2));
  }
  void reallocate(size_t capacity) {
    uint8_t* p = allocate(capacity);
    if (size_ > 0) std::memcpy(p, data_, size_);
    deallocate(data_, capacity_);
    data_ = p;
    capacity_ = capacity;
  }
  static uint8_t* allocate(size_t n) {
    if (n < kMapFrom) return static_cast<uint8_t*>(::operator new(n));
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<uint8_t*>(p);
  }
  static void deallocate(uint8_t* p, size_t n) {
    if (p == nullptr) return;
    if (n < kMapFrom) ::operator delete(p);
    else munmap(p, n);
  }

  uint8_t* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace vgpu::module
