#!/usr/bin/env bash
# The licence part of deny.toml, checked without cargo-deny (not installed in CI; see
# docs/adr/0003-dependency-policy.md). Fails when a package of Cargo.lock (every platform)
#   - has a licence expression with an identifier (`MIT`, `Apache-2.0 WITH LLVM-exception`, ...)
#     that is neither in deny.toml's [licenses] allow list nor in an `exceptions` entry for
#     that crate, or
#   - declares no `license` and has no [[licenses.clarify]] entry in deny.toml, or its
#     clarified licence file no longer has the hash recorded there.
# Stricter than cargo-deny on purpose: every identifier must be listed, even one that only
# appears as an alternative (`MIT OR LGPL-2.1-or-later`), so a new licence is always looked at.
# Not checked here: advisories, bans, sources (cargo-deny does those), licence texts.
#
# Needs: cargo, python3 >= 3.11 (tomllib). `cargo metadata` resolves every platform's packages,
# so it downloads the few Windows-only crates once if the registry cache lacks them.
set -euo pipefail
cd "$(dirname "$0")/.."

meta=$(mktemp)
trap 'rm -f "$meta"' EXIT
cargo metadata --format-version 1 --locked > "$meta"

python3 - "$meta" <<'PY'
import json, re, sys, tomllib
from pathlib import Path


def xxh32(data, seed=0):
    """xxHash32, the hash cargo-deny records for clarified licence files."""
    p1, p2, p3, p4, p5, m = 2654435761, 2246822519, 3266489917, 668265263, 374761393, 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & m

    def word(i):
        return int.from_bytes(data[i:i + 4], 'little')

    n, i = len(data), 0
    if n >= 16:
        v = [(seed + p1 + p2) & m, (seed + p2) & m, seed & m, (seed - p1) & m]
        while i + 16 <= n:
            v = [(rotl((v[k] + word(i + 4 * k) * p2) & m, 13) * p1) & m for k in range(4)]
            i += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & m
    else:
        h = (seed + p5) & m
    h = (h + n) & m
    while i + 4 <= n:
        h = (rotl((h + word(i) * p3) & m, 17) * p4) & m
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & m, 11) * p1) & m
        i += 1
    for shift, mul in ((15, p2), (13, p3), (16, 1)):
        h = ((h ^ (h >> shift)) * mul) & m
    return h


def file_hash(path):
    """cargo-deny's hash of a licence file: every line ending normalised to one newline."""
    lines = path.read_bytes().split(b'\n')
    if lines and lines[-1] == b'':
        lines.pop()
    return xxh32(b''.join(line.rstrip(b'\r') + b'\n' for line in lines))


def terms(expression):
    """The licences of an SPDX expression (`X WITH Y` is one term; `/` is an old-style OR)."""
    words = re.findall(r'[()]|[^\s()/]+', expression)
    out, i = [], 0
    while i < len(words):
        if words[i] in ('(', ')', 'AND', 'OR'):
            i += 1
        elif i + 2 < len(words) and words[i + 1] == 'WITH':
            out.append(f'{words[i]} WITH {words[i + 2]}')
            i += 3
        else:
            out.append(words[i])
            i += 1
    return out


deny = tomllib.loads(Path('deny.toml').read_text())['licenses']
allow = set(deny['allow'])
exceptions = {e['crate']: set(e['allow']) for e in deny.get('exceptions', [])}
clarify = {c['crate']: c for c in deny.get('clarify', [])}

packages = json.loads(Path(sys.argv[1]).read_text())['packages']
failures, used = [], set()
for p in sorted(packages, key=lambda p: (p['name'], p['version'])):
    who = f"{p['name']} {p['version']}"
    expression = p.get('license')
    if not expression:
        c = clarify.get(p['name'])
        if c is None:
            failures.append(f'{who}: no `license` in its manifest and no [[licenses.clarify]]')
            continue
        root = Path(p['manifest_path']).parent
        for f in c.get('license-files', []):
            got = file_hash(root / f['path'])
            if got != f['hash']:
                failures.append(f"{who}: {f['path']} hashes to {got:#010x}, deny.toml records "
                                f"{f['hash']:#010x}: read the new licence, then update deny.toml")
        expression = c['expression']
    found = terms(expression)
    used.update(t for t in found if t in allow)
    bad = sorted({t for t in found if t not in allow | exceptions.get(p['name'], set())})
    if bad:
        failures.append(f'{who}: "{expression}": not allowed by deny.toml: {", ".join(bad)}')

for f in failures:
    print(f'check-licences: {f}', file=sys.stderr)
unused = sorted(allow - used)
if unused:
    print(f'check-licences: note: allowed but used by no package: {", ".join(unused)}',
          file=sys.stderr)
if failures:
    sys.exit(1)
print(f'check-licences: ok: {len(packages)} packages; licences {", ".join(sorted(used))}',
      file=sys.stderr)
PY
