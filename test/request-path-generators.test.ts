/**
 * No generator function is made per request on the inference request path (src/inference,
 * src/http). V8 gives a generator function made per call (`(ctx) => Effect.gen(function* () {…})`)
 * its own map, in the old generation, on its first call; that map keeps the function, what it
 * closes over and its generator alive through every young GC until the next full one, so each
 * scavenge copied the requests of the last ~100 ms: ~1.5 MB and ~5 ms instead of ~100 KB and
 * under 1 ms (docs/performance.md, "Generator functions on the request path"). The remedy is
 * `Effect.fnUntraced(function* (ctx) {…})` made once, where the route table or the layer is built.
 *
 * Checked on the source with TypeScript's parser: every `function*` must either be passed
 * directly to `Effect.fnUntraced` / `Effect.fn`, or sit only inside other generator functions up
 * to the module (a layer's construction, which runs once).
 */
import { describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"

// The request path: the kernel, the inference plane's own files and routes (not its features'
// folders: batches, media, files... run beside requests), and the HTTP helpers.
const ROOTS = ["src/kernel", "src/inference/routes", "src/platform/http"]
const topLevel = (dir: string): Array<string> =>
  fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".ts"))
    .map((f) => path.join(dir, f))

const files = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? files(p) : p.endsWith(".ts") && !p.endsWith(".d.ts") ? [p] : []
  })

const isFunction = (n: ts.Node): n is ts.FunctionLikeDeclaration =>
  ts.isArrowFunction(n) ||
  ts.isFunctionExpression(n) ||
  ts.isFunctionDeclaration(n) ||
  ts.isMethodDeclaration(n) ||
  ts.isGetAccessor(n) ||
  ts.isSetAccessor(n) ||
  ts.isConstructorDeclaration(n)

/** The `function*` of `source` made each time an enclosing ordinary function runs: "file:line". */
const perCallGenerators = (file: string, source: string): Array<string> => {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true)
  const found: Array<string> = []
  const visit = (n: ts.Node): void => {
    if (isFunction(n) && n.asteriskToken !== undefined) {
      const parent = n.parent
      const madeOnce = ts.isCallExpression(parent) && /^Effect\.fn(Untraced)?\b/.test(parent.expression.getText(sf))
      if (!madeOnce) {
        for (let p: ts.Node | undefined = n.parent; p !== undefined && !ts.isSourceFile(p); p = p.parent) {
          if (isFunction(p) && p.asteriskToken === undefined) {
            found.push(`${file}:${sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1}`)
            break
          }
        }
      }
    }
    ts.forEachChild(n, visit)
  }
  visit(sf)
  return found
}

describe("generator functions on the request path", () => {
  it("the check finds a generator made per call, and accepts one made once", () => {
    const perCall = `const route = (deps) => (ctx) => Effect.gen(function* () { yield* deps.run(ctx) })`
    const once = `const route = (deps) => Effect.fnUntraced(function* (ctx) { yield* deps.run(ctx) })`
    const layer = `export const layer = Layer.effect(T, Effect.gen(function* () { const x = yield* Effect.gen(function* () { return 1 }) }))`
    const asyncGen = `const body = (pieces) => { async function* stream() { yield* pieces } return stream() }`
    expect(perCallGenerators("a.ts", perCall)).toEqual(["a.ts:1"])
    expect(perCallGenerators("b.ts", once)).toEqual([])
    expect(perCallGenerators("c.ts", layer)).toEqual([])
    expect(perCallGenerators("d.ts", asyncGen)).toEqual(["d.ts:1"])
  })

  it("the kernel, the inference plane's own files and routes, and src/platform/http make every generator function once", () => {
    const found = [...ROOTS.flatMap(files), ...topLevel("src/inference")].flatMap((f) => perCallGenerators(f, fs.readFileSync(f, "utf8")))
    expect(found).toEqual([])
  })
})
