/* The elementwise maths the native kernels share: exp, tanh and the sigmoid over float arrays, through glibc's
 * vector maths (libmvec) when the build links it (SB_LIBMVEC), else the scalar libm functions. */
#ifndef SB_VECTOR_MATHS_H
#define SB_VECTOR_MATHS_H

#include <math.h>

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

#endif
