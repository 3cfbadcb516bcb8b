// Rewrites object literals that start with a spread and then add properties,
//   { ...base, key: value }   →   __gatewayExtend(base, { key: value })
// in the bundle (our code and the dependencies bundled with it), after esbuild.
//
// Why: V8 (Node 20 and 22) keeps objects made by such a literal alive through a scavenge after
// nothing references them, and with them part of what they reference; on the request path that
// is most of a request's objects (Effect's Deferred is built this way), so every scavenge copies
// and then promotes ~1.5 MB that is garbage (docs/performance.md, "The latency tail";
// `node bench/gc-retention.mjs` shows it in isolation). The same object built by Object.assign
// does not, and a bare `{ ...base }` does not.
//
// The helper keeps the literal's meaning: own enumerable string and symbol keys of `base`, then
// the literal's, later keys winning; getters of `base` are read once. One difference of
// Object.assign is handled: a `base` with an own "__proto__" key (JSON.parse makes those) would
// set the result's prototype, so such a base takes the literal path. Literals the helper cannot
// express are left alone: accessors, methods using `super`, and a `__proto__:` key.
//
// Parsed with TypeScript's parser (a dev dependency already), not with patterns: the rewrite
// must be exact on 4 MB of generated code.
import ts from "typescript"

export const HELPER = "__gatewayExtend"
export const HELPER_SOURCE = `const ${HELPER} = (a, b) => a !== null && typeof a === "object" && Object.prototype.hasOwnProperty.call(a, "__proto__") ? { ...a, ...b } : Object.assign({}, a, b);`

const rewritable = (node, text) => {
  if (!ts.isObjectLiteralExpression(node)) return false
  const props = node.properties
  if (props.length < 2 || !ts.isSpreadAssignment(props[0])) return false
  // `({ ...a, b } = c)` is not valid JavaScript (a rest element is last), so every such literal is a value.
  for (const p of props.slice(1)) {
    if (ts.isGetAccessorDeclaration(p) || ts.isSetAccessorDeclaration(p)) return false
    const name = p.name
    if (name && ((ts.isIdentifier(name) && name.text === "__proto__") || (ts.isStringLiteral(name) && name.text === "__proto__")))
      return false
    if (ts.isMethodDeclaration(p) && /\bsuper\b/.test(text.slice(p.getStart(), p.end))) return false
  }
  return true
}

/** The code with every rewritable literal replaced (nested ones too), and how many were. */
export const rewriteSpreads = (code) => {
  const file = ts.createSourceFile("bundle.mjs", code, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS)
  // Every rewritable literal, in document order (a literal before the ones nested in it).
  const targets = []
  const visit = (node) => {
    if (rewritable(node, code)) targets.push(node)
    ts.forEachChild(node, visit)
  }
  visit(file)
  if (targets.length === 0) return { code, count: 0 }
  // [start, end) of the code, with the targets inside it rewritten, from targets[i] on.
  let i = 0
  const render = (start, end) => {
    let out = ""
    let at = start
    while (i < targets.length && targets[i].getStart(file) < end) {
      const t = targets[i++]
      const tStart = t.getStart(file)
      out += code.slice(at, tStart)
      const [first, ...rest] = t.properties
      const base = render(first.expression.getStart(file), first.expression.end)
      // Skip targets between the spread's expression and the first added property (none can be there).
      const others = render(rest[0].getStart(file), t.properties.end).trim().replace(/,$/, "")
      out += `${HELPER}(${base}, { ${others} })`
      at = t.end
      while (i < targets.length && targets[i].getStart(file) < t.end) i++
    }
    return out + code.slice(at, end)
  }
  return { code: render(0, code.length), count: targets.length }
}

/** A chunk with its literals rewritten and the helper declared once after its first line (the banner). */
export const rewriteChunk = (code) => {
  const r = rewriteSpreads(code)
  if (r.count === 0) return r
  const nl = r.code.indexOf("\n")
  return { code: `${r.code.slice(0, nl + 1)}${HELPER_SOURCE}\n${r.code.slice(nl + 1)}`, count: r.count }
}
