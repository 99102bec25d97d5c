// A client of the gateway written with the official Node SDKs, run by the Go tests:
//
//   node client.mjs <api> <base-url> <model> <prompt> [max-tokens]
//
// api is chat, messages or responses. It streams one answer and prints one JSON line:
// {"ok":true,"text":"…"} when the stream completed, or {"ok":false,"text":"…","error":{…}}
// with what the SDK raised (its status, and the error object it carried) when it did not.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

const [api, baseURL, model, prompt, maxTokens = "16"] = process.argv.slice(2);
const max = Number(maxTokens);
let text = "";

function errorOf(e) {
  // The SDKs keep the error body as e.error; for an SSE error event it is the event's
  // error object (or its data).
  let body = e?.error ?? null;
  if (typeof body === "string") {
    try { body = JSON.parse(body); } catch { /* keep the text */ }
  }
  if (body && body.error) body = body.error;
  return { status: e?.status ?? null, message: String(e?.message ?? e), body };
}

try {
  if (api === "messages") {
    const client = new Anthropic({ baseURL, apiKey: "unused", maxRetries: 0 });
    const stream = await client.messages.create({
      model, max_tokens: max, stream: true, messages: [{ role: "user", content: prompt }],
    });
    for await (const ev of stream) {
      if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
    }
  } else if (api === "responses") {
    const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey: "unused", maxRetries: 0 });
    const stream = await client.responses.create({ model, input: prompt, max_output_tokens: max, stream: true });
    for await (const ev of stream) {
      if (ev.type === "response.output_text.delta") text += ev.delta;
    }
  } else {
    const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey: "unused", maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model, max_tokens: max, stream: true, messages: [{ role: "user", content: prompt }],
    });
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  }
  console.log(JSON.stringify({ ok: true, text }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, text, error: errorOf(e) }));
}
