/* Darknet's stock CPU kernels (tests/kernels_stock.c). */
#ifndef KERNELS_STOCK_H
#define KERNELS_STOCK_H
#include "activations.h"
#include "maxpool_layer.h"

void stock_im2col_cpu(float *data_im, int channels, int height, int width,
                      int ksize, int stride, int pad, float *data_col);
void stock_col2im_cpu(float *data_col, int channels, int height, int width,
                      int ksize, int stride, int pad, float *data_im);
void stock_forward_maxpool_layer(const maxpool_layer l, network net);
void stock_activate_array(float *x, const int n, const ACTIVATION a);
void stock_gradient_array(const float *x, const int n, const ACTIVATION a, float *delta);
#endif
