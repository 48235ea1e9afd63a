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
