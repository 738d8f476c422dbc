/* The microbenchmark of abba.txt: 32 Q8_0 matrices of R x 1024 (R = argv[1]) through mv() on
 * an mpool of argv[2] threads, 20 repetitions; prints the best and the mean GB/s. From the
 * repository root, A with the old matvec.c compiled in, B with the library's:
 *   gcc -O3 -march=native -std=c11 -Iinclude -Isrc/model -Isrc mv_bench.c [matvec_old.c] \
 *       build/libgemmodel.a build/libgem.a -lpthread -lm -o mv_bench */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gem/gguf.h"
#include "matvec.h"
#include "mpool.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(int argc,char**argv){
  int64_t rows=argc>1?atoll(argv[1]):8192, cols=1024; int nmat=32;
  size_t rb; gem_gguf_row_bytes(GEM_GGUF_Q8_0, cols, &rb);
  float *src=malloc(cols*4); float *x=aligned_alloc(64,cols*4); float *y=aligned_alloc(64,rows*4);
  for(int i=0;i<cols;i++){x[i]=(float)((i*7919)%1000)/1000.f-0.5f;}
  gem_matrix m[32];
  for(int k=0;k<nmat;k++){ uint8_t *d=malloc(rows*rb);
    for(int64_t r=0;r<rows;r++){ for(int i=0;i<cols;i++) src[i]=(float)(((r*131+i*17+k)%255)-127)/127.f; gem_gguf_quantize(GEM_GGUF_Q8_0,src,d+r*rb,cols);}
    m[k]=(gem_matrix){d,GEM_GGUF_Q8_0,rows,cols,rb};}
  mpool *p; mpool_create(atoi(argv[2]),&p);
  double best=1e9, tot=0; int reps=20;
  for(int rep=0;rep<reps;rep++){ double t0=now(); for(int k=0;k<nmat;k++) mv(p,&m[k],x,y); double t=now()-t0; tot+=t; if(t<best)best=t;}
  double bytes=(double)nmat*rows*rb;
  printf("rows %lld: best %.2f ms for %.1f MB: %.2f GB/s (mean %.2f GB/s)\n",(long long)rows,best*1e3,bytes/1e6,bytes/best/1e9,bytes*reps/tot/1e9);
  return 0;}
