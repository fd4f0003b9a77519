// Drives geogate with the Vercel AI SDK (`ai` + `@ai-sdk/openai`), as an
// application would: createOpenAI with the gateway's base URL. The default
// provider call speaks the OpenAI Responses API; `.chat()` chat completions.
//   GEOGATE_E2E='{...}' node vercel_ai_check.mjs   (see e2e_fleet.mjs)
import { APICallError, embed, generateText, streamText } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import assert from "node:assert/strict";

import {
  assertRealVector,
  baseURL,
  brokenMessage,
  brokenModel,
  brokenPieces,
  expectedPieces,
  expectedText,
  keys,
  model,
  refusals,
  tokens as n,
} from "./e2e_fleet.mjs";

const openai = createOpenAI({ baseURL, apiKey: keys.ok });
const flavours = { responses: (m, p = openai) => p(m), chat: (m, p = openai) => p.chat(m) };

for (const [api, modelOf] of Object.entries(flavours)) {
  const answer = await generateText({ model: modelOf(model), prompt: "once", maxRetries: 0 });
  assert.equal(answer.text, expectedText, `${api}: generateText text`);
  assert.equal(answer.finishReason, "stop", `${api}: finish reason`);
  assert.equal(answer.usage.outputTokens, n, `${api}: output tokens`);
  assert.ok(answer.usage.inputTokens > 0, `${api}: input tokens`);

  const streamed = streamText({ model: modelOf(model), prompt: "streamed", maxRetries: 0 });
  const pieces = [];
  for await (const piece of streamed.textStream) pieces.push(piece);
  assert.deepEqual(pieces, expectedPieces, `${api}: streamText pieces`);
  const usage = await streamed.usage;
  assert.equal(usage.outputTokens, n, `${api}: streamed output tokens`);
}

// A backend that dies after two tokens: both tokens, then one error part
// with the gateway's stream_interrupted (for Responses, the API's own error
// event; a chat-shaped one would end the stream with no error at all).
for (const [api, modelOf] of Object.entries(flavours)) {
  const errors = [];
  const result = streamText({
    model: modelOf(brokenModel),
    prompt: "broken",
    maxRetries: 0,
    onError: ({ error }) => errors.push(error),
  });
  const parts = [];
  for await (const part of result.fullStream) parts.push(part);
  const text = parts.filter((p) => p.type === "text-delta").map((p) => p.text);
  assert.deepEqual(text, brokenPieces, `${api} interrupted: the tokens before the failure`);
  const failed = parts.filter((p) => p.type === "error");
  assert.equal(failed.length, 1, `${api} interrupted: one error part, got ${JSON.stringify(parts)}`);
  const err = failed[0].error;
  assert.equal(err.code, "stream_interrupted", `${api} interrupted: code of ${JSON.stringify(err)}`);
  assert.ok(err.message.startsWith(brokenMessage), `${api} interrupted: ${err.message}`);
  assert.equal(errors.length, 1, `${api} interrupted: onError once`);
}
console.log("ok: ai sdk interrupted streams (responses and chat)");

const { embedding } = await embed({ model: openai.embedding(model), value: "vector", maxRetries: 0 });
assertRealVector(embedding, "ai embed");

// The refusals are APICallErrors with the status and OpenAI's error body;
// only 429 and 503 are retryable. generateText throws it; streamText's
// text stream ends empty and the error goes to onError and fullStream.
for (const r of await refusals()) {
  const provider = createOpenAI({ baseURL, apiKey: r.key });
  const check = (what) => (err) => {
    assert.ok(APICallError.isInstance(err), `${what} ${r.status}: APICallError, got ${err}`);
    assert.equal(err.statusCode, r.status, `${what}: status`);
    assert.equal(err.data?.error?.code, r.code, `${what} ${r.status}: code`);
    assert.equal(err.isRetryable, r.status !== 451, `${what} ${r.status}: retryable`);
    return true;
  };
  for (const [api, modelOf] of Object.entries(flavours)) {
    await assert.rejects(
      generateText({ model: modelOf(r.model, provider), prompt: "x", maxRetries: 0 }),
      check(`${api} generateText`),
    );
    const errors = [];
    const result = streamText({
      model: modelOf(r.model, provider),
      prompt: "x",
      maxRetries: 0,
      onError: ({ error }) => errors.push(error),
    });
    const parts = [];
    for await (const part of result.fullStream) parts.push(part);
    const failed = parts.filter((p) => p.type === "error");
    assert.equal(failed.length, 1, `${api} streamText ${r.status}: one error part`);
    check(`${api} streamText`)(failed[0].error);
    assert.equal(errors.length, 1, `${api} streamText ${r.status}: onError once`);
    assert.ok(!parts.some((p) => p.type === "text-delta"), `${api} streamText ${r.status}: no text`);
  }
}
console.log("ok: ai sdk errors 451 429 503");
console.log(`ok: ${n} tokens through geogate via the Vercel AI SDK (responses and chat)`);
