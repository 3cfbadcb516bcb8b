import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Effect from "effect/Effect"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { ADMIN_KEY, BIN, cleanEnv, runCli, type CliResult } from "./support/cli.js"
import { call, startGateway, tempDir } from "./support/gateway.js"
import { VERSION } from "../src/kernel/version.js"

/**
 * The command line as scripts see it: every command of the spec's table, its `--json`, the exit
 * codes (0 done, 1 failed, 2 bad command line) and the one-line usage errors, options decoded
 * by the API's schemas, the root `--json`, colours only on a terminal, and light commands that
 * load no server. All through the built bin/gateway, spawned.
 */

/** Spec document 2, "Command-line tool": the table's commands (setup-<tool> for each tool of issue 22). */
const SPEC_COMMANDS = [
  "setup",
  "doctor",
  "providers available",
  "providers list",
  "providers test",
  "providers test-all",
  "providers validate",
  "reset-password",
  "reset-encrypted-columns",
  "status",
  "logs",
  "config show",
  "provider list",
  "provider add",
  "keys add",
  "keys list",
  "keys remove",
  "models",
  "combo list",
  "combo switch",
  "combo create",
  "combo delete",
  "backup",
  "restore",
  "health",
  "quota",
  "cache",
  "cache clear",
  "mcp status",
  "mcp restart",
  "a2a status",
  "a2a card",
  "tunnel list",
  "tunnel create",
  "tunnel stop",
  "env show",
  "env get",
  "env set",
  "test",
  "update",
  "completion",
  "setup-codex",
  "setup-claude",
  "setup-gemini",
  "setup-opencode",
  "setup-qwen",
  "setup-kilo",
  "launch",
  "launch-codex"
]

/** Built by the MCP, skills and tools work of the same issue; until it lands they are unknown commands. */
const ELSEWHERE = new Set([
  "mcp status",
  "mcp restart",
  "a2a status",
  "a2a card",
  "setup-codex",
  "setup-claude",
  "setup-gemini",
  "setup-opencode",
  "setup-qwen",
  "setup-kilo",
  "launch",
  "launch-codex"
])

/** Commands whose output is data: each takes --json. */
const DATA_COMMANDS = [
  "setup",
  "doctor",
  "providers available",
  "providers list",
  "providers test",
  "providers test-all",
  "providers validate",
  "reset-encrypted-columns",
  "status",
  "logs",
  "config show",
  "provider list",
  "provider add",
  "keys add",
  "keys list",
  "keys remove",
  "models",
  "combo list",
  "combo switch",
  "combo create",
  "combo delete",
  "backup",
  "restore",
  "health",
  "quota",
  "cache",
  "cache clear",
  "tunnel list",
  "tunnel create",
  "tunnel stop",
  "env show",
  "test",
  "update"
]

/** Runs `f` over `items`, at most `n` at a time (spawned processes on a shared 2-core machine). */
const pool = async <A, B>(items: ReadonlyArray<A>, n: number, f: (a: A) => Promise<B>): Promise<Array<B>> => {
  const out: Array<B> = new Array(items.length)
  let next = 0
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) {
        const i = next++
        out[i] = await f(items[i]!)
      }
    })
  )
  return out
}

/** Exactly one line on stderr, `error: <subject>: <problem>`. */
const usageLine = (r: CliResult): string => {
  const lines = r.stderr.trim().split("\n")
  expect(lines, r.stderr).toHaveLength(1)
  expect(lines[0]).toMatch(/^error: \S[^:]*: \S/)
  return lines[0]!
}

describe("the spec's command table", () => {
  it("every command answers --help with exit 0 (those built elsewhere in issue 22 are unknown commands until they land)", async () => {
    const results = await pool(SPEC_COMMANDS, 3, async (c) => ({ c, r: await runCli([...c.split(" "), "--help"]) }))
    const missing: Array<string> = []
    for (const { c, r } of results) {
      if (ELSEWHERE.has(c) && r.code === 2) {
        expect(usageLine(r), c).toContain("unknown command")
        continue
      }
      if (r.code !== 0) missing.push(`${c}: exit ${r.code} ${r.stderr}`)
      else expect(r.stdout, c).toContain("USAGE")
    }
    expect(missing).toEqual([])
    const json = await pool(DATA_COMMANDS, 3, async (c) => ({ c, r: await runCli([...c.split(" "), "--help"]) }))
    for (const { c, r } of json) expect(r.stdout, `${c} --json`).toMatch(/--json/)
  }, 240_000)

  it("--help, -h, --version and -v work on every level", async () => {
    for (const args of [["keys", "add", "--help"], ["keys", "add", "-h"], ["tunnel", "-h"], ["--help"]]) {
      const r = await runCli(args)
      expect(r.code, args.join(" ")).toBe(0)
      expect(r.stdout).toContain("USAGE")
    }
    for (const args of [["--version"], ["-v"], ["keys", "list", "-v"], ["update", "--version"]]) {
      const r = await runCli(args)
      expect(r.code, args.join(" ")).toBe(0)
      expect(r.stdout.trim()).toBe(VERSION)
    }
  }, 120_000)
})

describe("exit codes and usage errors", () => {
  it("2 with one `error: <option>: <problem>` line for a bad command line, before anything runs", async () => {
    const dataDir = tempDir()
    const env = { DATA_DIR: dataDir }
    const cases: Array<[ReadonlyArray<string>, string]> = [
      [["keys", "add", "--scope", "root"], "error: --scope: scope must be one of: inference, admin"],
      [["keys", "add", "--rpm", "abc"], "error: --rpm: "],
      [["keys", "limits", "k", "--tpm", "-5"], "error: --tpm: "],
      [["keys", "frob"], "error: keys: unknown command 'frob'"],
      [["frob"], "error: gateway: unknown command 'frob'"],
      [["keys", "list", "--bogus"], "error: --bogus: unknown option"],
      [["restore"], "error: <id|file>: is missing"],
      [["combo", "create", "team", "--target", "a/b"], "error: --strategy: is missing"],
      [["combo", "create", "no/slash", "--strategy", "priority"], "error: <name>: name may hold letters"],
      [["combo", "create", "x", "--strategy", "priority", "--config", "{not json"], "error: --config: "],
      [["--port", "70000", "status"], "error: --port: must be an integer from 0 to 65535"],
      [["env", "set", "1BAD", "x"], "error: <name>: not a variable name"],
      [["tunnel", "create", "ssh"], "error: <kind>: "],
      [["completion", "powershell"], "error: <shell>: "],
      [["test", "--timeout", "0"], "error: --timeout: must be a whole number of seconds"]
    ]
    for (const [args, prefix] of cases) {
      const r = await runCli(args, env)
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(2)
      expect(usageLine(r).startsWith(prefix), `${usageLine(r)} should start with ${prefix}`).toBe(true)
      expect(r.stdout).toBe("")
    }
    // Nothing ran: no database was created by any of them.
    expect(fs.existsSync(path.join(dataDir, "gateway.db"))).toBe(false)
  }, 120_000)

  it("1 with `error: <message>` when a valid command fails; 0 when it succeeds", async () => {
    const env = { DATA_DIR: tempDir() }
    const missing = await runCli(["keys", "remove", "nobody"], env)
    expect(missing.code).toBe(1)
    expect(missing.stderr.trim()).toMatch(/^error: .*no API key/)
    const down = await runCli(["--port", "1", "status"], env)
    expect(down.code).toBe(1)
    const unset = await runCli(["env", "get", "NOPE"], { ...env, GATEWAY_ENV_FILE: path.join(env.DATA_DIR, "x.env") })
    expect(unset.code).toBe(1)
    expect((await runCli(["keys", "list"], env)).code).toBe(0)
  }, 120_000)

  it("an option's value is refused with the same words as the management API refuses it", async () => {
    const gw = await startGateway()
    try {
      await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN_KEY })))
      const cases = [
        ["--expires-at", "never", { expiresAt: "never" }],
        ["--rpm", "0", { rpm: 0 }],
        ["--name", " ", { name: " " }],
        ["--scope", "root", { scopes: ["root"] }]
      ] as const
      for (const [flag, value, payload] of cases) {
        const cli = await runCli(["keys", "add", flag, value], { DATA_DIR: tempDir() })
        expect(cli.code).toBe(2)
        const problem = usageLine(cli).slice(`error: ${flag}: `.length)
        const api = await call(`${gw.url}/api/keys`, { body: payload, headers: { authorization: `Bearer ${ADMIN_KEY}` } })
        expect(api.status).toBe(400)
        expect(api.body.message, flag).toContain(problem)
      }
    } finally {
      await gw.close()
    }
  }, 120_000)
})

describe("the root --json", () => {
  it("`gateway --json <command>` prints what `gateway <command> --json` prints", async () => {
    const env = { DATA_DIR: tempDir(), GATEWAY_ENV_FILE: path.join(tempDir(), "x.env") }
    expect((await runCli(["keys", "add", "--name", "one"], env)).code).toBe(0)
    for (const args of [
      ["keys", "list"],
      ["env", "show"],
      ["providers", "available", "--category", "local"]
    ]) {
      const root = await runCli(["--json", ...args], env)
      const sub = await runCli([...args, "--json"], env)
      expect(root.code).toBe(0)
      expect(JSON.parse(root.stdout)).toEqual(JSON.parse(sub.stdout))
    }
    const down = await runCli(["--json", "--port", "1", "status"], env)
    expect(down.code).toBe(1)
    expect(JSON.parse(down.stdout)).toMatchObject({ running: false })
  }, 120_000)
})

/** Runs the CLI on a pseudo-terminal (python3's pty module: python3 is a build requirement of better-sqlite3). */
const onTerminal = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    const child = spawn("python3", ["-c", "import pty,sys; sys.exit(pty.spawn(sys.argv[1:]) >> 8)", process.execPath, BIN, ...args], {
      env: cleanEnv(env),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (c: Buffer) => (output += c.toString()))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, output }))
  })

const ESC = "\x1b["

describe("colours", () => {
  it("only on a terminal, and never with NO_COLOR or --json", async () => {
    const tty = await onTerminal(["keys", "add", "--scope", "root"], { NO_COLOR: "" })
    expect(tty.code).toBe(2)
    expect(tty.output).toContain(`${ESC}31merror:`)
    const help = await onTerminal(["keys", "--help"], { NO_COLOR: "" })
    expect(help.output).toContain(ESC)
    for (const [args, env] of [
      [["keys", "--help"], { NO_COLOR: "1" }],
      [["keys", "add", "--scope", "root"], { NO_COLOR: "1" }],
      [["keys", "add", "--scope", "root", "--json"], { NO_COLOR: "" }]
    ] as const) {
      const r = await onTerminal(args, env)
      expect(r.output, `${args.join(" ")} ${JSON.stringify(env)}`).not.toContain(ESC)
    }
    const piped = await runCli(["keys", "--help"], { NO_COLOR: "" })
    expect(piped.stdout).toContain("USAGE")
    expect(piped.stdout + piped.stderr).not.toContain(ESC)
  }, 120_000)
})

/**
 * The modules behind what a command loaded: bin/gateway runs the bundle (dist/bundle/), whose
 * files each hold many modules; dist/bundle/modules.json (written by scripts/bundle-cli.mjs)
 * says which. Files outside the bundle stand for themselves.
 */
const expand = (files: ReadonlyArray<string>): Array<string> => {
  const bundleDir = path.resolve("dist/bundle")
  const index = JSON.parse(fs.readFileSync(path.join(bundleDir, "modules.json"), "utf8")) as Record<string, Array<string>>
  return files.flatMap((url) => {
    const file = url.startsWith("file:") ? fileURLToPath(url) : url
    const inBundle = path.dirname(file) === bundleDir ? index[path.basename(file)] : undefined
    return inBundle ? inBundle.map((m) => `/${m}`) : [url]
  })
}

describe("start-up", () => {
  it("commands that need no server load neither the server, the database nor an HTTP client", async () => {
    const trace = path.join(tempDir(), "modules.txt")
    const env = { DATA_DIR: tempDir(), GATEWAY_ENV_FILE: path.join(tempDir(), "x.env"), MODULE_TRACE_OUT: trace }
    const traced = (args: ReadonlyArray<string>) => runCli(args, env, { nodeArgs: ["--import", path.resolve("bench/lib/moduleTrace.mjs")] })
    const heavy =
      /\/dist\/(server\/|platform\/store\/|management\/api\/|inference\/|upstream\/client\/|upstream\/providers\/Connections|services\/context\/(?!types\.js))|node_modules\/(undici|better-sqlite3|@effect\/sql|ws)\//
    for (const args of [
      ["--version"],
      ["--help"],
      ["keys", "list", "--help"],
      ["env", "show"],
      ["tunnel", "create", "--help"],
      ["compression", "preview", "--help"],
      ["context", "skills", "add", "--help"]
    ]) {
      const r = await traced(args)
      expect(r.code, args.join(" ")).toBe(0)
      const loaded = expand(
        fs
          .readFileSync(trace, "utf8")
          .split("\n")
          .filter((l) => l !== "")
      )
      expect(loaded.length, args.join(" ")).toBeGreaterThan(100)
      expect(
        loaded.filter((u) => heavy.test(u)),
        args.join(" ")
      ).toEqual([])
      // Help and version load no command's implementation at all.
      if (args.some((a) => a.startsWith("--")))
        expect(
          loaded.filter((u) => u.endsWith(".impl.js")),
          args.join(" ")
        ).toEqual([])
    }
    // The trace sees the heavy modules when a command does need them.
    expect((await traced(["keys", "list"])).code).toBe(0)
    expect(
      expand(
        fs
          .readFileSync(trace, "utf8")
          .split("\n")
          .filter((l) => l !== "")
      ).join("\n")
    ).toMatch(/\/dist\/platform\/store\//)
  }, 120_000)
})
