#!/usr/bin/env node
// The compatibility matrix's cases (docs/compat.md), from the recorded traffic of real clients in
// test/fixtures/clients: for each supported client and capability, the exact request it sent
// (path, query, the headers that shape an answer, the body), with the check its answer must pass.
// Capabilities the recordings do not show (structured output, reasoning, images) are derived
// from an SDK's recorded request with the field its documentation adds, and say so in `source`.
//
//   node scripts/compat-cases.mjs           writes src/services/compat/cases.generated.ts
//   node scripts/compat-cases.mjs --check   exits 1 when that file is not what the fixtures give
import { readFileSync, writeFileSync } from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const fixtures = path.join(root, "test/fixtures/clients")
const out = path.join(root, "src/services/compat/cases.generated.ts")

/** Headers that say who the client is or change what the upstream does; credentials and transport never. */
const KEEP = /^(user-agent|anthropic-version|anthropic-beta|openai-beta|x-stainless-[a-z-]+|x-goog-api-client|x-app)$/

const headersOf = (h) => Object.fromEntries(Object.entries(h ?? {}).filter(([k]) => KEEP.test(k.toLowerCase())))

const sdk = (name) => JSON.parse(readFileSync(path.join(fixtures, "sdk", `${name}.json`), "utf8")).requests[0]
const cliLines = (name) =>
  readFileSync(path.join(fixtures, "cli", name), "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l))

const streamOf = (r) =>
  r.path.includes(":streamGenerateContent") || (r.path === "/api/chat" ? r.body?.stream !== false : r.body?.stream === true)

const make = (id, client, capability, check, source, r, body = r.body) => ({
  id,
  client,
  capability,
  check,
  source,
  path: r.path,
  query: new URLSearchParams(r.query ?? {}).toString(),
  headers: headersOf(r.headers),
  body,
  stream: streamOf({ ...r, body })
})

/** A CLI recording's request at 1-based line `n`. */
const cliCase = (id, client, file, n) => {
  const r = cliLines(file)[n - 1]
  if (!r || r.method !== "POST") throw new Error(`${file} line ${n} is not a POST`)
  return make(id, client, "tool-round-trip", "answer", `cli/${file}#${n}`, r)
}

const SCHEMA = {
  type: "object",
  properties: { city: { type: "string" }, population: { type: "integer" }, landmarks: { type: "array", items: { type: "string" } } },
  required: ["city", "population", "landmarks"],
  additionalProperties: false
}
const ASK_JSON = "Describe Paris as JSON: its name, its population and three landmarks."
// A 1x1 PNG, red.
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
const ASK_IMAGE = "What colour is this image? One word."

const cases = []
const add = (c) => cases.push(c)

// The official SDKs: text, streaming, a tool call (the recorded prompt asks for one).
const openaiChat = sdk("openai_chat")
add(make("openai-sdk.chat.text", "OpenAI SDK (chat)", "text", "answer", "sdk/openai_chat.json", openaiChat))
add(make("openai-sdk.chat.streaming", "OpenAI SDK (chat)", "streaming", "answer", "sdk/openai_chat_stream.json", sdk("openai_chat_stream")))
add(make("openai-sdk.chat.tools", "OpenAI SDK (chat)", "tools", "tool_call", "sdk/openai_chat_tools.json", sdk("openai_chat_tools")))
add(
  make(
    "openai-sdk.chat.structured",
    "OpenAI SDK (chat)",
    "structured-output",
    "schema",
    "sdk/openai_chat.json + response_format json_schema",
    openaiChat,
    {
      ...openaiChat.body,
      messages: [{ role: "user", content: ASK_JSON }],
      response_format: { type: "json_schema", json_schema: { name: "city", strict: true, schema: SCHEMA } }
    }
  )
)
add(
  make("openai-sdk.chat.reasoning", "OpenAI SDK (chat)", "reasoning", "answer", "sdk/openai_chat.json + reasoning_effort", openaiChat, {
    ...openaiChat.body,
    messages: [{ role: "user", content: "Is 1001 prime? Answer yes or no." }],
    reasoning_effort: "low"
  })
)
add(
  make("openai-sdk.chat.images", "OpenAI SDK (chat)", "images", "text", "sdk/openai_chat.json + an image_url part", openaiChat, {
    ...openaiChat.body,
    messages: [
      {
        role: "user",
        content: [
          { type: "text", text: ASK_IMAGE },
          { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } }
        ]
      }
    ]
  })
)
add(make("openai-sdk.responses.text", "OpenAI SDK (responses)", "text", "answer", "sdk/openai_responses.json", sdk("openai_responses")))
add(
  make(
    "openai-sdk.responses.streaming",
    "OpenAI SDK (responses)",
    "streaming",
    "answer",
    "sdk/openai_responses_stream.json",
    sdk("openai_responses_stream")
  )
)
add(
  make(
    "openai-sdk.responses.tools",
    "OpenAI SDK (responses)",
    "tools",
    "tool_call",
    "sdk/openai_responses_tools.json",
    sdk("openai_responses_tools")
  )
)

const anthropic = sdk("anthropic_messages")
add(make("anthropic-sdk.text", "Anthropic SDK", "text", "answer", "sdk/anthropic_messages.json", anthropic))
add(
  make(
    "anthropic-sdk.streaming",
    "Anthropic SDK",
    "streaming",
    "answer",
    "sdk/anthropic_messages_stream_raw.json",
    sdk("anthropic_messages_stream_raw")
  )
)
add(make("anthropic-sdk.tools", "Anthropic SDK", "tools", "tool_call", "sdk/anthropic_tools.json", sdk("anthropic_tools")))
add(
  make(
    "anthropic-sdk.structured",
    "Anthropic SDK",
    "structured-output",
    "schema",
    "sdk/anthropic_messages.json + output_config.format",
    anthropic,
    {
      ...anthropic.body,
      max_tokens: 512,
      messages: [{ role: "user", content: ASK_JSON }],
      output_config: { format: { type: "json_schema", schema: SCHEMA } }
    }
  )
)
add(
  make("anthropic-sdk.reasoning", "Anthropic SDK", "reasoning", "answer", "sdk/anthropic_messages.json + thinking", anthropic, {
    ...anthropic.body,
    max_tokens: 2048,
    thinking: { type: "enabled", budget_tokens: 1024 },
    messages: [{ role: "user", content: "Is 1001 prime? Answer yes or no." }]
  })
)
add(
  make("anthropic-sdk.images", "Anthropic SDK", "images", "text", "sdk/anthropic_messages.json + an image block", anthropic, {
    ...anthropic.body,
    messages: [
      {
        role: "user",
        content: [
          { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } },
          { type: "text", text: ASK_IMAGE }
        ]
      }
    ]
  })
)

const genai = sdk("genai_generate")
add(make("google-genai.text", "Google GenAI SDK", "text", "answer", "sdk/genai_generate.json", genai))
add(
  make("google-genai.streaming", "Google GenAI SDK", "streaming", "answer", "sdk/genai_generate_stream.json", sdk("genai_generate_stream"))
)
add(make("google-genai.tools", "Google GenAI SDK", "tools", "tool_call", "sdk/genai_tools.json", sdk("genai_tools")))
add(
  make(
    "google-genai.structured",
    "Google GenAI SDK",
    "structured-output",
    "schema",
    "sdk/genai_generate.json + responseJsonSchema",
    genai,
    {
      ...genai.body,
      contents: [{ role: "user", parts: [{ text: ASK_JSON }] }],
      generationConfig: { ...(genai.body.generationConfig ?? {}), responseMimeType: "application/json", responseJsonSchema: SCHEMA }
    }
  )
)
add(
  make("google-genai.images", "Google GenAI SDK", "images", "text", "sdk/genai_generate.json + inlineData", genai, {
    ...genai.body,
    contents: [{ role: "user", parts: [{ inlineData: { mimeType: "image/png", data: PNG } }, { text: ASK_IMAGE }] }]
  })
)

add(make("ollama.text", "Ollama SDK", "text", "answer", "sdk/ollama_chat.json", sdk("ollama_chat")))
add(make("ollama.streaming", "Ollama SDK", "streaming", "answer", "sdk/ollama_chat_stream.json", sdk("ollama_chat_stream")))
add(make("ollama.tools", "Ollama SDK", "tools", "tool_call", "sdk/ollama_chat_tools.json", sdk("ollama_chat_tools")))

// The coding agents: the request after a tool ran (their system prompt, tool definitions and
// the tool's result), streamed as they stream.
add(cliCase("claude-code.tool-round-trip", "Claude Code", "claude-p-toolcall-bearer.requests.jsonl", 2))
add(cliCase("codex.tool-round-trip", "Codex", "codex-exec-custom-provider-toolcall.requests.jsonl", 2))
add(cliCase("gemini-cli.tool-round-trip", "Gemini CLI", "gemini-p-toolcall.requests.jsonl", 3))
add(cliCase("opencode.tool-round-trip", "opencode", "opencode-run-openai-compatible-toolcall.requests.jsonl", 3))
add(cliCase("qwen-code.tool-round-trip", "Qwen Code", "qwen-p-toolcall-yolo.requests.jsonl", 2))
add(cliCase("kilo.tool-round-trip", "Kilo", "kilo-run-openai-compatible-toolcall.requests.jsonl", 2))

const text = `// Generated by scripts/compat-cases.mjs from test/fixtures/clients: do not edit.
// The compatibility matrix's cases (docs/compat.md), loaded on first use.
export const CASES_JSON = ${JSON.stringify(JSON.stringify(cases))}
`

if (process.argv.includes("--check")) {
  let now = ""
  try {
    now = readFileSync(out, "utf8")
  } catch {}
  if (now !== text) {
    console.error(`${path.relative(root, out)} is not what test/fixtures/clients gives: run node scripts/compat-cases.mjs`)
    process.exit(1)
  }
  console.log(`${cases.length} cases, up to date`)
} else {
  writeFileSync(out, text)
  console.log(`${cases.length} cases written to ${path.relative(root, out)} (${Math.round(text.length / 1024)} KiB)`)
}
