#!/usr/bin/python3
"""The shared KV tier on Redis (`hinge serve --kv-redis URL`, tier/redis_tier.h) with a real
redis-server started here on a loopback port and two hinge replicas sharing it: replica B hits a
1024-token prefix replica A computed (cached tokens, and a first token sooner than recomputing);
tenants stay isolated through Redis, a marker is in no value, a purge deletes the tenant's keys
only; blocks expire by TTL; Redis killed or frozen mid-run fails no request, the replica says
so (warning, hinge:kv_tier_up 0) and writes again once Redis is back.

The model is a random-weight smollm-135m shape cut to 4 layers (`hinge synth`, written here):
long enough a context for 1024-token prompts, cheap enough to compute.

    kv_redis.py --hinge BIN --model GGUF shared_prefix|tenants|ttl_expiry|redis_down|bad_flags
"""
import json
import os
import random
import secrets
import signal
import statistics
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import two_tenants, Fail, check, main, temp_dir, test  # noqa: E402
from redis_process import RedisServer  # noqa: E402
from server_process import Server, synth_model as model, start_fails  # noqa: E402





def prompt(seed, n=1024):
    r = random.Random(seed)
    return [r.randrange(100, 40000) for _ in range(n)]


def secret_file():
    d = temp_dir('hinge-redis-')
    path = os.path.join(d, 'secret')
    with open(path, 'wb') as f:
        f.write(secrets.token_bytes(32))
    return path


def replica(redis_url, secret, *extra):
    # A generous Redis timeout (the default is 0.25 s): ctest runs other tests beside this one
    # on 2 cores, and a command that times out costs the hits these checks count.
    if '--kv-redis-timeout' not in extra:
        extra = ('--kv-redis-timeout', '2', *extra)
    return Server('--kv-redis', redis_url, '--cache-secret-file', secret, *extra,
                  quiet=True, model=model())


def complete(s, p, key=None, timeout=60):
    """(cached tokens, seconds) of a one-token completion (its time is the time to first token)."""
    t = time.perf_counter()
    status, _, body = s.request('POST', '/v1/completions',
                                {'prompt': p, 'max_tokens': 1, 'temperature': 0}, key=key,
                                timeout=timeout)
    dt = time.perf_counter() - t
    if status != 200:
        raise Fail(f'completion: {status} {body[:200]}')
    return json.loads(body)['usage']['prompt_tokens_details']['cached_tokens'], dt


def metric(s, name, tier='redis', key=None):
    """The sum of hinge:<name> lines (of tier `tier` when given)."""
    _, _, body = s.request('GET', '/metrics', key=key)
    total = 0.0
    for line in body.splitlines():
        if line.startswith('hinge:' + name + '{') and (tier is None or f'tier="{tier}"' in line):
            total += float(line.rsplit(' ', 1)[1])
    return total


def wait_metric(s, name, at_least, tier='redis', key=None, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = metric(s, name, tier, key)
        if v >= at_least:
            return v
        time.sleep(0.05)
    raise Fail(f'{name} did not reach {at_least} in {timeout} s')


@test
def shared_prefix():
    """replica B hits the prefix replica A computed, and its first token comes sooner"""
    secret = secret_file()
    with RedisServer() as redis, replica(redis.url, secret) as a, replica(redis.url, secret) as b:
        p = prompt(1)
        cached, t_a = complete(a, p)
        check(cached == 0, f'A computes the 1024-token prompt ({t_a * 1000:.0f} ms)')
        wait_metric(a, 'kv_tier_puts_total', 1024 // 16)
        keys = redis.command('DBSIZE')
        check(keys >= 1024 // 16, f'A wrote {keys} blocks to Redis')
        cached, _ = complete(b, p)
        check(cached >= 1024 - 16, f'B: {cached} of 1024 prompt tokens cached, read from Redis')
        # (The engine's counters reach /metrics a moment after the answer.)
        hits = wait_metric(b, 'kv_tier_hits_total', 1024 // 16 - 1)
        restored = wait_metric(b, 'kv_tier_restored_blocks_total', 1024 // 16 - 1, tier=None)
        check(True, f'counted: {hits:.0f} tier hits, {restored:.0f} blocks restored')
        # Time to first token: a prefix from Redis against recomputing one (fresh prompts, B's
        # RAM reset between, medians of 3).
        hit, recompute = [], []
        for i in range(3):
            q = prompt(100 + i)
            _, t = complete(a, q)
            wait_metric(a, 'kv_tier_puts_total', (i + 2) * (1024 // 16))
            b.request('POST', '/reset_prefix_cache')
            c, t_hit = complete(b, q)
            check(c >= 1024 - 16, f'prefix {i}: {c} cached on B')
            hit.append(t_hit)
            b.request('POST', '/reset_prefix_cache')
            c, t_rc = complete(b, prompt(200 + i))
            recompute.append(t_rc)
        h, r = statistics.median(hit), statistics.median(recompute)
        check(h < r, f'TTFT on B: {h * 1000:.0f} ms from Redis against {r * 1000:.0f} ms '
              f'recomputing ({r / h:.1f}x)')



@test
def tenants():
    """tenants through Redis: no hit across tenants, a marker in no value, purge deletes"""
    secret = secret_file()
    tf, ka, kb, admin = two_tenants(os.path.dirname(secret))
    marker = [31337, 4242] * 8
    p = prompt(7, 256) + marker + prompt(8, 256)
    with RedisServer() as redis, \
            replica(redis.url, secret, '--tenants', tf) as a, \
            replica(redis.url, secret, '--tenants', tf) as b:
        complete(a, p, key=ka)
        wait_metric(a, 'kv_tier_puts_total', 528 // 16, key=admin)
        acme_keys = set(redis.values())
        check(len(acme_keys) >= 528 // 16, f'acme\'s {len(acme_keys)} blocks in Redis')
        cached, _ = complete(b, p, key=kb)
        check(cached == 0, 'globex on B, the identical prompt: 0 cached tokens (Redis holds acme\'s)')
        cached, _ = complete(b, p, key=ka)
        check(cached >= 528 - 16, f'acme on B: {cached} cached tokens from Redis')
        wait_metric(b, 'kv_tier_puts_total', 528 // 16, key=admin)
        values = redis.values()
        needles = [b''.join(struct.pack('<i', t) for t in marker),
                   b''.join(struct.pack('<H', t) for t in marker)]
        for k, v in values.items():
            if any(x in v for x in needles):
                raise Fail(f'the marker is in the value of {k}')
        check(True, f'the marker (int32 or int16 ids) is in none of the {len(values)} values')
        for s in (a, b):  # a purge is per replica: each forgets its RAM and the shared keys
            status, _, body = s.request('POST', '/admin/tenants/acme/purge', {}, key=admin)
            check(status == 200, f'purge acme: {body}')
        left = set(redis.values())
        check(not (left & acme_keys) and left,
              f'acme\'s {len(acme_keys)} keys are gone, globex\'s {len(left)} stay')
        check(metric(a, 'kv_tier_purged_total', key=admin) >= len(acme_keys), 'counted as purged')
        cached, _ = complete(b, p, key=ka)
        check(cached == 0, 'after the purge acme hits nothing on B')


@test
def ttl_expiry():
    """blocks expire by --kv-redis-ttl (one SET with EX each)"""
    secret = secret_file()
    with RedisServer() as redis, \
            replica(redis.url, secret, '--kv-redis-ttl', '2') as a, \
            replica(redis.url, secret, '--kv-redis-ttl', '2') as b:
        p = prompt(3, 256)
        complete(a, p)
        wait_metric(a, 'kv_tier_puts_total', 256 // 16)
        keys = redis.command('KEYS', '*')
        ttls = [redis.command('TTL', k) for k in keys]
        check(keys and all(0 < t <= 2 for t in ttls), f'{len(keys)} keys, TTLs {sorted(set(ttls))} s')
        time.sleep(3)
        check(not redis.command('KEYS', '*'), 'after 3 s Redis expired them all')
        cached, _ = complete(b, p)
        check(cached == 0, 'B finds nothing: recomputed')


@test
def redis_down():
    """Redis killed or frozen mid-run: every request completes; a warning and kv_tier_up 0"""
    secret = secret_file()
    redis = RedisServer()
    try:
        with replica(redis.url, secret, '--kv-redis-timeout', '0.2') as a:
            results, errors = [], []

            def client(i):
                for j in range(8):
                    try:
                        results.append(complete(a, prompt(1000 + i * 100 + j, 256), timeout=60))
                    except Exception as e:  # noqa: BLE001
                        errors.append(repr(e))

            threads = [threading.Thread(target=client, args=(i,)) for i in range(3)]
            for t in threads:
                t.start()
            time.sleep(0.5)
            redis.stop()
            for t in threads:
                t.join(120)
            check(not any(t.is_alive() for t in threads), 'no request hangs')
            check(not errors and len(results) == 24,
                  f'all 24 requests completed while Redis was killed ({errors[:2]})')
            complete(a, prompt(5000, 256))
            check(metric(a, 'kv_tier_up') == 0, 'hinge:kv_tier_up{tier="redis"} 0')
            check(metric(a, 'kv_tier_get_errors_total') + metric(a, 'kv_tier_put_errors_total') > 0,
                  'the failed reads and writes are counted')
            check(any('KV Redis tier' in l and 'unavailable' in l for l in a.err),
                  'a warning names the Redis tier')
            redis.start()  # the same port, empty
            deadline = time.time() + 20
            while time.time() < deadline and redis.command('DBSIZE') == 0:
                complete(a, prompt(int(time.time() * 1000), 256))
                time.sleep(0.3)
            check(redis.command('DBSIZE') > 0 and metric(a, 'kv_tier_up') == 1,
                  'Redis back: the replica reconnects and writes again')
            # Frozen (SIGSTOP): commands time out after --kv-redis-timeout, requests go on.
            redis.proc.send_signal(signal.SIGSTOP)
            try:
                t0 = time.perf_counter()
                for i in range(3):
                    complete(a, prompt(6000 + i, 256), timeout=30)
                dt = time.perf_counter() - t0
            finally:
                redis.proc.send_signal(signal.SIGCONT)
            check(dt < 10, f'Redis frozen: 3 requests completed in {dt:.1f} s')
    finally:
        redis.stop()


@test
def bad_flags():
    """a bad --kv-redis URL, TTL or timeout refuses to start"""
    rc, err = start_fails('--kv-redis', 'http://127.0.0.1:6379')
    check(rc != 0 and '--kv-redis' in err, f'not redis://: {err.strip().splitlines()[-1]}')
    rc, err = start_fails('--kv-redis', 'redis://127.0.0.1:99999')
    check(rc != 0 and 'port' in err, f'a bad port: {err.strip().splitlines()[-1]}')
    rc, err = start_fails('--kv-redis', 'redis://127.0.0.1:6379', '--kv-redis-timeout', '0')
    check(rc != 0 and '--kv-redis-timeout' in err, f'timeout 0: {err.strip().splitlines()[-1]}')
    rc, err = start_fails('--kv-redis', 'redis://127.0.0.1:6379', '--no-prefix-cache')
    check(rc != 0 and 'prefix cache' in err, f'no prefix cache: {err.strip().splitlines()[-1]}')


if __name__ == '__main__':
    sys.exit(main(__doc__))
