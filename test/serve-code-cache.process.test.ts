import * as fs from "node:fs"
import * as path from "node:path"
import OpenAI from "openai"
import { describe, expect, it } from "vitest"
import { ADMIN_KEY, freePort, runCli, setupWithProvider, startServerProcess } from "./support/cli.js"
import { fakeOpenAIForFile } from "./support/fakeOpenAI.js"
import { tempDir } from "./support/gateway.js"

/**
 * `gateway` with no argument (how a service or a container starts it), or with only `--port`,
 * `--host`, `--data-dir` and `--no-open` (src/cli/serveArgs.ts), runs the server from
 * dist/bundle/serve.cjs, compiled from the V8 code cache the build made (scripts/bundle-cli.mjs);
 * every other command runs the chunks. The other process tests start the server with `--port 0`
 * (this path too); this one starts it alone by PORT, and with all four options.
 */
const fake = fakeOpenAIForFile()
const BUNDLE = path.resolve("dist/bundle")
const MODULE_TRACE = path.resolve("bench/lib/moduleTrace.mjs")
/** The files of dist/bundle/ a process loaded, in order, from its module trace (MODULE_TRACE_OUT). */
const bundleFilesLoaded = (trace: string) =>
  fs
    .readFileSync(trace, "utf8")
    .split("\n")
    .filter((u) => u.includes("/dist/bundle/"))
    .map((u) => path.basename(u))

describe("`gateway` alone: the server from its code cache", () => {
  it("the build wrote serve.cjs and its cache for this V8", () => {
    expect(fs.existsSync(path.join(BUNDLE, "serve.cjs"))).toBe(true)
    expect(fs.existsSync(path.join(BUNDLE, `serve.cjs.${process.versions.v8}.cache`))).toBe(true)
  })

  it("serves from serve.cjs (no chunk loaded): chat completions, a streamed one, a local token count, then stops cleanly", async () => {
    const dir = tempDir("gw-code-cache-")
    const dataDir = path.join(dir, "data")
    expect((await setupWithProvider(dataDir, fake.upstream.baseUrl)).code).toBe(0)
    const trace = path.join(dir, "modules.txt")
    const server = await startServerProcess({ DATA_DIR: dataDir, GATEWAY_ENV_FILE: path.join(dir, ".env"), MODULE_TRACE_OUT: trace }, [], {
      nodeArgs: ["--import", MODULE_TRACE],
      portByEnv: await freePort(),
      startMs: 60_000
    })
    let code: number | null = null
    try {
      const base = server.url
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
      code = await server.stop()
    }
    expect(code).toBe(0)
    expect(bundleFilesLoaded(trace)).toEqual(["gateway.mjs", "serve-args.mjs"])
  }, 120_000)

  it("`--port`, `--host`, `--data-dir` and `--no-open` serve from serve.cjs too, each option applied", async () => {
    const dir = tempDir("gw-code-cache-flags-")
    const dataDir = path.join(dir, "data")
    expect((await setupWithProvider(dataDir, fake.upstream.baseUrl)).code).toBe(0)
    const trace = path.join(dir, "modules.txt")
    const port = await freePort()
    // DATA_DIR names an empty directory and PORT another port: the options win, as the CLI's do.
    const server = await startServerProcess(
      {
        DATA_DIR: path.join(dir, "elsewhere"),
        PORT: String(await freePort()),
        GATEWAY_ENV_FILE: path.join(dir, ".env"),
        MODULE_TRACE_OUT: trace
      },
      ["--host", "::1", "--data-dir", dataDir, "--no-open"],
      { nodeArgs: ["--import", MODULE_TRACE], port, startMs: 60_000 }
    )
    let code: number | null = null
    try {
      // --host and --data-dir as the start says them (--no-open changes nothing: it is accepted, on this path too).
      expect(server.url).toBe(`http://[::1]:${port}`)
      expect(server.output()).toContain(`(data in ${dataDir})`)
      fake.upstream.next({ content: "answer from the upstream" })
      // The admin key is the one setup stored in --data-dir's database.
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: ADMIN_KEY, maxRetries: 0 })
      const completion = await client.chat.completions.create({
        model: "openai-compatible/m1",
        messages: [{ role: "user", content: "hi" }]
      })
      expect(completion.choices[0]?.message.content).toBe("answer from the upstream")
    } finally {
      code = await server.stop()
    }
    expect(code).toBe(0)
    expect(fs.existsSync(path.join(dir, "elsewhere"))).toBe(false)
    expect(bundleFilesLoaded(trace)).toEqual(["gateway.mjs", "serve-args.mjs"])
  }, 120_000)

  it("any other command line runs the chunks and is answered by the CLI as before", async () => {
    const dir = tempDir("gw-code-cache-cli-")
    const trace = path.join(dir, "modules.txt")
    const env = { DATA_DIR: path.join(dir, "data"), GATEWAY_ENV_FILE: path.join(dir, ".env"), MODULE_TRACE_OUT: trace }
    for (const [args, code, says] of [
      [["--port", "70000"], 2, "--port: must be an integer from 0 to 65535"],
      // The CLI reads `backup` as the command's name, whatever precedes it.
      [["--data-dir", "backup"], 2, "error:"],
      [["--version"], 0, ""]
    ] as const) {
      const r = await runCli(args, env, { nodeArgs: ["--import", MODULE_TRACE] })
      expect(r.code, args.join(" ")).toBe(code)
      expect(r.stderr, args.join(" ")).toContain(says)
      expect(bundleFilesLoaded(trace), args.join(" ")).toContain("cli.mjs")
    }
    expect(fs.existsSync(path.resolve("backup"))).toBe(false)
  })
})
