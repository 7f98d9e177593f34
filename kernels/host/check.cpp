// cuzk kernels on the host: the field and curve code of kernels/ compiled by a plain C++ compiler, with
// field/ptx.cuh emulating the PTX carry chains. crates/cuzk-cuda/tests/host_kernels.rs builds this,
// feeds it random inputs and compares every output with arkworks, so the arithmetic the GPU runs is
// checked on machines without a GPU.
//
// Protocol (little-endian 32-bit words on stdin and stdout): the word n, then five sections of n input
// pairs each; for every pair the outputs listed below, in order.
//   Fr, Fq, Fq2 pairs (a, b): a + b, a - b, a * b, a^2.
//   G1, G2 pairs of affine points (p, q) and a word k: in XYZZ (X, Y, ZZ, ZZZ): p + q (mixed),
//   2p + q (mixed, ZZ != 1), 2p + 2q (full), 4p (doubling), k * p.
#include <cstdio>
#include <vector>

#include "curve/xyzz.cuh"

using namespace cuzk;

template <class T>
static bool read(T& v) {
    return std::fread(&v, sizeof(T), 1, stdin) == 1;
}

template <class T>
static void write(const T& v) {
    std::fwrite(&v, sizeof(T), 1, stdout);
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

int main() {
    uint32_t n;
    if (!read(n)) return 2;
    const bool ok = fields<Fr>(n) && fields<Fq>(n) && fields<Fq2>(n) && curve<Fq>(n) && curve<Fq2>(n);
    return ok ? 0 : 3;
}
