// The Vercel AI SDK with its OpenAI-compatible provider against a real `sluice serve`.
// See openai.mjs for what it calls and prints.
import { generateText, streamText } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";

const { SLUICE_URL, SLUICE_TOKEN, FLOW_PREFIX } = process.env;
const sluice = createOpenAICompatible({ name: "sluice", baseURL: SLUICE_URL + "/v1", apiKey: SLUICE_TOKEN });
const prompt = { system: "Be brief.", prompt: "Where is order A-1?" };

async function outcome(p) {
  try {
    const r = await p;
    return { ok: true, text: r.text };
  } catch (e) {
    return { ok: false, status: e.statusCode ?? e.lastError?.statusCode ?? null, message: String(e.message) };
  }
}

const fail = await outcome(generateText({ model: sluice(FLOW_PREFIX + "fail"), ...prompt })); // maxRetries 2, the SDK's default
const wait = await outcome(generateText({ model: sluice(FLOW_PREFIX + "wait"), ...prompt }));
const result = streamText({ model: sluice(FLOW_PREFIX + "stream"), ...prompt });
const chunks = [];
for await (const text of result.textStream) {
  if (text) chunks.push(text);
}
console.log(JSON.stringify({ sdk: "vercel", fail, wait, chunks }));
