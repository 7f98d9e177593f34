// cuzk kernels: a partition's witness evaluated on the device. The assignment z arrives compact (the
// bitmaps of its zeros and ones, the other values packed in order, and per 64-entry word the number of
// packed values before it) and is expanded here; a, b, c are then the products of the key's recorded
// R1CS matrices (compressed sparse rows, coefficients by index into one table) with z, each row checked
// for a * b = c on the way: the long rows first, a warp each, then the others, a thread each.
// crates/cuzk-cuda/src/r1cs.rs lays the buffers out.
#include "field/fields.cuh"

using namespace cuzk;

// z[i] for i < n from its compact form: words holds the zero bitmap, then the one bitmap, then the
// ranks, each `words_len` 64-bit words long.
extern "C" __global__ void r1cs_expand(Fr* z, const uint64_t* words, uint32_t words_len, const Fr* packed,
                                       uint32_t n) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const uint32_t w = i >> 6, b = i & 63;
    const uint64_t zero = words[w], one = words[words_len + w], bit = 1ull << b;
    if (zero & bit) {
        z[i] = Fr::zero();
    } else if (one & bit) {
        z[i] = Fr::one();
    } else {
        const uint64_t before = ~(zero | one) & (bit - 1);
        z[i] = packed[words[2 * words_len + w] + __popcll(before)];
    }
}

// One matrix in compressed sparse rows: row r holds entries starts[r] .. starts[r + 1], each a
// variable and an index into the coefficient table (index 0 is 1, added without a multiplication).
struct Csr {
    const uint32_t* starts;
    const uint32_t* columns;
    const uint32_t* coefficients;

    // The sum of entries k, k + step, ... below end, each its coefficient times its variable's value.
    __device__ __forceinline__ Fr sum(const Fr* table, const Fr* z, uint32_t k, uint32_t end,
                                      uint32_t step) const {
        Fr acc = Fr::zero();
        for (; k < end; k += step) {
            const Fr v = z[columns[k]];
            const uint32_t c = coefficients[k];
            acc = acc + (c == 0 ? v : v * table[c]);
        }
        return acc;
    }

    // Row `row`'s product with z; a row of more than `long_row` entries is read from `done`, where
    // r1cs_long_rows put it.
    __device__ __forceinline__ Fr row(const Fr* table, const Fr* z, uint32_t row, uint32_t long_row,
                                      const Fr* done) const {
        const uint32_t start = starts[row], end = starts[row + 1];
        if (end - start > long_row) return done[row];
        return sum(table, z, start, end, 1);
    }
};

// The rows listed in rows[0 .. count) of one matrix, one warp each: the lanes take every 32nd entry,
// then add their sums across the warp, and lane 0 writes the row's product into out[row]. One thread
// a row would leave the other 31 lanes of its warp idle while it works through a long row (SHA-256's
// additions give rows of 64 to 256 entries among rows of one or two); r1cs_evaluate then reads these
// rows from out. Blocks are whole warps.
extern "C" __global__ void r1cs_long_rows(Fr* out, const uint32_t* rows, uint32_t count,
                                          const uint32_t* starts, const uint32_t* columns,
                                          const uint32_t* coefficients, const Fr* table, const Fr* z) {
    // Counted in warps, so a launch of up to 2^32 - 1 rows indexes them without overflow.
    const uint32_t warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp >= count) return;  // the warp's lanes leave together
    const Csr m{starts, columns, coefficients};
    const uint32_t row = rows[warp];
    Fr acc = m.sum(table, z, starts[row] + lane, starts[row + 1], 32);
    for (uint32_t d = 16; d > 0; d /= 2) {
        Fr other;
        for (int l = 0; l < Fr::N; l++) other.v[l] = __shfl_xor_sync(0xffffffffu, acc.v[l], d);
        acc = acc + other;
    }
    if (lane == 0) out[row] = acc;
}

// Row i of the QAP's evaluations for i < n (the domain size): for a constraint, A·z, B·z and C·z (rows
// of more than long_row entries already in a, b, c, from r1cs_long_rows), and when a * b != c,
// constraints - i raised into *bad (which starts at 0, so it ends as constraints minus the lowest
// unsatisfied row, or 0); for the instance rows that follow, z[j] in a and zeros in b and c
// (ark-groth16's input-consistency rows); zeros after them.
extern "C" __global__ void r1cs_evaluate(Fr* a, Fr* b, Fr* c, const Fr* z, const Fr* table,
                                         const uint32_t* a_starts, const uint32_t* a_columns,
                                         const uint32_t* a_coefficients, const uint32_t* b_starts,
                                         const uint32_t* b_columns, const uint32_t* b_coefficients,
                                         const uint32_t* c_starts, const uint32_t* c_columns,
                                         const uint32_t* c_coefficients, uint32_t long_row,
                                         uint32_t constraints, uint32_t instance, uint32_t n,
                                         uint32_t* bad) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (i < constraints) {
        const Fr va = Csr{a_starts, a_columns, a_coefficients}.row(table, z, i, long_row, a);
        const Fr vb = Csr{b_starts, b_columns, b_coefficients}.row(table, z, i, long_row, b);
        const Fr vc = Csr{c_starts, c_columns, c_coefficients}.row(table, z, i, long_row, c);
        a[i] = va;
        b[i] = vb;
        c[i] = vc;
        if (!(va * vb == vc)) atomicMax(bad, constraints - i);
    } else if (i - constraints < instance) {
        a[i] = z[i - constraints];
        b[i] = Fr::zero();
        c[i] = Fr::zero();
    } else {
        a[i] = Fr::zero();
        b[i] = Fr::zero();
        c[i] = Fr::zero();
    }
}
