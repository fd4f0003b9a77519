// Drives geogate with LangChain JS (`@langchain/openai`), as an application
// would: the gateway's base URL in `configuration`. ChatOpenAI over chat
// completions and with `useResponsesApi`, invoke and stream; embeddings.
//   GEOGATE_E2E='{...}' node langchain_check.mjs   (see e2e_fleet.mjs)
import { ChatOpenAI, OpenAIEmbeddings } from "@langchain/openai";
import OpenAI from "openai";
import assert from "node:assert/strict";

import {
  assertRealVector,
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

const chat = (opts) =>
  new ChatOpenAI({ model, apiKey: keys.ok, configuration: { baseURL }, maxRetries: 0, ...opts });

for (const useResponsesApi of [false, true]) {
  const api = useResponsesApi ? "responses" : "chat";
  const llm = chat({ useResponsesApi });
  const message = await llm.invoke("once");
  assert.equal(message.text, expectedText, `${api}: invoke text`);
  assert.equal(message.usage_metadata?.output_tokens, n, `${api}: invoke output tokens`);
  assert.ok(message.usage_metadata?.input_tokens > 0, `${api}: invoke input tokens`);

  const pieces = [];
  let usage = null;
  for await (const chunk of await llm.stream("streamed")) {
    if (chunk.text) pieces.push(chunk.text);
    if (chunk.usage_metadata) usage = chunk.usage_metadata;
  }
  assert.deepEqual(pieces, expectedPieces, `${api}: streamed pieces`);
  assert.equal(usage?.output_tokens, n, `${api}: streamed output tokens`);
}

const embeddings = new OpenAIEmbeddings({ model, apiKey: keys.ok, configuration: { baseURL }, maxRetries: 0 });
assertRealVector(await embeddings.embedQuery("vector"), "langchain embedQuery");

// A backend that dies after two tokens: the stream yields both, then
// raises the OpenAI SDK's APIError with the gateway's stream_interrupted.
for (const useResponsesApi of [false, true]) {
  const llm = chat({ model: brokenModel, useResponsesApi });
  const api = useResponsesApi ? "responses" : "chat";
  await expectInterrupted(api, () => llm.stream("x"), (chunk) => chunk.text, OpenAI.APIError);
}
console.log("ok: langchain interrupted streams (chat and responses)");

// LangChain raises the OpenAI SDK's own errors (it wraps that client), a
// 429 marked with LangChain's MODEL_RATE_LIMIT error code.
const classOf = { 451: OpenAI.APIError, 429: OpenAI.RateLimitError, 503: OpenAI.InternalServerError };
for (const r of await refusals()) {
  for (const useResponsesApi of [false, true]) {
    const llm = chat({ model: r.model, apiKey: r.key, useResponsesApi });
    const calls = {
      invoke: () => llm.invoke("x"),
      stream: async () => {
        for await (const _ of await llm.stream("x"));
      },
    };
    for (const [what, call] of Object.entries(calls)) {
      const name = `${useResponsesApi ? "responses" : "chat"} ${what} ${r.status}`;
      await assert.rejects(call(), (err) => {
        assert.ok(err instanceof classOf[r.status], `${name}: ${classOf[r.status].name}, got ${err}`);
        // 451 has no subclass of its own: the plain APIError, not a subclass.
        if (r.status === 451) assert.equal(err.constructor, OpenAI.APIError, `${name}: plain APIError`);
        assert.equal(err.status, r.status, `${name}: status`);
        assert.equal(err.code, r.code, `${name}: code`);
        if (r.status === 429) assert.equal(err.lc_error_code, "MODEL_RATE_LIMIT", name);
        return true;
      });
    }
  }
}
console.log("ok: langchain errors 451 429 503");
console.log(`ok: ${n} tokens through geogate via LangChain (chat and responses)`);
