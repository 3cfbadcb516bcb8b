import * as Either from "effect/Either"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { decodeManifest, hookSetting, integrityOf, validateConfig } from "../src/services/plugins/manifest.js"
import { spawnPluginProcess } from "../src/services/plugins/sandbox/process.js"

/** `plugin.json` as the spec has it (src/services/plugins/manifest.ts): decoded, refused with a line per problem, its configuration
 * checked. */

const full = {
  name: "rate-guard",
  version: "1.2.0",
  description: "Blocks by a rule",
  author: "someone",
  main: "main.mjs",
  hooks: { onRequest: true, onResponse: { enabled: false }, onError: { priority: 5 } },
  requires: { permissions: ["network", "env"] },
  enabledByDefault: true,
  failClosed: false,
  configSchema: {
    limit: { type: "number", default: 10, min: 1, max: 100, description: "requests per minute" },
    mode: { type: "select", enum: ["block", "log"], default: "block" },
    label: { type: "string" },
    loud: { type: "boolean", default: false }
  }
}

const problems = (json: unknown) => Either.match(decodeManifest(json), { onLeft: (l) => l, onRight: () => "decoded" })

describe("plugin.json", () => {
  it("decodes every field of the spec", () => {
    const m = Either.getOrThrow(decodeManifest(full))
    expect(m).toEqual(full)
    expect(hookSetting(m, "onRequest")).toEqual({ enabled: true, priority: 100 })
    expect(hookSetting(m, "onResponse", 7)).toEqual({ enabled: false, priority: 7 })
    expect(hookSetting(m, "onError")).toEqual({ enabled: true, priority: 5 })
    expect(hookSetting(m, "onStreamEnd", 20)).toEqual({ enabled: true, priority: 20 })
    expect(Either.isRight(decodeManifest({ name: "tiny", version: "0.1.0", main: "index.mjs" }))).toBe(true)
  })

  it.each([
    [{ ...full, name: "Rate Guard" }, "name: must be kebab-case"],
    [{ ...full, version: "one" }, "version: must be a version like 1.2.3"],
    [{ ...full, main: "../outside.mjs" }, "main: must be a file inside the plugin's folder"],
    [{ ...full, main: "/etc/passwd" }, "main: must be a file inside the plugin's folder"],
    [{ ...full, hooks: { onFrame: true } }, "hooks.onFrame"],
    [{ ...full, requires: { permissions: ["root"] } }, "requires.permissions.0"],
    [{ ...full, colour: "red" }, "colour: is unexpected"],
    [{ ...full, configSchema: { m: { type: "select" } } }, "a select field needs enum"],
    [{ ...full, configSchema: { m: { type: "string", min: 1 } } }, "min and max are for number fields"],
    [{ ...full, configSchema: { m: { type: "number", default: 500, max: 100 } } }, "default must be at most 100"],
    [{ ...full, integrity: "md5-abc" }, "integrity: must be sha256-"]
  ])("refuses %j naming the problem", (json, expected) => {
    expect(problems(json)).toContain(expected)
  })

  it("says every problem at once, not the first only", () => {
    const text = problems({ name: "X", version: "x", main: "m.mjs", extra: 1 })
    expect(text).toContain("name:")
    expect(text).toContain("version:")
    expect(text).toContain("extra:")
  })
})

describe("the configuration its configSchema describes", () => {
  const schema = Either.getOrThrow(decodeManifest(full)).configSchema

  it("fills the defaults and keeps what is given", () => {
    expect(validateConfig(schema, {})).toEqual(Either.right({ limit: 10, mode: "block", loud: false }))
    expect(validateConfig(schema, { limit: 50, mode: "log", label: "team-a" })).toEqual(
      Either.right({ limit: 50, mode: "log", label: "team-a", loud: false })
    )
  })

  it("refuses a value out of range, of the wrong type, not in the enum, or a setting it does not have", () => {
    const left = Either.getLeft(validateConfig(schema, { limit: 0, mode: "shout", loud: "yes", nope: 1 }))
    expect(left._tag).toBe("Some")
    const text = left._tag === "Some" ? left.value : ""
    expect(text).toContain("nope: is not a setting of this plugin")
    expect(text).toContain("limit: must be at least 1, got 0")
    expect(text).toContain('mode: must be one of "block", "log", got "shout"')
    expect(text).toContain('loud: must be true or false, got "yes"')
  })
})

describe("the integrity of the entry file", () => {
  it("a matching hash loads; a changed file is refused before any process starts", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gw-integrity-"))
    try {
      const source = `import { definePlugin } from "gateway/plugin-sdk"\nexport default definePlugin({ name: "signed", onRequest: () => "ok" })`
      fs.writeFileSync(path.join(dir, "main.mjs"), source)
      const integrity = integrityOf(Buffer.from(source))
      expect(Either.isRight(decodeManifest({ name: "signed", version: "1.0.0", main: "main.mjs", integrity }))).toBe(true)
      const p = await spawnPluginProcess({ dir, main: "main.mjs", permissions: [], dataDir: path.join(dir, ".data"), integrity })
      expect(await p.call("onRequest", {}, 1000)).toBe("ok")
      await p.kill()
      fs.appendFileSync(path.join(dir, "main.mjs"), "\n// changed")
      await expect(
        spawnPluginProcess({ dir, main: "main.mjs", permissions: [], dataDir: path.join(dir, ".data"), integrity })
      ).rejects.toThrow(/does not match the manifest's integrity/)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
