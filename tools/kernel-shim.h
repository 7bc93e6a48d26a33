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
#define __restrict__
struct synfire_dim3 { unsigned x, y, z; };
static synfire_dim3 blockIdx, blockDim, threadIdx, gridDim;
inline double __longlong_as_double(unsigned long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
// Atomics and intrinsics of kernels/motif.cu (sequential stand-ins).
inline long long __double_as_longlong(double d) { long long v; std::memcpy(&v, &d, 8); return v; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) { auto o = *p; if (v < o) *p = v; return o; }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { auto o = *p; *p += v; return o; }
inline unsigned atomicAdd(unsigned* p, unsigned v) { auto o = *p; *p += v; return o; }
inline double atomicAdd(double* p, double v) { auto o = *p; *p += v; return o; }
// Intrinsics of kernels/shapelet.cu (single-thread stand-ins; tools/shapelet-emulation.cpp
// runs its warps with a lane-accurate shim of its own).
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned) { return v; }
template <class T> inline T __shfl_sync(unsigned, T v, int) { return v; }
inline void __syncwarp(unsigned = 0xffffffffu) {}
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) { auto o = *p; if (v > o) *p = v; return o; }
