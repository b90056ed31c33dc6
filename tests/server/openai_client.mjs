// Drives hearth serve with the official OpenAI Node client, as an application would:
//   node openai_client.mjs PORT API_KEY
// (tests/server/openai_client_test.cc installs `openai` beside a copy of this file and runs it).
// Prints one JSON line with what the client saw; the C++ test judges it.
import OpenAI from 'openai';

const [port, apiKey] = process.argv.slice(2);
const baseURL = `http://127.0.0.1:${port}/v1`;
// No retries: a retried request would hide an error the server answered.
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const model = 'hearth';  // ignored by the server, required by the client's types
const messages = [{ role: 'user', content: 'Once upon a time' }];
const kMaxTokens = 16;

// What a client object tells of one error: its class, status and message.
async function errorOf(request) {
  try {
    await request();
    return null;
  } catch (e) {
    return { name: e.constructor.name, status: e.status ?? null, message: e.message };
  }
}

const models = await client.models.list();

const streamed = { text: '', chunks: 0, finish_reason: null, usage: null, ids: [], objects: [] };
const stream = await client.chat.completions.create({
  model, messages, max_tokens: kMaxTokens, temperature: 0, stream: true,
});
for await (const chunk of stream) {
  streamed.chunks += 1;
  if (!streamed.ids.includes(chunk.id)) streamed.ids.push(chunk.id);
  if (!streamed.objects.includes(chunk.object)) streamed.objects.push(chunk.object);
  const choice = chunk.choices[0];
  streamed.text += choice?.delta?.content ?? '';
  if (choice?.finish_reason) streamed.finish_reason = choice.finish_reason;
  if (chunk.usage) streamed.usage = chunk.usage;
}

const whole = await client.chat.completions.create({
  model, messages, max_tokens: kMaxTokens, temperature: 0,
});

const completion = await client.completions.create({
  model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0,
});
let completionStreamed = '';
for await (const chunk of await client.completions.create({
  model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, stream: true,
})) {
  completionStreamed += chunk.choices[0]?.text ?? '';
}

const wrongKey = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
const errors = {
  auth: await errorOf(() => wrongKey.models.list()),
  bad_request: await errorOf(() => client.chat.completions.create({ model, messages: [] })),
  // An error in a stream that has not started is answered before the first event.
  bad_stream: await errorOf(async () => {
    for await (const _ of await client.chat.completions.create({
      model, messages, max_tokens: 1 << 20, stream: true,
    })) { /* never reached */ }
  }),
};

console.log(JSON.stringify({
  max_tokens: kMaxTokens,
  models: models.data.map((m) => m.id),
  streamed,
  whole: {
    id: whole.id, object: whole.object, created: whole.created, model: whole.model,
    text: whole.choices[0].message.content, role: whole.choices[0].message.role,
    index: whole.choices[0].index, finish_reason: whole.choices[0].finish_reason,
    usage: whole.usage,
  },
  completion: {
    object: completion.object, text: completion.choices[0].text,
    finish_reason: completion.choices[0].finish_reason, streamed: completionStreamed,
  },
  errors,
}));
