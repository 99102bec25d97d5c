// The Node code of docs/clients.md, run by the Go tests (clientguide_node_test.go):
//
//   node guide.mjs <scenario> <base-url> <model> <prompt> <max-tokens>
//
// scenario is chat, messages, responses or continue. It prints one JSON line with what
// the snippets returned. Each region between "guide:begin NAME" and "guide:end" is a
// snippet of the document, kept equal to it by TestClientGuideSnippets.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

// guide:begin node-chat
// Streams a chat answer. Returns the text received and, when the answer did not
// complete, the gateway's error object: an error status and the error event of an
// interrupted stream both raise OpenAI.APIError, whose .error is that object
// ({code, partial_output, delivered_output_tokens, retryable, request_id, ...}).
async function chatStream(client, params) {
  let text = "";
  try {
    const stream = await client.chat.completions.create({ ...params, stream: true });
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    return { text, error: null };
  } catch (e) {
    if (e instanceof OpenAI.APIError && e.error) return { text, error: e.error };
    throw e;
  }
}
// guide:end

// guide:begin node-messages
// Streams a Messages answer. @anthropic-ai/sdk raises Anthropic.APIError for an error
// status and for an error event alike; its .error is the whole body,
// {"type":"error","error":{...}}, so the gateway's object is e.error.error.
async function messagesStream(client, params) {
  let text = "";
  try {
    const stream = await client.messages.create({ ...params, stream: true });
    for await (const event of stream) {
      if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text;
    }
    return { text, error: null };
  } catch (e) {
    if (e instanceof Anthropic.APIError && e.error?.error) return { text, error: e.error.error };
    throw e;
  }
}
// guide:end

// guide:begin node-responses
// Streams a Responses answer. The error event carries the gateway's object as its
// "error" member, which the openai SDK raises as OpenAI.APIError, as in chat.
async function responsesStream(client, params) {
  let text = "";
  try {
    const stream = await client.responses.create({ ...params, stream: true });
    for await (const event of stream) {
      if (event.type === "response.output_text.delta") text += event.delta;
    }
    return { text, error: null };
  } catch (e) {
    if (e instanceof OpenAI.APIError && e.error) return { text, error: e.error };
    throw e;
  }
}
// guide:end

// guide:begin node-continue-vllm
// Continues an interrupted chat answer on vLLM or SGLang: the text received as a final
// assistant message the engine leaves open, without a new assistant header. The SDK
// sends the two engine options as they are.
async function continueChat(client, params, received) {
  const more = await chatStream(client, {
    ...params,
    messages: [...params.messages, { role: "assistant", content: received }],
    continue_final_message: true,
    add_generation_prompt: false,
  });
  return { text: received + more.text, error: more.error };
}
// guide:end

const [scenario, baseURL, model, prompt, maxTokens] = process.argv.slice(2);
const max = Number(maxTokens);
const openai = new OpenAI({ baseURL: baseURL + "/v1", apiKey: "unused", maxRetries: 0 });
const chat = { model, max_tokens: max, temperature: 0, messages: [{ role: "user", content: prompt }] };
let out;
switch (scenario) {
  case "chat":
    out = await chatStream(openai, chat);
    break;
  case "messages":
    out = await messagesStream(new Anthropic({ baseURL, apiKey: "unused", maxRetries: 0 }),
      { model, max_tokens: max, messages: [{ role: "user", content: prompt }] });
    break;
  case "responses":
    out = await responsesStream(openai, { model, input: prompt, max_output_tokens: max, temperature: 0 });
    break;
  case "continue": {
    const first = await chatStream(openai, chat);
    out = { first, ...(await continueChat(openai, chat, first.text)) };
    break;
  }
  default:
    throw new Error("unknown scenario " + scenario);
}
console.log(JSON.stringify(out));
