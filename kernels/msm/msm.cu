// cuzk kernels: Pippenger multi-scalar multiplication over G1 and G2.
//
// One MSM (or one batch of a large one) runs as:
//   1. msm_count: each scalar (Fr, Montgomery form) is converted to its canonical value and cut into
//      signed digits of c bits, d in [-2^(c-1), 2^(c-1)], one per window; every nonzero digit counts
//      one point into bucket (set, |d|). Zero scalars contribute nothing; scalars equal to 1 are
//      listed in one extra bucket, the "ones", after all the sets' buckets (real witnesses are
//      mostly 0 and 1). With a selection, point i takes scalar select[i] (bases compacted to the ones
//      that can matter).
//      With a table of m precomputed multiples per point (G_table: entry i m + j is 2^(c j) P_i),
//      window w = s m + j adds that multiple into bucket set s, so m windows share one set of buckets
//      and the sets are combined by 2^(c m) instead of 2^c; without one, m = 1: a set per window.
//   2. an exclusive scan of the bucket counts gives each bucket its range (scan_blocks / scan_add);
//   3. msm_scatter: the same digits again, each (base index, sign) written into its bucket's range
//      (or the same in two passes through a temporary grouped by runs of buckets, msm_scatter_bins and
//      msm_place, each staging its output in shared memory to write it out in runs);
//   4. the ones, apart (the default with the XYZZ first round): G_sum_ones adds the points listed as
//      ones, a fixed share per thread (mixed additions, no bucket machinery), and G_reduce adds its
//      partials into one point; or in the first round (the default with the batched one), which
//      takes the ones' bucket as one more bucket after the sets' (its additions cost about half a
//      mixed one), G_bucket_sum taking its sum out after step 6;
//   5. the first summing round (G_sum_affine) cuts the rounds' entries (the sets' buckets', and the
//      ones' when it adds them) into equal pieces of L entries, one per thread, regardless of bucket
//      boundaries (L from their total, so that sparse scalars still keep every thread busy): a thread
//      emits one partial sum per bucket its piece touches, at slot (thread + bucket), so every thread
//      does the same work however uneven the buckets are.
//      msm_flat_counts says where each bucket's partials lie;
//   6. later rounds (G_sum_xyzz) add a bucket's partials in chunks of at most L' until one is left
//      (after the batched first round, whose partials are affine, the first by G_sum_partials);
//   7. G_window_segments: per bucket set, sum_j j * B_j over segments of buckets by running sums, one
//      thread per segment; G_reduce adds the segments of each set in one or more levels.
// The host combines the sets (sum_s 2^(c m s) S_s) and the sum of the ones.
#include "msm/batch.cuh"

using namespace cuzk;

// Bits [off, off + c) of a canonical scalar (8 little-endian limbs, c <= 24).
__device__ __forceinline__ uint32_t scalar_bits(const uint32_t (&s)[8], uint32_t off, uint32_t c) {
    const uint32_t limb = off >> 5, sh = off & 31;
    uint32_t v = limb < 8 ? s[limb] >> sh : 0;
    if (sh + c > 32 && limb + 1 < 8) v |= s[limb + 1] << (32 - sh);
    return v & ((1u << c) - 1);
}

// Calls f(key, index, negative) for each nonzero signed digit of scalar i, with windows taken m to a
// bucket set (key = set * 2^(c-1) + |d| - 1, index = i * m + the window's place in its set), or
// f(ones_key, i * m, false) once for a scalar equal to 1. Returns nothing for 0.
// `s` is the scalar in canonical form (for_each_digit below takes it in Montgomery form).
template <class Fn>
__device__ __forceinline__ void for_each_digit_of(const Fr& s, uint32_t i, uint32_t c, uint32_t windows, uint32_t m,
                                                  Fn f) {
    uint32_t high = 0;
#pragma unroll
    for (int k = 1; k < 8; k++) high |= s.v[k];
    const uint32_t half = 1u << (c - 1);
    const uint32_t first = i * m;
    if (high == 0 && s.v[0] <= 1) {
        if (s.v[0] == 1) f(((windows + m - 1) / m) * half, first, false);
        return;
    }
    uint32_t carry = 0, set_key = 0, j = 0;
    for (uint32_t w = 0; w < windows; w++) {
        const uint32_t raw = scalar_bits(s.v, w * c, c) + carry;
        if (raw > half) {
            carry = 1;
            if (raw != (1u << c)) f(set_key + ((1u << c) - raw) - 1, first + j, true);
        } else {
            carry = 0;
            if (raw != 0) f(set_key + raw - 1, first + j, false);
        }
        if (++j == m) {
            j = 0;
            set_key += half;
        }
    }
}

template <class Fn>
__device__ __forceinline__ void for_each_digit(const Fr& scalar_mont, uint32_t i, uint32_t c, uint32_t windows,
                                               uint32_t m, Fn f) {
    for_each_digit_of(scalar_mont.from_mont(), i, c, windows, m, f);
}

// The scalar of point i: scalars[i], or scalars[select[i]] with a selection.
__device__ __forceinline__ const Fr& scalar_of(const Fr* scalars, const uint32_t* select, uint32_t selected, uint32_t i) {
    return scalars[selected ? select[i] : i];
}

// The bucket after the sets' (the ones).
__device__ __forceinline__ uint32_t ones_key_of(uint32_t c, uint32_t windows, uint32_t m) {
    return ((windows + m - 1) / m) << (c - 1);
}

extern "C" __global__ void msm_count(const Fr* scalars, const uint32_t* select, uint32_t selected, uint32_t n,
                                     uint32_t c, uint32_t windows, uint32_t m, uint32_t* counts) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    const uint32_t ones_key = ones_key_of(c, windows, m);
    bool one = false;
    if (i < n) {
        for_each_digit(scalar_of(scalars, select, selected, i), i, c, windows, m, [&](uint32_t key, uint32_t, bool) {
            if (key == ones_key)
                one = true;
            else
                atomicAdd(&counts[key], 1u);
        });
    }
    // The ones all hit one counter: one atomic per warp.
    const uint32_t lanes = __ballot_sync(0xffffffffu, one);
    if (lanes != 0 && (threadIdx.x & 31) == __ffs(lanes) - 1) atomicAdd(&counts[ones_key], __popc(lanes));
}

// cursor starts as a copy of the scanned offsets; entries are base index | sign << 31 (the base index
// is i * m + j: the point's multiple for the digit's window, or the point itself for a one).
extern "C" __global__ void msm_scatter(const Fr* scalars, const uint32_t* select, uint32_t selected, uint32_t n,
                                       uint32_t c, uint32_t windows, uint32_t m, uint32_t* cursor,
                                       uint32_t* entries) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    const uint32_t ones_key = ones_key_of(c, windows, m);
    bool one = false;
    if (i < n) {
        for_each_digit(scalar_of(scalars, select, selected, i), i, c, windows, m,
                       [&](uint32_t key, uint32_t index, bool neg) {
                           if (key == ones_key)
                               one = true;
                           else
                               entries[atomicAdd(&cursor[key], 1u)] = index | ((uint32_t)neg << 31);
                       });
    }
    const uint32_t lanes = __ballot_sync(0xffffffffu, one);
    if (lanes == 0) return;
    const uint32_t lane = threadIdx.x & 31, leader = __ffs(lanes) - 1;
    uint32_t base = 0;
    if (lane == leader) base = atomicAdd(&cursor[ones_key], __popc(lanes));
    base = __shfl_sync(0xffffffffu, base, leader);
    if (one) entries[base + __popc(lanes & ((1u << lane) - 1))] = i * m;
}

// The binned scatter: msm_scatter's result in two passes that stage their output in shared memory and
// write it out in runs. msm_scatter makes two scattered L2 requests per digit (an atomic with return
// on the bucket's cursor, and a 4-byte store anywhere in the entries), and those requests, not the
// bytes, are what it costs. Bins are runs of 2^shift consecutive buckets of the sets (at most
// STAGE_BINS of them); bin b's entries take the final positions from off[b << shift] on.
// The sets' buckets may be sorted in parts, runs of whole sets [key_lo, key_hi) one after the other
// through one temporary (when there are more buckets than STAGE_BINS bins of PLACE_KEYS buckets,
// which the second pass needs to stage its segments): a part's bins then run over its own buckets
// only, and its pairs lie in the temporary from 0, at their places less off[key_lo].
// The first pass (msm_scatter_bins), per tile of scalars: a histogram of the tile's digits over the
// bins in shared memory, one global atomic per (tile, bin) on the bin's cursor to reserve a run of a
// temporary, the tile's (key, entry) pairs sorted by bin in shared memory, then copied out in order,
// so that consecutive threads write consecutive places of a run. The ones go straight to their
// bucket, as in msm_scatter.
// The second pass (msm_place), per segment of PLACE_PAIRS consecutive pairs (which, the temporary
// being in bin order, name the buckets of a few neighbouring bins): a histogram of the segment over
// its buckets in shared memory, one global atomic per (segment, bucket) to reserve a run of the
// bucket's entries, the entries sorted by bucket in shared memory and copied out in order. A segment
// spread over more buckets than PLACE_KEYS (sparse scalars, very wide bins) places each entry by its
// own atomic instead.
constexpr uint32_t STAGE_THREADS = 256;
constexpr uint32_t STAGE_BINS = 1024, STAGE_PAIRS = 8192, STAGE_SCALARS_PER_THREAD = 4;
constexpr uint32_t PLACE_PAIRS = 8192, PLACE_KEYS = 4096;

// Exclusive scan of a[0, n) in shared memory by the whole block (STAGE_THREADS threads, n at most
// 16 per thread); returns the total. Starts and ends with a barrier.
__device__ uint32_t block_exclusive_scan(uint32_t* a, uint32_t n, uint32_t* warp_sums) {
    __syncthreads();
    const uint32_t per = (n + STAGE_THREADS - 1) / STAGE_THREADS;
    const uint32_t lo = min(n, threadIdx.x * per), hi = min(n, lo + per);
    uint32_t own = 0;
    for (uint32_t k = lo; k < hi; k++) own += a[k];
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    uint32_t incl = own;
#pragma unroll
    for (uint32_t d = 1; d < 32; d <<= 1) {
        const uint32_t v = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += v;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    uint32_t before = 0, total = 0;
    for (uint32_t w = 0; w < STAGE_THREADS / 32; w++) {
        if (w < warp) before += warp_sums[w];
        total += warp_sums[w];
    }
    uint32_t run = before + incl - own;
    for (uint32_t k = lo; k < hi; k++) {
        const uint32_t v = a[k];
        a[k] = run;
        run += v;
    }
    __syncthreads();
    return total;
}

// cursor[b] = off[key_lo + (b << shift)] - off[key_lo] for each bin b < bins of the part from key_lo,
// and cursor[bins] = off[ones_key] (the ones').
extern "C" __global__ void msm_bin_cursors(const uint32_t* off, uint32_t shift, uint32_t bins, uint32_t key_lo,
                                           uint32_t ones_key, uint32_t* cursor) {
    const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < bins)
        cursor[b] = off[key_lo + (b << shift)] - off[key_lo];
    else if (b == bins)
        cursor[b] = off[ones_key];
}

// Block x takes scalars [x tile, x tile + tile), tile <= STAGE_THREADS * STAGE_SCALARS_PER_THREAD and
// tile times the part's windows <= STAGE_PAIRS (the host's choice); bins <= STAGE_BINS. bin_cursor comes from
// msm_bin_cursors; pairs[p] = (key, entry) for each digit of the part's sets (keys key_lo .. key_hi),
// entries as in msm_scatter; the ones are written to entries directly when `ones` is set (by one part
// of a batch). Dynamic shared memory: STAGE_PAIRS pairs and 2 STAGE_BINS words.
extern "C" __global__ void __launch_bounds__(STAGE_THREADS)
    msm_scatter_bins(const Fr* __restrict__ scalars, const uint32_t* __restrict__ select, uint32_t selected,
                     uint32_t n, uint32_t c, uint32_t windows, uint32_t m, uint32_t shift, uint32_t bins,
                     uint32_t key_lo, uint32_t key_hi, uint32_t ones, uint32_t tile, uint32_t* bin_cursor,
                     uint2* pairs, uint32_t* entries) {
    extern __shared__ uint4 stage_shared[];
    uint2* staged = reinterpret_cast<uint2*>(stage_shared);
    // at: the tile's count per bin, then where its run starts in `staged`, then where it ends;
    // delta: the run's place in `pairs` less its place in `staged`.
    uint32_t* at = reinterpret_cast<uint32_t*>(staged + STAGE_PAIRS);
    uint32_t* delta = at + STAGE_BINS;
    __shared__ uint32_t warp_sums[STAGE_THREADS / 32];
    for (uint32_t b = threadIdx.x; b < bins; b += STAGE_THREADS) at[b] = 0;
    const uint32_t ones_key = ones_key_of(c, windows, m);
    // A key k of the sets is the part's when k - key_lo < span (unsigned).
    const uint32_t span = key_hi - key_lo;
    const uint32_t first = blockIdx.x * tile;
    // The tile's scalars in canonical form, converted once for both passes over their digits.
    Fr s[STAGE_SCALARS_PER_THREAD];
    bool in[STAGE_SCALARS_PER_THREAD];
#pragma unroll
    for (uint32_t k = 0; k < STAGE_SCALARS_PER_THREAD; k++) {
        const uint32_t q = k * STAGE_THREADS + threadIdx.x, i = first + q;
        in[k] = q < tile && i < n;
        if (in[k]) s[k] = scalar_of(scalars, select, selected, i).from_mont();
    }
    __syncthreads();
#pragma unroll
    for (uint32_t k = 0; k < STAGE_SCALARS_PER_THREAD; k++)
        if (in[k])
            for_each_digit_of(s[k], first + k * STAGE_THREADS + threadIdx.x, c, windows, m,
                              [&](uint32_t key, uint32_t, bool) {
                                  if (key != ones_key && key - key_lo < span) atomicAdd(&at[(key - key_lo) >> shift], 1u);
                              });
    __syncthreads();
    for (uint32_t b = threadIdx.x; b < bins; b += STAGE_THREADS)
        if (at[b] != 0) delta[b] = atomicAdd(&bin_cursor[b], at[b]);
    const uint32_t total = block_exclusive_scan(at, bins, warp_sums);
    for (uint32_t b = threadIdx.x; b < bins; b += STAGE_THREADS) delta[b] -= at[b];
    __syncthreads();
    const uint32_t lane = threadIdx.x & 31;
#pragma unroll
    for (uint32_t k = 0; k < STAGE_SCALARS_PER_THREAD; k++) {
        const uint32_t i = first + k * STAGE_THREADS + threadIdx.x;
        bool one = false;
        if (in[k])
            for_each_digit_of(s[k], i, c, windows, m, [&](uint32_t key, uint32_t index, bool neg) {
                if (key == ones_key)
                    one = ones != 0;
                else if (key - key_lo < span)
                    staged[atomicAdd(&at[(key - key_lo) >> shift], 1u)] =
                        make_uint2(key, index | ((uint32_t)neg << 31));
            });
        const uint32_t lanes = __ballot_sync(0xffffffffu, one);
        if (lanes == 0) continue;
        const uint32_t leader = __ffs(lanes) - 1;
        uint32_t base = 0;
        if (lane == leader) base = atomicAdd(&bin_cursor[bins], __popc(lanes));
        base = __shfl_sync(0xffffffffu, base, leader);
        if (one) entries[base + __popc(lanes & ((1u << lane) - 1))] = i * m;
    }
    __syncthreads();
    for (uint32_t j = threadIdx.x; j < total; j += STAGE_THREADS) {
        const uint2 p = staged[j];
        pairs[delta[(p.x - key_lo) >> shift] + j] = p;
    }
}

// The part's entries (keys key_lo .. key_hi), off[key_hi] - off[key_lo] of them, from pairs to entries:
// cursor starts as a copy of off. Dynamic shared memory: PLACE_PAIRS words and half-words, and 2
// PLACE_KEYS words.
extern "C" __global__ void __launch_bounds__(STAGE_THREADS)
    msm_place(const uint2* __restrict__ pairs, const uint32_t* __restrict__ off, uint32_t key_lo, uint32_t key_hi,
              uint32_t shift, uint32_t* cursor, uint32_t* entries) {
    extern __shared__ uint4 stage_shared[];
    uint32_t* staged = reinterpret_cast<uint32_t*>(stage_shared);
    uint16_t* staged_key = reinterpret_cast<uint16_t*>(staged + PLACE_PAIRS);
    // at and delta as in msm_scatter_bins, per bucket lo + k.
    uint32_t* at = reinterpret_cast<uint32_t*>(staged_key + PLACE_PAIRS);
    uint32_t* delta = at + PLACE_KEYS;
    __shared__ uint32_t warp_sums[STAGE_THREADS / 32];
    const uint32_t total = off[key_hi] - off[key_lo];
    const uint64_t first64 = (uint64_t)blockIdx.x * PLACE_PAIRS;
    if (first64 >= total) return;
    const uint32_t first = (uint32_t)first64, len = min(PLACE_PAIRS, total - first);
    // The temporary is in bin order: the segment's buckets lie from its first pair's bin to its last's.
    const uint32_t lo = key_lo + (((pairs[first].x - key_lo) >> shift) << shift);
    const uint32_t hi = key_lo + min((((pairs[first + len - 1].x - key_lo) >> shift) + 1) << shift, key_hi - key_lo);
    if (hi - lo > PLACE_KEYS) {
        for (uint32_t j = threadIdx.x; j < len; j += STAGE_THREADS) {
            const uint2 p = pairs[first + j];
            entries[atomicAdd(&cursor[p.x], 1u)] = p.y;
        }
        return;
    }
    const uint32_t span = hi - lo;
    for (uint32_t k = threadIdx.x; k < span; k += STAGE_THREADS) at[k] = 0;
    __syncthreads();
    for (uint32_t j = threadIdx.x; j < len; j += STAGE_THREADS) atomicAdd(&at[pairs[first + j].x - lo], 1u);
    __syncthreads();
    for (uint32_t k = threadIdx.x; k < span; k += STAGE_THREADS)
        if (at[k] != 0) delta[k] = atomicAdd(&cursor[lo + k], at[k]);
    block_exclusive_scan(at, span, warp_sums);
    for (uint32_t k = threadIdx.x; k < span; k += STAGE_THREADS) delta[k] -= at[k];
    __syncthreads();
    for (uint32_t j = threadIdx.x; j < len; j += STAGE_THREADS) {
        const uint2 p = pairs[first + j];
        const uint32_t slot = atomicAdd(&at[p.x - lo], 1u);
        staged[slot] = p.y;
        staged_key[slot] = (uint16_t)(p.x - lo);
    }
    __syncthreads();
    for (uint32_t j = threadIdx.x; j < len; j += STAGE_THREADS) entries[delta[staged_key[j]] + j] = staged[j];
}

// The chunk of bucket entries thread q sums in a round: bucket b is the last with off_next[b] <= q
// (off_next is the scan of ceil(count / L)); returns false past the last chunk.
__device__ __forceinline__ bool find_chunk(uint32_t q, const uint32_t* count, const uint32_t* off,
                                           const uint32_t* off_next, uint32_t buckets, uint32_t L,
                                           uint32_t& begin, uint32_t& end, uint32_t& bucket) {
    const uint32_t last = buckets - 1;
    const uint32_t total = off_next[last] + (count[last] + L - 1) / L;
    if (q >= total) return false;
    const uint32_t lo = bucket_of(q, off_next, buckets);
    bucket = lo;
    begin = off[lo] + (q - off_next[lo]) * L;
    end = min(begin + L, off[lo] + count[lo]);
    return true;
}

// ceil(count / L) per bucket: the next round's counts.
extern "C" __global__ void msm_chunk_counts(const uint32_t* count, uint32_t buckets, uint32_t L, uint32_t* next) {
    const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < buckets) next[b] = (count[b] + L - 1) / L;
}

// Where the first round's partials of each bucket lie: bucket b's entries [off, off + count) meet the
// pieces first = off / L .. last = (off + count - 1) / L, whose partials for b sit at slots first + b ..
// last + b (a thread's buckets are consecutive, so slot thread + bucket is unique per pair).
extern "C" __global__ void msm_flat_counts(const uint32_t* count, const uint32_t* off, uint32_t buckets,
                                           uint32_t pieces, uint32_t* next_count, uint32_t* next_off) {
    const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= buckets) return;
    uint32_t total;
    const uint32_t L = first_piece(count, off, buckets, pieces, total);
    const uint32_t first = off[b] / L;
    next_count[b] = count[b] ? (off[b] + count[b] - 1) / L - first + 1 : 0;
    next_off[b] = first + b;
}

// First round: thread t sums entries [t L, t L + L) of the first `buckets` buckets' sorted (index,
// sign) entries, as affine bases added into XYZZ accumulators, and writes one partial per bucket it
// touches to out[t + bucket].
// With PREFETCH the next entry's base is loaded while the current one is added (G1: 6% faster at
// 2^24, for 24 more registers; G2's points do not fit).
template <class F, bool PREFETCH>
__device__ __forceinline__ void sum_affine(const Affine<F>* bases, const uint32_t* entries, const uint32_t* count,
                                           const uint32_t* off, uint32_t buckets, uint32_t pieces, Xyzz<F>* out) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t total;
    const uint32_t L = first_piece(count, off, buckets, pieces, total);
    const uint64_t first = (uint64_t)t * L;
    if (first >= total) return;
    const uint32_t begin = (uint32_t)first, end = min(begin + L, total);
    uint32_t b = bucket_of(begin, off, buckets);
    uint32_t bucket_end = off[b] + count[b];
    Xyzz<F> acc = Xyzz<F>::identity();
    uint32_t entry = entries[begin];
    Affine<F> p;
    if (PREFETCH) p = bases[entry & 0x7fffffffu];
    for (uint32_t e = begin; e < end; e++) {
        if (e == bucket_end) {  // the next nonempty bucket starts here
            out[t + b] = acc;
            acc = Xyzz<F>::identity();
            do {
                b++;
                bucket_end = off[b] + count[b];
            } while (bucket_end == e);
        }
        const uint32_t cur = entry;
        Affine<F> q;
        if (PREFETCH) {
            q = p;
            if (e + 1 < end) {
                entry = entries[e + 1];
                p = bases[entry & 0x7fffffffu];
            }
        } else {
            q = bases[cur & 0x7fffffffu];
            if (e + 1 < end) entry = entries[e + 1];
        }
        acc = acc.add_affine(cur >> 31 ? q.neg() : q);
    }
    out[t + b] = acc;
}

// Later rounds: sums of the previous round's partial sums.
template <class F>
__device__ __forceinline__ void sum_xyzz(const Xyzz<F>* in, const uint32_t* count, const uint32_t* off,
                                         const uint32_t* off_next, uint32_t buckets, uint32_t L, Xyzz<F>* out) {
    const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t begin, end, bucket;
    if (!find_chunk(q, count, off, off_next, buckets, L, begin, end, bucket)) return;
    Xyzz<F> acc = in[begin];
    for (uint32_t e = begin + 1; e < end; e++) acc = acc + in[e];
    out[q] = acc;
}

// The first later round after the batched one, whose partials are affine: mixed additions (8
// multiplications and 2 squarings instead of 12 and 2), from half the bytes.
template <class F>
__device__ __forceinline__ void sum_partials(const Affine<F>* in, const uint32_t* count, const uint32_t* off,
                                             const uint32_t* off_next, uint32_t buckets, uint32_t L, Xyzz<F>* out) {
    const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t begin, end, bucket;
    if (!find_chunk(q, count, off, off_next, buckets, L, begin, end, bucket)) return;
    Xyzz<F> acc = Xyzz<F>::from_affine(in[begin]);
    for (uint32_t e = begin + 1; e < end; e++) acc = acc.add_affine(in[e]);
    out[q] = acc;
}

// Per bucket set w (`windows` of them: a window's, or m windows' with a table) and segment s of `per`
// buckets (digits lo = s * per + 1 .. lo + per - 1):
// out[w * segments + s] = sum_j j * B_j over the segment, by running sums from the top digit down
// (run = sum of B_j above, acc = sum of run) plus (lo - 1) * run. Bucket sums are data[off[b]] when
// count[b] is 1 (after the last round) and the identity when it is 0.
template <class F>
__device__ __forceinline__ void window_segments(const Xyzz<F>* data, const uint32_t* count, const uint32_t* off,
                                                uint32_t windows, uint32_t half, uint32_t segments, Xyzz<F>* out) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= windows * segments) return;
    const uint32_t w = t / segments, s = t % segments;
    const uint32_t per = half / segments;
    const uint32_t lo = s * per + 1;
    Xyzz<F> run = Xyzz<F>::identity(), acc = Xyzz<F>::identity();
    for (uint32_t j = lo + per - 1; j >= lo; j--) {
        const uint32_t b = w * half + j - 1;
        if (count[b]) run = run + data[off[b]];
        acc = acc + run;
    }
    out[t] = acc + run.mul_small(lo - 1);
}

// out[g] = in[g * per] + ... + in[g * per + per - 1] for g < groups, by REDUCE_THREADS threads per
// group (blockIdx.x = g) and a tree in shared memory.
constexpr uint32_t REDUCE_THREADS = 64;

template <class F>
__device__ __forceinline__ void reduce(const Xyzz<F>* in, uint32_t per, Xyzz<F>* out) {
    __shared__ Xyzz<F> lane_sums[REDUCE_THREADS];
    const uint32_t g = blockIdx.x, t = threadIdx.x;
    Xyzz<F> acc = Xyzz<F>::identity();
    for (uint32_t s = t; s < per; s += REDUCE_THREADS) acc = acc + in[(uint64_t)g * per + s];
    lane_sums[t] = acc;
    __syncthreads();
    for (uint32_t d = REDUCE_THREADS / 2; d > 0; d >>= 1) {
        if (t < d) lane_sums[t] = lane_sums[t] + lane_sums[t + d];
        __syncthreads();
    }
    if (t == 0) out[g] = lane_sums[0];
}

// The ones added apart: bucket `key` lists the points whose scalar is 1 (no digits, no signs). Thread t of
// the grid adds entries t, t + threads, t + 2 threads, ... of it as affine points into one XYZZ accumulator
// and writes it to out[t]; `reduce` then adds the partials. The stride keeps neighbouring threads on
// neighbouring entries, and every thread gets the same share however many ones there are (the host launches
// the grid without knowing).
template <class F>
__device__ __forceinline__ void sum_ones(const Affine<F>* bases, const uint32_t* entries, const uint32_t* count,
                                         const uint32_t* off, uint32_t key, Xyzz<F>* out) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x, threads = gridDim.x * blockDim.x;
    const uint32_t begin = off[key], m = count[key];
    Xyzz<F> acc = Xyzz<F>::identity();
    for (uint32_t i = t; i < m; i += threads) acc = acc.add_affine(bases[entries[begin + i] & 0x7fffffffu]);
    out[t] = acc;
}

// out[0] = bucket `key`'s sum once the later rounds have left it at most one partial: data[off[key]],
// or the identity when it has none. Takes the ones' sum out of the buckets when the first round added
// them as one more bucket. One thread.
template <class F>
__device__ __forceinline__ void bucket_sum(const Xyzz<F>* data, const uint32_t* count, const uint32_t* off,
                                           uint32_t key, Xyzz<F>* out) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    *out = count[key] ? data[off[key]] : Xyzz<F>::identity();
}

// The table of m multiples per point: out[i m + j] = 2^(c j) P_i (P_i = bases[i * stride], so a table
// can be rebuilt from an older one's first column), by c doublings per step in XYZZ and
// one inversion per stored multiple (x = X / ZZ and y = Y / ZZZ with 1/ZZ = (ZZ / ZZZ)^2, as ZZ^3 =
// ZZZ^2). The identity stays the identity (x = y = 0). Built once per key, so the inversions'
// exponentiations are affordable.
template <class F>
__device__ __forceinline__ void table(const Affine<F>* bases, uint32_t stride, uint32_t n, uint32_t c, uint32_t m,
                                      Affine<F>* out) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Affine<F> p = bases[(uint64_t)i * stride];
    Affine<F>* row = out + (uint64_t)i * m;
    row[0] = p;
    Xyzz<F> acc = Xyzz<F>::from_affine(p);
    for (uint32_t j = 1; j < m; j++) {
        for (uint32_t d = 0; d < c; d++) acc = acc.dbl();
        if (acc.is_identity()) {
            row[j] = Affine<F>{F::zero(), F::zero()};
            continue;
        }
        const F inv = acc.ZZZ.inverse_euclid();
        const F t = acc.ZZ * inv;
        row[j] = Affine<F>{acc.X * t.sqr(), acc.Y * inv};
    }
}

// The first summing round is the MSM's hot loop: its register budget is set so that BLOCKS blocks of
// SUM_THREADS fit on a multiprocessor (G1: three, which leaves room for the prefetched point without
// spills; G2: two, as its larger points would spill at more).
constexpr int SUM_THREADS = 128;

#define MSM_SUM_AFFINE(G, F, BLOCKS, PREFETCH)                                                                \
    extern "C" __global__ void __launch_bounds__(SUM_THREADS, BLOCKS)                                        \
        G##_sum_affine(const Affine<F>* bases, const uint32_t* entries, const uint32_t* count,                \
                       const uint32_t* off, uint32_t buckets, uint32_t pieces, Xyzz<F>* out) {                \
        sum_affine<F, PREFETCH>(bases, entries, count, off, buckets, pieces, out);                            \
    }                                                                                                         \
    extern "C" __global__ void __launch_bounds__(SUM_THREADS, BLOCKS)                                        \
        G##_sum_ones(const Affine<F>* bases, const uint32_t* entries, const uint32_t* count,                  \
                     const uint32_t* off, uint32_t key, Xyzz<F>* out) {                                       \
        sum_ones(bases, entries, count, off, key, out);                                                       \
    }

#define MSM_KERNELS(G, F)                                                                                     \
    extern "C" __global__ void G##_sum_xyzz(const Xyzz<F>* in, const uint32_t* count, const uint32_t* off,   \
                                            const uint32_t* off_next, uint32_t buckets, uint32_t L,            \
                                            Xyzz<F>* out) {                                                  \
        sum_xyzz(in, count, off, off_next, buckets, L, out);                                                  \
    }                                                                                                         \
    extern "C" __global__ void G##_sum_partials(const Affine<F>* in, const uint32_t* count, const uint32_t* off, \
                                                const uint32_t* off_next, uint32_t buckets, uint32_t L,        \
                                                Xyzz<F>* out) {                                              \
        sum_partials(in, count, off, off_next, buckets, L, out);                                              \
    }                                                                                                         \
    extern "C" __global__ void G##_window_segments(const Xyzz<F>* data, const uint32_t* count,               \
                                                   const uint32_t* off, uint32_t windows, uint32_t half,      \
                                                   uint32_t segments, Xyzz<F>* out) {                         \
        window_segments(data, count, off, windows, half, segments, out);                                      \
    }                                                                                                         \
    extern "C" __global__ void G##_bucket_sum(const Xyzz<F>* data, const uint32_t* count, const uint32_t* off, \
                                              uint32_t key, Xyzz<F>* out) {                                   \
        bucket_sum(data, count, off, key, out);                                                               \
    }                                                                                                         \
    extern "C" __global__ void G##_reduce(const Xyzz<F>* in, uint32_t per, Xyzz<F>* out) {                   \
        reduce(in, per, out);                                                                                 \
    }                                                                                                         \
    extern "C" __global__ void G##_table(const Affine<F>* bases, uint32_t stride, uint32_t n, uint32_t c,      \
                                         uint32_t m, Affine<F>* out) {                                        \
        table(bases, stride, n, c, m, out);                                                                   \
    }

MSM_SUM_AFFINE(g1, Fq, 3, true)
MSM_SUM_AFFINE(g2, Fq2, 2, false)

// The first summing round by batched affine additions (msm/batch.cuh): `threads` threads of `k` chains
// each (the pieces are threads * k).
#define MSM_SUM_BATCH(G, F, BLOCKS)                                                                         \
    extern "C" __global__ void __launch_bounds__(SUM_THREADS, BLOCKS)                                        \
        G##_sum_batch(const Affine<F>* bases, const uint32_t* entries, const uint32_t* count,                 \
                      const uint32_t* off, uint32_t buckets, uint32_t threads, uint32_t k, Affine<F>* acc,    \
                      F* prefix, Chain* chains, Affine<F>* out) {                                             \
        const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;                                             \
        if (t < threads)                                                                                      \
            sum_batch<F>(t, threads, k, bases, entries, count, off, buckets, ChainScratch<F>{acc, prefix, chains}, \
                         out);                                                                                \
    }

MSM_SUM_BATCH(g1, Fq, 4)
MSM_SUM_BATCH(g2, Fq2, 2)

// G1's batched first round with its products on the FP64 units (Fq64, field/fp64.cuh): in every warp,
// or with MIXED in the warps mixed_takes_fp64 picks (the others multiply on the integer units, so each
// scheduler keeps both kinds of unit busy). Fq64 holds the same limbs as Fq, so the buffers are the same; the sums are the same bits.
// Three blocks a multiprocessor, not four as g1_sum_batch: the FP64 products hold more registers (at
// four, 128 registers a thread spill some 200 bytes).
constexpr int FP64_BATCH_BLOCKS = 3;

template <bool MIXED>
__device__ __forceinline__ void g1_sum_batch_fp64_units(const Affine<Fq>* bases, const uint32_t* entries,
                                                        const uint32_t* count, const uint32_t* off, uint32_t buckets,
                                                        uint32_t threads, uint32_t k, Affine<Fq>* acc, Fq* prefix,
                                                        Chain* chains, Affine<Fq>* out) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= threads) return;
    if (MIXED && !mixed_takes_fp64()) {
        sum_batch<Fq>(t, threads, k, bases, entries, count, off, buckets, ChainScratch<Fq>{acc, prefix, chains}, out);
    } else {
        using A = Affine<Fq64>;
        sum_batch<Fq64>(t, threads, k, reinterpret_cast<const A*>(bases), entries, count, off, buckets,
                        ChainScratch<Fq64>{reinterpret_cast<A*>(acc), reinterpret_cast<Fq64*>(prefix), chains},
                        reinterpret_cast<A*>(out));
    }
}

extern "C" __global__ void __launch_bounds__(SUM_THREADS, FP64_BATCH_BLOCKS)
    g1_sum_batch_fp64(const Affine<Fq>* bases, const uint32_t* entries, const uint32_t* count, const uint32_t* off,
                      uint32_t buckets, uint32_t threads, uint32_t k, Affine<Fq>* acc, Fq* prefix, Chain* chains,
                      Affine<Fq>* out) {
    g1_sum_batch_fp64_units<false>(bases, entries, count, off, buckets, threads, k, acc, prefix, chains, out);
}
extern "C" __global__ void __launch_bounds__(SUM_THREADS, FP64_BATCH_BLOCKS)
    g1_sum_batch_mixed(const Affine<Fq>* bases, const uint32_t* entries, const uint32_t* count, const uint32_t* off,
                       uint32_t buckets, uint32_t threads, uint32_t k, Affine<Fq>* acc, Fq* prefix, Chain* chains,
                       Affine<Fq>* out) {
    g1_sum_batch_fp64_units<true>(bases, entries, count, off, buckets, threads, k, acc, prefix, chains, out);
}
MSM_KERNELS(g1, Fq)
MSM_KERNELS(g2, Fq2)

// Exclusive scan of n counts, in blocks of SCAN_BLOCK: each block scans its part into out and writes
// its total to sums[block]; scan_add then adds the scanned block totals back.
constexpr uint32_t SCAN_THREADS = 256, SCAN_PER_THREAD = 4, SCAN_BLOCK = SCAN_THREADS * SCAN_PER_THREAD;

extern "C" __global__ void scan_blocks(const uint32_t* in, uint32_t* out, uint32_t* sums, uint32_t n) {
    __shared__ uint32_t part[SCAN_THREADS];
    const uint32_t base = blockIdx.x * SCAN_BLOCK + threadIdx.x * SCAN_PER_THREAD;
    uint32_t v[SCAN_PER_THREAD], total = 0;
#pragma unroll
    for (uint32_t k = 0; k < SCAN_PER_THREAD; k++) {
        v[k] = base + k < n ? in[base + k] : 0;
        total += v[k];
    }
    part[threadIdx.x] = total;
    __syncthreads();
    // Hillis-Steele inclusive scan of the per-thread totals.
    for (uint32_t d = 1; d < SCAN_THREADS; d <<= 1) {
        const uint32_t add = threadIdx.x >= d ? part[threadIdx.x - d] : 0;
        __syncthreads();
        part[threadIdx.x] += add;
        __syncthreads();
    }
    uint32_t run = part[threadIdx.x] - total;
#pragma unroll
    for (uint32_t k = 0; k < SCAN_PER_THREAD; k++) {
        if (base + k < n) out[base + k] = run;
        run += v[k];
    }
    if (threadIdx.x == SCAN_THREADS - 1) sums[blockIdx.x] = part[threadIdx.x];
}

extern "C" __global__ void scan_add(uint32_t* out, const uint32_t* scanned_sums, uint32_t n) {
    const uint32_t i = blockIdx.x * SCAN_BLOCK + threadIdx.x;
    const uint32_t add = scanned_sums[blockIdx.x];
#pragma unroll
    for (uint32_t k = 0; k < SCAN_PER_THREAD; k++) {
        const uint32_t j = i + k * SCAN_THREADS;
        if (j < n) out[j] += add;
    }
}
