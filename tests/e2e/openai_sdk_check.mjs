// Drives geogate with the official OpenAI Node SDK, exactly as an
// application would: only the base URL points at the gateway.
//   GEOGATE_E2E='{...}' node openai_sdk_check.mjs   (see e2e_fleet.mjs)
import OpenAI from "openai";
import assert from "node:assert/strict";

import {
  assertRealVector,
  backend,
  baseURL,
  brokenModel,
  expectInterrupted,
  expectedPieces,
  expectedText,
  keys,
  model,
  refusals,
  tokens as n,
} from "./e2e_fleet.mjs";

const client = new OpenAI({ baseURL, apiKey: process.env.GEOGATE_E2E_KEY ?? keys.ok, maxRetries: 0 });

// Streaming chat completion: tokens arrive as chunks, in order.
const stream = await client.chat.completions.create({
  model,
  stream: true,
  messages: [{ role: "user", content: "stream through geogate" }],
});
const pieces = [];
let chunks = 0;
for await (const chunk of stream) {
  chunks++;
  const delta = chunk.choices[0]?.delta?.content;
  if (delta) pieces.push(delta);
}
assert.deepEqual(pieces, expectedPieces, "streamed tokens");
assert.ok(chunks >= n, "one chunk per token at least");

// Streaming with usage requested by the client: the usage chunk arrives.
const withUsage = await client.chat.completions.create({
  model,
  stream: true,
  stream_options: { include_usage: true },
  messages: [{ role: "user", content: "count me" }],
});
let usage = null;
for await (const chunk of withUsage) if (chunk.usage) usage = chunk.usage;
assert.ok(usage, "usage chunk present when asked for");
assert.equal(usage.completion_tokens, n);

// Non-streaming, and the raw response carries geogate's headers.
const { data, response } = await client.chat.completions
  .create({ model, messages: [{ role: "user", content: "once" }] })
  .withResponse();
assert.equal(data.choices[0].message.content, expectedText);
assert.equal(response.headers.get("x-geogate-backend"), backend);

// The Responses API, not streamed: the SDK's output_text and usage.
const answer = await client.responses.create({ model, input: "respond once" });
assert.equal(answer.object, "response");
assert.equal(answer.output_text, expectedText);
assert.equal(answer.usage.output_tokens, n);
assert.ok(answer.usage.input_tokens > 0, "input tokens reported");

// The Responses API streamed: typed events, one delta per token, completed last.
const events = await client.responses.create({ model, input: "respond streamed", stream: true });
const deltas = [];
let last = null;
for await (const event of events) {
  if (event.type === "response.output_text.delta") deltas.push(event.delta);
  last = event;
}
assert.deepEqual(deltas, expectedPieces, "streamed response deltas");
assert.equal(last.type, "response.completed");
assert.equal(last.response.usage.output_tokens, n);

// Models and embeddings.
const models = await client.models.list();
assert.ok(models.data.some((m) => m.id === model), "model listed");
const one = await client.models.retrieve(model);
assert.equal(one.id, model);
assert.equal(one.object, "model");
await assert.rejects(
  client.models.retrieve("no-such-model"),
  (err) => err instanceof OpenAI.NotFoundError && err.code === "model_not_found",
);
// The SDK's default asks for base64 and decodes it: the vector must be the
// real one (a backend answering floats would decode to zeros), equal to the
// float encoding's within float32 precision.
const emb = await client.embeddings.create({ model, input: "vector" });
assert.equal(emb.data.length, 1);
assertRealVector(emb.data[0].embedding, "default-encoded embedding");
const floats = await client.embeddings.create({ model, input: "vector", encoding_format: "float" });
assert.deepEqual(
  Array.from(emb.data[0].embedding),
  floats.data[0].embedding.map((x) => Math.fround(x)),
  "base64 and float encodings agree",
);

// An unknown model is a typed SDK error with OpenAI's shape.
await assert.rejects(
  client.chat.completions.create({ model: "no-such-model", messages: [] }),
  (err) => err instanceof OpenAI.NotFoundError && err.code === "model_not_found",
);

// A backend that dies after two tokens: the SDK yields both, then throws
// an APIError with the gateway's stream_interrupted, in chat and Responses.
const textOf = {
  chat: (chunk) => chunk.choices?.[0]?.delta?.content,
  responses: (event) => (event.type === "response.output_text.delta" ? event.delta : undefined),
};
const broken = {
  chat: () =>
    client.chat.completions.create({ model: brokenModel, stream: true, messages: [{ role: "user", content: "x" }] }),
  responses: () => client.responses.create({ model: brokenModel, input: "x", stream: true }),
};
for (const [api, open] of Object.entries(broken))
  await expectInterrupted(api, open, textOf[api], OpenAI.APIError);
console.log("ok: openai interrupted streams (chat and responses)");

// The gateway's refusals, through chat and the Responses API. The SDK has
// no class of its own for 451: it is the generic APIError, not one of the
// 4xx/5xx subclasses, with OpenAI's code.
const classOf = { 451: null, 429: OpenAI.RateLimitError, 503: OpenAI.InternalServerError };
for (const r of await refusals()) {
  const c = new OpenAI({ baseURL, apiKey: r.key, maxRetries: 0 });
  const calls = {
    chat: () => c.chat.completions.create({ model: r.model, messages: [{ role: "user", content: "x" }] }),
    "chat stream": () =>
      c.chat.completions.create({ model: r.model, stream: true, messages: [{ role: "user", content: "x" }] }),
    responses: () => c.responses.create({ model: r.model, input: "x" }),
    "responses stream": () => c.responses.create({ model: r.model, input: "x", stream: true }),
  };
  for (const [what, call] of Object.entries(calls)) {
    await assert.rejects(call(), (err) => {
      assert.ok(err instanceof OpenAI.APIError, `${what} ${r.status}: an APIError`);
      assert.equal(err.status, r.status, `${what}: status`);
      assert.equal(err.code, r.code, `${what} ${r.status}: code`);
      const cls = classOf[r.status];
      if (cls) assert.ok(err instanceof cls, `${what} ${r.status}: ${cls.name}`);
      else assert.equal(err.constructor, OpenAI.APIError, `${what} ${r.status}: plain APIError`);
      return true;
    });
  }
}
console.log("ok: openai errors 451 429 503");
console.log(`ok: ${pieces.length} tokens streamed through geogate via the OpenAI SDK`);
