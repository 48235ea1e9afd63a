"""The small test harness of the tests/serve scripts (hostile_clients.py, tenants.py):
@test registers a case, check() prints each point that holds and raises Fail on the first that
does not, main() runs the named cases (all by default) and exits non-zero if any failed."""
import argparse
import atexit
import shutil
import sys
import tempfile

TESTS = {}
ARGS = argparse.Namespace(hinge=None, model=None)  # filled in by main()


class Fail(Exception):
    pass


def temp_dir(prefix='hinge-test-'):
    """A fresh temporary directory, removed with its files when the test script exits."""
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, True)
    return d


def two_tenants(d):
    """A tenants file in d with tenants acme and globex and an admin: (path, acme's key,
    globex's key, the admin key)."""
    import hashlib
    import json
    import os
    import secrets
    ka, kb, admin = ('hk-' + secrets.token_urlsafe(32) for _ in range(3))
    sha = lambda k: hashlib.sha256(k.encode()).hexdigest()  # noqa: E731
    path = os.path.join(d, 'tenants.json')
    with open(path, 'w') as f:
        json.dump({'tenants': [{'id': 'acme', 'api_keys_sha256': [sha(ka)]},
                               {'id': 'globex', 'api_keys_sha256': [sha(kb)]}],
                   'admin_api_keys_sha256': [sha(admin)]}, f)
    return path, ka, kb, admin


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def check(cond, what):
    if not cond:
        raise Fail(what)
    print(f"  ok: {what}", flush=True)


def main(doc):
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--hinge')
    p.add_argument('--model')
    p.add_argument('--list', action='store_true')
    p.add_argument('names', nargs='*')
    p.parse_args(namespace=ARGS)
    if ARGS.list:
        print('\n'.join(TESTS))
        return 0
    failed = []
    for name in ARGS.names or list(TESTS):
        print(f'{name}: {TESTS[name].__doc__.splitlines()[0]}', flush=True)
        try:
            TESTS[name]()
        except Fail as e:
            print(f'  FAIL: {e}', flush=True)
            failed.append(name)
    print('failed: ' + ', '.join(failed) if failed else 'all passed')
    return 1 if failed else 0
