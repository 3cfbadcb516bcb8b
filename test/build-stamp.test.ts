import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
// @ts-expect-error: a plain ES module of the build scripts, without types.
import { INPUTS, OUTPUTS, staleness } from "../scripts/build-stamp.mjs"

/**
 * `npm start` builds only when dist/ is missing or older than what builds into it
 * (scripts/build-stamp.mjs): the rule on trees made here, and the real `npm start` of this clone
 * (built by `npm test` before the suite runs) starting without building.
 */
const ROOT = path.resolve(import.meta.dirname, "..")
const dirs: Array<string> = []
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true })
})

/** A tree with every output, built at `builtAt` from sources last changed at `srcAt` (ms). */
const tree = (builtAt: number, srcAt: number): string => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "gateway-stamp-"))
  dirs.push(root)
  for (const out of OUTPUTS as Array<string>) {
    fs.mkdirSync(path.dirname(path.join(root, out)), { recursive: true })
    fs.writeFileSync(path.join(root, out), "")
  }
  for (const file of ["src/a.ts", "web/src/page.tsx", "web/src/api/schema.d.ts", "scripts/x.mjs", "package.json"]) {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
    fs.writeFileSync(path.join(root, file), "")
    fs.utimesSync(path.join(root, file), srcAt / 1000, srcAt / 1000)
  }
  fs.writeFileSync(path.join(root, "dist/.build-stamp"), String(builtAt))
  return root
}

describe("whether dist/ must be built", () => {
  const t = Date.now() - 60_000
  it("not when every source is older than the last finished build", () => {
    expect(staleness(tree(t, t - 1000))).toBeUndefined()
  })
  it("when a source changed since, naming it", () => {
    const root = tree(t, t - 1000)
    fs.utimesSync(path.join(root, "src/a.ts"), (t + 1000) / 1000, (t + 1000) / 1000)
    expect(staleness(root)).toBe("src/a.ts changed since the last build")
    const other = tree(t, t - 1000)
    fs.utimesSync(path.join(other, "package.json"), (t + 1000) / 1000, (t + 1000) / 1000)
    expect(staleness(other)).toBe("package.json changed since the last build")
  })
  it("not for the API schema the build itself writes", () => {
    const root = tree(t, t - 1000)
    fs.utimesSync(path.join(root, "web/src/api/schema.d.ts"), (t + 1000) / 1000, (t + 1000) / 1000)
    expect(staleness(root)).toBeUndefined()
  })
  it("when an output is missing, or no build finished", () => {
    const root = tree(t, t - 1000)
    fs.rmSync(path.join(root, "dist/cli/main.js"))
    expect(staleness(root)).toBe("dist/cli/main.js is missing")
    const unfinished = tree(t, t - 1000)
    fs.rmSync(path.join(unfinished, "dist/.build-stamp"))
    expect(staleness(unfinished)).toContain("no finished build")
  })
  it("watches the sources the build reads", () => {
    expect(INPUTS).toEqual(
      expect.arrayContaining(["src", "web/src", "scripts", "tsconfig.json", "tsconfig.build.json", "package.json", "package-lock.json"])
    )
  })
})

describe("npm start on a built clone", () => {
  it("serves without building: dist/ is left as it is", async () => {
    const why = staleness(ROOT)
    expect(why, `this test runs after the build of \`npm test\`; dist/ is not current (${why}): run npm run build`).toBeUndefined()
    const bundle = path.join(ROOT, "dist/bundle/modules.json")
    const before = fs.statSync(bundle).mtimeMs
    const data = fs.mkdtempSync(path.join(os.tmpdir(), "gateway-start-"))
    dirs.push(data)
    const port = 20_000 + Math.floor(Math.random() * 20_000)
    const child = spawn("npm", ["start", "--", "--port", String(port), "--host", "127.0.0.1", "--no-open"], {
      cwd: ROOT,
      env: { ...process.env, DATA_DIR: data, GATEWAY_ENV_FILE: path.join(data, ".env"), LOG_LEVEL: "warning" },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true
    })
    let out = ""
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (out += d))
    try {
      let status = 0
      for (let i = 0; i < 300 && status !== 200; i++) {
        await new Promise((r) => setTimeout(r, 100))
        status = await fetch(`http://127.0.0.1:${port}/api/health/ping`).then(
          (r) => r.status,
          () => 0
        )
      }
      expect(status, out).toBe(200)
      expect(out).toContain("dist/ is up to date: not building")
      expect(out).not.toContain("tsc -p")
      expect(fs.statSync(bundle).mtimeMs).toBe(before)
    } finally {
      try {
        process.kill(-child.pid!, "SIGTERM")
      } catch {}
      await new Promise((r) => child.once("exit", r))
    }
  }, 60_000)
})
