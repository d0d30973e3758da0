// LangChain JS (ChatOpenAI) against a real `sluice serve`. See openai.mjs.
import { ChatOpenAI } from "@langchain/openai";
import { HumanMessage, SystemMessage } from "@langchain/core/messages";

const { SLUICE_URL, SLUICE_TOKEN, FLOW_PREFIX } = process.env;
const model = (name) => new ChatOpenAI({ model: name, apiKey: SLUICE_TOKEN, configuration: { baseURL: SLUICE_URL + "/v1" } }); // maxRetries 6, the default
const messages = [new SystemMessage("Be brief."), new HumanMessage("Where is order A-1?")];

async function outcome(p) {
  try {
    const r = await p;
    return { ok: true, text: r.content };
  } catch (e) {
    return { ok: false, status: e.status ?? e.response?.status ?? null, message: String(e.message) };
  }
}

const fail = await outcome(model(FLOW_PREFIX + "fail").invoke(messages));
const wait = await outcome(model(FLOW_PREFIX + "wait").invoke(messages));
const chunks = [];
for await (const chunk of await model(FLOW_PREFIX + "stream").stream(messages)) {
  if (chunk.content) chunks.push(chunk.content);
}
console.log(JSON.stringify({ sdk: "langchain", fail, wait, chunks }));
