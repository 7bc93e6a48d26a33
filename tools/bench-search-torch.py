#!/usr/bin/env python3
"""The GPU brute force a lab with PyTorch would write, on the data `synfire bench search
--batch ... --save-dir DIR` saved: exact fp32 k-NN (matrix product + top-k, the collection
resident in GPU memory), timed with CUDA events at the same batch sizes, for the side-by-side
table in docs/search.md. Never a test dependency.

Distances: ||q||^2 + ||x||^2 - 2 q.x in fp32 (TF32 off unless --tf32), the collection cut into
chunks so that a chunk's distance matrix stays under 4 GiB; top-k per chunk, then merged. The
answers are compared with synfire's exact ones (answers.json): fp32 cancellation can swap
near-ties, so mismatches are reported with the relative gap between the two distances.

Usage (on a GPU host with torch):
    synfire bench search --series 10000000 --batch 1,100,10000 --save-dir /tmp/sb
    python3 tools/bench-search-torch.py /tmp/sb --batch 1,100,10000

Prints one Markdown row per batch size: batches, median batch ms, median ms per query,
queries/s, and how many answers equal synfire's.
"""
import argparse
import json
import os
import statistics

import time

import numpy as np
import torch


def knn(x, xx, q, k, chunk):
    """Exact-in-fp32 k nearest rows of x (n, L) for each row of q (B, L): (dist2, ids)."""
    qq = (q * q).sum(1, keepdim=True)
    best_d = best_i = None
    for s in range(0, x.shape[0], chunk):
        e = min(s + chunk, x.shape[0])
        d = torch.addmm(xx[s:e].unsqueeze(0), q, x[s:e].T, beta=1.0, alpha=-2.0) + qq
        v, i = torch.topk(d, min(k, e - s), dim=1, largest=False)
        i = i + s
        if best_d is None:
            best_d, best_i = v, i
        else:
            cd = torch.cat([best_d, v], 1)
            ci = torch.cat([best_i, i], 1)
            v2, j = torch.topk(cd, k, dim=1, largest=False)
            best_d, best_i = v2, torch.gather(ci, 1, j)
    return best_d, best_i


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--batch", default="1,100,10000")
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--tf32", action="store_true", help="allow TF32 matrix products (inexact)")
    ap.add_argument("--device", default="cuda", help="cuda (CUDA events) or cpu (wall clock; to try the script)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    meta = json.load(open(os.path.join(a.dir, "answers.json")))
    n, length, nq = meta["series"], meta["length"], meta["queries"]
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    x = torch.from_numpy(np.fromfile(os.path.join(a.dir, "series.f32"), dtype="<f4").reshape(n, length)).to(dev)
    xx = (x * x).sum(1)
    qs = torch.from_numpy(np.fromfile(os.path.join(a.dir, "queries.f32"), dtype="<f4").reshape(nq, length)).to(dev)
    name = torch.cuda.get_device_name() if cuda else "the CPU"
    print(f"torch {torch.__version__} on {name}: {n} series of {length}, "
          f"{nq} queries, k = {a.k}, TF32 {'on' if a.tf32 else 'off'}")
    print()
    print("| brute force | batch | batches | median batch ms | median ms/query | queries/s | answers equal synfire's |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for b in [int(v) for v in a.batch.split(",")]:
        chunk = max(1 << 16, min(n, (1 << 30) // b))
        runs = max(1, 1000 // b)
        knn(x, xx, qs[: min(b, nq)], a.k, chunk)  # warm-up
        if cuda:
            torch.cuda.synchronize()
        ms, same, total, worst = [], 0, 0, 0.0
        for r in range(runs):
            first = (r * b) % nq
            q = qs[first : min(first + b, nq)]
            if cuda:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                d, i = knn(x, xx, q, a.k, chunk)
                e.record()
                torch.cuda.synchronize()
                ms.append(s.elapsed_time(e))
            else:
                t = time.perf_counter()
                d, i = knn(x, xx, q, a.k, chunk)
                ms.append((time.perf_counter() - t) * 1e3)
            ids = i.cpu().tolist()
            for j, row in enumerate(ids):
                want = meta["ids"][first + j]
                total += 1
                if row == want:
                    same += 1
                else:
                    got_d = meta["distances"][first + j]
                    # The gap between the two answers' exact distances (synfire's, recomputed in f64).
                    qv = q[j].double()
                    alt = [float(torch.linalg.vector_norm(x[t].double() - qv)) for t in row]
                    gap = max(abs(u - w) / max(w, 1e-12) for u, w in zip(alt, got_d))
                    worst = max(worst, gap)
        med = statistics.median(ms)
        print(f"| torch fp32 matmul + top-k | {b} | {runs} | {med:.3f} | {med / b:.4f} | "
              f"{total / (sum(ms) / 1e3):.0f} | {same} of {total}"
              + (f" (others: near-ties, largest relative distance gap {worst:.1e})" if same < total else "") + " |")


if __name__ == "__main__":
    main()
