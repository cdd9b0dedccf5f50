/* crl's fused per-block passes of the tiled contrastive kernel (float32).

   Each function makes one pass over a (rows x cols) block of base-2 exponents x_ij (row stride ld), where torch
   would make two or three: 2^x and its row sums, 2^x weighted by a rank-one factor, or the row sums and weighted
   column sums of 2^x without writing it. crl.objectives._native compiles this file with the system C compiler
   (-fopenmp) and calls it through ctypes. Rows are split over OpenMP threads; loaded after torch, the library
   binds to torch's own libgomp (same soname), so it uses torch's thread pool and torch.set_num_threads.

   exp2: x = k + f with k = rint(x), |f| <= 1/2; 2^f by a degree-6 polynomial (weighted least-squares fit of the
   relative error on [-1/2, 1/2], evaluated by Horner in float32: about 1e-7 relative error, as torch's exp2),
   times 2^k written into the exponent bits. x is clamped to [-127, 128]: 2^-127 and below give 0 (so do the
   -inf of left-out entries), 2^128 gives +inf. */

#include <stdint.h>
#include <string.h>
#include <math.h>

#define LANES 16
#define GROUP 16
#define MIN_PARALLEL_ROWS 128

static inline float exp2_fast(float x) {
    x = x < -127.0f ? -127.0f : x;
    x = x > 128.0f ? 128.0f : x;
    float k = rintf(x);
    float f = x - k;
    float p = 1.5345812e-4f;
    p = p * f + 1.3399931e-3f;
    p = p * f + 9.618489e-3f;
    p = p * f + 5.5503286e-2f;
    p = p * f + 2.4022646e-1f;
    p = p * f + 6.931472e-1f;
    p = p * f + 1.0f;
    int32_t bits = ((int32_t)k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* Row sum of 2^x over one row, overwriting the row with 2^x, in LANES partial sums (vectorised). */
static float exp2_row(float *row, int64_t cols) {
    float acc[LANES] = {0};
    int64_t j = 0;
    for (; j + LANES <= cols; j += LANES) {
        for (int k = 0; k < LANES; ++k) {
            float e = exp2_fast(row[j + k]);
            row[j + k] = e;
            acc[k] += e;
        }
    }
    float total = 0.0f;
    for (; j < cols; ++j) {
        row[j] = exp2_fast(row[j]);
        total += row[j];
    }
    for (int k = 0; k < LANES; ++k) total += acc[k];
    return total;
}

/* block <- 2^block, and row_sums[i] = sum_j 2^block_ij unless row_sums is NULL. */
void crl_exp2_rows(float *block, int64_t rows, int64_t cols, int64_t ld, float *row_sums) {
#pragma omp parallel for schedule(static) if (rows >= MIN_PARALLEL_ROWS)
    for (int64_t i = 0; i < rows; ++i) {
        float total = exp2_row(block + i * ld, cols);
        if (row_sums) row_sums[i] = total;
    }
}

/* block_ij <- 2^block_ij (1 + u_i v_j): the symmetric loss's weights in rank-one form. */
void crl_exp2_rank_one(float *block, int64_t rows, int64_t cols, int64_t ld, const float *u, const float *v) {
#pragma omp parallel for schedule(static) if (rows >= MIN_PARALLEL_ROWS)
    for (int64_t i = 0; i < rows; ++i) {
        float *row = block + i * ld;
        const float ui = u[i];
        for (int64_t j = 0; j < cols; ++j) row[j] = exp2_fast(row[j]) * (1.0f + ui * v[j]);
    }
}

/* Rows r0:r1 of crl_exp2_sums: row sums, and the weighted column sums added into partial (cols floats). */
static void exp2_sums_part(const float *block, int64_t r0, int64_t r1, int64_t cols, int64_t ld, const float *w,
                           float *row_sums, float *partial, float *scratch) {
    for (int64_t g = r0; g < r1; g += GROUP) {
        int64_t end = g + GROUP < r1 ? g + GROUP : r1;
        for (int64_t j = 0; j < cols; ++j) scratch[j] = 0.0f;
        for (int64_t i = g; i < end; ++i) {
            const float *row = block + i * ld;
            const float wi = w[i];
            float acc[LANES] = {0};
            int64_t j = 0;
            for (; j + LANES <= cols; j += LANES) {
                for (int k = 0; k < LANES; ++k) {
                    float e = exp2_fast(row[j + k]);
                    acc[k] += e;
                    scratch[j + k] += wi * e;
                }
            }
            float total = 0.0f;
            for (; j < cols; ++j) {
                float e = exp2_fast(row[j]);
                total += e;
                scratch[j] += wi * e;
            }
            for (int k = 0; k < LANES; ++k) total += acc[k];
            row_sums[i] = total;
        }
        for (int64_t j = 0; j < cols; ++j) partial[j] += scratch[j];
    }
}

/* row_sums[i] = sum_j 2^block_ij and col_sums[j] = sum_i w_i 2^block_ij, block unchanged. The rows are cut into
   `parts` equal ranges (whatever the number of threads, so the result does not depend on it), each with its
   own partial column sums in work (2 parts cols floats: the partial sums, then a scratch row per part). Within a
   range the column terms of GROUP rows are added in the scratch row before they join the partial sum, so that
   each column sum is a sum of short sums rather than one running sum of rows terms. */
void crl_exp2_sums(const float *block, int64_t rows, int64_t cols, int64_t ld, const float *w, float *row_sums,
                   float *col_sums, float *work, int64_t parts) {
    for (int64_t j = 0; j < parts * cols; ++j) work[j] = 0.0f;
#pragma omp parallel for schedule(static) if (parts > 1)
    for (int64_t p = 0; p < parts; ++p) {
        exp2_sums_part(block, rows * p / parts, rows * (p + 1) / parts, cols, ld, w, row_sums, work + p * cols,
                       work + (parts + p) * cols);
    }
    for (int64_t j = 0; j < cols; ++j) {
        float total = 0.0f;
        for (int64_t p = 0; p < parts; ++p) total += work[p * cols + j];
        col_sums[j] = total;
    }
}
