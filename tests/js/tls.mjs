// ServeJs.Tls: `hinge serve --tls-cert --tls-key` (with --tenants, so the bearer keys travel
// only inside TLS) against a certificate this test makes with the `openssl` command. The
// official `openai` client and curl complete chat, streaming chat and completions over https,
// several requests on one keep-alive connection; a client that does not trust the certificate
// fails its handshake, and plain http on the TLS port gets no answer.
//
// Node reads extra CA certificates only at start (NODE_EXTRA_CA_CERTS): the test makes the
// certificate, then runs itself again with the variable set.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { loadOpenAi, startServer, watchdog } from './lib/hinge.mjs';

if (!process.env.HINGE_TLS_DIR) {
  const dir = mkdtempSync(path.join(tmpdir(), 'hinge-tls-'));
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'), '-days', '2',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url)], {
    stdio: 'inherit',
    env: { ...process.env, HINGE_TLS_DIR: dir, NODE_EXTRA_CA_CERTS: path.join(dir, 'cert.pem') },
  });
  rmSync(dir, { recursive: true, force: true });
  process.exit(r.status ?? 1);
}

watchdog(80_000, 'ServeJs.Tls');
const dir = process.env.HINGE_TLS_DIR;
const cert = path.join(dir, 'cert.pem');
const key = 'hk-' + randomBytes(32).toString('base64url');
const sha256 = (k) => createHash('sha256').update(k, 'utf8').digest('hex');
const tenants = path.join(dir, 'tenants.json');
writeFileSync(tenants, JSON.stringify({ tenants: [{ id: 'acme', api_keys_sha256: [sha256(key)] }] }));

const server = await startServer(['--tls-cert', cert, '--tls-key', path.join(dir, 'key.pem'),
                                  '--tenants', tenants]);
try {
  assert.match(server.url, /^https:\/\/127\.0\.0\.1:\d+$/);
  const { openai: mod, version } = loadOpenAi();
  const client = new mod.OpenAI({ baseURL: `${server.url}/v1`, apiKey: key, maxRetries: 0,
                                  timeout: 15_000 });
  console.log(`# openai@${version} over ${server.url}`);

  // Chat, several times (one keep-alive connection in undici's pool).
  for (let i = 0; i < 3; ++i) {
    const chat = await client.chat.completions.create({
      model: server.model, messages: [{ role: 'user', content: 'Once upon a time' }],
      max_tokens: 8, temperature: 0 });
    assert.equal(chat.object, 'chat.completion');
    assert.equal(chat.choices[0].finish_reason, 'length');
    assert.ok(chat.choices[0].message.content.length > 0);
    assert.equal(chat.usage.completion_tokens, 8);
  }
  // Streaming chat.
  const stream = await client.chat.completions.create({
    model: server.model, messages: [{ role: 'user', content: 'Once upon a time' }],
    max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage = null;
  for await (const c of stream) {
    text += c.choices[0]?.delta?.content ?? '';
    if (c.usage) usage = c.usage;
  }
  assert.ok(text.length > 0, 'streamed text');
  assert.equal(usage?.completion_tokens, 12);
  // Completions, streaming and not.
  const comp = await client.completions.create({ model: server.model, prompt: 'Once upon a time',
                                                 max_tokens: 8, temperature: 0 });
  assert.equal(comp.object, 'text_completion');
  assert.equal(comp.usage.completion_tokens, 8);
  const cs = await client.completions.create({ model: server.model, prompt: 'Once upon a time',
                                               max_tokens: 8, temperature: 0, stream: true });
  let ctext = '';
  for await (const c of cs) ctext += c.choices[0]?.text ?? '';
  assert.equal(ctext, comp.choices[0].text, 'streamed completion = the non-streamed one');
  // The key is checked over TLS like over plain HTTP.
  const bad = new mod.OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'hk-wrong', maxRetries: 0 });
  await assert.rejects(bad.completions.create({ model: server.model, prompt: 'x', max_tokens: 1 }),
                       (e) => e.status === 401);
  console.log('# openai client: chat x3, streaming chat, completions (both), 401: ok');

  // curl, trusting the certificate: chat, streaming chat, completions; two requests on one
  // connection (curl reuses it: "Re-using existing connection" in its verbose log).
  const curl = (args) => execFileSync('curl', ['-sS', '--fail-with-body', '--cacert', cert,
                                               '-H', `Authorization: Bearer ${key}`,
                                               '-H', 'Content-Type: application/json', ...args],
                                      { encoding: 'utf8', timeout: 20_000 });
  const c1 = JSON.parse(curl(['-d', JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 }),
                              `${server.url}/v1/chat/completions`]));
  assert.equal(c1.object, 'chat.completion');
  const sse = curl(['-N', '-d', JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 6, stream: true }),
                    `${server.url}/v1/chat/completions`]);
  assert.ok(sse.trimEnd().endsWith('data: [DONE]'), `curl stream ends with [DONE]: ${sse.slice(-80)}`);
  assert.ok((sse.match(/^data: \{/gm) ?? []).length >= 2, 'curl stream has chunks');
  const both = spawnSync('curl', ['-sS', '-v', '--cacert', cert, '-H', `Authorization: Bearer ${key}`,
                                  '-H', 'Content-Type: application/json',
                                  '-d', JSON.stringify({ prompt: 'Once', max_tokens: 3 }),
                                  `${server.url}/v1/completions`, '--next', '--cacert', cert,
                                  '-H', `Authorization: Bearer ${key}`, '-H', 'Content-Type: application/json',
                                  '-d', JSON.stringify({ prompt: 'Once', max_tokens: 3 }),
                                  `${server.url}/v1/completions`],
                         { encoding: 'utf8', timeout: 20_000 });
  assert.equal(both.status, 0, `curl twice: ${both.stderr.slice(-500)}`);
  assert.equal((both.stdout.match(/"text_completion"/g) ?? []).length, 2, 'two completions');
  assert.match(both.stderr, /Re-using existing connection|Reusing existing/, 'keep-alive over TLS');
  assert.match(both.stderr, /SSL connection using TLSv1\.[23]/, 'TLS 1.2+');
  console.log('# curl: chat, streaming chat, two completions on one connection: ok');

  // Not trusting the certificate: the handshake fails. Plain http: no HTTP answer.
  const untrusted = spawnSync('curl', ['-sS', `${server.url}/health`], { encoding: 'utf8', timeout: 10_000 });
  assert.notEqual(untrusted.status, 0, 'curl without --cacert must fail');
  assert.match(untrusted.stderr, /certificate/i);
  const plain = spawnSync('curl', ['-sS', server.url.replace('https:', 'http:') + '/health'],
                          { encoding: 'utf8', timeout: 10_000 });
  assert.notEqual(plain.status, 0, 'plain http on the TLS port gets no answer');
  assert.ok(!plain.stdout.includes('"ok"'));
  // The key never shows in the server's output.
  const stop = await server.stop();
  assert.equal(stop.code, 0);
  assert.ok(!server.stderr().includes(key) && !server.stdout().includes(key), 'key not logged');
  console.log('# untrusted and plain clients refused; SIGTERM exit 0: ok');
} finally {
  await server.stop().catch(() => {});
}
