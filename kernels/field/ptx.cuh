// cuzk kernels: 32-bit carry-chain primitives.
//
// Under nvcc each one is a single volatile PTX instruction: the carry flag is invisible to the
// compiler, so it must neither reorder carry-chain instructions nor drop one whose register result is
// unused (its carry is used). Any other C++ compiler gets an emulation with an explicit carry flag, so
// the field arithmetic built on these can be checked on a machine without a GPU.
//
// Names follow PTX: `_cc` sets the carry, a `c` prefix (addc, madc) consumes it.
#pragma once
#include <stdint.h>

#if !defined(__CUDACC__)
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#endif

namespace cuzk {
namespace ptx {

#if defined(__CUDACC__)

__device__ __forceinline__ void add_cc(uint32_t& d, uint32_t a, uint32_t b) {
    asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
}
__device__ __forceinline__ void addc_cc(uint32_t& d, uint32_t a, uint32_t b) {
    asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
}
__device__ __forceinline__ void addc(uint32_t& d, uint32_t a, uint32_t b) {
    asm volatile("addc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
}
__device__ __forceinline__ void sub_cc(uint32_t& d, uint32_t a, uint32_t b) {
    asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
}
__device__ __forceinline__ void subc_cc(uint32_t& d, uint32_t a, uint32_t b) {
    asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
}
__device__ __forceinline__ void subc(uint32_t& d, uint32_t a, uint32_t b) {
    asm volatile("subc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
}
// d = lo(a * b) + c, and the variants with carry in and/or out.
__device__ __forceinline__ void mad_lo_cc(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    asm volatile("mad.lo.cc.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
}
__device__ __forceinline__ void madc_lo_cc(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    asm volatile("madc.lo.cc.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
}
// d = lo(a * b) + c with carry in only, or with neither carry.
__device__ __forceinline__ void madc_lo(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    asm volatile("madc.lo.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
}
__device__ __forceinline__ void mad_lo(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    asm volatile("mad.lo.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
}
// d = hi(a * b) + c with carry out only, or with neither carry.
__device__ __forceinline__ void mad_hi_cc(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    asm volatile("mad.hi.cc.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
}
__device__ __forceinline__ void mad_hi(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    asm volatile("mad.hi.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
}
// d = hi(a * b) + c, with carry in and out, or with carry in only.
__device__ __forceinline__ void madc_hi_cc(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    asm volatile("madc.hi.cc.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
}
__device__ __forceinline__ void madc_hi(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    asm volatile("madc.hi.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
}

// Trailing zero bits of x (32 for 0).
__device__ __forceinline__ uint32_t ctz(uint32_t x) {
    uint32_t r;
    asm("brev.b32 %0, %1;\n\tclz.b32 %0, %0;" : "=r"(r) : "r"(x));
    return r;
}
// Leading zero bits of x (32 for 0).
__device__ __forceinline__ uint32_t clz(uint32_t x) {
    uint32_t r;
    asm("clz.b32 %0, %1;" : "=r"(r) : "r"(x));
    return r;
}
// The low word of (hi:lo) >> (k mod 32).
__device__ __forceinline__ uint32_t shr_pair(uint32_t lo, uint32_t hi, uint32_t k) {
    uint32_t r;
    asm("shf.r.wrap.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(k));
    return r;
}

#else

inline uint32_t ctz(uint32_t x) { return x ? (uint32_t)__builtin_ctz(x) : 32; }
inline uint32_t clz(uint32_t x) { return x ? (uint32_t)__builtin_clz(x) : 32; }
inline uint32_t shr_pair(uint32_t lo, uint32_t hi, uint32_t k) {
    return (uint32_t)((((uint64_t)hi << 32) | lo) >> (k & 31));
}

// Host emulation: one carry flag per thread, as on the device.
inline thread_local uint32_t carry_flag = 0;

inline void set(uint32_t& d, uint64_t wide, bool out) {
    d = (uint32_t)wide;
    if (out) carry_flag = (uint32_t)(wide >> 32) & 1;
}
inline void add_cc(uint32_t& d, uint32_t a, uint32_t b) { set(d, (uint64_t)a + b, true); }
inline void addc_cc(uint32_t& d, uint32_t a, uint32_t b) { set(d, (uint64_t)a + b + carry_flag, true); }
inline void addc(uint32_t& d, uint32_t a, uint32_t b) { set(d, (uint64_t)a + b + carry_flag, false); }
inline void sub_cc(uint32_t& d, uint32_t a, uint32_t b) {
    carry_flag = a < b;
    d = a - b;
}
inline void subc_cc(uint32_t& d, uint32_t a, uint32_t b) {
    const uint64_t s = (uint64_t)b + carry_flag;
    carry_flag = (uint64_t)a < s;
    d = (uint32_t)((uint64_t)a - s);
}
inline void subc(uint32_t& d, uint32_t a, uint32_t b) { d = a - b - carry_flag; }
inline void mad_lo_cc(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    set(d, (uint64_t)(uint32_t)((uint64_t)a * b) + c, true);
}
inline void madc_lo_cc(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    set(d, (uint64_t)(uint32_t)((uint64_t)a * b) + c + carry_flag, true);
}
inline void madc_hi_cc(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    set(d, (((uint64_t)a * b) >> 32) + c + carry_flag, true);
}
inline void madc_lo(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    set(d, (uint64_t)(uint32_t)((uint64_t)a * b) + c + carry_flag, false);
}
inline void mad_lo(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) { d = (uint32_t)((uint64_t)a * b) + c; }
inline void mad_hi_cc(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    set(d, (((uint64_t)a * b) >> 32) + c, true);
}
inline void mad_hi(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    d = (uint32_t)(((uint64_t)a * b) >> 32) + c;
}
inline void madc_hi(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {
    set(d, (((uint64_t)a * b) >> 32) + c + carry_flag, false);
}

#endif

__device__ __forceinline__ uint32_t mul_lo(uint32_t a, uint32_t b) { return a * b; }
__device__ __forceinline__ uint32_t mul_hi(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }

}  // namespace ptx
}  // namespace cuzk
