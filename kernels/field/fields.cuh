// cuzk kernels: the BLS12-381 fields Fr, Fq and Fq2 = Fq[u]/(u^2 + 1).
#pragma once
#include "field/ptx.cuh"
#include "field/constants.cuh"
#include "field/mont.cuh"

namespace cuzk {

using Fr = Fp<FrParams>;
using Fq = Fp<FqParams>;
// The same fields with their products on the FP64 units (field/fp64.cuh): same limbs, same values.
using Fr64 = Fp<FrParams, true>;
using Fq64 = Fp<FqParams, true>;

struct Fq2;
__device__ __noinline__ Fq2 fq2_mul(Fq2 a, Fq2 b);
__device__ __noinline__ Fq2 fq2_sqr(Fq2 a);

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

    // Multiplication and squaring are out of line (fq2_mul, fq2_sqr below): inlined, every G2 formula
    // would carry dozens of copies of three 12-limb multiplications, and the compiler's time grows
    // with that; a call costs a few instructions against about two thousand.
    __device__ __forceinline__ Fq2 operator*(const Fq2& b) const { return fq2_mul(*this, b); }
    __device__ __forceinline__ Fq2 sqr() const { return fq2_sqr(*this); }

    // 1/(a0 + a1 u) = (a0 - a1 u) / (a0^2 + a1^2); the inverse of 0 is 0.
    __device__ __forceinline__ Fq2 inverse() const { return conjugate_over(norm().inverse()); }

    // The same, with one of Fq's variable-time inversions (public data only).
    __device__ __forceinline__ Fq2 inverse_vartime() const { return conjugate_over(norm().inverse_vartime()); }
    __device__ __forceinline__ Fq2 inverse_euclid() const { return conjugate_over(norm().inverse_euclid()); }

   private:
    __device__ __forceinline__ Fq norm() const { return c0.sqr() + c1.sqr(); }
    // (a0 - a1 u) t, with t the norm's inverse.
    __device__ __forceinline__ Fq2 conjugate_over(const Fq& t) const { return {c0 * t, -(c1 * t)}; }
};

// Karatsuba: (a0 + a1 u)(b0 + b1 u) = (a0 b0 - a1 b1) + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) u.
__device__ __noinline__ Fq2 fq2_mul(Fq2 a, Fq2 b) {
    const Fq v0 = a.c0 * b.c0, v1 = a.c1 * b.c1;
    return {v0 - v1, (a.c0 + a.c1) * (b.c0 + b.c1) - v0 - v1};
}

// (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u.
__device__ __noinline__ Fq2 fq2_sqr(Fq2 a) {
    const Fq m = a.c0 * a.c1;
    return {(a.c0 + a.c1) * (a.c0 - a.c1), m.dbl()};
}

}  // namespace cuzk
