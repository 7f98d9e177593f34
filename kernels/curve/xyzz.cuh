// cuzk kernels: short Weierstrass curves with a = 0 (BLS12-381 G1 over Fq, G2 over Fq2).
//
// Affine points are (x, y) with the identity stored as x = y = 0 (never on either curve, as b != 0),
// the layout of cuzk_field's DeviceG1Affine / DeviceG2Affine. Sums are kept in XYZZ coordinates
// (X, Y, ZZ, ZZZ) for x = X/ZZ, y = Y/ZZZ with ZZ^3 = ZZZ^2; ZZ = 0 is the identity. The formulas
// are the a = 0 cases of the "xyzz" family in the Explicit-Formulas Database (add-2008-s,
// madd-2008-s, dbl-2008-s-1, mdbl-2008-s-1), with the special cases (an identity operand, P + P,
// P + (-P)) handled explicitly so that every input gives the group law's answer.
#pragma once
#include <type_traits>

#include "field/fields.cuh"

namespace cuzk {

// a b - c d. Over Fq2 with one reduction a coefficient (Fq2::mul_minus_mul: six 12-limb products and
// two reductions against six and four). Over Fq with one reduction (Fp::mul_minus_mul) where FUSED,
// else as two products: the formulas with an affine operand (mixed addition and doubling) keep them
// apart, as fusing there took G1's later round over affine partials (G_sum_partials) from 142 to 174
// registers, three blocks a multiprocessor to two.
template <bool FUSED, class F>
__device__ __forceinline__ F mul_minus_mul(const F& a, const F& b, const F& c, const F& d) {
    if constexpr (std::is_same_v<F, Fq2>) {
        return F::mul_minus_mul(a, b, c, d);
    } else if constexpr (FUSED) {
        return F::mul_minus_mul(a, b, c, d);
    } else {
        return a * b - c * d;
    }
}

template <class F>
struct Affine {
    F x, y;

    __device__ __forceinline__ bool is_identity() const { return x.is_zero() && y.is_zero(); }
    __device__ __forceinline__ Affine neg() const { return is_identity() ? *this : Affine{x, -y}; }
};

template <class F>
struct Xyzz {
    F X, Y, ZZ, ZZZ;

    __device__ __forceinline__ static Xyzz identity() { return {F::zero(), F::zero(), F::zero(), F::zero()}; }
    __device__ __forceinline__ bool is_identity() const { return ZZ.is_zero(); }

    __device__ __forceinline__ static Xyzz from_affine(const Affine<F>& p) {
        if (p.is_identity()) return identity();
        return {p.x, p.y, F::one(), F::one()};
    }

    // 2 * this.
    __device__ __forceinline__ Xyzz dbl() const {
        if (is_identity() || Y.is_zero()) return identity();
        const F U = Y.dbl();
        const F V = U.sqr();
        const F W = U * V;
        const F S = X * V;
        const F X2 = X.sqr();
        const F M = X2.dbl() + X2;
        Xyzz r;
        r.X = M.sqr() - S.dbl();
        r.Y = mul_minus_mul<true>(M, S - r.X, W, Y);
        r.ZZ = V * ZZ;
        r.ZZZ = W * ZZZ;
        return r;
    }

    // 2 * p for an affine p.
    __device__ __forceinline__ static Xyzz dbl_affine(const Affine<F>& p) {
        if (p.is_identity() || p.y.is_zero()) return identity();
        const F U = p.y.dbl();
        const F V = U.sqr();
        const F W = U * V;
        const F S = p.x * V;
        const F X2 = p.x.sqr();
        const F M = X2.dbl() + X2;
        Xyzz r;
        r.X = M.sqr() - S.dbl();
        r.Y = mul_minus_mul<false>(M, S - r.X, W, p.y);
        r.ZZ = V;
        r.ZZZ = W;
        return r;
    }

    // this + p for an affine p (mixed addition).
    __device__ __forceinline__ Xyzz add_affine(const Affine<F>& p) const {
        if (p.is_identity()) return *this;
        if (is_identity()) return from_affine(p);
        const F U2 = p.x * ZZ;
        const F S2 = p.y * ZZZ;
        const F P = U2 - X;
        const F R = S2 - Y;
        if (P.is_zero()) return R.is_zero() ? dbl_affine(p) : identity();
        const F PP = P.sqr();
        const F PPP = P * PP;
        const F Q = X * PP;
        Xyzz r;
        r.X = R.sqr() - PPP - Q.dbl();
        r.Y = mul_minus_mul<false>(R, Q - r.X, Y, PPP);
        r.ZZ = ZZ * PP;
        r.ZZZ = ZZZ * PPP;
        return r;
    }

    // this + q.
    __device__ __forceinline__ Xyzz operator+(const Xyzz& q) const {
        if (q.is_identity()) return *this;
        if (is_identity()) return q;
        const F U1 = X * q.ZZ;
        const F U2 = q.X * ZZ;
        const F S1 = Y * q.ZZZ;
        const F S2 = q.Y * ZZZ;
        const F P = U2 - U1;
        const F R = S2 - S1;
        if (P.is_zero()) return R.is_zero() ? dbl() : identity();
        const F PP = P.sqr();
        const F PPP = P * PP;
        const F Q = U1 * PP;
        Xyzz r;
        r.X = R.sqr() - PPP - Q.dbl();
        r.Y = mul_minus_mul<true>(R, Q - r.X, S1, PPP);
        r.ZZ = ZZ * q.ZZ * PP;
        r.ZZZ = ZZZ * q.ZZZ * PPP;
        return r;
    }

    __device__ __forceinline__ Xyzz neg() const { return {X, -Y, ZZ, ZZZ}; }

    // k * this for a small k (double and add, most significant bit first).
    __device__ __forceinline__ Xyzz mul_small(uint32_t k) const {
        Xyzz r = identity();
        for (int b = 31; b >= 0; b--) {
            r = r.dbl();
            if ((k >> b) & 1) r = r + *this;
        }
        return r;
    }
};

using G1Affine = Affine<Fq>;
using G2Affine = Affine<Fq2>;
using G1Xyzz = Xyzz<Fq>;
using G2Xyzz = Xyzz<Fq2>;

}  // namespace cuzk
