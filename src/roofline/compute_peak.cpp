#include "roofline/compute_peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/thread_pool.h"
#include "kernels/cpu_features.h"

namespace hinge::roofline {

namespace {

std::atomic<uint64_t> g_sink{0};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HINGE_PEAK_X86 1
#define HINGE_TARGET(s) __attribute__((target(s), noinline))

// Keeps a value in a register and opaque to the optimizer (no folding of the loop).
#define HINGE_OPAQUE(v) __asm__ volatile("" : "+v"(v))

// 12 independent chains, each started from its own value (identical chains would be merged
// into one by the compiler):  vpdpbusd / vdpbf16ps / vfmadd have a latency of 4-6 cycles and up to
// 2 issue ports on the cores we know, so 12 chains keep every port busy.
#define HINGE_6(op) op(0) op(1) op(2) op(3) op(4) op(5)
#define HINGE_12(op) \
  op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8) op(9) op(10) op(11)

HINGE_TARGET("avx512f,avx512bw,avx512vl,avx512vnni")
uint64_t loop_avx512_vnni(int64_t iters) {
  __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
#define DECL(i) __m512i c##i = _mm512_set1_epi32(i);
  HINGE_12(DECL)
#undef DECL
  for (int64_t it = 0; it < iters; ++it) {
    HINGE_OPAQUE(a);
#define STEP(i) c##i = _mm512_dpbusd_epi32(c##i, a, b);
    HINGE_12(STEP)
#undef STEP
  }
  __m512i s = _mm512_setzero_si512();
#define SUM(i) s = _mm512_add_epi32(s, c##i);
  HINGE_12(SUM)
#undef SUM
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  return static_cast<uint64_t>(lanes[0]);
}

HINGE_TARGET("avx512f,avx512bw,avx512vl,avx512bf16")
uint64_t loop_avx512_bf16(int64_t iters) {
  __m512i ai = _mm512_set1_epi16(0x3F80);  // bf16 1.0
  __m512i bi = _mm512_set1_epi16(0x3380);  // bf16 2^-24: the sums stay small and normal
#define DECL(i) __m512 c##i = _mm512_set1_ps(static_cast<float>(i));
  HINGE_12(DECL)
#undef DECL
  for (int64_t it = 0; it < iters; ++it) {
    HINGE_OPAQUE(ai);
    const __m512bh a = (__m512bh)ai, b = (__m512bh)bi;
#define STEP(i) c##i = _mm512_dpbf16_ps(c##i, a, b);
    HINGE_12(STEP)
#undef STEP
  }
  __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, c##i);
  HINGE_12(SUM)
#undef SUM
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  return static_cast<uint64_t>(lanes[0]);
}

HINGE_TARGET("avx512f")
uint64_t loop_avx512_fma(int64_t iters) {
  __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(1e-7f);
#define DECL(i) __m512 c##i = _mm512_set1_ps(static_cast<float>(i));
  HINGE_12(DECL)
#undef DECL
  for (int64_t it = 0; it < iters; ++it) {
    HINGE_OPAQUE(a);
#define STEP(i) c##i = _mm512_fmadd_ps(a, b, c##i);
    HINGE_12(STEP)
#undef STEP
  }
  __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, c##i);
  HINGE_12(SUM)
#undef SUM
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  return static_cast<uint64_t>(lanes[0]);
}

// AVX2's int8 dot product as the kernels without VNNI run it (ggml's mul_sum_us8_pairs):
// vpmaddubsw (32 u8 x i8 products, adjacent pairs summed to i16), vpmaddwd by ones (pairs to
// i32), vpaddd into the accumulator. 32 multiply-adds per step of a chain. Unlike the FMA and
// VNNI loops the products do not take the accumulator, so each chain has a b of its own: with
// one shared b the compiler computes the product once per iteration and the loop measures
// vpaddd (a peak of 271 GOP/s per Zen 3 core, twice the real one). Six chains (6 + 6 + 2
// registers) keep every operand in a register, two rounds per iteration (12 steps, as the
// other loops).
HINGE_TARGET("avx2")
uint64_t loop_avx2_int8(int64_t iters) {
  __m256i a = _mm256_set1_epi8(1);
  const __m256i ones = _mm256_set1_epi16(1);
#define DECL(i)                                \
  __m256i c##i = _mm256_set1_epi32(i);         \
  __m256i b##i = _mm256_set1_epi8(static_cast<char>(i + 1));
  HINGE_6(DECL)
#undef DECL
  for (int64_t it = 0; it < iters; ++it) {
    HINGE_OPAQUE(a);
#define STEP(i) \
  c##i = _mm256_add_epi32(c##i, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b##i), ones));
    HINGE_6(STEP)
    HINGE_OPAQUE(a);  // a "new" a: the second round is not the first one again
    HINGE_6(STEP)
#undef STEP
  }
  __m256i s = _mm256_setzero_si256();
#define SUM(i) s = _mm256_add_epi32(s, c##i);
  HINGE_6(SUM)
#undef SUM
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return static_cast<uint64_t>(lanes[0]);
}

HINGE_TARGET("avx2,fma")
uint64_t loop_avx2_fma(int64_t iters) {
  __m256 a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(1e-7f);
#define DECL(i) __m256 c##i = _mm256_set1_ps(static_cast<float>(i));
  HINGE_12(DECL)
#undef DECL
  for (int64_t it = 0; it < iters; ++it) {
    HINGE_OPAQUE(a);
#define STEP(i) c##i = _mm256_fmadd_ps(a, b, c##i);
    HINGE_12(STEP)
#undef STEP
  }
  __m256 s = _mm256_setzero_ps();
#define SUM(i) s = _mm256_add_ps(s, c##i);
  HINGE_12(SUM)
#undef SUM
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  float t = 0;
  for (float v : out) t += v;
  return static_cast<uint64_t>(t);
}

// AMX: tiles 0-3 accumulate, 4-5 are A, 6-7 are B; each step is the 2 x 2 product of a register
// block (4 independent tile products), written as assembly so both compilers take it.
uint64_t loop_amx(int64_t iters, bool bf16) {
  alignas(64) uint8_t cfg[64] = {};
  cfg[0] = 1;  // palette 1
  for (int t = 0; t < 8; ++t) {
    cfg[16 + 2 * t] = 64;  // bytes per row
    cfg[48 + t] = 16;      // rows
  }
  alignas(64) uint8_t src[16 * 64];
  // int8 1 (or, read as bf16 pairs, 2^-126-ish tiny normals: 0x0101): products stay finite.
  std::memset(src, 1, sizeof src);
  const long stride = 64;
  __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
  __asm__ volatile(
      "tileloadd (%0,%1,1), %%tmm4\n\t"
      "tileloadd (%0,%1,1), %%tmm5\n\t"
      "tileloadd (%0,%1,1), %%tmm6\n\t"
      "tileloadd (%0,%1,1), %%tmm7\n\t"
      "tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" ::"r"(src),
      "r"(stride)
      : "memory");
  if (bf16) {
    for (int64_t it = 0; it < iters; ++it)
      __asm__ volatile(
          "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
          "tdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"
          "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\t"
          "tdpbf16ps %%tmm7, %%tmm5, %%tmm3" ::
              : "memory");
  } else {
    for (int64_t it = 0; it < iters; ++it)
      __asm__ volatile(
          "tdpbssd %%tmm6, %%tmm4, %%tmm0\n\t"
          "tdpbssd %%tmm7, %%tmm4, %%tmm1\n\t"
          "tdpbssd %%tmm6, %%tmm5, %%tmm2\n\t"
          "tdpbssd %%tmm7, %%tmm5, %%tmm3" ::
              : "memory");
  }
  alignas(64) int32_t out[16 * 16];
  __asm__ volatile("tilestored %%tmm0, (%0,%1,1)" ::"r"(out), "r"(stride) : "memory");
  __asm__ volatile("tilerelease" ::: "memory");
  return static_cast<uint64_t>(out[0]);
}
#endif

// Runs `iters` steps of the family's loop; returns a value that depends on the results.
uint64_t run_loop(PeakFamily f, int64_t iters) {
#ifdef HINGE_PEAK_X86
  switch (f) {
    case PeakFamily::kAmxInt8: return loop_amx(iters, false);
    case PeakFamily::kAmxBf16: return loop_amx(iters, true);
    case PeakFamily::kAvx512Vnni: return loop_avx512_vnni(iters);
    case PeakFamily::kAvx512Bf16: return loop_avx512_bf16(iters);
    case PeakFamily::kAvx512Fma: return loop_avx512_fma(iters);
    case PeakFamily::kAvx2Int8: return loop_avx2_int8(iters);
    case PeakFamily::kAvx2Fma: return loop_avx2_fma(iters);
  }
#else
  (void)f;
  (void)iters;
#endif
  return 0;
}

// Multiply-adds of one loop step: 12 vector instructions, or 4 tile products.
double macs_per_step(PeakFamily f) {
  const bool tiles = f == PeakFamily::kAmxInt8 || f == PeakFamily::kAmxBf16;
  return static_cast<double>(peak_family_info(f).macs_per_op) * (tiles ? 4 : 12);
}

double time_pass(ThreadPool& pool, PeakFamily f, int64_t iters) {
  const auto t0 = std::chrono::steady_clock::now();
  pool.run([&](int, int) { g_sink.fetch_add(run_loop(f, iters), std::memory_order_relaxed); });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const std::vector<PeakFamilyInfo>& all_peak_families() {
  static const std::vector<PeakFamilyInfo> kFamilies = {
      {PeakFamily::kAmxInt8, "amx-int8", "tdpbssd", true, 16 * 16 * 64},
      {PeakFamily::kAmxBf16, "amx-bf16", "tdpbf16ps", false, 16 * 16 * 32},
      {PeakFamily::kAvx512Vnni, "avx512-vnni", "vpdpbusd zmm", true, 64},
      {PeakFamily::kAvx512Bf16, "avx512-bf16", "vdpbf16ps zmm", false, 32},
      {PeakFamily::kAvx512Fma, "avx512-fma", "vfmadd231ps zmm", false, 16},
      {PeakFamily::kAvx2Int8, "avx2-int8", "vpmaddubsw+vpmaddwd ymm", true, 32},
      {PeakFamily::kAvx2Fma, "avx2-fma", "vfmadd231ps ymm", false, 8},
  };
  return kFamilies;
}

const PeakFamilyInfo* peak_family_by_name(const std::string& name) {
  for (const auto& i : all_peak_families())
    if (name == i.name) return &i;
  return nullptr;
}

const PeakFamilyInfo& peak_family_info(PeakFamily family) {
  for (const auto& i : all_peak_families())
    if (i.family == family) return i;
  return all_peak_families().front();
}

bool cpu_has_family(PeakFamily family) {
  const kernels::CpuIdentity& id = kernels::cpu_identity();
  switch (family) {
    case PeakFamily::kAmxInt8: return id.amx_int8;
    case PeakFamily::kAmxBf16: return id.amx_bf16;
    case PeakFamily::kAvx512Vnni: return id.avx512_vnni;
    case PeakFamily::kAvx512Bf16: return id.avx512_bf16;
    case PeakFamily::kAvx512Fma: return id.avx512f;
    case PeakFamily::kAvx2Int8: return id.avx2_fma;  // every AVX2 CPU has FMA too
    case PeakFamily::kAvx2Fma: return id.avx2_fma;
  }
  return false;
}

std::vector<PeakFamily> available_peak_families() {
  std::vector<PeakFamily> out;
#ifdef HINGE_PEAK_X86
  for (const auto& i : all_peak_families())
    if (cpu_has_family(i.family)) out.push_back(i.family);
#endif
  return out;
}

ComputePeak measure_compute_peak(ThreadPool& pool, PeakFamily family, double seconds) {
  seconds = std::max(seconds, 1e-3);
  ComputePeak peak;
  peak.family = family;
  peak.threads = pool.size();
  // Size the pass: double the steps until a pass takes a quarter of the target, then scale.
  int64_t iters = 256;
  double t = time_pass(pool, family, iters);
  while (t < seconds / 4 && iters < (int64_t{1} << 40)) {
    iters *= 2;
    t = time_pass(pool, family, iters);
  }
  iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * seconds /
                                                     std::max(t, 1e-9)));
  double best = 1e30;
  for (int pass = 0; pass < 3; ++pass) best = std::min(best, time_pass(pool, family, iters));
  peak.ops_per_s = 2.0 * macs_per_step(family) * static_cast<double>(iters) *
                   static_cast<double>(pool.size()) / best;
  return peak;
}

std::vector<ComputePeak> measure_compute_peaks(ThreadPool& pool, double seconds) {
  std::vector<ComputePeak> out;
  for (PeakFamily f : available_peak_families())
    out.push_back(measure_compute_peak(pool, f, seconds));
  return out;
}

}  // namespace hinge::roofline
