import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { HELPER, HELPER_SOURCE, rewriteChunk, rewriteSpreads } from "../scripts/spread-rewrite.mjs"

/** Evaluates an expression over `base` (and `calls`, a counter getters bump), as written and as rewritten. */
const both = (expr: string, base: () => unknown) => {
  const run = (code: string) =>
    new Function("base", "calls", `${HELPER_SOURCE}\nreturn (${code})`)(base(), { n: 0 }) as Record<PropertyKey, unknown>
  const rewritten = rewriteSpreads(`(${expr})`)
  return { original: run(expr), rewritten: run(rewritten.code), count: rewritten.count }
}

/** Own keys in order, their descriptors' values and enumerability, and the prototype. */
const shape = (o: Record<PropertyKey, unknown>) => ({
  proto: Object.getPrototypeOf(o),
  keys: Reflect.ownKeys(o).map((k) => {
    const d = Object.getOwnPropertyDescriptor(o, k)!
    return [typeof k === "symbol" ? k.toString() : k, d.value, d.enumerable, d.writable]
  })
})

const SYM = Symbol("s")
class Point {
  x = 1
  y = 2
  norm() {
    return this.x + this.y
  }
}
const BASES: Record<string, () => unknown> = {
  plain: () => ({ a: 1, b: 2 }),
  null: () => null,
  undefined: () => undefined,
  string: () => "ab",
  array: () => [7, 8],
  symbolKey: () => ({ [SYM]: 1, a: 1 }),
  nonEnumerable: () => Object.defineProperty({ a: 1 }, "hidden", { value: 2, enumerable: false }),
  classInstance: () => new Point(),
  // JSON.parse makes an own "__proto__" key; Object.assign would set the result's prototype from it.
  ownProto: () => JSON.parse('{"__proto__": {"polluted": true}, "a": 2}'),
  overlapping: () => ({ k: "base", z: 0 })
}

describe("spread rewrite (scripts/spread-rewrite.mjs, run on the bundle by npm run build)", () => {
  it("rewrites a literal that spreads and then adds properties into the helper", () => {
    const r = rewriteSpreads("const o = { ...a, b: 1, c }")
    expect(r.count).toBe(1)
    expect(r.code).toBe(`const o = ${HELPER}(a, { b: 1, c })`)
  })

  it("leaves alone what it cannot or need not rewrite", () => {
    for (const code of [
      "const o = { ...a }",
      "const o = { a, ...b }",
      "const { a, ...rest } = o",
      "({ a, ...rest } = o)",
      "const o = { ...a, get x() { return 1 } }",
      "const o = { ...a, set x(v) {} }",
      "const o = { ...a, __proto__: p }",
      'const o = { ...a, "__proto__": p }',
      "const o = { ...a, m() { return super.m() } }",
      "const s = `{ ...a, b }`",
      "// { ...a, b }"
    ]) {
      expect(rewriteSpreads(code), code).toEqual({ code, count: 0 })
    }
  })

  it("rewrites nested literals and later spreads, inside and outside", () => {
    const r = rewriteSpreads("f({ ...a, b: { ...c, d }, ...e }, { ...{ ...g, h: 1 }, i: 2 })")
    expect(r.count).toBe(4)
    expect(r.code).toBe(`f(${HELPER}(a, { b: ${HELPER}(c, { d }), ...e }), ${HELPER}(${HELPER}(g, { h: 1 }), { i: 2 }))`)
  })

  it("keeps methods (with their `this`) and a trailing comma's absence", () => {
    const r = rewriteSpreads("const o = {\n  ...proto,\n  x: 1,\n  commit() {\n    return this.x;\n  },\n};")
    expect(r.count).toBe(1)
    const o = new Function(`${HELPER_SOURCE}\nconst proto = { y: 2 };\n${r.code}\nreturn o`)() as {
      x: number
      y: number
      commit: () => number
    }
    expect([o.x, o.y, o.commit()]).toEqual([1, 2, 1])
  })

  for (const [name, base] of Object.entries(BASES)) {
    it(`builds the same object as the literal: ${name} base`, () => {
      for (const expr of ["{ ...base, k: 1 }", "{ ...base, k: 1, [Symbol.for('t')]: 2, ...{ z: 3 } }", "{ ...base, ...{ k: 'extra' } }"]) {
        const { original, rewritten, count } = both(expr, base)
        expect(count, expr).toBeGreaterThan(0)
        expect(shape(rewritten), `${name}: ${expr}`).toEqual(shape(original))
      }
    })
  }

  it("reads a getter of the base once, as the literal does", () => {
    let reads = 0
    const base = () => ({
      get a() {
        reads++
        return reads
      }
    })
    const { original, rewritten } = both("{ ...base, b: 1 }", base)
    expect(original["a"]).toBe(1)
    expect(rewritten["a"]).toBe(2)
    expect(reads).toBe(2)
  })

  it("declares the helper once, after the chunk's first line, only where it is used", () => {
    const chunk = 'import { createRequire } from "node:module";\nconst a = { ...x, y: 1 };\nconst b = { ...x, z: 2 };\n'
    const r = rewriteChunk(chunk)
    expect(r.count).toBe(2)
    expect(r.code.split("\n")[1]).toBe(HELPER_SOURCE)
    expect(r.code.split(HELPER_SOURCE).length).toBe(2)
    expect(rewriteChunk("const a = { ...x };\n")).toEqual({ code: "const a = { ...x };\n", count: 0 })
  })

  it("the built bundle has Effect's Deferred built by the helper", () => {
    const dir = path.resolve("dist/bundle")
    const chunks = fs.readdirSync(dir).filter((f) => f.endsWith(".mjs"))
    const withDeferred = chunks.map((f) => fs.readFileSync(path.join(dir, f), "utf8")).find((c) => c.includes("var deferredUnsafeMake = "))
    expect(withDeferred).toBeDefined()
    const body = withDeferred!.slice(
      withDeferred!.indexOf("var deferredUnsafeMake = "),
      withDeferred!.indexOf("var deferredUnsafeMake = ") + 300
    )
    expect(body).toContain(`${HELPER}(CommitPrototype, {`)
    expect(withDeferred).toContain(HELPER_SOURCE)
  })
})
