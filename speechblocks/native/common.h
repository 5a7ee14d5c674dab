/* What the native steps share besides the maths (vector_maths.h) and the tiles (vector_tiles.h): the limits their
 * structs and stacks are sized by, the split of work between threads, the pre-net's relu and dropout, and the layout
 * tables the loader (speechblocks/native/_build.py) checks its ctypes mirrors against. */
#ifndef SB_COMMON_H
#define SB_COMMON_H

#include <stddef.h>

#define SB_MAX_LAYERS 8    /* LSTM and pre-net layers (speechblocks.native.MAX_LAYERS) */
#define SB_MAX_UNITS 1024  /* attention units (MAX_ATTENTION_UNITS) */
#define SB_MAX_BATCH 1024  /* entries of a batched step (batch_loop.MAX_BATCH) */

/* [lo, hi) of n items for thread t of nt, in multiples of `align` */
static inline void sb_share(int n, int t, int nt, int align, int *lo, int *hi) {
    int per = (n + nt - 1) / nt;
    per = (per + align - 1) / align * align;
    int a = t * per, b = a + per;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

/* A pre-net unit after its dense layer: relu (keeping NaN), then dropout: kept where the draw is >= rate (or the
 * keep-mask is non-zero, keep_given), scaled by 1 / (1 - rate) when rate > 0; a dropped unit is 0. */
static inline float sb_prenet_unit(float y, float draw, int keep_given, float rate, float scale) {
    const float v = y > 0.f ? y : (y == y ? 0.f : y);
    const int keep = keep_given ? draw != 0.f : draw >= rate;
    const float kept = rate == 0.f ? v : v * scale;
    return keep ? kept : 0.f;
}

/* A struct's layout as the loader reads it: {field name, offset} per field, closed by {NULL, sizeof}; the limits as
 * {name, value}, closed by {NULL, 0}. */
typedef struct {
    const char *name;
    long value;
} sb_layout_entry;

#define SB_FIELD(type, field) {#field, (long)offsetof(type, field)}
#define SB_END(type) {NULL, (long)sizeof(type)}
/* the fields sb_decoder (decoder_step.c) and sb_batch_decoder (decoder_batch.c) both have (the batched one has no
 * layout flags: its kernels are packed), for their layout tables */
#define SB_DECODER_FIELDS(T)                                                                                     \
    SB_FIELD(T, layers), SB_FIELD(T, units), SB_FIELD(T, input0), SB_FIELD(T, lstm_w), SB_FIELD(T, lstm_b),      \
        SB_FIELD(T, gate_i), SB_FIELD(T, gate_f), SB_FIELD(T, gate_g), SB_FIELD(T, gate_o), SB_FIELD(T, keep_new), \
        SB_FIELD(T, keep_old), SB_FIELD(T, zoneout), SB_FIELD(T, prenet_layers), SB_FIELD(T, num_mels),            \
        SB_FIELD(T, prenet_sizes), SB_FIELD(T, prenet_w), SB_FIELD(T, prenet_b), SB_FIELD(T, drop_rate),           \
        SB_FIELD(T, drop_scale), SB_FIELD(T, att_units), SB_FIELD(T, max_time), SB_FIELD(T, memory_size),          \
        SB_FIELD(T, kernel), SB_FIELD(T, pad_before), SB_FIELD(T, smoothing), SB_FIELD(T, cumulate),               \
        SB_FIELD(T, query_w), SB_FIELD(T, location_wt), SB_FIELD(T, v_a), SB_FIELD(T, keys_t),                     \
        SB_FIELD(T, values), SB_FIELD(T, score_bias), SB_FIELD(T, proj_rows), SB_FIELD(T, frame_size),             \
        SB_FIELD(T, r), SB_FIELD(T, stop_at_any), SB_FIELD(T, proj_w), SB_FIELD(T, proj_b), SB_FIELD(T, threads)

#endif
