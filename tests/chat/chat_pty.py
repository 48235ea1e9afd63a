#!/usr/bin/python3
"""`hinge chat` driven through a pseudo-terminal, as a person would use it (ctest: ChatPty.*).

session_roundtrip: a second turn reports cached tokens; /save asks for the passphrase with echo
  off; the file holds no marker text and no token-id sequence of the conversation; a new process
  /load-s it and its next turn has the history's blocks cached; a wrong passphrase and a flipped
  byte each give a clear error; after /logout the files are gone.
template_reuse: with a real chat template (Qwen2.5's ChatML) every turn after the first hits the
  cache for the whole history's full blocks.
context_policies: a conversation longer than -c: 'error' refuses the turn with what to do and
  goes on, 'shift' drops the oldest turns, 'summarize' has the model summarize them; every turn
  still gets a reply.
pressure_sheds: under injected critical memory pressure (PSI files under --pressure-root) a reply
  ends early with a one-line notice and the stats line shows the level; elevated caps a reply at
  --pressure-max-tokens; back to normal the next reply has its full length.
budget_holds: smollm-135m q8_0 (hinge synth) under --memory-budget with a reply longer than the
  KV cache the budget leaves: RSS sampled every 100 ms never exceeds the budget, and the reply
  shifts to the end under --context-policy shift.
bad_input: a bad key file refuses to start; bad session names, unknown commands and a missing
  session get one clear line and the chat goes on.

Standard library only; run with /usr/bin/python3:

    chat_pty.py --hinge build/release/hinge --model ../shared/models/stories260K.gguf NAME
"""
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'serve'))
from budget_probe import budget_leaving_kv  # noqa: E402
from harness import ARGS, Fail, check, main, temp_dir, test  # noqa: E402

SANITIZED = os.environ.get('HINGE_SANITIZED') == '1'
TIMEOUT = 120 if SANITIZED else 40
PASS = 'correct horse battery'
MARKER = 'Zorblax quokka Mirelda'
STATS = re.compile(rb'\[prompt (\d+) tokens, (\d+) cached \| reply (\d+) tokens')


class Chat:
    """One `hinge chat` process on a pty; expect() waits for a regex in what it printed."""

    def __init__(self, *args):
        master, slave = pty.openpty()
        # The host's own memory pressure must not cut replies short: the watch runs only where a
        # test injects readings.
        calm = [] if '--pressure-root' in args else ['--no-pressure']
        self.cmd = [ARGS.hinge, 'chat', '-m', ARGS.model, '-t', '2', '--temp', '0', *calm, *args]
        self.p = subprocess.Popen(self.cmd, stdin=slave, stdout=slave, stderr=slave,
                                  close_fds=True, start_new_session=True)
        os.close(slave)
        self.fd = master
        self.out = b''
        self.pos = 0

    def _read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the process closed the pty
            data = b''
        if not data:
            return None
        self.out += data
        return True

    def expect(self, pattern, timeout=TIMEOUT):
        rx = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
        deadline = time.time() + timeout
        ended = False
        while True:
            m = rx.search(self.out, self.pos)
            if m:
                self.pos = m.end()
                return m
            left = deadline - time.time()
            if left <= 0 or ended:
                tail = self.out[-1500:].decode(errors='replace')
                why = 'the process ended' if ended else f'nothing within {timeout} s'
                raise Fail(f'no {pattern!r}: {why}; output ends with:\n{tail}')
            ended = self._read(min(left, 1.0)) is None

    def send(self, line):
        os.write(self.fd, line.encode() + b'\n')

    def prompt(self):
        return self.expect(r'> ')

    def turn(self, text):
        self.prompt()
        self.send(text)
        m = self.expect(STATS)
        return int(m.group(1)), int(m.group(2)), int(m.group(3))

    def finish(self, timeout=TIMEOUT):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise Fail('hinge chat did not exit')
        while self._read(0.1):
            pass
        os.close(self.fd)
        return rc


def tokens_of(text):
    out = subprocess.run([ARGS.hinge, 'tokenize', '-m', ARGS.model, '--no-bos'], input=text.encode(),
                         capture_output=True, check=True).stdout.decode()
    return [int(x) for x in out.split()]


def encodings(ids):
    """The ways a token-id sequence could be written: binary and as text."""
    forms = [struct.pack(f'<{len(ids)}i', *ids), struct.pack(f'>{len(ids)}i', *ids)]
    if all(0 <= i < 65536 for i in ids):
        forms.append(struct.pack(f'<{len(ids)}H', *ids))
    for sep in (',', ', ', ' '):
        forms.append(sep.join(map(str, ids)).encode())
    return forms


@test
def session_roundtrip():
    """turn 2 cached, /save encrypted, /load in a new process cached, wrong key, flipped byte, /logout"""
    d = temp_dir('hinge-chat-')
    try:
        sdir = os.path.join(d, 'sessions')
        flags = ['-n', '24', '-c', '256', '--session-dir', sdir]
        c = Chat(*flags)
        c.expect(r'/help for commands')
        first = f'Once upon a time {MARKER} went to the park'
        p1, cached1, r1 = c.turn(first)
        check(p1 > 0 and r1 > 0, f'turn 1: prompt {p1} tokens, reply {r1} tokens')
        p2, cached2, r2 = c.turn('Then they saw a big dog')
        check(cached2 >= 16 and cached2 >= (p1 + r1 - 1) // 16 * 16,
              f'turn 2 reports {cached2} cached tokens of its {p2} (history {p1 + r1} tokens)')
        c.prompt()
        c.send('/save s1')
        c.expect(r'passphrase for saved sessions: ')
        c.send(PASS)
        c.expect(r'repeat the passphrase: ')
        c.send(PASS)
        m = c.expect(r"saved session 's1' \(encrypted\): 2 turns, (\d+) tokens, (\d+) KV blocks")
        saved_tokens, saved_blocks = int(m.group(1)), int(m.group(2))
        check(saved_blocks == saved_tokens // 16 or saved_blocks == (saved_tokens - 1) // 16,
              f'/save wrote {saved_blocks} KV blocks for {saved_tokens} history tokens')
        c.prompt()
        c.send('/quit')
        check(c.finish() == 0, 'hinge chat exits 0 on /quit')
        check(PASS.encode() not in c.out, 'the passphrase was never echoed')

        path = os.path.join(sdir, 's1.session')
        check(os.stat(path).st_mode & 0o777 == 0o600, 'the session file is 0600')
        check(os.stat(sdir).st_mode & 0o777 == 0o700, 'the session folder is 0700')
        blob = open(path, 'rb').read()
        for word in [MARKER] + MARKER.split() + ['park', 'big dog']:
            check(word.encode() not in blob, f'the file does not contain {word!r}')
        ids = tokens_of(MARKER)
        check(len(ids) >= 4, f'the marker is {len(ids)} tokens')
        check(all(f not in blob for f in encodings(ids)),
              'the file holds no token-id sequence of the marker (int32, int16, decimal)')
        full = tokens_of(first)
        check(all(f not in blob for f in encodings(full[1:9])),
              "the file holds no token-id sequence of the first turn")

        # A new process: /load, then a turn that hits the restored blocks.
        c = Chat(*flags)
        c.prompt()
        c.send('/load s1')
        c.expect(r'passphrase for saved sessions: ')
        c.send(PASS)
        m = c.expect(r"loaded session 's1': 2 turns, (\d+) tokens, (\d+) of (\d+) KV blocks restored")
        check(int(m.group(2)) == saved_blocks and int(m.group(3)) == saved_blocks,
              f'/load restored {int(m.group(2))} of {int(m.group(3))} KV blocks')
        p3, cached3, _ = c.turn('And the dog ran home')
        check(cached3 >= saved_blocks * 16 > 0,
              f'the next turn after /load has {cached3} of {p3} prompt tokens cached '
              f'(the {saved_blocks} restored blocks hold {saved_blocks * 16})')
        c.prompt()
        c.send('/quit')
        check(c.finish() == 0, 'exits 0')
        check(PASS.encode() not in c.out, 'the passphrase was never echoed on /load')

        # Wrong passphrase.
        c = Chat(*flags)
        c.prompt()
        c.send('/load s1')
        c.expect(r'passphrase for saved sessions: ')
        c.send('not the passphrase')
        c.expect(r'hinge: /load: wrong passphrase for \S*s1\.session')
        check(True, 'a wrong passphrase is reported as such')
        # The chat goes on and asks again: the right one now works.
        c.prompt()
        c.send('/load s1')
        c.expect(r'passphrase for saved sessions: ')
        c.send(PASS)
        c.expect(r"loaded session 's1'")
        check(True, 'after a wrong passphrase the next /load asks again and works')
        c.prompt()
        c.send('/quit')
        c.finish()

        # A flipped byte in the encrypted part, and one in the header.
        for name, at, what in (('s1body', len(blob) // 2, r'is damaged or altered'),
                               ('s1head', 20, r'is damaged: its header was changed')):
            b = bytearray(blob)
            b[at] ^= 0x01
            open(os.path.join(sdir, name + '.session'), 'wb').write(bytes(b))
            c = Chat(*flags)
            c.prompt()
            c.send(f'/load {name}')
            c.expect(r'passphrase for saved sessions: ')
            c.send(PASS)
            c.expect(rf'hinge: /load: \S*{name}\.session {what}')
            check(True, f'a byte flipped at {at} of {len(blob)}: "{what}"')
            c.prompt()
            c.send('/quit')
            c.finish()
        os.remove(os.path.join(sdir, 's1head.session'))

        # /logout deletes the files this key opens, zeroes the KV cache, exits.
        c = Chat(*flags)
        c.prompt()
        c.send('/load s1')
        c.expect(r'passphrase for saved sessions: ')
        c.send(PASS)
        c.expect(r"loaded session 's1'")
        c.prompt()
        c.send('/logout')
        m = c.expect(r'logged out: deleted (\d+) session files?, zeroed (\S+ \S+) of KV cache, key destroyed')
        check(c.finish() == 0, '/logout ends the chat with status 0')
        check(int(m.group(1)) == 2, f'/logout deleted {int(m.group(1))} files (s1 and its altered copy)')
        left = [f for f in os.listdir(sdir) if f.endswith('.session')]
        check(left == [], f'no session file is left ({left})')
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def template_reuse():
    """with Qwen2.5's chat template every later turn hits the whole history's full blocks"""
    tmpl = os.path.join(os.path.dirname(ARGS.model), '..', 'chat-templates',
                        'Qwen-Qwen2.5-7B-Instruct.jinja')
    c = Chat('-n', '16', '-c', '512', '--chat-template-file', tmpl, '--system',
             'You tell short stories.', '--session-dir', temp_dir('hinge-chat-'))
    c.expect(r'template: \S*Qwen')
    history = 0
    for i, text in enumerate(['Tell me about a cat', 'What did the cat eat?', 'Where did it sleep?']):
        p, cached, r = c.turn(text)
        if i > 0:
            check(cached == (history - 1) // 16 * 16 or cached == history // 16 * 16,
                  f'turn {i + 1}: {cached} of {p} prompt tokens cached (history {history})')
            check(p > history, f'turn {i + 1}: the prompt ({p}) extends the history ({history})')
        history = p + r
    c.prompt()
    c.send('/quit')
    check(c.finish() == 0, 'exits 0')


@test
def context_policies():
    """past -c: error refuses the turn and goes on, shift drops turns, summarize summarizes"""
    lines = ['Once upon a time there was a little girl named Lily who loved to play outside',
             'One day she found a shiny red ball under a big green tree in the park',
             'She took the ball home and showed it to her mom and her little brother Tim',
             'Tim wanted to play with the ball too but Lily said it was hers',
             'Their mom told them that sharing is kind and makes everyone happy']
    # error: some turn is refused with the way out, and the chat still answers /reset + a turn.
    c = Chat('-n', '48', '-c', '192', '--session-dir', temp_dir('hinge-chat-'))
    refused = False
    for text in lines:
        c.prompt()
        c.send(text)
        m = c.expect(rb'(\[prompt \d+ tokens|leaves no room for a \d+-token reply)')
        if b'leaves no room' in m.group(1):
            refused = True
            c.expect(r'--context-policy shift or summarize')
            break
    check(refused, "'error': a turn past the context is refused with what to do")
    c.prompt()
    c.send('/reset')
    c.expect(r'conversation cleared')
    p, cached, r = c.turn(lines[0])
    check(r > 0, f"'error': after /reset the chat answers again ({r} tokens)")
    c.prompt()
    c.send('/quit')
    check(c.finish() == 0, 'exits 0')

    # summarize falls back to dropping turns when the summary request itself cannot fit (small
    # -c: the instruction, the turns and the summary's budget); at least one rewrite must be a
    # summary.
    for policy, note, want in (('shift', r'dropped the oldest \d+ turns?', b'dropped'),
                               ('summarize', r'(summarized|dropped) the oldest \d+ turns?',
                                b'summarized')):
        c = Chat('-n', '48', '-c', '192', '--context-policy', policy, '--summary-tokens', '32',
                 '--session-dir', temp_dir('hinge-chat-'))
        seen = False
        notes = b''
        for text in lines + lines:
            c.prompt()
            c.send(text)
            m = c.expect(rb'(\(context: [^)]*\)|\[prompt (\d+) tokens, (\d+) cached \| reply (\d+))')
            if m.group(1).startswith(b'(context'):
                check(re.search(note.encode(), m.group(1)), f"'{policy}': {m.group(1).decode()}")
                seen = True
                notes += m.group(1)
                prompt_tokens = int(c.expect(STATS).group(1))
            else:
                prompt_tokens = int(m.group(2))
            check(prompt_tokens + 1 <= 192, f"'{policy}': prompt {prompt_tokens} tokens fits")
        check(seen and want in notes,
              f"'{policy}': the conversation was rewritten at a turn boundary ({want.decode()})")
        c.prompt()
        c.send('/quit')
        check(c.finish() == 0, 'exits 0')


def write_psi(root, some):
    path = os.path.join(root, 'proc', 'pressure', 'memory')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + '.tmp', 'w') as f:
        f.write(f'some avg10={some:.2f} avg60=0.00 avg300=0.00 total=0\n'
                f'full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n')
    os.replace(path + '.tmp', path)


@test
def pressure_sheds():
    """critical ends a reply early with a notice, elevated caps it, normal gives full length"""
    root = temp_dir('hinge-pressure-')
    try:
        write_psi(root, 0)
        c = Chat('-n', '120', '-c', '1024', '--ignore-eos', '--pressure-root', root,
                 '--pressure-interval', '0.05', '--pressure-cooldown', '0', '--pressure-max-tokens',
                 '20', '--session-dir', root)
        _, _, r = c.turn('Once upon a time')
        check(r == 120, f'normal: the reply has its full length ({r} tokens)')
        write_psi(root, 50)  # some avg10 50% >= 30%: critical
        time.sleep(0.5)
        c.prompt()
        c.send('Tell me more')
        c.expect(r'\(memory pressure critical: the reply ended early after \d+ tokens')
        m = c.expect(rb'\[prompt \d+ tokens, \d+ cached \| reply (\d+) tokens[^\]]*'
                     rb'memory pressure: critical\]')
        check(int(m.group(1)) <= 2, f'critical: the reply ended at once ({int(m.group(1))} tokens)')
        write_psi(root, 15)  # 15% >= 10%: elevated
        time.sleep(0.5)
        c.prompt()
        c.send('And then?')
        c.expect(r'\(memory pressure elevated: the reply was capped after 20 tokens')
        m = c.expect(rb'\[prompt \d+ tokens, \d+ cached \| reply (\d+) tokens[^\]]*'
                     rb'memory pressure: elevated\]')
        check(int(m.group(1)) == 20, f'elevated: the reply was capped at 20 ({m.group(1)})')
        write_psi(root, 0)
        time.sleep(0.5)
        c.prompt()
        c.send('The end')
        m = c.expect(rb'\[prompt \d+ tokens, \d+ cached \| reply (\d+) tokens([^\]]*)\]')
        check(int(m.group(1)) == 120 and b'pressure' not in m.group(2),
              f'normal again: the next reply has its full length ({int(m.group(1))} tokens)')
        c.prompt()
        c.send('/quit')
        check(c.finish() == 0, 'exits 0: the session stayed usable')
    finally:
        shutil.rmtree(root, ignore_errors=True)


def rss_of(pid):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
    return 0


@test
def budget_holds():
    """smollm-135m q8_0 under --memory-budget: RSS <= budget every 100 ms, the reply shifts"""
    d = temp_dir('hinge-chat-budget-')
    try:
        model = os.path.join(d, 'smollm-135m-q8_0.gguf')
        subprocess.run([ARGS.hinge, 'synth', '--preset', 'smollm-135m', '--type', 'q8_0', '-o',
                        model], check=True, capture_output=True, timeout=TIMEOUT)
        # A budget that leaves the KV cache 40% of what 2048 tokens need, whatever this CPU
        # packs (ASan's shadow memory is in the probe's runtime; the RSS check allows it more).
        budget, _, _ = budget_leaving_kv(ARGS.hinge, model, 2048, 0.4)
        slack = 1024 * 2**20 if SANITIZED else 0
        master, slave = pty.openpty()
        c = Chat.__new__(Chat)
        c.cmd = [ARGS.hinge, 'chat', '-m', model, '-t', '2', '--temp', '0', '--ignore-eos',
                 '-n', '1200', '-c', '2048', '--context-policy', 'shift', '--memory-budget',
                 str(budget), '--no-pressure', '--session-dir', d]
        c.p = subprocess.Popen(c.cmd, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                               start_new_session=True)
        os.close(slave)
        c.fd, c.out, c.pos = master, b'', 0
        m = c.expect(r'context lowered from 2048 to (\d+) tokens')
        ctx = int(m.group(1))
        check(ctx < 1200, f'the budget leaves KV for {ctx} tokens, fewer than the reply asks')
        c.prompt()
        c.send('Once upon a time')
        peak = rss_of(c.p.pid)
        deadline = time.time() + TIMEOUT
        stats = None
        while time.time() < deadline and stats is None:
            peak = max(peak, rss_of(c.p.pid))
            c._read(0.1)
            stats = re.search(rb'\[prompt \d+ tokens, \d+ cached \| reply (\d+) tokens[^\]]*'
                              rb'shifted: (\d+) tokens dropped', c.out)
        check(stats is not None, 'the reply finished, shifting past the context')
        check(int(stats.group(1)) == 1200, f'the reply has all 1200 tokens ({stats.group(1)})')
        check(peak <= budget + slack,
              f'peak RSS {peak / 2**20:.1f} MiB <= budget {budget / 2**20:.0f} MiB')
        c.pos = stats.end()
        c.prompt()
        c.send('/quit')
        check(c.finish() == 0, 'exits 0')
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def bad_input():
    """a bad key file refuses to start; bad names, unknown commands, missing sessions: one line"""
    d = temp_dir('hinge-chat-')
    try:
        bad = os.path.join(d, 'key')
        open(bad, 'wb').write(b'short')
        r = subprocess.run([ARGS.hinge, 'chat', '-m', ARGS.model, '--key-file', bad],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT)
        check(r.returncode != 0 and b'must hold 32 bytes' in r.stderr,
              'a short key file is refused at start: ' + r.stderr.decode().strip())
        key = os.path.join(d, 'key32')
        open(key, 'wb').write(os.urandom(32))
        c = Chat('-n', '8', '--session-dir', os.path.join(d, 's'), '--key-file', key)
        for cmd, what in (('/save ../evil', r'a session name is 1-64 letters'),
                          ('/load nothing', r"no session 'nothing' in"),
                          ('/frobnicate', r'unknown command /frobnicate; /help lists them'),
                          ('/save', r'/save needs a name')):
            c.prompt()
            c.send(cmd)
            c.expect(what)
            check(True, f'{cmd}: "{what}"')
        c.turn('Once upon a time')
        c.prompt()
        c.send('/save k1')
        c.expect(r"saved session 'k1' \(encrypted\)")
        check(b'passphrase' not in c.out, 'with --key-file no passphrase is asked')
        c.prompt()
        c.send('/quit')
        check(c.finish() == 0, 'the chat went on after each bad command and exits 0')
        check(not os.path.exists(os.path.join(d, 'evil.session')), 'nothing was written outside')
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == '__main__':
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main(__doc__))
