#!/usr/bin/python3
"""Bounded memory of `hinge serve` as a process (ctest: ServeBoundedMemory.*).

pressure_levels: readings injected under --pressure-root (a PSI file this script rewrites):
  elevated shrinks the prefix cache and RSS falls (measured from /proc), critical answers new
  requests 503 + Retry-After while the running streams complete, normal admits again; no
  request is lost or hung, and each transition is counted in /metrics.
budget_holds: under --memory-budget an adversarial load (long prompts, n > 1, clients that
  disconnect mid-stream) never has RSS above the budget, sampled every 100 ms.
budget_refuses: a budget below what the weights need is refused at start with the breakdown.

Standard library only; run with /usr/bin/python3:

    bounded_memory.py --hinge build/release/hinge --model ../shared/models/stories260K.gguf NAME
"""
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ARGS, Fail, check, main, temp_dir, test  # noqa: E402
from server_process import Server, start_fails  # noqa: E402

SANITIZED = os.environ.get('HINGE_SANITIZED') == '1'


def write_psi(root, some):
    path = os.path.join(root, 'proc', 'pressure', 'memory')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write(f'some avg10={some:.2f} avg60=0.00 avg300=0.00 total=0\n'
                f'full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n')
    os.replace(tmp, path)  # the server never reads half a file


def prompt_ids(rng, n):
    return [1] + [rng.randrange(3, 500) for _ in range(n - 1)]


def wait_metric(srv, name, value, timeout=20):
    deadline = time.time() + timeout
    m = {}
    while time.time() < deadline:
        m = srv.metrics()
        if any(k.startswith(name) and v == value for k, v in m.items()):
            return m
        time.sleep(0.05)
    raise Fail(f'{name} did not reach {value} in {timeout} s: '
               + str({k: v for k, v in m.items() if k.startswith(name)}))


def metric(m, prefix):
    return sum(v for k, v in m.items() if k.startswith(prefix))


def stream(srv, body, result):
    """POSTs a streaming completion; result gets (status, tokens seen, finish_reason)."""
    try:
        s = socket.create_connection(('127.0.0.1', srv.port), timeout=120)
        data = json.dumps({**body, 'stream': True}).encode()
        s.sendall(b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n'
                  + f'Content-Length: {len(data)}\r\nConnection: close\r\n\r\n'.encode() + data)
        raw = b''
        while True:
            b = s.recv(65536)
            if not b:
                break
            raw += b
        s.close()
        head, _, rest = raw.partition(b'\r\n\r\n')
        status = int(head.split(b' ', 2)[1])
        finish, chunks = None, 0
        for line in rest.split(b'\n'):
            line = line.strip()
            if not line.startswith(b'data: {'):
                continue
            ev = json.loads(line[6:])
            for c in ev.get('choices', []):
                if c.get('text'):
                    chunks += 1
                if c.get('finish_reason'):
                    finish = c['finish_reason']
        result.append((status, chunks, finish))
    except Exception as e:  # noqa: BLE001 - reported as a failure below
        result.append(('error', 0, repr(e)))


@test
def pressure_levels():
    """injected PSI: elevated shrinks the cache (RSS falls), critical 503s new requests while running ones finish, normal resumes"""
    root = temp_dir('hinge-pressure-')
    write_psi(root, 0)
    with Server('--pressure-root', root, '--pressure-interval', '0.05', '--pressure-cooldown',
                '0.3', '--kv-memory', '256MiB', '-c', '2048', quiet=True) as srv:
        rng = random.Random(7)
        # Fill the prefix cache: unique 400-token prompts leave their KV pages cached.
        for _ in range(60):
            st, _, body = srv.request('POST', '/v1/completions',
                                      {'prompt': prompt_ids(rng, 400), 'max_tokens': 8})
            if st != 200:
                raise Fail(f'filling request: {st} {body[:200]}')
        m = srv.metrics()
        # CPU contention gauges are there (threads in use between 1 and the cores).
        threads = metric(m, 'hinge:threads_active')
        check(1 <= threads <= (os.cpu_count() or 1), f'threads_active {threads:.0f}')
        check(all(any(k.startswith(n) for k in m)
                  for n in ('hinge:cpu_others_cores', 'hinge:thread_changes_total')),
              'cpu_others_cores and thread_changes_total are exported')
        cached = metric(m, 'hinge:kv_blocks_cached')
        check(cached >= 60 * 20, f'the prefix cache holds {cached:.0f} blocks')
        rss_before = srv.rss()

        write_psi(root, 15)  # >= 10 %: elevated
        m = wait_metric(srv, 'hinge:memory_pressure_level', 1)
        check(metric(m, 'hinge:memory_pressure_transitions_total{model_name="stories260K",level="elevated"}') == 1,
              'the transition to elevated is counted')
        check(metric(m, 'hinge:kv_blocks_cached') == 0, 'elevated: the prefix cache is dropped')
        time.sleep(0.2)
        rss_elevated = srv.rss()
        reclaimed = metric(m, 'hinge:memory_pressure_reclaimed_bytes_total')
        check(rss_elevated < rss_before - 8 * 2**20,
              f'RSS fell: {rss_before / 2**20:.1f} -> {rss_elevated / 2**20:.1f} MiB '
              f'(reclaimed {reclaimed / 2**20:.1f} MiB)')
        check(metric(m, 'hinge:kv_blocks_limit') < metric(m, 'hinge:kv_blocks_total'),
              'elevated: fewer KV blocks usable')
        st, _, body = srv.request('POST', '/v1/completions', {'prompt': 'Once', 'max_tokens': 1000})
        check(st == 200, 'elevated: new requests are admitted')
        used = json.loads(body)['usage']['completion_tokens']
        check(used <= 256, f'elevated: max_tokens capped ({used} tokens <= 256)')

        write_psi(root, 0)
        wait_metric(srv, 'hinge:memory_pressure_level', 0)

        # Streams that run through every transition.
        results, threads = [], []
        for i in range(3):
            t = threading.Thread(target=stream, args=(srv, {
                'prompt': prompt_ids(rng, 50), 'max_tokens': 1900, 'ignore_eos': True}, results))
            t.start()
            threads.append(t)
        time.sleep(0.3)

        write_psi(root, 45)  # >= 30 %: critical
        m = wait_metric(srv, 'hinge:memory_pressure_level', 2)
        st, headers, body = srv.request('POST', '/v1/completions', {'prompt': 'Once', 'max_tokens': 5})
        check(st == 503 and 'retry-after' in headers,
              f'critical: 503 with Retry-After ({st}, {headers.get("retry-after")})')
        check(json.loads(body)['error']['code'] == 'memory_pressure', 'the error names memory pressure')
        m = srv.metrics()
        check(metric(m, 'hinge:requests_rejected_total{model_name="stories260K",reason="memory_pressure"}') >= 1,
              'the 503 is counted by reason')
        check(metric(m, 'hinge:num_requests_running') >= 1, 'critical: running streams keep running')

        write_psi(root, 0)
        m = wait_metric(srv, 'hinge:memory_pressure_level', 0)
        check(metric(m, 'hinge:memory_pressure_transitions_total{model_name="stories260K",level="normal"}') == 2,
              'both returns to normal are counted')
        st, _, _ = srv.request('POST', '/v1/completions', {'prompt': 'Once', 'max_tokens': 5})
        check(st == 200, 'normal: admitted again')
        for t in threads:
            t.join(120)
        check(all(not t.is_alive() for t in threads), 'no stream hung')
        check(len(results) == 3 and all(r[0] == 200 and r[2] == 'length' and r[1] >= 1800
                                        for r in results),
              f'every stream started before the pressure finished all its tokens: {results}')
        m = srv.metrics()
        check(metric(m, 'hinge:kv_blocks_withheld') == 0, 'normal: every KV block usable again')


def run_rss_sampler(srv, stop, peak):
    while not stop.is_set():
        try:
            peak[0] = max(peak[0], srv.rss())
        except (OSError, ValueError):
            pass
        time.sleep(0.1)


def adversary(srv, seed, stop, counts):
    rng = random.Random(seed)
    while not stop.is_set():
        kind = rng.randrange(3)
        body = {'prompt': prompt_ids(rng, rng.randrange(200, 900)), 'max_tokens': rng.randrange(16, 120),
                'ignore_eos': True}
        if kind == 1:
            body['n'] = rng.randrange(2, 5)
        try:
            if kind == 2:  # stream and hang up mid-way
                s = socket.create_connection(('127.0.0.1', srv.port), timeout=30)
                data = json.dumps({**body, 'stream': True}).encode()
                s.sendall(b'POST /v1/completions HTTP/1.1\r\nHost: x\r\n'
                          + f'Content-Length: {len(data)}\r\n\r\n'.encode() + data)
                s.recv(4096)
                s.close()
                counts['disconnects'] += 1
            else:
                st, _, _ = srv.request('POST', '/v1/completions', body, timeout=120)
                counts[st] = counts.get(st, 0) + 1
        except OSError:
            counts['errors'] += 1


@test
def budget_holds():
    """--memory-budget: long prompts, n > 1 and disconnects never take RSS above the budget (100 ms samples)"""
    budget = 96 * 2**20 if not SANITIZED else 1024 * 2**20
    with Server('--memory-budget', str(budget), '-c', '1024', '--max-num-seqs', '64',
                '--no-pressure', quiet=True) as srv:
        line = srv.err_line('memory budget')
        check('KV arena' in line, f'the breakdown is printed: {line.strip()}')
        stop, peak = threading.Event(), [srv.rss()]
        counts = {'disconnects': 0, 'errors': 0}
        sampler = threading.Thread(target=run_rss_sampler, args=(srv, stop, peak))
        sampler.start()
        workers = [threading.Thread(target=adversary, args=(srv, 100 + i, stop, counts))
                   for i in range(6)]
        for w in workers:
            w.start()
        time.sleep(20 if not SANITIZED else 30)
        stop.set()
        for w in workers:
            w.join(150)
        sampler.join()
        m = srv.metrics()
        check(counts.get(200, 0) >= 10, f'the load ran: {counts}')
        check(metric(m, 'hinge:kv_blocks_cached') > 0 or metric(m, 'hinge:kv_evictions_total') > 0,
              'the KV arena was filled (cache or evictions)')
        check(peak[0] <= budget,
              f'peak RSS {peak[0] / 2**20:.1f} MiB <= budget {budget / 2**20:.0f} MiB')
        st, _, _ = srv.request('GET', '/health')
        check(st == 200, 'the server is healthy afterwards')


@test
def budget_refuses():
    """a budget below the weights is refused at start, with the breakdown"""
    code, err = start_fails('--memory-budget', '4MiB')
    check(code != 0, f'exit code {code}')
    lines = [l for l in err.splitlines() if l.startswith('hinge:')]
    line = lines[-1] if lines else ''
    check('--memory-budget 4.00 MiB does not fit the model' in line and 'weights' in line
          and 'raise it to at least' in line, f'one line with the breakdown: {line}')
    code, err = start_fails('--memory-budget', 'lots')
    check(code != 0 and "--memory-budget: cannot parse 'lots'" in err, 'a bad size is named')


@test
def shift_marks_responses():
    """--context-policy shift: completions run past -c, marked truncated with the dropped count; /metrics counts shifts"""
    with Server('-c', '128', '--context-policy', 'shift', quiet=True) as srv:
        st, _, body = srv.request('POST', '/v1/completions',
                                  {'prompt': 'Once upon a time', 'max_tokens': 600,
                                   'ignore_eos': True})
        check(st == 200, f'a completion longer than the context is served ({st} {body[:200]})')
        j = json.loads(body)
        c = j['choices'][0]
        check(j['usage']['completion_tokens'] == 600 and c['finish_reason'] == 'length',
              f"600 tokens past a 128-token context: {j['usage']}")
        check(c.get('truncated') is True and c.get('dropped_tokens', 0) >= 600 - 128,
              f"the choice is marked: truncated {c.get('truncated')}, dropped {c.get('dropped_tokens')}")
        check(j['usage'].get('dropped_tokens') == c['dropped_tokens'], 'usage has the dropped count')
        events = []
        stream(srv, {'prompt': 'Once upon a time', 'max_tokens': 300, 'ignore_eos': True}, events)
        check(events and events[0][0] == 200 and events[0][2] == 'length', f'a stream too: {events}')
        m = srv.metrics()
        check(metric(m, 'hinge:context_shifts_total') >= (600 - 128) // 16,
              f"shifts counted: {metric(m, 'hinge:context_shifts_total'):.0f}")
        check(metric(m, 'hinge:context_dropped_tokens_total') >= 600 - 128, 'dropped tokens counted')
        st, _, body = srv.request('POST', '/v1/completions', {'prompt': 'Once upon a time', 'max_tokens': 20})
        check(st == 200 and 'truncated' not in json.loads(body)['choices'][0],
              'a completion that fits is not marked')
    with Server('-c', '128', quiet=True) as srv:
        st, _, body = srv.request('POST', '/v1/completions', {'prompt': 'Once', 'max_tokens': 600})
        check(st == 400 and 'maximum context length' in body, '--context-policy error: still a 400')


if __name__ == '__main__':
    sys.exit(main(__doc__))
