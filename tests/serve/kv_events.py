#!/usr/bin/python3
"""KV events of a real `hinge serve --kv-events` (cluster/kv_event_publisher.h), decoded by a
subscriber written from vLLM's field lists (vllm/distributed/kv_events.py) with Debian's
python3-zmq and python3-msgpack, strictly: every frame, every field's type and count, nothing
extra. A small KV cache (64 blocks) and 40 distinct prompts force evictions; a reset clears it.

Checked: three frames per message (topic kv@HOST:PORT@MODEL, an 8-byte big-endian sequence
number, the payload); sequence numbers contiguous from 0 (the first batch opens with
AllBlocksCleared; the subscriber joins late and gets the start from the replay socket); a
stored block's parent was announced before it; a removed hash was stored; applying every event
in order leaves exactly the hashes the server holds (/v1/stats kv.cached_hashes), so every
eviction had its BlockRemoved; a chain's first block holds the first tokens of a prompt sent;
replay from a past sequence number returns the batches sent since, byte for byte, then the
end marker (-1).

    kv_events.py --hinge BIN --model GGUF positional|map|bad_flags
"""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import msgpack  # noqa: E402  (python3-msgpack)
import zmq  # noqa: E402  (python3-zmq)
from harness import Fail, check, main, test  # noqa: E402
from server_process import Server, start_fails  # noqa: E402

END_SEQ = (-1).to_bytes(8, 'big', signed=True)
BLOCK_SIZE = 16

# vLLM's event structs (msgspec, tag=True): the field names in order. Positional encoding is
# [tag, *fields]; map encoding is {"type": tag, **fields}.
FIELDS = {
    'BlockStored': ['block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id',
                    'medium', 'lora_name'],
    'BlockRemoved': ['block_hashes', 'medium'],
    'AllBlocksCleared': [],
}


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def decode_event(raw, fmt):
    """One event as (tag, {field: value}), or Fail naming what is wrong."""
    if fmt == 'positional':
        if not isinstance(raw, list) or not raw or not isinstance(raw[0], str):
            raise Fail(f'event is not a tagged array: {raw!r:.200}')
        tag = raw[0]
        if tag not in FIELDS:
            raise Fail(f'unknown event tag {tag!r}')
        if len(raw) != 1 + len(FIELDS[tag]):
            raise Fail(f'{tag} has {len(raw) - 1} fields, vLLM has {len(FIELDS[tag])}')
        fields = dict(zip(FIELDS[tag], raw[1:]))
    else:
        if not isinstance(raw, dict) or not isinstance(raw.get('type'), str):
            raise Fail(f'event is not a map with a type: {raw!r:.200}')
        tag = raw['type']
        if tag not in FIELDS:
            raise Fail(f'unknown event type {tag!r}')
        if set(raw) != {'type', *FIELDS[tag]}:
            raise Fail(f'{tag} has fields {sorted(raw)}, vLLM has {["type", *FIELDS[tag]]}')
        fields = {k: v for k, v in raw.items() if k != 'type'}
    hashes = fields.get('block_hashes', [])
    if tag != 'AllBlocksCleared':
        if not isinstance(hashes, list) or not hashes:
            raise Fail(f'{tag}: block_hashes must be a non-empty list')
        for h in hashes:
            if not is_int(h) or not 0 < h < 2**63:
                raise Fail(f'{tag}: hash {h!r} is not a non-zero 63-bit integer')
        if fields['medium'] != 'CPU':
            raise Fail(f'{tag}: medium {fields["medium"]!r}')
    if tag == 'BlockStored':
        p = fields['parent_block_hash']
        if p is not None and (not is_int(p) or not 0 < p < 2**63):
            raise Fail(f'parent_block_hash {p!r}')
        t = fields['token_ids']
        if not isinstance(t, list) or not all(is_int(x) for x in t):
            raise Fail('token_ids must be a list of integers')
        if fields['block_size'] != BLOCK_SIZE or len(t) != BLOCK_SIZE * len(hashes):
            raise Fail(f'block_size {fields["block_size"]} with {len(t)} tokens for {len(hashes)} blocks')
        if fields['lora_id'] is not None or fields['lora_name'] is not None:
            raise Fail('lora_id / lora_name without LoRA')
    return tag, fields


def decode_batch(payload, fmt):
    """[ts, events, data_parallel_rank] (always three), or the map of those names."""
    batch = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    if fmt == 'positional':
        if not isinstance(batch, list) or len(batch) != 3:
            raise Fail(f'batch is not a 3-element array: {batch!r:.200}')
        ts, events, rank = batch
    else:
        if not isinstance(batch, dict) or set(batch) != {'ts', 'events', 'data_parallel_rank'}:
            raise Fail(f'batch map keys {sorted(batch) if isinstance(batch, dict) else batch!r:.200}')
        ts, events, rank = batch['ts'], batch['events'], batch['data_parallel_rank']
    if not isinstance(ts, float) or abs(ts - time.time()) > 3600:
        raise Fail(f'ts {ts!r} is not a float of the current time')
    if not isinstance(events, list) or not events:
        raise Fail('a batch carries at least one event')
    if rank != 0:
        raise Fail(f'data_parallel_rank {rank!r}')
    return [decode_event(e, fmt) for e in events]


class Index:
    """What a router learns from the events: the hashes each replica holds, with tokens."""

    def __init__(self):
        self.blocks = {}  # hash -> (parent, tokens)
        self.stored = self.removed = self.cleared = 0

    def apply(self, tag, f):
        if tag == 'AllBlocksCleared':
            self.blocks.clear()
            self.cleared += 1
            return
        if tag == 'BlockRemoved':
            for h in f['block_hashes']:
                if h not in self.blocks:
                    raise Fail(f'BlockRemoved of hash {h} never stored (or removed twice)')
                del self.blocks[h]
                self.removed += 1
            return
        parent = f['parent_block_hash']
        for i, h in enumerate(f['block_hashes']):
            if parent is not None and parent not in self.blocks:
                raise Fail(f'block {h} stored before its parent {parent}')
            if h in self.blocks:
                raise Fail(f'hash {h} stored twice without a removal')
            self.blocks[h] = (parent, f['token_ids'][i * BLOCK_SIZE:(i + 1) * BLOCK_SIZE])
            self.stored += 1
            parent = h


def connect(s):
    """SUB and DEALER sockets on the endpoints the server printed."""
    deadline = time.time() + 10
    m = None
    while time.time() < deadline and not m:
        m = re.search(r'KV events \((\w+)\) on (\S+), topic (\S+), replay on (\S+)', s.logs())
        time.sleep(0.05)
    if not m:
        raise Fail('the server did not print its KV events endpoints: ' + s.logs()[-500:])
    ctx = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b'')
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.connect(m.group(2))
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(m.group(4))
    return m.group(3), sub, dealer


def replay(dealer, start):
    """[(seq, payload)] the replay socket answers for `start`, up to its end marker."""
    dealer.send_multipart([b'', start.to_bytes(8, 'big')])
    out = []
    while True:
        if not dealer.poll(10000):
            raise Fail('replay: no end marker in 10 s')
        frames = dealer.recv_multipart()
        if len(frames) != 3 or frames[0] != b'' or len(frames[1]) != 8:
            raise Fail(f'replay reply frames {[len(f) for f in frames]}, want ["", seq, payload]')
        if frames[1] == END_SEQ:
            if frames[2] != b'':
                raise Fail('the end marker carries a payload')
            return out
        out.append((int.from_bytes(frames[1], 'big'), frames[2]))


def drain(sub, topic, got, quiet_s=0.5):
    """Receives until nothing came for quiet_s: {seq: payload}, checking the frames."""
    while sub.poll(int(quiet_s * 1000)):
        frames = sub.recv_multipart()
        if len(frames) != 3:
            raise Fail(f'{len(frames)} frames, vLLM sends 3 (topic, seq, payload)')
        if frames[0].decode() != topic:
            raise Fail(f'topic {frames[0]!r}, want {topic!r}')
        if len(frames[1]) != 8:
            raise Fail(f'sequence frame of {len(frames[1])} bytes, want 8')
        seq = int.from_bytes(frames[1], 'big')
        if got and seq != max(got) + 1:
            raise Fail(f'sequence {seq} after {max(got)}: not contiguous')
        got[seq] = frames[2]


def prompts():
    names = ['Lily', 'Tom', 'Sue', 'Ben', 'Max', 'Tim', 'Ann', 'Sam']
    things = ['ball', 'cat', 'dog', 'tree', 'cake', 'toy', 'bird', 'boat', 'sun', 'car']
    out = []
    for i in range(40):
        n, t = names[i % len(names)], things[(i * 3) % len(things)]
        out.append(f'{n} had a {t}. {n} liked the {t} very much. One day {n} went to the park with '
                   f'the {t} and met a friend. They played all day long and were very happy. '
                   f'Story number {i}.')
    return out


def run_format(fmt):
    with Server('--kv-memory', '640KiB', '--kv-events', 'tcp://127.0.0.1:0', '--kv-events-replay',
                'tcp://127.0.0.1:0', '--kv-events-format', fmt, quiet=True) as s:
        topic, sub, dealer = connect(s)
        check(topic == f'kv@127.0.0.1:{s.port}@stories260K', f'topic {topic} (llm-d form)')
        time.sleep(0.3)  # the subscription reaches the server (PUB/SUB's slow joiner)
        got = {}
        # What was sent before the subscriber joined: replay from 0.
        for seq, payload in replay(dealer, 0):
            got.setdefault(seq, payload)
        check(0 in got, 'replay from 0 returns batch 0, sent before anyone subscribed')
        first = decode_batch(got[0], fmt)
        check(first[0][0] == 'AllBlocksCleared', 'batch 0 opens with AllBlocksCleared')
        texts = prompts()
        tokenized = []
        for i, text in enumerate(texts):
            _, _, body = s.request('POST', '/tokenize', {'prompt': text})

            tokenized.append(json.loads(body)['tokens'])
            for _ in range(2 if i % 4 == 0 else 1):  # some repeats: prefix hits
                status, _, body = s.request('POST', '/v1/completions',
                                            {'prompt': text, 'max_tokens': 4, 'temperature': 0})
                if status != 200:
                    raise Fail(f'completion {i}: {status} {body[:200]}')
            drain(sub, topic, got, quiet_s=0.05)
        drain(sub, topic, got)

        kv = json.loads(s.request('GET', '/v1/stats')[2])['kv']
        seqs = sorted(got)
        check(seqs == list(range(len(seqs))), f'sequence numbers 0..{seqs[-1]} contiguous')
        index = Index()
        for seq in seqs:
            for tag, f in decode_batch(got[seq], fmt):
                index.apply(tag, f)
        check(True, f'{len(seqs)} batches decode strictly as vLLM {fmt} events')
        check(kv['evictions'] > 0 and index.removed > 0,
              f'the cache evicted ({kv["evictions"]} evictions, {index.removed} hashes removed, '
              f'{index.stored} stored)')
        check(len(index.blocks) == kv['cached_hashes'],
              f'the events leave exactly the {kv["cached_hashes"]} hashes the server holds '
              f'(every eviction had its BlockRemoved)')
        roots = [t for p, t in index.blocks.values() if p is None]
        check(roots and all(any(p[:BLOCK_SIZE] == t for p in tokenized) for t in roots),
              f'each of the {len(roots)} chains held starts with the first {BLOCK_SIZE} tokens of a prompt sent')

        # Reset: one AllBlocksCleared, then the index is empty.
        status, _, body = s.request('POST', '/reset_prefix_cache')
        check(status == 200, f'POST /reset_prefix_cache: {status} {body}')
        drain(sub, topic, got)
        last = decode_batch(got[max(got)], fmt)
        check(any(tag == 'AllBlocksCleared' for tag, _ in last), 'the reset sends AllBlocksCleared')
        for tag, f in last:
            index.apply(tag, f)
        kv = json.loads(s.request('GET', '/v1/stats')[2])['kv']
        check(len(index.blocks) == kv['cached_hashes'] == 0, 'after the reset the index is empty, as the cache')

        # Replay from the middle: the same bytes, in order, then the end marker.
        mid = max(got) // 2
        replayed = replay(dealer, mid)
        want = [(q, got[q]) for q in range(mid, max(got) + 1)]
        check(replayed == want, f'replay from {mid} returns batches {mid}..{max(got)} byte for byte')
        check(replay(dealer, max(got) + 1) == [], 'replay from past the last batch: the end marker only')
        sub.close(0)
        dealer.close(0)


@test
def positional():
    """vLLM's positional (tagged array) events, decoded strictly; contiguous; replay; removals"""
    run_format('positional')


@test
def map():  # noqa: A001 - the format's name
    """--kv-events-format map: events as maps, decoded strictly; contiguous; replay; removals"""
    run_format('map')


@test
def bad_flags():
    """a bad endpoint, a taken port, replay without events: hinge refuses to start, saying why"""
    rc, err = start_fails('--kv-events', 'udp://nowhere')
    check(rc != 0 and 'kv-events' in err.lower(), f'a bad endpoint is refused: {err.strip()[-160:]}')
    rc, err = start_fails('--kv-events-replay', 'tcp://127.0.0.1:0')
    check(rc != 0 and '--kv-events' in err, f'replay without events is refused: {err.strip()[-120:]}')
    ctx = zmq.Context.instance()
    taken = ctx.socket(zmq.PUB)
    port = taken.bind_to_random_port('tcp://127.0.0.1')
    try:
        rc, err = start_fails('--kv-events', f'tcp://127.0.0.1:{port}')
        check(rc != 0 and str(port) in err, f'a port in use is refused: {err.strip()[-160:]}')
    finally:
        taken.close(0)


if __name__ == '__main__':
    sys.exit(main(__doc__))
