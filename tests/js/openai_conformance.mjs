// ServeJs.OpenAiConformance: the official `openai` npm client against a live `hinge serve`
// (stories260K, plain chat fallback). Starts its own server on a free port, checks chat and
// completions (streaming and not), n, stop, seed, stream_options.include_usage, prefix-cache
// usage, models, greedy parity with `hinge run`, error classes, and a clean SIGTERM exit.
// Everything runs under a hard watchdog: a hung server fails the test, it never hangs ctest.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { loadOpenAi, startServer, hingeRun, watchdog } from './lib/hinge.mjs';

watchdog(55_000, 'ServeJs.OpenAiConformance');

const { openai: mod, version } = loadOpenAi();
const { OpenAI, NotFoundError, BadRequestError, APIError } = mod;

const PROMPT = 'Once upon a time';
const T = { timeout: 15_000 };

let server;
let client;
let model;
let greedy;  // `hinge run` greedy output for PROMPT, 40 tokens

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

before(async () => {
  server = await startServer();
  model = server.model;
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'test', maxRetries: 0,
                        timeout: 15_000 });
  console.log(`# openai@${version} against ${server.url} (${model})`);
  const r = await hingeRun(['-p', PROMPT, '-n', '40', '--temp', '0', '-t', '1']);
  greedy = r.text;
  assert.equal(typeof greedy, 'string');
  assert.ok(greedy.length > 20, `hinge run greedy text too short: ${JSON.stringify(greedy)}`);
});

after(async () => {
  if (server) await server.stop().catch(() => {});
});

describe('models', () => {
  it('models.list contains the served model', T, async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    assert.ok(ids.includes(model), `models.list: ${JSON.stringify(ids)}; want ${model}`);
    assert.equal(model, 'stories260K');
    const one = await client.models.retrieve(model);
    assert.equal(one.id, model);
    assert.equal(one.object, 'model');
  });
});

describe('completions', () => {
  it('greedy output equals `hinge run` for the same prompt', T, async () => {
    const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40,
                                                temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].text, greedy);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 40);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 40);
  });

  it('streaming assembles the same text and ends with a finish_reason', T, async () => {
    const chunks = await collect(await client.completions.create({
      model, prompt: PROMPT, max_tokens: 40, temperature: 0, stream: true }));
    assert.ok(chunks.length >= 2, `only ${chunks.length} chunks`);
    let text = '';
    const reasons = [];
    for (const c of chunks) {
      assert.equal(c.object, 'text_completion');
      assert.equal(c.usage ?? null, null, 'usage only with include_usage');
      for (const ch of c.choices) {
        assert.equal(ch.index, 0);
        text += ch.text;
        if (ch.finish_reason) reasons.push(ch.finish_reason);
      }
    }
    assert.equal(text, greedy);
    assert.deepEqual(reasons, ['length']);
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
  });

  it('stop ends the output before the stop string', T, async () => {
    // A word of the greedy text, past its start, used as the stop string.
    const words = [...greedy.matchAll(/[A-Za-z]{4,}/g)].filter((m) => m.index >= 8);
    assert.ok(words.length > 0, `no stop word candidate in ${JSON.stringify(greedy)}`);
    const word = words[Math.min(1, words.length - 1)][0];
    const expected = greedy.slice(0, greedy.indexOf(word));
    console.log(`# stop ${JSON.stringify(word)} in greedy ${JSON.stringify(greedy)}`);
    const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40,
                                                temperature: 0, stop: [word] });
    assert.equal(r.choices[0].text, expected, `stop ${JSON.stringify(word)}`);
    assert.equal(r.choices[0].finish_reason, 'stop');
    const chunks = await collect(await client.completions.create({
      model, prompt: PROMPT, max_tokens: 40, temperature: 0, stop: word, stream: true }));
    assert.equal(chunks.map((c) => c.choices.map((ch) => ch.text).join('')).join(''), expected);
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
  });

  it('n = 2 returns two choices', T, async () => {
    const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 20,
                                                temperature: 1.0, seed: 7, n: 2 });
    assert.equal(r.choices.length, 2);
    assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1]);
    for (const c of r.choices) {
      assert.equal(typeof c.text, 'string');
      assert.ok(['length', 'stop'].includes(c.finish_reason), c.finish_reason);
    }
    assert.ok(r.usage.completion_tokens >= 2 && r.usage.completion_tokens <= 40,
              `completion_tokens ${r.usage.completion_tokens}`);
  });

  it('seed makes sampling reproducible', T, async () => {
    const sample = async (seed) => (await client.completions.create({
      model, prompt: PROMPT, max_tokens: 40, temperature: 1.0, seed })).choices[0].text;
    const a = await sample(1234);
    const b = await sample(1234);
    assert.equal(a, b, 'same seed, different text');
    const others = [await sample(1235), await sample(99), await sample(2 ** 40 + 3)];
    assert.ok(others.some((o) => o !== a),
              `four seeds gave the same text at temperature 1: ${JSON.stringify(a)}`);
  });

  it('stream_options.include_usage adds a final usage chunk with empty choices', T, async () => {
    const chunks = await collect(await client.completions.create({
      model, prompt: PROMPT, max_tokens: 12, temperature: 0, stream: true,
      stream_options: { include_usage: true } }));
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage.completion_tokens, 12);
    assert.ok(last.usage.prompt_tokens > 0);
    assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + 12);
    for (const c of chunks.slice(0, -1)) {
      assert.equal(c.usage ?? null, null, 'usage only on the last chunk');
      assert.ok(c.choices.length > 0);
    }
  });

  it('an identical long prompt reports cached prompt tokens the second time', T, async () => {
    const prompt = 'The little dog ran to the park and played with a big red ball. '.repeat(4);
    const first = await client.completions.create({ model, prompt, max_tokens: 8,
                                                    temperature: 0 });
    assert.ok(first.usage.prompt_tokens >= 40, `prompt_tokens ${first.usage.prompt_tokens}`);
    const second = await client.completions.create({ model, prompt, max_tokens: 8,
                                                     temperature: 0 });
    assert.equal(second.usage.prompt_tokens, first.usage.prompt_tokens);
    const cached = second.usage.prompt_tokens_details?.cached_tokens;
    assert.ok(cached > 0, `cached_tokens ${cached} on the repeat`);
    assert.ok(cached < second.usage.prompt_tokens, `cached_tokens ${cached}`);
    assert.ok((first.usage.prompt_tokens_details?.cached_tokens ?? 0) <= cached);
    assert.equal(second.choices[0].text, first.choices[0].text);
  });
});

describe('chat.completions', () => {
  const messages = [{ role: 'user', content: PROMPT }];

  it('non-streaming: an assistant message (plain fallback = the completions prompt)', T,
     async () => {
       const r = await client.chat.completions.create({ model, messages, max_tokens: 40,
                                                        temperature: 0 });
       assert.equal(r.object, 'chat.completion');
       assert.ok(r.id.startsWith('chatcmpl-'), r.id);
       assert.equal(r.model, model);
       assert.equal(r.choices.length, 1);
       assert.equal(r.choices[0].message.role, 'assistant');
       assert.equal(r.choices[0].message.content, greedy);
       assert.equal(r.choices[0].finish_reason, 'length');
       assert.equal(r.usage.completion_tokens, 40);
     });

  it('streaming: role chunk, content deltas, finish_reason', T, async () => {
    const chunks = await collect(await client.chat.completions.create({
      model, messages, max_tokens: 40, temperature: 0, stream: true }));
    assert.ok(chunks.length >= 3, `only ${chunks.length} chunks`);
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    let text = '';
    const reasons = [];
    const ids = new Set();
    for (const c of chunks) {
      assert.equal(c.object, 'chat.completion.chunk');
      ids.add(c.id);
      for (const ch of c.choices) {
        text += ch.delta?.content ?? '';
        if (ch.finish_reason) reasons.push(ch.finish_reason);
      }
    }
    assert.equal(ids.size, 1, 'one id per stream');
    assert.equal(text, greedy);
    assert.deepEqual(reasons, ['length']);
  });

  it('streaming with include_usage: last chunk has usage and no choices', T, async () => {
    const chunks = await collect(await client.chat.completions.create({
      model, messages, max_tokens: 10, temperature: 0, stream: true,
      stream_options: { include_usage: true } }));
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage.completion_tokens, 10);
    assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + 10);
    assert.ok(chunks.slice(0, -1).every((c) => c.usage == null && c.choices.length > 0));
  });

  it('n = 2 returns two choices, streaming and not', T, async () => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 16,
                                                     temperature: 1.0, seed: 11, n: 2 });
    assert.equal(r.choices.length, 2);
    assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1]);
    for (const c of r.choices) assert.equal(c.message.role, 'assistant');
    const chunks = await collect(await client.chat.completions.create({
      model, messages, max_tokens: 16, temperature: 1.0, seed: 11, n: 2, stream: true }));
    const text = ['', ''];
    const reasons = [null, null];
    for (const c of chunks) {
      for (const ch of c.choices) {
        assert.ok(ch.index === 0 || ch.index === 1, `index ${ch.index}`);
        text[ch.index] += ch.delta?.content ?? '';
        if (ch.finish_reason) reasons[ch.index] = ch.finish_reason;
      }
    }
    assert.ok(reasons.every((x) => x === 'length' || x === 'stop'), JSON.stringify(reasons));
    // Same seed: the streamed samples are the non-streamed ones.
    assert.deepEqual(text, r.choices.map((c) => c.message.content));
  });

  it('seed reproducibility through chat', T, async () => {
    const sample = async (seed) => (await client.chat.completions.create({
      model, messages, max_tokens: 30, temperature: 1.0, seed })).choices[0].message.content;
    assert.equal(await sample(5), await sample(5));
  });
});

describe('errors', () => {
  it('unknown model -> NotFoundError (404)', T, async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'no-such-model',
                                       messages: [{ role: 'user', content: 'hi' }] }),
      (e) => {
        assert.ok(e instanceof NotFoundError, `${e?.constructor?.name}: ${e?.message}`);
        assert.equal(e.status, 404);
        assert.equal(e.param, 'model');
        assert.equal(typeof e.error?.message, 'string');
        return true;
      });
    await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: 'x' }),
                         NotFoundError);
    await assert.rejects(client.models.retrieve('no-such-model'), NotFoundError);
  });

  it('negative max_tokens -> BadRequestError (400)', T, async () => {
    for (const create of [
      () => client.completions.create({ model, prompt: PROMPT, max_tokens: -5 }),
      () => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }],
                                             max_tokens: -1 }),
    ]) {
      await assert.rejects(create(), (e) => {
        assert.ok(e instanceof BadRequestError, `${e?.constructor?.name}: ${e?.message}`);
        assert.equal(e.status, 400);
        assert.equal(e.param, 'max_tokens');
        assert.equal(e.type, 'invalid_request_error');
        return true;
      });
    }
  });

  it('a streaming request that is rejected throws before any chunk', T, async () => {
    await assert.rejects(
      client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }],
                                       max_tokens: 1_000_000, stream: true }),
      (e) => e instanceof APIError && e.status === 400);
  });
});

describe('shutdown', () => {
  it('SIGTERM: the server drains and exits 0', T, async () => {
    const { code, signal } = await server.stop(10_000);
    assert.equal(signal, null, `killed by ${signal}`);
    assert.equal(code, 0, `exit code ${code}; stderr:\n${server.stderr()}`);
    assert.match(server.stderr(), /hinge: stopped: \d+ requests accepted, 0 ended at shutdown/);
  });
});
