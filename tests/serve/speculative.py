#!/usr/bin/python3
"""`hinge serve --speculative ngram` as a process: completions (whole and streamed, greedy and
seeded) are the same tokens as a server without it, /metrics counts hinge:spec_* (and vLLM's
spec_decode_* names with --metrics-compat vllm) and /v1/stats reports the acceptance; bad flags
refuse to start.

    speculative.py --hinge BIN --model GGUF same_outputs|bad_flags
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, main, test  # noqa: E402
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


def metric(s, name):
    _, _, body = s.request('GET', '/metrics')
    for line in body.splitlines():
        if line.startswith(name + '{'):
            return float(line.rsplit(' ', 1)[1])
    return None


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
        drafted = metric(spec, 'hinge:spec_draft_tokens_total')
        accepted = metric(spec, 'hinge:spec_accepted_tokens_total')
        check(drafted and accepted and 0 < accepted <= drafted,
              f'/metrics: {accepted:.0f} of {drafted:.0f} draft tokens accepted')
        check(metric(spec, 'vllm:spec_decode_num_accepted_tokens_total') == accepted and
              metric(spec, 'vllm:spec_decode_num_draft_tokens_total') == drafted,
              '--metrics-compat vllm: vllm:spec_decode_num_{draft,accepted}_tokens_total')
        _, _, body = spec.request('GET', '/v1/stats')
        sp = json.loads(body)['speculative']
        check(sp['accepted_tokens'] == accepted and sp['tokens_per_verification'] > 1,
              f'/v1/stats: {sp["tokens_per_verification"]:.2f} tokens per verification')


@test
def bad_flags():
    """an unknown method, --spec-k out of range, draft without a model refuse to start"""
    for args, what in ((['--speculative', 'eagle'], '--speculative'),
                       (['--speculative', 'ngram', '--spec-k', '0'], '--spec-k'),
                       (['--speculative', 'draft'], 'not built yet'),
                       (['--draft-model', 'x.gguf'], '--draft-model')):
        rc, err = start_fails(*args)
        check(rc != 0 and what in err, f'{" ".join(args)}: {err.strip().splitlines()[-1]}')


if __name__ == '__main__':
    sys.exit(main(__doc__))
