"""A `hinge serve` process for the tests/serve scripts: started on a free loopback port (port 0,
the serving line names it), its stdout/stderr collected, requests over http.client, RSS read
from /proc, SIGTERM on exit. Standard library only."""
import http.client
import json
import os
import select
import signal
import subprocess
import threading
import time

from harness import ARGS, Fail, temp_dir

_SYNTH = {}


def synth_model(preset='smollm-135m', layers=4, context=4096):
    """A random-weight model of a real shape (`hinge synth`, q8_0), written once per script:
    by default smollm-135m cut to 4 layers, a context for 1024-token prompts, cheap to compute."""
    key = (preset, layers, context)
    if key not in _SYNTH:
        path = os.path.join(temp_dir('hinge-synth-'), f'{preset}-l{layers}.gguf')
        subprocess.run([ARGS.hinge, 'synth', '--preset', preset, '--layers', str(layers),
                        '--context', str(context), '--type', 'q8_0', '-o', path],
                       check=True, capture_output=True)
        _SYNTH[key] = path
    return _SYNTH[key]


class Server:
    def __init__(self, *extra, env=None, quiet=False, tls=None, model=None):
        cmd = [ARGS.hinge, 'serve', '-m', model or ARGS.model, '--port', '0', '-t', '1', *extra]
        if quiet:
            cmd.append('-q')
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, **(env or {})})
        self.err = []
        self.out = []
        threading.Thread(target=self._drain, args=(self.proc.stderr, self.err), daemon=True).start()
        self.tls = tls
        deadline = time.time() + 60
        line = ''
        while time.time() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if r:
                line = self.proc.stdout.readline()
                self.out.append(line)
                if 'serving' in line:
                    break
            if self.proc.poll() is not None:
                raise Fail('hinge serve exited: ' + ''.join(self.err))
        else:
            raise Fail('hinge serve did not print its serving line in 60 s')
        threading.Thread(target=self._drain, args=(self.proc.stdout, self.out), daemon=True).start()
        self.url = line.strip().split(' on ')[-1]
        self.port = int(self.url.rsplit(':', 1)[1])

    def err_line(self, text, timeout=10):
        """The first stderr line containing text, waiting up to timeout seconds for it ('' if
        none): lines printed before the serving line reach self.err through the drain thread,
        which may not have read them when the serving line is seen."""
        deadline = time.time() + timeout
        while True:
            line = next((l for l in self.err if text in l), '')
            if line or time.time() >= deadline or self.proc.poll() is not None:
                return line or next((l for l in self.err if text in l), '')
            time.sleep(0.05)

    @staticmethod
    def _drain(stream, into):
        for l in stream:
            into.append(l)

    def request(self, method, path, body=None, key=None, headers=None, timeout=30):
        if self.tls:
            c = http.client.HTTPSConnection('127.0.0.1', self.port, timeout=timeout,
                                            context=self.tls)
        else:
            c = http.client.HTTPConnection('127.0.0.1', self.port, timeout=timeout)
        h = {'Content-Type': 'application/json'}
        if key:
            h['Authorization'] = 'Bearer ' + key
        h.update(headers or {})
        data = json.dumps(body) if isinstance(body, (dict, list)) else body
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        out = (r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read().decode('utf-8', 'replace'))
        c.close()
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        time.sleep(0.1)  # the drain threads read the last lines
        return self.proc.returncode

    def rss(self):
        """The server's resident set in bytes (VmRSS)."""
        with open(f'/proc/{self.proc.pid}/status') as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1]) * 1024
        return 0

    def metrics(self):
        """/metrics as {'name{labels}': value}."""
        _, _, body = self.request('GET', '/metrics')
        out = {}
        for line in body.splitlines():
            if line and not line.startswith('#'):
                k, v = line.rsplit(' ', 1)
                out[k] = float(v)
        return out

    def logs(self):
        return ''.join(self.out) + ''.join(self.err)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.stop()


def start_fails(*extra):
    """Runs hinge serve expecting it to refuse to start; returns (exit code, stderr)."""
    p = subprocess.run([ARGS.hinge, 'serve', '-m', ARGS.model, '--port', '0', '-t', '1', *extra],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stderr
