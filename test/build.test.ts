import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { tempDir } from "./support/gateway.js"

const root = path.resolve(import.meta.dirname, "..")
const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc")

describe("npm run build", () => {
  // The project's own tsconfig files over a one-file src/: what `rm -rf dist && npm run build` does.
  it("emits dist/ again after dist/ was removed (the incremental state lives with the output)", () => {
    const dir = tempDir("gw-build-")
    for (const f of ["tsconfig.json", "tsconfig.build.json"]) fs.copyFileSync(path.join(root, f), path.join(dir, f))
    fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ type: "module" }))
    fs.mkdirSync(path.join(dir, "src"))
    fs.writeFileSync(path.join(dir, "src", "main.ts"), "export const answer: number = 42\n")
    fs.mkdirSync(path.join(dir, "node_modules", "@types"), { recursive: true })
    fs.symlinkSync(path.join(root, "node_modules", "typescript"), path.join(dir, "node_modules", "typescript"))
    for (const m of ["@types/node", "undici-types"]) fs.symlinkSync(path.join(root, "node_modules", m), path.join(dir, "node_modules", m))
    const build = () => execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: dir, encoding: "utf8" })
    build()
    expect(fs.existsSync(path.join(dir, "dist", "main.js"))).toBe(true)
    fs.rmSync(path.join(dir, "dist"), { recursive: true })
    build()
    expect(fs.existsSync(path.join(dir, "dist", "main.js"))).toBe(true)
  })
})
