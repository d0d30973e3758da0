// The OpenAI JavaScript SDK (7.x as "openai", 6.x as "openai6") against a real
// `sluice serve`: one call to a failing flow, one to a flow that waits for an approval,
// one streamed call. Prints one JSON object per SDK on stdout. Run by
// cmd/sluice/clients_test.go with SLUICE_URL, SLUICE_TOKEN and FLOW_PREFIX set.
import OpenAI7 from "openai";
import OpenAI6 from "openai6";

const { SLUICE_URL, SLUICE_TOKEN, FLOW_PREFIX } = process.env;
const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Where is order A-1?" }];

async function outcome(p) {
  try {
    const r = await p;
    return { ok: true, text: r.choices[0].message.content };
  } catch (e) {
    return { ok: false, status: e.status ?? null, message: String(e.message) };
  }
}

for (const [name, OpenAI, prefix] of [["openai7", OpenAI7, FLOW_PREFIX + "7-"], ["openai6", OpenAI6, FLOW_PREFIX + "6-"]]) {
  const client = new OpenAI({ baseURL: SLUICE_URL + "/v1", apiKey: SLUICE_TOKEN }); // the SDK's own retries (2)
  const fail = await outcome(client.chat.completions.create({ model: prefix + "fail", messages }));
  const wait = await outcome(client.chat.completions.create({ model: prefix + "wait", messages }));
  const stream = await client.chat.completions.create({ model: prefix + "stream", messages, stream: true });
  const chunks = [];
  let id = null;
  for await (const chunk of stream) {
    id = chunk.id;
    const text = chunk.choices[0]?.delta?.content;
    if (text) chunks.push(text);
  }
  console.log(JSON.stringify({ sdk: name, fail, wait, chunks, id }));
}
