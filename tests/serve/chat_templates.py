#!/usr/bin/python3
"""`hinge serve --chat-template-file` with the shared templates of the new families
(ctest: ServeChatTemplates.*).

The Qwen2.5, Gemma 2 and Phi-3.5 templates of ../shared/chat-templates drive
/v1/chat/completions: the prompt a chat becomes has as many tokens as /tokenize gives for the
same conversation rendered by Python's jinja2 (scripts/render-chat-template.py, as transformers
sets it up), each template's count differs from the others', and a missing or broken template
file refuses to start with one line. Run with /usr/bin/python3:

    chat_templates.py --hinge build/release/hinge --model ../shared/models/stories260K.gguf NAME
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ARGS, check, main, temp_dir, test  # noqa: E402
from tenants import Server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATES = os.path.join(ROOT, '..', 'shared', 'chat-templates')
NAMES = ['Qwen-Qwen2.5-7B-Instruct.jinja', 'google-gemma-2-2b-it.jinja',
         'microsoft-Phi-3.5-mini-instruct.jinja']
CHAT = [{'role': 'user', 'content': 'Once upon a time there was a cat.'},
        {'role': 'assistant', 'content': 'The cat liked milk.'},
        {'role': 'user', 'content': 'What happened next?'}]


def rendered(template_path):
    """The prompt jinja2 renders (with the generation prompt), or None without python3-jinja2."""
    script = os.path.join(ROOT, 'scripts', 'render-chat-template.py')
    job = {'template_path': template_path,
           'context': {'messages': CHAT, 'add_generation_prompt': True, 'bos_token': '<s>',
                       'eos_token': '</s>'}}
    r = subprocess.run(['/usr/bin/python3', script], input=json.dumps(job), capture_output=True,
                       text=True)
    return r.stdout if r.returncode == 0 else None


@test
def templates_drive_chat():
    """each shared template renders the chat as jinja2 does, and they differ"""
    counts = []
    for name in NAMES:
        path = os.path.join(TEMPLATES, name)
        s = Server('--chat-template-file', path, quiet=True)
        try:
            # stderr is drained by a thread: give its startup line a moment to arrive.
            deadline = time.time() + 10
            while time.time() < deadline and not any('--chat-template-file' in l for l in s.err + s.out):
                time.sleep(0.05)
            check(any('--chat-template-file' in l for l in s.err + s.out),
                  f'{name}: the server says it uses the file')
            st, _, body = s.request('POST', '/v1/chat/completions',
                                    {'messages': CHAT, 'max_tokens': 2, 'temperature': 0})
            check(st == 200, f'{name}: chat completion 200 ({st} {body[:200]})')
            n = json.loads(body)['usage']['prompt_tokens']
            counts.append(n)
            text = rendered(path)
            if text is not None:
                st, _, tb = s.request('POST', '/tokenize', {'content': text, 'add_special': False})
                check(st == 200, f'{name}: /tokenize 200')
                want = json.loads(tb)['count']
                check(n in (want, want + 1),
                      f'{name}: prompt tokens {n} = tokens of the jinja2 rendering {want} (+ BOS)')
        finally:
            s.stop()
    check(len(set(counts)) == len(counts), f'three templates, three prompt lengths {counts}')


@test
def bad_files_refuse_start():
    """a missing, empty or broken template file is one line and a non-zero exit"""
    d = temp_dir()
    empty = os.path.join(d, 'empty.jinja')
    open(empty, 'w').close()
    broken = os.path.join(d, 'broken.jinja')
    with open(broken, 'w') as f:
        f.write('{% for m in messages %}{{ m.content ')
    for path, what in [(os.path.join(d, 'missing.jinja'), 'cannot read'), (empty, 'is empty'),
                       (broken, 'syntax error')]:
        r = subprocess.run([ARGS.hinge, 'serve', '-m', ARGS.model, '--port', '0', '-t', '1',
                            '--chat-template-file', path], capture_output=True, text=True, timeout=60)
        check(r.returncode != 0, f'{os.path.basename(path)}: non-zero exit')
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ''
        check(last.startswith('hinge: --chat-template-file') and what in last, f'{os.path.basename(path)}: one line: {last}')


if __name__ == '__main__':
    sys.exit(main(__doc__))
