// What the Python test (test_openai_sdk.py) tells every *_check.mjs, in
// GEOGATE_E2E: where the gateway is, and the keys and models with which it
// answers 200, 451, 429 and 503. Plus the checks all SDKs share.
import assert from "node:assert/strict";

export const fleet = JSON.parse(process.env.GEOGATE_E2E ?? "{}");
assert.ok(fleet.baseURL, "GEOGATE_E2E names the gateway's base URL");

export const { baseURL, model, backend, brokenModel, brokenBackend } = fleet;
export const tokens = Number(fleet.tokens);
export const keys = fleet.keys;
/// The tokens gpusim generates, in order: "b1:0 ", "b1:1 ", ...
export const expectedPieces = Array.from({ length: tokens }, (_, i) => `${backend}:${i} `);
export const expectedText = expectedPieces.join("");
/// What a stream of brokenModel carries before its backend dies: two tokens.
export const brokenPieces = [0, 1].map((i) => `${brokenBackend}:${i} `);
/// The gateway's message for it ("backend b2 failed mid-stream: reset").
export const brokenMessage = `backend ${brokenBackend} failed mid-stream`;

/// The three refusals each SDK must surface as its own errors:
/// - 451 residency_denied: a tenant held to the EU asks for a model served
///   only in the US;
/// - 429 rate_limited: a tenant whose rate bucket is spent (spent here);
/// - 503 no_compliant_backend: the only backend of the model is down.
/// Each refusal's { key, model, status, code }.
export async function refusals() {
  // The limited tenant has one request per 1000 s: spend it (200, or 429
  // when an earlier check already did).
  const drain = await fetch(`${baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${keys.limited}` },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "drain" }] }),
  });
  assert.ok(drain.status === 200 || drain.status === 429, `drain: ${drain.status}`);
  await drain.arrayBuffer();
  return [
    { key: keys.eu, model: fleet.usOnlyModel, status: 451, code: "residency_denied" },
    { key: keys.limited, model, status: 429, code: "rate_limited" },
    { key: keys.ok, model: fleet.deadModel, status: 503, code: "no_compliant_backend" },
  ];
}

/// A float32 vector is not all zeros (what a client that misreads base64
/// embeddings as floats gets).
export function assertRealVector(v, what) {
  assert.ok(Array.isArray(v) || ArrayBuffer.isView(v), `${what}: a vector`);
  assert.ok(v.length > 0, `${what}: not empty`);
  assert.ok(
    Array.from(v).some((x) => x !== 0 && Number.isFinite(x)),
    `${what}: not all zeros`,
  );
}

/// Reads a stream of brokenModel to its end: `open()` gives the SDK's async
/// iterable, `textOf(item)` an item's text (or nothing). The SDK must yield
/// the two tokens and then throw an `errorClass` with the gateway's
/// stream_interrupted.
export async function expectInterrupted(what, open, textOf, errorClass) {
  const got = [];
  await assert.rejects(
    (async () => {
      for await (const item of await open()) {
        const text = textOf(item);
        if (text) got.push(text);
      }
    })(),
    (err) => {
      assert.ok(err instanceof errorClass, `${what} interrupted: ${errorClass.name}, got ${err}`);
      assert.equal(err.code, "stream_interrupted", `${what} interrupted: code`);
      assert.ok(err.message.includes(brokenMessage), `${what} interrupted: ${err.message}`);
      return true;
    },
  );
  assert.deepEqual(got, brokenPieces, `${what} interrupted: the tokens before the failure`);
}
