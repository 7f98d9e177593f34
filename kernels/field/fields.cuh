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
__device__ __noinline__ Fq2 fq2_mul_minus_mul(Fq2 a, Fq2 b, Fq2 c, Fq2 d);

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
    // a b - c d with one reduction a coefficient (fq2_mul_minus_mul).
    __device__ __forceinline__ static Fq2 mul_minus_mul(const Fq2& a, const Fq2& b, const Fq2& c, const Fq2& d) {
        return fq2_mul_minus_mul(a, b, c, d);
    }

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

// Karatsuba: (a0 + a1 u)(b0 + b1 u) = (a0 b0 - a1 b1) + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) u, each
// coefficient reduced once (Fq::Wide): v0 = a0 b0, v1 = a1 b1 and v2 = (a0 + a1)(b0 + b1) as 24-limb
// numbers, the sums unreduced (below 2p) so that v2 - v0 - v1 = a0 b1 + a1 b0 exactly (below 2p^2), and
// p^2 + v0 - v1 in (0, 2p^2): both below p 2^384, as redc needs. Three 12-limb products and two
// reductions, against three of each.
// acc0 += a0 b0 - a1 b1 and acc1 -= a0 b0 + a1 b1 (with NEG the opposite signs), modulo 2^768: each
// product is formed and taken into both accumulators in turn, so that no more than two 24-limb values
// are live beside the product being formed.
template <bool NEG>
__device__ __forceinline__ void fq2_take_products(Fq::Wide& acc0, Fq::Wide& acc1, const Fq2& a, const Fq2& b) {
    {
        const Fq::Wide v0 = Fq::mul_wide(a.c0, b.c0);
        acc1 = NEG ? Fq::add_wide(acc1, v0) : Fq::sub_wide(acc1, v0);
        acc0 = NEG ? Fq::sub_wide(acc0, v0) : Fq::add_wide(acc0, v0);
    }
    {
        const Fq::Wide v1 = Fq::mul_wide(a.c1, b.c1);
        acc1 = NEG ? Fq::add_wide(acc1, v1) : Fq::sub_wide(acc1, v1);
        acc0 = NEG ? Fq::add_wide(acc0, v1) : Fq::sub_wide(acc0, v1);
    }
}

__device__ __noinline__ Fq2 fq2_mul(Fq2 a, Fq2 b) {
    // v2 first, then v0 and v1.
    Fq::Wide acc0 = Fq::k_p2<1>(), acc1 = Fq::mul_wide_of_sums(a.c0, a.c1, b.c0, b.c1);
    fq2_take_products<false>(acc0, acc1, a, b);
    return {Fq::redc(acc0), Fq::redc(acc1)};
}

// a b - c d, each coefficient reduced once: with v and w the Karatsuba products of a b and c d as in
// fq2_mul, c0 = 2p^2 + (v0 - v1) - (w0 - w1), whose two differences lie in (-p^2, p^2), and
// c1 = 2p^2 + (v2 - v0 - v1) - (w2 - w0 - w1), whose two lie in [0, 2p^2): both in (0, 4p^2), below
// p 2^384 as Fq's p < 2^382 keeps it. Six products and two reductions, against six and four (and a
// subtraction) for a b - c d. Both sums wrap modulo 2^768 on the way (redc sees only their final
// values).
__device__ __noinline__ Fq2 fq2_mul_minus_mul(Fq2 a, Fq2 b, Fq2 c, Fq2 d) {
    static_assert(FqParams::mod(FqParams::N - 1) < 0x3fffffffu, "4p^2 must stay below p 2^384");
    // Each operand pair's products in turn, so that its operands die as soon as they are used.
    Fq::Wide acc0 = Fq::k_p2<2>();
    Fq::Wide acc1 = Fq::add_wide(Fq::k_p2<2>(), Fq::mul_wide_of_sums(a.c0, a.c1, b.c0, b.c1));
    fq2_take_products<false>(acc0, acc1, a, b);
    acc1 = Fq::sub_wide(acc1, Fq::mul_wide_of_sums(c.c0, c.c1, d.c0, d.c1));
    fq2_take_products<true>(acc0, acc1, c, d);
    return {Fq::redc(acc0), Fq::redc(acc1)};
}

// (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u.
__device__ __noinline__ Fq2 fq2_sqr(Fq2 a) {
    const Fq m = a.c0 * a.c1;
    return {(a.c0 + a.c1) * (a.c0 - a.c1), m.dbl()};
}

}  // namespace cuzk
