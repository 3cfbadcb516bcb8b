import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import OpenAI from "openai"
import { describe, expect, it } from "vitest"
import { ADMIN_KEY, BIN, cleanEnv, runCli, setupWithProvider } from "./support/cli.js"
import { fakeOpenAIForFile } from "./support/fakeOpenAI.js"
import { tempDir } from "./support/gateway.js"

/**
 * `gateway` with no argument (how a service or a container starts it) runs the server from
 * dist/bundle/serve.cjs, compiled from the V8 code cache the build made (scripts/bundle-cli.mjs);
 * every other command, and `gateway --port N`, runs the chunks. The other process tests start the
 * server with `--port 0`, so this one covers that path: the built gateway, started alone.
 */
const fake = fakeOpenAIForFile()
const BUNDLE = path.resolve("dist/bundle")
const MODULE_TRACE = path.resolve("bench/lib/moduleTrace.mjs")

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = net.createServer().once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
  })

describe("`gateway` alone: the server from its code cache", () => {
  it("the build wrote serve.cjs and its cache for this V8", () => {
    expect(fs.existsSync(path.join(BUNDLE, "serve.cjs"))).toBe(true)
    expect(fs.existsSync(path.join(BUNDLE, `serve.cjs.${process.versions.v8}.cache`))).toBe(true)
  })

  it("serves from serve.cjs (no chunk loaded): chat completions, a streamed one, a local token count, then stops cleanly", async () => {
    const dir = tempDir("gw-code-cache-")
    const dataDir = path.join(dir, "data")
    expect((await setupWithProvider(dataDir, fake.upstream.baseUrl)).code).toBe(0)
    const port = await freePort()
    const trace = path.join(dir, "modules.txt")
    const child = spawn(process.execPath, ["--import", MODULE_TRACE, BIN], {
      env: cleanEnv({
        DATA_DIR: dataDir,
        PORT: String(port),
        HOST: "127.0.0.1",
        GATEWAY_ENV_FILE: path.join(dir, ".env"),
        LOG_FORMAT: "json",
        MODULE_TRACE_OUT: trace
      }),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    child.stdout.on("data", (c: Buffer) => (out += c.toString()))
    child.stderr.on("data", (c: Buffer) => (out += c.toString()))
    const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)))
    try {
      const deadline = Date.now() + 60_000
      while (!out.includes("listening on")) {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the gateway did not listen:\n${out}`)
        await new Promise((r) => setTimeout(r, 50))
      }
      const base = `http://127.0.0.1:${port}`
      expect((await fetch(`${base}/api/health/ping`)).status).toBe(200)

      fake.upstream.next({ content: "answer from the upstream" }, { content: "streamed answer", chunks: 3 })
      const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: ADMIN_KEY, maxRetries: 0 })
      const completion = await client.chat.completions.create({
        model: "openai-compatible/m1",
        messages: [{ role: "user", content: "hi" }]
      })
      expect(completion.choices[0]?.message.content).toBe("answer from the upstream")
      const stream = await client.chat.completions.create({
        model: "openai-compatible/m1",
        messages: [{ role: "user", content: "hi" }],
        stream: true
      })
      let text = ""
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
      expect(text).toBe("streamed answer")

      // No Anthropic upstream: the gateway counts with its tokenizer, a package serve.cjs loads
      // from node_modules on first use.
      const counted = await fetch(`${base}/v1/messages/count_tokens`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": ADMIN_KEY },
        body: JSON.stringify({ model: "openai-compatible/m1", messages: [{ role: "user", content: "hello there, how are you?" }] })
      })
      expect(counted.status).toBe(200)
      expect(((await counted.json()) as { input_tokens: number }).input_tokens).toBeGreaterThan(0)
    } finally {
      child.kill("SIGTERM")
    }
    expect(await exited).toBe(0)
    const loaded = fs
      .readFileSync(trace, "utf8")
      .split("\n")
      .filter((u) => u.includes("/dist/bundle/"))
      .map((u) => path.basename(u))
    expect(loaded).toEqual(["gateway.mjs"])
  }, 120_000)

  it("any argument runs the chunks, as before", async () => {
    const r = await runCli(["--version"])
    expect(r.code).toBe(0)
    expect(r.stdout.trim()).not.toBe("")
  })
})
