/* The CPU decode step's kernels with AVX2 + FMA (engine/kernels.py builds and loads this file;
 * SPDX-License-Identifier: AGPL-3.0-or-later): chattts_gemm, a linear layer in fp32 (chattts_gemm_q8: int8
 * weights with a scale per output column, fp32 activations and sums), chattts_attend, attention of one query
 * per row over the row's own prefix of the KV cache, and chattts_step, a decode step of the whole Llama built
 * from those two (at the end of this file).
 *
 * chattts_gemm: y[M][N] = x[M][K] . W[N][K]^T.
 * W is packed once into blocks of 16 output columns, each K-major: Wp[n0 .. n0+16)[k] at Wp + n0*K + 16*k (a last
 * block of 8 when N % 16 == 8).  A thread takes a contiguous range of column blocks and streams its weights once
 * per call; inside a block, rows go in chunks of up to 6 (6 rows x 16 columns = 12 ymm accumulators).
 *
 * Every output element is one chain of fused multiply-adds over k = 0 .. K-1, in order, from zero: the same
 * instructions whatever M is, whichever chunk the row lands in and however many threads split the columns.  So a
 * row's result never depends on the other rows of the call (batch invariance without padding), nor on the
 * thread count.  (No -ffast-math: the compiler may not reorder the chain.)  Int8 weights convert to float exactly,
so the same holds for chattts_gemm_q8; its column scale multiplies the finished sum.
 */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>

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

static void gemm(const kernel *k16, const kernel *k8, long bytes, const float *x, long M, long K, const char *Wp,
                 const float *scale, long N, float *y, int threads) {
    #pragma omp parallel num_threads(threads)
    gemm_for(k16, k8, bytes, x, M, K, Wp, scale, N, y);
}

void chattts_gemm(const float *x, long M, long K, const float *Wp, long N, float *y, int threads) {
    gemm(K16_F, K8_F, sizeof(float), x, M, K, (const char *)Wp, 0, N, y, threads);
}

/* int8 weights (per output column: W ~ scale[n] * Wq[n]); activations stay fp32: y = scale * (x . Wq^T) */
void chattts_gemm_q8(const float *x, long M, long K, const signed char *Wp, const float *scale, long N, float *y,
                     int threads) {
    gemm(K16_Q, K8_Q, 1, x, M, K, (const char *)Wp, scale, N, y, threads);
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

/* the (row, head) pairs of one call as an orphaned `omp for` (see gemm_for); p: this thread's S + 8 floats */
static void attend_for(const float *q, const float *kc, const float *vc, long B, long H, long Hkv, long S, long D,
                       const long *slots, const long *lens, float scale, float *out, float *p) {
    long rep = H / Hkv;
    #pragma omp for schedule(dynamic, 1)
    for (long bh = 0; bh < B * H; bh++) {
        long b = bh / H, h = bh % H, n = lens[b];
        const float *qv = q + bh * D;
        float *o = out + bh * D;
        if (n <= 0 || p == NULL) {
            for (long d = 0; d < D; d++) o[d] = n <= 0 ? 0.0f : NAN;
            continue;
        }
        const float *k = kc + ((slots[b] * Hkv + h / rep) * S) * D;
        const float *v = vc + ((slots[b] * Hkv + h / rep) * S) * D;
        float m = -INFINITY;
        for (long j = 0; j < n; j++) {                       /* scores: one 8-lane chain over d, then hsum */
            __m256 acc = _mm256_setzero_ps();
            for (long d = 0; d < D; d += 8)
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(qv + d), _mm256_loadu_ps(k + j * D + d), acc);
            p[j] = hsum(acc) * scale;
            m = p[j] > m ? p[j] : m;
        }
        for (long j = n; j < n + 8; j++) p[j] = -INFINITY;   /* the last group's lanes past n: weight 0 */
        __m256 mv = _mm256_set1_ps(m), lsum = _mm256_setzero_ps();
        for (long j = 0; j < n; j += 8) {
            __m256 w = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(p + j), mv));
            _mm256_storeu_ps(p + j, w);
            lsum = _mm256_add_ps(lsum, w);
        }
        float inv = 1.0f / hsum(lsum);
        for (long d0 = 0; d0 < D; d0 += 32) {                 /* values: up to 4 accumulators of 8 dims */
            long nd = D - d0 < 32 ? D - d0 : 32;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (long j = 0; j < n; j++) {
                const float *vj = v + j * D + d0;
                __m256 w = _mm256_set1_ps(p[j]);
                a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj), a0);
                if (nd > 8) a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 8), a1);
                if (nd > 16) a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 16), a2);
                if (nd > 24) a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 24), a3);
            }
            __m256 iv = _mm256_set1_ps(inv);
            _mm256_storeu_ps(o + d0, _mm256_mul_ps(a0, iv));
            if (nd > 8) _mm256_storeu_ps(o + d0 + 8, _mm256_mul_ps(a1, iv));
            if (nd > 16) _mm256_storeu_ps(o + d0 + 16, _mm256_mul_ps(a2, iv));
            if (nd > 24) _mm256_storeu_ps(o + d0 + 24, _mm256_mul_ps(a3, iv));
        }
    }
}

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
 * tab[l] (struct chattts_layer: attn_norm, ffn_norm, Wqkv, Wo, W13, W2 packed as chattts_pack(_q8) leaves them,
 * every N a multiple of 8, and their column scales (q8) or NULL x 4); its caches at kcs[l], vcs[l]
 * ([slots][Hkv][S][D] fp32);
 * cos, sin [P][D] (HF's rotate-half tables).  Every element is computed per row in a fixed order, by one thread:
 * a row's bits depend on nothing else in the call, nor on the thread count.  times (or NULL): seconds spent, added
 * to times[0] (GEMM), times[1] (attention), times[2] (the rest), as thread 0 saw them. */
#include <omp.h>
#include <stddef.h>

struct chattts_layer {                        /* engine/kernels.py's Layer mirrors it (checked at load) */
    const float *attn_norm, *ffn_norm;        /* [C] each */
    const void *w[4];                         /* Wqkv, Wo, W13, W2, packed (fp32 or int8) */
    const float *scale[4];                    /* their column scales (int8), or NULL */
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
                  const struct chattts_layer *tab, float *const *kcs, float *const *vcs, const float *norm, int q8,
                  long S, const long *slots, const long *pos, const long *lens, const float *cos, const float *sin,
                  float *out, int threads, double *times) {
    const kernel *k16 = q8 ? K16_Q : K16_F, *k8 = q8 ? K8_Q : K8_F;
    long bytes = q8 ? 1 : sizeof(float), Nqkv = (H + 2 * Hkv) * D;
    float *h = malloc(sizeof(float) * B * (C + Nqkv + H * D + 3 * F + C));   /* h, qkv (then o), q, g, a, y */
    if (h == NULL) {
        for (long i = 0; i < B * C; i++) out[i] = NAN;
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
            float *kc = kcs[l], *vc = vcs[l];
            #pragma omp for schedule(static)
            for (long b = 0; b < B; b++) rms_norm_row(x + b * C, t->attn_norm, C, eps, h + b * C);
            LAP(2)
            gemm_for(k16, k8, bytes, h, B, C, t->w[0], sc[0], Nqkv, qkv);
            LAP(0)
            #pragma omp for schedule(static)
            for (long b = 0; b < B; b++) {
                float *r = qkv + b * Nqkv;
                for (long j = 0; j < H + Hkv; j++) rope_head(r + j * D, cos + pos[b] * D, sin + pos[b] * D, D);
                for (long j = 0; j < Hkv; j++) {
                    long at = ((slots[b] * Hkv + j) * S + pos[b]) * D;
                    for (long d = 0; d < D; d++) {
                        kc[at + d] = r[(H + j) * D + d];
                        vc[at + d] = r[(H + Hkv + j) * D + d];
                    }
                }
                for (long j = 0; j < H * D; j++) q[b * H * D + j] = r[j];       /* q, contiguous [B][H][D] */
            }
            LAP(2)
            attend_for(q, kc, vc, B, H, Hkv, S, D, slots, lens, 1.0f / sqrtf((float)D), qkv, p);
            LAP(1)
            gemm_for(k16, k8, bytes, qkv, B, H * D, t->w[1], sc[1], C, y);   /* qkv holds o [B][H*D] */
            LAP(0)
            #pragma omp for schedule(static)
            for (long b = 0; b < B; b++) {
                for (long c = 0; c < C; c++) x[b * C + c] += y[b * C + c];
                rms_norm_row(x + b * C, t->ffn_norm, C, eps, h + b * C);
            }
            LAP(2)
            gemm_for(k16, k8, bytes, h, B, C, t->w[2], sc[2], 2 * F, g);
            LAP(0)
            #pragma omp for schedule(static)
            for (long b = 0; b < B; b++)
                for (long f = 0; f < F; f += 8) {
                    float *gr = g + b * 2 * F;
                    _mm256_storeu_ps(a + b * F + f, _mm256_mul_ps(silu(_mm256_loadu_ps(gr + f)),
                                                                    _mm256_loadu_ps(gr + F + f)));
                }
            LAP(2)
            gemm_for(k16, k8, bytes, a, B, F, t->w[3], sc[3], C, y);
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
}

/* ------------------------------------------------------------------------------------------------ the ABI
 * engine/kernels.py checks these at load (a library built from another kernels.c is not used):
 * chattts_abi_version() == its ABI_VERSION, and chattts_layout(out) == what ctypes computes for its mirror of
 * struct chattts_layer and the C types it passes (every `long *` argument is an int64 tensor). */
#define CHATTTS_ABI 1
#define LAYOUT_VALUES 8

int chattts_abi_version(void) { return CHATTTS_ABI; }

long chattts_layout(long *out, long n) {       /* writes min(n, LAYOUT_VALUES) values; returns LAYOUT_VALUES */
    const long v[LAYOUT_VALUES] = {sizeof(struct chattts_layer), offsetof(struct chattts_layer, attn_norm),
        offsetof(struct chattts_layer, ffn_norm), offsetof(struct chattts_layer, w),
        offsetof(struct chattts_layer, scale), sizeof(long), sizeof(void *), sizeof(float)};
    for (long i = 0; i < n && i < LAYOUT_VALUES; i++) out[i] = v[i];
    return LAYOUT_VALUES;
}
