#!/usr/bin/python3
"""`hinge serve --speculative ngram|draft` as a process: with ngram, completions (whole and
streamed, greedy and seeded) are the same tokens as a server without it, /metrics counts
hinge:spec_* (and vLLM's spec_decode_* names with --metrics-compat vllm) and /v1/stats reports
the acceptance; with a draft model (the model transplanted to a Q4_K llama, `hinge synth
--transplant`), greedy completions are the same and seeded ones repeat; bad flags refuse to
start.

    speculative.py --hinge BIN --model GGUF same_outputs|draft_model|bad_flags
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ARGS, check, main, temp_dir, test  # noqa: E402
from server_process import Server, start_fails  # noqa: E402

STORY = ('Once upon a time, there was a little girl named Lily. She liked to play with her ball. '
         'Once upon a time, there was a little girl named Lily. She')


def completions(s):
    out = []
    for i, (temp, stream) in enumerate(((0, False), (0, True), (0.8, False), (0.8, True))):
        body = {'prompt': STORY, 'max_tokens': 80, 'temperature': temp, 'seed': 11 + i,
                'stream': stream, 'logprobs': 1}
        status, _, text = s.request('POST', '/v1/completions', body)
        check(status == 200, f'completion {i}: {status}')
        if stream:
            chunks = [json.loads(l[6:]) for l in text.splitlines()
                      if l.startswith('data: ') and l != 'data: [DONE]']
            out.append(''.join(c['choices'][0]['text'] for c in chunks if c.get('choices')))
        else:
            out.append(json.loads(text)['choices'][0]['text'])
    return out


def metrics(s):
    """One /metrics snapshot: {name: value} of the labelled series."""
    _, _, body = s.request('GET', '/metrics')
    out = {}
    for line in body.splitlines():
        if '{' in line and not line.startswith('#'):
            out.setdefault(line.split('{', 1)[0], float(line.rsplit(' ', 1)[1]))
    return out


def metric(s, name):
    return metrics(s).get(name)


@test
def same_outputs():
    """with --speculative ngram: the same completions, drafts accepted and counted"""
    with Server(quiet=True) as plain:
        want = completions(plain)
        check(metric(plain, 'hinge:spec_verifications_total') == 0, 'no verification without it')
    with Server('--speculative', 'ngram', '--spec-k', '6', '--metrics-compat', 'vllm',
                quiet=True) as spec:
        got = completions(spec)
        check(got == want, 'the same 4 completions (greedy and seeded, whole and streamed)')
        m = metrics(spec)
        drafted = m.get('hinge:spec_draft_tokens_total')
        accepted = m.get('hinge:spec_accepted_tokens_total')
        check(drafted and accepted and 0 < accepted <= drafted,
              f'/metrics: {accepted:.0f} of {drafted:.0f} draft tokens accepted')
        check(m.get('vllm:spec_decode_num_accepted_tokens_total') == accepted and
              m.get('vllm:spec_decode_num_draft_tokens_total') == drafted,
              '--metrics-compat vllm: vllm:spec_decode_num_{draft,accepted}_tokens_total')
        _, _, body = spec.request('GET', '/v1/stats')
        sp = json.loads(body)['speculative']
        check(sp['accepted_tokens'] == accepted and sp['tokens_per_verification'] > 1,
              f'/v1/stats: {sp["tokens_per_verification"]:.2f} tokens per verification')


def transplanted_draft():
    """The model as a widened Q4_K llama: the same function up to 4-bit rounding."""
    path = os.path.join(temp_dir(), 'draft-q4k.gguf')
    subprocess.run([ARGS.hinge, 'synth', '--transplant', ARGS.model, '--family', 'llama',
                    '--type', 'q4_k', '-o', path], check=True, capture_output=True)
    return path


@test
def draft_model():
    """with --speculative draft: greedy completions the same, seeded ones repeat, counted"""
    with Server(quiet=True) as plain:
        want = completions(plain)
    draft = transplanted_draft()
    with Server('--speculative', 'draft', '--draft-model', draft, quiet=True) as spec:
        got = completions(spec)
        check(got[:2] == want[:2], 'the same greedy completions (whole and streamed)')
        again = completions(spec)
        check(again == got, 'the same seeded completions again (the same seeds, the same stream)')
        m = metrics(spec)
        drafted = m.get('hinge:spec_draft_tokens_total')
        accepted = m.get('hinge:spec_accepted_tokens_total')
        computed = m.get('hinge:spec_draft_model_tokens_total')
        check(drafted and accepted and 0 < accepted <= drafted and computed > drafted / 2,
              f'/metrics: {accepted:.0f} of {drafted:.0f} draft tokens accepted, the draft '
              f'model computed {computed:.0f}')
        _, _, body = spec.request('GET', '/v1/stats')
        sp = json.loads(body)['speculative']
        check(sp['draft_model_kv_bytes'] > 0 and sp['tokens_per_verification'] > 1,
              f'/v1/stats: {sp["tokens_per_verification"]:.2f} tokens per verification, draft '
              f'KV {sp["draft_model_kv_bytes"]} bytes')


@test
def bad_flags():
    """an unknown method, --spec-k out of range, a draft model missing, of another vocabulary or
    without --speculative draft refuse to start"""
    other = os.path.join(os.path.dirname(ARGS.model), 'tinystories-656k')
    for args, what in ((['--speculative', 'eagle'], '--speculative'),
                       (['--speculative', 'ngram', '--spec-k', '0'], '--spec-k'),
                       (['--speculative', 'draft'], 'needs --draft-model'),
                       (['--speculative', 'draft', '--draft-model', other], 'vocabulary'),
                       (['--speculative', 'draft', '--draft-model', '/nonexistent.gguf'],
                        '--draft-model'),
                       (['--draft-model', 'x.gguf'], '--draft-model')):
        rc, err = start_fails(*args)
        check(rc != 0 and what in err, f'{" ".join(args)}: {err.strip().splitlines()[-1]}')


if __name__ == '__main__':
    sys.exit(main(__doc__))
