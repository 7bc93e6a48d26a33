// Host-side stand-ins for the CUDA built-ins the kernels use, so `g++ -fsyntax-only` can check
// kernels/*.cu on a machine without CUDA (tools/check-kernels.sh, run by .ci/run). Semantics do
// not matter here: the kernels are only compiled for real by NVRTC on a GPU host.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstring>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__
struct synfire_dim3 { unsigned x, y, z; };
static thread_local synfire_dim3 blockIdx, blockDim, threadIdx, gridDim;
inline double __longlong_as_double(unsigned long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
// Atomics and intrinsics of kernels/motif.cu (sequential stand-ins).
inline long long __double_as_longlong(double d) { long long v; std::memcpy(&v, &d, 8); return v; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline double __hiloint2double(int hi, int lo) { return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo)); }
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) { auto o = *p; if (v < o) *p = v; return o; }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { auto o = *p; *p += v; return o; }
inline unsigned atomicAdd(unsigned* p, unsigned v) { auto o = *p; *p += v; return o; }
// Built-ins of kernels/bounds.cu.
inline unsigned long long atomicOr(unsigned long long* p, unsigned long long v) { auto o = *p; *p |= v; return o; }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline double atomicAdd(double* p, double v) { auto o = *p; *p += v; return o; }
// Built-ins of kernels/softdtw.cu.
struct float2 { float x, y; };
inline float2 make_float2(float x, float y) { return float2{x, y}; }
struct float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float f) { int v; std::memcpy(&v, &f, 4); return v; }
inline float atomicAdd(float* p, float v) { auto o = *p; *p += v; return o; }
using std::exp2f;
using std::log2f;
using std::fmaf;
// Device-only intrinsics, declared with CUDA's overload set so that the check with
// -D__CUDA_ARCH__ (tools/check-kernels.sh) rejects what NVRTC would reject (e.g. a shuffle of a
// struct).
#ifdef __CUDA_ARCH__
int __shfl_up_sync(unsigned, int, unsigned, int w = 32);
unsigned __shfl_up_sync(unsigned, unsigned, unsigned, int w = 32);
float __shfl_up_sync(unsigned, float, unsigned, int w = 32);
double __shfl_up_sync(unsigned, double, unsigned, int w = 32);
int __shfl_down_sync(unsigned, int, unsigned, int w = 32);
unsigned __shfl_down_sync(unsigned, unsigned, unsigned, int w = 32);
float __shfl_down_sync(unsigned, float, unsigned, int w = 32);
double __shfl_down_sync(unsigned, double, unsigned, int w = 32);
int __shfl_sync(unsigned, int, int, int w = 32);
unsigned __shfl_sync(unsigned, unsigned, int, int w = 32);
float __shfl_sync(unsigned, float, int, int w = 32);
double __shfl_sync(unsigned, double, int, int w = 32);
long long __shfl_sync(unsigned, long long, int, int w = 32);
unsigned long long __shfl_sync(unsigned, unsigned long long, int, int w = 32);
void __syncwarp(unsigned m = 0xffffffffu);
int __any_sync(unsigned, int);
#endif
// Built-ins of kernels/search.cu.
#define __shared__ static
inline void __syncthreads() {}
struct uint4 { unsigned x, y, z, w; };
// Intrinsics of kernels/shapelet.cu (single-thread stand-ins; tools/shapelet-emulation.cpp
// runs its warps with a lane-accurate shim of its own).
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
#ifndef __CUDA_ARCH__
template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned) { return v; }
template <class T> inline T __shfl_sync(unsigned, T v, int) { return v; }
inline void __syncwarp(unsigned = 0xffffffffu) {}
#endif
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) { auto o = *p; if (v > o) *p = v; return o; }
