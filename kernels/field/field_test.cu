// cuzk kernels: field operations in bulk, for differential tests against arkworks and throughput
// measurements. Element i of the output holds op(a[i], b[i]) for each op, in the order of the enum.
#include "field/fields.cuh"

using namespace cuzk;

// Outputs per input pair, in this order: add, sub, mul, sqr, neg, inverse (of a, Fermat's),
// to_mont(a) (a read as a canonical value), from_mont(a), inverse_vartime(a), inverse_euclid(a),
// mul_fp64(a, b).
constexpr int OPS = 11;

template <class F>
__device__ __forceinline__ void all_ops(const F* a, const F* b, F* out, uint32_t n) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const F x = a[i], y = b[i];
    F* o = out + (size_t)i * OPS;
    o[0] = x + y;
    o[1] = x - y;
    o[2] = x * y;
    o[3] = x.sqr();
    o[4] = -x;
    o[5] = x.inverse();
    o[6] = F::to_mont(x);
    o[7] = x.from_mont();
    o[8] = x.inverse_vartime();
    o[9] = x.inverse_euclid();
    o[10] = mul_fp64(x, y);
}

extern "C" __global__ void fr_ops(const Fr* a, const Fr* b, Fr* out, uint32_t n) { all_ops(a, b, out, n); }
extern "C" __global__ void fq_ops(const Fq* a, const Fq* b, Fq* out, uint32_t n) { all_ops(a, b, out, n); }

// Fq2: add, sub, mul, sqr, neg, inverse, inverse_vartime, inverse_euclid.
extern "C" __global__ void fq2_ops(const Fq2* a, const Fq2* b, Fq2* out, uint32_t n) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Fq2 x = a[i], y = b[i];
    Fq2* o = out + (size_t)i * 8;
    o[0] = x + y;
    o[1] = x - y;
    o[2] = x * y;
    o[3] = x.sqr();
    o[4] = -x;
    o[5] = x.inverse();
    o[6] = x.inverse_vartime();
    o[7] = x.inverse_euclid();
}

// Throughput: each thread runs two independent chains of `iters` dependent multiplications (so two
// multiplications are in flight), 2 * iters in all, and writes its result so nothing is optimised away.
// The products are operator*'s, or with KARA mul_kara's (Karatsuba's product and a separate
// reduction, field/mont.cuh).
template <bool KARA, class F>
__device__ __forceinline__ void mul_chain(const F* a, F* out, uint32_t n, uint32_t iters) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    F x = a[i], y = a[(i + 1) % n], z = a[(i + 2) % n];
    for (uint32_t k = 0; k < iters; k++) {
        if constexpr (KARA) {
            x = x.mul_kara(y);
            z = z.mul_kara(y);
        } else {
            x = x * y;
            z = z * y;
        }
    }
    out[i] = x + z;
}

extern "C" __global__ void fr_mul_bench(const Fr* a, Fr* out, uint32_t n, uint32_t iters) {
    mul_chain<false>(a, out, n, iters);
}
extern "C" __global__ void fq_mul_bench(const Fq* a, Fq* out, uint32_t n, uint32_t iters) {
    mul_chain<false>(a, out, n, iters);
}
extern "C" __global__ void fr_mul_kara_bench(const Fr* a, Fr* out, uint32_t n, uint32_t iters) {
    mul_chain<true>(a, out, n, iters);
}
extern "C" __global__ void fq_mul_kara_bench(const Fq* a, Fq* out, uint32_t n, uint32_t iters) {
    mul_chain<true>(a, out, n, iters);
}

// Shoup's product (mul_shoup) in the same chains: the factor a[(i + 1) % n] as its canonical value in
// wt[(i + 1) % n] and its quotient in wt[n + (i + 1) % n] (ntt_shoup_twiddles' layout, built before),
// so the chains compute what fr_mul_bench's do.
extern "C" __global__ void fr_mul_shoup_bench(const Fr* a, const Fr* wt, Fr* out, uint32_t n, uint32_t iters) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr x = a[i], z = a[(i + 2) % n];
    const Fr w = wt[(i + 1) % n], wq = wt[n + (i + 1) % n];
    for (uint32_t k = 0; k < iters; k++) {
        x = x.mul_shoup(w, wq);
        z = z.mul_shoup(w, wq);
    }
    out[i] = x + z;
}

// Two independent chains a thread, x and z <- op(x, y) and op(z, y) `iters` times with y = a[i + 1]
// fixed, the result written so that nothing is optimised away.
template <class F, class Op>
__device__ __forceinline__ void op_chains(const F* a, F* out, uint32_t n, uint32_t iters, Op op) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    F x = a[i], z = a[(i + 2) % n];
    const F y = a[(i + 1) % n];
    for (uint32_t k = 0; k < iters; k++) {
        x = op(x, y);
        z = op(z, y);
    }
    out[i] = x + z;
}

// Squaring chains: each thread squares two independent values `iters` times, by sqr_int's rows when
// `rows` is 1 (Fq's sqr()), by operator*'s product of the value with itself when 0; the same outputs.
extern "C" __global__ void fq_sqr_bench(const Fq* a, Fq* out, uint32_t n, uint32_t iters, uint32_t rows) {
    if (rows != 0) {
        op_chains(a, out, n, iters, [](const Fq& x, const Fq&) { return x.sqr_int(); });
    } else {
        op_chains(a, out, n, iters, [](const Fq& x, const Fq&) { return x.mul_int(x); });
    }
}

// Fq2 products in chains as fq_sqr_bench's: each thread multiplies two values by a third `iters` times,
// by fq2_mul (each coefficient reduced once) when `wide` is 1, or when 0 by Karatsuba over three
// reduced Fq products (the form fq2_mul had before); the same outputs.
__device__ __noinline__ Fq2 fq2_mul_reduced(Fq2 a, Fq2 b) {
    const Fq v0 = a.c0 * b.c0, v1 = a.c1 * b.c1;
    return {v0 - v1, (a.c0 + a.c1) * (b.c0 + b.c1) - v0 - v1};
}

extern "C" __global__ void fq2_mul_bench(const Fq2* a, Fq2* out, uint32_t n, uint32_t iters, uint32_t wide) {
    if (wide != 0) {
        op_chains(a, out, n, iters, [](const Fq2& x, const Fq2& y) { return x * y; });
    } else {
        op_chains(a, out, n, iters, [](const Fq2& x, const Fq2& y) { return fq2_mul_reduced(x, y); });
    }
}

// The same chains on `units` (MulUnits): 0 the integer units (operator*), 1 the FP64 units (mul_fp64),
// 2 both, warp by warp (mixed_takes_fp64), so that each scheduler keeps both kinds busy.
template <class F>
__device__ __forceinline__ void mul_chain_fp64(const F* a, F* out, uint32_t n, uint32_t iters, uint32_t units) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    F x = a[i], y = a[(i + 1) % n], z = a[(i + 2) % n];
    if (units == 0 || (units == 2 && !mixed_takes_fp64())) {
        for (uint32_t k = 0; k < iters; k++) {
            x = x * y;
            z = z * y;
        }
    } else {
        for (uint32_t k = 0; k < iters; k++) {
            x = mul_fp64(x, y);
            z = mul_fp64(z, y);
        }
    }
    out[i] = x + z;
}

extern "C" __global__ void fr_mul_fp64_bench(const Fr* a, Fr* out, uint32_t n, uint32_t iters, uint32_t units) {
    mul_chain_fp64(a, out, n, iters, units);
}
extern "C" __global__ void fq_mul_fp64_bench(const Fq* a, Fq* out, uint32_t n, uint32_t iters, uint32_t units) {
    mul_chain_fp64(a, out, n, iters, units);
}

// Inversion throughput: each thread runs `iters` dependent inversions, x <- 1/(x + a), by the method
// `kind` selects (0: inverse_vartime, 1: inverse_euclid, 2: Fermat's), and writes its result.
extern "C" __global__ void fq_inv_bench(const Fq* a, Fq* out, uint32_t n, uint32_t iters, uint32_t kind) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Fq c = a[i];
    Fq x = a[(i + 1) % n];
    for (uint32_t k = 0; k < iters; k++) {
        const Fq y = x + c;
        x = kind == 0 ? y.inverse_vartime() : kind == 1 ? y.inverse_euclid() : y.inverse();
    }
    out[i] = x;
}
