"""A redis-server for the tests/serve scripts (Debian's /usr/bin/redis-server): started on a free
loopback port with no persistence, stopped with SIGKILL (a crash, as the tests want), restarted on
the same port; command() speaks RESP over a socket (standard library only)."""
import socket
import subprocess
import time

from harness import Fail

REDIS_SERVER = '/usr/bin/redis-server'


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


class RedisServer:
    def __init__(self, port=None):
        self.port = port or free_port()
        self.proc = None
        self.start()

    @property
    def url(self):
        return f'redis://127.0.0.1:{self.port}/0'

    def start(self):
        self.proc = subprocess.Popen([REDIS_SERVER, '--port', str(self.port), '--bind', '127.0.0.1',
                                      '--save', '', '--appendonly', 'no', '--loglevel', 'warning'],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                if self.command('PING') == 'PONG':
                    return
            except OSError:
                time.sleep(0.05)
        raise Fail(f'redis-server did not start on port {self.port}')

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def command(self, *args):
        """One command; the reply as str / int / None / list (bytes values as latin-1 str)."""
        with socket.create_connection(('127.0.0.1', self.port), timeout=5) as s:
            parts = [f'*{len(args)}\r\n'.encode()]
            for a in args:
                b = a if isinstance(a, bytes) else str(a).encode()
                parts.append(f'${len(b)}\r\n'.encode() + b + b'\r\n')
            s.sendall(b''.join(parts))
            f = s.makefile('rb')
            return _read(f)

    def values(self):
        """Every key's value (bytes)."""
        out = {}
        cursor = '0'
        while True:
            cursor, keys = self.command('SCAN', cursor, 'COUNT', 1000)
            for k in keys:
                v = self.command('GET', k)
                if v is not None:
                    out[k] = v.encode('latin-1')
            if cursor == '0':
                return out


def _read(f):
    line = f.readline()
    if not line:
        raise OSError('redis closed the connection')
    kind, rest = line[:1], line[1:-2]
    if kind == b'+':
        return rest.decode()
    if kind == b'-':
        raise Fail('redis error: ' + rest.decode())
    if kind == b':':
        return int(rest)
    if kind == b'$':
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode('latin-1')
    if kind == b'*':
        n = int(rest)
        return None if n < 0 else [_read(f) for _ in range(n)]
    raise OSError(f'bad RESP reply {line!r}')
