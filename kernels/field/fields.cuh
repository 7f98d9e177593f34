// cuzk kernels: the BLS12-381 fields Fr, Fq and Fq2 = Fq[u]/(u^2 + 1).
#pragma once
#include "field/ptx.cuh"
#include "field/constants.cuh"
#include "field/mont.cuh"

namespace cuzk {

using Fr = Fp<FrParams>;
using Fq = Fp<FqParams>;

// Fq2 arithmetic calls its Fq multiplications out of line: inlined, every G2 formula would carry dozens
// of copies of the 12-limb multiplication, and the compiler's time grows with that; the call costs a
// few instructions against several hundred.
__device__ __noinline__ Fq fq2_base_mul(const Fq& a, const Fq& b) { return a * b; }

struct Fq2 {
    Fq c0, c1;

    __device__ __forceinline__ static Fq2 zero() { return {Fq::zero(), Fq::zero()}; }
    __device__ __forceinline__ static Fq2 one() { return {Fq::one(), Fq::zero()}; }
    __device__ __forceinline__ bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    __device__ __forceinline__ bool operator==(const Fq2& o) const { return c0 == o.c0 && c1 == o.c1; }
    __device__ __forceinline__ Fq2 operator+(const Fq2& b) const { return {c0 + b.c0, c1 + b.c1}; }
    __device__ __forceinline__ Fq2 operator-(const Fq2& b) const { return {c0 - b.c0, c1 - b.c1}; }
    __device__ __forceinline__ Fq2 operator-() const { return {-c0, -c1}; }
    __device__ __forceinline__ Fq2 dbl() const { return {c0.dbl(), c1.dbl()}; }

    // Karatsuba: (a0 + a1 u)(b0 + b1 u) = (a0 b0 - a1 b1) + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) u.
    __device__ __forceinline__ Fq2 operator*(const Fq2& b) const {
        const Fq v0 = fq2_base_mul(c0, b.c0), v1 = fq2_base_mul(c1, b.c1);
        return {v0 - v1, fq2_base_mul(c0 + c1, b.c0 + b.c1) - v0 - v1};
    }

    // (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u.
    __device__ __forceinline__ Fq2 sqr() const {
        const Fq m = fq2_base_mul(c0, c1);
        return {fq2_base_mul(c0 + c1, c0 - c1), m.dbl()};
    }

    // 1/(a0 + a1 u) = (a0 - a1 u) / (a0^2 + a1^2); the inverse of 0 is 0.
    __device__ __forceinline__ Fq2 inverse() const {
        const Fq t = (c0.sqr() + c1.sqr()).inverse();
        return {c0 * t, -(c1 * t)};
    }
};

}  // namespace cuzk
