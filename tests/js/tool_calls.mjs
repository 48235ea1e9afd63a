// ServeJs.ToolCalls: the official `openai` npm client reads hinge's tool calls, streaming and not
// (docs/tool-calls.md). A random `hinge synth` model with a long context serves the real
// templates of all nine tool-call formats; tool_choice "required" makes its replies calls (constrained
// decoding), so the client's own parsing is what is tested: message.tool_calls, the stream
// helper's tool-call events and finalChatCompletion(), finish_reason "tool_calls".
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { HINGE_BIN, loadOpenAi, startServer, watchdog } from './lib/hinge.mjs';

watchdog(150_000, 'ServeJs.ToolCalls');

const { openai: mod, version } = loadOpenAi();
const { OpenAI } = mod;
const here = path.dirname(fileURLToPath(import.meta.url));
const templates = path.join(here, '..', '..', '..', 'shared', 'chat-templates');
const T = { timeout: 30_000 };

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
    parameters: { type: 'object', properties: { location: { type: 'string', maxLength: 12, description: 'a city' },
      unit: { enum: ['celsius', 'fahrenheit'], description: 'the unit' } }, required: ['location'],
      additionalProperties: false } } },
  { type: 'function', function: { name: 'add', description: 'Adds two integers',
    parameters: { type: 'object', properties: { a: { type: 'integer', description: 'one' },
      b: { type: 'integer', description: 'two' } },
      required: ['a', 'b'], additionalProperties: false } } },
];
const names = new Set(tools.map((t) => t.function.name));

const dir = mkdtempSync(path.join(tmpdir(), 'hinge-tools-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
const model = path.join(dir, 'tiny16k.gguf');

function checkCall(c, { mistral = false } = {}) {
  assert.equal(c.type, 'function');
  assert.ok(names.has(c.function.name), c.function.name);
  const args = JSON.parse(c.function.arguments);  // the client hands arguments over as text
  assert.equal(typeof args, 'object');
  if (c.function.name === 'add') {
    assert.ok(Number.isInteger(args.a) && Number.isInteger(args.b), c.function.arguments);
  } else {
    assert.equal(typeof args.location, 'string');
  }
  if (mistral) assert.match(c.id, /^[A-Za-z0-9]{9}$/);
  else assert.match(c.id, /^call_[A-Za-z0-9]{24}$/);
}

// One real template per tool-call format (docs/tool-calls.md).
const families = [
  ['hermes', 'Qwen-Qwen2.5-7B-Instruct.jinja', false],
  ['llama3_json', 'meta-llama-Llama-3.1-8B-Instruct.jinja', false],
  ['mistral', 'mistralai-Mistral-Nemo-Instruct-2407.jinja', true],
  ['functionary_v3_1', 'meetkai-functionary-medium-v3.1.jinja', false],
  ['functionary_v3_2', 'meetkai-functionary-medium-v3.2.jinja', false],
  ['command_r7b', 'CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja', false],
  ['command_r_plus', 'CohereForAI-c4ai-command-r-plus-tool_use.jinja', false],
  ['firefunction_v2', 'fireworks-ai-llama-3-firefunction-v2.jinja', false],
  ['deepseek_r1', 'deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja', false],
];
for (const [family, file, mistral] of families) {
  describe(`${family} (${file})`, () => {
    let server;
    let client;
    before(async () => {
      if (!existsSync(model))
        execFileSync(HINGE_BIN(), ['synth', '--preset', 'tiny', '--type', 'f16', '--context', '16384', '-o', model]);
      server = await startServer(['--chat-template-file', path.join(templates, file)], { model });
      client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'test', maxRetries: 0, timeout: 30_000 });
      console.log(`# openai@${version} against ${server.url}`);
    });
    after(async () => {
      if (server) await server.stop().catch(() => {});
    });

    const request = (seed) => ({ model: 'tiny16k', messages: [{ role: 'user', content: 'Weather in Paris?' }],
                                 tools, tool_choice: 'required', max_tokens: 200, temperature: 1, seed });

    it('create(): message.tool_calls, finish_reason tool_calls', T, async () => {
      for (let seed = 1; seed <= 3; ++seed) {
        const r = await client.chat.completions.create(request(seed));
        const c = r.choices[0];
        assert.equal(c.finish_reason, 'tool_calls');
        assert.equal(c.message.content, null);
        assert.ok(c.message.tool_calls.length >= 1);
        for (const call of c.message.tool_calls) checkCall(call, { mistral });
      }
    });

    it('stream helper: tool-call events and finalChatCompletion()', T, async () => {
      for (let seed = 7; seed <= 9; ++seed) {
        const stream = client.chat.completions.stream(request(seed));
        const done = [];
        stream.on('tool_calls.function.arguments.done', (e) => done.push([e.name, e.arguments]));
        const final = await stream.finalChatCompletion();
        const calls = final.choices[0].message.tool_calls;
        assert.equal(final.choices[0].finish_reason, 'tool_calls');
        assert.ok(calls.length >= 1);
        assert.deepEqual(done, calls.map((c) => [c.function.name, c.function.arguments]));
        for (const call of calls) checkCall(call, { mistral });
      }
    });

    it('a named function is the one called; history with a call and its result renders', T, async () => {
      const r = await client.chat.completions.create({ ...request(3),
        tool_choice: { type: 'function', function: { name: 'add' } } });
      const calls = r.choices[0].message.tool_calls;
      assert.ok(calls.every((c) => c.function.name === 'add'));
      const next = await client.chat.completions.create({ model: 'tiny16k', max_tokens: 8, tools, seed: 1,
        messages: [{ role: 'user', content: 'Add 2 and 3' }, r.choices[0].message,
                   ...calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: '5' }))] });
      assert.ok(['stop', 'length', 'tool_calls'].includes(next.choices[0].finish_reason));
    });
  });
}
