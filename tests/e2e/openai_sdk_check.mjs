// Drives geogate with the official OpenAI Node SDK, exactly as an
// application would: only the base URL points at the gateway.
//   node openai_sdk_check.mjs BASE_URL MODEL EXPECTED_BACKEND EXPECTED_TOKENS
import OpenAI from "openai";
import assert from "node:assert/strict";

const [baseURL, model, backend, expected] = process.argv.slice(2);
const n = Number(expected);
const client = new OpenAI({ baseURL, apiKey: process.env.GEOGATE_E2E_KEY ?? "sk-e2e", maxRetries: 0 });

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
const expectedText = Array.from({ length: n }, (_, i) => `${backend}:${i} `);
assert.deepEqual(pieces, expectedText, "streamed tokens");
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
assert.equal(data.choices[0].message.content, expectedText.join(""));
assert.equal(response.headers.get("x-geogate-backend"), backend);

// Models and embeddings.
const models = await client.models.list();
assert.ok(models.data.some((m) => m.id === model), "model listed");
const emb = await client.embeddings.create({ model, input: "vector" });
assert.equal(emb.data.length, 1);

// An unknown model is a typed SDK error with OpenAI's shape.
await assert.rejects(
  client.chat.completions.create({ model: "no-such-model", messages: [] }),
  (err) => err instanceof OpenAI.NotFoundError && err.code === "model_not_found",
);
console.log(`ok: ${pieces.length} tokens streamed through geogate via the OpenAI SDK`);
