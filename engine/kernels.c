/* The CPU decode step's kernels (engine/kernels.py builds and loads this file; SPDX-License-Identifier:
 * AGPL-3.0-or-later): chattts_linear, a linear layer over weights packed once in one of six *kinds*, chattts_attend,
 * attention of one query per row over the row's own prefix of the KV cache, and chattts_step, a decode step of the
 * whole Llama built from those two (at the end of this file).
 *
 * The kinds (kernels.py KINDS names them; each runs only where the CPU has its instructions and this compiler
 * built it: chattts_kinds):
 *     KIND_F32      fp32 weights, AVX2 + FMA                       (the file's baseline flags: -mavx2 -mfma)
 *     KIND_Q8       int8 weights (a scale per output column), fp32 activations and sums, AVX2 + FMA
 *     KIND_F32_512  fp32 weights, AVX-512: the same chains as KIND_F32, 16 lanes wide and 12 rows a chunk
 *     KIND_Q8_512   int8 weights as KIND_Q8, AVX-512: the same chains as KIND_Q8
 *     KIND_BF16     bf16 weights and activations (each row rounded to bf16 when it enters), fp32 sums
 *                   (AVX512_BF16's vdpbf16ps: two products a step)
 *     KIND_I8       W8A8: int8 weights, each row quantized to int8 when it enters (its absmax / 127), exact int32
 *                   sums (AVX512_VNNI's vpdpbusd: four products a step), one fp32 rescale
 *     KIND_AMX_BF16 KIND_BF16's operands on AMX tiles (tdpbf16ps: 16 rows x 16 columns x 32 k an instruction), fp32
 *                   sums in the tile's order: its own bits
 *     KIND_AMX_I8   KIND_I8's operands on AMX tiles (tdpbusd: 16 x 16 x 64), exact int32 sums: KIND_I8's bits
 * The AVX-512 and AMX kinds are functions compiled for their instructions (__attribute__((target))), called only
 * where the CPU has them: the rest of the file, and the library's load, need AVX2 + FMA only.
 *
 * chattts_linear: y[M][N] = x[M][K] . W[N][K]^T.
 * W is packed once into blocks of 16 output columns, each K-major: Wp[n0 .. n0+16)[k] at Wp + n0*K + 16*k (a last
 * block of 8 when N % 16 == 8); bf16 weights go in pairs of k (K padded to even: Wp + n0*Kp + 32*(k/2) + 2*j + k%2)
 * and int8 weights for vpdpbusd in quads of k (K padded to a multiple of 4: Wp + n0*Kq + 64*(k/4) + 4*j + k%4).  A
 * thread takes whole column blocks and streams their weights once per call; inside a block, rows go in chunks.
 *
 * Every output element is one chain over k = 0 .. K-1, in order, from zero (fp32 and int8 weights: a fused
 * multiply-add per k; bf16: a vdpbf16ps per pair of k; W8A8: an exact int32 sum): the same instructions whatever M
 * is, whichever chunk the row lands in and however many threads split the columns.  So a row's result never
 * depends on the other rows of the call (batch invariance without padding), nor on the thread count, in every
 * kind.  (No -ffast-math: the compiler may not reorder a chain.)  KIND_F32_512 and KIND_Q8_512 run each lane's
 * chain exactly as KIND_F32 and KIND_Q8 do, so they give the same bits.  Int8 weights convert to float exactly,
 * so the same holds for the int8 kinds; a column scale multiplies the finished sum.
 */
#include <errno.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define MR 6                                  /* rows per chunk */
#define NB 16                                 /* columns per block (a last block may be 8) */

#define DECL(m) __m256 c##m##0 = _mm256_setzero_ps(), c##m##1 = _mm256_setzero_ps();
#define DECL8(m) __m256 c##m##0 = _mm256_setzero_ps();
#define FMA16(m) if (R > m) { __m256 b = _mm256_broadcast_ss(x + m * ldx + k); \
    c##m##0 = _mm256_fmadd_ps(b, w0, c##m##0); c##m##1 = _mm256_fmadd_ps(b, w1, c##m##1); }
#define FMA8(m) if (R > m) c##m##0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + m * ldx + k), w0, c##m##0);
#define ST16(m) if (R > m) { _mm256_storeu_ps(y + m * ldy, _mm256_mul_ps(c##m##0, s0)); \
    _mm256_storeu_ps(y + m * ldy + 8, _mm256_mul_ps(c##m##1, s1)); }
#define ST8(m) if (R > m) _mm256_storeu_ps(y + m * ldy, _mm256_mul_ps(c##m##0, s0));
#define ROWS(F) F(0) F(1) F(2) F(3) F(4) F(5)

/* weights of column k of a block, as 8-float vectors: fp32, or int8 converted exactly to float */
#define LOAD16_F(w, k) __m256 w0 = _mm256_loadu_ps(w + 16 * k), w1 = _mm256_loadu_ps(w + 16 * k + 8);
#define LOAD8_F(w, k) __m256 w0 = _mm256_loadu_ps(w + 8 * k);
#define Q8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))  /* vpmovsxbd ymm, m64 */
#define LOAD16_Q(w, k) __m256 w0 = Q8(w + 16 * k), w1 = Q8(w + 16 * k + 8);   /* two 8-byte loads: +28 % over one */
#define LOAD8_Q(w, k) __m256 w0 = Q8(w + 8 * k);                             /* 16-byte load and a byte shift */

/* r rows (r = 1..6, a constant in each copy: the accumulators stay in registers) of one column block; the
 * sums are multiplied by the block's column scales at the end (1 for fp32 weights, the int8 scales) */
#define KERNELS(r, T, tag) \
static void k16##tag##r(const float *x, long ldx, const void *wv, long K, float *y, long ldy, const float *s) { \
    enum { R = r }; const T *w = wv; ROWS(DECL) \
    for (long k = 0; k < K; k++) { \
        LOAD16##tag(w, k) \
        ROWS(FMA16) \
    } \
    __m256 s0 = s ? _mm256_loadu_ps(s) : _mm256_set1_ps(1.0f), s1 = s ? _mm256_loadu_ps(s + 8) : s0; \
    ROWS(ST16) \
} \
static void k8##tag##r(const float *x, long ldx, const void *wv, long K, float *y, long ldy, const float *s) { \
    enum { R = r }; const T *w = wv; ROWS(DECL8) \
    for (long k = 0; k < K; k++) { \
        LOAD8##tag(w, k) \
        ROWS(FMA8) \
    } \
    __m256 s0 = s ? _mm256_loadu_ps(s) : _mm256_set1_ps(1.0f); \
    ROWS(ST8) \
}
KERNELS(1, float, _F) KERNELS(2, float, _F) KERNELS(3, float, _F)
KERNELS(4, float, _F) KERNELS(5, float, _F) KERNELS(6, float, _F)
KERNELS(1, signed char, _Q) KERNELS(2, signed char, _Q) KERNELS(3, signed char, _Q)
KERNELS(4, signed char, _Q) KERNELS(5, signed char, _Q) KERNELS(6, signed char, _Q)

typedef void (*kernel)(const float *, long, const void *, long, float *, long, const float *);
static const kernel K16_F[MR + 1] = {0, k16_F1, k16_F2, k16_F3, k16_F4, k16_F5, k16_F6};
static const kernel K8_F[MR + 1] = {0, k8_F1, k8_F2, k8_F3, k8_F4, k8_F5, k8_F6};
static const kernel K16_Q[MR + 1] = {0, k16_Q1, k16_Q2, k16_Q3, k16_Q4, k16_Q5, k16_Q6};
static const kernel K8_Q[MR + 1] = {0, k8_Q1, k8_Q2, k8_Q3, k8_Q4, k8_Q5, k8_Q6};

/* W [N][K] row-major (N % 8 == 0) -> Wp [N * K] in the blocked layout above */
#define PACK(name, T) \
void name(const T *W, long N, long K, T *Wp) { \
    for (long n0 = 0; n0 < N; n0 += NB) { \
        long nb = N - n0 >= NB ? NB : 8; \
        T *dst = Wp + n0 * K; \
        for (long k = 0; k < K; k++) \
            for (long j = 0; j < nb; j++) \
                dst[k * nb + j] = W[(n0 + j) * K + k]; \
    } \
}
PACK(chattts_pack, float)
PACK(chattts_pack_q8, signed char)

/* x [M][K] row-major, Wp packed (N % 8 == 0; `bytes` per weight), scale [N] or NULL, y [M][N] row-major.
 * An orphaned `omp for` over column blocks: inside a parallel region the team shares them (chattts_step), outside
 * one the calling thread does them all. */
static void gemm_for(const kernel *k16, const kernel *k8, long bytes, const float *x, long M, long K, const char *Wp,
                     const float *scale, long N, float *y) {
    long blocks = (N + NB - 1) / NB;
    #pragma omp for schedule(static)
    for (long b = 0; b < blocks; b++) {
        long n0 = b * NB, nb = N - n0 >= NB ? NB : 8;
        const char *w = Wp + n0 * K * bytes;
        for (long m0 = 0; m0 < M; m0 += MR) {
            long r = M - m0 < MR ? M - m0 : MR;
            (nb == NB ? k16 : k8)[r](x + m0 * K, K, w, K, y + m0 * N + n0, N, scale ? scale + n0 : 0);
        }
    }
}

/* ------------------------------------------------------------------------------------------------ AVX-512
 * Functions compiled for the AVX-512 instructions they use (the rest of the file needs AVX2 + FMA only); a compiler
 * too old for AVX512_BF16 (gcc < 10, clang < 9) or AVX512_VNNI (gcc < 8, clang < 6) builds the others, and
 * chattts_kinds says which. */
#if defined(__clang__)
#define HAVE_BF16 (__clang_major__ >= 9)
#define HAVE_VNNI (__clang_major__ >= 6)
#elif defined(__GNUC__)
#define HAVE_BF16 (__GNUC__ >= 10)
#define HAVE_VNNI (__GNUC__ >= 8)
#else
#define HAVE_BF16 0
#define HAVE_VNNI 0
#endif
#if defined(CHATTTS_AMX_EMULATE)                   /* the tests' emulated tiles (the AMX section) */
#define HAVE_AMX 1
#elif defined(__x86_64__) && defined(__clang__)
#define HAVE_AMX (__clang_major__ >= 12)
#elif defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AMX (__GNUC__ >= 11)
#else
#define HAVE_AMX 0
#endif
#define ISA512 "avx2,fma,avx512f,avx512bw,avx512vl,avx512dq"
#define T512 __attribute__((target(ISA512)))
#define MZ 12                                 /* rows per chunk: 12 rows x 2 blocks of 16 columns = 24 accumulators */
#define ROWS12(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
#define LIST12(p) {0, p##1, p##2, p##3, p##4, p##5, p##6, p##7, p##8, p##9, p##10, p##11, p##12}

/* KIND_F32_512, KIND_Q8_512: r rows of two 16-column blocks (z2: wa, wb = wa + 16 K) or of one (z1), each lane the
 * chain KIND_F32 / KIND_Q8 run (the same fused multiply-adds in the same order, the same final scale) */
#define ZDECL2(m) __m512 a##m = _mm512_setzero_ps(), b##m = _mm512_setzero_ps();
#define ZDECL1(m) __m512 a##m = _mm512_setzero_ps();
#define ZFMA2(m) if (R > m) { __m512 xm = _mm512_set1_ps(x[m * ldx + k]); \
    a##m = _mm512_fmadd_ps(xm, w0, a##m); b##m = _mm512_fmadd_ps(xm, w1, b##m); }
#define ZFMA1(m) if (R > m) a##m = _mm512_fmadd_ps(_mm512_set1_ps(x[m * ldx + k]), w0, a##m);
#define ZST2(m) if (R > m) { _mm512_storeu_ps(y + m * ldy, _mm512_mul_ps(a##m, s0)); \
    _mm512_storeu_ps(y + m * ldy + 16, _mm512_mul_ps(b##m, s1)); }
#define ZST1(m) if (R > m) _mm512_storeu_ps(y + m * ldy, _mm512_mul_ps(a##m, s0));
#define ZW_F(w, k) _mm512_loadu_ps(w + 16 * (k))
#define ZW_Q(w, k) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + 16 * (k)))))
#define ZKERNELS(r, T, tag) \
T512 static void z2##tag##r(const float *x, long ldx, const void *wv, long K, float *y, long ldy, const float *s) { \
    enum { R = r }; const T *wa = wv, *wb = wa + 16 * K; ROWS12(ZDECL2) \
    for (long k = 0; k < K; k++) { \
        __m512 w0 = ZW##tag(wa, k), w1 = ZW##tag(wb, k); \
        ROWS12(ZFMA2) \
    } \
    __m512 s0 = s ? _mm512_loadu_ps(s) : _mm512_set1_ps(1.0f), s1 = s ? _mm512_loadu_ps(s + 16) : s0; \
    ROWS12(ZST2) \
} \
T512 static void z1##tag##r(const float *x, long ldx, const void *wv, long K, float *y, long ldy, const float *s) { \
    enum { R = r }; const T *wa = wv; ROWS12(ZDECL1) \
    for (long k = 0; k < K; k++) { \
        __m512 w0 = ZW##tag(wa, k); \
        ROWS12(ZFMA1) \
    } \
    __m512 s0 = s ? _mm512_loadu_ps(s) : _mm512_set1_ps(1.0f); \
    ROWS12(ZST1) \
}
#define ZKIND(T, tag) ZKERNELS(1, T, tag) ZKERNELS(2, T, tag) ZKERNELS(3, T, tag) ZKERNELS(4, T, tag) \
    ZKERNELS(5, T, tag) ZKERNELS(6, T, tag) ZKERNELS(7, T, tag) ZKERNELS(8, T, tag) ZKERNELS(9, T, tag) \
    ZKERNELS(10, T, tag) ZKERNELS(11, T, tag) ZKERNELS(12, T, tag)
ZKIND(float, _F)
ZKIND(signed char, _Q)
static const kernel Z2_F[MZ + 1] = LIST12(z2_F), Z1_F[MZ + 1] = LIST12(z1_F);
static const kernel Z2_Q[MZ + 1] = LIST12(z2_Q), Z1_Q[MZ + 1] = LIST12(z1_Q);

/* The AVX-512 kinds' column tiles: pairs of 16-column blocks (z2), a last lone block (z1), a last block of 8 (the
 * AVX2 kernels k8: the same chains).  An orphaned `omp for` over the tiles, as gemm_for. */
static void gemm512_for(const kernel *z2, const kernel *z1, const kernel *k8, long bytes, const float *x, long M,
                        long K, const char *Wp, const float *scale, long N, float *y) {
    long full = N / NB, pairs = (full + 1) / 2, tiles = pairs + (N % NB ? 1 : 0);
    #pragma omp for schedule(static)
    for (long t = 0; t < tiles; t++) {
        long n0 = t < pairs ? 2 * NB * t : full * NB;
        long width = t < pairs ? (2 * t + 2 <= full ? 2 * NB : NB) : 8, mr = width == 8 ? MR : MZ;
        const kernel *k = width == 2 * NB ? z2 : width == NB ? z1 : k8;
        const char *w = Wp + n0 * K * bytes;
        for (long m0 = 0; m0 < M; m0 += mr) {
            long r = M - m0 < mr ? M - m0 : mr;
            k[r](x + m0 * K, K, w, K, y + m0 * N + n0, N, scale ? scale + n0 : 0);
        }
    }
}

/* KIND_BF16 and KIND_I8 take their rows converted (bf16 pairs, or int8 quads offset to unsigned) as 32-bit units:
 * x [M][P] (ldx units a row), P = Kp / 2 pairs or Kq / 4 quads; w: the block's packed units (16 a pair or quad; a
 * second block at wa + 16 P); s: column scales, c: column offsets, xs: row scales (KIND_I8; bf16 takes none). */
typedef void (*kernel_u)(const int *, long, const int *, long, float *, long, const float *, const int *,
                         const float *);

#if HAVE_BF16
#define TBF16 __attribute__((target(ISA512 ",avx512bf16")))
/* y = sum over pairs p of vdpbf16ps(x pair, w pair): fp32 sums of bf16 products, in order of p */
#define BDECL2(m) __m512 a##m = _mm512_setzero_ps(), b##m = _mm512_setzero_ps();
#define BDECL1(m) __m512 a##m = _mm512_setzero_ps();
#define BDECL8(m) __m256 a##m = _mm256_setzero_ps();
#define BDOT2(m) if (R > m) { __m512bh xm = (__m512bh)_mm512_set1_epi32(x[m * ldx + p]); \
    a##m = _mm512_dpbf16_ps(a##m, xm, w0); b##m = _mm512_dpbf16_ps(b##m, xm, w1); }
#define BDOT1(m) if (R > m) a##m = _mm512_dpbf16_ps(a##m, (__m512bh)_mm512_set1_epi32(x[m * ldx + p]), w0);
#define BDOT8(m) if (R > m) a##m = _mm256_dpbf16_ps(a##m, (__m256bh)_mm256_set1_epi32(x[m * ldx + p]), w0);
#define BST2(m) if (R > m) { _mm512_storeu_ps(y + m * ldy, a##m); _mm512_storeu_ps(y + m * ldy + 16, b##m); }
#define BST1(m) if (R > m) _mm512_storeu_ps(y + m * ldy, a##m);
#define BST8(m) if (R > m) _mm256_storeu_ps(y + m * ldy, a##m);
#define BKERNELS(r) \
TBF16 static void b2_##r(const int *x, long ldx, const int *wa, long P, float *y, long ldy, const float *s, \
                         const int *c, const float *xs) { \
    enum { R = r }; const int *wb = wa + 16 * P; ROWS12(BDECL2) (void)s; (void)c; (void)xs; \
    for (long p = 0; p < P; p++) { \
        __m512bh w0 = (__m512bh)_mm512_loadu_si512(wa + 16 * p), w1 = (__m512bh)_mm512_loadu_si512(wb + 16 * p); \
        ROWS12(BDOT2) \
    } \
    ROWS12(BST2) \
} \
TBF16 static void b1_##r(const int *x, long ldx, const int *wa, long P, float *y, long ldy, const float *s, \
                         const int *c, const float *xs) { \
    enum { R = r }; ROWS12(BDECL1) (void)s; (void)c; (void)xs; \
    for (long p = 0; p < P; p++) { \
        __m512bh w0 = (__m512bh)_mm512_loadu_si512(wa + 16 * p); \
        ROWS12(BDOT1) \
    } \
    ROWS12(BST1) \
} \
TBF16 static void b8_##r(const int *x, long ldx, const int *wa, long P, float *y, long ldy, const float *s, \
                         const int *c, const float *xs) { \
    enum { R = r }; ROWS12(BDECL8) (void)s; (void)c; (void)xs; \
    for (long p = 0; p < P; p++) { \
        __m256bh w0 = (__m256bh)_mm256_loadu_si256((const __m256i *)(wa + 8 * p)); \
        ROWS12(BDOT8) \
    } \
    ROWS12(BST8) \
}
BKERNELS(1) BKERNELS(2) BKERNELS(3) BKERNELS(4) BKERNELS(5) BKERNELS(6)
BKERNELS(7) BKERNELS(8) BKERNELS(9) BKERNELS(10) BKERNELS(11) BKERNELS(12)
static const kernel_u B2[MZ + 1] = LIST12(b2_), B1[MZ + 1] = LIST12(b1_), B8[MZ + 1] = LIST12(b8_);
#endif

#if HAVE_VNNI
#define TVNNI __attribute__((target(ISA512 ",avx512vnni")))
/* acc = sum over quads q of vpdpbusd(x quad (unsigned: q + 128), w quad (signed)): exact int32;
 * y = float(acc + c) * (xs[m] * s), c = -128 x the column's weight sum: float(the signed sum) * (row x column scale) */
#define VDECL2(m) __m512i a##m = _mm512_setzero_si512(), b##m = _mm512_setzero_si512();
#define VDECL1(m) __m512i a##m = _mm512_setzero_si512();
#define VDECL8(m) __m256i a##m = _mm256_setzero_si256();
#define VDOT2(m) if (R > m) { __m512i xm = _mm512_set1_epi32(x[m * ldx + q]); \
    a##m = _mm512_dpbusd_epi32(a##m, xm, w0); b##m = _mm512_dpbusd_epi32(b##m, xm, w1); }
#define VDOT1(m) if (R > m) a##m = _mm512_dpbusd_epi32(a##m, _mm512_set1_epi32(x[m * ldx + q]), w0);
#define VDOT8(m) if (R > m) a##m = _mm256_dpbusd_epi32(a##m, _mm256_set1_epi32(x[m * ldx + q]), w0);
#define VOUT(m, a, c, s) \
    _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a, c)), _mm512_mul_ps(_mm512_set1_ps(xs[m]), s))
#define VST2(m) if (R > m) { _mm512_storeu_ps(y + m * ldy, VOUT(m, a##m, c0, s0)); \
    _mm512_storeu_ps(y + m * ldy + 16, VOUT(m, b##m, c1, s1)); }
#define VST1(m) if (R > m) _mm512_storeu_ps(y + m * ldy, VOUT(m, a##m, c0, s0));
#define VST8(m) if (R > m) _mm256_storeu_ps(y + m * ldy, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(a##m, c0)), \
    _mm256_mul_ps(_mm256_set1_ps(xs[m]), s0)));
#define VKERNELS(r) \
TVNNI static void v2_##r(const int *x, long ldx, const int *wa, long Q, float *y, long ldy, const float *s, \
                         const int *c, const float *xs) { \
    enum { R = r }; const int *wb = wa + 16 * Q; ROWS12(VDECL2) \
    for (long q = 0; q < Q; q++) { \
        __m512i w0 = _mm512_loadu_si512(wa + 16 * q), w1 = _mm512_loadu_si512(wb + 16 * q); \
        ROWS12(VDOT2) \
    } \
    __m512 s0 = _mm512_loadu_ps(s), s1 = _mm512_loadu_ps(s + 16); \
    __m512i c0 = _mm512_loadu_si512(c), c1 = _mm512_loadu_si512(c + 16); \
    ROWS12(VST2) \
} \
TVNNI static void v1_##r(const int *x, long ldx, const int *wa, long Q, float *y, long ldy, const float *s, \
                         const int *c, const float *xs) { \
    enum { R = r }; ROWS12(VDECL1) \
    for (long q = 0; q < Q; q++) { \
        __m512i w0 = _mm512_loadu_si512(wa + 16 * q); \
        ROWS12(VDOT1) \
    } \
    __m512 s0 = _mm512_loadu_ps(s); \
    __m512i c0 = _mm512_loadu_si512(c); \
    ROWS12(VST1) \
} \
TVNNI static void v8_##r(const int *x, long ldx, const int *wa, long Q, float *y, long ldy, const float *s, \
                         const int *c, const float *xs) { \
    enum { R = r }; ROWS12(VDECL8) \
    for (long q = 0; q < Q; q++) { \
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(wa + 8 * q)); \
        ROWS12(VDOT8) \
    } \
    __m256 s0 = _mm256_loadu_ps(s); \
    __m256i c0 = _mm256_loadu_si256((const __m256i *)c); \
    ROWS12(VST8) \
}
VKERNELS(1) VKERNELS(2) VKERNELS(3) VKERNELS(4) VKERNELS(5) VKERNELS(6)
VKERNELS(7) VKERNELS(8) VKERNELS(9) VKERNELS(10) VKERNELS(11) VKERNELS(12)
static const kernel_u V2[MZ + 1] = LIST12(v2_), V1[MZ + 1] = LIST12(v1_), V8[MZ + 1] = LIST12(v8_);
#endif

#if HAVE_BF16 || HAVE_VNNI
/* tiles as gemm512_for, over converted rows x [M][P] and weights of P units per column */
static void gemmu_for(const kernel_u *k2, const kernel_u *k1, const kernel_u *k8, const int *x, long M, long P,
                      const int *Wp, const float *scale, const int *comp, const float *xs, long N, float *y) {
    long full = N / NB, pairs = (full + 1) / 2, tiles = pairs + (N % NB ? 1 : 0);
    #pragma omp for schedule(static)
    for (long t = 0; t < tiles; t++) {
        long n0 = t < pairs ? 2 * NB * t : full * NB;
        long width = t < pairs ? (2 * t + 2 <= full ? 2 * NB : NB) : 8;
        const kernel_u *k = width == 2 * NB ? k2 : width == NB ? k1 : k8;
        for (long m0 = 0; m0 < M; m0 += MZ) {
            long r = M - m0 < MZ ? M - m0 : MZ;
            k[r](x + m0 * P, P, Wp + n0 * P, P, y + m0 * N + n0, N, scale ? scale + n0 : 0, comp ? comp + n0 : 0,
                 xs ? xs + m0 : 0);
        }
    }
}
#endif

/* ------------------------------------------------------------------------------------------------ bf16, int8
 * Rounding to bf16 (weights once, activations each call): to nearest, ties to even, as torch's .bfloat16() (NaN
 * stays a quiet NaN).  Quantizing a row to int8 for KIND_I8: s = max |x| / 127 (at least 1e-12), q = x / s rounded
 * to nearest even and clamped to +-127, as engine.cpu.Int8Linear (torch) quantizes a row; stored as q + 128. */
static inline unsigned short bf16(float f) {
    unsigned u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#if HAVE_BF16 || HAVE_AMX
static void bf16_row(const float *x, long K, long Kp, unsigned short *out) {     /* Kp: K padded (even, a tile), zeros */
    for (long k = 0; k < K; k++) out[k] = bf16(x[k]);
    for (long k = K; k < Kp; k++) out[k] = 0;
}
#endif
#if HAVE_VNNI || HAVE_AMX

static void quant_row(const float *x, long K, long Kq, unsigned char *out, float *scale) {   /* Kq: K to 4 (a tile) */
    float m = 0.0f;
    for (long k = 0; k < K; k++) m = fabsf(x[k]) > m ? fabsf(x[k]) : m;
    float s = m / 127.0f;
    s = s < 1e-12f ? 1e-12f : s;
    for (long k = 0; k < K; k++) {
        float q = nearbyintf(x[k] / s);
        q = q < -127.0f ? -127.0f : q > 127.0f ? 127.0f : q;
        out[k] = (unsigned char)((int)q + 128);
    }
    for (long k = K; k < Kq; k++) out[k] = 128;
    *scale = s;
}
#endif

static long pairs_of(long K) { return (K + 1) / 2; }
static long quads_of(long K) { return (K + 3) / 4; }
#define TILE_ROWS 16                          /* an AMX tile: 16 rows of 64 bytes (1 KiB) */
#define TILE_BYTES 64
static long round16(long n) { return (n + 15) / 16 * 16; }
static long tile_bytes(long bytes) { return (bytes + TILE_BYTES - 1) / TILE_BYTES * TILE_BYTES; }   /* whole tiles */

/* W [N][K] fp32 (N % 8 == 0) -> Wp [Np * Kp] bf16 in the pair layout above: K padded to Kp (even), N to Np (columns
 * of zeros; Np == N, or a multiple of 16 for the AMX kind) */
static void pack_pairs(const float *W, long N, long K, long Np, long Kp, unsigned short *Wp) {
    for (long n0 = 0; n0 < Np; n0 += NB) {
        long nb = Np - n0 >= NB ? NB : 8;
        unsigned short *dst = Wp + n0 * Kp;
        for (long k = 0; k < Kp; k++)
            for (long j = 0; j < nb; j++)
                dst[(k / 2) * 2 * nb + 2 * j + k % 2] = k < K && n0 + j < N ? bf16(W[(n0 + j) * K + k]) : 0;
    }
}

/* W [N][K] int8 (N % 8 == 0) -> Wp [Np * Kq] in the quad layout above (K padded to Kq, N to Np as pack_pairs), and
 * comp[n] = -128 x sum_k W[n][k] (n < N) */
static void pack_quads(const signed char *W, long N, long K, long Np, long Kq, signed char *Wp, int *comp) {
    for (long n0 = 0; n0 < Np; n0 += NB) {
        long nb = Np - n0 >= NB ? NB : 8;
        signed char *dst = Wp + n0 * Kq;
        for (long k = 0; k < Kq; k++)
            for (long j = 0; j < nb; j++)
                dst[(k / 4) * 4 * nb + 4 * j + k % 4] = k < K && n0 + j < N ? W[(n0 + j) * K + k] : 0;
    }
    for (long n = 0; n < N; n++) {
        int sum = 0;
        for (long k = 0; k < K; k++) sum += W[n * K + k];
        comp[n] = -128 * sum;
    }
}

void chattts_pack_bf16(const float *W, long N, long K, unsigned short *Wp) {
    pack_pairs(W, N, K, N, 2 * pairs_of(K), Wp);
}

void chattts_pack_i8(const signed char *W, long N, long K, signed char *Wp, int *comp) {
    pack_quads(W, N, K, N, 4 * quads_of(K), Wp, comp);
}

/* The AMX kinds' weights: N padded to a multiple of 16, K to whole tiles (32 bf16 or 64 int8): Wp [round16(N) *
 * Kt] (Kt = tile_bytes(2 K) / 2 bf16, or tile_bytes(K) bytes), comp [N] */
void chattts_pack_amx_bf16(const float *W, long N, long K, unsigned short *Wp) {
    pack_pairs(W, N, K, round16(N), tile_bytes(2 * K) / 2, Wp);
}

void chattts_pack_amx_i8(const signed char *W, long N, long K, signed char *Wp, int *comp) {
    pack_quads(W, N, K, round16(N), tile_bytes(K), Wp, comp);
}

/* ------------------------------------------------------------------------------------------------ AMX
 * KIND_AMX_BF16 and KIND_AMX_I8: Intel AMX tiles.  A tile register holds 16 rows of 64 bytes; tdpbf16ps adds to a
 * 16 x 16 fp32 tile C the products of a row tile A (16 rows x 16 bf16 pairs) and a weight tile B (16 pairs x 16
 * columns, each pair's two values side by side), tdpbusd the exact int32 products of unsigned bytes (A: 16 quads a
 * row) and signed ones (B: 16 quads x 16 columns).  A weight tile is thus 16 pairs (32 k) or 16 quads (64 k) of one
 * 16-column block in exactly the pair and quad layouts above, so with K padded to whole tiles and N to whole blocks
 * (chattts_pack_amx_*) block b's tile t is the 1 KiB at Wp + (b T + t) KiB.  The rows are converted as KIND_BF16's
 * and KIND_I8's (bf16_row, quant_row: u8 = q + 128) into whole row tiles: M padded to 16 with zero rows (their
 * results are never stored), each row K padded to whole tiles.
 *
 * Tiles: C in tmm0-3 ((row tile 0, block 0), (0, 1), (1, 0), (1, 1)), A in tmm4-5, B in tmm6-7; a thread takes pairs
 * of column blocks (a lone last block), and per pair row groups of 32 rows (a last of 16).  Every output is one chain
 * of tile products over t = 0 .. T-1 in order, from zero, its row of A against its column of B: the same
 * instructions whichever row tile, row group or thread computes it and whatever M is (rows are always whole tiles),
 * so batch- and thread-invariant as every kind.  KIND_AMX_I8 rescales each exact sum as KIND_I8 does,
 * float(acc + comp) * (row scale x column scale), and so gives KIND_I8's bits; KIND_AMX_BF16's fp32 sums round in
 * the tile's order (the ISA reference's pseudo-code: per pair of k, the even product added, then the odd one; DAZ
 * and FTZ), not vdpbf16ps's: its own bits, within the same bound.
 *
 * Linux gives a process the tile registers only after arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA):
 * chattts_amx_enable (engine/kernels.py asks for it, and checks the kinds, in a child process first).  Each thread
 * loads the tile configuration (ldtilecfg: palette 1, 8 tiles of 16 rows x 64 bytes) at the start of a linear and
 * releases the tiles (tilerelease) at its end.  The loads and stores are written as asm with a memory clobber (gcc's
 * _tile_loadd names no memory operand, and its _tile_loadconfig only the configuration's first 8 bytes).
 *
 * CHATTTS_AMX_EMULATE (the tests' build, never one the engine loads: tests/engine/test_amx.py): the tile
 * instructions as C over thread-local tiles, following the ISA reference's pseudo-code, so the layouts, the padding,
 * the epilogues and the thread split run on any CPU. */
#if HAVE_AMX
struct tile_config {                          /* ldtilecfg's 64 bytes */
    unsigned char palette, start_row, reserved[14];
    unsigned short colsb[16];                 /* bytes per row of tile i */
    unsigned char rows[16];
};

#ifndef CHATTTS_AMX_EMULATE
#define TAMX __attribute__((target("amx-tile,amx-bf16,amx-int8")))
TAMX static void tile_config(const struct tile_config *c) { __asm__ volatile("ldtilecfg %0" :: "m"(*c) : "memory"); }
#define TZERO(t) _tile_zero(t)
#define TLOAD(t, p, s) __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t :: "r"((const void *)(p)), "r"((long)(s)) \
                                        : "memory")
#define TSTORE(t, p, s) __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" :: "r"((void *)(p)), "r"((long)(s)) \
                                         : "memory")
#define TDOT_BF16(c, a, b) _tile_dpbf16ps(c, a, b)
#define TDOT_U8S8(c, a, b) _tile_dpbusd(c, a, b)
TAMX static void tile_release(void) { _tile_release(); }
#define TRELEASE() tile_release()
#else
#define TAMX
static _Thread_local unsigned char emu[8][TILE_ROWS][TILE_BYTES];
static _Thread_local int emu_ready;           /* a valid configuration loaded (else an instruction faults: abort) */
static void tile_config(const struct tile_config *c) {
    emu_ready = c->palette == 1;
    for (int i = 0; i < 8; i++) emu_ready &= c->rows[i] == TILE_ROWS && c->colsb[i] == TILE_BYTES;
}
static void emu_check(void) { if (!emu_ready) abort(); }
static void emu_zero(int t) { emu_check(); memset(emu[t], 0, sizeof emu[t]); }
static void emu_load(int t, const void *p, long s) {
    emu_check();
    for (int r = 0; r < TILE_ROWS; r++) memcpy(emu[t][r], (const char *)p + r * s, TILE_BYTES);
}
static void emu_store(int t, void *p, long s) {
    emu_check();
    for (int r = 0; r < TILE_ROWS; r++) memcpy((char *)p + r * s, emu[t][r], TILE_BYTES);
}
static float emu_bf16(const unsigned char *p) {          /* a bf16 (little-endian) widened; DAZ: denormals are 0 */
    unsigned u = (unsigned)(p[0] | p[1] << 8) << 16;
    float f;
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    memcpy(&f, &u, sizeof f);
    return f;
}
static float emu_ftz(float f) { return fabsf(f) < 1.17549435e-38f ? copysignf(0.0f, f) : f; }
static void emu_dpbf16(int c, int a, int b) {            /* C[m][n] += A[m] pair k . B[k] pair of column n */
    emu_check();
    for (int m = 0; m < TILE_ROWS; m++)
        for (int k = 0; k < 16; k++)
            for (int n = 0; n < 16; n++) {
                float acc;
                memcpy(&acc, &emu[c][m][4 * n], sizeof acc);
                acc = emu_ftz(acc + emu_bf16(&emu[a][m][4 * k]) * emu_bf16(&emu[b][k][4 * n]));
                acc = emu_ftz(acc + emu_bf16(&emu[a][m][4 * k + 2]) * emu_bf16(&emu[b][k][4 * n + 2]));
                memcpy(&emu[c][m][4 * n], &acc, sizeof acc);
            }
}
static void emu_dpbusd(int c, int a, int b) {            /* C[m][n] += A[m] quad k (unsigned) . B[k] quad n (signed) */
    emu_check();
    for (int m = 0; m < TILE_ROWS; m++)
        for (int k = 0; k < 16; k++)
            for (int n = 0; n < 16; n++) {
                unsigned acc;
                memcpy(&acc, &emu[c][m][4 * n], sizeof acc);
                for (int i = 0; i < 4; i++)
                    acc += (unsigned)((int)emu[a][m][4 * k + i] * (int)(signed char)emu[b][k][4 * n + i]);
                memcpy(&emu[c][m][4 * n], &acc, sizeof acc);
            }
}
#define TZERO(t) emu_zero(t)
#define TLOAD(t, p, s) emu_load(t, p, s)
#define TSTORE(t, p, s) emu_store(t, p, s)
#define TDOT_BF16(c, a, b) emu_dpbf16(c, a, b)
#define TDOT_U8S8(c, a, b) emu_dpbusd(c, a, b)
#define TRELEASE() (emu_ready = 0)
#endif

/* NR row tiles (1, 2) x NC column blocks (1, 2) of C over T k-tiles: the rows at x (ldx bytes a row), the blocks'
 * weight tiles at wa, wb (1 KiB each, in order of t); C stored to out[0..3] (16 x 16 fp32 or int32, in tmm0-3's
 * order).  The tile numbers are literals (they are the instructions' operands). */
#define AMX_TILES(name, DOT, NR, NC) \
TAMX static void name(const char *x, long ldx, const char *wa, const char *wb, long T, int (*out)[256]) { \
    TZERO(0); \
    if (NC > 1) TZERO(1); \
    if (NR > 1) TZERO(2); \
    if (NR > 1 && NC > 1) TZERO(3); \
    for (long t = 0; t < T; t++) { \
        TLOAD(4, x + t * TILE_BYTES, ldx); \
        TLOAD(6, wa + t * 1024, TILE_BYTES); \
        DOT(0, 4, 6); \
        if (NC > 1) { TLOAD(7, wb + t * 1024, TILE_BYTES); DOT(1, 4, 7); } \
        if (NR > 1) { TLOAD(5, x + TILE_ROWS * ldx + t * TILE_BYTES, ldx); DOT(2, 5, 6); } \
        if (NR > 1 && NC > 1) DOT(3, 5, 7); \
    } \
    TSTORE(0, out[0], TILE_BYTES); \
    if (NC > 1) TSTORE(1, out[1], TILE_BYTES); \
    if (NR > 1) TSTORE(2, out[2], TILE_BYTES); \
    if (NR > 1 && NC > 1) TSTORE(3, out[3], TILE_BYTES); \
}
AMX_TILES(tb11, TDOT_BF16, 1, 1) AMX_TILES(tb12, TDOT_BF16, 1, 2)
AMX_TILES(tb21, TDOT_BF16, 2, 1) AMX_TILES(tb22, TDOT_BF16, 2, 2)
AMX_TILES(ti11, TDOT_U8S8, 1, 1) AMX_TILES(ti12, TDOT_U8S8, 1, 2)
AMX_TILES(ti21, TDOT_U8S8, 2, 1) AMX_TILES(ti22, TDOT_U8S8, 2, 2)
typedef void (*tile_kernel)(const char *, long, const char *, const char *, long, int (*)[256]);
static const tile_kernel TILES_BF16[2][2] = {{tb11, tb12}, {tb21, tb22}}, TILES_I8[2][2] = {{ti11, ti12}, {ti21, ti22}};

/* One C tile out: `rows` rows and `width` (16 or 8) columns into y (ldy floats a row): fp32 sums as they are
 * (bf16), or exact int32 sums rescaled as KIND_I8's VOUT does (s, c: the columns' scales and offsets; xs: the rows'
 * scales) — elementwise, so 8 lanes give the same bits as 16. */
static void tile_out(int i8, const int *acc, long rows, long width, float *y, long ldy, const float *s, const int *c,
                     const float *xs) {
    for (long i = 0; i < rows; i++)
        for (long j = 0; j < width; j += 8) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(acc + 16 * i + j));
            __m256 v = i8 ? _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(a, _mm256_loadu_si256(
                                (const __m256i *)(c + j)))), _mm256_mul_ps(_mm256_set1_ps(xs[i]), _mm256_loadu_ps(s + j)))
                          : _mm256_castsi256_ps(a);
            _mm256_storeu_ps(y + i * ldy + j, v);
        }
}

/* An AMX kind's linear as orphaned `omp for`s (see gemm_for): the rows converted into xc (round16(M) rows of
 * tile_bytes(K) int8 or tile_bytes(2 K) bytes of bf16; xs: M row scales), then the column tiles. */
static void gemm_amx_for(int i8, const float *x, long M, long K, const void *Wp, const float *scale, const int *comp,
                         long N, float *y, void *xc, float *xs) {
    long kb = i8 ? tile_bytes(K) : tile_bytes(2 * K), T = kb / TILE_BYTES, Mp = round16(M);   /* bytes a row */
    unsigned char *xb = xc;
    #pragma omp for schedule(static)
    for (long m = 0; m < Mp; m++) {
        if (m >= M)
            memset(xb + m * kb, i8 ? 128 : 0, kb);                                 /* a padding row: zeros */
        else if (i8)
            quant_row(x + m * K, K, kb, xb + m * kb, xs + m);
        else
            bf16_row(x + m * K, K, kb / 2, (unsigned short *)(xb + m * kb));
    }
    struct tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = TILE_BYTES;
        cfg.rows[i] = TILE_ROWS;
    }
    tile_config(&cfg);
    int out[4][256] __attribute__((aligned(64)));
    long blocks = (N + NB - 1) / NB, pairs = (blocks + 1) / 2;
    #pragma omp for schedule(static)
    for (long p = 0; p < pairs; p++) {
        long b = 2 * p, two_cols = b + 1 < blocks, nc = 1 + two_cols;
        const char *wa = (const char *)Wp + b * T * 1024;
        for (long m0 = 0; m0 < M; m0 += 2 * TILE_ROWS) {
            long two_rows = M - m0 > TILE_ROWS, nr = 1 + two_rows;
            (i8 ? TILES_I8 : TILES_BF16)[two_rows][two_cols]((const char *)xb + m0 * kb, kb, wa, wa + T * 1024, T, out);
            for (long r = 0; r < nr; r++)
                for (long c = 0; c < nc; c++) {
                    long m = m0 + r * TILE_ROWS, n0 = (b + c) * NB;
                    long rows = M - m < TILE_ROWS ? M - m : TILE_ROWS, width = N - n0 < NB ? N - n0 : NB;
                    tile_out(i8, out[2 * r + c], rows, width, y + m * N + n0, N, i8 ? scale + n0 : 0,
                             i8 ? comp + n0 : 0, i8 ? xs + m : 0);
                }
        }
    }
    TRELEASE();
}
#endif

/* Process permission to use the tile registers (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)), once
 * per process before any AMX kind runs: 0, or the errno (ENOSYS without AMX in this build or outside Linux). */
int chattts_amx_enable(void) {
#if HAVE_AMX && defined(CHATTTS_AMX_EMULATE)
    return 0;
#elif HAVE_AMX && defined(__linux__)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0 ? 0 : errno;
#else
    return ENOSYS;
#endif
}

/* ------------------------------------------------------------------------------------------------ a linear
 * One linear of any kind as orphaned `omp for`s (see gemm_for): KIND_BF16, KIND_I8 and the AMX kinds first convert
 * the rows into xc (xc_bytes(M, K); xs: M row scales), each row by one thread, then the tiles. */
enum { KIND_F32, KIND_Q8, KIND_F32_512, KIND_Q8_512, KIND_BF16, KIND_I8, KIND_AMX_BF16, KIND_AMX_I8, KINDS };

static long xc_bytes(long M, long K) {        /* the converted rows of any kind: pairs, quads or whole tiles */
    long units = sizeof(int) * M * 2 * quads_of(K), tiles = round16(M) * tile_bytes(2 * K);
    return units > tiles ? units : tiles;
}

static void linear_for(int kind, const float *x, long M, long K, const void *Wp, const float *scale, const int *comp,
                       long N, float *y, void *xc, float *xs) {
    (void)comp; (void)xc; (void)xs;           /* used by the kinds this compiler builds */
    switch (kind) {
    case KIND_F32: gemm_for(K16_F, K8_F, sizeof(float), x, M, K, Wp, 0, N, y); return;
    case KIND_Q8: gemm_for(K16_Q, K8_Q, 1, x, M, K, Wp, scale, N, y); return;
    case KIND_F32_512: gemm512_for(Z2_F, Z1_F, K8_F, sizeof(float), x, M, K, Wp, 0, N, y); return;
    case KIND_Q8_512: gemm512_for(Z2_Q, Z1_Q, K8_Q, 1, x, M, K, Wp, scale, N, y); return;
#if HAVE_BF16
    case KIND_BF16: {
        long P = pairs_of(K);
        #pragma omp for schedule(static)
        for (long m = 0; m < M; m++) bf16_row(x + m * K, K, 2 * P, (unsigned short *)xc + m * 2 * P);
        gemmu_for(B2, B1, B8, xc, M, P, Wp, 0, 0, 0, N, y);
        return;
    }
#endif
#if HAVE_VNNI
    case KIND_I8: {
        long Q = quads_of(K);
        #pragma omp for schedule(static)
        for (long m = 0; m < M; m++) quant_row(x + m * K, K, 4 * Q, (unsigned char *)xc + m * 4 * Q, xs + m);
        gemmu_for(V2, V1, V8, xc, M, Q, Wp, scale, comp, xs, N, y);
        return;
    }
#endif
#if HAVE_AMX
    case KIND_AMX_BF16: gemm_amx_for(0, x, M, K, Wp, 0, 0, N, y, xc, xs); return;
    case KIND_AMX_I8: gemm_amx_for(1, x, M, K, Wp, scale, comp, N, y, xc, xs); return;
#endif
    default:                                  /* a kind this build lacks: kernels.py never calls it */
        #pragma omp for schedule(static)
        for (long m = 0; m < M; m++)
            for (long n = 0; n < N; n++) y[m * N + n] = NAN;
    }
}

static int converts(int kind) {
    return kind == KIND_BF16 || kind == KIND_I8 || kind == KIND_AMX_BF16 || kind == KIND_AMX_I8;
}

/* x [M][K] fp32, Wp packed as `kind` packs it (N % 8 == 0), scale [N] (int8 kinds) or NULL, comp [N] (KIND_I8,
 * KIND_AMX_I8) or NULL, y [M][N] */
void chattts_linear(int kind, const float *x, long M, long K, const void *Wp, const float *scale, const int *comp,
                    long N, float *y, int threads) {
    if (M < 1) return;
    void *xc = converts(kind) ? malloc(xc_bytes(M, K)) : NULL;
    float *xs = converts(kind) ? malloc(sizeof(float) * M) : NULL;
    if (converts(kind) && (xc == NULL || xs == NULL)) {
        for (long i = 0; i < M * N; i++) y[i] = NAN;
    } else {
        #pragma omp parallel num_threads(threads)
        linear_for(kind, x, M, K, Wp, scale, comp, N, y, xc, xs);
    }
    free(xc);
    free(xs);
}

int chattts_kinds(void) {                     /* the kinds this build has, one bit each */
    return 1 << KIND_F32 | 1 << KIND_Q8 | 1 << KIND_F32_512 | 1 << KIND_Q8_512 | HAVE_BF16 << KIND_BF16
        | HAVE_VNNI << KIND_I8 | HAVE_AMX << KIND_AMX_BF16 | HAVE_AMX << KIND_AMX_I8;
}

/* ------------------------------------------------------------------------------------------------ attention
 * chattts_attend: for each row b (cache slot slots[b], n = lens[b] valid keys) and head h (kv head h / (H/Hkv)):
 *     s_j = scale * q[b,h] . k[slot, hk, j]   (j < n);   p_j = exp(s_j - max s);   out[b,h] = sum_j p_j v[slot, hk, j] / sum_j p_j
 * q, out [B][H][D]; k, v [slots][Hkv][S][D]; D % 8 == 0.  A row with n == 0 (padding) gets zeros.
 * Each (row, head) is computed by one thread, in a fixed order that depends on n only: a row's bits never depend
 * on the other rows of the call or on the thread count (the rows are spread over threads dynamically).  The
 * cache is read once per key for the scores and once per value: both stream. */

static inline float hsum(__m256 v) {                /* a fixed tree: (lanes 0-3 + 4-7), then pairs */
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* exp(x) for x <= 0 (Cephes' expf: range reduction by ln 2, a degree-5 polynomial; ~1 ulp), x < -87: 0 */
static inline __m256 exp_neg(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.0f);
    __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
    x = _mm256_max_ps(x, lo);
    __m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), keep);
}

/* the (row, head) pairs of one call as an orphaned `omp for` (see gemm_for); p: this thread's S + 8 floats.  The
 * cache in fp32 (attend_for) or bf16 (attend_for_b16: each key and value widened to fp32 exactly as it is read, then
 * the same arithmetic) */
#define KV_F32(p) _mm256_loadu_ps(p)
#define KV_B16(p) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define ATTEND_FOR(name, T, LOAD) \
static void name(const float *q, const T *kc, const T *vc, long B, long H, long Hkv, long S, long D, \
                 const long *slots, const long *lens, float scale, float *out, float *p) { \
    long rep = H / Hkv; \
    _Pragma("omp for schedule(dynamic, 1)") \
    for (long bh = 0; bh < B * H; bh++) { \
        long b = bh / H, h = bh % H, n = lens[b]; \
        const float *qv = q + bh * D; \
        float *o = out + bh * D; \
        if (n <= 0 || p == NULL) { \
            for (long d = 0; d < D; d++) o[d] = n <= 0 ? 0.0f : NAN; \
            continue; \
        } \
        const T *k = kc + ((slots[b] * Hkv + h / rep) * S) * D; \
        const T *v = vc + ((slots[b] * Hkv + h / rep) * S) * D; \
        float m = -INFINITY; \
        long j = 0; \
        for (; j + 4 <= n; j += 4) {                         /* scores: one 8-lane chain over d, then hsum, */ \
            __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;   /* four keys' chains side by side */ \
            for (long d = 0; d < D; d += 8) { \
                __m256 qd = _mm256_loadu_ps(qv + d); \
                c0 = _mm256_fmadd_ps(qd, LOAD(k + j * D + d), c0); \
                c1 = _mm256_fmadd_ps(qd, LOAD(k + (j + 1) * D + d), c1); \
                c2 = _mm256_fmadd_ps(qd, LOAD(k + (j + 2) * D + d), c2); \
                c3 = _mm256_fmadd_ps(qd, LOAD(k + (j + 3) * D + d), c3); \
            } \
            p[j] = hsum(c0) * scale; p[j + 1] = hsum(c1) * scale; \
            p[j + 2] = hsum(c2) * scale; p[j + 3] = hsum(c3) * scale; \
            for (long i = j; i < j + 4; i++) m = p[i] > m ? p[i] : m; \
        } \
        for (; j < n; j++) { \
            __m256 acc = _mm256_setzero_ps(); \
            for (long d = 0; d < D; d += 8) \
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(qv + d), LOAD(k + j * D + d), acc); \
            p[j] = hsum(acc) * scale; \
            m = p[j] > m ? p[j] : m; \
        } \
        for (long j = n; j < n + 8; j++) p[j] = -INFINITY;   /* the last group's lanes past n: weight 0 */ \
        __m256 mv = _mm256_set1_ps(m), lsum = _mm256_setzero_ps(); \
        for (long j = 0; j < n; j += 8) { \
            __m256 w = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(p + j), mv)); \
            _mm256_storeu_ps(p + j, w); \
            lsum = _mm256_add_ps(lsum, w); \
        } \
        float inv = 1.0f / hsum(lsum); \
        for (long d0 = 0; d0 < D; d0 += 64) {    /* values: a chain over j per 8 dims, up to 8 side by side */ \
            long nd = D - d0 < 64 ? D - d0 : 64; \
            __m256 a[8]; \
            for (long i = 0; i < 8; i++) a[i] = _mm256_setzero_ps(); \
            for (long j = 0; j < n; j++) { \
                const T *vj = v + j * D + d0; \
                __m256 w = _mm256_set1_ps(p[j]); \
                if (nd == 64) { \
                    a[0] = _mm256_fmadd_ps(w, LOAD(vj), a[0]); a[1] = _mm256_fmadd_ps(w, LOAD(vj + 8), a[1]); \
                    a[2] = _mm256_fmadd_ps(w, LOAD(vj + 16), a[2]); a[3] = _mm256_fmadd_ps(w, LOAD(vj + 24), a[3]); \
                    a[4] = _mm256_fmadd_ps(w, LOAD(vj + 32), a[4]); a[5] = _mm256_fmadd_ps(w, LOAD(vj + 40), a[5]); \
                    a[6] = _mm256_fmadd_ps(w, LOAD(vj + 48), a[6]); a[7] = _mm256_fmadd_ps(w, LOAD(vj + 56), a[7]); \
                } else { \
                    for (long i = 0; i < nd / 8; i++) a[i] = _mm256_fmadd_ps(w, LOAD(vj + 8 * i), a[i]); \
                } \
            } \
            __m256 iv = _mm256_set1_ps(inv); \
            for (long i = 0; i < nd / 8; i++) _mm256_storeu_ps(o + d0 + 8 * i, _mm256_mul_ps(a[i], iv)); \
        } \
    } \
}
ATTEND_FOR(attend_for, float, KV_F32)
ATTEND_FOR(attend_for_b16, unsigned short, KV_B16)

void chattts_attend(const float *q, const float *kc, const float *vc, long B, long H, long Hkv, long S, long D,
                    const long *slots, const long *lens, float scale, float *out, int threads) {
    #pragma omp parallel num_threads(threads)
    {
        float *p = malloc(sizeof(float) * (S + 8));              /* scores, then weights, of one (row, head) */
        attend_for(q, kc, vc, B, H, Hkv, S, D, slots, lens, scale, out, p);
        free(p);
    }
}

/* ------------------------------------------------------------------------------------------------ the step
 * chattts_step: one decode step of the whole Llama (engine/llama.py's Block.forward for every layer, then the
 * final norm) for B rows of one new token each, in one call and one OpenMP team:
 *     h = rmsnorm(x) . attn_norm;  qkv = h Wqkv;  q, k = rope(q, k at pos[b]);  cache[slot, :, pos[b]] = k, v
 *     x += attend(q over cache[slot, :, :lens[b]]) Wo;  h = rmsnorm(x) . ffn_norm;  x += (silu(gate) * up) W2
 *     out = rmsnorm(x) . norm
 * x [B][C] (the input embeddings; overwritten with the residual stream), out [B][C]; layer l's weights at
 * tab[l] (struct chattts_layer: attn_norm, ffn_norm, Wqkv, Wo, W13, W2 packed for `kind` as chattts_pack* leaves
 * them, every N a multiple of 8, their column scales (int8 kinds) and offsets (KIND_I8) or NULL); its caches at
 * kcs[l], vcs[l] ([slots][Hkv][S][D], fp32, or bf16 where kv_bf16: keys and values rounded to bf16 as they are
 * written, widened exactly as they are read);
 * cos, sin [P][D] (HF's rotate-half tables).  Every element is computed per row in a fixed order, by one thread:
 * a row's bits depend on nothing else in the call, nor on the thread count.  times (or NULL): seconds spent, added
 * to times[0] (GEMM), times[1] (attention), times[2] (the rest), as thread 0 saw them. */
#include <omp.h>
#include <stddef.h>

struct chattts_layer {                        /* engine/kernels.py's Layer mirrors it (checked at load) */
    const float *attn_norm, *ffn_norm;        /* [C] each */
    const void *w[4];                         /* Wqkv, Wo, W13, W2, packed (fp32, int8 or bf16) */
    const float *scale[4];                    /* their column scales (int8 kinds), or NULL */
    const int *comp[4];                       /* their column offsets (KIND_I8: -128 x the column's sum), or NULL */
};

static void rms_norm_row(const float *x, const float *w, long C, float eps, float *h) {   /* HF LlamaRMSNorm */
    __m256 acc = _mm256_setzero_ps();
    for (long c = 0; c < C; c += 8) {
        __m256 v = _mm256_loadu_ps(x + c);
        acc = _mm256_fmadd_ps(v, v, acc);
    }
    __m256 r = _mm256_set1_ps(1.0f / sqrtf(hsum(acc) / (float)C + eps));
    for (long c = 0; c < C; c += 8)
        _mm256_storeu_ps(h + c, _mm256_mul_ps(_mm256_loadu_ps(w + c), _mm256_mul_ps(_mm256_loadu_ps(x + c), r)));
}

static void rope_head(float *v, const float *cs, const float *sn, long D) {   /* rotate-half, in place */
    long half = D / 2;
    for (long i = 0; i < half; i++) {
        float a = v[i], b = v[i + half];
        v[i] = a * cs[i] - b * sn[i];
        v[i + half] = b * cs[i + half] + a * sn[i + half];
    }
}

static __m256 silu(__m256 x) {       /* x * sigmoid(x), sigmoid from exp(-|x|): no overflow either side */
    __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    __m256 e = exp_neg(_mm256_sub_ps(_mm256_setzero_ps(), ax));
    __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_mul_ps(x, _mm256_blendv_ps(inv, _mm256_mul_ps(e, inv), neg));
}

#define LAP(i) if (times && omp_get_thread_num() == 0) { double t1 = omp_get_wtime(); times[i] += t1 - t0; t0 = t1; }

void chattts_step(float *x, long B, long C, long H, long Hkv, long D, long F, long layers, float eps,
                  const struct chattts_layer *tab, void *const *kcs, void *const *vcs, int kv_bf16, const float *norm,
                  int kind,
                  long S, const long *slots, const long *pos, const long *lens, const float *cos, const float *sin,
                  float *out, int threads, double *times) {
    long Nqkv = (H + 2 * Hkv) * D, Kmax = C > H * D ? (C > F ? C : F) : (H * D > F ? H * D : F);
    float *h = malloc(sizeof(float) * B * (C + Nqkv + H * D + 3 * F + C));   /* h, qkv (then o), q, g, a, y */
    void *xc = converts(kind) ? malloc(xc_bytes(B, Kmax)) : NULL;                       /* rows converted */
    float *xs = converts(kind) ? malloc(sizeof(float) * B) : NULL;                      /* and their scales */
    if (h == NULL || (converts(kind) && (xc == NULL || xs == NULL))) {
        for (long i = 0; i < B * C; i++) out[i] = NAN;
        free(h);
        free(xc);
        free(xs);
        return;
    }
    float *qkv = h + B * C, *q = qkv + B * Nqkv, *g = q + B * H * D, *a = g + B * 2 * F, *y = a + B * F;
    #pragma omp parallel num_threads(threads)
    {
        double t0 = times ? omp_get_wtime() : 0;
        float *p = malloc(sizeof(float) * (S + 8));
        for (long l = 0; l < layers; l++) {
            const struct chattts_layer *t = tab + l;
            const float *const *sc = t->scale;
            const int *const *cp = t->comp;
            void *kc = kcs[l], *vc = vcs[l];
            #pragma omp for schedule(static)
            for (long b = 0; b < B; b++) rms_norm_row(x + b * C, t->attn_norm, C, eps, h + b * C);
            LAP(2)
            linear_for(kind, h, B, C, t->w[0], sc[0], cp[0], Nqkv, qkv, xc, xs);
            LAP(0)
            #pragma omp for schedule(static)
            for (long b = 0; b < B; b++) {
                float *r = qkv + b * Nqkv;
                for (long j = 0; j < H + Hkv; j++) rope_head(r + j * D, cos + pos[b] * D, sin + pos[b] * D, D);
                for (long j = 0; j < Hkv; j++) {
                    long at = ((slots[b] * Hkv + j) * S + pos[b]) * D;
                    for (long d = 0; d < D; d++) {
                        if (kv_bf16) {
                            ((unsigned short *)kc)[at + d] = bf16(r[(H + j) * D + d]);
                            ((unsigned short *)vc)[at + d] = bf16(r[(H + Hkv + j) * D + d]);
                        } else {
                            ((float *)kc)[at + d] = r[(H + j) * D + d];
                            ((float *)vc)[at + d] = r[(H + Hkv + j) * D + d];
                        }
                    }
                }
                for (long j = 0; j < H * D; j++) q[b * H * D + j] = r[j];       /* q, contiguous [B][H][D] */
            }
            LAP(2)
            if (kv_bf16)
                attend_for_b16(q, kc, vc, B, H, Hkv, S, D, slots, lens, 1.0f / sqrtf((float)D), qkv, p);
            else
                attend_for(q, kc, vc, B, H, Hkv, S, D, slots, lens, 1.0f / sqrtf((float)D), qkv, p);
            LAP(1)
            linear_for(kind, qkv, B, H * D, t->w[1], sc[1], cp[1], C, y, xc, xs);   /* qkv holds o [B][H*D] */
            LAP(0)
            #pragma omp for schedule(static)
            for (long b = 0; b < B; b++) {
                for (long c = 0; c < C; c++) x[b * C + c] += y[b * C + c];
                rms_norm_row(x + b * C, t->ffn_norm, C, eps, h + b * C);
            }
            LAP(2)
            linear_for(kind, h, B, C, t->w[2], sc[2], cp[2], 2 * F, g, xc, xs);
            LAP(0)
            #pragma omp for schedule(static)
            for (long b = 0; b < B; b++)
                for (long f = 0; f < F; f += 8) {
                    float *gr = g + b * 2 * F;
                    _mm256_storeu_ps(a + b * F + f, _mm256_mul_ps(silu(_mm256_loadu_ps(gr + f)),
                                                                    _mm256_loadu_ps(gr + F + f)));
                }
            LAP(2)
            linear_for(kind, a, B, F, t->w[3], sc[3], cp[3], C, y, xc, xs);
            LAP(0)
            #pragma omp for schedule(static)
            for (long b = 0; b < B; b++)
                for (long c = 0; c < C; c++) x[b * C + c] += y[b * C + c];
            LAP(2)
        }
        #pragma omp for schedule(static)
        for (long b = 0; b < B; b++) rms_norm_row(x + b * C, norm, C, eps, out + b * C);
        LAP(2)
        free(p);
    }
    free(h);
    free(xc);
    free(xs);
}

/* ------------------------------------------------------------------------------------------------ the ABI
 * engine/kernels.py checks these at load (a library built from another kernels.c is not used):
 * chattts_abi_version() == its ABI_VERSION, and chattts_layout(out) == what ctypes computes for its mirror of
 * struct chattts_layer and the C types it passes (every `long *` argument is an int64 tensor). */
#define CHATTTS_ABI 3
#define LAYOUT_VALUES 9

int chattts_abi_version(void) { return CHATTTS_ABI; }

long chattts_layout(long *out, long n) {       /* writes min(n, LAYOUT_VALUES) values; returns LAYOUT_VALUES */
    const long v[LAYOUT_VALUES] = {sizeof(struct chattts_layer), offsetof(struct chattts_layer, attn_norm),
        offsetof(struct chattts_layer, ffn_norm), offsetof(struct chattts_layer, w),
        offsetof(struct chattts_layer, scale), offsetof(struct chattts_layer, comp), sizeof(long), sizeof(void *),
        sizeof(float)};
    for (long i = 0; i < n && i < LAYOUT_VALUES; i++) out[i] = v[i];
    return LAYOUT_VALUES;
}
