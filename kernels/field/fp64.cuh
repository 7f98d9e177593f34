// cuzk kernels: Montgomery multiplication with the products on the FP64 pipe.
//
// Fp's operator* (field/mont.cuh) runs on 32-bit integer multiply-adds, whose wide forms the H200
// issues at a quarter of its instruction rate, and leaves the FP64 units idle. mul_fp64 computes the
// same function, a * b / 2^(32N) mod p on the same limbs, with the products of 51-bit digits taken by
// double-precision fused multiply-adds and summed in 64-bit integers:
//
// - A value below 2^53 is exact in a double. For x, y with xy < 2^103 (two digits below 2^51, or a
//   reduction multiplier below 2^52 and a modulus digit) the pair
//     r1 = fma(x, y, 2^103),  r2 = fma(x, y, (2^103 + 3 * 2^51) - r1)
//   splits xy = q * 2^51 + lo exactly, rounding to nearest: r1 = 2^103 + q * 2^51 lies where a double's
//   unit in the last place is 2^51, so q = round(xy / 2^51) <= 2^52; the subtraction is exact (a
//   multiple of 2^51 under 2^104); and r2 = lo + 3 * 2^51 with |lo| <= 2^50 lies in [2^52, 2^53), whose
//   unit is 1. Within one binade a double's bits grow by one per unit, so the bits of r1 less those
//   of 2^103 are q (also if r1 reaches 2^104, the next binade's first value) and the bits of r2 less
//   those of 3 * 2^51 are lo. Those bit patterns are added into 64-bit columns as they are; every
//   column starts at minus the constant patterns it will receive (the counts are known statically).
// - The reduction removes 51 bits a step: m = (column * -1/p) mod 2^51 from the column's integer value,
//   whose m * p digits join the columns like the products, and the column's carry (now exact) passes
//   up by a shift. The last step takes what is left of the 32N bits: Fq's 384 = 7 * 51 + 27; Fr's
//   256 = 5 * 51 + 1, a last step of one bit after five of 51.
// - Operands are cut into L digits of 51 bits, L * 51 at least the modulus' bit length: inputs must be
//   below 2^(51 L) (every reduced value is; Fr's L * 51 = 255 drops a 256th bit).
// - Columns hold at most 4L terms of magnitude at most 2^52, well inside int64.
// - As in operator*, the result lies below 2p before one conditional subtraction (the caller's:
//   Fp<P, true>'s operator* and mul_fp64 in field/mont.cuh).
//
// The host check (kernels/host/check.cpp) compiles this with the host's IEEE fma, which rounds as the
// device's __fma_rn does, so the host test covers it bit for bit.
#pragma once
#include <stdint.h>

#include "field/ptx.cuh"

#if !defined(__CUDACC__)
#include <cmath>
#include <cstring>
#endif

namespace cuzk {
namespace f64 {

#if defined(__CUDACC__)
__device__ __forceinline__ double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ uint64_t bits(double x) { return (uint64_t)__double_as_longlong(x); }
__device__ __forceinline__ double from_bits(uint64_t x) { return __longlong_as_double((long long)x); }
#else
inline double fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline double sub_rn(double a, double b) { return a - b; }
inline uint64_t bits(double x) {
    uint64_t r;
    std::memcpy(&r, &x, sizeof r);
    return r;
}
inline double from_bits(uint64_t x) {
    double r;
    std::memcpy(&r, &x, sizeof r);
    return r;
}
#endif

constexpr int W = 51;
constexpr uint64_t DIGIT = (1ull << W) - 1;
constexpr double TWO52 = 4503599627370496.0;                 // 2^52
constexpr double C_HI = 10141204801825835211973625643008.0;  // 2^103
constexpr double C_SPLIT = C_HI + 1.5 * TWO52;               // 2^103 + 3 * 2^51 (exact)
constexpr uint64_t BITS_HI = 0x4660000000000000ull;          // the bits of 2^103
constexpr uint64_t BITS_LO = 0x4338000000000000ull;          // the bits of 3 * 2^51
constexpr uint64_t BITS_TWO52 = 0x4330000000000000ull;       // the bits of 2^52

// A value below 2^52 as a double: 2^52 + d built from its bits, less 2^52.
__device__ __forceinline__ double digit(uint64_t d) { return sub_rn(from_bits(d | BITS_TWO52), TWO52); }

// xy = q 2^51 + lo for xy < 2^103: adds lo's pattern to c[k] and q's to c[k + 1].
template <int K>
__device__ __forceinline__ void mac(uint64_t (&c)[K], double x, double y, int k) {
    const double r1 = fma_rn(x, y, C_HI);
    const double r2 = fma_rn(x, y, sub_rn(C_SPLIT, r1));
    c[k] += bits(r2);
    c[k + 1] += bits(r1);
}

}  // namespace f64

#if defined(__CUDACC__)
// Whether this warp multiplies on the FP64 units in a kernel that mixes both kinds of unit. A
// multiprocessor's four schedulers each serve the hardware warp slots s, s + 4, s + 8, ... (slot mod
// 4), and a scheduler issues to both kinds of unit only if it holds warps of both kinds: so the slots
// 0-3, 8-11, ... multiply on the FP64 units and 4-7, 12-15, ... on the integer units. With three warps
// a scheduler (G1's batched MSM round) that is two FP64 warps to one integer: the FP64 warps are
// bound by their ALU work and leave the FMA pipe nearly idle, so by the pipe model of `cargo xtask
// sass` two of them beside one integer warp keep the units busier than the reverse. By the warp's
// index in its block (threadIdx.x / 32) instead, a block of 8 warps would give schedulers 0 and 2
// only integer warps; with blocks of 4, every block's warp 0 lands on scheduler 0. %warpid may change
// if the warp is moved (preemption); both kinds give the same bits, so that only costs time, and the
// read is not volatile: the compiler may read it once for many multiplications.
__device__ __forceinline__ bool mixed_takes_fp64() {
    uint32_t slot;
    asm("mov.u32 %0, %%warpid;" : "=r"(slot));
    return ((slot >> 2) & 1) == 0;
}
#endif

template <class P>
struct Fp64Mul {
    static constexpr int N = P::N;
    static constexpr int BITS = 32 * N;

    // The modulus' bit length.
    __device__ __forceinline__ static constexpr int mod_bits() {
        int top = N - 1;
        while (top > 0 && P::mod(top) == 0) top--;
        int b = 32;
        while (b > 0 && !((P::mod(top) >> (b - 1)) & 1)) b--;
        return 32 * top + b;
    }
    static constexpr int L = (mod_bits() + f64::W - 1) / f64::W;  // digits of an operand (below p)
    // Bits the reduction removes at and above the last digit's place: the last step's width when at most
    // W (Fq: 27), else W and a last small step of LAST - W bits (Fr: 256 = 5 * 51 + 1).
    static constexpr int LAST = BITS - f64::W * (L - 1);
    static constexpr int EXTRA = LAST > f64::W ? LAST - f64::W : 0;
    static_assert(LAST >= 1 && EXTRA <= 8, "an element's limbs and the modulus' digits do not fit this scheme");

    // Bits [pos, pos + 64) of N little-endian 32-bit words (zero beyond them).
    __device__ __forceinline__ static constexpr uint32_t word(const uint32_t (&v)[N], int i) {
        return i < N ? v[i] : 0;
    }
    __device__ __forceinline__ static constexpr uint64_t bits_at(const uint32_t (&v)[N], int pos) {
        const int w = pos / 32, s = pos % 32;
        const uint64_t lo = (uint64_t)word(v, w) | ((uint64_t)word(v, w + 1) << 32);
        return s == 0 ? lo : (lo >> s) | ((uint64_t)word(v, w + 2) << (64 - s));
    }

    // Digit j of the modulus.
    __device__ __forceinline__ static constexpr uint64_t mod_digit(int j) {
        uint32_t m[N] = {};
        for (int i = 0; i < N; i++) m[i] = P::mod(i);
        return bits_at(m, f64::W * j) & f64::DIGIT;
    }

    // -1/p mod 2^64 by Newton's iteration (p odd: p * p = 1 mod 8 starts it at 3 bits).
    __device__ __forceinline__ static constexpr uint64_t neg_inv() {
        const uint64_t p = (uint64_t)P::mod(0) | ((uint64_t)P::mod(1) << 32);
        uint64_t x = p;
        for (int i = 0; i < 5; i++) x *= 2 - p * x;
        return 0 - x;
    }

    // How many low (lo) and high (q) patterns column k receives: from the L x L products and from the
    // reduction's L x L products, less the one low pattern of m_k * p_0 that step k adds by itself.
    __device__ __forceinline__ static constexpr uint64_t offset(int k) {
        uint64_t lo = 0, hi = 0;
        for (int i = 0; i < L; i++)
            for (int j = 0; j < L; j++) {
                lo += (i + j == k) ? 2 : 0;
                hi += (i + j + 1 == k) ? 2 : 0;
            }
        if (k < L) lo -= 1;
        return 0 - (lo * f64::BITS_LO + hi * f64::BITS_HI);
    }

    __device__ __forceinline__ static void digits(const uint32_t (&v)[N], double (&d)[L]) {
#pragma unroll
        for (int j = 0; j < L; j++) d[j] = f64::digit(bits_at(v, f64::W * j) & f64::DIGIT);
    }

    // r = a * b / 2^(32N) mod p + (0 or p): below 2p, for the caller's conditional subtraction.
    __device__ __forceinline__ static void mul(const uint32_t (&a)[N], const uint32_t (&b)[N], uint32_t (&r)[N]) {
        double x[L], y[L];
        digits(a, x);
        digits(b, y);
        uint64_t c[2 * L];
#pragma unroll
        for (int k = 0; k < 2 * L; k++) c[k] = offset(k);
#pragma unroll
        for (int i = 0; i < L; i++)
#pragma unroll
            for (int j = 0; j < L; j++) f64::mac(c, x[i], y[j], i + j);
        // The reduction, one digit a step; after step i, column i is divisible by 2^51 and its quotient
        // sits in `carry`, added into column i + 1 by the next step.
        uint64_t carry = 0;
        uint64_t d[L + 2];
#pragma unroll
        for (int i = 0; i < L; i++) {
            const uint64_t col = c[i] + carry;
            const int width = i + 1 < L || EXTRA ? f64::W : LAST;
            const uint64_t m = (col * neg_inv()) & ((1ull << width) - 1);
            const double md = f64::digit(m);
            const double p0 = (double)mod_digit(0);
            const double r1 = f64::fma_rn(md, p0, f64::C_HI);
            const double r2 = f64::fma_rn(md, p0, f64::sub_rn(f64::C_SPLIT, r1));
            c[i + 1] += f64::bits(r1);
            const uint64_t low = col + (f64::bits(r2) - f64::BITS_LO);
#pragma unroll
            for (int j = 1; j < L; j++) f64::mac(c, md, (double)mod_digit(j), i + j);
            if (i + 1 < L) {
                carry = (uint64_t)((int64_t)low >> f64::W);
            } else {
                // Column L - 1 is divisible by 2^min(LAST, W) ...
                d[0] = low;
            }
        }
        if constexpr (EXTRA > 0) {
            // ... and with EXTRA bits left, m' = (column L * -1/p) mod 2^EXTRA from column L's value,
            // now complete, times p joins the columns above.
            const uint64_t col = c[L] + (uint64_t)((int64_t)d[0] >> f64::W);
            const uint64_t m = (col * neg_inv()) & ((1ull << EXTRA) - 1);
#pragma unroll
            for (int t = 0; t < L; t++) c[L + t] += m * mod_digit(t);
        }
        // Now the value from column L - 1 up, V, is the result times 2^LAST.
        // Carries through the top columns: d[t] = digit t of V = sum c[L - 1 + t] 2^(51 t), the last
        // digit what carries out of the top column.
        carry = (uint64_t)((int64_t)d[0] >> f64::W);
        d[0] &= f64::DIGIT;
#pragma unroll
        for (int t = 1; t <= L; t++) {
            const uint64_t v = c[L - 1 + t] + carry;
            carry = (uint64_t)((int64_t)v >> f64::W);
            d[t] = v & f64::DIGIT;
        }
        d[L + 1] = carry;
        // The result's word k is bits [LAST + 32k, LAST + 32k + 32) of V.
#pragma unroll
        for (int k = 0; k < N; k++) {
            const int pos = LAST + 32 * k, t = pos / f64::W, s = pos % f64::W;
            uint64_t w = d[t] >> s;
            if (s > f64::W - 32 && t + 1 <= L + 1) w |= d[t + 1] << (f64::W - s);
            r[k] = (uint32_t)w;
        }
    }
};

}  // namespace cuzk
