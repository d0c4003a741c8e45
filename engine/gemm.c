/* y[M][N] = x[M][K] . W[N][K]^T in fp32 with AVX2 + FMA, for the CPU decode step (engine/gemm.py builds and
 * loads this file; SPDX-License-Identifier: AGPL-3.0-or-later).
 *
 * W is packed once into blocks of 16 output columns, each K-major: Wp[n0 .. n0+16)[k] at Wp + n0*K + 16*k (a last
 * block of 8 when N % 16 == 8).  A thread takes a contiguous range of column blocks and streams its weights once
 * per call; inside a block, rows go in chunks of up to 6 (6 rows x 16 columns = 12 ymm accumulators).
 *
 * Every output element is one chain of fused multiply-adds over k = 0 .. K-1, in order, from zero: the same
 * instructions whatever M is, whichever chunk the row lands in and however many threads split the columns.  So a
 * row's result never depends on the other rows of the call (batch invariance without padding), nor on the
 * thread count.  (No -ffast-math: the compiler may not reorder the chain.)
 */
#include <immintrin.h>

#define MR 6                                  /* rows per chunk */
#define NB 16                                 /* columns per block (a last block may be 8) */

#define DECL(m) __m256 c##m##0 = _mm256_setzero_ps(), c##m##1 = _mm256_setzero_ps();
#define FMA16(m) if (R > m) { __m256 b = _mm256_broadcast_ss(x + m * ldx + k); \
    c##m##0 = _mm256_fmadd_ps(b, w0, c##m##0); c##m##1 = _mm256_fmadd_ps(b, w1, c##m##1); }
#define FMA8(m) if (R > m) c##m##0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + m * ldx + k), w0, c##m##0);
#define ST16(m) if (R > m) { _mm256_storeu_ps(y + m * ldy, c##m##0); _mm256_storeu_ps(y + m * ldy + 8, c##m##1); }
#define ST8(m) if (R > m) _mm256_storeu_ps(y + m * ldy, c##m##0);
#define ROWS(F) F(0) F(1) F(2) F(3) F(4) F(5)

/* r rows (r = 1..6, a constant in each copy: the accumulators stay in registers) of one column block */
#define KERNELS(r) \
static void k16_##r(const float *x, long ldx, const float *w, long K, float *y, long ldy) { \
    enum { R = r }; ROWS(DECL) \
    for (long k = 0; k < K; k++) { \
        __m256 w0 = _mm256_loadu_ps(w + 16 * k), w1 = _mm256_loadu_ps(w + 16 * k + 8); \
        ROWS(FMA16) \
    } \
    ROWS(ST16) \
} \
static void k8_##r(const float *x, long ldx, const float *w, long K, float *y, long ldy) { \
    enum { R = r }; ROWS(DECL) \
    for (long k = 0; k < K; k++) { \
        __m256 w0 = _mm256_loadu_ps(w + 8 * k); \
        ROWS(FMA8) \
    } \
    ROWS(ST8) \
}
KERNELS(1) KERNELS(2) KERNELS(3) KERNELS(4) KERNELS(5) KERNELS(6)

typedef void (*kernel)(const float *, long, const float *, long, float *, long);
static const kernel K16[MR + 1] = {0, k16_1, k16_2, k16_3, k16_4, k16_5, k16_6};
static const kernel K8[MR + 1] = {0, k8_1, k8_2, k8_3, k8_4, k8_5, k8_6};

/* W [N][K] row-major (N % 8 == 0) -> Wp [N * K] in the blocked layout above */
void chattts_pack(const float *W, long N, long K, float *Wp) {
    for (long n0 = 0; n0 < N; n0 += NB) {
        long nb = N - n0 >= NB ? NB : 8;
        float *dst = Wp + n0 * K;
        for (long k = 0; k < K; k++)
            for (long j = 0; j < nb; j++)
                dst[k * nb + j] = W[(n0 + j) * K + k];
    }
}

/* x [M][K] row-major, Wp packed (N % 8 == 0), y [M][N] row-major; `threads` OpenMP threads over column blocks */
void chattts_gemm(const float *x, long M, long K, const float *Wp, long N, float *y, int threads) {
    long blocks = (N + NB - 1) / NB;
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (long b = 0; b < blocks; b++) {
        long n0 = b * NB, nb = N - n0 >= NB ? NB : 8;
        const float *w = Wp + n0 * K;
        for (long m0 = 0; m0 < M; m0 += MR) {
            long r = M - m0 < MR ? M - m0 : MR;
            (nb == NB ? K16 : K8)[r](x + m0 * K, K, w, K, y + m0 * N + n0, N);
        }
    }
}
