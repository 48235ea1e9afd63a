#!/usr/bin/python3
"""`hinge serve --tenants` as a process (ctest: ServeTenants.*).

Each case starts its own server (stories260K, port 0) and checks what only a whole process
shows: a bad tenants file refuses to start with one line; SIGHUP re-reads the file (a bad one
is refused and the old configuration stays); a random marker sent in prompts (and echoed in
completions) never reaches stdout/stderr at the most verbose logging (per-request lines on,
HINGE_KV_DEBUG=1), /metrics, /v1/stats, the dashboard or error messages, and neither do API
keys or their digests; `hinge keygen` prints a key and its SHA-256. Standard library only; run
with /usr/bin/python3:

    tenants.py --hinge build/release/hinge --model ../shared/models/stories260K.gguf NAME
"""
import hashlib
import http.client
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ARGS, Fail, check, main, temp_dir, test  # noqa: E402
from server_process import Server, start_fails  # noqa: E402






def sha(key):
    return hashlib.sha256(key.encode()).hexdigest()


def new_key():
    return 'hk-' + secrets.token_urlsafe(32)


def tenants_file(path, tenants, admin_keys=(), public=()):
    doc = {'tenants': [{'id': t, 'api_keys_sha256': [sha(k) for k in keys], **extra}
                       for t, keys, extra in tenants],
           'admin_api_keys_sha256': [sha(k) for k in admin_keys]}
    if public:
        doc['public_prefixes'] = [{'id': i, 'text': t} for i, t in public]
    with open(path, 'w') as f:
        json.dump(doc, f, indent=2)


@test
def keygen():
    """hinge keygen prints a fresh hk- key and the SHA-256 of its bytes"""
    outs = []
    for _ in range(2):
        p = subprocess.run([ARGS.hinge, 'keygen'], capture_output=True, text=True, timeout=10)
        check(p.returncode == 0, f'exit 0 ({p.returncode}): {p.stderr}')
        lines = dict(l.split(': ', 1) for l in p.stdout.strip().splitlines())
        key, digest = lines['api_key'], lines['api_key_sha256']
        check(key.startswith('hk-') and len(key) == 46, f'key shape: {len(key)} characters')
        check(digest == sha(key), 'the digest line is sha256 of the key, lowercase hex')
        outs.append(key)
    check(outs[0] != outs[1], 'two runs give two keys')


@test
def bad_file_refuses_start():
    """a bad tenants file (or flags) refuses to start, with one line naming line and field"""
    d = temp_dir()
    bad = os.path.join(d, 'bad.json')
    with open(bad, 'w') as f:
        f.write('{\n  "tenants": [\n    {"id": "acme", "api_keys_sha256": ["%s"],\n'
                '     "max_priority": "urgent"}\n  ]\n}\n' % sha('k' * 20))
    cases = [
        (['--tenants', bad], 'line 4: tenants[0].max_priority'),
        (['--tenants', os.path.join(d, 'missing.json')], 'cannot read the tenants file'),
        (['--tenants', bad, '--api-key', 'k' * 20], '--api-key and --tenants exclude each other'),
        (['--cache-secret-file', os.path.join(d, 'missing.key')], '--cache-secret-file'),
    ]
    for args, want in cases:
        code, err = start_fails(*args)
        lines = [l for l in err.splitlines() if l.startswith('hinge: ') and 'listening' not in l
                 and 'loading' not in l.lower()]
        check(code != 0, f'{args[0]}: exit {code} (non-zero)')
        check(any(want in l for l in lines), f'{args[0]}: a line says "{want}": {err.strip()[-300:]}')
        errors = [l for l in lines if want in l]
        check(len(errors) == 1 and '\n' not in errors[0], f'{args[0]}: one line')
        check(sha('k' * 20) not in err, f'{args[0]}: no digest in the error')


@test
def sighup_reload():
    """SIGHUP re-reads the file: a bad one is refused (old config stays), a good one applies"""
    d = temp_dir()
    path = os.path.join(d, 'tenants.json')
    k1, k2 = new_key(), new_key()
    tenants_file(path, [('acme', [k1], {})])
    with Server('--tenants', path, quiet=True) as s:
        body = {'prompt': 'Once upon a time', 'max_tokens': 2}
        check(s.request('POST', '/v1/completions', body, key=k1)[0] == 200, 'k1 works')
        check(s.request('POST', '/v1/completions', body, key=k2)[0] == 401, 'k2 unknown: 401')
        with open(path, 'w') as f:
            f.write('{"tenants": [{"id": "acme", "api_keys_sha256": ["%s"], "oops": 1}]}' % sha(k2))
        n = len(s.err)
        s.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while time.time() < deadline and not any('refused' in l for l in s.err[n:]):
            time.sleep(0.05)
        refused = [l for l in s.err[n:] if 'refused' in l]
        check(refused and 'line 1: tenants[0].oops: unknown field' in refused[0],
              f'the bad file is refused with line and field: {refused}')
        check(s.request('POST', '/v1/completions', body, key=k1)[0] == 200, 'k1 still works')
        check(s.request('POST', '/v1/completions', body, key=k2)[0] == 401, 'k2 still unknown')
        tenants_file(path, [('acme', [k2], {})])
        n = len(s.err)
        s.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while time.time() < deadline and not any('reloaded' in l for l in s.err[n:]):
            time.sleep(0.05)
        check(any('reloaded: 1 tenants' in l for l in s.err[n:]), 'the good file is applied')
        check(s.request('POST', '/v1/completions', body, key=k2)[0] == 200, 'k2 works now')
        check(s.request('POST', '/v1/completions', body, key=k1)[0] == 401, 'k1 is revoked: 401')
        logs = s.logs()
        for k in (k1, k2):
            check(k not in logs and sha(k) not in logs, 'no key and no digest in the logs')
        check(s.stop() == 0, 'SIGTERM: exit 0')


@test
def api_key_file():
    """without tenants, --api-key-file guards /v1/* with one key read from a file"""
    d = temp_dir()
    key = new_key()
    path = os.path.join(d, 'key')
    with open(path, 'w') as f:
        f.write(key + '\n')
    with Server('--api-key-file', path, quiet=True) as s:
        body = {'prompt': 'Once', 'max_tokens': 1}
        check(s.request('POST', '/v1/completions', body)[0] == 401, 'no key: 401')
        check(s.request('POST', '/v1/completions', body, key='hk-wrong-key-0123456789')[0] == 401,
              'a wrong key: 401')
        check(s.request('POST', '/v1/completions', body, key=key)[0] == 200, 'the key: 200')
        check(key not in open(f'/proc/{s.proc.pid}/cmdline').read(), 'the key is not in the process list')
        check(key not in s.logs(), 'nor in the logs')
    with open(path, 'w') as f:
        f.write('short\n')
    code, err = start_fails('--api-key-file', path)
    check(code != 0 and 'at least 16 characters' in err, 'a too-short key refuses to start')


@test
def admin_listener():
    """--admin-port serves metrics, stats, dashboard and /admin/* without a key, nothing else"""
    d = temp_dir()
    path = os.path.join(d, 'tenants.json')
    ka = new_key()
    tenants_file(path, [('acme', [ka], {})])
    with Server('--tenants', path, '--admin-port', '0', quiet=True) as s:
        line = s.err_line('admin listener')
        check('http://127.0.0.1:' in line, f'the admin listener is on loopback: {line.strip()}')
        port = int(line.strip().rsplit(':', 1)[1])

        def admin(method, p, body=None):
            c = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
            c.request(method, p, body=json.dumps(body) if body is not None else None,
                      headers={'Content-Type': 'application/json'})
            r = c.getresponse()
            out = r.status, r.read().decode()
            c.close()
            return out
        for p in ('/metrics', '/v1/stats', '/', '/health'):
            check(admin('GET', p)[0] == 200, f'admin listener {p} without a key: 200')
        st, body = admin('POST', '/admin/tenants/acme/purge', {})
        check(st == 200 and 'purged_blocks' in body, 'purge without a key on the admin listener')
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
        c.request('POST', '/admin/tenants/acme/purge', body='{}',
                  headers={'Content-Type': 'text/plain', 'Origin': 'http://evil.example'})
        r = c.getresponse()
        check(r.status == 403, f'a cross-site POST from a web page: 403 ({r.status})')
        r.read()
        c.request('GET', '/v1/stats', headers={'Host': f'rebound.example:{port}'})
        r = c.getresponse()
        check(r.status == 403, f'a DNS name in Host (rebinding): 403 ({r.status})')
        r.read()
        c.close()
        st, _ = admin('POST', '/v1/completions', {'prompt': 'Once', 'max_tokens': 1})
        check(st == 404, f'the API is not on the admin listener ({st})')
        check(s.request('GET', '/metrics')[0] == 401, 'the main listener still wants a key')
        # The dashboard in a browser on the admin listener shows the tenants table.
        check(s.request('POST', '/v1/completions', {'prompt': 'Once upon a time', 'max_tokens': 2},
                        key=ka)[0] == 200, 'a request of acme')
        chromium = next((c for c in ('/usr/bin/chromium', '/usr/bin/chromium-browser') if os.path.exists(c)), None)
        check(chromium is not None, 'chromium is installed (scripts/install-deps --test)')
        prof = temp_dir()
        dom = subprocess.run([chromium, '--headless', '--no-sandbox', '--disable-gpu',
                              '--disable-dev-shm-usage', f'--user-data-dir={prof}', '--no-first-run',
                              '--disable-extensions', '--disable-background-networking',
                              '--virtual-time-budget=3000', '--dump-dom', f'http://127.0.0.1:{port}/'],
                             capture_output=True, text=True, timeout=60,
                             env={**os.environ, 'HOME': prof, 'XDG_CONFIG_HOME': prof, 'XDG_CACHE_HOME': prof}).stdout
        check('data-ready="1"' in dom, 'the dashboard rendered live numbers')
        check('<td style="text-align:left">acme</td>' in dom, 'its tenants table lists acme')
        check(s.request('POST', '/v1/completions', {'prompt': 'Once', 'max_tokens': 1}, key=ka)[0] == 200,
              'the API on the main listener')


@test
def privacy_marker():
    """a marker in prompts and completions never reaches logs, metrics, stats, dashboard, errors"""
    marker = 'zq' + secrets.token_hex(12)
    d = temp_dir()
    path = os.path.join(d, 'tenants.json')
    ka, kb, admin = new_key(), new_key(), new_key()
    tenants_file(path, [('acme', [ka], {}), ('globex', [kb], {'max_concurrent': 1})], [admin],
                 public=[('sys', 'You are a kind helper. ' + marker)])
    with Server('--tenants', path, env={'HINGE_KV_DEBUG': '1'}) as s:
        seen = []  # every response body the clients got for the error cases

        def call(method, p, body=None, key=ka):
            st, h, text = s.request(method, p, body, key=key)
            return st, h, text

        text = f'Once upon a time {marker} there was a girl. {marker}'
        # Completions with echo: the marker is in the prompt and in the completion text.
        st, _, out = call('POST', '/v1/completions', {'prompt': text, 'max_tokens': 4, 'echo': True})
        check(st == 200 and marker in out, 'echo puts the marker in a completion')
        st, _, out = call('POST', '/v1/completions', {'prompt': text, 'max_tokens': 4, 'stream': True,
                                                       'echo': True, 'logprobs': 1})
        check(st == 200 and marker in out, 'streamed too')
        st, _, out = call('POST', '/v1/chat/completions',
                          {'messages': [{'role': 'system', 'content': 'You are a kind helper. ' + marker},
                                        {'role': 'user', 'content': text}], 'max_tokens': 4,
                           'stop': [marker], 'user': marker, 'cache_salt': marker,
                           'prompt_cache_key': marker})
        check(st == 200, f'chat 200 ({st})')
        st, _, out = call('POST', '/tokenize', {'prompt': text})
        check(st == 200, 'tokenize 200')
        # Requests that fail, each with the marker in its prompt.
        for body in [
            {'prompt': text * 400, 'max_tokens': 4},                        # too long
            {'prompt': text, 'max_tokens': 100000},                          # over the context
            {'prompt': text, 'max_tokens': 4, 'temperature': 'hot'},         # bad field
            {'prompt': text, 'max_tokens': 4, 'logit_bias': {marker: 1}},   # bad key
            {'messages': [{'role': marker, 'content': text}]},               # bad role
            {'messages': [{'role': 'user', 'content': [{'type': marker, 'text': text}]}]},
            '{"prompt": "' + marker + '", ',                                  # broken JSON
        ]:
            p = '/v1/chat/completions' if isinstance(body, dict) and 'messages' in body else '/v1/completions'
            st, _, out = call('POST', p, body)
            check(st == 400, f'{p} bad request: 400 ({st})')
            seen.append(out)
        st, _, out = call('POST', '/v1/completions', {'prompt': text, 'max_tokens': 4}, key=marker)
        check(st == 401, 'a marker as the key: 401')
        seen.append(out)
        # Admin views.
        views = {}
        for p in ('/metrics', '/v1/stats', '/'):
            st, _, out = call('GET', p, key=admin)
            check(st == 200, f'{p} with the admin key: 200')
            views[p] = out
        code = s.stop()
        check(code == 0, 'SIGTERM: exit 0')
        logs = s.logs()
        check('hinge: cmpl-' in logs or 'hinge: chatcmpl-' in logs, 'per-request log lines were on')
        check('kv: ' in logs, 'HINGE_KV_DEBUG output was on')
        check(marker not in logs, 'no marker in stdout/stderr')
        for p, out in views.items():
            check(marker not in out, f'no marker in {p}')
        for i, out in enumerate(seen):
            check(marker not in out, f'no marker in error body {i}: {out[:160]}')
        for k in (ka, kb, admin):
            check(k not in logs and sha(k) not in logs, 'no key or digest in the logs')
            for out in list(views.values()) + seen:
                check(k not in out and sha(k) not in out, 'no key or digest in any answer')


if __name__ == '__main__':
    sys.exit(main(__doc__))
