// A steady decode step allocates nothing (issue 13, acceptance 3): the scheduler's output, the
// forward pass, sampling, detokenizing and the caller's deltas all reuse their buffers. This
// test binary replaces the global allocation functions with counting ones (off unless a test
// turns it on), counted on every thread, so the pool's work inside a step counts too.
#include <gtest/gtest.h>

// This file is the allocation functions: g++ sees malloc behind new and free behind delete.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

#include "hinge/engine.h"
#include "model_test_util.h"
#include "tokenizer/tokenizer.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

// Every replaceable allocation function, so that each pair is malloc/free (replacing only some
// would pair, say, the runtime's or a sanitizer's nothrow new with this free). Only the counting
// differs from the library's.
namespace {
void* counted_alloc(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed))
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
void* counted_aligned_alloc(std::size_t n, std::align_val_t al) {
  if (g_counting.load(std::memory_order_relaxed))
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  const std::size_t a = static_cast<std::size_t>(al);
  const std::size_t rounded = (std::max<std::size_t>(n, 1) + a - 1) / a * a;  // aligned_alloc's rule
  return std::aligned_alloc(a, rounded);
}
}  // namespace

void* operator new(std::size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void* operator new(std::size_t n, std::align_val_t al) {
  if (void* p = counted_aligned_alloc(n, al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t al) {
  if (void* p = counted_aligned_alloc(n, al)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  return counted_aligned_alloc(n, al);
}
void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  return counted_aligned_alloc(n, al);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace hinge {
namespace {

using testing::load_or_die;
using testing::shared_path;

// Counts allocations over `steps` steps, after `warmup` steps that size every buffer.
int64_t allocations_in_steady_steps(Engine& e, int warmup, int steps) {
  std::vector<RequestDelta> deltas;
  for (int i = 0; i < warmup; ++i) EXPECT_TRUE(e.step(&deltas).ok());
  g_allocations = 0;
  g_counting = true;
  int64_t tokens = 0;
  for (int i = 0; i < steps; ++i) {
    if (!e.step(&deltas).ok()) break;
    for (const RequestDelta& d : deltas) tokens += static_cast<int64_t>(d.token_ids.size());
  }
  g_counting = false;
  EXPECT_EQ(tokens, int64_t{steps} * 4) << "every step decodes one token per request";
  return g_allocations.load();
}

// Four requests decoding together (greedy, temperature only, top-p, top-k with min-p), with
// the detokenizer on, on two threads, across KV block boundaries (block size 16: each request
// opens ~6 blocks and fills and caches as many within the 100 steps).
TEST(EngineAllocations, SteadyDecodeStepAllocatesNothing) {
  auto m = load_or_die(shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(m);
  auto tok = Tokenizer::create(m->vocab);
  ASSERT_TRUE(tok.ok());
  EngineConfig c = testing::small_f32_engine_config(2);
  auto e = Engine::create(*m, tok->get(), c);
  ASSERT_TRUE(e.ok()) << e.status().message();
  for (int k = 0; k < 4; ++k) {
    GenerateRequest r;
    r.prompt_token_ids = {1, 403, 407, 261, 378, 285, 300 + k, 42};
    r.max_new_tokens = 200;
    r.sampling.ignore_eos = true;
    r.sampling.seed = 7 + static_cast<uint64_t>(k);
    r.sampling.temperature = k == 0 ? 0.0f : 1.0f;
    if (k == 2) r.sampling.top_p = 0.9f;
    if (k == 3) {
      r.sampling.top_k = 40;
      r.sampling.min_p = 0.05f;
    }
    ASSERT_TRUE((*e)->add_request(r).ok());
  }
  EXPECT_EQ(allocations_in_steady_steps(**e, 20, 100), 0);
}

// The counter sees allocations (the test above cannot pass for want of counting).
TEST(EngineAllocations, CounterCountsOnEveryThread) {
  g_allocations = 0;
  g_counting = true;
  auto* v = new std::vector<int>(100);
  delete v;
  std::thread t([] { std::vector<int> w(10); });
  t.join();
  g_counting = false;
  EXPECT_GE(g_allocations.load(), 3);
}

}  // namespace
}  // namespace hinge
