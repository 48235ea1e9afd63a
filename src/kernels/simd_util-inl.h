// Per-target SIMD helpers shared by the Highway kernel files (matmul_*.cpp, dequantize.cpp).
// Included once per Highway target through foreach_target.h, hence the toggling include guard
// instead of #pragma once.
//
// HINGE_SIMD_AVX2_PLUS is 1 on the x86 targets that have AVX2 (AVX2, AVX3, AVX3_DL). Those use
// raw 256-bit intrinsics for the int8 dot products (pmaddubsw: Highway 1.0.3 has no u8 x i8
// pairwise multiply); every other target (SSE4, SSSE3, EMU128, NEON, ...) runs the portable
// Highway path.
#if defined(HINGE_KERNELS_SIMD_UTIL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HINGE_KERNELS_SIMD_UTIL_INL_H_
#undef HINGE_KERNELS_SIMD_UTIL_INL_H_
#else
#define HINGE_KERNELS_SIMD_UTIL_INL_H_
#endif

#include <hwy/highway.h>

#include "common/half.h"

#undef HINGE_SIMD_AVX2_PLUS
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define HINGE_SIMD_AVX2_PLUS 1
#include <immintrin.h>
#else
#define HINGE_SIMD_AVX2_PLUS 0
#endif

// HINGE_SIMD_VNNI is 1 on the AVX3 targets: there, functions marked HINGE_VNNI_ATTR (or
// HINGE_VNNI_INLINE) are compiled with AVX-512 VNNI on top of the target's flags (the full list:
// a target attribute replaces the pragma's), and may only run after cpu_has_avx512_vnni().
// GCC checks an intrinsic's target after inlining, so always-inline helpers can carry VNNI into
// such a function; clang checks every function on its own, so there every function on the way
// down carries the attribute, lambdas too (HINGE_VNNI_LAMBDA: empty for GCC, which would ignore
// it with a warning).
#undef HINGE_SIMD_VNNI
#undef HINGE_VNNI_ATTR
#undef HINGE_VNNI_INLINE
#undef HINGE_VNNI_LAMBDA
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define HINGE_SIMD_VNNI 1
#define HINGE_VNNI_ATTR __attribute__((target(HWY_TARGET_STR ",avx512vnni")))
#define HINGE_VNNI_INLINE HWY_INLINE HINGE_VNNI_ATTR
#ifdef __clang__
#define HINGE_VNNI_LAMBDA HINGE_VNNI_ATTR
#else
#define HINGE_VNNI_LAMBDA
#endif
#else
#define HINGE_SIMD_VNNI 0
#endif

// HINGE_SIMD_VNNI256 is 1 where the 256-bit u8 x i8 dot product vpdpbusd exists as a runtime
// option (GCC; clang builds, the sanitizer build, keep the pre-VNNI 256-bit path): on the AVX3 targets as AVX-512 VNNI (EVEX, needs AVX-512 VL), on the AVX2 target
// as AVX-VNNI (VEX: Alder Lake and later client cores, Zen 5). HINGE_VNNI256_ATTR adds the
// feature to a function, HINGE_DPBUSD256(acc, u8, i8) is the instruction in that encoding, and
// hinge_vnni256_available() the runtime check to pass first.
#undef HINGE_SIMD_VNNI256
#undef HINGE_VNNI256_ATTR
#undef HINGE_DPBUSD256
#undef hinge_vnni256_available
#if HINGE_SIMD_VNNI && !defined(__clang__)
#define HINGE_SIMD_VNNI256 1
#define HINGE_VNNI256_ATTR HINGE_VNNI_ATTR
#define HINGE_DPBUSD256(acc, a, b) _mm256_dpbusd_epi32(acc, a, b)
#define hinge_vnni256_available cpu_has_avx512_vnni
#elif HWY_TARGET == HWY_AVX2 && !defined(__clang__)
// GCC 12 will not inline _mm256_dpbusd_avx_epi32 through the always-inline helpers the way it
// does the EVEX form, so the AVX2 target emits the VEX instruction with inline assembly (no
// target attribute needed; binutils >= 2.38 knows the {vex} prefix).
#define HINGE_SIMD_VNNI256 1
#define HINGE_VNNI256_ATTR
#define HINGE_DPBUSD256(acc, a, b) DpbusdAvxVnni(acc, a, b)
#define hinge_vnni256_available cpu_has_avx_vnni
#else
#define HINGE_SIMD_VNNI256 0
#endif

HWY_BEFORE_NAMESPACE();
namespace hinge::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;  // the same alias the including files declare

#if HWY_TARGET == HWY_AVX2 && !defined(__clang__)
// AVX-VNNI vpdpbusd (HINGE_DPBUSD256 on the AVX2 target): acc + the u8 x i8 4-byte dot products.
HWY_INLINE __m256i DpbusdAvxVnni(__m256i acc, __m256i a, __m256i b) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
  return acc;
}
#endif

// sum over i < n of load(i) * x[i], with 4 independent accumulators to hide the FMA latency:
// load(i) is the other operand's f32 vector at element i, elem(i) its element i as f32 (the
// scalar tail). The order of the operations is fixed, so every caller gets the same bits.
template <class Load, class Elem>
HWY_INLINE float Dot4Acc(Load load, Elem elem, const float* HWY_RESTRICT x, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = hn::MulAdd(load(i), hn::LoadU(df, x + i), a0);
    a1 = hn::MulAdd(load(i + N), hn::LoadU(df, x + i + N), a1);
    a2 = hn::MulAdd(load(i + 2 * N), hn::LoadU(df, x + i + 2 * N), a2);
    a3 = hn::MulAdd(load(i + 3 * N), hn::LoadU(df, x + i + 3 * N), a3);
  }
  for (; i + N <= n; i += N) a0 = hn::MulAdd(load(i), hn::LoadU(df, x + i), a0);
  float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < n; ++i) sum += elem(i) * x[i];
  return sum;
}

// f16 bits -> f32, exact. F16C on AVX2+ (part of Highway's AVX2 target), bit tricks elsewhere.
HWY_INLINE float F16ToF32(uint16_t h) {
#if HINGE_SIMD_AVX2_PLUS
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}

// f16 bits (in u16 lanes) -> f32, exact for every input. F16C on AVX2+; elsewhere half.h's
// f16_to_f32 in vector form, because Highway 1.0.3's emulated PromoteTo turns inf and NaN into
// finite numbers.
template <class D>
HWY_INLINE hn::Vec<D> F16BitsToF32(D df, hn::Vec<hn::Rebind<uint16_t, D>> bits) {
#if HINGE_SIMD_AVX2_PLUS
  return hn::PromoteTo(df, hn::BitCast(hn::Rebind<hwy::float16_t, D>(), bits));
#else
  const hn::RebindToUnsigned<D> du;
  const auto w = hn::ShiftLeft<16>(hn::PromoteTo(du, bits));
  const auto sign = hn::And(w, hn::Set(du, 0x80000000u));
  const auto two_w = hn::Add(w, w);
  const auto normalized =
      hn::Mul(hn::BitCast(df, hn::Add(hn::ShiftRight<4>(two_w), hn::Set(du, 0xE0u << 23))),
              hn::BitCast(df, hn::Set(du, 0x7800000u)));
  const auto denormalized =
      hn::Sub(hn::BitCast(df, hn::Or(hn::ShiftRight<17>(two_w), hn::Set(du, 126u << 23))),
              hn::Set(df, 0.5f));
  const auto is_denormal = hn::Eq(hn::ShiftRight<27>(two_w), hn::Zero(du));  // two_w < 2^27
  const auto magnitude = hn::IfThenElse(is_denormal, hn::BitCast(du, denormalized),
                                        hn::BitCast(du, normalized));
  return hn::BitCast(df, hn::Or(sign, magnitude));
#endif
}

#if HINGE_SIMD_AVX2_PLUS
// Sum of the 8 f32 lanes.
HWY_INLINE float HsumF32x8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Pairwise sums of u8 * i8 products widened to 8 i32 lanes (each lane = 4 products).
// Requires a[i] * b[i] + a[i+1] * b[i+1] to fit i16 (true for every caller: |a| <= 128,
// |b| <= 127, or a <= 63).
HWY_INLINE __m256i DotU8I8(__m256i a_u8, __m256i b_i8) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(a_u8, b_i8), _mm256_set1_epi16(1));
}

// Sum of 32 i8 * i8 products as 8 i32 lanes, by moving the sign of `a` onto `b` (|a| as u8).
HWY_INLINE __m256i DotI8I8(__m256i a_i8, __m256i b_i8) {
  return DotU8I8(_mm256_sign_epi8(a_i8, a_i8), _mm256_sign_epi8(b_i8, a_i8));
}
#endif  // HINGE_SIMD_AVX2_PLUS

}  // namespace HWY_NAMESPACE
}  // namespace hinge::kernels
HWY_AFTER_NAMESPACE();

#endif  // include guard
