/* The sliding layer's decode call of the 2gb preset on the CPU: 32 query heads over 16 KV heads,
 * D256, a token-major ring of 1024 rows with `live` of them taking part; the default config,
 * and explicit partitions, on 1 and 2 threads; the median of 200 calls. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gem/decode.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static int cmpd(const void*a,const void*b){double x=*(const double*)a,y=*(const double*)b;return (x>y)-(x<y);}
int main(int argc,char**argv){
  int64_t live=argc>1?atoll(argv[1]):64, cap=1024, nkv=16, nq=32, d=256;
  size_t n=(size_t)cap*nkv*d;
  float *k=aligned_alloc(64,n*4),*v=aligned_alloc(64,n*4),*q=aligned_alloc(64,nq*d*4),*o=aligned_alloc(64,nq*d*4);
  for(size_t i=0;i<n;i++){k[i]=(float)((i*7919)%1000)/1000.f-0.5f; v[i]=(float)((i*104729)%1000)/1000.f-0.5f;}
  for(int i=0;i<nq*d;i++) q[i]=(float)((i*31)%100)/100.f-0.5f;
  gem_decode_shape sh={nq,nkv,d,d,1.0f};
  gem_kv_view kv; memset(&kv,0,sizeof kv); kv.k=k; kv.v=v; kv.k_dtype=kv.v_dtype=GEM_DTYPE_F32;
  kv.k_head_stride=kv.v_head_stride=d; kv.k_token_stride=kv.v_token_stride=nkv*d; kv.live=live; kv.capacity=cap;
  int64_t parts[]={0,1,2,4,8,16,32};
  for(int th=1;th<=2;th++){
    gem_decode_ctx*ctx; if(gem_decode_ctx_create(GEM_BACKEND_CPU,th,&ctx)!=GEM_OK) return 2;
    for(size_t pi=0;pi<sizeof parts/sizeof parts[0];pi++){
      gem_decode_config cfg={GEM_ROUTE_FUSED,parts[pi],0}; gem_decode_config *pc=parts[pi]?&cfg:NULL;
      gem_decode_config def; gem_decode_config_default(ctx,&sh,live,&def);
      size_t wb; if(gem_decode_workspace_bytes(ctx,&sh,cap,pc,&wb)!=GEM_OK) {printf("ws fail\n");continue;}
      void*ws=aligned_alloc(64,(wb+63)/64*64+64);
      double t[200];
      for(int r=0;r<220;r++){double t0=now(); gem_status st=gem_decode(ctx,&sh,q,&kv,o,ws,wb,pc,NULL); double dt=now()-t0; if(st!=GEM_OK){printf("err %d\n",st);return 1;} if(r>=20)t[r-20]=dt;}
      qsort(t,200,sizeof(double),cmpd);
      printf("threads %d live %lld partitions %s%lld: median %.1f us (p10 %.1f)\n",th,(long long)live,parts[pi]?"":"default ",(long long)(parts[pi]?parts[pi]:def.partitions),t[100]*1e6,t[20]*1e6);
      free(ws);
    }
    gem_decode_ctx_destroy(ctx);
  }
  return 0;}
