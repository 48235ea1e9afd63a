#!/usr/bin/python3
"""Structured outputs on a real `hinge serve` (server/structured_output.h, grammar/): a JSON
schema request always returns text that parses and validates against the schema (checked by
Debian's python3-jsonschema, an independent validator) over 200 seeds, on stories260K and on a
`hinge synth` model whose output is random; json_object mode gives a JSON object; guided_choice
and a GBNF grammar give what they say; bad schemas and grammars are 400s naming the field.

    structured_outputs.py --hinge BIN --model GGUF CASE
"""
import json
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jsonschema  # noqa: E402  (python3-jsonschema)
from harness import ARGS, Fail, check, main, temp_dir, test  # noqa: E402
from server_process import Server  # noqa: E402

SCHEMA = {
    'type': 'object',
    'properties': {
        'name': {'type': 'string', 'maxLength': 10},
        'age': {'type': 'integer'},
        'mood': {'enum': ['happy', 'sad', 3]},
        'tags': {'type': 'array', 'items': {'type': 'string', 'maxLength': 5}, 'maxItems': 3},
        'pet': {'anyOf': [{'type': 'null'}, {'$ref': '#/$defs/pet'}]},
        'score': {'type': ['number', 'null']},
    },
    'required': ['name', 'age', 'mood', 'tags'],
    'additionalProperties': False,
    '$defs': {'pet': {'type': 'object', 'properties': {'kind': {'const': 'cat'}, 'legs': {'type': 'integer'}},
                      'required': ['kind'], 'additionalProperties': False}},
}


def chat(s, extra, seed, max_tokens=380):
    body = {'messages': [{'role': 'user', 'content': 'Once upon a time'}], 'max_tokens': max_tokens,
            'temperature': 1.0, 'seed': seed}
    body.update(extra)
    return s.request('POST', '/v1/chat/completions', body, timeout=120)


def synth_model():
    path = os.path.join(temp_dir('hinge-structured-'), 'tiny.gguf')
    subprocess.run([ARGS.hinge, 'synth', '--preset', 'tiny', '--type', 'f16', '-o', path], check=True,
                   capture_output=True)
    return path


def every_seed_validates():
    rf = {'response_format': {'type': 'json_schema', 'json_schema': {'name': 'person', 'strict': True,
                                                                        'schema': SCHEMA}}}
    failures = []
    lock = threading.Lock()
    with Server(quiet=True) as s:
        def run(seeds):
            for seed in seeds:
                status, _, body = chat(s, rf, seed)
                try:
                    if status != 200:
                        raise Fail(f'status {status} {body[:200]}')
                    msg = json.loads(body)['choices'][0]
                    data = json.loads(msg['message']['content'])
                    jsonschema.validate(data, SCHEMA)
                    if msg['finish_reason'] != 'stop':
                        raise Fail(f'finish {msg["finish_reason"]}')
                except Exception as e:  # noqa: BLE001 - collected and reported together
                    with lock:
                        failures.append(f'seed {seed}: {e}')
        threads = [threading.Thread(target=run, args=(range(k, 200, 4),)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    check(not failures, f'200 seeds parse and validate' + (f'; {len(failures)} did not: ' + '; '.join(failures[:5]) if failures else ''))


@test
def schema_200_seeds_trained():
    """stories260K: 200 seeds of a json_schema request all parse and validate (jsonschema)"""
    every_seed_validates()


@test
def schema_200_seeds_random_model():
    """a hinge synth model (random output): 200 seeds all parse and validate"""
    ARGS.model = synth_model()
    every_seed_validates()


@test
def json_object_choice_and_grammar():
    """json_object gives a JSON object; guided_choice one of its strings; GBNF and guided_regex their language"""
    with Server(quiet=True) as s:
        for seed in range(20):
            status, _, body = chat(s, {'response_format': {'type': 'json_object'}}, seed, max_tokens=300)
            check(status == 200, f'status {status}')
            msg = json.loads(body)['choices'][0]
            if msg['finish_reason'] == 'stop':  # an unbounded object may run to max_tokens
                check(isinstance(json.loads(msg['message']['content']), dict), f'seed {seed}: an object')
            status, _, body = chat(s, {'guided_choice': ['yes', 'no', 'maybe so']}, seed)
            check(status == 200, f'status {status}')
            check(json.loads(body)['choices'][0]['message']['content'] in ('yes', 'no', 'maybe so'),
                  f'seed {seed}: one of the choices')
            gbnf = 'root ::= "Dear " name ",\\n" [a-z ]{0,20} "."\nname ::= [A-Z] [a-z]{1,8}\n'
            status, _, body = chat(s, {'guided_regex': r'[A-Z][a-z]{1,8} (is|was) \d{1,3}( years)?'}, seed)
            check(status == 200, f'status {status}')
            text = json.loads(body)['choices'][0]['message']['content']
            check(re.fullmatch(r'[A-Z][a-z]{1,8} (is|was) \d{1,3}( years)?', text), f'seed {seed}: the regex matches')
            status, _, body = chat(s, {'grammar': gbnf, 'stream': False}, seed)
            check(status == 200, f'status {status}')
            text = json.loads(body)['choices'][0]['message']['content']
            check(re.fullmatch(r'Dear [A-Z][a-z]{1,8},\n[a-z ]{0,20}\.', text), f'seed {seed}: the grammar\'s language')
        # Streaming: the chunks join into a valid object too.
        status, _, body = chat(s, {'response_format': {'type': 'json_schema', 'json_schema': {
            'name': 'p', 'schema': SCHEMA}}, 'stream': True}, 7)
        check(status == 200, f'status {status}')
        text = ''.join(json.loads(l[6:])['choices'][0]['delta'].get('content', '')
                       for l in body.splitlines() if l.startswith('data: {') and json.loads(l[6:])['choices'])
        jsonschema.validate(json.loads(text), SCHEMA)


TOOLS = [
    {'type': 'function', 'function': {'name': 'get_weather', 'description': 'The weather in a place',
     'parameters': {'type': 'object', 'properties': {
         'location': {'type': 'string', 'maxLength': 12, 'description': 'a city'},
         'unit': {'enum': ['celsius', 'fahrenheit'], 'description': 'the unit'}},
         'required': ['location'], 'additionalProperties': False}}},
    {'type': 'function', 'function': {'name': 'add', 'description': 'Adds two integers',
     'parameters': {'type': 'object', 'properties': {
         'a': {'type': 'integer', 'description': 'one'}, 'b': {'type': 'integer', 'description': 'two'}},
         'required': ['a', 'b'], 'additionalProperties': False}}},
]
SCHEMAS = {t['function']['name']: t['function']['parameters'] for t in TOOLS}
# One real template per tool-call format (chat/tool_format.h).
TEMPLATES = {
    'hermes': 'Qwen-Qwen2.5-7B-Instruct.jinja',
    'llama3_json': 'meta-llama-Llama-3.1-8B-Instruct.jinja',
    'mistral': 'mistralai-Mistral-Nemo-Instruct-2407.jinja',
    'functionary_v3_1': 'meetkai-functionary-medium-v3.1.jinja',
    'functionary_v3_2': 'meetkai-functionary-medium-v3.2.jinja',
    'command_r7b': 'CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja',
    'command_r_plus': 'CohereForAI-c4ai-command-r-plus-tool_use.jinja',
    'firefunction_v2': 'fireworks-ai-llama-3-firefunction-v2.jinja',
    'deepseek_r1': 'deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja',
}


def calls_of_stream(body):
    """delta.tool_calls chunks joined per index: [(name, arguments)]."""
    calls = {}
    for line in body.splitlines():
        if not line.startswith('data: {'):
            continue
        for ch in json.loads(line[6:])['choices']:
            for tc in ch['delta'].get('tool_calls', []):
                c = calls.setdefault(tc['index'], ['', ''])
                c[0] += tc.get('function', {}).get('name', '')
                c[1] += tc.get('function', {}).get('arguments', '')
    return [tuple(calls[k]) for k in sorted(calls)]


@test
def tool_choice_required_every_format():
    """tool_choice required / named, each format's real template, a random synth model: every
    reply is calls whose arguments validate against the tool's schema, streamed or not"""
    model = os.path.join(temp_dir('hinge-structured-'), 'tiny4k.gguf')
    subprocess.run([ARGS.hinge, 'synth', '--preset', 'tiny', '--type', 'f16', '--context', '16384',
                    '-o', model], check=True, capture_output=True)
    ARGS.model = model
    templates = os.path.join(os.path.dirname(ARGS.hinge), '..', '..', '..', 'shared', 'chat-templates')
    if not os.path.isdir(templates):
        templates = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'shared',
                                 'chat-templates')
    for fmt, file in TEMPLATES.items():
        with Server('--chat-template-file', os.path.join(templates, file), quiet=True) as s:
            deadline = time.time() + 10  # stderr is read by a thread: give it the moment
            while f'parsed as {fmt}' not in s.logs() and time.time() < deadline:
                time.sleep(0.05)
            check(f'parsed as {fmt}' in s.logs(), f'{file}: detected as {fmt}')
            for seed in range(6):
                choice = 'required' if seed < 5 else {'type': 'function', 'function': {'name': 'add'}}
                body = {'messages': [{'role': 'user', 'content': 'Weather in Paris?'}], 'tools': TOOLS,
                        'tool_choice': choice, 'max_tokens': 200, 'temperature': 1.0, 'seed': seed}
                status, _, text = s.request('POST', '/v1/chat/completions', body, timeout=120)
                if status != 200:
                    raise Fail(f'{fmt} seed {seed}: {status} {text[:300]}')
                c = json.loads(text)['choices'][0]
                calls = c['message'].get('tool_calls') or []
                if c['finish_reason'] != 'tool_calls' or not calls:
                    raise Fail(f'{fmt} seed {seed}: {c["finish_reason"]}, content {c["message"]["content"]!r:.300}')
                for call in calls:
                    name = call['function']['name']
                    if seed == 5 and name != 'add':
                        raise Fail(f'{fmt}: the named function was not called: {name}')
                    jsonschema.validate(json.loads(call['function']['arguments']), SCHEMAS[name])
                if seed == 0:  # streamed: the calls arrive as delta.tool_calls, valid too (not
                    # compared to the above: the prefix cache computes the prompt's last logits in
                    # another batch shape, and a random model at temperature 1 may then differ)
                    body['stream'] = True
                    status, _, streamed = s.request('POST', '/v1/chat/completions', body, timeout=120)
                    got = calls_of_stream(streamed)
                    if not got or '"finish_reason":"tool_calls"' not in streamed:
                        raise Fail(f'{fmt}: streamed {got} {streamed[-300:]}')
                    for name, args in got:
                        jsonschema.validate(json.loads(args), SCHEMAS[name])
            check(True, f'{fmt}: 6 replies of valid calls, and streamed')


@test
def bad_schemas_and_grammars_are_400():
    """unsupported keywords, bad GBNF and regexes, two constraints: 400s naming the field"""
    cases = [
        ({'response_format': {'type': 'json_schema', 'json_schema': {'name': 'x', 'schema': {
            'type': 'string', 'pattern': '^a'}}}}, 'response_format.json_schema.schema', "'pattern'"),
        ({'response_format': {'type': 'json_schema', 'json_schema': {'name': 'x'}}},
         'response_format.json_schema.schema', 'required'),
        ({'response_format': {'type': 'xml'}}, 'response_format.type', 'json_schema'),
        ({'guided_json': {'type': 'integer', 'minimum': 0}}, 'guided_json', "'minimum'"),
        ({'grammar': 'root ::= undefined-rule'}, 'grammar', 'undefined-rule'),
        ({'guided_grammar': 'root ::= root "a"'}, 'guided_grammar', 'left-recursive'),
        ({'guided_choice': []}, 'guided_choice', 'non-empty'),
        ({'guided_regex': '(a)\\1'}, 'guided_regex', 'backreferences'),
        ({'guided_json': {'type': 'object'}, 'grammar': 'root ::= "a"'}, 'response_format', 'at most one'),
    ]
    with Server(quiet=True) as s:
        for extra, param, what in cases:
            status, _, body = chat(s, extra, 1, max_tokens=8)
            check(status == 400, f'{extra}: {status} {body}')
            err = json.loads(body)['error']
            check(err['param'] == param, f'{extra}: param {err["param"]}')
            check(what in err['message'], f'{extra}: {err["message"]}')
        status, _, _ = chat(s, {}, 1, max_tokens=4)
        check(status == 200, 'the server keeps serving')


if __name__ == '__main__':
    sys.exit(main(__doc__))
