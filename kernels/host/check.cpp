// cuzk kernels on the host: the field and curve code of kernels/ compiled by a plain C++ compiler, with
// field/ptx.cuh emulating the PTX carry chains. crates/cuzk-cuda/tests/host_kernels.rs builds this,
// feeds it random inputs and compares every output with arkworks, so the arithmetic the GPU runs is
// checked on machines without a GPU.
//
// Protocol (little-endian 32-bit words on stdin and stdout): the word n, then five sections of n input
// pairs each; for every pair the outputs listed below, in order.
//   Fr, Fq, Fq2 pairs (a, b): a + b, a - b, a * b, a^2, 1/a (variable time; 0 for 0), and for Fr and
//   Fq mul_fp64(a, b) (field/fp64.cuh), a.mul_kara(b), a.mul_shoup(w, wq) with w = b's canonical
//   value and wq its Shoup quotient, and wq's limbs (field/mont.cuh); then the lazy operations on
//   representatives below 2p, with a' = a + p and b' = b + p (limbs, not reduced): a'.add_lazy(b'),
//   a'.sub_lazy(b), a.sub_lazy(b'), a'.mul_shoup_lazy(w, wq), as they come (below 2p, not reduced).
//   G1, G2 pairs of affine points (p, q) and a word k: in XYZZ (X, Y, ZZ, ZZZ): p + q (mixed),
//   2p + q (mixed, ZZ != 1), 2p + 2q (full), 4p (doubling), k * p.
// Then the MSM's batched affine round over G1 (msm/batch.cuh, BATCH_CHAINS chains per thread): the word
// `cases`, and per case the words threads, points, buckets, then the points (affine), each bucket's
// entry count and the entries (point index | sign << 31, sorted by bucket). Out: each bucket's sum (the
// round's partials added as the later rounds do), in XYZZ, then the same again with the round's
// products as on the FP64 units (Fq64).
// Then the word m and m Fq elements: each one's inverse_vartime and inverse_euclid (the inversions'
// awkward inputs at volume: small and near-p values, powers of two, in both canonical and Montgomery
// limbs).
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include "curve/xyzz.cuh"
#include "msm/batch.cuh"

using namespace cuzk;

template <class T>
static bool read(T& v) {
    return std::fread(&v, sizeof(T), 1, stdin) == 1;
}

template <class T>
static void write(const T& v) {
    std::fwrite(&v, sizeof(T), 1, stdout);
}

// a + p in limbs (below 2p for a below p): the other representative the lazy operations take.
template <class F>
static F plus_p(const F& a) {
    F r;
    ptx::add_cc(r.v[0], a.v[0], F::Params::mod(0));
    for (int i = 1; i < F::N - 1; i++) ptx::addc_cc(r.v[i], a.v[i], F::Params::mod(i));
    ptx::addc(r.v[F::N - 1], a.v[F::N - 1], F::Params::mod(F::N - 1));
    return r;
}

template <class F>
static bool fields(uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        F a, b;
        if (!read(a) || !read(b)) return false;
        write(a + b);
        write(a - b);
        write(a * b);
        write(a.sqr());
        write(a.inverse_vartime());
        if constexpr (!std::is_same_v<F, Fq2>) {
            write(mul_fp64(a, b));
            write(a.mul_kara(b));
            // Shoup's product by b's canonical value (so a * b in Montgomery form), and its quotient.
            const F w = b.from_mont(), wq = w.shoup_quotient();
            write(a.mul_shoup(w, wq));
            write(wq);
            const F ap = plus_p(a), bp = plus_p(b);
            write(ap.add_lazy(bp));
            write(ap.sub_lazy(b));
            write(a.sub_lazy(bp));
            write(ap.mul_shoup_lazy(w, wq));
        }
    }
    return true;
}

template <class F>
static bool curve(uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        Affine<F> p, q;
        uint32_t k;
        if (!read(p) || !read(q) || !read(k)) return false;
        const Xyzz<F> p1 = Xyzz<F>::from_affine(p), q1 = Xyzz<F>::from_affine(q);
        const Xyzz<F> p2 = Xyzz<F>::dbl_affine(p);
        write(p1.add_affine(q));
        write(p2.add_affine(q));
        write(p2 + q1.dbl());
        write(p2.dbl());
        write(p1.mul_small(k));
    }
    return true;
}

constexpr uint32_t BATCH_CHAINS = 4;

// The round over field F (Fq, or Fq64 whose products run as on the FP64 units), then each bucket's sum.
template <class F>
static void batch_sums(uint32_t threads, uint32_t buckets, const std::vector<G1Affine>& points,
                       const std::vector<uint32_t>& entries, const std::vector<uint32_t>& count,
                       const std::vector<uint32_t>& off) {
    const uint32_t pieces = threads * BATCH_CHAINS;
    std::vector<Affine<F>> bases(points.size());
    std::memcpy(bases.data(), points.data(), points.size() * sizeof(G1Affine));
    std::vector<Affine<F>> acc(pieces);
    std::vector<F> prefix(pieces);
    std::vector<Chain> chains(pieces);
    std::vector<Affine<F>> out(pieces + buckets, Affine<F>{F::zero(), F::zero()});
    for (uint32_t t = 0; t < threads; t++)
        sum_batch<F>(t, threads, BATCH_CHAINS, bases.data(), entries.data(), count.data(), off.data(), buckets,
                     ChainScratch<F>{acc.data(), prefix.data(), chains.data()}, out.data());
    uint32_t ignored;
    const uint32_t L = first_piece(count.data(), off.data(), buckets, pieces, ignored);
    for (uint32_t b = 0; b < buckets; b++) {
        Xyzz<F> sum = Xyzz<F>::identity();
        if (count[b] > 0)
            for (uint32_t q = off[b] / L; q <= (off[b] + count[b] - 1) / L; q++) sum = sum.add_affine(out[q + b]);
        write(sum);
    }
}

static bool batch_round() {
    uint32_t cases;
    if (!read(cases)) return false;
    for (uint32_t c = 0; c < cases; c++) {
        uint32_t threads, points, buckets;
        if (!read(threads) || !read(points) || !read(buckets) || threads == 0 || buckets == 0) return false;
        std::vector<G1Affine> bases(points);
        for (auto& p : bases)
            if (!read(p)) return false;
        std::vector<uint32_t> count(buckets), off(buckets);
        uint32_t total = 0;
        for (uint32_t b = 0; b < buckets; b++) {
            if (!read(count[b])) return false;
            off[b] = total;
            total += count[b];
        }
        std::vector<uint32_t> entries(total);
        for (auto& e : entries)
            if (!read(e) || (e & 0x7fffffffu) >= points) return false;
        batch_sums<Fq>(threads, buckets, bases, entries, count, off);
        batch_sums<Fq64>(threads, buckets, bases, entries, count, off);
    }
    return true;
}

static bool inverses() {
    uint32_t m;
    if (!read(m)) return false;
    for (uint32_t i = 0; i < m; i++) {
        Fq a;
        if (!read(a)) return false;
        write(a.inverse_vartime());
        write(a.inverse_euclid());
    }
    return true;
}

int main() {
    uint32_t n;
    if (!read(n)) return 2;
    const bool ok = fields<Fr>(n) && fields<Fq>(n) && fields<Fq2>(n) && curve<Fq>(n) && curve<Fq2>(n) &&
                    batch_round() && inverses();
    return ok ? 0 : 3;
}
