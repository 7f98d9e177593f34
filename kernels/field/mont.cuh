// cuzk kernels: Montgomery arithmetic on 32-bit limbs with PTX carry chains (field/ptx.cuh).
//
// A field element is N little-endian 32-bit limbs holding x * 2^(32N) mod p (the same bytes as
// arkworks' 64-bit Montgomery limbs). Every operation takes and returns fully reduced values; only
// Wide (below) holds products before their reduction.
#pragma once
#include <stdint.h>

#include "field/fp64.cuh"
#include "field/ptx.cuh"

namespace cuzk {

__device__ __forceinline__ uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

// Field parameters: P provides N, INV (-p^-1 mod 2^32) and limb accessors mod(i), one(i) (R mod p),
// r2(i) (R^2 mod p) and mod_minus_2(i). FP64 picks operator*: the integer multiply-adds below, or the
// FP64 units (field/fp64.cuh); the two types hold the same limbs and compute the same values.
template <class P, bool FP64 = false>
struct alignas(16) Fp {
    static_assert(P::N % 4 == 0, "16-byte aligned elements need a multiple of 4 limbs");
    using Params = P;
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

    // Limb i of the modulus m: p, or 2p for the lazy arithmetic (TWICE) below. p < 2^(32N - 1), so
    // 2p fits the limbs.
    template <bool TWICE>
    __device__ __forceinline__ static constexpr uint32_t modulus(int i) {
        static_assert(P::mod(N - 1) < 0x7fffffffu, "2p must fit the limbs");
        return TWICE ? (P::mod(i) << 1) | (i > 0 ? P::mod(i - 1) >> 31 : 0) : P::mod(i);
    }

    // r = a - m if a >= m (a < 2m), with an N-limb a plus a carry limb `hi`; m is p, or 2p with TWICE.
    template <bool TWICE = false>
    __device__ __forceinline__ static void reduce_once(uint32_t (&a)[N], uint32_t hi) {
        uint32_t t[N], borrow;
        ptx::sub_cc(t[0], a[0], modulus<TWICE>(0));
#pragma unroll
        for (int i = 1; i < N; i++) ptx::subc_cc(t[i], a[i], modulus<TWICE>(i));
        ptx::subc(borrow, hi, 0);
        // borrow is 0xffffffff when a < m: keep a.
#pragma unroll
        for (int i = 0; i < N; i++) a[i] = borrow ? a[i] : t[i];
    }

    // a + b mod m for a and b below m: below m (m = p, or 2p with TWICE).
    template <bool TWICE>
    __device__ __forceinline__ Fp add_below(const Fp& b) const {
        Fp r;
        uint32_t hi;
        ptx::add_cc(r.v[0], v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) ptx::addc_cc(r.v[i], v[i], b.v[i]);
        ptx::addc(hi, 0, 0);
        reduce_once<TWICE>(r.v, hi);
        return r;
    }

    // a - b mod m for a and b below m: below m (m = p, or 2p with TWICE).
    template <bool TWICE>
    __device__ __forceinline__ Fp sub_below(const Fp& b) const {
        Fp r;
        uint32_t borrow;
        ptx::sub_cc(r.v[0], v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) ptx::subc_cc(r.v[i], v[i], b.v[i]);
        ptx::subc(borrow, 0, 0);
        // On borrow add m back (mask the modulus with the borrow word).
        ptx::add_cc(r.v[0], r.v[0], modulus<TWICE>(0) & borrow);
#pragma unroll
        for (int i = 1; i < N; i++) ptx::addc_cc(r.v[i], r.v[i], modulus<TWICE>(i) & borrow);
        return r;
    }

    __device__ __forceinline__ Fp operator+(const Fp& b) const { return add_below<false>(b); }
    __device__ __forceinline__ Fp operator-(const Fp& b) const { return sub_below<false>(b); }
    __device__ __forceinline__ Fp operator-() const { return zero() - *this; }

    // Lazy arithmetic below 2p: the NTT passes keep their elements in [0, 2p) between stages and
    // reduce them once as they store them (reduced()), which spares every Shoup product its final
    // subtraction (mul_shoup_lazy). Sums and differences of values below 2p, below 2p.
    __device__ __forceinline__ Fp add_lazy(const Fp& b) const { return add_below<true>(b); }
    __device__ __forceinline__ Fp sub_lazy(const Fp& b) const { return sub_below<true>(b); }

    // This value (below 2p) fully reduced.
    __device__ __forceinline__ Fp reduced() const {
        Fp r = *this;
        reduce_once(r.v, 0);
        return r;
    }

    __device__ __forceinline__ Fp dbl() const { return *this + *this; }

    // Montgomery multiplication; on the integer units (mul_int), CIOS with split accumulators.
    //
    // The running value t lives in two arrays: e[k] has weight 2^(32k) and o[k] weight 2^(32(k+1)).
    // The products a[j]*x of even j put their low and high words at weights j and j+1, those of odd j
    // at j and j+1 as well, so each family fills one array in a single carry chain that alternates
    // mad.lo and mad.hi, with no separate pass for the high words. After each row t gains m*p (which
    // clears limb 0) and is divided by 2^32: the old o becomes the new e and the old e, moved down
    // two limbs, becomes the new o, its stray limb e[1] folded into the next chain.
    //
    // Bounds: with a, b < p and p < 2^(32N - 1), t < 2p between rows and below 2^(32(N+1)) inside
    // one, so o (weights 1..N) never carries out of its top limb and the result needs one final
    // conditional subtraction.
    __device__ __forceinline__ Fp operator*(const Fp& b) const {
        if constexpr (FP64) {
            return mul_fp64(b);
        } else {
            return mul_int(b);
        }
    }

    // The multiplication on the FP64 units (Fp64Mul), whichever operator* this type has.
    __device__ __forceinline__ Fp mul_fp64(const Fp& b) const {
        Fp r;
        Fp64Mul<P>::mul(v, b.v, r.v);
        reduce_once(r.v, 0);
        return r;
    }

    // The multiplication on the integer units, whichever operator* this type has. Its rows are
    // first_row / next_row / merge below written out: through those helpers nvcc orders some operands
    // differently and the MSM kernels compile to other code (104 more instructions), so the measured
    // kernels keep this form.
    __device__ __forceinline__ Fp mul_int(const Fp& b) const {
        static_assert(N % 2 == 0, "split accumulators need an even limb count");
        uint32_t e[N], o[N];
        // Row 0: plain products.
#pragma unroll
        for (int j = 0; j < N; j += 2) {
            e[j] = ptx::mul_lo(v[j], b.v[0]);
            e[j + 1] = ptx::mul_hi(v[j], b.v[0]);
            o[j] = ptx::mul_lo(v[j + 1], b.v[0]);
            o[j + 1] = ptx::mul_hi(v[j + 1], b.v[0]);
        }
        reduce_row(e, o);
#pragma unroll
        for (int i = 1; i < N; i++) {
            const uint32_t x = b.v[i];
            uint32_t ne[N], no[N];
            // Divide by 2^32: the new e is the old o plus the stray limb e[1] ...
#pragma unroll
            for (int k = 0; k < N; k++) ne[k] = o[k];
            ptx::add_cc(ne[0], ne[0], e[1]);
            // ... whose carry (weight 1) starts the odd chain, which adds the odd products to the
            // old e moved down two limbs.
#pragma unroll
            for (int j = 1; j < N; j += 2) {
                ptx::madc_lo_cc(no[j - 1], v[j], x, j + 1 < N ? e[j + 1] : 0);
                if (j + 2 < N)
                    ptx::madc_hi_cc(no[j], v[j], x, e[j + 2]);
                else
                    ptx::madc_hi(no[j], v[j], x, 0);
            }
            // The even products, their final carry at weight N into o's top limb.
            mad_even(ne, x, v);
            ptx::addc(no[N - 1], no[N - 1], 0);
#pragma unroll
            for (int k = 0; k < N; k++) {
                e[k] = ne[k];
                o[k] = no[k];
            }
            reduce_row(e, o);
        }
        // Last division by 2^32 and merge: r = o + e[1..].
        Fp r;
        ptx::add_cc(r.v[0], o[0], e[1]);
#pragma unroll
        for (int k = 1; k < N - 1; k++) ptx::addc_cc(r.v[k], o[k], e[k + 1]);
        ptx::addc(r.v[N - 1], o[N - 1], 0);
        reduce_once(r.v, 0);
        return r;
    }

    // a * w mod p by Shoup's method, for a factor w known ahead (an NTT's twiddle) and its quotient
    // wq = floor(w 2^(32N) / p): no Montgomery reduction, so the result has a's form whatever w's
    // (w canonical keeps a's Montgomery form: a R w = (a w) R). With a < p,
    // a wq / 2^(32N) lies in (a w / p - p / 2^(32N), a w / p], so q = floor(a wq / 2^(32N)) is
    // floor(a w / p) or one less and a w - q p is below 2p. q comes from a truncated product: the words
    // of a wq from weight 2^(32(N-1)) up (low words of x_i y_j with i + j >= N - 1, high words with
    // i + j >= N - 2); what it leaves out is below 2N 2^(32(N-1)), too little to lower the quotient
    // by one more as long as p / 2^(32N) < 1 - 2N 2^-32. a w and q p are needed only modulo 2^(32N),
    // where 2p fits (Fr: p < 0.46 2^256), so each is a low half product. Multiplications of limbs:
    // 79 for q, 64 for a w, 64 for q p (36 for Fr, whose lowest limbs 1 and 2^32 - 1 make q p's first
    // two rows additions), against mul_int's 2 N^2.
    __device__ __forceinline__ Fp mul_shoup(const Fp& w, const Fp& wq) const { return mul_shoup_lazy(w, wq).reduced(); }

    // mul_shoup without its final subtraction: a w mod p or that plus p, below 2p, for a below 2p as
    // well (then a wq / 2^(32N) falls short of a w / p by less than 2p / 2^(32N) < 0.91 and the
    // truncation, still less than 1: q is floor(a w / p) or one less, as for a below p).
    __device__ __forceinline__ Fp mul_shoup_lazy(const Fp& w, const Fp& wq) const {
        static_assert(P::mod(N - 1) < 0x7fffffffu, "2p must fit the limbs");
        uint32_t h[N + 1];
        high_approx(v, wq.v, h);
        uint32_t t[N], u[N];
        low_product(v, w.v, t);
#pragma unroll
        for (int k = 0; k < N; k++) u[k] = LOW_ONE ? h[k + 1] : 0;
        if constexpr (LOW_ONE) {
            // q p = q + q 2^64 - q 2^32 + (q p's rows from limb 2), modulo 2^(32N).
            ptx::add_cc(u[2], u[2], h[1]);
#pragma unroll
            for (int k = 3; k < N - 1; k++) ptx::addc_cc(u[k], u[k], h[k - 1]);
            ptx::addc(u[N - 1], u[N - 1], h[N - 2]);
            ptx::sub_cc(u[1], u[1], h[1]);
#pragma unroll
            for (int k = 2; k < N - 1; k++) ptx::subc_cc(u[k], u[k], h[k]);
            ptx::subc(u[N - 1], u[N - 1], h[N - 1]);
        }
        uint32_t q[N], uo[N];
#pragma unroll
        for (int k = 0; k < N; k++) {
            q[k] = h[k + 1];
            uo[k] = 0;
        }
        // q p's remaining rows, split by alignment (low_row): u + uo is q p modulo 2^(32N).
#pragma unroll
        for (int j = LOW_ONE ? 2 : 0; j < N; j++) low_row(u, uo, q, P::mod(j), j);
        sub_limbs<N>(t, u, t);
        sub_limbs<N>(t, uo, t);
        Fp r;
#pragma unroll
        for (int k = 0; k < N; k++) r.v[k] = t[k];
        return r;
    }

    // Shoup's quotient of a factor: floor(w 2^(32N) / p) for w < p, by long division one bit at a time
    // (for tables built once, not for the passes).
    __device__ __forceinline__ Fp shoup_quotient() const {
        // The dividend is w followed by 32N zero bits, taken a bit at a time from the top: rem = 2 rem
        // + bit, less p (and a quotient bit of 1) where that reaches p; rem stays below p. The
        // quotient's bits from w's own are 0 (w < p); those from the zero bits are its N limbs.
        uint32_t rem[N], quo[N];
#pragma unroll
        for (int k = 0; k < N; k++) rem[k] = quo[k] = 0;
#pragma unroll
        for (int limb = 2 * N - 1; limb >= 0; limb--) {
            const uint32_t word = limb >= N ? v[limb >= N ? limb - N : 0] : 0;
            uint32_t bits = 0;
#pragma unroll 1
            for (int b = 31; b >= 0; b--) {
                // p < 2^(32N - 1), so 2 rem + 1 < 2^(32N): the shift loses nothing.
#pragma unroll
                for (int k = N - 1; k > 0; k--) rem[k] = (rem[k] << 1) | (rem[k - 1] >> 31);
                rem[0] = (rem[0] << 1) | ((word >> b) & 1);
                uint32_t d[N], borrow;
                ptx::sub_cc(d[0], rem[0], P::mod(0));
#pragma unroll
                for (int k = 1; k < N; k++) ptx::subc_cc(d[k], rem[k], P::mod(k));
                ptx::subc(borrow, 0, 0);
#pragma unroll
                for (int k = 0; k < N; k++) rem[k] = borrow ? rem[k] : d[k];
                bits |= (borrow ? 0u : 1u) << b;
            }
            if (limb < N) quo[limb] = bits;
        }
        Fp r;
#pragma unroll
        for (int k = 0; k < N; k++) r.v[k] = quo[k];
        return r;
    }

   private:
    // acc[at + m] += word m of the products x[i] y, x[i + 2] y, x[i + 4] y, ... taken low word, high
    // word, low word, ... (from the high word of x[i] y when `from_hi`), for m < len, as one carry
    // chain; with `carry_out` the last addition leaves its carry for the caller. The words of one such
    // chain sit at consecutive weights, so it needs no separate pass for the high words.
    template <int A, int M>
    __device__ __forceinline__ static void mad_chain(uint32_t (&acc)[A], int at, const uint32_t (&x)[M], uint32_t y,
                                                     int i, bool from_hi, int len, bool carry_out) {
#pragma unroll
        for (int m = 0; m < M + 1; m++) {
            if (m < len) {
                const int k = m + (from_hi ? 1 : 0);
                const uint32_t xi = x[i + 2 * (k / 2)];
                const bool hi = (k & 1) != 0, first = m == 0, last = m == len - 1;
                uint32_t& d = acc[at + m];
                if (first && last && !carry_out) {
                    if (hi)
                        ptx::mad_hi(d, xi, y, d);
                    else
                        ptx::mad_lo(d, xi, y, d);
                } else if (first) {
                    if (hi)
                        ptx::mad_hi_cc(d, xi, y, d);
                    else
                        ptx::mad_lo_cc(d, xi, y, d);
                } else if (last && !carry_out) {
                    if (hi)
                        ptx::madc_hi(d, xi, y, d);
                    else
                        ptx::madc_lo(d, xi, y, d);
                } else {
                    if (hi)
                        ptx::madc_hi_cc(d, xi, y, d);
                    else
                        ptx::madc_lo_cc(d, xi, y, d);
                }
            }
        }
    }

    // The products below accumulate in two arrays by alignment: a carry chain of products x_i y,
    // x_(i+2) y, ... puts low and high words at consecutive indices, which the compiler fuses into
    // 64-bit multiply-adds on register pairs; chains whose low words fall on even indices go to one
    // array and those on odd indices to the other, so that each array's pairs keep one alignment.
    // Summed into one array, every row's chains would alternate alignments, and the register pairs
    // would be shifted by moves between rows (about 128 a Shoup product on sm_90, more than half as
    // many instructions as its multiplications).

    // acc[at ..] += a chain of x[i] y, x[i + 2] y, ... (as mad_chain), in `even` when its low words
    // fall on even indices (`lo_at`, the index of x[i] y's low word, even), otherwise in `odd`.
    template <int A>
    __device__ __forceinline__ static void mad_chain_aligned(uint32_t (&even)[A], uint32_t (&odd)[A], int lo_at,
                                                             int at, const uint32_t (&x)[N], uint32_t y, int i,
                                                             bool from_hi, int len, bool carry_out, int carry_to) {
        if ((lo_at & 1) == 0) {
            mad_chain(even, at, x, y, i, from_hi, len, carry_out);
            if (carry_out) ptx::addc(even[carry_to], even[carry_to], 0);
        } else {
            mad_chain(odd, at, x, y, i, from_hi, len, carry_out);
            if (carry_out) ptx::addc(odd[carry_to], odd[carry_to], 0);
        }
    }

    // Row j of a low half product: e + o += x y 2^(32j) modulo 2^(32N), the even products' chain from
    // limb j and the odd products' from limb j + 1, each in the array of its alignment.
    __device__ __forceinline__ static void low_row(uint32_t (&e)[N], uint32_t (&o)[N], const uint32_t (&x)[N],
                                                   uint32_t y, int j) {
        mad_chain_aligned(e, o, j, j, x, y, 0, false, N - j, false, 0);
        if (N - j - 1 > 0) mad_chain_aligned(e, o, j + 1, j + 1, x, y, 1, false, N - j - 1, false, 0);
    }

    // t = x y modulo 2^(32N).
    __device__ __forceinline__ static void low_product(const uint32_t (&x)[N], const uint32_t (&y)[N],
                                                       uint32_t (&t)[N]) {
        uint32_t o[N];
#pragma unroll
        for (int k = 0; k < N; k++) t[k] = o[k] = 0;
#pragma unroll
        for (int j = 0; j < N; j++) low_row(t, o, x, y[j], j);
        add_limbs<N>(t, o, t);
    }

    // h = the words of x y from weight 2^(32(N-1)) up (h[k] at weight 2^(32(N-1+k))), leaving out the
    // low words of x_i y_j with i + j < N - 1 and the high words with i + j < N - 2 (and their
    // carries): h[1..N] is floor(x y / 2^(32N)) or up to one less (see mul_shoup).
    //
    // Row j has two chains, of i0, i0 + 2, ... and of i0 + 1, i0 + 3, ..., in the two arrays of their
    // alignments (x_i y_j's low word at index i + j - (N - 1)); the one holding x_(N-1) ends at index
    // j + 1 and carries into j + 2, the other ends at j and carries into j + 1. The holder of x_(N-1)
    // changes alignment from row to row, so each array's chain of row j ends one index above its
    // chain of row j - 1: a carry lands where that array holds nothing yet, or at most the carry of
    // the row before (no further carry). Each array holds part of the same sum, so both and their
    // sum stay below 2^(32(N+1)).
    __device__ __forceinline__ static void high_approx(const uint32_t (&x)[N], const uint32_t (&y)[N],
                                                       uint32_t (&h)[N + 1]) {
        uint32_t o[N + 1];
#pragma unroll
        for (int k = 0; k <= N; k++) h[k] = o[k] = 0;
#pragma unroll
        for (int j = 0; j < N; j++) {
            // Products x_i y_j from i0: the one with i0 + j = N - 2 gives only its high word (at index 0).
            const int i0 = N - 2 - j > 0 ? N - 2 - j : 0;
#pragma unroll
            for (int is = i0; is <= i0 + 1; is++) {
                if (is > N - 1) continue;
                const bool from_hi = is + j == N - 2;
                const int lo_at = is + j - (N - 1);
                const int at = from_hi ? 0 : lo_at;
                const int last = is + 2 * ((N - 1 - is) / 2);  // last product index of this chain
                const int end = last + j + 2 - N;              // where its high word lands
                const int carry_to = end + 1;
                mad_chain_aligned(h, o, lo_at, at, x, y[j], is, from_hi, end - at + 1, carry_to <= N, carry_to);
            }
        }
        add_limbs<N + 1>(h, o, h);
    }

   public:
    // Montgomery multiplication by Karatsuba's product and a separate reduction: the 2N-limb
    // product a b from three products of N/2 limbs, x0 y0, x1 y1 and (x0 + x1)(y0 + y1) (3N^2/4
    // products of limbs instead of N^2; the sums' carry bits are added back as masked words), then N
    // reduction rows as mul_int's. The same value as mul_int.
    __device__ __forceinline__ Fp mul_kara(const Fp& b) const {
        constexpr int H = N / 2;
        uint32_t t[2 * N];
        {
            uint32_t x0[H], x1[H], y0[H], y1[H], sx[H], sy[H];
#pragma unroll
            for (int i = 0; i < H; i++) {
                x0[i] = v[i];
                x1[i] = v[H + i];
                y0[i] = b.v[i];
                y1[i] = b.v[H + i];
            }
            uint32_t p0[N], p2[N], m[N + 1];
            mul_half<H>(x0, y0, p0);
            mul_half<H>(x1, y1, p2);
            const uint32_t cx = add_half<H>(x0, x1, sx), cy = add_half<H>(y0, y1, sy);
            {
                uint32_t s[N];
                mul_half<H>(sx, sy, s);
#pragma unroll
                for (int k = 0; k < N; k++) m[k] = s[k];
            }
            // (sx + cx 2^(32H)) (sy + cy 2^(32H)) = sx sy + (cx sy + cy sx) 2^(32H) + cx cy 2^(32N).
            const uint32_t mx = 0u - cx, my = 0u - cy;
            ptx::add_cc(m[H], m[H], sy[0] & mx);
#pragma unroll
            for (int j = 1; j < H; j++) ptx::addc_cc(m[H + j], m[H + j], sy[j] & mx);
            ptx::addc(m[N], cx & cy, 0);
            ptx::add_cc(m[H], m[H], sx[0] & my);
#pragma unroll
            for (int j = 1; j < H; j++) ptx::addc_cc(m[H + j], m[H + j], sx[j] & my);
            ptx::addc(m[N], m[N], 0);
            // The middle term x0 y1 + x1 y0 = m - p0 - p2 (below 2^(32N + 1)).
            sub_from(m, p0);
            sub_from(m, p2);
#pragma unroll
            for (int i = 0; i < N; i++) {
                t[i] = p0[i];
                t[N + i] = p2[i];
            }
            ptx::add_cc(t[H], t[H], m[0]);
#pragma unroll
            for (int j = 1; j <= N; j++) ptx::addc_cc(t[H + j], t[H + j], m[j]);
#pragma unroll
            for (int k = H + N + 1; k < 2 * N - 1; k++) ptx::addc_cc(t[k], t[k], 0);
            ptx::addc(t[2 * N - 1], t[2 * N - 1], 0);
        }
        return redc(t);
    }


    // t / 2^(32N) mod p, fully reduced, for a 2N-limb t below p 2^(32N) (the result before the final
    // subtraction is (t + M p) / 2^(32N) with M < 2^(32N), below 2p).
    __device__ __forceinline__ static Fp redc(const uint32_t (&t)[2 * N]) {
        // Reduction as mul_int's rows, t's upper limbs entering one a row: the accumulators start as
        // t's lower half; after each row the lowest limb is 0 and they move down one limb, e[1] joining
        // o[0] (its carry out goes into the next row's odd chain), t's next limb entering as o[N-2]
        // (weight N-1) and o[N-1] starting at 0. Bounds: unlike mul_int's (below 2p), the value
        // between rows is only below 2^(32N) + p, as t's upper limbs are still to come, and a row adds
        // m p < 2^32 p; the total stays below 2^(32(N+1)), so o's top limb (weight N) takes the odd
        // chain's and the even chain's last carries without overflowing, as in reduce_row.
        uint32_t e[N], o[N];
#pragma unroll
        for (int k = 0; k < N; k++) {
            e[k] = t[k];
            o[k] = 0;
        }
        reduce_row(e, o);
#pragma unroll
        for (int i = 1; i < N; i++) {
            uint32_t ne[N], no[N], c;
#pragma unroll
            for (int k = 0; k < N; k++) ne[k] = o[k];
            ptx::add_cc(ne[0], o[0], e[1]);
            ptx::addc(c, 0, 0);
#pragma unroll
            for (int k = 0; k < N - 2; k++) no[k] = e[k + 2];
            no[N - 2] = t[N + i - 1];
            no[N - 1] = 0;
#pragma unroll
            for (int k = 0; k < N; k++) {
                e[k] = ne[k];
                o[k] = no[k];
            }
            reduce_row<true>(e, o, c);
        }
        Fp r;
        merge(e, o, t[2 * N - 1], r.v);
        reduce_once(r.v, 0);
        return r;
    }

    // Products summed before their reduction (Fq2's products, field/fields.cuh): a b - c d costs two
    // 2N-limb products and one reduction (redc) instead of two of each. Wide values add and subtract
    // modulo 2^(64N), so a sum comes out exact whatever the order of its terms as long as its value
    // lies in [0, 2^(64N)); the callers offset a difference by a multiple of p^2 (k_p2) to keep it
    // non-negative, and redc needs it below p 2^(32N). Each caller states its bounds.
    struct Wide {
        uint32_t v[2 * N];
    };

    // a b as 2N limbs, for any N-limb a and b (a product of two values below 2p is below 4p^2).
    __device__ __forceinline__ static Wide mul_wide(const Fp& a, const Fp& b) {
        Wide t;
        mul_half<N>(a.v, b.v, t.v);
        return t;
    }

    // (a0 + a1)(b0 + b1) as 2N limbs, the sums taken without their reduction (each below 2p, which
    // fits N limbs when 2p < 2^(32N)), so that the product is exactly that of the sums: below 4p^2.
    __device__ __forceinline__ static Wide mul_wide_of_sums(const Fp& a0, const Fp& a1, const Fp& b0,
                                                           const Fp& b1) {
        static_assert(P::mod(N - 1) < 0x7fffffffu, "2p must fit the limbs");
        uint32_t x[N], y[N];
        add_limbs<N>(a0.v, a1.v, x);
        add_limbs<N>(b0.v, b1.v, y);
        Wide t;
        mul_half<N>(x, y, t.v);
        return t;
    }

    // t + u and t - u modulo 2^(64N).
    __device__ __forceinline__ static Wide add_wide(const Wide& t, const Wide& u) {
        Wide r;
        add_limbs<2 * N>(t.v, u.v, r.v);
        return r;
    }
    __device__ __forceinline__ static Wide sub_wide(const Wide& t, const Wide& u) {
        Wide r;
        sub_limbs<2 * N>(t.v, u.v, r.v);
        return r;
    }

    // K p^2 (K = 1 or 2: 2 p^2 is p^2 shifted by one bit), the offset that keeps a difference of
    // products non-negative.
    template <int K>
    __device__ __forceinline__ static Wide k_p2() {
        static_assert(K == 1 || K == 2, "K p^2 for K = 1 or 2");
        Wide r;
#pragma unroll
        for (int k = 0; k < 2 * N; k++)
            r.v[k] = K == 1 ? P::mod_squared(k)
                            : (P::mod_squared(k) << 1) | (k > 0 ? P::mod_squared(k - 1) >> 31 : 0);
        return r;
    }

    __device__ __forceinline__ static Fp redc(const Wide& t) { return redc(t.v); }

    // a b - c d for a, b, c, d < p with one reduction: p^2 + a b - c d lies in (0, 2p^2), below
    // p 2^(32N) when 2p < 2^(32N). On the FP64 form, two products as operator*'s.
    __device__ __forceinline__ static Fp mul_minus_mul(const Fp& a, const Fp& b, const Fp& c, const Fp& d) {
        if constexpr (FP64) {
            return a * b - c * d;
        } else {
            static_assert(P::mod(N - 1) < 0x7fffffffu, "2p^2 must stay below p 2^(32N)");
            return redc(sub_wide(add_wide(k_p2<1>(), mul_wide(a, b)), mul_wide(c, d)));
        }
    }


   private:
    // s = x + y over M limbs, modulo 2^(32M) (the carry out dropped; s may be x or y).
    template <int M>
    __device__ __forceinline__ static void add_limbs(const uint32_t (&x)[M], const uint32_t (&y)[M],
                                                     uint32_t (&s)[M]) {
        ptx::add_cc(s[0], x[0], y[0]);
#pragma unroll
        for (int k = 1; k < M - 1; k++) ptx::addc_cc(s[k], x[k], y[k]);
        ptx::addc(s[M - 1], x[M - 1], y[M - 1]);
    }

    // d = x - y modulo 2^(32M) (d may be x or y).
    template <int M>
    __device__ __forceinline__ static void sub_limbs(const uint32_t (&x)[M], const uint32_t (&y)[M],
                                                     uint32_t (&d)[M]) {
        ptx::sub_cc(d[0], x[0], y[0]);
#pragma unroll
        for (int k = 1; k < M - 1; k++) ptx::subc_cc(d[k], x[k], y[k]);
        ptx::subc(d[M - 1], x[M - 1], y[M - 1]);
    }

    // r[0..2H) = x y for H-limb x, y (H even), rows as in mul_int without the reduction: after row i
    // the lowest limb e[0] is final (r[i]) and the accumulators move down one limb.
    template <int H>
    __device__ __forceinline__ static void mul_half(const uint32_t (&x)[H], const uint32_t (&y)[H],
                                                    uint32_t (&r)[2 * H]) {
        uint32_t e[H], o[H], high[H];
        first_row(x, y[0], e, o);
        r[0] = e[0];
#pragma unroll
        for (int i = 1; i < H; i++) {
            next_row(e, o, x, y[i]);
            r[i] = e[0];
        }
        merge(e, o, 0, high);
#pragma unroll
        for (int k = 0; k < H; k++) r[H + k] = high[k];
    }

    // The split accumulators of mul_int's first row: e (weights k) and o (weights k + 1) hold the
    // products y x[j] of even and odd j, low and high words side by side.
    template <int M>
    __device__ __forceinline__ static void first_row(const uint32_t (&x)[M], uint32_t y, uint32_t (&e)[M],
                                                     uint32_t (&o)[M]) {
#pragma unroll
        for (int j = 0; j < M; j += 2) {
            e[j] = ptx::mul_lo(x[j], y);
            e[j + 1] = ptx::mul_hi(x[j], y);
            o[j] = ptx::mul_lo(x[j + 1], y);
            o[j + 1] = ptx::mul_hi(x[j + 1], y);
        }
    }

    // The accumulators divided by 2^32 (e[0], cleared or taken by the caller, dropped) plus y x.
    template <int M>
    __device__ __forceinline__ static void next_row(uint32_t (&e)[M], uint32_t (&o)[M], const uint32_t (&x)[M],
                                                    uint32_t y) {
        uint32_t ne[M], no[M];
        // The new e is the old o plus the stray limb e[1] ...
#pragma unroll
        for (int k = 0; k < M; k++) ne[k] = o[k];
        ptx::add_cc(ne[0], ne[0], e[1]);
        // ... whose carry (weight 1) starts the odd chain, which adds the odd products to the old e
        // moved down two limbs.
#pragma unroll
        for (int j = 1; j < M; j += 2) {
            ptx::madc_lo_cc(no[j - 1], x[j], y, j + 1 < M ? e[j + 1] : 0);
            if (j + 2 < M)
                ptx::madc_hi_cc(no[j], x[j], y, e[j + 2]);
            else
                ptx::madc_hi(no[j], x[j], y, 0);
        }
        // The even products, their final carry at weight M into o's top limb.
        mad_even(ne, y, x);
        ptx::addc(no[M - 1], no[M - 1], 0);
#pragma unroll
        for (int k = 0; k < M; k++) {
            e[k] = ne[k];
            o[k] = no[k];
        }
    }

    // r = (e + o 2^32) / 2^32 + top 2^(32(M-1)) for e[0] = 0 or taken: o + e[1..], top at o's top.
    template <int M>
    __device__ __forceinline__ static void merge(const uint32_t (&e)[M], const uint32_t (&o)[M], uint32_t top,
                                                 uint32_t (&r)[M]) {
        ptx::add_cc(r[0], o[0], e[1]);
#pragma unroll
        for (int k = 1; k < M - 1; k++) ptx::addc_cc(r[k], o[k], e[k + 1]);
        ptx::addc(r[M - 1], o[M - 1], top);
    }

    // s = x + y over H limbs; returns the carry out (0 or 1).
    template <int H>
    __device__ __forceinline__ static uint32_t add_half(const uint32_t (&x)[H], const uint32_t (&y)[H],
                                                        uint32_t (&s)[H]) {
        uint32_t c;
        ptx::add_cc(s[0], x[0], y[0]);
#pragma unroll
        for (int j = 1; j < H; j++) ptx::addc_cc(s[j], x[j], y[j]);
        ptx::addc(c, 0, 0);
        return c;
    }

    // m[0..N] -= p[0..N) (the result stays non-negative).
    __device__ __forceinline__ static void sub_from(uint32_t (&m)[N + 1], const uint32_t (&p)[N]) {
        ptx::sub_cc(m[0], m[0], p[0]);
#pragma unroll
        for (int j = 1; j < N; j++) ptx::subc_cc(m[j], m[j], p[j]);
        ptx::subc(m[N], m[N], 0);
    }

    // acc[0..M) += y * x[even limbs], low/high words alternating in one chain; the carry stays set.
    template <int M>
    __device__ __forceinline__ static void mad_even(uint32_t (&acc)[M], uint32_t y, const uint32_t (&x)[M]) {
        ptx::mad_lo_cc(acc[0], x[0], y, acc[0]);
        ptx::madc_hi_cc(acc[1], x[0], y, acc[1]);
#pragma unroll
        for (int j = 2; j < M; j += 2) {
            ptx::madc_lo_cc(acc[j], x[j], y, acc[j]);
            ptx::madc_hi_cc(acc[j + 1], x[j], y, acc[j + 1]);
        }
    }

    // A modulus whose lowest limbs are 1 and 2^32 - 1 (Fr's: p = 1 - 2^32 mod 2^64), so -1/p = -1 and
    // m * p's two lowest products need no multiplication.
    static constexpr bool LOW_ONE = P::mod(0) == 1 && P::mod(1) == 0xffffffffu;

    // t += m*p with m = e[0] * (-1/p) mod 2^32, which clears e[0].
    //
    // With LOW_ONE, m = -e[0]: m * 1 has low word m and high word 0, and m * (2^32 - 1) = m * 2^32 - m
    // has low word -m = e[0] and high word m - 1, or 0 when m = 0; adds take the place of those four
    // multiplications.
    //
    // With CARRY_IN, `cin` (0 or 1) is added at o[0]'s weight too, as the odd chain's carry in.
    template <bool CARRY_IN = false>
    __device__ __forceinline__ static void reduce_row(uint32_t (&e)[N], uint32_t (&o)[N], uint32_t cin = 0) {
        const uint32_t m = e[0] * P::INV;
        if constexpr (CARRY_IN) {
            uint32_t unused;
            ptx::add_cc(unused, cin, 0xffffffffu);
        }
        if constexpr (LOW_ONE) {
            const uint32_t hi = e[0] != 0 ? ~e[0] : 0;
            if constexpr (CARRY_IN)
                ptx::addc_cc(o[0], o[0], e[0]);
            else
                ptx::add_cc(o[0], o[0], e[0]);
            ptx::addc_cc(o[1], o[1], hi);
        } else {
            if constexpr (CARRY_IN)
                ptx::madc_lo_cc(o[0], m, P::mod(1), o[0]);
            else
                ptx::mad_lo_cc(o[0], m, P::mod(1), o[0]);
            ptx::madc_hi_cc(o[1], m, P::mod(1), o[1]);
        }
#pragma unroll
        for (int j = 3; j < N; j += 2) {
            ptx::madc_lo_cc(o[j - 1], m, P::mod(j), o[j - 1]);
            if (j + 2 < N)
                ptx::madc_hi_cc(o[j], m, P::mod(j), o[j]);
            else
                ptx::madc_hi(o[j], m, P::mod(j), o[j]);
        }
        if constexpr (LOW_ONE) {
            ptx::add_cc(e[0], e[0], m);
            ptx::addc_cc(e[1], e[1], 0);
        } else {
            ptx::mad_lo_cc(e[0], m, P::mod(0), e[0]);
            ptx::madc_hi_cc(e[1], m, P::mod(0), e[1]);
        }
#pragma unroll
        for (int j = 2; j < N; j += 2) {
            ptx::madc_lo_cc(e[j], m, P::mod(j), e[j]);
            ptx::madc_hi_cc(e[j + 1], m, P::mod(j), e[j + 1]);
        }
        ptx::addc(o[N - 1], o[N - 1], 0);
    }

   public:
    // a^2: sqr_int's rows where they fit (Fq), otherwise operator*.
    __device__ __forceinline__ Fp sqr() const {
        if constexpr (!FP64 && SQR_ROWS) {
            return sqr_int();
        } else {
            return *this * *this;
        }
    }

    // Whether sqr_int's bounds hold for p: 3p < (2^32 - 1) 2^(32(N-1)) (see there). Fq's p (below
    // 2^381) qualifies; Fr's (about 0.46 2^256) does not.
    static constexpr bool SQR_ROWS = P::mod(N - 1) < 0x55555555u;

    // a^2 on the integer units by mul_int's rows, each product of two different limbs taken once and
    // doubled. With X = a's limbs x_j, row i of mul_int adds x_i X at the accumulators' weights (they
    // have moved down i limbs); here it adds x_i W_i with W_i = x_i 2^(32i) + 2 (x_(i+1) 2^(32(i+1)) +
    // ... + x_(N-1) 2^(32(N-1))), whose limbs below i are 0: row i has N - i limb products where
    // mul_int's have N, N(N+1)/2 in all against N^2 (Fq: 78 against 144), and the rows add up to X^2
    // as mul_int's add up to a b. W_i's limb i + 1 is 2 x_(i+1) mod 2^32 and each limb above takes the
    // top bit of the one below (x's top limb is below 2^31, so W_i has N limbs); the skipped products
    // leave additions that carry the odd chain along. The reduction rows are mul_int's.
    //
    // Bounds: before row i the accumulators hold the rows so far, X^2's products with a factor below
    // limb i (at most X_lo (X_lo + 2 X_hi) with X_lo < 2^(32i), X_lo + 2 X_hi <= 2a), plus M p with
    // M < 2^(32i), over 2^(32i): below 2a + p <= 3p, against mul_int's 2p. Inside a row they gain
    // x_i W_i + m p < 2^32 3p, so they stay below (2^32 + 1) 3p, which fits N + 1 limbs (o's top limb
    // never carries out) when 3p < (2^32 - 1) 2^(32(N-1)): SQR_ROWS. The result, (a^2 + M p) / 2^(32N)
    // with M < 2^(32N), is below 2p as mul_int's and takes one conditional subtraction.
    __device__ __forceinline__ Fp sqr_int() const {
        static_assert(N % 2 == 0, "split accumulators need an even limb count");
        static_assert(SQR_ROWS, "sqr_int needs 3p < (2^32 - 1) 2^(32(N-1))");
        // d[j] = limb j of 2a for j >= 2 (x_j shifted, the top bit of x_(j-1) below it).
        uint32_t d[N];
        d[0] = d[1] = 0;
#pragma unroll
        for (int j = 2; j < N; j++) d[j] = (v[j] << 1) | (v[j - 1] >> 31);
        // Row 0: x_0 W_0, every limb.
        uint32_t e[N], o[N];
#pragma unroll
        for (int j = 0; j < N; j += 2) {
            const uint32_t lo = j == 0 ? v[0] : d[j], hi = j == 0 ? v[1] << 1 : d[j + 1];
            e[j] = ptx::mul_lo(lo, v[0]);
            e[j + 1] = ptx::mul_hi(lo, v[0]);
            o[j] = ptx::mul_lo(hi, v[0]);
            o[j + 1] = ptx::mul_hi(hi, v[0]);
        }
        reduce_row(e, o);
#pragma unroll
        for (int i = 1; i < N; i++) {
            const uint32_t x = v[i];
            // W_i's limb j (j >= i).
            const auto w = [&](int j) { return j == i ? v[i] : j == i + 1 ? v[i + 1] << 1 : d[j]; };
            // Divide by 2^32 as mul_int does, but keep the stray limb's carry c (weight 1) for the
            // reduction row's odd chain (as mul_kara's rows do), so that the odd limbs below i move
            // down as they are.
            uint32_t ne[N], no[N], c;
#pragma unroll
            for (int k = 0; k < N; k++) ne[k] = o[k];
            ptx::add_cc(ne[0], ne[0], e[1]);
            ptx::addc(c, 0, 0);
#pragma unroll
            for (int k = 0; k < N - 2; k++) no[k] = e[k + 2];
            no[N - 2] = no[N - 1] = 0;
            // The odd products from the first odd limb at or above i; the last odd limb, N - 1 >= i,
            // always has one, and its high word ends the chain at o's top limb.
            // (The loops run over every limb with the start as a condition, so that they unroll.)
            const int j1 = i | 1;
#pragma unroll
            for (int j = 1; j < N; j += 2) {
                if (j < j1) continue;
                if (j == j1)
                    ptx::mad_lo_cc(no[j - 1], w(j), x, no[j - 1]);
                else
                    ptx::madc_lo_cc(no[j - 1], w(j), x, no[j - 1]);
                if (j + 2 < N)
                    ptx::madc_hi_cc(no[j], w(j), x, no[j]);
                else
                    ptx::madc_hi(no[j], w(j), x, no[j]);
            }
            // The even chain from its first limb at or above i, its final carry at weight N into
            // o's top limb; with no even limb left (i = N - 1) there is no carry to add.
            const int j0 = (i + 1) & ~1;
#pragma unroll
            for (int j = 0; j < N; j += 2) {
                if (j < j0) continue;
                if (j == j0)
                    ptx::mad_lo_cc(ne[j], w(j), x, ne[j]);
                else
                    ptx::madc_lo_cc(ne[j], w(j), x, ne[j]);
                ptx::madc_hi_cc(ne[j + 1], w(j), x, ne[j + 1]);
            }
            if (j0 < N) ptx::addc(no[N - 1], no[N - 1], 0);
#pragma unroll
            for (int k = 0; k < N; k++) {
                e[k] = ne[k];
                o[k] = no[k];
            }
            reduce_row<true>(e, o, c);
        }
        Fp r;
        ptx::add_cc(r.v[0], o[0], e[1]);
#pragma unroll
        for (int k = 1; k < N - 1; k++) ptx::addc_cc(r.v[k], o[k], e[k + 1]);
        ptx::addc(r.v[N - 1], o[N - 1], 0);
        reduce_once(r.v, 0);
        return r;
    }

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

    // 1/x by a binary GCD that decides its steps on 62-bit approximations; the inverse of 0 is 0.
    // Variable time (public data only, such as the MSM's points).
    //
    // With A = x's limbs (x R mod p): a = A, b = p, u = R^2 mod p, w = 0 keep a = A u / R^2 and
    // b = A w / R^2 (mod p), b odd. A round takes, of a and b, their low 30 bits and the 32 bits below
    // the top bit of the larger (exact while both are under 2^62), and runs 30 steps on these 64-bit
    // words alone: if a is odd, swap so that a >= b and subtract b; then halve a. The steps' effect is
    // a matrix of integers of at most 2^30, (a, b) <- ((f0 a + g0 b) / 2^30, (f1 a + g1 b) / 2^30),
    // applied once to the full numbers (negated, with their row, when negative) and to u and w modulo
    // p (the division by 2^30 done as Montgomery's). a reaches 0 within (2 bits(p) - 1) / 30 rounds
    // (the optimised binary GCD's bound), and then b = 1 and w = R^2 / A, the Montgomery form of 1/x.
    // A round is a few hundred 32-bit operations on 64-bit words and four rows of multiplications;
    // the binary Euclid below spends about as much on every step of ~2 bits. On the H200 it is twice
    // as fast as inverse_euclid alone (gpu_bench), but 1.7 times slower inside the MSM's batched
    // round, whose few warps per multiprocessor cannot hide the latency of its 30 dependent decisions
    // per round (the Euclid's full-width steps are independent limb operations), so the MSM does not
    // use it (docs/benchmarks/cuda-msm.md).
    __device__ __forceinline__ Fp inverse_vartime() const {
        if (is_zero()) return zero();
        uint32_t a[N], b[N], u[N], w[N];
#pragma unroll
        for (int i = 0; i < N; i++) {
            a[i] = v[i];
            b[i] = P::mod(i);
            u[i] = P::r2(i);
            w[i] = 0;
        }
        constexpr int ROUNDS = (64 * N - 1 + GCD_STEPS - 1) / GCD_STEPS;
        for (int round = 0; round < ROUNDS; round++) {
            uint32_t any = 0;
#pragma unroll
            for (int i = 0; i < N; i++) any |= a[i];
            if (any == 0) break;
            uint64_t xa, xb;
            approximate(a, b, xa, xb);
            // The matrix, rows (f0, g0) for a and (f1, g1) for b, in two's complement.
            uint32_t f0 = 1, g0 = 0, f1 = 0, g1 = 1;
#pragma unroll
            for (int j = 0; j < GCD_STEPS; j++) {
                const uint64_t odd = 0 - (xa & 1);
                const uint64_t swap = odd & (0 - (uint64_t)(xa < xb));
                const uint64_t t = (xa ^ xb) & swap;
                xa ^= t;
                xb ^= t;
                const uint32_t s32 = (uint32_t)swap, o32 = (uint32_t)odd;
                const uint32_t tf = (f0 ^ f1) & s32, tg = (g0 ^ g1) & s32;
                f0 ^= tf;
                f1 ^= tf;
                g0 ^= tg;
                g1 ^= tg;
                xa -= xb & odd;
                f0 -= f1 & o32;
                g0 -= g1 & o32;
                xa >>= 1;
                f1 <<= 1;
                g1 <<= 1;
            }
            uint32_t na[N], nb[N];
            if (combine_shift(a, b, f0, g0, na)) {
                f0 = 0 - f0;
                g0 = 0 - g0;
            }
            if (combine_shift(a, b, f1, g1, nb)) {
                f1 = 0 - f1;
                g1 = 0 - g1;
            }
            uint32_t nu[N], nw[N];
            combine_mod(u, w, f0, g0, nu);
            combine_mod(u, w, f1, g1, nw);
#pragma unroll
            for (int i = 0; i < N; i++) {
                a[i] = na[i];
                b[i] = nb[i];
                u[i] = nu[i];
                w[i] = nw[i];
            }
        }
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = w[i];
        return r;
    }

   private:
    // Steps per round of inverse_vartime: its matrix entries stay within 2^30 (int32).
    static constexpr int GCD_STEPS = 30;

    // 62-bit words standing for a and b: bits [n - 32, n) above bits [0, 30), with n the larger's
    // bit length, at least 62 (so the words are a and b themselves while both are under 2^62).
    __device__ __forceinline__ static void approximate(const uint32_t (&a)[N], const uint32_t (&b)[N], uint64_t& xa,
                                                       uint64_t& xb) {
        uint32_t top = 0, top_word = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            const uint32_t x = a[i] | b[i];
            top = x ? i : top;
            top_word = x ? x : top_word;
        }
        uint32_t n = 32 * top + 32 - ptx::clz(top_word);
        n = n < 2 * GCD_STEPS + 2 ? 2 * GCD_STEPS + 2 : n;
        const uint32_t o = n - 32, q = o >> 5, sh = o & 31;
        // Limbs q and q + 1 by masks, not by index (an indexed register array goes to local memory).
        uint32_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            const uint32_t m0 = 0u - (uint32_t)(i == (int)q), m1 = 0u - (uint32_t)(i == (int)q + 1);
            a0 |= a[i] & m0;
            b0 |= b[i] & m0;
            a1 |= a[i] & m1;
            b1 |= b[i] & m1;
        }
        constexpr uint32_t LOW = (1u << GCD_STEPS) - 1;
        xa = ((uint64_t)ptx::shr_pair(a0, a1, sh) << GCD_STEPS) | (a[0] & LOW);
        xb = ((uint64_t)ptx::shr_pair(b0, b1, sh) << GCD_STEPS) | (b[0] & LOW);
    }

    // o = x * m as N + 1 limbs.
    __device__ __forceinline__ static void mul_word(const uint32_t (&x)[N], uint32_t m, uint32_t (&o)[N + 1]) {
#pragma unroll
        for (int i = 0; i < N; i++) o[i] = ptx::mul_lo(x[i], m);
        o[N] = 0;
        ptx::add_cc(o[0], o[0], 0);
#pragma unroll
        for (int i = 0; i < N - 1; i++) ptx::madc_hi_cc(o[i + 1], x[i], m, o[i + 1]);
        ptx::madc_hi(o[N], x[N - 1], m, 0);
    }

    // |x f + y g| / 2^30 into o (the division is exact), for x, y < 2^(32N) and |f|, |g| <= 2^30 in
    // two's complement; returns whether x f + y g is negative.
    __device__ __forceinline__ static bool combine_shift(const uint32_t (&x)[N], const uint32_t (&y)[N], uint32_t f,
                                                         uint32_t g, uint32_t (&o)[N]) {
        const uint32_t sf = f >> 31, sg = g >> 31;
        uint32_t p[N + 1], q[N + 1];
        mul_word(x, (f ^ (0 - sf)) + sf, p);
        mul_word(y, (g ^ (0 - sg)) + sg, q);
        // d = |f| x +- |g| y (minus when the signs differ), and x f + y g = +-d with f's sign.
        const uint32_t m = 0 - (sf ^ sg);
        ptx::add_cc(p[0], p[0], q[0] ^ m);
#pragma unroll
        for (int i = 1; i <= N; i++) ptx::addc_cc(p[i], p[i], q[i] ^ m);
        // + 1 to finish negating q when subtracting: added as a second chain.
        ptx::add_cc(p[0], p[0], m & 1);
#pragma unroll
        for (int i = 1; i <= N; i++) ptx::addc_cc(p[i], p[i], 0);
        const uint32_t nd = 0 - (p[N] >> 31);
        ptx::add_cc(p[0], p[0] ^ nd, nd & 1);
#pragma unroll
        for (int i = 1; i <= N; i++) ptx::addc_cc(p[i], p[i] ^ nd, 0);
#pragma unroll
        for (int i = 0; i < N; i++) o[i] = ptx::shr_pair(p[i], p[i + 1], GCD_STEPS);
        return (sf ^ (nd & 1)) != 0;
    }

    // (x f + y g) / 2^30 mod p into o, for x, y < p and |f|, |g| <= 2^30 in two's complement.
    __device__ __forceinline__ static void combine_mod(const uint32_t (&x)[N], const uint32_t (&y)[N], uint32_t f,
                                                       uint32_t g, uint32_t (&o)[N]) {
        const uint32_t sf = f >> 31, sg = g >> 31;
        // x f = (p - x) |f| mod p when f < 0: both products nonnegative, their sum under 2^31 p.
        uint32_t xs[N], ys[N];
        neg_mod_if(x, sf, xs);
        neg_mod_if(y, sg, ys);
        uint32_t t[N + 1], s[N + 1];
        mul_word(xs, (f ^ (0 - sf)) + sf, t);
        mul_word(ys, (g ^ (0 - sg)) + sg, s);
        ptx::add_cc(t[0], t[0], s[0]);
#pragma unroll
        for (int i = 1; i <= N; i++) ptx::addc_cc(t[i], t[i], s[i]);
        // t + k p with k = -t / p mod 2^30 is a multiple of 2^30; the quotient is below 3p (which may
        // take a bit more than N limbs: Fr's 3p does).
        const uint32_t k = (t[0] * P::INV) & ((1u << GCD_STEPS) - 1);
        uint32_t kp[N + 1];
        uint32_t mod[N];
#pragma unroll
        for (int i = 0; i < N; i++) mod[i] = P::mod(i);
        mul_word(mod, k, kp);
        ptx::add_cc(t[0], t[0], kp[0]);
#pragma unroll
        for (int i = 1; i <= N; i++) ptx::addc_cc(t[i], t[i], kp[i]);
#pragma unroll
        for (int i = 0; i < N; i++) o[i] = ptx::shr_pair(t[i], t[i + 1], GCD_STEPS);
        reduce_once(o, t[N] >> GCD_STEPS);
        reduce_once(o, 0);
    }

    // o = p - x when neg (x < p, so o <= p), else x.
    __device__ __forceinline__ static void neg_mod_if(const uint32_t (&x)[N], uint32_t neg, uint32_t (&o)[N]) {
        uint32_t d[N];
        ptx::sub_cc(d[0], P::mod(0), x[0]);
#pragma unroll
        for (int i = 1; i < N; i++) ptx::subc_cc(d[i], P::mod(i), x[i]);
#pragma unroll
        for (int i = 0; i < N; i++) o[i] = neg ? d[i] : x[i];
    }

   public:

    // 1/x by the binary extended Euclidean algorithm on the full numbers; the inverse of 0 is 0.
    // Variable time (public data only): the MSM's inversion (its batched first round and the table
    // builder), measured faster there than inverse_vartime. A step is shifts, subtractions and
    // selects and one row of multiplications.
    //
    // With A = x's limbs (x R mod p), u = A, v = p, x1 = R^2 mod p and x2 = 0 keep x1 A = u R^2 and
    // x2 A = v R^2 (mod p), gcd(u, v) = 1 and v odd. A step strips u's trailing zeros, k at a time
    // (x1 / 2^k: x1 + m p with m = -x1/p mod 2^k, shifted; below 2p, then reduced), makes u >= v by
    // swapping the pairs, and subtracts v from u and x2 from x1, which leaves u even. When u or v
    // reaches 1 its x is R^2 / A = R / x, the Montgomery form of 1/x. About 0.7 steps per bit.
    __device__ __forceinline__ Fp inverse_euclid() const {
        if (is_zero()) return zero();
        const uint32_t(&limbs)[N] = this->v;
        uint32_t u[N], v[N], x1[N], x2[N];
#pragma unroll
        for (int i = 0; i < N; i++) {
            u[i] = limbs[i];
            v[i] = P::mod(i);
            x1[i] = P::r2(i);
            x2[i] = 0;
        }
        for (;;) {
            // u >>= k and x1 /= 2^k for u's trailing zeros, at most 31 at a time.
            const uint32_t k = min_u32(ptx::ctz(u[0]), 31);
            const uint32_t m = (x1[0] * P::INV) & ((1u << k) - 1);
            uint32_t hi;
            ptx::mad_lo_cc(x1[0], m, P::mod(0), x1[0]);
#pragma unroll
            for (int i = 1; i < N; i++) ptx::madc_lo_cc(x1[i], m, P::mod(i), x1[i]);
            ptx::addc(hi, 0, 0);
            ptx::add_cc(x1[0], x1[0], 0);
#pragma unroll
            for (int i = 1; i < N; i++) ptx::madc_hi_cc(x1[i], m, P::mod(i - 1), x1[i]);
            ptx::madc_hi(hi, m, P::mod(N - 1), hi);
#pragma unroll
            for (int i = 0; i < N - 1; i++) {
                x1[i] = ptx::shr_pair(x1[i], x1[i + 1], k);
                u[i] = ptx::shr_pair(u[i], u[i + 1], k);
            }
            x1[N - 1] = ptx::shr_pair(x1[N - 1], hi, k);
            u[N - 1] >>= k;
            reduce_once(x1, 0);
            uint32_t u_rest = u[0] ^ 1;
#pragma unroll
            for (int i = 1; i < N; i++) u_rest |= u[i];
            if (u_rest == 0) break;
            if (!(u[0] & 1)) continue;  // a limb of zeros: more to strip
            // Both odd: swap so that u >= v, then u -= v, x1 -= x2 (mod p).
            uint32_t t[N], less;
            ptx::sub_cc(t[0], u[0], v[0]);
#pragma unroll
            for (int i = 1; i < N; i++) ptx::subc_cc(t[i], u[i], v[i]);
            ptx::subc(less, 0, 0);
#pragma unroll
            for (int i = 0; i < N; i++) {
                const uint32_t du = (u[i] ^ v[i]) & less, dx = (x1[i] ^ x2[i]) & less;
                u[i] ^= du;
                v[i] ^= du;
                x1[i] ^= dx;
                x2[i] ^= dx;
            }
            uint32_t v_rest = v[0] ^ 1;
#pragma unroll
            for (int i = 1; i < N; i++) v_rest |= v[i];
            if (v_rest == 0) {
#pragma unroll
                for (int i = 0; i < N; i++) x1[i] = x2[i];
                break;
            }
            uint32_t borrow;
            ptx::sub_cc(u[0], u[0], v[0]);
#pragma unroll
            for (int i = 1; i < N; i++) ptx::subc_cc(u[i], u[i], v[i]);
            ptx::sub_cc(x1[0], x1[0], x2[0]);
#pragma unroll
            for (int i = 1; i < N; i++) ptx::subc_cc(x1[i], x1[i], x2[i]);
            ptx::subc(borrow, 0, 0);
            ptx::add_cc(x1[0], x1[0], P::mod(0) & borrow);
#pragma unroll
            for (int i = 1; i < N; i++) ptx::addc_cc(x1[i], x1[i], P::mod(i) & borrow);
        }
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = x1[i];
        return r;
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

// a * b by the FP64 units' multiplication (field/fp64.cuh), for either type of a field.
template <class P, bool FP64>
__device__ __forceinline__ Fp<P, FP64> mul_fp64(const Fp<P, FP64>& a, const Fp<P, FP64>& b) {
    return a.mul_fp64(b);
}

}  // namespace cuzk
