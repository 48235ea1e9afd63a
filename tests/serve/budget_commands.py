#!/usr/bin/python3
"""The memory budget held while running, through every command, on a model of real size
(smollm-135m q8_0 from `hinge synth`, 144 MB: its weights, mapped or as packed copies where the
CPU packs them, must count; a 1 MB model hides them). Each case samples the process's RSS every
100 ms and never sees it above the budget, with a workload whose KV demand exceeds what the
budget leaves (ctest: ServeBudget.*).

run_budget: `hinge run -c 2048 -n 1500` finishes with `length` at the context the budget leaves,
  and with `--context-policy shift` generates all 1500 tokens, shifting.
bench_budget: `hinge bench` of 16 x 600-token prompts counts evictions or preemptions and
  completes every request.
serve_budget: 40 concurrent 700-token requests to `hinge serve --memory-budget 400MiB` all
  complete with evictions; once they end, RSS falls to within 20% of weights + runtime + the
  low watermark.
cgroup_budget: no --memory-budget: a cgroup v2 memory.max under --pressure-root is the budget.

Standard library only; run with /usr/bin/python3:

    budget_commands.py --hinge build/release/hinge NAME
"""
import http.client
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time

from budget_probe import budget_leaving_kv, parse_fixed
from harness import ARGS, check, main, temp_dir, test
from server_process import Server

SANITIZED = os.environ.get('HINGE_SANITIZED') == '1'
SLACK = 1024 * 2**20 if SANITIZED else 0  # ASan's shadow memory is RSS too
MiB = 2**20
WORK = temp_dir('hinge-budget-')


def model():
    path = os.path.join(WORK, 'smollm-135m-q8_0.gguf')
    if not os.path.exists(path):
        subprocess.run([ARGS.hinge, 'synth', '--preset', 'smollm-135m', '--type', 'q8_0', '-o',
                        path], check=True, capture_output=True, timeout=120)
    return path


def rss_of(pid):
    try:
        with open(f'/proc/{pid}/status') as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Sampler:
    """RSS of a process every 100 ms, the highest seen."""

    def __init__(self, pid):
        self.pid, self.peak, self.samples = pid, 0, 0
        self.stop_ = threading.Event()
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop_.is_set():
            r = rss_of(self.pid)
            if r:
                self.peak = max(self.peak, r)
                self.samples += 1
            time.sleep(0.1)

    def stop(self):
        self.stop_.set()
        self.t.join()
        return self.peak


def run_sampled(cmd, timeout=300):
    """Runs cmd, sampling its RSS; returns (returncode, stdout, stderr, peak, samples)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    s = Sampler(p.pid)
    out, err = p.communicate(timeout=timeout)
    peak = s.stop()
    return p.returncode, out, err, peak, s.samples


def breakdown(err):
    m = re.search(r'memory budget .*', err)
    return m.group(0) if m else ''


@test
def run_budget():
    """run: length at the context the budget leaves; shift: every token; RSS <= budget"""
    # A budget that leaves the KV cache 40% of what 2048 tokens need, whatever this CPU packs.
    budget, fixed, need = budget_leaving_kv(ARGS.hinge, model(), 2048, 0.4)
    base = [ARGS.hinge, 'run', '-m', model(), '-t', '2', '-c', '2048', '-n', '1500', '-p',
            'Once upon a time', '--ignore-eos', '--no-pressure', '--memory-budget', str(budget),
            '--json']
    rc, out, err, peak, n = run_sampled(base)
    check(rc == 0, f'run exits 0 ({err.strip()[-300:]})')
    m = re.search(r'context lowered from 2048 to (\d+) tokens', err)
    check(m is not None, f'the budget lowers the context: {breakdown(err)} (fixed part '
          f'{fixed / MiB:.1f} MiB, 2048 tokens need {need / MiB:.1f} MiB)')
    ctx = int(m.group(1))
    j = json.loads(out)
    check(j['finish_reason'] == 'length' and j['prompt_tokens'] + j['generated_tokens'] == ctx,
          f"finish length at the context: {j['prompt_tokens']} + {j['generated_tokens']} = {ctx}")
    check(j['memory_budget_bytes'] == budget and j['rss_peak_bytes'] <= budget + SLACK,
          f"the JSON reports the budget held: peak {j['rss_peak_bytes'] / MiB:.1f} MiB")
    check(peak <= budget + SLACK and n >= 5, f'peak RSS {peak / MiB:.1f} MiB <= '
          f'{budget / MiB:.0f} MiB ({n} samples)')
    rc, out, err, peak, n = run_sampled(base + ['--context-policy', 'shift'])
    j = json.loads(out)
    check(rc == 0 and j['generated_tokens'] == 1500 and j['context_shifts'] > 0,
          f"shift: all 1500 tokens, {j['context_shifts']} shifts")
    check(peak <= budget + SLACK, f'shift: peak RSS {peak / MiB:.1f} MiB <= {budget / MiB:.0f} '
          f'MiB ({n} samples)')


@test
def bench_budget():
    """bench: evictions or preemptions, every request completes, RSS <= budget"""
    budget = 300 * MiB + SLACK
    rc, out, err, peak, n = run_sampled(
        [ARGS.hinge, 'bench', '-m', model(), '-t', '2', '--requests', '16', '--prompt-tokens',
         '600', '--gen-tokens', '48', '--memory-budget', str(budget), '--json'])
    check(rc == 0, f'bench exits 0 ({err.strip()[-300:]})')
    j = json.loads(out)
    check(j['kv_evictions'] + j['preemptions'] > 0,
          f"the KV cache gave way: {j['kv_evictions']} evictions, {j['preemptions']} preemptions")
    check(j['output_tokens'] == 16 * 48, f"every request completed ({j['output_tokens']} tokens)")
    check(peak <= budget and n >= 5,
          f'peak RSS {peak / MiB:.1f} MiB <= {budget / MiB:.0f} MiB ({n} samples)')


def metric(m, name):
    return sum(v for k, v in m.items() if k == name or k.startswith(name + '{'))


@test
def serve_budget():
    """serve: 40 x 700-token requests complete under 400 MiB; RSS falls back after the burst"""
    budget = 400 * MiB + SLACK
    ARGS.model = model()
    # --queue-timeout: on a slow CPU (AVX2 only) the last of the 40 wait past the default 120 s
    # for KV memory; this case is about the budget, not the admission deadline.
    with Server('--memory-budget', str(budget), '--no-pressure', '--queue-timeout', '600',
                quiet=True) as srv:
        line = srv.err_line('memory budget')
        parts = parse_fixed(line)
        arena = re.search(r'KV arena ([0-9.]+) MiB', line)
        check(parts is not None and arena is not None, f'the breakdown: {line.strip()}')
        # Packed copies exist where their kernels run (AVX-512 / AMX); mapped + packed counts
        # every weight byte either way (the file's pages of a packed tensor are dropped).
        weights = os.path.getsize(ARGS.model)
        check(parts[0] + parts[1] >= 0.9 * weights,
              f'the breakdown counts every weight ({weights / MiB:.1f} MiB in the file, packed '
              f'or mapped): {line.strip()}')
        fixed = parts[0] + parts[1] + parts[2]
        watermark = float(arena.group(1)) * MiB / 8
        sampler = Sampler(srv.proc.pid)
        results = []

        def one(i):
            rng = random.Random(i)
            st, _, body = srv.request('POST', '/v1/completions',
                                      {'prompt': [rng.randrange(100, 40000) for _ in range(700)],
                                       'max_tokens': 24, 'ignore_eos': True}, timeout=600)
            results.append((st, json.loads(body)['usage']['completion_tokens'] if st == 200 else 0))
        workers = [threading.Thread(target=one, args=(i,)) for i in range(40)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        time.sleep(1.0)
        after = rss_of(srv.proc.pid)
        peak = sampler.stop()
        check(len(results) == 40 and all(r == (200, 24) for r in results),
              f'all 40 requests completed with every token: '
              f'{[r for r in results if r != (200, 24)] or len(results)}')
        mt = srv.metrics()
        check(metric(mt, 'hinge:kv_evictions_total') + metric(mt, 'hinge:num_preemptions_total') > 0,
              'the KV cache gave way (evictions or preemptions)')
        check(peak <= budget, f'peak RSS {peak / MiB:.1f} MiB <= {budget / MiB:.0f} MiB')
        target = fixed + watermark
        check(after <= 1.2 * target + SLACK,
              f'after the burst RSS fell to {after / MiB:.1f} MiB, within 20% of weights + runtime '
              f'+ low watermark = {target / MiB:.1f} MiB (peak {peak / MiB:.1f})')
        check(metric(mt, 'hinge:kv_trimmed_bytes_total') > 0, 'free KV pages were returned')


@test
def cgroup_budget():
    """a cgroup v2 memory.max under --pressure-root is the budget when no flag is given"""
    root = os.path.join(WORK, 'root')
    os.makedirs(os.path.join(root, 'proc', 'self'), exist_ok=True)
    os.makedirs(os.path.join(root, 'sys', 'fs', 'cgroup', 'hinge-test'), exist_ok=True)
    with open(os.path.join(root, 'proc', 'self', 'cgroup'), 'w') as f:
        f.write('0::/hinge-test\n')
    budget = 262 * MiB + SLACK
    for name, value in (('memory.max', budget), ('memory.current', 0)):
        with open(os.path.join(root, 'sys', 'fs', 'cgroup', 'hinge-test', name), 'w') as f:
            f.write(f'{value}\n')
    rc, out, err, peak, n = run_sampled(
        [ARGS.hinge, 'run', '-m', model(), '-t', '2', '-c', '2048', '-n', '1200', '-p',
         'Once upon a time', '--ignore-eos', '--pressure-root', root, '--context-policy', 'shift',
         '--json'])
    check(rc == 0, f'run exits 0 ({err.strip()[-300:]})')
    check('(the cgroup memory limit)' in breakdown(err), f'the cgroup limit is the budget: '
          f'{breakdown(err)}')
    j = json.loads(out)
    check(j['memory_budget_bytes'] == budget and j['generated_tokens'] == 1200,
          f"budget {j['memory_budget_bytes'] / MiB:.0f} MiB, {j['generated_tokens']} tokens")
    check(peak <= budget, f'peak RSS {peak / MiB:.1f} MiB <= {budget / MiB:.0f} MiB ({n} samples)')


if __name__ == '__main__':
    try:
        sys.exit(main(__doc__))
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
