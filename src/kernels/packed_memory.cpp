// Memory of packed weight copies (contract: allocate_packed_bytes in matmul_packed.h).
//
// Decode streams every weight once per token. On 4 KiB pages that is a TLB miss (a page walk)
// every 4 KiB, and a small model's matrices are all under 2 MiB (smollm-135m: 0.35-0.94 MiB),
// too small for a transparent huge page of their own. So copies under 2 MiB are carved, 64-byte
// aligned, from shared 16 MiB chunks on huge pages; larger ones get their own huge-page-aligned
// allocation. A chunk is freed with the last copy carved from it.
#include <sys/mman.h>

#include <cstdlib>
#include <mutex>
#include <new>

#include "kernels/matmul_packed.h"

namespace hinge::kernels {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kChunkBytes = size_t{16} << 20;
constexpr size_t kAlign = 64;

size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

// `bytes` (a multiple of kHugePage) aligned to a huge page, on huge pages where the kernel
// allows it (transparent huge pages "madvise" or "always").
uint8_t* allocate_huge(size_t bytes) {
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kHugePage, bytes));
  if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: 4 KiB pages if refused
#endif
  return p;
}

// The chunk being carved (held weakly: it lives as long as a copy in it does).
struct ChunkCarver {
  std::mutex mu;
  std::weak_ptr<void> chunk;
  uint8_t* base = nullptr;
  size_t used = 0;
};

ChunkCarver& carver() {
  static ChunkCarver* c = new ChunkCarver;  // never destroyed: copies may outlive static teardown
  return *c;
}

}  // namespace

void PackedMatrix::Free::operator()(void* p) {
  if (chunk)
    chunk.reset();
  else
    std::free(p);
}

std::unique_ptr<uint8_t[], PackedMatrix::Free> allocate_packed_bytes(size_t bytes) {
  bytes = round_up(bytes == 0 ? 1 : bytes, kAlign);
  if (bytes >= kHugePage)
    return {allocate_huge(round_up(bytes, kHugePage)), PackedMatrix::Free{}};
  ChunkCarver& c = carver();
  std::lock_guard lock(c.mu);
  std::shared_ptr<void> chunk = c.chunk.lock();
  if (!chunk || c.used + bytes > kChunkBytes) {
    uint8_t* base = allocate_huge(kChunkBytes);
    chunk = std::shared_ptr<void>(base, [](void* q) { std::free(q); });
    c.chunk = chunk;
    c.base = base;
    c.used = 0;
  }
  uint8_t* p = c.base + c.used;
  c.used += bytes;
  return {p, PackedMatrix::Free{std::move(chunk)}};
}

}  // namespace hinge::kernels
