import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as TOML from "smol-toml"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { runCli } from "./support/cli.js"
import { fakeToolDir, pathWith } from "./support/fakeTools.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * `gateway setup-<tool>`, `launch <tool>` and `launch-codex`, spawned as processes with a
 * temporary HOME against a running gateway (needs `npm run build`).
 */
const ADMIN = "gwk_clitools_cli_admin_0123456789ab"
const KEY = "gwk_clitools_cli_client_0123456789ab"

let gw: TestGateway
let up: FakeUpstream

const read = (file: string) => fs.readFileSync(file, "utf8")
const json = (file: string) => JSON.parse(read(file))
const filesUnder = (dir: string): Array<string> =>
  fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name))

const setup = (tool: string, home: string, extra: ReadonlyArray<string> = [], env: Record<string, string> = {}) =>
  runCli([`setup-${tool}`, "--remote", gw.url, "--api-key", KEY, ...extra], { HOME: home, ...env })

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "tools" }, { secret: KEY })))
  for (const name of ["up", "other"]) {
    const res = await call(`${gw.url}/api/providers`, {
      body: { provider: "openai-compatible", name, baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(res.status).toBe(201)
  }
})

afterAll(async () => {
  await gw?.close()
  await up?.close()
})

/** What each tool's files must say after setup with model `up/m1`. */
const expectations: Record<string, (home: string) => void> = {
  codex: (home) => {
    const t = TOML.parse(read(path.join(home, ".codex", "config.toml"))) as any
    expect(t).toMatchObject({ model: "up/m1", model_provider: "gateway" })
    expect(t.model_providers.gateway).toMatchObject({ base_url: `${gw.url}/v1`, env_key: "GATEWAY_CODEX_API_KEY", wire_api: "responses" })
  },
  claude: (home) =>
    expect(json(path.join(home, ".claude", "settings.json"))).toEqual({
      env: { ANTHROPIC_BASE_URL: gw.url, ANTHROPIC_AUTH_TOKEN: KEY },
      model: "up/m1"
    }),
  gemini: (home) => {
    expect(json(path.join(home, ".gemini", "settings.json"))).toEqual({
      security: { auth: { selectedType: "gemini-api-key" } },
      model: { name: "up/m1" }
    })
    expect(read(path.join(home, ".gemini", ".env"))).toBe(`GEMINI_API_KEY=${KEY}\nGOOGLE_GEMINI_BASE_URL=${gw.url}\n`)
  },
  opencode: (home) => {
    const c = json(path.join(home, ".config", "opencode", "opencode.json"))
    expect(c).toMatchObject({ model: "gateway/up/m1", small_model: "gateway/up/m1" })
    expect(c.provider.gateway).toMatchObject({ npm: "@ai-sdk/openai-compatible", options: { baseURL: `${gw.url}/v1`, apiKey: KEY } })
    // The live catalog's chat models: the connections' and the virtual auto ids.
    expect(Object.keys(c.provider.gateway.models)).toEqual(expect.arrayContaining(["up/m1", "other/m1", "auto/coding"]))
  },
  qwen: (home) =>
    expect(json(path.join(home, ".qwen", "settings.json"))).toEqual({
      security: { auth: { selectedType: "openai", apiKey: KEY, baseUrl: `${gw.url}/v1` } },
      model: { name: "up/m1" }
    }),
  kilo: (home) => {
    const c = json(path.join(home, ".config", "kilo", "kilo.json"))
    expect(c).toMatchObject({ $schema: "https://app.kilo.ai/config.json", model: "gateway/up/m1" })
    expect(c.provider.gateway.options).toEqual({ baseURL: `${gw.url}/v1`, apiKey: KEY })
  }
}

// Each test spawns several CLI processes (a few seconds each on a busy 2-core machine).
describe("gateway setup-<tool>", { timeout: 120_000 }, () => {
  for (const tool of Object.keys(expectations)) {
    it(`${tool}: --dry-run prints the files and where they go and writes nothing; --yes writes them`, async () => {
      const home = tempDir(`gw-setup-${tool}-`)
      const dry = await setup(tool, home, ["--dry-run", "--model", "up/m1"])
      expect(dry.stderr).toBe("")
      expect(dry.code).toBe(0)
      expect(dry.stdout).toMatch(new RegExp(`^# ${home}/\\S+ \\(new file\\)`, "m"))
      expect(dry.stdout).toContain(gw.url)
      expect(dry.stdout).not.toContain(KEY)
      expect(filesUnder(home)).toEqual([])

      const real = await setup(tool, home, ["--yes", "--model", "up/m1", "--json"])
      expect(real.stderr).toBe("")
      expect(real.code).toBe(0)
      const out = JSON.parse(real.stdout)
      expect(out).toMatchObject({ tool, baseUrl: gw.url, model: "up/m1", dryRun: false })
      expect(out.written.every((w: any) => w.backup === null && fs.existsSync(w.path))).toBe(true)
      expect(real.stdout).not.toContain(KEY)
      expectations[tool]!(home)

      // Again: nothing changes, nothing is backed up.
      const again = await setup(tool, home, ["--yes", "--model", "up/m1"])
      expect(again.stdout).toContain("nothing changed")
      expect(filesUnder(home).filter((f) => f.includes(".bak-"))).toEqual([])
    })
  }

  it("merges into an existing file, keeps the user's settings and a backup, and defaults to the catalog's first chat model", async () => {
    const home = tempDir("gw-setup-merge-")
    const file = path.join(home, ".config", "opencode", "opencode.json")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    const original = JSON.stringify({
      theme: "tokyonight",
      provider: { mine: { npm: "x", options: { baseURL: "http://192.0.2.1/v1" } } },
      model: "mine/big"
    })
    fs.writeFileSync(file, original)
    const r = await setup("opencode", home, ["--yes"])
    expect(r.code).toBe(0)
    const backup = /previous version: (\S+)\)/.exec(r.stdout)?.[1]
    expect(backup && read(backup)).toBe(original)
    const c = json(file)
    expect(c.theme).toBe("tokyonight")
    expect(c.provider.mine.options.baseURL).toBe("http://192.0.2.1/v1")
    expect(c.model).toBe(`gateway/${Object.keys(c.provider.gateway.models)[0]}`)
  })

  it("--offline also switches off the tool's calls home and says which environment to set", async () => {
    const home = tempDir("gw-setup-offline-")
    const r = await setup("codex", home, ["--yes", "--offline", "--model", "up/m1"])
    expect(r.code).toBe(0)
    expect(TOML.parse(read(path.join(home, ".codex", "config.toml")))).toMatchObject({
      check_for_update_on_startup: false,
      analytics: { enabled: false },
      features: { plugins: false }
    })
    expect(r.stdout).toContain("export GATEWAY_CODEX_API_KEY=gwk_clit…")
  })

  it("says what is wrong: no key, a model the gateway does not serve, no terminal to ask on, no gateway", async () => {
    const home = tempDir("gw-setup-errors-")
    const noKey = await runCli(["setup-claude", "--remote", gw.url, "--yes"], { HOME: home })
    expect(noKey.code).toBe(1)
    expect(noKey.stderr).toContain("gateway keys add")
    const badModel = await setup("claude", home, ["--yes", "--model", "nope/x"])
    expect(badModel.code).toBe(1)
    expect(badModel.stderr).toContain("model 'nope/x' is not in the gateway's catalog")
    const refused = await runCli(["setup-claude", "--remote", gw.url, "--api-key", "gwk_wrong_key_0123456789abcdef", "--yes"], {
      HOME: home
    })
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain("refused the key (401)")
    const noTty = await setup("claude", home)
    expect(noTty.code).toBe(2)
    expect(noTty.stderr).toContain("pass --yes")
    const down = await runCli(["setup-claude", "--port", "1", "--api-key", KEY, "--yes"], { HOME: home })
    expect(down.code).toBe(1)
    expect(down.stderr).toContain("no gateway answers at http://127.0.0.1:1")
    expect(filesUnder(home)).toEqual([])
  })

  it("--port points at the gateway on this machine", async () => {
    const home = tempDir("gw-setup-port-")
    const port = new URL(gw.url).port
    const r = await runCli(["setup-qwen", "--port", port, "--api-key", KEY, "--yes", "--model", "up/m1"], { HOME: home })
    expect(r.code).toBe(0)
    expect(json(path.join(home, ".qwen", "settings.json")).security.auth.baseUrl).toBe(`http://127.0.0.1:${port}/v1`)
  })

  it("guide tools print their steps with CLI_COMPAT_ALL for partial ones, and are refused without it", async () => {
    const home = tempDir("gw-setup-guide-")
    const off = await setup("cursor", home, ["--model", "up/m1"])
    expect(off.code).toBe(1)
    expect(off.stderr).toContain("CLI_COMPAT_ALL")
    const on = await setup("cursor", home, ["--model", "up/m1"], { CLI_COMPAT_ALL: "true" })
    expect(on.code).toBe(0)
    expect(on.stdout).toContain(`'Override OpenAI Base URL' = ${gw.url}/v1`)
    expect(on.stdout).not.toContain(KEY)
    const cline = await setup("cline", home, ["--model", "up/m1"])
    expect(cline.stdout).toContain("Model ID: up/m1")
    expect(filesUnder(home)).toEqual([])
  })
})

describe("gateway launch", { timeout: 120_000 }, () => {
  const bin = fakeToolDir(() => ({
    codex: 'echo "key=$GATEWAY_CODEX_API_KEY"\nfor a in "$@"; do echo "arg=$a"; done\nexit 7',
    claude: 'echo "token=$ANTHROPIC_AUTH_TOKEN base=$ANTHROPIC_BASE_URL model=$ANTHROPIC_MODEL"\necho "settings=$2"\ncat "$2"'
  }))

  it("spawns the tool with the gateway's environment and arguments before the user's, writes nothing, and exits with its code", async () => {
    const home = tempDir("gw-launch-")
    for (const args of [["launch", "codex"], ["launch-codex"]]) {
      const r = await runCli(
        [...args, "--remote", gw.url, "--api-key", KEY, "--model", "up/m1", "--", "exec", "--skip-git-repo-check", "say hi"],
        {
          HOME: home,
          PATH: pathWith(bin)
        }
      )
      expect(r.code).toBe(7)
      const lines = r.stdout.trim().split("\n")
      expect(lines[0]).toBe(`key=${KEY}`)
      expect(lines).toContain(`arg=model_providers.gateway.base_url="${gw.url}/v1"`)
      expect(lines).toContain('arg=model="up/m1"')
      expect(lines.slice(-3)).toEqual(["arg=exec", "arg=--skip-git-repo-check", "arg=say hi"])
    }
    expect(filesUnder(home)).toEqual([])
  })

  it("passes Claude Code a temporary settings file that outranks the user's, removed afterwards", async () => {
    const r = await runCli(["launch", "claude", "--remote", gw.url, "--api-key", KEY, "--model", "up/m1", "--", "-p", "hi"], {
      HOME: tempDir(),
      PATH: pathWith(bin)
    })
    expect(r.code).toBe(0)
    expect(r.stdout).toContain(`token=${KEY} base=${gw.url} model=up/m1`)
    const settings = /settings=(\S+)/.exec(r.stdout)?.[1]
    expect(r.stdout).toContain('"ANTHROPIC_BASE_URL"')
    expect(fs.existsSync(settings!)).toBe(false)
  })

  it("exits 127 when the tool is not installed", async () => {
    const r = await runCli(["launch", "opencode", "--remote", gw.url, "--api-key", KEY], { HOME: tempDir(), PATH: pathWith(bin) })
    expect(r.code).toBe(127)
    expect(r.stderr).toContain("'opencode' was not found on the PATH")
  })
})
