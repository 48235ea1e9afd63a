"""A memory budget sized from what hinge itself reports, so a test's budget leaves the KV cache
the share it means to on every CPU: the fixed part (weights mapped + packed copies + runtime +
scratch) depends on the machine, since packed weight layouts exist only where their kernels run
(AVX-512 / AMX), and a constant budget that lowers the context on one CPU may not on another.

Standard library only.
"""
import os
import re
import subprocess

MiB = 2**20
BREAKDOWN = re.compile(r'weights ([0-9.]+) MiB mapped \+ ([0-9.]+) (MiB|B) packed \+ runtime '
                       r'([0-9.]+) MiB \(libraries, heap, threads\) \+ scratch ([0-9.]+) MiB')


def parse_fixed(text):
    """(mapped, packed, runtime, scratch) in bytes from a 'memory budget ...' line, or None."""
    m = BREAKDOWN.search(text)
    if not m:
        return None
    packed = float(m.group(2)) * (MiB if m.group(3) == 'MiB' else 1)
    return (float(m.group(1)) * MiB, packed, float(m.group(4)) * MiB, float(m.group(5)) * MiB)


def budget_leaving_kv(hinge, model, ctx, kv_share, extra=()):
    """The --memory-budget (bytes, a whole MiB) that leaves a KV arena of about kv_share of
    what one sequence of ctx tokens needs, for `hinge run -c ctx` of model. hinge's reserve is
    16 MiB + 3% of the budget (engine/memory_budget.cpp); what the sequence needs is the arena
    of a probe run with room to spare (`hinge run` caps its arena at one sequence of ctx tokens).
    Returns (budget, fixed bytes of the probe, KV bytes a ctx-token sequence needs).

    It also pins the weight layout (HINGE_WEIGHT_LAYOUT=row-groups where the caller set none)
    for this process and every hinge it starts afterwards: where two layouts run, hinge picks
    one by timing them, once per machine and build (kernels/layout_cache.h), but with
    HINGE_MACHINE_PROFILE=off each process times them again, and under a loaded machine the
    probe and the run under test could pick differently; the packed copy is not the GGUF size
    (smollm-135m q8_0 on Zen 3: 190 MiB fixed with the GGUF blocks, 220 with the row groups),
    so the budget would leave the KV cache another share than it means to, or none."""
    os.environ.setdefault('HINGE_WEIGHT_LAYOUT', 'row-groups')
    probe = subprocess.run([hinge, 'run', '-m', model, '-t', '2', '-c', str(ctx), '-n', '1',
                            '-p', 'a', '--no-pressure', '--memory-budget', '8GiB', *extra],
                           capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        raise RuntimeError(f'budget probe failed: {probe.stderr.strip()[-300:]}')
    fixed = parse_fixed(probe.stderr)
    arena = re.search(r'KV arena ([0-9.]+) MiB', probe.stderr)
    if fixed is None or arena is None:
        raise RuntimeError(f'no memory breakdown in: {probe.stderr.strip()[-300:]}')
    if 'unused' not in probe.stderr:
        raise RuntimeError(f'the probe budget did not leave room: {probe.stderr.strip()[-300:]}')
    need = float(arena.group(1)) * MiB
    budget = (sum(fixed) + 16 * MiB + kv_share * need) / 0.97
    return int(-(-budget // MiB)) * MiB, sum(fixed), need
