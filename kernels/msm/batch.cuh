// cuzk kernels: the MSM's first summing round by batched affine additions, and the helpers it shares
// with the XYZZ round in msm.cu. Plain device functions (the thread index is an argument), so the host
// check (kernels/host/check.cpp) runs the same code.
//
// The XYZZ round adds each sorted entry into an accumulator with a mixed addition: 8 multiplications
// and 2 squarings. An affine addition needs 1/(x2 - x1), then 2 multiplications and a squaring;
// Montgomery's trick shares one inversion among many additions for 3 more multiplications each. So a
// thread here runs K chains at once: chain k is piece v = k * threads + t of the entries (the same
// equal pieces as the XYZZ round's, K times as many), and every step adds each chain's next entry into
// its affine accumulator, all K additions sharing one inversion (Fp::inverse_euclid, whose cost per
// step decides how many chains pay). A chain's accumulator, prefix product and place are in scratch,
// laid out by chain so that a warp's accesses are contiguous. When a chain reaches a bucket's end it
// writes its accumulator to out[v + bucket], where the XYZZ round writes its partial, but affine (half
// the bytes): the first later round adds these by mixed additions (G_sum_partials), the others are
// shared.
#pragma once
#include "curve/xyzz.cuh"

namespace cuzk {

// The first round cuts the first `buckets` buckets' entries (the sets', and the ones' when it adds
// them; the total is known only on the device) into at most `pieces` equal pieces: L entries each,
// so that every piece has work even when the scalars are sparse.
__device__ __forceinline__ uint32_t first_piece(const uint32_t* count, const uint32_t* off, uint32_t buckets,
                                                uint32_t pieces, uint32_t& total) {
    total = off[buckets - 1] + count[buckets - 1];
    const uint32_t L = (uint32_t)(((uint64_t)total + pieces - 1) / pieces);
    return L > 0 ? L : 1u;
}

// The bucket holding entry s: the last b with off[b] <= s (empty buckets before it share its offset).
__device__ __forceinline__ uint32_t bucket_of(uint32_t s, const uint32_t* off, uint32_t buckets) {
    uint32_t lo = 0, hi = buckets - 1;
    while (lo < hi) {
        const uint32_t mid = (lo + hi + 1) >> 1;
        if (off[mid] <= s)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// Where a chain stands: its bucket and that bucket's end, the entry of its current step, and flags.
struct Chain {
    uint32_t bucket, bucket_end, entry, flags;
};
// The accumulator is the identity (stored as x = y = 0).
constexpr uint32_t CHAIN_EMPTY = 1;
// This step adds the entry's point to the accumulator, or doubles the accumulator (the point equals it).
constexpr uint32_t CHAIN_ADD = 2, CHAIN_DOUBLE = 4;

// One scratch record per chain (K * threads of each).
template <class F>
struct ChainScratch {
    Affine<F>* acc;
    F* prefix;
    Chain* chain;
};

// Thread t of `threads`: its K chains' sums, one affine partial per bucket each chain touches (the
// identity as (0, 0)), at out[v + bucket] (v the chain's piece).
template <class F>
__device__ __forceinline__ void sum_batch(uint32_t t, uint32_t threads, uint32_t K, const Affine<F>* bases,
                                          const uint32_t* entries, const uint32_t* count, const uint32_t* off,
                                          uint32_t buckets, ChainScratch<F> s, Affine<F>* out) {
    uint32_t total;
    const uint32_t L = first_piece(count, off, buckets, threads * K, total);
    // Pieces grow with k, so past the first chain that has run out, all have.
    const auto live = [&](uint32_t v, uint32_t step) { return (uint64_t)v * L + step < total; };
    for (uint32_t k = 0; k < K; k++) {
        const uint32_t v = k * threads + t;
        if (!live(v, 0)) break;
        const uint32_t b = bucket_of(v * L, off, buckets);
        s.chain[v] = Chain{b, off[b] + count[b], 0, CHAIN_EMPTY};
        s.acc[v] = Affine<F>{F::zero(), F::zero()};
    }
    for (uint32_t step = 0; step < L; step++) {
        // Pass 1: each chain's difference of x, and the prefix products of those before it.
        F run = F::one();
        bool any = false;
        for (uint32_t k = 0; k < K; k++) {
            const uint32_t v = k * threads + t;
            if (!live(v, step)) break;
            const uint32_t e = v * L + step;
            Chain c = s.chain[v];
            if (e == c.bucket_end) {  // the chain's next bucket starts here
                out[v + c.bucket] = s.acc[v];
                do {
                    c.bucket++;
                    c.bucket_end = off[c.bucket] + count[c.bucket];
                } while (c.bucket_end == e);
                c.flags = CHAIN_EMPTY;
            }
            c.flags &= CHAIN_EMPTY;
            c.entry = entries[e];
            const Affine<F>& base = bases[c.entry & 0x7fffffffu];
            if (c.flags & CHAIN_EMPTY) {
                const Affine<F> p = c.entry >> 31 ? base.neg() : base;
                s.acc[v] = p;
                if (!p.is_identity()) c.flags = 0;
            } else {
                const F px = base.x;
                F d = px - s.acc[v].x;
                if (d.is_zero() || px.is_zero()) {
                    // Rare: the point is the accumulator or its negation, or may be the identity.
                    const Affine<F> p = c.entry >> 31 ? base.neg() : base;
                    const Affine<F> a = s.acc[v];
                    if (p.is_identity()) {
                    } else if (!d.is_zero()) {
                        c.flags = CHAIN_ADD;
                    } else if (p.y == a.y && !a.y.is_zero()) {
                        c.flags = CHAIN_DOUBLE;
                        d = a.y.dbl();
                    } else {  // p = -a: the sum is the identity
                        s.acc[v] = Affine<F>{F::zero(), F::zero()};
                        c.flags = CHAIN_EMPTY;
                    }
                } else {
                    c.flags = CHAIN_ADD;
                }
                if (c.flags & (CHAIN_ADD | CHAIN_DOUBLE)) {
                    s.prefix[v] = run;
                    run = run * d;
                    any = true;
                }
            }
            s.chain[v] = c;
        }
        if (!any) continue;
        // Pass 2, backwards: 1/d of each chain from the inverse of all of them, and its sum.
        F inv = run.inverse_euclid();
        for (uint32_t k = K; k-- > 0;) {
            const uint32_t v = k * threads + t;
            if (!live(v, step)) continue;
            const Chain c = s.chain[v];
            if (!(c.flags & (CHAIN_ADD | CHAIN_DOUBLE))) continue;
            const Affine<F> a = s.acc[v];
            F d, num, px;
            if (c.flags & CHAIN_ADD) {
                const Affine<F> p = bases[c.entry & 0x7fffffffu];
                px = p.x;
                d = p.x - a.x;
                num = (c.entry >> 31 ? -p.y : p.y) - a.y;
            } else {
                px = a.x;
                d = a.y.dbl();
                const F x2 = a.x.sqr();
                num = x2.dbl() + x2;
            }
            const F inv_d = inv * s.prefix[v];
            inv = inv * d;
            const F lambda = num * inv_d;
            const F x3 = lambda.sqr() - a.x - px;
            s.acc[v] = Affine<F>{x3, lambda * (a.x - x3) - a.y};
        }
    }
    for (uint32_t k = 0; k < K; k++) {
        const uint32_t v = k * threads + t;
        if (!live(v, 0)) break;
        out[v + s.chain[v].bucket] = s.acc[v];
    }
}

}  // namespace cuzk
