/* The elementwise maths the native kernels share: exp, tanh and the sigmoid over float arrays, through glibc's
 * vector maths (libmvec) when the build links it (SB_LIBMVEC), else the scalar libm functions. */
#ifndef SB_VECTOR_MATHS_H
#define SB_VECTOR_MATHS_H

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__AVX512F__) && defined(SB_LIBMVEC)
#include <immintrin.h>
__m512 _ZGVeN16v_expf(__m512);
__m512 _ZGVeN16v_tanhf(__m512);
#define SB_VW 16
#elif defined(__x86_64__) && defined(__AVX2__) && defined(SB_LIBMVEC)
#include <immintrin.h>
__m256 _ZGVdN8v_expf(__m256);
__m256 _ZGVdN8v_tanhf(__m256);
#define SB_VW 8
#endif

/* x[i] = f(x[i]) over n floats, f one of SB_EXP, SB_TANH (glibc's vector maths when built with it) */
enum { SB_EXP, SB_TANH };

static void v_map(float *x, int n, int f) {
    int i = 0;
#if defined(SB_VW) && SB_VW == 16
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        _mm512_storeu_ps(x + i, f == SB_EXP ? _ZGVeN16v_expf(v) : _ZGVeN16v_tanhf(v));
    }
#elif defined(SB_VW) && SB_VW == 8
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(x + i, f == SB_EXP ? _ZGVdN8v_expf(v) : _ZGVdN8v_tanhf(v));
    }
#endif
    for (; i < n; i++) x[i] = f == SB_EXP ? expf(x[i]) : tanhf(x[i]);
}

static void v_tanh(float *x, int n) { v_map(x, n, SB_TANH); }
static void v_exp(float *x, int n) { v_map(x, n, SB_EXP); }

/* x[i] = 1 / (1 + exp(-x[i])) */
static void v_sigmoid(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = -x[i];
    v_exp(x, n);
    for (int i = 0; i < n; i++) x[i] = 1.0f / (1.0f + x[i]);
}

/* The attention's alignments from its energies in place: softmax (a NaN or +inf energy makes every alignment NaN; a
 * -inf one, a masked position, gives 0), or with smoothing sigmoid(e) / sum sigmoid(e). */
static inline void sb_normalise_energies(float *a, int T, int smoothing) {
    if (smoothing) {
        v_sigmoid(a, T);
        float sum = 0.f;
        for (int i = 0; i < T; i++) sum += a[i];
        for (int i = 0; i < T; i++) a[i] = a[i] / sum;
        return;
    }
    int clean = 1;
    float mx = -INFINITY;
    for (int i = 0; i < T; i++) {
        if (!(isfinite(a[i]) || a[i] == -INFINITY)) clean = 0;
        if (a[i] > mx) mx = a[i];
    }
    if (!clean) {
        for (int i = 0; i < T; i++) a[i] = NAN;
        return;
    }
    for (int i = 0; i < T; i++) a[i] = a[i] - mx;
    v_exp(a, T);
    float sum = 0.f;
    for (int i = 0; i < T; i++) sum += a[i];
    for (int i = 0; i < T; i++) a[i] = a[i] / sum;
}

/* An LSTM cell's update over units [lo, hi) from its pre-activation gates i, f, g, o (activated here, in place):
 * c' = f c + i g, h' = o tanh(c'), written to h_out; the state (c, h) becomes (c', h'), or with zoneout at inference
 * new * keep_new + prev * keep_old. */
static inline void sb_lstm_units(float *gi, float *gf, float *gg, float *go, float *c, float *h, int lo, int hi,
                                 float keep_new, float keep_old, int zoneout, float *h_out) {
    if (hi <= lo) return;
    v_sigmoid(gi + lo, hi - lo);
    v_sigmoid(gf + lo, hi - lo);
    v_tanh(gg + lo, hi - lo);
    v_sigmoid(go + lo, hi - lo);
    float tc[64], cnew[64];
    for (int j0 = lo; j0 < hi; j0 += 64) {
        const int j1 = j0 + 64 < hi ? j0 + 64 : hi;
        for (int j = j0; j < j1; j++) tc[j - j0] = gf[j] * c[j] + gi[j] * gg[j];
        memcpy(cnew, tc, sizeof(float) * (j1 - j0));
        v_tanh(tc, j1 - j0);
        for (int j = j0; j < j1; j++) {
            const float hn = go[j] * tc[j - j0], c_new = cnew[j - j0];
            h_out[j] = hn;
            if (zoneout) {
                c[j] = c_new * keep_new + c[j] * keep_old;
                h[j] = hn * keep_new + h[j] * keep_old;
            } else {
                c[j] = c_new;
                h[j] = hn;
            }
        }
    }
}

#endif
