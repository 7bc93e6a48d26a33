#!/usr/bin/env bash
# Syntax- and type-checks kernels/*.cu with the host C++ compiler and tools/kernel-shim.h, so a
# typo in a kernel fails here rather than in NVRTC on a GPU host. Templates are instantiated by
# the kernel macros, so their bodies are checked too. Then tools/kernel-emulation.cpp runs the
# device code on the host and checks MTPE against PTPE and PreElim, and
# tools/search-emulation.cpp checks the SING lower-bound kernel against a plain loop.
# tools/shapelet-emulation.cpp runs the shapelet kernels' warps lane by lane and checks them
# against the canonical shapelet definitions. tools/bounds-emulation.cpp checks the join-bound
# kernels (the threshold search of `spectrum`) against plain definitions. tools/ends-emulation.cpp
# checks the ends-based exact count (kernels/ends.cu) against every occurrence enumerated.
# The kernels include kernels/common.cuh (shared helpers) by a relative #include, which g++
# resolves next to each file; NVRTC gets it inlined by src/device/kernels.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
for f in kernels/*.cu; do
  g++ -std=c++17 -fsyntax-only -Wall -Wno-unused-variable -Wno-unknown-pragmas -include tools/kernel-shim.h -x c++ "$f"
  g++ -std=c++17 -fsyntax-only -D__CUDA_ARCH__=900 -Wall -Wno-unused-variable -Wno-unknown-pragmas -include tools/kernel-shim.h -x c++ "$f"
  echo "ok: $f"
done
# episodes.cu is also compiled one episode size at a time (-DSYNFIRE_ONLY_N=n).
g++ -std=c++17 -fsyntax-only -DSYNFIRE_ONLY_N=3 -Wall -Wno-unused-variable -Wno-unknown-pragmas -include tools/kernel-shim.h -x c++ kernels/episodes.cu
echo "ok: kernels/episodes.cu with SYNFIRE_ONLY_N=3"
g++ -std=c++17 -O2 -Wall -Wno-unknown-pragmas -Wno-unused-variable -Wno-misleading-indentation -I. -o "${TMPDIR:-/tmp}/synfire-kernel-emulation" tools/kernel-emulation.cpp
"${TMPDIR:-/tmp}/synfire-kernel-emulation"
g++ -std=c++20 -O2 -Wall -Wno-unknown-pragmas -Wno-unused-variable -I. -pthread -o "${TMPDIR:-/tmp}/synfire-softdtw-emulation" tools/softdtw-emulation.cpp
"${TMPDIR:-/tmp}/synfire-softdtw-emulation"
g++ -std=c++17 -O2 -ffp-contract=off -Wall -Wno-unknown-pragmas -Wno-unused-variable -I. -o "${TMPDIR:-/tmp}/synfire-search-emulation" tools/search-emulation.cpp
"${TMPDIR:-/tmp}/synfire-search-emulation"
g++ -std=c++20 -O2 -ffp-contract=off -Wall -Wno-unknown-pragmas -Wno-unused-variable -I. -o "${TMPDIR:-/tmp}/synfire-shapelet-emulation" tools/shapelet-emulation.cpp
"${TMPDIR:-/tmp}/synfire-shapelet-emulation"
g++ -std=c++17 -O2 -ffp-contract=off -Wall -Wno-unknown-pragmas -Wno-unused-variable -I. -o "${TMPDIR:-/tmp}/synfire-bounds-emulation" tools/bounds-emulation.cpp
"${TMPDIR:-/tmp}/synfire-bounds-emulation"
g++ -std=c++17 -O2 -ffp-contract=off -Wall -Wno-unknown-pragmas -Wno-unused-variable -I. -o "${TMPDIR:-/tmp}/synfire-ends-emulation" tools/ends-emulation.cpp
"${TMPDIR:-/tmp}/synfire-ends-emulation"
