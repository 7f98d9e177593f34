// cuzk kernels: radix-2 NTTs over Fr in ark-poly's conventions (natural order in and out), the power
// tables they use, and the elementwise quotient step of the Groth16 witness map.
//
// A forward NTT is an in-place bit reversal (optionally scaling x[i] by g^i first, for a coset) followed
// by log2(n) decimation-in-time stages, run as a few passes of k stages each in shared memory. The
// inverse uses the inverse twiddles and a final scaling by 1/n (times g^-i for a coset).
#include "field/fields.cuh"

using namespace cuzk;

// s^i from a two-level table: lo[j] = s^j for j < 2^lo_bits, hi[j] = s^(j * 2^lo_bits).
__device__ __forceinline__ Fr power(const Fr* lo, const Fr* hi, uint32_t lo_bits, uint32_t i) {
    const uint32_t mask = (1u << lo_bits) - 1;
    return hi[i >> lo_bits] * lo[i & mask];
}

__device__ __forceinline__ uint32_t bit_reverse(uint32_t i, uint32_t log_n) {
    return log_n == 0 ? 0 : __brev(i) >> (32 - log_n);
}

// out[i] = s^i for i < n.
extern "C" __global__ void ntt_fill_powers(Fr* out, const Fr* lo, const Fr* hi, uint32_t lo_bits, uint32_t n) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = power(lo, hi, lo_bits, i);
}

// In-place bit-reversal permutation of x (2^log_n elements). With `scale` set, x[i] is first
// multiplied by s^i (s given by its two-level power table).
extern "C" __global__ void ntt_bit_reverse(Fr* x, uint32_t log_n, const Fr* lo, const Fr* hi, uint32_t lo_bits,
                                           uint32_t scale) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (1u << log_n)) return;
    const uint32_t j = bit_reverse(i, log_n);
    if (j < i) return;
    Fr xi = x[i], xj = x[j];
    if (scale) {
        xi = xi * power(lo, hi, lo_bits, i);
        if (j != i) xj = xj * power(lo, hi, lo_bits, j);
    }
    x[i] = xj;
    x[j] = xi;
}

// Stages s0 .. s0+k-1 of a decimation-in-time NTT on bit-reversed input. Stage s merges blocks of
// 2^s; its twiddle for position p < 2^s is w_(2^(s+1))^p = tw[p << (log_n - 1 - s)], tw[i] = w_n^i.
// Block b owns the 2^k elements base + j * 2^s0 (j < 2^k), which stay together for these k stages;
// it loads them into shared memory, runs the stages there and writes them back.
extern "C" __global__ void ntt_pass(Fr* x, const Fr* tw, uint32_t log_n, uint32_t s0, uint32_t k) {
    extern __shared__ Fr sh[];
    const uint32_t b = blockIdx.x;
    const uint32_t low = b & ((1u << s0) - 1);
    const uint32_t high = b >> s0;
    const size_t base = ((size_t)high << (s0 + k)) + low;
    const uint32_t size = 1u << k;
    for (uint32_t j = threadIdx.x; j < size; j += blockDim.x) sh[j] = x[base + ((size_t)j << s0)];
    __syncthreads();
    for (uint32_t t = 0; t < k; t++) {
        const uint32_t s = s0 + t;
        for (uint32_t p = threadIdx.x; p < size / 2; p += blockDim.x) {
            const uint32_t pos = p & ((1u << t) - 1);
            const uint32_t i0 = ((p >> t) << (t + 1)) + pos;
            const uint32_t i1 = i0 + (1u << t);
            const uint32_t global_pos = (pos << s0) + low;
            const Fr w = tw[(size_t)global_pos << (log_n - 1 - s)];
            const Fr u = sh[i0], v = sh[i1] * w;
            sh[i0] = u + v;
            sh[i1] = u - v;
        }
        __syncthreads();
    }
    for (uint32_t j = threadIdx.x; j < size; j += blockDim.x) x[base + ((size_t)j << s0)] = sh[j];
}

// x[i] *= c (and by s^i when `powers` is set).
extern "C" __global__ void ntt_scale(Fr* x, uint32_t n, Fr c, const Fr* lo, const Fr* hi, uint32_t lo_bits,
                                     uint32_t powers) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr f = c;
    if (powers) f = f * power(lo, hi, lo_bits, i);
    x[i] = x[i] * f;
}

// The witness map's quotient step on the coset: a[i] = (a[i] * b[i] - c[i]) * z_inv.
extern "C" __global__ void quotient(Fr* a, const Fr* b, const Fr* c, Fr z_inv, uint32_t n) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    a[i] = (a[i] * b[i] - c[i]) * z_inv;
}
