// Shared helpers for the tests/js end-to-end tests: paths from the environment ctest sets,
// starting `hinge serve` on a free port, stopping it with SIGTERM, a hard watchdog, and
// loading the pinned `openai` package from the build tree.
import { spawn, execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

export function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set; run this test through ctest (tests/js/tests.cmake)`);
  return v;
}

export const HINGE_BIN = () => env('HINGE_BIN');
export const HINGE_MODEL = () => {
  const m = env('HINGE_MODEL');
  if (!existsSync(m)) throw new Error(`test model ${m} is missing`);
  return m;
};

// The official openai package, installed by ServeJs.NpmInstall under $HINGE_JS_PREFIX.
export function loadOpenAi() {
  const prefix = env('HINGE_JS_PREFIX');
  const require = createRequire(path.join(prefix, 'package.json'));
  const pkg = JSON.parse(readFileSync(path.join(prefix, 'node_modules', 'openai', 'package.json'),
                                      'utf8'));
  const want = process.env.HINGE_OPENAI_VERSION;
  if (want && pkg.version !== want)
    throw new Error(`openai@${pkg.version} installed under ${prefix}, want ${want}`);
  return { openai: require('openai'), version: pkg.version };
}

const live = new Set();
process.on('exit', () => {
  for (const child of live) {
    try { child.kill('SIGKILL'); } catch { /* gone */ }
  }
});

// Kills every server we started and exits 1 after `ms` (unref'd: a test that finishes in time
// exits normally).
export function watchdog(ms, what) {
  const t = setTimeout(() => {
    console.error(`FAIL: ${what} did not finish within ${ms / 1000} s (hung server or client?)`);
    for (const child of live) {
      try { child.kill('SIGKILL'); } catch { /* gone */ }
    }
    process.exit(1);
  }, ms);
  t.unref();
  return t;
}

// Starts `hinge serve -m MODEL --port 0 -t 1 -q ...extra` (MODEL: $HINGE_MODEL unless given)
// and resolves once it printed its
// "hinge: serving <name> on http(s)://127.0.0.1:<port>" line.
export function startServer(extra = [], { readyTimeoutMs = 20000, model = HINGE_MODEL() } = {}) {
  const args = ['serve', '-m', model, '--port', '0', '-t', '1', '-q', ...extra];
  const child = spawn(HINGE_BIN(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let stdout = '';
  let stderr = '';
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      live.delete(child);
      // A grandchild holding the pipes must not keep this process alive.
      setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, 200).unref();
      resolve({ code, signal });
    });
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => {
    stderr += d;
    if (stderr.length > 1 << 20) stderr = stderr.slice(-(1 << 19));
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`hinge serve not ready after ${readyTimeoutMs} ms; stderr:\n${stderr}`));
    }, readyTimeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`hinge serve exited (code ${code}, signal ${signal}) before it was ready; ` +
                       `stderr:\n${stderr}`));
    });
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d) => {
      stdout += d;
      const m = /^hinge: serving (\S+) on (https?:\/\/127\.0\.0\.1:(\d+))\n/m.exec(stdout);
      if (!m) return;
      clearTimeout(timer);
      const kv = /KV (.+?) in (\d+) blocks of (\d+) tokens/.exec(stderr);
      const ctx = /context (\d+)/.exec(stderr);
      resolve({
        child,
        pid: child.pid,
        model: m[1],
        url: m[2],
        port: Number(m[3]),
        kvBlocks: kv ? Number(kv[2]) : undefined,
        blockSize: kv ? Number(kv[3]) : undefined,
        context: ctx ? Number(ctx[1]) : undefined,
        stdout: () => stdout,
        stderr: () => stderr,
        exited,
        // SIGTERM, then the exit status ({code, signal}); SIGKILL and an error after timeoutMs.
        async stop(timeoutMs = 20000) {
          if (child.exitCode !== null || child.signalCode !== null) return exited;
          child.kill('SIGTERM');
          let t;
          const timeout = new Promise((_, rej) => {
            t = setTimeout(() => {
              child.kill('SIGKILL');
              rej(new Error(`hinge serve did not exit within ${timeoutMs} ms of SIGTERM; ` +
                            `stderr tail:\n${stderr.slice(-4000)}`));
            }, timeoutMs);
          });
          try {
            return await Promise.race([exited, timeout]);
          } finally {
            clearTimeout(t);
          }
        },
      });
    });
  });
}

// `hinge run ... --json`: the parsed JSON object on stdout.
export function hingeRun(args, timeoutMs = 20000) {
  return new Promise((resolve, reject) => {
    execFile(HINGE_BIN(), ['run', '-m', HINGE_MODEL(), '--no-pressure', ...args, '--json'],
             { timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
               if (err) return reject(new Error(`hinge run failed: ${err.message}\n${stderr}`));
               try {
                 resolve(JSON.parse(stdout));
               } catch (e) {
                 reject(new Error(`hinge run printed no JSON: ${e.message}\n${stdout}\n${stderr}`));
               }
             });
  });
}

// Prometheus text -> [{name, labels: {..}, value}].
export function parsePrometheus(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable metrics line: ${JSON.stringify(line)}`);
    const labels = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?/g;
      let lm;
      let consumed = 0;
      while ((lm = re.exec(m[3])) !== null) {
        labels[lm[1]] = lm[2].replace(/\\n/g, '\n').replace(/\\(["\\])/g, '$1');
        consumed += lm[0].length;
      }
      if (consumed !== m[3].length) throw new Error(`bad labels in metrics line: ${line}`);
    }
    const value = m[4] === '+Inf' ? Infinity : m[4] === '-Inf' ? -Infinity : Number(m[4]);
    if (Number.isNaN(value) && m[4] !== 'NaN') throw new Error(`bad value in metrics line: ${line}`);
    samples.push({ name: m[1], labels, value });
  }
  return samples;
}

// The one sample of `name` whose labels include `match`.
export function metric(samples, name, match = {}) {
  const hits = samples.filter((s) => s.name === name &&
    Object.entries(match).every(([k, v]) => s.labels[k] === v));
  if (hits.length !== 1)
    throw new Error(`metric ${name} ${JSON.stringify(match)}: ${hits.length} samples`);
  return hits[0].value;
}
