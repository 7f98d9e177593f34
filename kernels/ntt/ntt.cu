// cuzk kernels: radix-2 NTTs over Fr in ark-poly's conventions (natural order in and out), the power
// tables they use, and the elementwise quotient step of the Groth16 witness map.
//
// The transforms are built from passes of radix-2 stages in shared memory, decimation in time (bit-
// reversed in, natural out) or in frequency (natural in, bit-reversed out), a bit-reversal permutation
// that can scale by powers on the way, and elementwise scaling; crates/cuzk-cuda/src/ntt.rs composes
// them, and the witness map chains them so that only its last step permutes, turning from each
// interpolation to its coset evaluation in one kernel (ntt_pass_turn). Only a and b are evaluated on
// the coset; their product is formed as the first pass of its interpolation loads them
// (ntt_pass_times), and c's coefficients are subtracted after that interpolation, by the last step
// (ntt_bit_reverse_minus).
#include "field/fields.cuh"

using namespace cuzk;

// Which units the passes' multiplications use (kernels named ntt_pass, ntt_pass_fp64, ntt_pass_mixed and
// likewise for ntt_pass_turn): 0 the integer multiply-adds (Fr's operator*), 1 the FP64 units
// (mul_fp64), 2 both, warp by warp (mixed_takes_fp64). All give the same bits. SHOUP (the *_shoup
// kernels) multiplies by the twiddles with Shoup's product on the integer units (Fr::mul_shoup): its
// twiddle table holds the canonical values w^i, i < n/2, followed by their Shoup quotients; the turn
// (ntt_pass_turn_shoup) scales by coset powers from a table in Shoup's form too, and the other
// products (the witness map's a * b) are operator*'s.
constexpr int SHOUP = 3;

template <int U>
__device__ __forceinline__ Fr mul(const Fr& a, const Fr& b) {
    if constexpr (U == 0 || U == SHOUP) {
        return a * b;
    } else if constexpr (U == 1) {
        return mul_fp64(a, b);
    } else {
        return mixed_takes_fp64() ? mul_fp64(a, b) : a * b;
    }
}

// s^i from a two-level table: lo[j] = s^j for j < 2^lo_bits, hi[j] = s^(j * 2^lo_bits).
__device__ __forceinline__ Fr power(const Fr* lo, const Fr* hi, uint32_t lo_bits, uint32_t i) {
    const uint32_t mask = (1u << lo_bits) - 1;
    return hi[i >> lo_bits] * lo[i & mask];
}

// x s^i from a two-level table in Shoup's form: lo and hi hold pairs (canonical value, its Shoup
// quotient) at 2j and 2j + 1, for the same powers as power's tables; two Shoup products. With LAZY,
// both without their final subtraction (x and the result below 2p, Fr::mul_shoup_lazy).
template <bool LAZY = false>
__device__ __forceinline__ Fr times_power_shoup(const Fr& x, const Fr* lo, const Fr* hi, uint32_t lo_bits,
                                                uint32_t i) {
    const uint32_t h = i >> lo_bits, l = i & ((1u << lo_bits) - 1);
    if constexpr (LAZY) {
        return x.mul_shoup_lazy(hi[2 * h], hi[2 * h + 1]).mul_shoup_lazy(lo[2 * l], lo[2 * l + 1]);
    } else {
        return x.mul_shoup(hi[2 * h], hi[2 * h + 1]).mul_shoup(lo[2 * l], lo[2 * l + 1]);
    }
}

__device__ __forceinline__ uint32_t bit_reverse(uint32_t i, uint32_t log_n) {
    return log_n == 0 ? 0 : __brev(i) >> (32 - log_n);
}

// out[i] = s^i for i < n.
extern "C" __global__ void ntt_fill_powers(Fr* out, const Fr* lo, const Fr* hi, uint32_t lo_bits, uint32_t n) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = power(lo, hi, lo_bits, i);
}

// x s^i from a two-level power table, in Shoup's form (SH) or Montgomery's.
template <bool SH>
__device__ __forceinline__ Fr times_power(const Fr& x, const Fr* lo, const Fr* hi, uint32_t lo_bits, uint32_t i) {
    if constexpr (SH) {
        return times_power_shoup(x, lo, hi, lo_bits, i);
    } else {
        return x * power(lo, hi, lo_bits, i);
    }
}

// How a bit reversal scales (its `powers` argument): by the constant c, by the power s^i of a
// two-level table (a constant factor folded into the table's hi powers, so two products an element),
// or by the power of a full table, one product an element: lo holds c s^i for every index i (in
// Shoup's form the values and then their quotients, as a twiddle table holds them; hi is not read).
// A full table may leave out `fold_bits` bits of the index from bit `fold_low` up, whose powers the
// twiddles of the transform's first and middle passes carry (see full_index): it then holds
// 2^(lo_bits - fold_bits) powers, for the indices with those bits clear.
constexpr uint32_t BY_TWO_LEVEL_TABLE = 1, BY_FULL_TABLE = 2;  // and 0 by the constant

// The entry of a full table (above) for index i: its bits below fold_low, and those from fold_low +
// fold_bits up moved down next to them.
__device__ __forceinline__ uint32_t full_index(uint32_t i, uint32_t fold_low, uint32_t fold_bits) {
    return ((i >> (fold_low + fold_bits)) << fold_low) | (i & ((1u << fold_low) - 1));
}

// x scaled as a bit reversal scales (`powers`, above; tables in Shoup's form for SH).
template <bool SH>
__device__ __forceinline__ Fr scaled(const Fr& x, Fr c, const Fr* lo, const Fr* hi, uint32_t lo_bits, uint32_t powers,
                                     uint32_t i, uint32_t fold_low, uint32_t fold_bits) {
    if (powers == BY_FULL_TABLE) {
        const uint32_t at = full_index(i, fold_low, fold_bits);
        if constexpr (SH) {
            return x.mul_shoup(lo[at], lo[(1u << (lo_bits - fold_bits)) + at]);
        } else {
            return x * lo[at];
        }
    }
    return powers == BY_TWO_LEVEL_TABLE ? times_power<SH>(x, lo, hi, lo_bits, i) : x * c;
}

// In-place bit-reversal permutation of x (2^log_n elements), optionally scaled as `scaled` says: with
// `scale` 1 each element is scaled by its index before the move, with `scale` 2 by its index after it.
template <bool SH>
__device__ __forceinline__ void bit_reverse_plain(Fr* x, uint32_t log_n, Fr c, const Fr* lo, const Fr* hi,
                                                  uint32_t lo_bits, uint32_t powers, uint32_t scale, uint32_t fold_low,
                                                  uint32_t fold_bits) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (1u << log_n)) return;
    const uint32_t j = bit_reverse(i, log_n);
    if (j < i) return;
    const Fr xi = x[i], xj = x[j];
    if (scale == 0) {
        x[i] = xj;
        x[j] = xi;
        return;
    }
    // x[i] receives xj and x[j] receives xi, each scaled by its source or its destination index.
    const bool by_source = scale == 1;
    x[i] = scaled<SH>(xj, c, lo, hi, lo_bits, powers, by_source ? j : i, fold_low, fold_bits);
    if (j != i) x[j] = scaled<SH>(xi, c, lo, hi, lo_bits, powers, by_source ? i : j, fold_low, fold_bits);
}

extern "C" __global__ void ntt_bit_reverse(Fr* x, uint32_t log_n, Fr c, const Fr* lo, const Fr* hi, uint32_t lo_bits,
                                           uint32_t powers, uint32_t scale, uint32_t fold_low, uint32_t fold_bits) {
    bit_reverse_plain<false>(x, log_n, c, lo, hi, lo_bits, powers, scale, fold_low, fold_bits);
}
extern "C" __global__ void ntt_bit_reverse_shoup(Fr* x, uint32_t log_n, Fr c, const Fr* lo, const Fr* hi,
                                                 uint32_t lo_bits, uint32_t powers, uint32_t scale, uint32_t fold_low,
                                                 uint32_t fold_bits) {
    bit_reverse_plain<true>(x, log_n, c, lo, hi, lo_bits, powers, scale, fold_low, fold_bits);
}

// The witness map's last step: the in-place bit reversal of x that also subtracts a second vector held
// in the same bit-reversed order, x[k] = (x[rev(k)] * s^k - sub[rev(k)]) * c for every k (s^k from
// its power table as `scaled` reads it, `powers` 1 or 2, in Shoup's form for the *_shoup kernels);
// sub is left as it was.
template <bool SH>
__device__ __forceinline__ void bit_reverse_minus(Fr* x, const Fr* sub, uint32_t log_n, Fr c, const Fr* lo,
                                                  const Fr* hi, uint32_t lo_bits, uint32_t powers, uint32_t fold_low,
                                                  uint32_t fold_bits) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (1u << log_n)) return;
    const uint32_t j = bit_reverse(i, log_n);
    if (j < i) return;
    const Fr xi = x[i], xj = x[j], si = sub[i], sj = sub[j];
    x[i] = (scaled<SH>(xj, c, lo, hi, lo_bits, powers, i, fold_low, fold_bits) - sj) * c;
    if (j != i) x[j] = (scaled<SH>(xi, c, lo, hi, lo_bits, powers, j, fold_low, fold_bits) - si) * c;
}

extern "C" __global__ void ntt_bit_reverse_minus(Fr* x, const Fr* sub, uint32_t log_n, Fr c, const Fr* lo,
                                                 const Fr* hi, uint32_t lo_bits, uint32_t powers, uint32_t fold_low,
                                                 uint32_t fold_bits) {
    bit_reverse_minus<false>(x, sub, log_n, c, lo, hi, lo_bits, powers, fold_low, fold_bits);
}
extern "C" __global__ void ntt_bit_reverse_minus_shoup(Fr* x, const Fr* sub, uint32_t log_n, Fr c, const Fr* lo,
                                                       const Fr* hi, uint32_t lo_bits, uint32_t powers,
                                                       uint32_t fold_low, uint32_t fold_bits) {
    bit_reverse_minus<true>(x, sub, log_n, c, lo, hi, lo_bits, powers, fold_low, fold_bits);
}

// The bit-reversal permutation (with the same optional scaling as ntt_bit_reverse, in Shoup's form for
// SH) for log_n >= 8, by
// tiles: write i = (a, m, b) with a and b of 4 bits, so that rev(i) = (rev(b), rev(m), rev(a)). Block m
// (m <= rev(m)) loads the 16 x 16 elements of middle index m and those of rev(m), runs of 16 consecutive
// elements, and writes each tile transposed into the other's place, again in runs of 16. With MINUS
// (ntt_bit_reverse_minus_tiled) it also loads sub's tiles and writes (x * s^i - sub) * c at
// destination i, as ntt_bit_reverse_minus does.
constexpr uint32_t TILE = 16, TILE_LOG = 4, TILE_PAD = TILE + 1;

template <bool MINUS, bool SH = false>
__device__ __forceinline__ void bit_reverse_tiled(Fr* x, const Fr* sub, uint32_t log_n, Fr c, const Fr* lo,
                                                  const Fr* hi, uint32_t lo_bits, uint32_t powers, uint32_t scale,
                                                  uint32_t fold_low, uint32_t fold_bits) {
    // Tiles 0 and 1 hold x's two tiles, 2 and 3 sub's.
    __shared__ Fr tile[MINUS ? 4 : 2][TILE * TILE_PAD];
    const uint32_t mid_bits = log_n - 2 * TILE_LOG;
    const uint32_t m = blockIdx.x, mr = bit_reverse(m, mid_bits);
    if (mr < m) return;
    const uint32_t a_shift = log_n - TILE_LOG;
    // Tile q holds middle index m (q = 0) or rev(m) (q = 1); chosen by a select rather than read from
    // an array, which nvcc kept in local memory (a load every iteration).
    const auto mid = [m, mr](int q) { return q == 0 ? m : mr; };
    for (uint32_t idx = threadIdx.x; idx < TILE * TILE; idx += blockDim.x) {
        const uint32_t a = idx >> TILE_LOG, b = idx & (TILE - 1);
#pragma unroll
        for (int q = 0; q < 2; q++) {
            const uint32_t i = (a << a_shift) | (mid(q) << TILE_LOG) | b;
            Fr v = x[i];
            if (!MINUS && scale == 1) v = scaled<SH>(v, c, lo, hi, lo_bits, powers, i, fold_low, fold_bits);
            tile[q][a * TILE_PAD + b] = v;
            if (MINUS) tile[2 + q][a * TILE_PAD + b] = sub[i];
        }
    }
    __syncthreads();
    for (uint32_t idx = threadIdx.x; idx < TILE * TILE; idx += blockDim.x) {
        // Destination (a2, mid(1 - q), b2) receives source (rev(b2), mid(q), rev(a2)).
        const uint32_t a2 = idx >> TILE_LOG, b2 = idx & (TILE - 1);
        const uint32_t src = bit_reverse(b2, TILE_LOG) * TILE_PAD + bit_reverse(a2, TILE_LOG);
#pragma unroll
        for (int q = 0; q < 2; q++) {
            if (q == 1 && mr == m) break;
            const uint32_t i = (a2 << a_shift) | (mid(1 - q) << TILE_LOG) | b2;
            Fr v = tile[q][src];
            if (MINUS) {
                v = (scaled<SH>(v, c, lo, hi, lo_bits, powers, i, fold_low, fold_bits) - tile[2 + q][src]) * c;
            } else if (scale == 2) {
                v = scaled<SH>(v, c, lo, hi, lo_bits, powers, i, fold_low, fold_bits);
            }
            x[i] = v;
        }
    }
}

extern "C" __global__ void ntt_bit_reverse_tiled(Fr* x, uint32_t log_n, Fr c, const Fr* lo, const Fr* hi,
                                                 uint32_t lo_bits, uint32_t powers, uint32_t scale, uint32_t fold_low,
                                                 uint32_t fold_bits) {
    bit_reverse_tiled<false>(x, nullptr, log_n, c, lo, hi, lo_bits, powers, scale, fold_low, fold_bits);
}
extern "C" __global__ void ntt_bit_reverse_tiled_shoup(Fr* x, uint32_t log_n, Fr c, const Fr* lo, const Fr* hi,
                                                       uint32_t lo_bits, uint32_t powers, uint32_t scale,
                                                       uint32_t fold_low, uint32_t fold_bits) {
    bit_reverse_tiled<false, true>(x, nullptr, log_n, c, lo, hi, lo_bits, powers, scale, fold_low, fold_bits);
}

extern "C" __global__ void ntt_bit_reverse_minus_tiled(Fr* x, const Fr* sub, uint32_t log_n, Fr c, const Fr* lo,
                                                       const Fr* hi, uint32_t lo_bits, uint32_t powers,
                                                       uint32_t fold_low, uint32_t fold_bits) {
    bit_reverse_tiled<true>(x, sub, log_n, c, lo, hi, lo_bits, powers, 2, fold_low, fold_bits);
}
extern "C" __global__ void ntt_bit_reverse_minus_tiled_shoup(Fr* x, const Fr* sub, uint32_t log_n, Fr c,
                                                             const Fr* lo, const Fr* hi, uint32_t lo_bits,
                                                             uint32_t powers, uint32_t fold_low, uint32_t fold_bits) {
    bit_reverse_tiled<true, true>(x, sub, log_n, c, lo, hi, lo_bits, powers, 2, fold_low, fold_bits);
}

// Field elements in shared memory as two arrays of 16-byte halves. Threads of a warp that read
// consecutive elements then read consecutive 16-byte words, which the banks serve without conflict;
// an array of whole 32-byte elements puts every 16-byte access of a warp at least two ways in
// conflict (a quarter-warp's 8 words fall in 4 of the 8 bank groups).
//
// With SWIZZLE (the elements of the passes over single columns, c = 0: ntt_pass_first and
// ntt_pass_turn), element i lies at i ^ 7 where bit 3 of i is set, at i elsewhere. A quarter-warp of
// their stages below 3 (t) reads words 2^t apart in runs of 2^t, which span 16 words and fall twice
// on 4 bank groups; the second 8 of every 16 then move to the groups the first 8 left free. Runs of 8
// aligned words (every other access of a pass) stay on 8 groups. On the H100 (2^24) it took 1.5% off
// a first pass; the strided passes (c > 0), where only stage 0 conflicts, gained nothing (a middle
// pass 1.35 -> 1.37 ms) and are not swizzled. The twiddles are read in runs that need not be
// aligned, and are not swizzled either.
template <bool SWIZZLE>
struct HalvesOf {
    uint4* lo;
    uint4* hi;

    // The halves of `count` elements from `base` (16-byte aligned); with SWIZZLE `count` is a power of
    // two, which the swizzle maps onto itself (it moves words only within aligned runs of 8).
    __device__ __forceinline__ static HalvesOf at(void* base, uint32_t count) {
        uint4* lo = reinterpret_cast<uint4*>(base);
        return {lo, lo + count};
    }
    __device__ __forceinline__ static uint32_t slot(uint32_t i) {
        return SWIZZLE ? i ^ ((0u - ((i >> 3) & 1)) & 7) : i;
    }
    __device__ __forceinline__ Fr get(uint32_t i) const {
        const uint32_t s = slot(i);
        const uint4 a = lo[s], b = hi[s];
        Fr r;
        r.v[0] = a.x, r.v[1] = a.y, r.v[2] = a.z, r.v[3] = a.w;
        r.v[4] = b.x, r.v[5] = b.y, r.v[6] = b.z, r.v[7] = b.w;
        return r;
    }
    __device__ __forceinline__ void set(uint32_t i, const Fr& x) const {
        const uint32_t s = slot(i);
        lo[s] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
        hi[s] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
    }
};
using Halves = HalvesOf<false>;
using Tile = HalvesOf<true>;

// The index in a transform's table (w^i at i, i < n/2) of the twiddle of stage s0 + t at position
// pos (< 2^t) of column `column` (< 2^s0) of a pass from stage s0: stage s pairs elements 2^s apart
// and multiplies the pair at position p of its group by w_(2^(s+1))^p = w^(p << (log_n - 1 - s)),
// and column `column` of a pass from s0 holds positions pos 2^s0 + column of stage s0 + t.
__device__ __forceinline__ uint32_t twiddle_index(uint32_t log_n, uint32_t s0, uint32_t t, uint32_t pos,
                                                  uint32_t column) {
    return ((pos << s0) + column) << (log_n - 1 - s0 - t);
}

// A pass's twiddles: those of stage t (pos < 2^t, column col of the block's 2^c) in shared memory
// at ((2^t - 1 + pos) << c) + col, their values and with SHOUP their quotients. With SHOUP, the
// stages from `from` up (a kernel argument the host chooses: TwiddlePlacement in the crate's
// kernels/twiddles.rs) read theirs from the table in device memory, through the L1 cache, where
// they use them, and take no shared memory: stage t's 2^(t+c) twiddles are each used
// by 2^(k-1-t) butterflies, so the last stages are the cheapest to leave there, and every stage left
// there makes room for more blocks a multiprocessor (the passes are latency-bound, and their
// occupancy is bound by shared memory). On the H100 (2^24), a strided pass (c > 0, 2^10 elements)
// with its last stage there holds three blocks a multiprocessor instead of two (3-14% faster than
// with every stage in shared memory), with its last two four (2-3% faster again; with its last
// three the pass slowed by 16%). A first pass, whose twiddles every block shares, copies them from a
// table of its own (3.6% faster than gathering them from the transform's table); reading them there
// where it uses them instead was up to 2% faster with 72 registers, and 0.5% slower with the lazy
// reduction's 74 (fewer blocks a multiprocessor).
//
// A pass may have a table of its own (`own`, see ntt_pass_twiddles): its twiddles in the order a block
// holds them, one run of M = 2^(k+c) - 2^c per group of 2^c columns (with SHOUP the quotients after
// every group's values), so that a block reads its twiddles, and the last stage's where they are
// used, as runs of consecutive elements; without one the pass reads them from the transform's table,
// where a column's twiddles of one stage lie 2^(log_n-1-s0-t) elements apart.
struct Twiddles {
    Halves w, q;
    const Fr* table;
    // Stages from `from` up read their twiddles from `table` where they use them (see load_twiddles).
    uint32_t log_n, s0, c, low0, from;
    // With a table of the pass's own: the block's first entry in it, and where the quotients start.
    uint32_t own, base, half;

    // a times the twiddle of stage t at position pos of column col (with SHOUP lazily: a and the
    // product below 2p, see run_stages).
    template <int U>
    __device__ __forceinline__ Fr times(const Fr& a, uint32_t t, uint32_t pos, uint32_t col) const {
        if constexpr (U == SHOUP) {
            if (t >= from) {
                if (own) {
                    const uint32_t at = base + (((1u << t) - 1 + pos) << c) + col;
                    return a.mul_shoup_lazy(table[at], table[half + at]);
                }
                const uint32_t at = twiddle_index(log_n, s0, t, pos, low0 + col);
                return a.mul_shoup_lazy(table[at], table[(1u << (log_n - 1)) + at]);
            }
            const uint32_t j = (((1u << t) - 1 + pos) << c) + col;
            return a.mul_shoup_lazy(w.get(j), q.get(j));
        } else {
            return mul<U>(a, w.get((((1u << t) - 1 + pos) << c) + col));
        }
    }
};

// Loads into shared memory at `at` the twiddles per column that stages s0 .. s0+from-1 of the
// block's 2^c columns use (2^from - 1 of them), from tw (w^i at i, i < n/2), and with SHOUP their
// quotients (at n/2 + i in tw, or after the values in a pass's own table): room for 2^(from+c)
// values and, with SHOUP, as many quotients after them. The stages from `from` up (with SHOUP only;
// the other units take from = k) read theirs from tw where they use them (Twiddles::times).
template <int U>
__device__ __forceinline__ Twiddles load_twiddles(Fr* at, const Fr* tw, uint32_t log_n, uint32_t s0, uint32_t k,
                                                  uint32_t c, uint32_t low0, uint32_t own, uint32_t from) {
    const uint32_t cols = 1u << c;
    const uint32_t size = 1u << (k + c);
    if (U != SHOUP) from = k;
    const uint32_t count = from > 0 ? 1u << (from + c) : 0;
    // A pass's own table: M = size - cols entries for each of its 2^(s0-c) groups of columns.
    const uint32_t m = size - cols;
    const uint32_t base = (low0 >> c) * m, half = (1u << (s0 - c)) * m;
    const Twiddles tws{Halves::at(at, count),
                       Halves::at(at + (U == SHOUP ? count : 0), count),
                       tw,
                       log_n,
                       s0,
                       c,
                       low0,
                       from,
                       own,
                       base,
                       half};
    const Fr* twq = tw + (own ? half : 1u << (log_n - 1));
    for (uint32_t i = threadIdx.x; i + cols < count; i += blockDim.x) {
        uint32_t src = base + i;
        if (!own) {
            const uint32_t j = (i >> c) + 1;
            const uint32_t t = 31 - __clz(j);
            const uint32_t pos = j - (1u << t);
            src = twiddle_index(log_n, s0, t, pos, low0 + (i & (cols - 1)));
        }
        tws.w.set(i, tw[src]);
        if (U == SHOUP) tws.q.set(i, twq[src]);
    }
    return tws;
}

// A pass's own twiddle table (Twiddles): for stages s0 .. s0+k-1 over groups of 2^c columns, group g
// (columns g 2^c .. g 2^c + 2^c - 1, g < 2^(s0-c)) gets the M = 2^(k+c) - 2^c twiddles its block
// uses, entry g M + i holding what shared index i holds in load_twiddles, read from tw (w^i, i < n/2,
// then with `shoup` their quotients, which go to 2^(s0-c) M + g M + i). Worth its memory where
// blocks share their twiddles: a first pass (one group) or a middle one (s0 + k < log_n), whose
// 2^(s0-c) groups each serve 2^(log_n-s0-k) blocks. With `folded` set, each twiddle of stage t is
// multiplied by factors[t] (Montgomery form, one a stage of the pass; not read otherwise), and with
// `shoup` its quotient is computed afresh: the twiddles of a coset transform that carry part of its
// coset powers (see full_index). Stage s of
// a transform decimated in time multiplies by its twiddles exactly the elements whose input index has
// bit log_n-1-s set, and in frequency the outputs with that bit set: a factor f^(2^(log_n-1-s)) on
// every twiddle of stage s scales element i by f^i's share of that bit (where the stage multiplies at
// every position: not stage 0, nor stage 1 of a first pass, whose factors the host sets to 1).
extern "C" __global__ void ntt_pass_twiddles(Fr* out, const Fr* tw, uint32_t log_n, uint32_t s0, uint32_t k,
                                             uint32_t c, uint32_t shoup, const Fr* factors, uint32_t folded) {
    const uint32_t cols = 1u << c;
    const uint32_t m = (1u << (k + c)) - cols;
    const uint32_t total = (1u << (s0 - c)) * m;
    const uint32_t e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    const uint32_t g = e / m, i = e - g * m;
    const uint32_t j = (i >> c) + 1;
    const uint32_t t = 31 - __clz(j);
    const uint32_t pos = j - (1u << t);
    const uint32_t from = twiddle_index(log_n, s0, t, pos, (g << c) + (i & (cols - 1)));
    if (folded) {
        // Montgomery's product of a canonical value and a Montgomery one is canonical.
        const Fr w = tw[from] * factors[t];
        out[e] = w;
        if (shoup) out[total + e] = w.shoup_quotient();
        return;
    }
    out[e] = tw[from];
    if (shoup) out[total + e] = tw[(1u << (log_n - 1)) + from];
}

// A butterfly's sum and difference: with SHOUP lazily, the elements kept below 2p from stage to stage
// (Fr::add_lazy, sub_lazy and Twiddles::times' mul_shoup_lazy; the passes reduce them once as they
// store them), which spares every Shoup product its final subtraction; fully reduced otherwise.
template <int U>
__device__ __forceinline__ Fr plus(const Fr& a, const Fr& b) {
    if constexpr (U == SHOUP) {
        return a.add_lazy(b);
    } else {
        return a + b;
    }
}
template <int U>
__device__ __forceinline__ Fr minus(const Fr& a, const Fr& b) {
    if constexpr (U == SHOUP) {
        return a.sub_lazy(b);
    } else {
        return a - b;
    }
}

// An element as a pass stores it: reduced below p (with SHOUP the stages leave it below 2p).
template <int U>
__device__ __forceinline__ Fr stored(const Fr& a) {
    if constexpr (U == SHOUP) {
        return a.reduced();
    } else {
        return a;
    }
}

// The k stages themselves on the block's `size` elements in shared memory (data), twiddles in tws;
// every thread of the block takes part, and the last stage is followed by a barrier. Elements come in
// below p (below 2p with SHOUP) and leave below p (below 2p with SHOUP). `size` is 2^(k+c), or with
// c = 0 a multiple of 2^k: that many tiles of 2^k one after the other, all with the same twiddles
// (pass_gather).
// With SKIP1, stage 1 of a first pass (c = 0) multiplies only where its twiddle is not 1 (below); the
// passes over strided columns, which never hold stage 1, are compiled without that code (with it they
// took two registers more and ran 1-2% slower on the H200).
template <int U, bool SKIP1, class Data>
__device__ __forceinline__ void run_stages(Data data, Twiddles tws, uint32_t s0, uint32_t k, uint32_t c,
                                           uint32_t dif, uint32_t size) {
    const uint32_t cols = 1u << c;
    for (uint32_t step = 0; step < k; step++) {
        const uint32_t t = dif ? k - 1 - step : step;
        if (SKIP1 && s0 + t == 1 && c == 0) {
            // Stage 1 in the first pass: each thread takes both butterflies of a group of four
            // elements, positions 0 and 1, so that the first, whose twiddle is w^0 = 1, multiplies by
            // nothing. A quarter of the stage's products go, at the price of 4-way bank conflicts
            // (a warp's groups are 64 bytes apart) in this stage's loads and stores.
            for (uint32_t g = threadIdx.x; g < size / 4; g += blockDim.x) {
                const uint32_t i = 4 * g;
                const Fr u0 = data.get(i), u1 = data.get(i + 1), v0 = data.get(i + 2), v1 = data.get(i + 3);
                data.set(i, plus<U>(u0, v0));
                data.set(i + 2, minus<U>(u0, v0));
                if (dif) {
                    data.set(i + 1, plus<U>(u1, v1));
                    data.set(i + 3, tws.times<U>(minus<U>(u1, v1), 1, 1, 0));
                } else {
                    const Fr vw = tws.times<U>(v1, 1, 1, 0);
                    data.set(i + 1, plus<U>(u1, vw));
                    data.set(i + 3, minus<U>(u1, vw));
                }
            }
            __syncthreads();
            continue;
        }
        for (uint32_t q = threadIdx.x; q < size / 2; q += blockDim.x) {
            const uint32_t col = q & (cols - 1);
            const uint32_t p = q >> c;
            const uint32_t pos = p & ((1u << t) - 1);
            const uint32_t i0 = ((((p >> t) << (t + 1)) + pos) << c) + col;
            const uint32_t i1 = i0 + (1u << (t + c));
            const Fr u = data.get(i0), v = data.get(i1);
            if (s0 + t == 0) {
                // Stage 0: every twiddle is w^0 = 1.
                data.set(i0, plus<U>(u, v));
                data.set(i1, minus<U>(u, v));
            } else if (dif) {
                data.set(i0, plus<U>(u, v));
                data.set(i1, tws.times<U>(minus<U>(u, v), t, pos, col));
            } else {
                const Fr vw = tws.times<U>(v, t, pos, col);
                data.set(i0, plus<U>(u, vw));
                data.set(i1, minus<U>(u, vw));
            }
        }
        __syncthreads();
    }
}

// Stages s0 .. s0+k-1 of a radix-2 NTT of 2^log_n elements, in shared memory.
//
// Stage s pairs elements 2^s apart; the twiddle of a pair at position p < 2^s within its group of
// 2^(s+1) is w_(2^(s+1))^p = tw[p << (log_n - 1 - s)], tw[i] = w_n^i. With `dif` 0 the stages run
// upwards as decimation in time (bit-reversed in, natural out: u + v*w, u - v*w); with `dif` 1 they
// run downwards as decimation in frequency (natural in, bit-reversed out: u + v, (u - v)*w).
//
// The elements low + j * 2^s0 + h * 2^(s0+k) (j < 2^k) form a column that stays together for these k
// stages. Block b takes 2^c adjacent columns (low0 .. low0 + 2^c - 1, c <= s0), so that its loads and
// stores run over 2^c consecutive elements. It brings them and the 2^k - 1 twiddles per column its
// stages use into shared memory (element j of column q at j * 2^c + q; stage t's twiddles at
// (2^t - 1 + p) * 2^c + q; both as halves), runs the stages there and writes the elements back. With
// TIMES, each element is first multiplied by the element of y at its index (the pass transforms x * y
// pointwise: the witness map's product on the coset enters the first pass of its interpolation).
// With `own`, tw is the pass's own table (ntt_pass_twiddles) rather than the transform's.
template <int U, bool SKIP1, bool TIMES>
__device__ __forceinline__ void pass(Fr* x, const Fr* y, const Fr* tw, uint32_t log_n, uint32_t s0, uint32_t k,
                                     uint32_t c, uint32_t dif, uint32_t own, uint32_t from) {
    extern __shared__ Fr sh[];
    const uint32_t cols = 1u << c;
    const uint32_t size = 1u << (k + c);
    // ntt_pass_first (SKIP1 without TIMES) runs from stage 0 over single columns: swizzled (HalvesOf).
    using Data = HalvesOf<SKIP1 && !TIMES>;
    const Data data = Data::at(sh, size);
    const uint32_t groups = 1u << (s0 - c);  // column groups per 2^(s0+k) block of rows
    const uint32_t low0 = (blockIdx.x & (groups - 1)) << c;
    const size_t base = ((size_t)(blockIdx.x >> (s0 - c)) << (s0 + k)) + low0;
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) {
        const size_t at = base + ((size_t)(i >> c) << s0) + (i & (cols - 1));
        data.set(i, TIMES ? mul<U>(x[at], y[at]) : x[at]);
    }
    const Twiddles tws = load_twiddles<U>(sh + size, tw, log_n, s0, k, c, low0, own, from);
    __syncthreads();
    run_stages<U, SKIP1>(data, tws, s0, k, c, dif, size);
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x)
        x[base + ((size_t)(i >> c) << s0) + (i & (cols - 1))] = stored<U>(data.get(i));
}

// The pass kernels, each by the units its products use (ntt_pass*, *_fp64, *_mixed): ntt_pass for any
// pass, ntt_pass_first for passes from stage 0 (stage 1's products by 1 skipped), ntt_pass_times for a
// pass on x * y. All take y, which only ntt_pass_times reads.
#define NTT_PASS(name, U, SKIP1, TIMES)                                                                       \
    extern "C" __global__ void name(Fr* x, const Fr* y, const Fr* tw, uint32_t log_n, uint32_t s0, uint32_t k, \
                                    uint32_t c, uint32_t dif, uint32_t own, uint32_t from) {                   \
        pass<U, SKIP1, TIMES>(x, y, tw, log_n, s0, k, c, dif, own, from);                                     \
    }
NTT_PASS(ntt_pass, 0, false, false)
NTT_PASS(ntt_pass_fp64, 1, false, false)
NTT_PASS(ntt_pass_mixed, 2, false, false)
NTT_PASS(ntt_pass_first, 0, true, false)
NTT_PASS(ntt_pass_first_fp64, 1, true, false)
NTT_PASS(ntt_pass_first_mixed, 2, true, false)
NTT_PASS(ntt_pass_times, 0, true, true)
NTT_PASS(ntt_pass_times_fp64, 1, true, true)
NTT_PASS(ntt_pass_times_mixed, 2, true, true)
NTT_PASS(ntt_pass_shoup, SHOUP, false, false)
NTT_PASS(ntt_pass_first_shoup, SHOUP, true, false)
NTT_PASS(ntt_pass_times_shoup, SHOUP, true, true)

// The 2^tb tiles of 2^k elements of pass_gather in shared memory: as HalvesOf, element i at i with
// its low three bits XORed with 7 where bit 3 is set (Tile's swizzle, for the stages below 3) and with
// its three bits below bit k + min(tb, 3) (where k + min(tb, 3) >= 7, so that they lie above bit 3). A quarter-warp of
// pass_gather's loads stores its eight elements at positions of one low part (a bit-reversed run) in
// 2^min(tb, 3) tiles, 2^(3 - min(tb, 3)) apart in their top bits: those three bits tell them apart
// and spread them over the eight bank groups. Within a stage a quarter-warp's accesses share them
// (k >= 4), so the stages see Tile's layout.
struct GatherTile {
    Halves halves;
    uint32_t shift, top;

    __device__ __forceinline__ static GatherTile at(void* base, uint32_t k, uint32_t tb) {
        const uint32_t end = k + min(tb, 3u);
        return {Halves::at(base, 1u << (k + tb)), end >= 7 ? end - 3 : 0, end >= 7 ? 7u : 0u};
    }
    __device__ __forceinline__ uint32_t slot(uint32_t i) const {
        return Tile::slot(i) ^ ((i >> shift) & top);
    }
    __device__ __forceinline__ Fr get(uint32_t i) const { return halves.get(slot(i)); }
    __device__ __forceinline__ void set(uint32_t i, const Fr& x) const { halves.set(slot(i), x); }
};

// The first pass (stages 0 .. k-1) of a transform decimated in time, out of place, with the bit
// reversal that precedes it folded into its loads: out receives what the bit reversal of x followed by
// ntt_pass_first would leave in x; x is only read. Write a natural index i = (r, b, a) (top k bits r,
// then log_n - k - tb bits b, low tb bits a) and m = log_n - k: the tiles of 2^k consecutive positions
// that the first pass transforms, at bit-reversed positions, gather their elements from r varying, b
// and a fixed. Block b takes the 2^tb tiles of one b, so that its loads read runs of 2^tb consecutive
// elements (as a strided pass does), holds tile a at a 2^k .. a 2^k + 2^k - 1 (position rev_k(r)),
// runs the stages over all of them at once (c = 0: every tile has the same twiddles), and writes tile
// a to positions (rev_tb(a), rev(b), 0 .. 2^k - 1) (top tb bits, then m - tb, then k): runs of 2^k.
// With `scale` 1 (a table in Montgomery's form) or 2 (in Shoup's), each element is multiplied on its
// way in by the power of its natural index that `scaled` reads (powers 1 or 2): a coset transform's
// powers that its passes' twiddles do not carry, as the bit reversal would have scaled it.
template <int U>
__device__ __forceinline__ void pass_gather(Fr* out, const Fr* x, const Fr* tw, uint32_t log_n, uint32_t k,
                                            uint32_t tb, uint32_t own, uint32_t from, uint32_t scale, const Fr* lo,
                                            const Fr* hi, uint32_t lo_bits, uint32_t powers, uint32_t fold_low,
                                            uint32_t fold_bits) {
    extern __shared__ Fr sh[];
    const uint32_t bits = k + tb, size = 1u << bits, m = log_n - k, tiles = 1u << tb;
    const GatherTile data = GatherTile::at(sh, k, tb);
    const uint32_t b = blockIdx.x;
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) {
        const uint32_t a = i & (tiles - 1), r = i >> tb;
        const uint32_t src = (r << m) | (b << tb) | a;
        Fr v = x[src];
        // powers is 1 or 2 (the host checks), so scaled does not read its constant (given v).
        if (scale == 1) v = scaled<false>(v, v, lo, hi, lo_bits, powers, src, fold_low, fold_bits);
        if (scale == 2) v = scaled<true>(v, v, lo, hi, lo_bits, powers, src, fold_low, fold_bits);
        data.set((a << k) | bit_reverse(r, k), v);
    }
    const Twiddles tws = load_twiddles<U>(sh + size, tw, log_n, 0, k, 0, 0, own, from);
    __syncthreads();
    run_stages<U, true>(data, tws, 0, k, 0, 0, size);
    const uint32_t row = bit_reverse(b, m - tb) << k;
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) {
        const uint32_t a = i >> k, j = i & ((1u << k) - 1);
        out[(bit_reverse(a, tb) << (log_n - tb)) | row | j] = stored<U>(data.get(i));
    }
}

#define NTT_PASS_GATHER(name, U)                                                                                    \
    extern "C" __global__ void name(Fr* out, const Fr* x, const Fr* tw, uint32_t log_n, uint32_t k, uint32_t tb,    \
                                    uint32_t own, uint32_t from, uint32_t scale, const Fr* lo, const Fr* hi,        \
                                    uint32_t lo_bits, uint32_t powers, uint32_t fold_low, uint32_t fold_bits) {     \
        pass_gather<U>(out, x, tw, log_n, k, tb, own, from, scale, lo, hi, lo_bits, powers, fold_low, fold_bits); \
    }
NTT_PASS_GATHER(ntt_pass_gather, 0)
NTT_PASS_GATHER(ntt_pass_gather_fp64, 1)
NTT_PASS_GATHER(ntt_pass_gather_mixed, 2)
NTT_PASS_GATHER(ntt_pass_gather_shoup, SHOUP)

// The witness map's turn from interpolation to evaluation on the coset, on each block of 2^k
// consecutive elements: the last pass of an inverse transform decimated in frequency (stages k-1 .. 0,
// twiddles itw), the scaling of the coefficient held at index i by c * s^rev(i) (rev over log_n bits:
// the coefficients are in bit-reversed order), and the first pass of a forward transform decimated in
// time (stages 0 .. k-1, twiddles tw). The same as ntt_pass (dif), ntt_scale (bit-reversed) and
// ntt_pass (dit) with s0 = 0, in one trip through global memory. The powers come from a two-level
// table (`powers` 1: the constant c folded into its hi powers, two products an element) or from a
// full one (`powers` 2, one product an element), which leaves out the index bits fold_low ..
// fold_low + fold_bits when the inverse transform's middle passes carried their powers (full_index);
// with SHOUP the table is in Shoup's form (a two-level one as times_power_shoup reads it, a full one
// as `scaled` does).
template <int U>
__device__ __forceinline__ void pass_turn(Fr* x, const Fr* itw, const Fr* tw, uint32_t log_n, uint32_t k,
                                          const Fr* lo, const Fr* hi, uint32_t lo_bits, uint32_t powers,
                                          uint32_t fold_low, uint32_t fold_bits) {
    extern __shared__ Fr sh[];
    const uint32_t size = 1u << k;
    const Tile data = Tile::at(sh, size);
    const size_t base = (size_t)blockIdx.x << k;
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) data.set(i, x[base + i]);
    const Twiddles itws = load_twiddles<U>(sh + size, itw, log_n, 0, k, 0, 0, 0, k);
    __syncthreads();
    run_stages<U, true>(data, itws, 0, k, 0, 1, size);
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) {
        const uint32_t e = bit_reverse((uint32_t)base + i, log_n);
        // Both Shoup products lazy: the stages take and give elements below 2p.
        if (powers == BY_FULL_TABLE) {
            const uint32_t at = full_index(e, fold_low, fold_bits);
            if constexpr (U == SHOUP) {
                data.set(i, data.get(i).mul_shoup_lazy(lo[at], lo[(1u << (lo_bits - fold_bits)) + at]));
            } else {
                data.set(i, mul<U>(data.get(i), lo[at]));
            }
        } else if constexpr (U == SHOUP) {
            data.set(i, times_power_shoup<true>(data.get(i), lo, hi, lo_bits, e));
        } else {
            const uint32_t mask = (1u << lo_bits) - 1;
            data.set(i, mul<U>(data.get(i), mul<U>(hi[e >> lo_bits], lo[e & mask])));
        }
    }
    const Twiddles tws = load_twiddles<U>(sh + size, tw, log_n, 0, k, 0, 0, 0, k);
    __syncthreads();
    run_stages<U, true>(data, tws, 0, k, 0, 0, size);
    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) x[base + i] = stored<U>(data.get(i));
}

#define NTT_PASS_TURN(name, U)                                                                                    \
    extern "C" __global__ void name(Fr* x, const Fr* itw, const Fr* tw, uint32_t log_n, uint32_t k, const Fr* lo, \
                                    const Fr* hi, uint32_t lo_bits, uint32_t powers, uint32_t fold_low,          \
                                    uint32_t fold_bits) {                                                         \
        pass_turn<U>(x, itw, tw, log_n, k, lo, hi, lo_bits, powers, fold_low, fold_bits);                         \
    }
NTT_PASS_TURN(ntt_pass_turn, 0)
NTT_PASS_TURN(ntt_pass_turn_fp64, 1)
NTT_PASS_TURN(ntt_pass_turn_mixed, 2)
NTT_PASS_TURN(ntt_pass_turn_shoup, SHOUP)

// A twiddle table for the *_shoup passes from a Montgomery one: for i < half, table[i] (Montgomery
// form) becomes its canonical value and table[half + i] that value's Shoup quotient
// floor(table[i] 2^256 / r).
extern "C" __global__ void ntt_shoup_twiddles(Fr* table, uint32_t half) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= half) return;
    const Fr canonical = table[i].from_mont();
    table[i] = canonical;
    table[half + i] = canonical.shoup_quotient();
}

// A power table's half in Shoup's form from Montgomery values at the even places: for j < count,
// pairs[2j] (Montgomery form) becomes its canonical value and pairs[2j + 1] that value's quotient.
extern "C" __global__ void ntt_shoup_pairs(Fr* pairs, uint32_t count) {
    const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count) return;
    const Fr canonical = pairs[2 * j].from_mont();
    pairs[2 * j] = canonical;
    pairs[2 * j + 1] = canonical.shoup_quotient();
}

// x[i] *= c (and by s^i when `powers` is set, or by s^rev(i) when `rev_bits` is not 0, rev reversing
// the low rev_bits bits: the scaling of coefficients held in bit-reversed order).
extern "C" __global__ void ntt_scale(Fr* x, uint32_t n, Fr c, const Fr* lo, const Fr* hi, uint32_t lo_bits,
                                     uint32_t powers, uint32_t rev_bits) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr f = c;
    if (powers) f = f * power(lo, hi, lo_bits, rev_bits ? bit_reverse(i, rev_bits) : i);
    x[i] = x[i] * f;
}

// a[i] *= b[i]: the witness map's product on the coset when it has no passes (a single element; otherwise
// the product enters the first pass of its interpolation, and its subtraction of c comes after that
// interpolation, in ntt_bit_reverse_minus).
extern "C" __global__ void ntt_mul(Fr* a, const Fr* b, uint32_t n) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = a[i] * b[i];
}

// The quotient step on the coset of the plain witness map (PolyBackend::quotient): a[i] = (a[i] * b[i] -
// c[i]) * z_inv, without the last multiplication when z_inv is 1.
extern "C" __global__ void quotient(Fr* a, const Fr* b, const Fr* c, Fr z_inv, uint32_t n) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Fr r = a[i] * b[i] - c[i];
    a[i] = z_inv == Fr::one() ? r : r * z_inv;
}
