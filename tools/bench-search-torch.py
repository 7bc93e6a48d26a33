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

Collections larger than the GPU (`--stream N`): the collection lives in host memory (pinned
when the host allows) and every pass streams it to the GPU in chunks of 2^22 series, copies
overlapped with the products; synthetic random walks (the cost does not depend on the values):
    python3 tools/bench-search-torch.py --stream 100000000 --batch 1,100,1000
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


def stream_bench(a, dev):
    """--stream N: the brute force over a collection held in host memory (more than the GPU
    holds), streamed to the GPU chunk by chunk each pass. The collection is synthetic (random
    walks generated here, z-normalised): the brute force's cost does not depend on the values,
    and the answers are not compared."""
    n, length = a.stream, a.length
    t = time.perf_counter()
    try:
        host = torch.empty((n, length), dtype=torch.float32, pin_memory=True)
        pinned = True
    except RuntimeError:
        host = torch.empty((n, length), dtype=torch.float32)
        pinned = False
    step = 1 << 20
    for s in range(0, n, step):
        e = min(n, s + step)
        w = torch.randn((e - s, length), device=dev).cumsum(1)
        w = (w - w.mean(1, keepdim=True)) / w.std(1, unbiased=False, keepdim=True)
        host[s:e].copy_(w.cpu())
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}: {n} series of {length} "
          f"({n * length * 4 / 1e9:.0f} GB) in {'pinned' if pinned else 'pageable'} host memory "
          f"(filled in {time.perf_counter() - t:.0f} s), k = {a.k}, TF32 {'on' if a.tf32 else 'off'}")
    print()
    print("| streaming brute force | batch | passes | median pass ms | median ms/query | queries/s |")
    print("|---|---:|---:|---:|---:|---:|")
    chunk_rows = 1 << 22
    bufs = [torch.empty((chunk_rows, length), device=dev) for _ in range(2)]
    copy_stream = torch.cuda.Stream()
    for b in [int(v) for v in a.batch.split(",")]:
        q = torch.randn((b, length), device=dev).cumsum(1)
        q = (q - q.mean(1, keepdim=True)) / q.std(1, unbiased=False, keepdim=True)
        ms = []
        for _ in range(a.stream_passes):
            st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            st.record()
            best_d = best_i = None
            done = [None, None]  # per buffer: an event after the products that read it
            for c, s in enumerate(range(0, n, chunk_rows)):
                e = min(n, s + chunk_rows)
                buf = bufs[c % 2][: e - s]
                with torch.cuda.stream(copy_stream):
                    if done[c % 2] is not None:
                        copy_stream.wait_event(done[c % 2])
                    buf.copy_(host[s:e], non_blocking=pinned)
                torch.cuda.current_stream().wait_stream(copy_stream)
                d, i = knn(buf, (buf * buf).sum(1), q, a.k, max(1 << 16, min(e - s, (1 << 30) // b)))
                i = i + s
                if best_d is None:
                    best_d, best_i = d, i
                else:
                    cd, ci = torch.cat([best_d, d], 1), torch.cat([best_i, i], 1)
                    v2, j = torch.topk(cd, a.k, dim=1, largest=False)
                    best_d, best_i = v2, torch.gather(ci, 1, j)
                done[c % 2] = torch.cuda.current_stream().record_event()
            en.record()
            torch.cuda.synchronize()
            ms.append(st.elapsed_time(en))
        med = statistics.median(ms)
        print(f"| torch fp32, host -> GPU each pass | {b} | {len(ms)} | {med:.1f} | {med / b:.3f} | {b / (med / 1e3):.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?", help="what `synfire bench search --save-dir` wrote (not with --stream)")
    ap.add_argument("--stream", type=int, default=0, help="streaming mode: this many synthetic series in host memory")
    ap.add_argument("--length", type=int, default=256, help="--stream: samples per series")
    ap.add_argument("--stream-passes", type=int, default=2, help="--stream: timed passes per batch size")
    ap.add_argument("--batch", default="1,100,10000")
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--tf32", action="store_true", help="allow TF32 matrix products (inexact)")
    ap.add_argument("--device", default="cuda", help="cuda (CUDA events) or cpu (wall clock; to try the script)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    if a.stream:
        stream_bench(a, torch.device("cuda"))
        return
    if a.dir is None:
        ap.error("give the directory `synfire bench search --save-dir` wrote, or --stream N")
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
