/* The register-tiled product the native kernels share: g_e += h_e . W over a block of SB_CB columns for 4 entries
 * (or 1) at a time, W read once per block of entries.  With AVX-512 the tile is 4 entries x 4 vectors of 16 floats
 * (16 of 32 registers), else 4 x 2 vectors of 8 or 4 floats.  Each sum runs over k in order. */
#ifndef SB_VECTOR_TILES_H
#define SB_VECTOR_TILES_H

#include <stddef.h>

#if defined(__AVX512F__)
#define SB_VB 64
#define SB_NV 4
#elif defined(__AVX__)
#define SB_VB 32
#define SB_NV 2
#else
#define SB_VB 16
#define SB_NV 2
#endif
typedef float sb_vf __attribute__((vector_size(SB_VB), aligned(4), __may_alias__));
#define SB_VL (SB_VB / 4)
#define SB_CB (SB_VL * SB_NV) /* columns per tile */

static inline sb_vf vload(const float *p) { return *(const sb_vf *)p; }
static inline void vstore(float *p, sb_vf v) { *(sb_vf *)p = v; }

/* g[e][off : off + SB_CB] += h[e][0 : n_k] . W[0 : n_k, 0 : SB_CB] for the 4 entries e; row k of W at W + k * stride */
static inline void sb_tile4(const float *W, size_t stride, int n_k, const float *const h[4], float *const g[4],
                            int off) {
    sb_vf a[4][SB_NV];
#pragma GCC unroll 4
    for (int e = 0; e < 4; e++)
#pragma GCC unroll 4
        for (int v = 0; v < SB_NV; v++) a[e][v] = vload(g[e] + off + v * SB_VL);
    for (int k = 0; k < n_k; k++) {
        const float *w = W + (size_t)k * stride;
        sb_vf wv[SB_NV];
#pragma GCC unroll 4
        for (int v = 0; v < SB_NV; v++) wv[v] = vload(w + v * SB_VL);
        const float s0 = h[0][k], s1 = h[1][k], s2 = h[2][k], s3 = h[3][k];
#pragma GCC unroll 4
        for (int v = 0; v < SB_NV; v++) {
            a[0][v] += s0 * wv[v];
            a[1][v] += s1 * wv[v];
            a[2][v] += s2 * wv[v];
            a[3][v] += s3 * wv[v];
        }
    }
#pragma GCC unroll 4
    for (int e = 0; e < 4; e++)
#pragma GCC unroll 4
        for (int v = 0; v < SB_NV; v++) vstore(g[e] + off + v * SB_VL, a[e][v]);
}

/* the same for one entry */
static inline void sb_tile1(const float *W, size_t stride, int n_k, const float *h, float *g, int off) {
    sb_vf a[SB_NV];
#pragma GCC unroll 4
    for (int v = 0; v < SB_NV; v++) a[v] = vload(g + off + v * SB_VL);
    for (int k = 0; k < n_k; k++) {
        const float *w = W + (size_t)k * stride;
        const float s = h[k];
#pragma GCC unroll 4
        for (int v = 0; v < SB_NV; v++) a[v] += s * vload(w + v * SB_VL);
    }
#pragma GCC unroll 4
    for (int v = 0; v < SB_NV; v++) vstore(g + off + v * SB_VL, a[v]);
}

#endif
