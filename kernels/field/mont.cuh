// cuzk kernels: Montgomery arithmetic on 32-bit limbs with PTX carry chains.
//
// Every asm statement is volatile: the carry flag is invisible to the compiler, so it must neither
// reorder carry-chain instructions nor drop one whose register result is unused (its carry is used).
//
// A field element is N little-endian 32-bit limbs holding x * 2^(32N) mod p (the same bytes as
// arkworks' 64-bit Montgomery limbs). Every operation takes and returns fully reduced values.
#pragma once
#include <stdint.h>

namespace cuzk {

// Field parameters: P provides N, INV (-p^-1 mod 2^32) and limb accessors mod(i), one(i) (R mod p),
// r2(i) (R^2 mod p) and mod_minus_2(i).
template <class P>
struct Fp {
    static constexpr int N = P::N;
    uint32_t v[N];

    __device__ __forceinline__ static Fp zero() {
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = 0;
        return r;
    }
    __device__ __forceinline__ static Fp one() {
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = P::one(i);
        return r;
    }
    __device__ __forceinline__ bool is_zero() const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i];
        return acc == 0;
    }
    __device__ __forceinline__ bool operator==(const Fp& o) const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i] ^ o.v[i];
        return acc == 0;
    }

    // r = a - p if a >= p (a < 2p), with an N-limb a plus a carry limb `hi`.
    __device__ __forceinline__ static void reduce_once(uint32_t (&a)[N], uint32_t hi) {
        uint32_t t[N], borrow;
        asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(t[0]) : "r"(a[0]), "r"(P::mod(0)));
#pragma unroll
        for (int i = 1; i < N; i++) asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(t[i]) : "r"(a[i]), "r"(P::mod(i)));
        asm volatile("subc.u32 %0, %1, 0;" : "=r"(borrow) : "r"(hi));
        // borrow is 0xffffffff when a < p: keep a.
#pragma unroll
        for (int i = 0; i < N; i++) a[i] = borrow ? a[i] : t[i];
    }

    __device__ __forceinline__ Fp operator+(const Fp& b) const {
        Fp r;
        uint32_t hi;
        asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r.v[0]) : "r"(v[0]), "r"(b.v[0]));
#pragma unroll
        for (int i = 1; i < N; i++) asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(r.v[i]) : "r"(v[i]), "r"(b.v[i]));
        asm volatile("addc.u32 %0, 0, 0;" : "=r"(hi));
        reduce_once(r.v, hi);
        return r;
    }

    __device__ __forceinline__ Fp operator-(const Fp& b) const {
        Fp r;
        uint32_t borrow;
        asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(r.v[0]) : "r"(v[0]), "r"(b.v[0]));
#pragma unroll
        for (int i = 1; i < N; i++) asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(r.v[i]) : "r"(v[i]), "r"(b.v[i]));
        asm volatile("subc.u32 %0, 0, 0;" : "=r"(borrow));
        // On borrow add p back (mask the modulus with the borrow word).
        uint32_t m[N];
#pragma unroll
        for (int i = 0; i < N; i++) m[i] = P::mod(i) & borrow;
        asm volatile("add.cc.u32 %0, %0, %1;" : "+r"(r.v[0]) : "r"(m[0]));
#pragma unroll
        for (int i = 1; i < N; i++) asm volatile("addc.cc.u32 %0, %0, %1;" : "+r"(r.v[i]) : "r"(m[i]));
        return r;
    }

    __device__ __forceinline__ Fp operator-() const { return zero() - *this; }

    __device__ __forceinline__ Fp dbl() const { return *this + *this; }

    // CIOS Montgomery multiplication: for each limb b[i], t += a*b[i], then t += m*p and shift one limb.
    // t stays below 2p < 2^(32N) for the BLS12-381 moduli (both leave spare top bits), so N+1 limbs hold it.
    __device__ __forceinline__ Fp operator*(const Fp& b) const {
        uint32_t t[N + 2];
#pragma unroll
        for (int i = 0; i < N + 2; i++) t[i] = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            const uint32_t bi = b.v[i];
            // t += lo(a * bi)
            asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[0]) : "r"(v[0]), "r"(bi));
#pragma unroll
            for (int j = 1; j < N; j++) asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[j]) : "r"(v[j]), "r"(bi));
            asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N]));
            // t += hi(a * bi) << 32
            asm volatile("mad.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[1]) : "r"(v[0]), "r"(bi));
#pragma unroll
            for (int j = 1; j < N; j++) asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[j + 1]) : "r"(v[j]), "r"(bi));
            asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
            // t += m * p, which zeroes t[0]
            const uint32_t m = t[0] * P::INV;
            asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[0]) : "r"(m), "r"(P::mod(0)));
#pragma unroll
            for (int j = 1; j < N; j++) asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[j]) : "r"(m), "r"(P::mod(j)));
            asm volatile("addc.cc.u32 %0, %0, 0;" : "+r"(t[N]));
            asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
            asm volatile("mad.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[1]) : "r"(m), "r"(P::mod(0)));
#pragma unroll
            for (int j = 1; j < N; j++) asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[j + 1]) : "r"(m), "r"(P::mod(j)));
            asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
            // shift down one limb
#pragma unroll
            for (int j = 0; j < N + 1; j++) t[j] = t[j + 1];
            t[N + 1] = 0;
        }
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = t[i];
        reduce_once(r.v, t[N]);
        return r;
    }

    __device__ __forceinline__ Fp sqr() const { return *this * *this; }

    // x^e for a little-endian exponent of N limbs.
    __device__ __forceinline__ Fp pow(const uint32_t (&e)[N]) const {
        Fp r = one();
        for (int i = N - 1; i >= 0; i--) {
            for (int b = 31; b >= 0; b--) {
                r = r.sqr();
                if ((e[i] >> b) & 1) r = r * *this;
            }
        }
        return r;
    }

    // 1/x by Fermat (x^(p-2)); the inverse of 0 is 0.
    __device__ __forceinline__ Fp inverse() const {
        uint32_t e[N];
#pragma unroll
        for (int i = 0; i < N; i++) e[i] = P::mod_minus_2(i);
        return pow(e);
    }

    // Canonical value in, Montgomery form out: x * R^2 / R.
    __device__ __forceinline__ static Fp to_mont(const Fp& canonical) {
        Fp r2;
#pragma unroll
        for (int i = 0; i < N; i++) r2.v[i] = P::r2(i);
        return canonical * r2;
    }

    // Montgomery form in, canonical value out: x / R.
    __device__ __forceinline__ Fp from_mont() const {
        Fp unit = zero();
        unit.v[0] = 1;
        return *this * unit;
    }
};

}  // namespace cuzk
