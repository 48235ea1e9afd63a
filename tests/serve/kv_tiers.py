#!/usr/bin/python3
"""The encrypted disk tier of a real `hinge serve --kv-disk DIR` (tier/disk_tier.h): a prefix
evicted from RAM (POST /reset_prefix_cache) comes back from disk as cached tokens; a restarted
server with the same --cache-secret-file hits from disk; flipped bytes are misses, counted and
removed; with tenants, another tenant's identical prompt never hits the first one's blocks, a
marker sent in prompts appears in no file (neither as text nor as its token ids), and purging
a tenant deletes its files and only its files.

    kv_tiers.py --hinge BIN --model GGUF restart_and_tamper|tenants_purge_and_marker|bad_flags
"""
import json
import os
import secrets
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import two_tenants, Fail, check, main, temp_dir, test  # noqa: E402
from server_process import Server, start_fails  # noqa: E402

PROMPT = ('Lily had a red ball. Lily liked the ball very much. One day Lily went to the park '
          'with the ball and met a friend named Tom. They played all day long and were happy.')


def files(d):
    return sorted(f for f in os.listdir(d) if f.endswith('.kvb'))


def complete(s, prompt, key=None):
    status, _, body = s.request('POST', '/v1/completions',
                                {'prompt': prompt, 'max_tokens': 4, 'temperature': 0}, key=key)
    if status != 200:
        raise Fail(f'completion: {status} {body[:200]}')
    return json.loads(body)['usage']['prompt_tokens_details']['cached_tokens']


def metrics(s, key=None):
    _, _, body = s.request('GET', '/metrics', key=key)
    return {k: float(v) for k, v in (l.rsplit(' ', 1) for l in body.splitlines()
                                     if l and not l.startswith('#'))}


def wait_puts(s, n, timeout=10, key=None):
    """Waits until the disk tier stored at least n blocks and the count held for 0.3 s
    (writes are asynchronous: a finished request's blocks are queued, then written)."""
    puts = 'hinge:kv_tier_puts_total{model_name="stories260K",tier="disk"}'
    deadline = time.time() + timeout
    seen, same = None, 0
    while time.time() < deadline:
        m = metrics(s, key)
        count = m.get(puts, 0)
        same = same + 1 if count == seen else 0
        seen = count
        if count >= n and same >= 3:
            return m
        time.sleep(0.1)
    raise Fail(f'the disk tier did not store {n} blocks in {timeout} s')


def metric(s, name, tier=True, key=None):
    labels = '{model_name="stories260K",tier="disk"}' if tier else '{model_name="stories260K"}'
    return metrics(s, key).get('hinge:' + name + labels, 0)


def secret_file():
    d = temp_dir('hinge-tier-')
    path = os.path.join(d, 'secret')
    with open(path, 'wb') as f:
        f.write(secrets.token_bytes(32))
    return path, os.path.join(d, 'kv')


@test
def restart_and_tamper():
    """disk hits after a reset and after a restart; flipped bytes are refused and removed"""
    secret, d = secret_file()
    flags = ['--kv-disk', d, '--kv-disk-size', '64MiB', '--cache-secret-file', secret]
    with Server(*flags, quiet=True) as s:
        check(complete(s, PROMPT) == 0, 'first request: nothing cached')
        wait_puts(s, 2)
        check(len(files(d)) >= 2, f'{len(files(d))} block files written')
        names = files(d)
        check(all(len(n) == 36 for n in names), 'file names are 32 hex digits (keyed, not prompt-derived)')
        s.request('POST', '/reset_prefix_cache')
        cached = complete(s, PROMPT)
        check(cached > 0 and metric(s, 'kv_tier_restored_blocks_total', tier=False) > 0,
              f'after the RAM cache was reset: {cached} cached tokens restored from disk')
    with Server(*flags, quiet=True) as s:
        check(s.err_line('blocks from earlier runs') != '', 'the restart indexed the files')
        cached = complete(s, PROMPT)
        check(cached > 0 and metric(s, 'kv_tier_hits_total') > 0,
              f'a restarted server with the same secret: {cached} cached tokens from disk')
        for n in files(d):  # flip one byte of every block's ciphertext
            with open(os.path.join(d, n), 'r+b') as f:
                f.seek(-20, os.SEEK_END)
                b = f.read(1)
                f.seek(-20, os.SEEK_END)
                f.write(bytes([b[0] ^ 0x10]))
        s.request('POST', '/reset_prefix_cache')
        before = len(files(d))
        cached = complete(s, PROMPT)
        rejected = metric(s, 'kv_tier_rejected_total')
        check(cached == 0 and rejected >= 1, f'flipped bytes: a miss ({cached} cached), {rejected:.0f} rejected')
        check(len(files(d)) < before, f'the refused file was removed ({before} -> {len(files(d))})')
    # Another secret: every file is foreign.
    other, _ = secret_file()
    with Server('--kv-disk', d, '--kv-disk-size', '64MiB', '--cache-secret-file', other, quiet=True) as s:
        check(complete(s, PROMPT) == 0, 'another secret: nothing readable, no hit')



@test
def tenants_purge_and_marker():
    """tenants: no hit across tenants through the disk; the marker is in no file; purge deletes"""
    secret, d = secret_file()
    tf, ka, kb, admin = two_tenants(os.path.dirname(secret))
    marker = 'zebra quilt marker'
    prompt = f'{PROMPT} The secret word is {marker}. {marker}. Say {marker} again and again.'
    with Server('--kv-disk', d, '--kv-disk-size', '64MiB', '--cache-secret-file', secret,
                '--tenants', tf, quiet=True) as s:
        _, _, body = s.request('POST', '/tokenize', {'prompt': marker}, key=ka)
        ids = json.loads(body)['tokens'][1:]  # without BOS
        complete(s, prompt, key=ka)
        m = wait_puts(s, 3, key=admin)
        acme_files = set(files(d))
        s.request('POST', '/reset_prefix_cache', key=admin)
        check(complete(s, prompt, key=kb) == 0,
              'another tenant\'s identical prompt: 0 cached tokens (the disk holds only acme\'s)')
        wait_puts(s, m['hinge:kv_tier_puts_total{model_name="stories260K",tier="disk"}'] + 3, key=admin)
        s.request('POST', '/reset_prefix_cache', key=admin)
        check(complete(s, prompt, key=ka) > 0, 'acme itself hits its blocks from disk')
        needles = [marker.encode(), b''.join(struct.pack('<i', t) for t in ids),
                   b''.join(struct.pack('<H', t) for t in ids)]
        for n in files(d):
            with open(os.path.join(d, n), 'rb') as f:
                data = f.read()
            if any(x in data for x in needles):
                raise Fail(f'the marker (text or token ids) is in {n}')
        check(True, f'the marker is in none of the {len(files(d))} files (text, int32 or int16 ids)')
        status, _, body = s.request('POST', '/admin/tenants/acme/purge', {}, key=admin)
        check(status == 200, f'purge acme: {body}')
        left = set(files(d))
        check(not (left & acme_files) and left, f'acme\'s {len(acme_files)} files are gone, '
              f'globex\'s {len(left)} stay')
        check(metric(s, 'kv_tier_purged_total', key=admin) == len(acme_files), 'counted as purged')
        check(complete(s, prompt, key=ka) == 0, 'after the purge acme hits nothing')


@test
def bad_flags():
    """--kv-disk with a bad size, an unwritable directory or no prefix cache refuses to start"""
    rc, err = start_fails('--kv-disk', temp_dir(), '--kv-disk-size', 'lots')
    check(rc != 0 and '--kv-disk-size' in err, f'a bad size: {err.strip().splitlines()[-1]}')
    rc, err = start_fails('--kv-disk', '/proc/hinge-kv')
    check(rc != 0 and '--kv-disk' in err, f'an unwritable directory: {err.strip().splitlines()[-1]}')
    rc, err = start_fails('--kv-disk', temp_dir(), '--no-prefix-cache')
    check(rc != 0 and 'prefix cache' in err, f'no prefix cache: {err.strip().splitlines()[-1]}')


if __name__ == '__main__':
    sys.exit(main(__doc__))
