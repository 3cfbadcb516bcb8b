import * as fs from "node:fs"
import * as path from "node:path"
import OpenAI from "openai"
import { describe, expect, it } from "vitest"
import { ADMIN_KEY, freePort, runCli, setupWithProvider, startServerProcess } from "./support/cli.js"
import { fakeOpenAIForFile } from "./support/fakeOpenAI.js"
import { tempDir } from "./support/gateway.js"
import { until } from "./support/until.js"

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
const CODE_CACHE_PROBE = path.resolve("test/support/codeCacheProbe.mjs")
const OPTIMIZER_PROBE = path.resolve("test/support/optimizerProbe.mjs")
/** The files of dist/bundle/ a process loaded, in order, from its module trace (MODULE_TRACE_OUT). */
const bundleFilesLoaded = (trace: string) =>
  fs
    .readFileSync(trace, "utf8")
    .split("\n")
    .filter((u) => u.includes("/dist/bundle/"))
    .map((u) => path.basename(u))

/** One chat completion through the gateway at `url` with the admin key setup stored, answered by the fake upstream. */
const ask = async (url: string) => {
  fake.upstream.next({ content: "answer from the upstream" })
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: ADMIN_KEY, maxRetries: 0 })
  const completion = await client.chat.completions.create({
    model: "openai-compatible/m1",
    messages: [{ role: "user", content: "hi" }]
  })
  expect(completion.choices[0]?.message.content).toBe("answer from the upstream")
}

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
      // The admin key is the one setup stored in --data-dir's database.
      await ask(server.url)
    } finally {
      code = await server.stop()
    }
    expect(code).toBe(0)
    expect(fs.existsSync(path.join(dir, "elsewhere"))).toBe(false)
    expect(bundleFilesLoaded(trace)).toEqual(["gateway.mjs", "serve-args.mjs"])
  }, 120_000)

  it("holds V8's optimizing compiler off while the server starts and puts it back at its first answer, under the build's cache; not when the command line chose", async () => {
    const dir = tempDir("gw-code-cache-optimizer-")
    const dataDir = path.join(dir, "data")
    expect((await setupWithProvider(dataDir, fake.upstream.baseUrl)).code).toBe(0)
    const run = async (name: string, nodeArgs: ReadonlyArray<string>) => {
      const probe = path.join(dir, `${name}.optimizer`)
      const server = await startServerProcess(
        {
          DATA_DIR: dataDir,
          GATEWAY_ENV_FILE: path.join(dir, ".env"),
          OPTIMIZER_PROBE_OUT: probe,
          CODE_CACHE_PROBE_OUT: path.join(dir, `${name}.probe`)
        },
        [],
        { nodeArgs: [...nodeArgs, "--import", OPTIMIZER_PROBE, "--import", CODE_CACHE_PROBE], portByEnv: await freePort(), startMs: 60_000 }
      )
      const lines = () => (fs.existsSync(probe) ? fs.readFileSync(probe, "utf8").trim().split("\n").filter(Boolean) : [])
      try {
        await until("the probe at listen", () => lines().length === 1 || undefined, 40_000)
        await ask(server.url)
        await until("the probe after the first answer", () => lines().some((l) => l.includes('"answered"')) || undefined, 40_000)
      } finally {
        expect(await server.stop()).toBe(0)
      }
      const cache = fs
        .readFileSync(path.join(dir, `${name}.probe`), "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { rejected: boolean })
      return { optimizer: lines().map((l) => JSON.parse(l) as { when: string; turbofanned?: boolean }), cache }
    }
    // Held while it starts, back once it has answered; and V8 took the build's cache, made under the hold.
    const held = await run("held", [])
    // Released by the server at its first answer (not by the loader's 10 s timer, which the probe
    // does not record).
    expect(held.optimizer).toEqual([
      { when: "listening", turbofanned: false },
      { when: "released by the server" },
      { when: "answered", turbofanned: true }
    ])
    expect(held.cache).toMatchObject([{ rejected: false }])
    // The command line chose: no hold.
    const chosen = await run("chosen", ["--turbofan"])
    expect(chosen.optimizer).toEqual([
      { when: "listening", turbofanned: true },
      { when: "answered", turbofanned: true }
    ])
  }, 120_000)

  it("under a V8 flag the build's cache was not made with, the first start writes a cache for its flags and the next start runs from it", async () => {
    const dir = tempDir("gw-code-cache-v8-flag-")
    const dataDir = path.join(dir, "data")
    expect((await setupWithProvider(dataDir, fake.upstream.baseUrl)).code).toBe(0)
    // A flag value of this run alone: its tag, and so its cache file, are no other test's and no
    // earlier run's.
    const flag = `--max-old-space-size=${300 + Math.floor(Math.random() * 700)}`
    const start = async (name: string) =>
      startServerProcess(
        {
          DATA_DIR: dataDir,
          GATEWAY_ENV_FILE: path.join(dir, ".env"),
          MODULE_TRACE_OUT: path.join(dir, `${name}.modules`),
          CODE_CACHE_PROBE_OUT: path.join(dir, `${name}.probe`)
        },
        [],
        { nodeArgs: [flag, "--import", MODULE_TRACE, "--import", CODE_CACHE_PROBE], portByEnv: await freePort(), startMs: 60_000 }
      )
    const probed = (name: string) =>
      fs
        .readFileSync(path.join(dir, `${name}.probe`), "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { filename: string; rejected: boolean; tag: number })
    let file: string | undefined
    try {
      const first = await start("first")
      try {
        // The build's cache, made without the flag: V8 refused it.
        const [compiled] = probed("first")
        expect(compiled).toMatchObject({ filename: path.join(BUNDLE, "serve.cjs"), rejected: true })
        await ask(first.url)
        // Written a few seconds after start (scripts/bundle-cli.mjs, OWN_CACHE_AFTER_MS), named by
        // this V8, this build of serve.cjs and the tag of the process's flags.
        const name = await until(
          "the cache for the flag",
          () =>
            fs
              .readdirSync(BUNDLE)
              .find((f) => f.startsWith(`serve.cjs.${process.versions.v8}.`) && f.endsWith(`.flags-${compiled!.tag}.cache`)),
          30_000
        )
        file = path.join(BUNDLE, name)
      } finally {
        expect(await first.stop()).toBe(0)
      }
      expect(bundleFilesLoaded(path.join(dir, "first.modules"))).toEqual(["gateway.mjs", "serve-args.mjs"])

      // The next start with the same flag: V8 takes that cache.
      const second = await start("second")
      try {
        expect(probed("second")).toEqual([{ filename: path.join(BUNDLE, "serve.cjs"), rejected: false, tag: probed("first")[0]!.tag }])
        await ask(second.url)
      } finally {
        expect(await second.stop()).toBe(0)
      }
      expect(bundleFilesLoaded(path.join(dir, "second.modules"))).toEqual(["gateway.mjs", "serve-args.mjs"])

      // A damaged cache (V8 does not check a cache's bytes: one it took damaged would crash the
      // process) is not used: the start compiles from source and writes it again.
      const bytes = fs.readFileSync(file)
      bytes[bytes.length >> 1] = bytes[bytes.length >> 1]! ^ 0xff
      fs.writeFileSync(file, bytes)
      const damagedAt = fs.statSync(file).mtimeMs
      const third = await start("third")
      try {
        expect(probed("third")).toMatchObject([{ rejected: true }])
        await ask(third.url)
        await until("the cache written again", () => fs.statSync(file!).mtimeMs !== damagedAt, 30_000)
      } finally {
        expect(await third.stop()).toBe(0)
      }
    } finally {
      if (file !== undefined) fs.rmSync(file, { force: true })
    }
  }, 150_000)

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
