#!/usr/bin/python3
"""`hinge route` in front of 3 replicas sharing a Redis tier, all on loopback: the replicas'
KV events (found in their /v1/stats) tell the router where each prefix is cached.

prefix_routing  a shared-prefix workload (10 distinct 1024-token prefixes, 200 requests, 4
                clients) computes, fleet-wide, within 1.2x the prompt tokens of one replica
                serving everything, and at most half of what round-robin routing computes over
                replicas that share nothing; with the shared Redis round-robin computes little
                more (every replica reads every prefix from Redis) but reads far more blocks
                from it: both are measured and reported (each run on its own fresh prefixes)
kill_replica    `kill -9` of one replica mid-run: every request completes or gets a clean error
                (a 5xx JSON, or an SSE error event), none hangs; later requests all succeed
tenants         tenant isolation through the router: another tenant's identical prompt gets 0
                cached tokens on whichever replica; purge through the router reaches every one
fan_out_and_errors  /reset_prefix_cache reaches every replica; a client's 400 comes back as is;
                with no replica reachable: 503 with Retry-After; bad flags refuse to start

The model is a random-weight smollm-135m shape cut to 4 layers (`hinge synth`, written here).

    route.py --hinge BIN --model GGUF prefix_routing|kill_replica|tenants|fan_out_and_errors
"""
import json
import os
import random
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
import http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import two_tenants, ARGS, Fail, check, main, temp_dir, test  # noqa: E402
from redis_process import RedisServer, free_port  # noqa: E402
from server_process import Server, synth_model as model  # noqa: E402

PREFIX, SUFFIX = 1024, 16


class Route:
    """A `hinge route` process on a free port."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([ARGS.hinge, 'route', '--port', '0', *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.err = []
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()
        deadline = time.time() + 30
        while time.time() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if r:
                line = self.proc.stdout.readline()
                if 'serving on' in line:
                    self.port = int(line.strip().rsplit(':', 1)[1])
                    return
            if self.proc.poll() is not None:
                raise Fail('hinge route exited: ' + ''.join(self.err))
        raise Fail('hinge route did not start')

    def request(self, method, path, body=None, key=None, timeout=60):
        c = http.client.HTTPConnection('127.0.0.1', self.port, timeout=timeout)
        h = {'Content-Type': 'application/json'}
        if key:
            h['Authorization'] = 'Bearer ' + key
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
        r = c.getresponse()
        out = (r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read().decode())
        c.close()
        return out

    def wait_live(self, n, timeout=20):
        """Waits until n replicas are up with their KV events followed."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            _, _, body = self.request('GET', '/route/stats')
            b = json.loads(body)['backends']
            if sum(1 for x in b if x['healthy'] and x['events']['live']) >= n:
                return
            time.sleep(0.1)
        raise Fail(f'the router did not see {n} live replicas: {body}')

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise Fail('hinge route did not stop on SIGTERM')

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def replicas(redis, secret, n=3, *extra):
    return [Server('--kv-events', 'tcp://127.0.0.1:0', '--kv-events-replay', 'tcp://127.0.0.1:0',
                   '--kv-redis', redis.url, '--kv-redis-timeout', '2', '--cache-secret-file', secret,
                   *extra,
                   quiet=True, model=model()) for _ in range(n)]


def secret_file():
    path = os.path.join(temp_dir('hinge-route-'), 'secret')
    with open(path, 'wb') as f:
        f.write(secrets.token_bytes(32))
    return path


def computed(servers):
    total = 0
    for s in servers:
        _, _, body = s.request('GET', '/v1/stats')
        total += json.loads(body)['engine']['prompt_tokens_computed']
    return total


def workload(seed):
    """200 prompts: 10 distinct 1024-token prefixes, 20 requests each, shuffled, unique tails."""
    r = random.Random(seed)
    prefixes = [[r.randrange(100, 40000) for _ in range(PREFIX)] for _ in range(10)]
    order = [k for k in range(10) for _ in range(20)]
    r.shuffle(order)
    return [prefixes[k] + [r.randrange(100, 40000) for _ in range(SUFFIX)] for k in order]


def run(port, prompts, clients=4, stream=False, timeout=120, max_tokens=2):
    """Sends prompts from `clients` threads; returns [(status, body)] in completion order."""
    todo = list(prompts)
    lock = threading.Lock()
    out = []

    def client():
        while True:
            with lock:
                if not todo:
                    return
                p = todo.pop()
            try:
                c = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
                c.request('POST', '/v1/completions',
                          body=json.dumps({'prompt': p, 'max_tokens': max_tokens, 'stream': stream,
                                          'ignore_eos': True}),
                          headers={'Content-Type': 'application/json'})
                r = c.getresponse()
                body = r.read().decode()
                c.close()
                res = (r.status, body)
            except Exception as e:  # noqa: BLE001
                res = (0, repr(e))
            with lock:
                out.append(res)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 60)
    if any(t.is_alive() for t in threads):
        raise Fail('a client hangs')
    return out


def restored(servers):
    """Blocks the replicas read back from a tier (Redis here)."""
    total = 0.0
    for s in servers:
        _, _, body = s.request('GET', '/metrics')
        for line in body.splitlines():
            if line.startswith('hinge:kv_tier_restored_blocks_total{'):
                total += float(line.rsplit(' ', 1)[1])
    return total


def measure(servers, port, seed):
    """(prompt tokens computed, blocks restored from the tier) by the fleet for workload(seed)."""
    c0, r0 = computed(servers), restored(servers)
    res = run(port, workload(seed))
    if not all(s == 200 for s, _ in res):
        raise Fail(f'not all 200: {[s for s, _ in res if s != 200][:5]}')
    return computed(servers) - c0, restored(servers) - r0


@test
def prefix_routing():
    """fleet prompt tokens: prefix routing within 1.2x of one replica, at most half of round-robin"""
    secret = secret_file()
    backends = lambda servers: sum((['--backend', s.url] for s in servers), [])  # noqa: E731
    with RedisServer() as redis:
        servers = replicas(redis, secret)
        try:
            single, _ = measure(servers, servers[0].port, 1)  # one replica serves everything
            with Route(*backends(servers), '--policy', 'round-robin', '-q') as rr:
                rr.wait_live(3)
                rr_redis, rr_restored = measure(servers, rr.port, 2)
            with Route(*backends(servers), '-q') as route:
                route.wait_live(3)
                routed, routed_restored = measure(servers, route.port, 3)
                _, _, body = route.request('GET', '/route/stats')
                spread = [b['routed'] for b in json.loads(body)['backends']]
        finally:
            for s in servers:
                s.stop()
    # Round-robin over replicas that share nothing: what prefix-blind placement computes.
    alone = [Server('--kv-events', 'tcp://127.0.0.1:0', '--kv-events-replay', 'tcp://127.0.0.1:0',
                    quiet=True, model=model()) for _ in range(3)]
    try:
        with Route(*backends(alone), '--policy', 'round-robin', '-q') as rr:
            rr.wait_live(3)
            rr_alone, _ = measure(alone, rr.port, 4)
    finally:
        for s in alone:
            s.stop()
    floor = 10 * PREFIX + 200 * SUFFIX
    print(f'  prompt tokens computed (the floor: {floor}): one replica {single}; prefix routing '
          f'{routed} (requests per replica {spread}, {routed_restored:.0f} blocks read from Redis); '
          f'round-robin with the shared Redis {rr_redis} ({rr_restored:.0f} blocks read from Redis); '
          f'round-robin over replicas sharing nothing {rr_alone}', flush=True)
    check(routed <= 1.2 * single, f'prefix routing {routed} <= 1.2 x one replica {single} '
          f'({routed / single:.2f}x)')
    check(routed <= 0.5 * rr_alone, f'prefix routing {routed} <= half of round-robin {rr_alone} '
          f'({routed / rr_alone:.2f}x)')
    check(routed <= rr_redis and routed_restored < rr_restored,
          f'and below round-robin with the shared Redis ({routed} <= {rr_redis}), reading '
          f'{routed_restored:.0f} blocks from Redis against {rr_restored:.0f}')


def clean(status, body, stream):
    """'ok', 'error' (a clean one) or what was wrong."""
    if status == 200 and not stream:
        json.loads(body)
        return 'ok'
    if status == 200 and stream:
        events = [l[6:] for l in body.split('\n') if l.startswith('data: ')]
        if events and events[-1] == '[DONE]':
            return 'ok'
        if events and 'error' in json.loads(events[-1]):
            return 'error'
        return f'a stream cut without an error event: {body[-200:]!r}'
    if status >= 500:
        return 'error' if 'error' in json.loads(body) else f'{status} without an error body'
    return f'status {status}: {body[:200]}'


@test
def kill_replica():
    """kill -9 of a replica mid-run: every request completes or gets a clean error, none hangs"""
    secret = secret_file()
    with RedisServer() as redis:
        servers = replicas(redis, secret)
        try:
            with Route(*sum((['--backend', s.url] for s in servers), []), '-q') as route:
                route.wait_live(3)
                prompts = workload(4)[:60]
                results = []
                killed = []
                killer = threading.Timer(0.6, lambda: (servers[1].proc.kill(), killed.append(time.time())))
                killer.start()
                t0 = time.time()
                results += [(s, b, True) for s, b in run(route.port, prompts[:30], stream=True,
                                                         timeout=60, max_tokens=48)]
                streamed = time.time()
                results += [(s, b, False) for s, b in run(route.port, prompts[30:], timeout=60,
                                                          max_tokens=16)]
                killer.join()
                check(killed and killed[0] < streamed,
                      f'replica 2 killed {killed[0] - t0:.1f} s into the run, while streams were '
                      f'in flight (they ended at {streamed - t0:.1f} s)')
                outcome = [clean(s, b, st) for s, b, st in results]
                bad = [o for o in outcome if o not in ('ok', 'error')]
                check(len(results) == 60 and not bad, f'60 requests in {time.time() - t0:.1f} s: '
                      f'{outcome.count("ok")} completed, {outcome.count("error")} clean errors '
                      f'{bad[:2]}')
                after = run(route.port, prompts[:10])
                check(all(s == 200 for s, _ in after),
                      'after the kill: 10 more requests, all completed by the other replicas')
                _, _, body = route.request('GET', '/route/stats')
                dead = json.loads(body)['backends'][1]
                check(not dead['healthy'], 'the router marks the killed replica down')
        finally:
            for s in servers:
                s.stop()



@test
def tenants():
    """tenants through the router: no hit across tenants; a purge reaches every replica"""
    secret = secret_file()
    tf, ka, kb, admin = two_tenants(os.path.dirname(secret))
    p = [random.Random(9).randrange(100, 40000) for _ in range(512)]
    with RedisServer() as redis:
        servers = replicas(redis, secret, 3, '--tenants', tf)
        keyfile = os.path.join(os.path.dirname(secret), 'admin.key')
        with open(keyfile, 'w') as f:
            f.write(admin + '\n')
        try:
            with Route(*sum((['--backend', s.url] for s in servers), []), '-q',
                       '--backend-api-key-file', keyfile) as route:
                route.wait_live(3)

                def cached(key):
                    status, _, body = route.request('POST', '/v1/completions',
                                                    {'prompt': p, 'max_tokens': 1}, key=key)
                    if status != 200:
                        raise Fail(f'{status} {body[:200]}')
                    return json.loads(body)['usage']['prompt_tokens_details']['cached_tokens']

                check(cached(ka) == 0, 'acme computes its prompt')
                time.sleep(0.5)  # events and Redis writes land
                check(cached(ka) > 0, 'acme again: routed to its prefix, cached')
                check(cached(kb) == 0, 'globex, the identical prompt: 0 cached tokens, wherever '
                      'the router sent it (routing is a hint; the namespace decides)')
                status, _, body = route.request('POST', '/admin/tenants/acme/purge', {}, key=admin)
                per = json.loads(body)['replicas']
                check(status == 200 and len(per) == 3 and all(r['status'] == 200 for r in per),
                      f'the purge reached all 3 replicas: {[r["status"] for r in per]}')
                check(cached(ka) == 0, 'after the purge acme hits nothing, through any replica')
        finally:
            for s in servers:
                s.stop()


@test
def fan_out_and_errors():
    """reset fan-out, a client's 400 passed through, 503 with no replica, bad flags"""
    secret = secret_file()
    with RedisServer() as redis:
        servers = replicas(redis, secret, 2)
        try:
            with Route(*sum((['--backend', s.url] for s in servers), []), '-q') as route:
                route.wait_live(2)
                status, _, body = route.request('POST', '/reset_prefix_cache')
                check(status == 200 and len(json.loads(body)['replicas']) == 2,
                      'POST /reset_prefix_cache reached both replicas')
                status, _, body = route.request('POST', '/v1/completions', {'prompt': 'x', 'max_tokens': -3})
                check(status == 400 and 'max_tokens' in body, f'a client\'s 400 passes through: {body[:120]}')
                status, _, body = route.request('GET', '/v1/models')
                check(status == 200 and 'smollm' in body, 'GET /v1/models from a replica')
                for s in servers:
                    s.stop()
                status, headers, body = route.request('POST', '/v1/completions',
                                                      {'prompt': 'x', 'max_tokens': 1})
                check(status == 503 and 'retry-after' in headers and 'error' in json.loads(body),
                      f'no replica reachable: 503 with Retry-After ({body[:100]})')
        finally:
            for s in servers:
                s.stop()
    for args, what in ((['--backend', 'ftp://x:1'], 'not http://'),
                       (['--backend', 'http://127.0.0.1:0'], 'port 0'),
                       (['--backend', 'http://127.0.0.1:9', '--policy', 'random'], 'a bad policy'),
                       ([], 'no --backend')):
        p = subprocess.run([ARGS.hinge, 'route', '--port', '0', *args], capture_output=True,
                           text=True, timeout=30)
        check(p.returncode != 0 and p.stderr.strip(), f'{what}: refused ({p.stderr.strip().splitlines()[-1]})')


if __name__ == '__main__':
    sys.exit(main(__doc__))
