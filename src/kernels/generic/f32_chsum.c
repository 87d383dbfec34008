/* Channel sums in double, four lanes by row mod 4, portable C. Contract in ../kernels.h. */
#include "../kernels.h"

void nconv_f32_chsum__generic(int64_t rows, int64_t cols, const float *x, int64_t ld, double *lane, int64_t ls) {
    for (int64_t i = 0; i < rows; i++, x += ld) {
        double *l = lane + (i % 4) * ls;
        for (int64_t j = 0; j < cols; j++) l[j] += x[j];
    }
}
