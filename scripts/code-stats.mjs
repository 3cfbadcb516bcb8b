#!/usr/bin/env node
// `node scripts/code-stats.mjs [--json] [--top N]`: the numbers that say how readable src/ is
// (docs/ARCHITECTURE.md, "Code stats"), so a change to the structure shows its effect:
//   - the largest layer closures: the function a `Layer.effect` / `Layer.scoped` builds its
//     service in, by lines (a service read from the outside in keeps this short);
//   - the provide steps of the composition (src/server/Gateway.ts and src/server/CoreLayer.ts), and
//     of each area's layer (the files named `<Area>Live.ts`);
//   - comment blocks of 8 lines or more, and lines over 140 columns (the formatter's width);
//   - service tags declared in a file named otherwise (a tag `class X` in a file not named X.ts);
//   - exported functions and constants used nowhere (no other file names them, and their own
//     file names them only where they are declared).
// Reads the sources with TypeScript's parser; changes nothing.
import { readdirSync, readFileSync } from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const arg = (name, dflt) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : dflt)
const TOP = Number(arg("--top", 12))
const JSON_OUT = process.argv.includes("--json")
const WIDE = 140
const LONG_COMMENT = 8

/** Files under `dir` (relative to the root) ending in one of `exts`. */
const walk = (dir, exts) => {
  const out = []
  const go = (d) => {
    let entries
    try {
      entries = readdirSync(path.join(ROOT, d), { withFileTypes: true })
    } catch {
      return
    }
    for (const e of entries) {
      if (e.name === "node_modules" || e.name.startsWith(".")) continue
      const rel = path.join(d, e.name)
      if (e.isDirectory()) go(rel)
      else if (exts.some((x) => e.name.endsWith(x)) && !e.name.endsWith(".d.ts")) out.push(rel)
    }
  }
  go(dir)
  return out.sort()
}

const srcFiles = walk("src", [".ts"])
const text = new Map(srcFiles.map((f) => [f, readFileSync(path.join(ROOT, f), "utf8")]))
const parsed = new Map(srcFiles.map((f) => [f, ts.createSourceFile(f, text.get(f), ts.ScriptTarget.Latest, true)]))
const lineOf = (sf, pos) => sf.getLineAndCharacterOfPosition(pos).line + 1

// 1. Layer closures: the function argument of Layer.effect / Layer.scoped (directly, or inside Effect.gen).
const closures = []
for (const [file, sf] of parsed) {
  const visit = (node) => {
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
      const callee = node.expression
      if (ts.isIdentifier(callee.expression) && callee.expression.text === "Layer" && ["effect", "scoped"].includes(callee.name.text)) {
        const tag = node.arguments[0]?.getText(sf) ?? "?"
        const body = node.arguments[1]
        if (body !== undefined) {
          const lines = lineOf(sf, body.getEnd()) - lineOf(sf, body.getStart(sf)) + 1
          closures.push({ file, line: lineOf(sf, node.getStart(sf)), tag, lines })
        }
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(sf)
}
closures.sort((a, b) => b.lines - a.lines)

// 2. Provide steps of the composition.
const compositionFiles = ["src/server/Gateway.ts", "src/server/CoreLayer.ts"].filter((f) => text.has(f))
const stepsIn = (f) => (text.get(f).match(/Layer\.provide(Merge)?\(/g) ?? []).length
const provideSteps = Object.fromEntries(compositionFiles.map((f) => [f, stepsIn(f)]))
// Each area's own layer (`<Area>Live.ts`, docs/ARCHITECTURE.md, "How the layers are composed"): its steps.
const areaFiles = srcFiles.filter((f) => /(^|\/)[A-Z]\w*Live\.ts$/.test(f))
const areaSteps = Object.fromEntries(areaFiles.map((f) => [f, stepsIn(f)]))

// 3. Comment blocks of LONG_COMMENT lines or more (consecutive comment lines, or one /* */ block), lines over WIDE columns.
const longComments = []
const wideLines = []
for (const [file, src] of text) {
  const lines = src.split("\n")
  let run = 0
  let start = 0
  let inBlock = false
  const end = (i) => {
    if (run >= LONG_COMMENT) longComments.push({ file, line: start + 1, lines: run })
    run = 0
    void i
  }
  lines.forEach((l, i) => {
    if (l.length > WIDE) wideLines.push({ file, line: i + 1, columns: l.length })
    const t = l.trim()
    const isComment = inBlock || t.startsWith("//") || t.startsWith("/*")
    if (t.startsWith("/*") && !t.includes("*/")) inBlock = true
    else if (inBlock && t.includes("*/")) inBlock = false
    if (isComment) {
      if (run === 0) start = i
      run++
    } else end(i)
  })
  end(lines.length)
}
longComments.sort((a, b) => b.lines - a.lines)

// 4. Service tags in files named otherwise.
const misnamed = []
let tags = 0
for (const [file, sf] of parsed) {
  for (const st of sf.statements) {
    if (!ts.isClassDeclaration(st) || st.name === undefined) continue
    const heritage = st.heritageClauses?.map((h) => h.getText(sf)).join(" ") ?? ""
    if (!/Context\.Tag\(|Effect\.Service</.test(heritage)) continue
    tags++
    const base = path.basename(file, ".ts")
    if (base !== st.name.text) misnamed.push({ tag: st.name.text, file })
  }
}

// 5. Exported functions and constants used nowhere.
const others = [
  ...srcFiles,
  ...walk("test", [".ts", ".mjs"]),
  ...walk("bench", [".ts", ".mjs", ".js"]),
  ...walk("scripts", [".mjs", ".ts"]),
  ...walk("web/src", [".ts", ".tsx"]),
  ...walk("bin", [""])
]
const words = new Map()
for (const f of others) {
  const src = text.get(f) ?? readFileSync(path.join(ROOT, f), "utf8")
  for (const w of new Set(src.match(/[A-Za-z_$][\w$]*/g) ?? [])) {
    let s = words.get(w)
    if (s === undefined) words.set(w, (s = new Set()))
    s.add(f)
  }
}
const unused = []
for (const [file, sf] of parsed) {
  for (const st of sf.statements) {
    const exported = ts.getCombinedModifierFlags(st) & ts.ModifierFlags.Export
    if (!exported) continue
    const names = []
    if (ts.isFunctionDeclaration(st) && st.name) names.push(st.name.text)
    if (ts.isVariableStatement(st)) for (const d of st.declarationList.declarations) if (ts.isIdentifier(d.name)) names.push(d.name.text)
    for (const name of names) {
      const files = words.get(name) ?? new Set()
      if ([...files].some((f) => f !== file)) continue
      const own = (text.get(file).match(new RegExp(`(?<![\\w$])(?<!(?<!\\.)\\.)${name.replace(/\$/g, "\\$")}(?![\\w$])`, "g")) ?? []).length
      if (own <= 1) unused.push({ name, file, line: lineOf(sf, st.getStart(sf)) })
    }
  }
}

const stats = {
  files: srcFiles.length,
  layerClosures: { count: closures.length, over150: closures.filter((c) => c.lines > 150).length, largest: closures.slice(0, TOP) },
  provideSteps,
  areaSteps,
  commentBlocks8Plus: { count: longComments.length, largest: longComments.slice(0, TOP) },
  linesOver160: { count: wideLines.length, files: new Set(wideLines.map((w) => w.file)).size },
  tagsInFilesNamedOtherwise: { count: misnamed.length, of: tags, list: misnamed },
  unusedExports: { count: unused.length, list: unused }
}

if (JSON_OUT) {
  console.log(JSON.stringify(stats, null, 2))
} else {
  const p = (s) => console.log(s)
  p(`src/: ${stats.files} files`)
  p(`layer closures: ${closures.length}, ${stats.layerClosures.over150} over 150 lines; the largest:`)
  for (const c of stats.layerClosures.largest) p(`  ${String(c.lines).padStart(5)}  ${c.tag}  ${c.file}:${c.line}`)
  p(
    `provide steps: ${Object.entries(provideSteps)
      .map(([f, n]) => `${f} ${n}`)
      .join(", ")}`
  )
  p(
    `provide steps per area: ${Object.entries(areaSteps)
      .map(([f, n]) => `${path.basename(f, ".ts")} ${n}`)
      .join(", ")}`
  )
  p(`comment blocks of ${LONG_COMMENT}+ lines: ${longComments.length}; the longest:`)
  for (const c of stats.commentBlocks8Plus.largest) p(`  ${String(c.lines).padStart(5)}  ${c.file}:${c.line}`)
  p(`lines over ${WIDE} columns: ${wideLines.length} in ${stats.linesOver160.files} files`)
  p(`service tags in files named otherwise: ${misnamed.length} of ${tags}`)
  for (const m of misnamed) p(`  ${m.tag}  ${m.file}`)
  p(`exported functions and constants used nowhere: ${unused.length}`)
  for (const u of unused) p(`  ${u.name}  ${u.file}:${u.line}`)
}
