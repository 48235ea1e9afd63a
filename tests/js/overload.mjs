// ServeJs.Overload: 300 adversarial requests from 100 concurrent clients (3 each, one after
// the other) against `hinge serve` with a KV pool that holds only a handful of requests, a
// short admission queue and a per-user cap. Plain fetch, 127.0.0.1 only.
//
// Tenants (HINGE_OVERLOAD_TENANTS, default 4; 0 runs it without): the server gets a tenants
// file of that many tenants (each with its key and a max_concurrent cap, which replaces the
// per-user cap; `user` fields are then ignored) and an admin key for /metrics and /v1/stats.
// Each client sends with its tenant's key; afterwards every tenant's GET /v1/usage must
// account for each of its requests exactly once (accepted + rejected = sent), and the
// tenants' sums must equal the server-wide counters.
//
// The mix: bursts of long prompts with long max_tokens (ignore_eos), short interactive ones,
// 'batch' and 'interactive' priority, streaming and not, chat with n > 1, shared `user`
// fields (429s), requests too large for the KV budget or the context (400s), ~10% of the
// clients hanging up after the first streamed chunk and a few hanging up while queued.
//
// Every request must end as: 200 with a complete answer (streams: a final `data: [DONE]`),
// 429/503 with Retry-After and an OpenAI error body, 400 with an error body (only the
// requests built to be too large), or a disconnect the client itself chose. Anything else,
// including a request still open after 60 s, fails. While it runs the server's VmRSS is
// sampled and must stay bounded. Afterwards /health is ok, /metrics parses, the counters add
// up (received = sent = accepted + rejected), nothing runs or waits, all KV blocks are free,
// and SIGTERM exits 0.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { startServer, watchdog, parsePrometheus, metric } from './lib/hinge.mjs';

watchdog(170_000, 'ServeJs.Overload');

const CLIENTS = 100;
const PER_CLIENT = 3;
const REQUEST_TIMEOUT_MS = 60_000;
// Growth over the post-start baseline; measured: ~3 MiB (9 -> 12.5). Under ASan (the asan
// preset sets HINGE_SANITIZED=1) freed memory sits in ASan's quarantine (capped by
// ASAN_OPTIONS=quarantine_size_mb in tests.cmake) and the server runs ~7x slower.
const SANITIZED = process.env.HINGE_SANITIZED === '1';
const RSS_BOUND_MIB = SANITIZED ? 256 : 64;
const SEED = Number(process.env.HINGE_OVERLOAD_SEED ?? 20240611);
const TENANTS = Number(process.env.HINGE_OVERLOAD_TENANTS ?? 4);

// ---------------------------------------------------------------------------------------------
// Deterministic randomness (the schedule is reproducible; the timing is not).
function mulberry32(a) {
  return () => {
    a |= 0;
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = mulberry32(SEED);
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = (a) => a[Math.floor(rand() * a.length)];
const chance = (p) => rand() < p;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const SENTENCES = [
  'The little dog ran to the park and played with a big red ball.',
  'Lily and her mom went to the store to buy some milk and bread.',
  'Tom saw a bird in the tree and wanted to be its friend.',
  'One day, a small cat found a shiny box under the bed.',
  'The sun was warm and the flowers were happy in the garden.',
  'Ben liked to build towers with his blocks every morning.',
  'The old man gave the girl a red apple and a big smile.',
  'They sang songs and danced until it was time to sleep.',
  'A frog jumped into the pond and splashed the duck.',
  'Sue was sad because her kite was stuck on the roof.',
];
function story(sentences) {
  const out = [];
  for (let i = 0; i < sentences; ++i) out.push(pick(SENTENCES));
  return out.join(' ');
}

// ---------------------------------------------------------------------------------------------
// The server.
// Tenant t's key; the first tenant is the one whose long burst meets its cap of 4.
const sha256 = (k) => createHash('sha256').update(k, 'utf8').digest('hex');
const tenantKeys = Array.from({ length: TENANTS }, () => 'hk-' + randomBytes(32).toString('base64url'));
const adminKey = 'hk-' + randomBytes(32).toString('base64url');
const tenantArgs = [];
if (TENANTS > 0) {
  const dir = mkdtempSync(path.join(tmpdir(), 'hinge-overload-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'tenants.json');
  writeFileSync(file, JSON.stringify({
    tenants: tenantKeys.map((k, t) => ({ id: `tenant-${t}`, api_keys_sha256: [sha256(k)],
                                         max_concurrent: t === 0 ? 4 : 12 })),
    admin_api_keys_sha256: [sha256(adminKey)],
  }, null, 2));
  tenantArgs.push('--tenants', file);
}
const authFor = (t) => (TENANTS > 0 ? { authorization: `Bearer ${tenantKeys[t]}` } : {});
const adminAuth = TENANTS > 0 ? { authorization: `Bearer ${adminKey}` } : {};
const server = await startServer([
  '--kv-memory', '2MiB', '--max-queue', '16', '--max-concurrent-per-user', '4',
  '--queue-timeout', '20', '--shutdown-grace', '10', ...tenantArgs,
]);
const BASE = server.url;
console.log(`# hinge serve pid ${server.pid} on ${BASE}: context ${server.context}, ` +
            `${server.kvBlocks} KV blocks of ${server.blockSize} tokens, seed ${SEED}, ` +
            `${TENANTS} tenants`);
assert.ok(server.kvBlocks > 0 && server.kvBlocks <= 256, `KV blocks: ${server.kvBlocks}`);

function rssKiB() {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

async function tokenCount(text) {
  const r = await fetch(`${BASE}/tokenize`, {
    method: 'POST', headers: { 'content-type': 'application/json', ...authFor(0) },
    body: JSON.stringify({ prompt: text }), signal: AbortSignal.timeout(10_000) });
  assert.equal(r.status, 200, `/tokenize: ${r.status}`);
  const j = await r.json();
  return j.count ?? j.tokens.length;
}

// Admission's per-request limit (--max-request-share 0.5) in tokens, and the context.
const CTX = server.context;
const REQUEST_LIMIT_TOKENS = Math.floor(server.kvBlocks * 0.5) * server.blockSize;
assert.ok(REQUEST_LIMIT_TOKENS < CTX - 100, `limit ${REQUEST_LIMIT_TOKENS}, ctx ${CTX}`);

// ---------------------------------------------------------------------------------------------
// The schedule: 100 clients with roles, users and start offsets; 3 requests each.
const ROLES = [
  ...Array(30).fill('long'), ...Array(35).fill('short'), ...Array(10).fill('streamAbort'),
  ...Array(5).fill('queuedAbort'), ...Array(5).fill('tooLarge'), ...Array(15).fill('mixed'),
];
assert.equal(ROLES.length, CLIENTS);
for (let i = ROLES.length - 1; i > 0; --i) {  // shuffle
  const j = Math.floor(rand() * (i + 1));
  [ROLES[i], ROLES[j]] = [ROLES[j], ROLES[i]];
}

// A too-large prompt: fits the context with max_tokens but not the KV budget per request.
const bigPrompt = story(42);
const bigPromptTokens = await tokenCount(bigPrompt);
assert.ok(bigPromptTokens < REQUEST_LIMIT_TOKENS && bigPromptTokens + 200 < CTX,
          `big prompt ${bigPromptTokens} tokens`);
const bigMaxTokens = Math.min(CTX - bigPromptTokens - 8,
                              REQUEST_LIMIT_TOKENS - bigPromptTokens + 150);
assert.ok(bigPromptTokens + bigMaxTokens > REQUEST_LIMIT_TOKENS + 100);

function makeRequest(role, k) {
  const q = { role, stream: false, chat: chance(0.5), n: 1, priority: undefined,
              includeUsage: false, ignoreEos: false, maxTokens: 16, prompt: '',
              expect400: false, abortAfterFirstChunk: false, abortQueuedAfterMs: 0 };
  switch (role) {
    case 'long':
      q.prompt = story(randInt(12, 22));
      q.maxTokens = randInt(150, 400);
      q.ignoreEos = true;
      q.priority = chance(0.7) ? 'batch' : 'interactive';
      q.stream = chance(0.5);
      break;
    case 'short':
      q.prompt = story(randInt(1, 2));
      q.maxTokens = randInt(8, 48);
      q.ignoreEos = chance(0.5);
      q.priority = chance(0.8) ? 'interactive' : undefined;
      q.stream = chance(0.5);
      if (chance(0.15)) q.n = 2;
      break;
    case 'streamAbort':
      q.prompt = story(randInt(8, 16));
      q.maxTokens = 350;
      q.ignoreEos = true;
      q.stream = true;
      q.priority = pick(['batch', 'interactive', undefined]);
      q.abortAfterFirstChunk = true;
      break;
    case 'queuedAbort':  // hangs up if no response headers came within 40-250 ms
      q.prompt = story(randInt(14, 22));
      q.maxTokens = 400;
      q.ignoreEos = true;
      q.stream = chance(0.7);  // non-streaming: headers only come with the whole answer
      q.priority = 'batch';
      q.abortQueuedAfterMs = randInt(40, 250);
      break;
    case 'tooLarge':
      if (k === 1) {  // the middle one is fine
        q.prompt = story(1);
        q.maxTokens = 12;
        q.stream = chance(0.5);
      } else if (k === 0) {  // fits the context, not the per-request KV budget
        q.prompt = bigPrompt;
        q.maxTokens = bigMaxTokens;
        q.stream = chance(0.5);
        q.chat = false;
        q.expect400 = true;
        q.expectCode = 'request_too_large';
      } else {  // prompt + max_tokens over the context
        q.prompt = story(randInt(2, 20));
        q.maxTokens = CTX;
        q.stream = chance(0.5);
        q.expect400 = true;
      }
      break;
    case 'mixed':
      q.chat = true;
      q.prompt = story(randInt(3, 6));
      q.maxTokens = randInt(32, 96);
      q.n = pick([1, 2, 3]);
      q.stream = chance(0.6);
      q.includeUsage = q.stream && chance(0.5);
      q.priority = pick(['batch', 'interactive', undefined]);
      break;
    default:
      throw new Error(role);
  }
  return q;
}

let longSeen = 0;
const clients = ROLES.map((role, i) => {
  let user;
  if (role !== 'tooLarge') {
    const u = rand();
    user = u < 0.25 ? 'team-a' : u < 0.37 ? 'team-b' : u < 0.8 ? `client-${i}` : undefined;
    // A third of the long burst at the start is one team's: its first 4 enter an idle server
    // and hold it for seconds, so the next ones meet the per-user cap (429) whatever the
    // server's speed (under sanitizers the queue is otherwise full before any user has 4 in
    // it); the other long ones still overflow the queue (503).
    if (role === 'long' && longSeen++ % 3 === 0) user = 'team-a';
  }
  // Long prompts come in a burst at the start; the rest trickle in over 2 s; the queued
  // aborts arrive once the pool is busy.
  const startMs = role === 'long' ? randInt(0, 100)
    : role === 'queuedAbort' ? randInt(300, 4000) : randInt(0, 2000);
  const requests = [];
  for (let k = 0; k < PER_CLIENT; ++k) requests.push(makeRequest(role, k));
  // After a 429/503 a client backs off a little (not the whole Retry-After).
  const gapMs = (rejected) => (rejected ? randInt(200, 1500) : randInt(0, 200));
  // Tenants: team-a is tenant 0 (its cap of 4 gives the 429s), team-b tenant 1 % T, the rest
  // spread over all of them.
  const tenant = TENANTS === 0 ? -1
    : user === 'team-a' ? 0 : user === 'team-b' ? 1 % TENANTS : i % TENANTS;
  return { i, role, user, tenant, startMs, requests, gapMs };
});

// ---------------------------------------------------------------------------------------------
// One request: send, read to the end, classify.
function checkErrorBody(text, status) {
  let j;
  try {
    j = JSON.parse(text);
  } catch {
    return `error body is not JSON: ${text.slice(0, 200)}`;
  }
  const e = j?.error;
  if (!e || typeof e !== 'object') return `no error object: ${text.slice(0, 200)}`;
  for (const k of ['message', 'type', 'param', 'code'])
    if (!(k in e)) return `error.${k} missing: ${text.slice(0, 200)}`;
  if (typeof e.message !== 'string' || e.message === '') return 'error.message empty';
  if (typeof e.type !== 'string') return 'error.type not a string';
  if (status === 429 && e.type !== 'rate_limit_error') return `429 with type ${e.type}`;
  if (status === 503 && e.type !== 'server_overloaded') return `503 with type ${e.type}`;
  if (status === 400 && e.type !== 'invalid_request_error') return `400 with type ${e.type}`;
  return null;
}

function checkCompletion(q, j) {
  const want = q.chat ? 'chat.completion' : 'text_completion';
  if (j.object !== want) return `object ${j.object}`;
  if (!Array.isArray(j.choices) || j.choices.length !== q.n) return `choices ${j.choices?.length}`;
  const idx = j.choices.map((c) => c.index).sort((a, b) => a - b);
  if (idx.some((v, t) => v !== t)) return `indexes ${idx}`;
  for (const c of j.choices) {
    if (!['stop', 'length'].includes(c.finish_reason)) return `finish_reason ${c.finish_reason}`;
    const text = q.chat ? c.message?.content : c.text;
    if (typeof text !== 'string') return 'no text';
    if (q.ignoreEos && c.finish_reason !== 'length') return 'ignore_eos but not length';
  }
  const u = j.usage;
  if (!u || !(u.prompt_tokens > 0) || u.total_tokens !== u.prompt_tokens + u.completion_tokens)
    return `usage ${JSON.stringify(u)}`;
  if (q.ignoreEos && u.completion_tokens !== q.maxTokens * q.n)
    return `completion_tokens ${u.completion_tokens}, want ${q.maxTokens * q.n}`;
  return null;
}

function checkStream(q, events) {
  if (events.length < 2) return `only ${events.length} events`;
  if (events.at(-1) !== '[DONE]') return `last event ${events.at(-1)?.slice(0, 80)}`;
  const chunks = [];
  for (const e of events.slice(0, -1)) {
    if (e === '[DONE]') return '[DONE] before the end';
    try {
      chunks.push(JSON.parse(e));
    } catch {
      return `event is not JSON: ${e.slice(0, 120)}`;
    }
  }
  const want = q.chat ? 'chat.completion.chunk' : 'text_completion';
  const reasons = new Array(q.n).fill(null);
  let usage = null;
  for (const [t, c] of chunks.entries()) {
    if (c.object !== want) return `chunk object ${c.object}`;
    if (c.usage) {
      if (!q.includeUsage || t !== chunks.length - 1 || c.choices.length !== 0)
        return 'unexpected usage chunk';
      usage = c.usage;
      continue;
    }
    for (const ch of c.choices) {
      if (!(ch.index >= 0 && ch.index < q.n)) return `chunk index ${ch.index}`;
      if (ch.finish_reason) {
        if (reasons[ch.index]) return `two finish_reasons for ${ch.index}`;
        if (!['stop', 'length'].includes(ch.finish_reason)) return `finish ${ch.finish_reason}`;
        reasons[ch.index] = ch.finish_reason;
      }
    }
  }
  if (reasons.some((r) => r === null)) return `finish_reasons ${JSON.stringify(reasons)}`;
  if (q.ignoreEos && reasons.some((r) => r !== 'length')) return 'ignore_eos but not length';
  if (q.includeUsage) {
    if (!usage) return 'include_usage without a usage chunk';
    if (usage.total_tokens !== usage.prompt_tokens + usage.completion_tokens) return 'usage sum';
  }
  return null;
}

const results = [];
let openRequests = 0;

async function send(client, q) {
  const body = { max_tokens: q.maxTokens, temperature: 0.8, seed: randInt(0, 1e9) };
  if (q.chat) body.messages = [{ role: 'user', content: q.prompt }];
  else body.prompt = q.prompt;
  if (q.stream) body.stream = true;
  if (q.includeUsage) body.stream_options = { include_usage: true };
  if (q.n > 1) body.n = q.n;
  if (q.ignoreEos) body.ignore_eos = true;
  if (q.priority) body.priority = q.priority;
  if (client.user) body.user = client.user;
  const path = q.chat ? '/v1/chat/completions' : '/v1/completions';

  const ctl = new AbortController();
  let timedOut = false;
  let selfAbort = null;  // 'waiting' (no response headers yet) | 'midStream'
  const timer = setTimeout(() => {
    timedOut = true;
    ctl.abort();
  }, REQUEST_TIMEOUT_MS);
  let queuedTimer;
  let gotHeaders = false;
  if (q.abortQueuedAfterMs) {
    queuedTimer = setTimeout(() => {
      if (gotHeaders) return;
      selfAbort = 'waiting';
      ctl.abort();
    }, q.abortQueuedAfterMs);
  }
  const t0 = performance.now();
  const res = { client: client.i, role: q.role, stream: q.stream, user: client.user,
                tenant: client.tenant,
                outcome: null, status: 0, error: null, ms: 0 };
  ++openRequests;
  try {
    const r = await fetch(`${BASE}${path}`, {
      method: 'POST', headers: { 'content-type': 'application/json', ...authFor(client.tenant) },
      body: JSON.stringify(body), signal: ctl.signal });
    gotHeaders = true;
    res.status = r.status;
    if (r.status === 200 && q.expect400) {
      res.error = 'a too-large request was accepted';
      await r.body?.cancel();
    } else if (r.status === 200 && q.stream) {
      const ct = r.headers.get('content-type') ?? '';
      if (!ct.startsWith('text/event-stream')) res.error = `stream content-type ${ct}`;
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      const events = [];
      let first = true;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let cut;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          if (!ev.startsWith('data: ')) {
            res.error ??= `not an SSE data event: ${ev.slice(0, 80)}`;
            continue;
          }
          events.push(ev.slice(6));
        }
        if (first && q.abortAfterFirstChunk && !events.includes('[DONE]')) {
          selfAbort = 'midStream';
          ctl.abort();
          break;
        }
        first = false;
      }
      if (!selfAbort) {
        if (buf.trim() !== '') res.error ??= `trailing bytes after the last event: ${buf.slice(0, 80)}`;
        res.error ??= checkStream(q, events);
        res.outcome = 'ok';
      }
    } else if (r.status === 200) {
      const text = await r.text();
      let j = null;
      try {
        j = JSON.parse(text);
      } catch {
        res.error = `200 body is not JSON: ${text.slice(0, 120)}`;
      }
      if (j) res.error = checkCompletion(q, j);
      res.outcome = 'ok';
    } else if (r.status === 429 || r.status === 503) {
      const ra = r.headers.get('retry-after');
      if (!ra || !/^\d+$/.test(ra) || Number(ra) < 1) res.error = `${r.status} Retry-After ${ra}`;
      res.error ??= checkErrorBody(await r.text(), r.status);
      res.outcome = `http${r.status}`;
    } else if (r.status === 400) {
      const text = await r.text();
      res.error = q.expect400 ? checkErrorBody(text, 400) : `unexpected 400: ${text.slice(0, 200)}`;
      if (!res.error && q.expectCode && JSON.parse(text).error.code !== q.expectCode)
        res.error = `400 with code ${JSON.parse(text).error.code}, want ${q.expectCode}`;
      res.outcome = 'http400';
    } else {
      res.error = `unexpected status ${r.status}: ${(await r.text()).slice(0, 200)}`;
    }
  } catch (e) {
    if (timedOut) res.error = `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`;
    else if (!selfAbort) res.error = `fetch failed: ${e?.cause?.code ?? ''} ${e?.message}`;
  } finally {
    clearTimeout(timer);
    clearTimeout(queuedTimer);
    --openRequests;
  }
  if (selfAbort && !res.error)
    res.outcome = selfAbort === 'waiting' ? 'abortedWaiting' : 'abortedMidStream';
  if (!res.outcome && !res.error) res.error = 'no outcome';
  if (res.error) res.outcome = 'FAIL';
  res.ms = performance.now() - t0;
  results.push(res);
  return res;
}

async function runClient(c) {
  await sleep(c.startMs);
  for (const q of c.requests) {
    const r = await send(c, q);
    await sleep(c.gapMs(r.status === 429 || r.status === 503));
  }
}

// ---------------------------------------------------------------------------------------------
// Run, sampling RSS.
await sleep(200);
const baselineKiB = rssKiB();
let maxKiB = baselineKiB;
const rssSampler = setInterval(() => {
  maxKiB = Math.max(maxKiB, rssKiB());
}, 50);
let maxOpen = 0;
const openSampler = setInterval(() => { maxOpen = Math.max(maxOpen, openRequests); }, 20);

// The server's own view while loaded: peak running / waiting, least free KV blocks.
const peak = { running: 0, waiting: 0, minFree: Infinity, samples: 0 };
let loadDone = false;
const metricsSampler = (async () => {
  while (!loadDone) {
    try {
      const r = await fetch(`${BASE}/metrics`, { headers: adminAuth, signal: AbortSignal.timeout(5_000) });
      const s = parsePrometheus(await r.text());
      peak.running = Math.max(peak.running, metric(s, 'hinge:num_requests_running'));
      peak.waiting = Math.max(peak.waiting, metric(s, 'hinge:num_requests_waiting'));
      peak.minFree = Math.min(peak.minFree, metric(s, 'hinge:kv_blocks_free'));
      ++peak.samples;
    } catch (e) {
      peak.error = String(e);
    }
    await sleep(100);
  }
})();

const tStart = performance.now();
await Promise.all(clients.map(runClient));
const loadSeconds = (performance.now() - tStart) / 1000;
loadDone = true;
await metricsSampler;
clearInterval(openSampler);

// ---------------------------------------------------------------------------------------------
// Afterwards.
async function getText(path, headers = adminAuth) {
  const r = await fetch(`${BASE}${path}`, { headers, signal: AbortSignal.timeout(10_000) });
  return { status: r.status, text: await r.text() };
}

// Aborted streams finish on the engine thread shortly after the disconnect; wait for quiet.
let samples;
let settled = false;
for (let t = 0; t < 100; ++t) {
  const m = await getText('/metrics');
  assert.equal(m.status, 200);
  samples = parsePrometheus(m.text);
  const running = metric(samples, 'hinge:num_requests_running');
  const waiting = metric(samples, 'hinge:num_requests_waiting');
  const free = metric(samples, 'hinge:kv_blocks_free');
  const total = metric(samples, 'hinge:kv_blocks_total');
  if (running === 0 && waiting === 0 && free === total) {
    settled = true;
    break;
  }
  await sleep(100);
}
clearInterval(rssSampler);
maxKiB = Math.max(maxKiB, rssKiB());

const health = await getText('/health');

const sent = results.length;
const counts = {};
for (const r of results) counts[r.outcome] = (counts[r.outcome] ?? 0) + 1;
const byStatus = {};
for (const r of results) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
const pct = (arr, p) => {
  if (arr.length === 0) return NaN;
  const s = [...arr].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const okMs = results.filter((r) => r.outcome === 'ok').map((r) => r.ms);
const rejMs = results.filter((r) => /^http(429|503)$/.test(r.outcome)).map((r) => r.ms);

const received = metric(samples, 'hinge:requests_received_total');
const accepted = metric(samples, 'hinge:requests_accepted_total');
const rejected = {};
for (const s of samples)
  if (s.name === 'hinge:requests_rejected_total') rejected[s.labels.reason] = s.value;
const rejectedSum = Object.values(rejected).reduce((a, b) => a + b, 0);
const finished = {};
for (const s of samples)
  if (s.name === 'hinge:request_success_total') finished[s.labels.finished_reason] = s.value;
const finishedSum = Object.values(finished).reduce((a, b) => a + b, 0);
const http = {};
for (const s of samples)
  if (s.name === 'hinge:http_responses_total') http[s.labels.code] = s.value;

const fmtMs = (v) => (Number.isFinite(v) ? `${v.toFixed(0)} ms` : '-');
console.log('# ---- overload summary ----');
console.log(`# ${sent} requests from ${CLIENTS} clients in ${loadSeconds.toFixed(1)} s ` +
            `(max ${maxOpen} open at once)`);
console.log(`# outcomes: ${JSON.stringify(counts)}`);
const byRole = {};
for (const r of results) {
  byRole[r.role] ??= {};
  byRole[r.role][r.outcome] = (byRole[r.role][r.outcome] ?? 0) + 1;
}
console.log(`# by role: ${JSON.stringify(byRole)}`);
console.log(`# server under load: peak running ${peak.running}, peak waiting ${peak.waiting}, ` +
            `min free KV blocks ${peak.minFree} of ${server.kvBlocks} (${peak.samples} samples)`);
console.log(`# client-side HTTP status: ${JSON.stringify(byStatus)} (0: aborted by the client)`);
console.log(`# latency of 200s: p50 ${fmtMs(pct(okMs, 50))}, p99 ${fmtMs(pct(okMs, 99))}, ` +
            `max ${fmtMs(pct(okMs, 100))}; of 429/503: p50 ${fmtMs(pct(rejMs, 50))}, ` +
            `p99 ${fmtMs(pct(rejMs, 99))}`);
console.log(`# server RSS: baseline ${(baselineKiB / 1024).toFixed(1)} MiB, ` +
            `max ${(maxKiB / 1024).toFixed(1)} MiB`);
console.log(`# metrics: received ${received}, accepted ${accepted}, rejected ${JSON.stringify(rejected)}` +
            ` (sum ${rejectedSum}), finished ${JSON.stringify(finished)}, http ${JSON.stringify(http)}`);
console.log(`# preemptions ${metric(samples, 'hinge:num_preemptions_total')}, ` +
            `prefix-cache hits ${metric(samples, 'hinge:prefix_cache_hits_total')} of ` +
            `${metric(samples, 'hinge:prefix_cache_queries_total')} tokens, ` +
            `generated ${metric(samples, 'hinge:generation_tokens_total')} tokens`);

// ---------------------------------------------------------------------------------------------
// Assertions (all collected, then reported together).
const failures = [];
const check = (cond, msg) => { if (!cond) failures.push(msg); };

const bad = results.filter((r) => r.outcome === 'FAIL');
for (const r of bad.slice(0, 20))
  failures.push(`client ${r.client} (${r.role}${r.stream ? ', stream' : ''}, user ${r.user}): ` +
                `status ${r.status} after ${r.ms.toFixed(0)} ms: ${r.error}`);
if (bad.length > 20) failures.push(`... ${bad.length - 20} more failed requests`);
check(sent === CLIENTS * PER_CLIENT, `sent ${sent} requests, want ${CLIENTS * PER_CLIENT}`);
check((counts.ok ?? 0) > 0, 'no request completed');
check(!peak.error, `/metrics during the load: ${peak.error}`);
check((counts.http429 ?? 0) > 0, 'no 429: the per-user cap never triggered');
check((counts.http503 ?? 0) > 0, 'no 503: the queue never overflowed');
check((counts.http400 ?? 0) === results.filter((r) => r.role === 'tooLarge').length * 2 / 3,
      `400s: ${counts.http400}`);
// Under ASan the queue overflows so often that the stream-abort clients may all get a 503.
if (!SANITIZED) check((counts.abortedMidStream ?? 0) > 0, 'no client disconnected mid-stream');
check(maxKiB - baselineKiB < RSS_BOUND_MIB * 1024,
      `RSS grew by ${((maxKiB - baselineKiB) / 1024).toFixed(1)} MiB (bound ${RSS_BOUND_MIB})`);
check(health.status === 200 && JSON.parse(health.text).status === 'ok',
      `/health: ${health.status} ${health.text}`);
check(settled, 'running/waiting did not reach 0 or KV blocks did not all become free within 10 s');
check(metric(samples, 'hinge:num_requests_running') === 0, 'num_requests_running != 0');
check(metric(samples, 'hinge:num_requests_waiting') === 0, 'num_requests_waiting != 0');
check(metric(samples, 'hinge:kv_blocks_free') === metric(samples, 'hinge:kv_blocks_total'),
      `kv_blocks_free ${metric(samples, 'hinge:kv_blocks_free')} != total ` +
      `${metric(samples, 'hinge:kv_blocks_total')}`);
check(metric(samples, 'hinge:kv_blocks_reserved') === 0,
      `kv_blocks_reserved ${metric(samples, 'hinge:kv_blocks_reserved')} after all finished`);
check(received === sent, `requests_received_total ${received} != ${sent} requests sent`);
check(accepted + rejectedSum === sent,
      `requests_accepted_total ${accepted} + requests_rejected_total ${rejectedSum} != ${sent} sent`);
check(finishedSum === accepted,
      `request_success_total ${finishedSum} != requests_accepted_total ${accepted}`);
// Client and server views of the rejections agree. A client that hangs up before any answer
// races the engine thread: its request may be rejected{cancelled} (it was queued), or get a
// 429/503 verdict the client never reads (the engine thread took the request only after the
// hang-up, e.g. after a long prefill step), or be accepted and then aborted. So each rejection
// count is exact up to those hang-ups, and all of them together account for every hang-up.
{
  const hungUpWaiting = counts.abortedWaiting ?? 0;
  const c429 = counts.http429 ?? 0;
  const c503 = counts.http503 ?? 0;
  const s503 = (rejected.queue_full ?? 0) + (rejected.queue_timeout ?? 0);
  const s429 = rejected.user_limit ?? 0;
  const lost = s429 - c429 + s503 - c503 + (rejected.cancelled ?? 0);
  check(s429 >= c429 && s503 >= c503 && lost <= hungUpWaiting,
        `429s: ${c429} received, user_limit ${s429}; 503s: ${c503} received, queue_full + ` +
        `queue_timeout ${s503}; cancelled ${rejected.cancelled ?? 0}; ${lost} rejections the ` +
        `client never read, but only ${hungUpWaiting} clients hung up before an answer`);
  check((rejected.invalid ?? 0) + (rejected.too_large ?? 0) === (counts.http400 ?? 0),
        `400s: ${counts.http400} received, invalid + too_large ` +
        `${(rejected.invalid ?? 0) + (rejected.too_large ?? 0)}`);
  check((rejected.shutting_down ?? 0) === 0, `shutting_down ${rejected.shutting_down} under load`);
  // Every accepted request finishes exactly once: as a complete answer the client read, or
  // aborted because its client hung up (mid-stream, or while waiting for the answer).
  check((finished.stop ?? 0) + (finished.length ?? 0) >= (counts.ok ?? 0),
        `${counts.ok} complete answers but request_success_total{stop,length} ` +
        `${(finished.stop ?? 0) + (finished.length ?? 0)}`);
  check((finished.abort ?? 0) <= (counts.abortedMidStream ?? 0) + hungUpWaiting,
        `finished{abort} ${finished.abort} > client disconnects`);
  const acceptedHungUp = (counts.abortedMidStream ?? 0) + hungUpWaiting - lost;
  check((counts.ok ?? 0) + acceptedHungUp === accepted,
        `accepted ${accepted} != ${counts.ok} complete + ${acceptedHungUp} accepted, then hung up`);
  console.log(`# hang-ups before an answer: ${hungUpWaiting} (server: ` +
              `${rejected.cancelled ?? 0} cancelled while queued, ${lost - (rejected.cancelled ?? 0)} ` +
              `rejected unread, ${hungUpWaiting - lost} accepted then aborted)`);
}

// Per tenant: each of its requests counted once, as accepted or rejected; the sums are the
// server's counters.
if (TENANTS > 0) {
  let sumAccepted = 0;
  let sumRejected = 0;
  for (let t = 0; t < TENANTS; ++t) {
    const u = await getText('/v1/usage', authFor(t));
    check(u.status === 200, `tenant ${t} /v1/usage: ${u.status} ${u.text.slice(0, 200)}`);
    if (u.status !== 200) continue;
    const j = JSON.parse(u.text);
    const mine = results.filter((r) => r.tenant === t).length;
    console.log(`# tenant-${t}: sent ${mine}, usage ${u.text}`);
    check(j.tenant === `tenant-${t}`, `tenant ${t} usage names ${j.tenant}`);
    check(j.requests + j.rejected === mine,
          `tenant-${t}: usage requests ${j.requests} + rejected ${j.rejected} != ${mine} sent`);
    sumAccepted += j.requests;
    sumRejected += j.rejected;
  }
  check(sumAccepted === accepted, `tenants' requests sum ${sumAccepted} != accepted ${accepted}`);
  check(sumRejected === rejectedSum, `tenants' rejected sum ${sumRejected} != rejected ${rejectedSum}`);
  // Without the admin key the server-wide views are closed.
  const closed = await getText('/metrics', authFor(0));
  check(closed.status === 403, `/metrics with a tenant key: ${closed.status}`);
}

const stop = await server.stop(20_000);
check(stop.code === 0 && stop.signal === null,
      `SIGTERM: exit ${stop.code} signal ${stop.signal}; stderr tail:\n${server.stderr().slice(-2000)}`);

if (failures.length) {
  console.error('FAIL:\n  ' + failures.join('\n  '));
  process.exit(1);
}
console.log('# ok');
