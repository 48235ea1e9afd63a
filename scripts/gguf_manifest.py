#!/usr/bin/python3
"""Describes a GGUF file as JSON: every metadata key with its GGUF type and value (f32 as bit
patterns, so inf and NaN survive), every tensor's name, type and shape in file order, and the
SHA-256 of all tensor data in that order. tests/model_family_parity_test.cpp rebuilds the
random-weight files of llama.cpp's test-llama-archs from this (their data is a pure function of
the seed and the tensor name) and checks the digest before comparing logits.

Usage: gguf_manifest.py FILE.gguf SEED > FILE.json
"""
import hashlib, json, struct, sys

SCALAR = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}


def main():
    path, seed = sys.argv[1], int(sys.argv[2])
    f = open(path, 'rb')
    data = f.read()
    off = 0

    def rd(fmt):
        nonlocal off
        v = struct.unpack_from('<' + fmt, data, off)[0]
        off += struct.calcsize('<' + fmt)
        return v

    def rstr():
        nonlocal off
        n = rd('Q')
        s = data[off:off + n].decode('utf-8')
        off += n
        return s

    def val(t):
        if t == 8:
            return rstr()
        if t == 9:
            et = rd('I')
            n = rd('Q')
            return [et, [val(et) for _ in range(n)]]
        if t == 6:
            return struct.unpack('<I', struct.pack('<f', rd('f')))[0]
        if t == 12:
            return struct.unpack('<Q', struct.pack('<d', rd('d')))[0]
        v = rd(SCALAR[t])
        return int(v) if t == 7 else v

    assert data[:4] == b'GGUF'
    off = 4
    rd('I')
    n_tensors, n_kv = rd('Q'), rd('Q')
    md = []
    alignment = 32
    for _ in range(n_kv):
        k = rstr()
        t = rd('I')
        v = val(t)
        if k == 'general.alignment':
            alignment = v
        md.append([k, t, v])
    tensors = []
    for _ in range(n_tensors):
        name = rstr()
        nd = rd('I')
        ne = [rd('Q') for _ in range(nd)]
        ty = rd('I')
        o = rd('Q')
        tensors.append([name, ty, ne, o])
    base = (off + alignment - 1) // alignment * alignment
    h = hashlib.sha256()
    out = []
    for name, ty, ne, o in tensors:
        n = 1
        for d in ne:
            n *= d
        size = {0: 4, 1: 2}[ty] * n
        h.update(data[base + o:base + o + size])
        out.append([name, ty, ne])
    json.dump({'seed': seed, 'metadata': md, 'tensors': out, 'sha256': h.hexdigest()}, sys.stdout,
              separators=(',', ':'))


main()
