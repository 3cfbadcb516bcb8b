// Starting the processes under test: the mock upstream (which is also the "direct" target), the
// floor proxy, the gateway (production build, fresh DATA_DIR, configured by its CLI before it
// starts) and the peer (Portkey's open-source gateway). Each is its own process on 127.0.0.1.
import { mkdtempSync, readFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { freePort, registerTempDir, spawnChild, waitForLine } from "./proc.mjs"
import { request, waitFor200 } from "./load.mjs"

export const ADMIN_KEY = "sk-bench-admin-0123456789abcdef"
export const UPSTREAM_KEY = "sk-bench"

const MESSAGES = [
  { role: "system", content: "You are a concise assistant. Answer in plain prose." },
  { role: "user", content: "Summarise in one paragraph why a gateway should add as little latency as possible." }
]

/** The chat completion request body every target gets (model id in that target's naming). */
export const chatBody = (model, extra = {}) => JSON.stringify({ model, messages: MESSAGES, max_tokens: 512, ...extra })
export const streamBody = (model) => chatBody(model, { stream: true, stream_options: { include_usage: true } })

const baseEnv = (extra) => ({
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  HOME: process.env.HOME ?? os.tmpdir(),
  NO_COLOR: "1",
  ...extra
})

const onlyLoopback = (url) => {
  const h = new URL(url).hostname
  if (h !== "127.0.0.1" && h !== "[::1]" && h !== "::1") throw new Error(`refusing a non-loopback address: ${url}`)
  return url
}

/** Shape of a target: how to reach it and what to send. */
const target = (name, fields) => ({
  name,
  ok: false,
  error: null,
  pid: null,
  proc: null,
  baseUrl: null,
  chatUrl: null,
  startupMs: null,
  model: (m) => m,
  headers: { "content-type": "application/json", authorization: `Bearer ${UPSTREAM_KEY}` },
  notes: [],
  ...fields
})

/** An error message plus the last lines the process printed (the reason, usually). */
const withOutput = (msg, proc) => {
  if (!proc) return msg
  const info = proc.exitInfo()
  const lines = proc
    .output()
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-20)
  const err = lines.find((l) => /error/i.test(l))
  const tail = [...(err ? [err] : []), ...lines.slice(-2).filter((l) => l !== err)].join(" | ")
  return `${msg}${info ? ` (exit ${info.code ?? info.signal})` : ""}${tail ? `: ${tail.slice(-600)}` : ""}`
}

const startupProbe = (t) => ({ headers: t.headers, body: chatBody(t.model("json-1k")) })

/**
 * The mock upstream on core `core`; also the "direct" target (its process is the mock). `probe`:
 * { nodeArgs, env } for a preload in the mock (stream-gaps.mjs's loop-bins.cjs).
 */
export const startMock = async ({ benchDir, core, pin, probe }) => {
  const t = target("direct")
  const proc = spawnChild({
    name: "mock",
    cmd: process.execPath,
    args: [...(probe?.nodeArgs ?? []), path.join(benchDir, "mock-upstream.mjs")],
    env: baseEnv({ ...probe?.env }),
    core,
    pin
  })
  t.proc = proc
  t.pid = proc.pid
  try {
    const m = await waitForLine(proc, /listening (\d+)/)
    t.baseUrl = onlyLoopback(`http://127.0.0.1:${m[1]}`)
    t.chatUrl = `${t.baseUrl}/v1/chat/completions`
    t.startupMs = await waitFor200(t.chatUrl, startupProbe(t), { since: proc.spawnedAt, alive: proc.alive })
  } catch (e) {
    // Not left running: a mock started again for the start-time row fails without stopping the run.
    await proc.stop()
    throw e
  }
  t.ok = true
  return t
}

/**
 * `probe`: { nodeArgs, env } that preload ../alloc-probe.cjs (lib/allocProbe.mjs, probeLaunch)
 * into the floor, the gateway or the peer.
 */
export const startFloor = async ({ benchDir, core, pin, mock, probe }) => {
  const t = target("floor")
  try {
    const proc = spawnChild({
      name: "floor",
      cmd: process.execPath,
      args: [...(probe?.nodeArgs ?? []), path.join(benchDir, "floor-proxy.mjs"), "--upstream", mock.baseUrl],
      env: baseEnv({ ...probe?.env }),
      core,
      pin
    })
    t.proc = proc
    t.pid = proc.pid
    const m = await waitForLine(proc, /listening (\d+)/)
    t.baseUrl = onlyLoopback(`http://127.0.0.1:${m[1]}`)
    t.chatUrl = `${t.baseUrl}/v1/chat/completions`
    t.startupMs = await waitFor200(t.chatUrl, startupProbe(t), { since: proc.spawnedAt, alive: proc.alive })
    t.ok = true
  } catch (e) {
    t.error = withOutput(e.message, t.proc)
  }
  return t
}

/**
 * Prepares a gateway: a fresh DATA_DIR configured with `gateway setup --non-interactive`
 * (openai-compatible connection to the mock, default model json-1k, admin key from
 * GATEWAY_API_KEY) and an inference key from `gateway keys add` that the load generator sends.
 * The CLI runs on `core` (the load core: the targets' core stays quiet).
 */
export const prepareGateway = async ({ rootDir, mock, core, pin, env: extraEnv = {} }) => {
  // BENCH_TMP_DIR: set by run.mjs, which removes it even if this process is killed.
  const dataDir = mkdtempSync(path.join(process.env.BENCH_TMP_DIR || os.tmpdir(), "gateway-bench-"))
  registerTempDir(dataDir)
  // The live feed's own port on a free one (default 20129): each gateway the bench runs at once (the
  // measured one, another build in the peer's slot, the start-time row's further starts, the workers'
  // rows) binds its own, rather than all but the first warning that it is taken.
  const env = baseEnv({ DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN_KEY, LOG_LEVEL: "warning", GATEWAY_LIVE_WS_PORT: "0", ...extraEnv })
  const cli = async (args) => {
    const proc = spawnChild({
      name: `gateway ${args[0]}`,
      cmd: process.execPath,
      args: [path.join(rootDir, "bin/gateway"), ...args],
      env,
      core,
      pin
    })
    const info = await proc.exited
    if (info.code !== 0)
      throw new Error(`gateway ${args.slice(0, 2).join(" ")} failed (${info.code ?? info.signal}):\n${proc.output().slice(-2000)}`)
    return proc.stdout()
  }
  await cli([
    "setup",
    "--non-interactive",
    "--add-provider",
    "--provider",
    "openai-compatible",
    "--provider-base-url",
    `${mock.baseUrl}/v1`,
    "--api-key",
    UPSTREAM_KEY,
    "--default-model",
    "json-1k"
  ])
  const secret = JSON.parse(await cli(["keys", "add", "--name", "bench", "--scope", "inference", "--json"])).secret
  if (!secret) throw new Error("gateway keys add printed no secret")
  return { dataDir, env, secret }
}

/**
 * Starts `node [extraNodeArgs] bin/gateway` on a prepared DATA_DIR with LOG_LEVEL=warning on a
 * free port of 127.0.0.1, and waits for its first 200.
 */
export const launchGateway = async (prep, { rootDir, core, pin, extraNodeArgs = [], gatewayArgs = [], name = "gateway", probe }) => {
  const t = target(name)
  try {
    if (prep instanceof Error) throw prep
    t.dataDir = prep.dataDir
    const port = await freePort()
    t.baseUrl = onlyLoopback(`http://127.0.0.1:${port}`)
    t.chatUrl = `${t.baseUrl}/v1/chat/completions`
    t.model = (m) => `openai-compatible/${m}`
    t.headers = { "content-type": "application/json", authorization: `Bearer ${prep.secret}` }
    t.adminHeaders = { "content-type": "application/json", authorization: `Bearer ${ADMIN_KEY}` }
    // A gateway under any name (the profiled one, another build in the peer's place) takes the gateway's requests.
    t.gateway = true
    const proc = spawnChild({
      name,
      cmd: process.execPath,
      args: [...(probe?.nodeArgs ?? []), ...extraNodeArgs, path.join(rootDir, "bin/gateway"), ...gatewayArgs],
      env: { ...prep.env, ...probe?.env, PORT: String(port), HOST: "127.0.0.1" },
      cwd: rootDir,
      core,
      pin
    })
    t.proc = proc
    t.pid = proc.pid
    t.startupMs = await waitFor200(t.chatUrl, startupProbe(t), { since: proc.spawnedAt, alive: proc.alive })
    t.ok = true
  } catch (e) {
    t.error = withOutput(e.message, t.proc)
  }
  return t
}

/** prepareGateway then launchGateway (the setup on `prepCore`, by default the gateway's own core). */
export const startGateway = async ({ rootDir, core, prepCore, pin, mock, extraNodeArgs, name, env, probe }) => {
  const prep = await prepareGateway({ rootDir, mock, core: prepCore ?? core, pin, env }).catch((e) => e)
  return launchGateway(prep, { rootDir, core, pin, extraNodeArgs, name, probe })
}

/** Portkey's entry point: the `bin` of @portkey-ai/gateway's package.json. */
export const peerEntry = (benchDir) => {
  const dir = path.join(benchDir, "node_modules/@portkey-ai/gateway")
  const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"))
  const bin = typeof pkg.bin === "string" ? pkg.bin : Object.values(pkg.bin ?? {})[0]
  if (!bin) throw new Error("@portkey-ai/gateway declares no bin")
  return { file: path.join(dir, bin), version: pkg.version }
}

/**
 * The peer: Portkey's gateway (`build/start-server.js --port=<p> --headless`), forced onto
 * 127.0.0.1 by the loopback-only preload. It routes by headers: provider openai, custom host =
 * the mock's /v1, the upstream key as Bearer.
 */
export const startPeer = async ({ benchDir, core, pin, mock, probe }) => {
  const t = target("peer")
  try {
    const entry = peerEntry(benchDir)
    t.version = entry.version
    t.entry = path.relative(benchDir, entry.file)
    const port = await freePort()
    t.baseUrl = onlyLoopback(`http://127.0.0.1:${port}`)
    t.chatUrl = `${t.baseUrl}/v1/chat/completions`
    t.headers = {
      "content-type": "application/json",
      authorization: `Bearer ${UPSTREAM_KEY}`,
      "x-portkey-provider": "openai",
      "x-portkey-custom-host": `${mock.baseUrl}/v1`
    }
    const proc = spawnChild({
      name: "peer",
      cmd: process.execPath,
      args: [...(probe?.nodeArgs ?? []), "--import", path.join(benchDir, "loopback-only.mjs"), entry.file, `--port=${port}`, "--headless"],
      env: baseEnv({ BENCH_LISTEN_HOST: "127.0.0.1", ...probe?.env }),
      cwd: benchDir,
      core,
      pin
    })
    t.proc = proc
    t.pid = proc.pid
    t.startupMs = await waitFor200(t.chatUrl, startupProbe(t), { since: proc.spawnedAt, alive: proc.alive })
    t.ok = true
  } catch (e) {
    t.error = withOutput(e.message, t.proc)
  }
  return t
}

/** How far apart the mock sends a paced stream's chunks (PACE_MS in mock-upstream.mjs). */
const MOCK_PACE_MS = 20

/**
 * Checks that a target returns the mock's answers: JSON 1 KB and 10 KB bodies (the mock's id,
 * content and usage), and paced and burst streams with all 64 content chunks and [DONE].
 */
export const verifyTarget = async (t, { sseOnce, streamComplete, chunks }) => {
  const out = {}
  // The paced stream (1.3 s of mostly waiting) runs while the other checks do.
  const pacedCheck = sseOnce(t.chatUrl, { headers: t.headers, body: streamBody(t.model("sse-paced")) })
  const j1 = await request(t.chatUrl, { headers: t.headers, body: chatBody(t.model("json-1k")) })
  const j10 = await request(t.chatUrl, { headers: t.headers, body: chatBody(t.model("json-10k")) })
  const parse = (r) => {
    try {
      return JSON.parse(r.body)
    } catch {
      return null
    }
  }
  const p1 = parse(j1)
  const p10 = parse(j10)
  out.json1k = { status: j1.status, bytes: j1.body?.length ?? 0, id: p1?.id ?? null, usage: p1?.usage ?? null }
  out.json10k = { status: j10.status, bytes: j10.body?.length ?? 0 }
  const burst = await sseOnce(t.chatUrl, { headers: t.headers, body: streamBody(t.model("sse-burst")) })
  const paced = await pacedCheck
  out.ssePaced = {
    status: paced.status,
    chunks: paced.chunks,
    done: paced.done,
    usage: paced.usage,
    ms: Math.round(paced.ms),
    maxGapMs: paced.maxGap
  }
  out.sseBurst = { status: burst.status, chunks: burst.chunks, done: burst.done, usage: burst.usage }
  const problems = []
  if (j1.status !== 200 || p1?.id !== "chatcmpl-bench0000000000000000000000" || !p1?.usage?.total_tokens)
    problems.push(`JSON 1 KB: ${j1.status} ${String(j1.body ?? j1.error?.message).slice(0, 200)}`)
  if (j10.status !== 200 || (j10.body?.length ?? 0) < 9000) problems.push(`JSON 10 KB: ${j10.status}, ${j10.body?.length ?? 0} bytes`)
  if (!streamComplete(paced, chunks))
    problems.push(`paced SSE: status ${paced.status}, ${paced.chunks} chunks, done ${paced.done} ${paced.error ?? ""}`)
  if (!streamComplete(burst, chunks))
    problems.push(`burst SSE: status ${burst.status}, ${burst.chunks} chunks, done ${burst.done} ${burst.error ?? ""}`)
  // A paced stream must arrive paced, not buffered to its end: its 64 chunks, sent 20 ms apart, span
  // ~1.26 s from the first to the last. A late first chunk alone is no sign of buffering (a target's
  // first stream on a busy machine: the peer's read 579 ms once and it was left out of a whole run).
  const span = (paced.gaps ?? []).reduce((a, b) => a + b, 0)
  if (streamComplete(paced, chunks) && span < ((chunks - 1) * MOCK_PACE_MS) / 2)
    problems.push(
      `paced SSE: ${paced.chunks} chunks within ${Math.round(span)} ms, first after ${Math.round(paced.ttft ?? 0)} ms (buffered?)`
    )
  out.problems = problems
  return out
}

/**
 * The translated stream pairs coding agents use most: a client in one wire format, the upstream
 * in another. The gateway gets the client's request; direct and floor get the upstream's own
 * request for the same 64-chunk burst (what the upstream sends either way), so the floor is the
 * least a proxy pays for those bytes. `count` reads one whole answer: its content deltas.
 */
export const TRANSLATED = [
  { label: "messages_chat", name: "messages client → chat upstream" },
  { label: "responses_messages", name: "responses client → messages upstream" },
  { label: "chat_generate", name: "chat client → generate-content upstream" }
]
const PROMPT = "Write a short poem about benchmarks."
const count = (re) => (body) => (String(body).match(re) ?? []).length
/** `{url, headers, body, count}` of one burst stream of `pair` against target `t`. */
export const translatedRequest = (t, pair) => {
  const gateway = t.gateway === true
  switch (pair) {
    case "messages_chat":
      return gateway
        ? {
            url: `${t.baseUrl}/v1/messages`,
            headers: {
              "content-type": "application/json",
              "x-api-key": t.headers.authorization.slice(7),
              "anthropic-version": "2023-06-01"
            },
            body: JSON.stringify({
              model: t.model("sse-burst"),
              max_tokens: 512,
              messages: [{ role: "user", content: PROMPT }],
              stream: true
            }),
            count: count(/"type":"content_block_delta"/g)
          }
        : { url: t.chatUrl, headers: t.headers, body: streamBody("sse-burst"), count: count(/"content":"[^"]/g) }
    case "responses_messages":
      return gateway
        ? {
            url: `${t.baseUrl}/v1/responses`,
            headers: t.headers,
            body: JSON.stringify({ model: "mock-anthropic/sse-burst", input: PROMPT, max_output_tokens: 512, stream: true }),
            count: count(/"type":"response\.output_text\.delta"/g)
          }
        : {
            url: `${t.baseUrl}/v1/messages`,
            headers: { "content-type": "application/json", "x-api-key": UPSTREAM_KEY, "anthropic-version": "2023-06-01" },
            body: JSON.stringify({ model: "sse-burst", max_tokens: 512, messages: [{ role: "user", content: PROMPT }], stream: true }),
            count: count(/"type":"content_block_delta"/g)
          }
    case "chat_generate":
      return gateway
        ? { url: t.chatUrl, headers: t.headers, body: streamBody("mock-gemini/sse-burst"), count: count(/"content":"[^"]/g) }
        : {
            url: `${t.baseUrl}/v1beta/models/sse-burst:streamGenerateContent?alt=sse`,
            headers: { "content-type": "application/json", "x-goog-api-key": UPSTREAM_KEY },
            body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: PROMPT }] }], generationConfig: { maxOutputTokens: 512 } }),
            count: count(/"text":"[^"]/g)
          }
    default:
      throw new Error(`unknown translated pair ${pair}`)
  }
}

/** Adds the Anthropic and Gemini connections to the mock the translated rows route to. */
export const addTranslationProviders = async (t, mock) => {
  for (const [provider, name] of [
    ["anthropic", "mock-anthropic"],
    ["gemini", "mock-gemini"]
  ]) {
    const r = await request(`${t.baseUrl}/api/providers`, {
      headers: t.adminHeaders,
      body: JSON.stringify({
        provider,
        name,
        baseUrl: mock.baseUrl,
        apiKey: UPSTREAM_KEY,
        defaultModel: "sse-burst",
        models: ["sse-burst"]
      })
    })
    if (r.status >= 300) throw new Error(`POST /api/providers (${provider}): ${r.status} ${r.body}`)
  }
}
