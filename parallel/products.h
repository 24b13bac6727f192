/* products.h: the matrix products' jobs for the threads (parallel/products.c).
 *
 * The engine reaches this file only through kernels.h: kernels_matmuls forwards here, and
 * its contract is this function's.
 */
#ifndef PRODUCTS_H
#define PRODUCTS_H

#include <stdint.h>   /* int8_t */

#include "kernels.h"  /* KernelsProduct */

/* kernels_matmuls (kernels.h). */
void products_run(const KernelsProduct *p, int n, const float *x, int N, int IC, int8_t *xq,
                  float *xs);

#endif /* PRODUCTS_H */
