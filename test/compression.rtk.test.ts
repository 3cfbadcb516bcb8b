import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import {
  BUILTIN_FILTERS,
  DEFAULT_RTK_CONFIG,
  describe as describeRules,
  listFilters,
  parseProjectFilters,
  RtkConfig,
  rtk,
  test as rtkTest
} from "../src/services/context/engines/rtk.js"
import { checkRegex } from "../src/services/context/engines/rtk/regex.js"
import type { Segment } from "../src/services/context/types.js"

const dir = path.join(import.meta.dirname, "fixtures/compression/rtk")
const cases = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith(".input.txt"))
  .map((f) => f.slice(0, -".input.txt".length))
  .sort()

const segmentOf = (name: string): Segment => {
  const file = path.join(dir, `${name}.segment.json`)
  return { role: "tool", kind: "tool-result", turn: 0, turns: 1, ...(fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : {}) }
}
const configOf = (name: string): RtkConfig => {
  const file = path.join(dir, `${name}.config.json`)
  return Schema.decodeUnknownSync(RtkConfig)(fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : {})
}
/** A deterministic raw-output store: ids raw-1, raw-2…; remembers what it kept. */
const store = () => {
  const kept: Array<string> = []
  return { kept, context: { keepRaw: (text: string) => (kept.push(text), `raw-${kept.length}`) } }
}
const seg = (command?: string): Segment => ({ role: "tool", kind: "tool-result", turn: 0, turns: 1, ...(command ? { command } : {}) })
const config = (fields: Record<string, unknown> = {}) => Schema.decodeUnknownSync(RtkConfig)(fields)
const ERROR = /error|fail|panic|exception|traceback/i

describe("rtk corpus", () => {
  it("has at least 12 cases", () => {
    expect(cases.length).toBeGreaterThanOrEqual(12)
  })
  for (const name of cases) {
    it(name, () => {
      const input = fs.readFileSync(path.join(dir, `${name}.input.txt`), "utf8")
      const expected = fs.readFileSync(path.join(dir, `${name}.expected.txt`), "utf8")
      const { context } = store()
      expect(rtk.apply(input, segmentOf(name), configOf(name), context)).toBe(expected)
    })
  }
})

describe("rtk invariants", () => {
  it("applies to tool results only", () => {
    expect(rtk.applies(seg())).toBe(true)
    expect(rtk.applies({ ...seg(), kind: "prose", role: "user" })).toBe(false)
  })

  it("gives back the same string for a short output that matched no filter and needed no step", () => {
    const text = "TOOL_OK\n"
    const { kept, context } = store()
    expect(rtk.apply(text, seg("echo TOOL_OK"), DEFAULT_RTK_CONFIG, context)).toBe(text)
    const r = rtkTest("hello\r\nworld\r\n", undefined, DEFAULT_RTK_CONFIG)
    expect(r).toEqual({ output: "hello\r\nworld\r\n", filter: null, linesBefore: 2, linesAfter: 2, steps: [] })
    expect(kept).toEqual([])
  })

  it("is idempotent on its own output and does not keep a raw output twice", () => {
    for (const name of cases) {
      const input = fs.readFileSync(path.join(dir, `${name}.input.txt`), "utf8")
      const once = rtk.apply(input, segmentOf(name), configOf(name), store().context)
      const second = store()
      expect(rtk.apply(once, segmentOf(name), configOf(name), second.context), name).toBe(once)
      expect(second.kept, name).toEqual([])
    }
  })

  it("is deterministic", () => {
    for (const name of cases) {
      const input = fs.readFileSync(path.join(dir, `${name}.input.txt`), "utf8")
      const a = rtk.apply(input, segmentOf(name), configOf(name), store().context)
      const b = rtk.apply(input, segmentOf(name), configOf(name), store().context)
      expect(b, name).toBe(a)
    }
  })

  it("keeps the raw output only when something is cut, and keeps the original text", () => {
    const small = store()
    rtk.apply(fs.readFileSync(path.join(dir, "git-status.input.txt"), "utf8"), segmentOf("git-status"), DEFAULT_RTK_CONFIG, small.context)
    expect(small.kept).toEqual([])
    const big = store()
    const input = fs.readFileSync(path.join(dir, "long-5000.input.txt"), "utf8")
    const out = rtk.apply(input, segmentOf("long-5000"), DEFAULT_RTK_CONFIG, big.context)
    expect(big.kept).toEqual([input])
    expect(out).toContain("[rtk: 4879 lines omitted; full output: GET /api/context/rtk/raw-output/raw-1]")
    expect(out.split("\n").slice(0, 60)).toEqual(input.split("\n").slice(0, 60))
  })

  it("never drops an error line in the generic steps", () => {
    const lines: Array<string> = []
    for (let i = 0; i < 3000; i++) {
      if (i % 97 === 13) lines.push(`step ${i}: ERROR could not open /tmp/f${i}`)
      else if (i % 211 === 7) lines.push(`thread 'main' panicked at src/x.rs:${i}:5`)
      else if (i % 389 === 3) lines.push(`Traceback (most recent call last): frame ${i}`)
      else if (i % 50 === 0) lines.push(`\r[${"=".repeat(i % 20)}>   ] ${i % 100}%\rdownload failed at ${i}%`)
      else lines.push(`step ${i}: ok in ${i % 13}ms`)
    }
    const input = lines.join("\n")
    const out = rtk.apply(
      input,
      seg("./run.sh"),
      config({ collapseSimilar: true, maxLines: 100, headLines: 20, tailLines: 20 }),
      store().context
    )
    const outLines = new Set(out.split("\n"))
    const errorLines = input
      .split("\n")
      .flatMap((l) => l.split("\r"))
      .filter((l) => l && ERROR.test(l))
    expect(errorLines.length).toBeGreaterThan(40)
    for (const l of errorLines) expect(outLines.has(l), l).toBe(true)
    expect(out.length).toBeLessThan(input.length / 5)
  })

  it("leaves decorative rules and short repeats in file contents alone", () => {
    const text = "# ━━━━━━━━━━ Section ━━━━━━━━━━\n+=======+=======+\n|=======|=======|\n  }\n}\n"
    expect(rtk.apply(text, seg(), DEFAULT_RTK_CONFIG, store().context)).toBe(text)
  })

  it("cuts a single huge line by characters, with the marker", () => {
    const input = "x".repeat(50_000)
    const { kept, context } = store()
    const out = rtk.apply(input, seg(), DEFAULT_RTK_CONFIG, context)
    expect(out.length).toBeLessThanOrEqual(20_000 + 200)
    expect(out).toContain("[rtk: 30000 chars omitted; full output: GET /api/context/rtk/raw-output/raw-1]")
    expect(kept).toEqual([input])
  })

  it("switches each generic step off", () => {
    const text = "\u001b[31mred\u001b[39m\n" + "same\n".repeat(5) + "\r[=====>    ] 45%\rdone\n"
    expect(rtk.apply(text, seg(), config({ ansi: false, collapseRepeats: false, progress: false }), store().context)).toBe(text)
    expect(rtk.apply(text, seg(), DEFAULT_RTK_CONFIG, store().context)).toBe("red\nsame … (repeated 5 times)\ndone\n")
  })

  it("chooses a filter by command, then by output shape, and honours disabledFilters", () => {
    const status = fs.readFileSync(path.join(dir, "git-status.input.txt"), "utf8")
    expect(rtkTest(status, "git status", DEFAULT_RTK_CONFIG).filter).toBe("git-status")
    expect(rtkTest(status, undefined, DEFAULT_RTK_CONFIG).filter).toBe("git-status")
    expect(rtkTest(status, "cd repo && git -C sub status --short", DEFAULT_RTK_CONFIG).filter).toBe("git-status")
    expect(rtkTest(status, `bash -lc 'git status'`, DEFAULT_RTK_CONFIG).filter).toBe("git-status")
    expect(rtkTest("x\n", "gitk status", DEFAULT_RTK_CONFIG).filter).toBeNull()
    const off = rtkTest(status, "git status", config({ disabledFilters: ["git-status"] }))
    expect(off.filter).toBeNull()
    expect(off.output).toContain('(use "git add <file>..." to update what will be committed)')
    const only = rtkTest(status, "git status", config({ filters: ["git-log"] }))
    expect(only.filter).toBeNull()
  })

  it("answers what it did for the test route", () => {
    const log = fs.readFileSync(path.join(dir, "git-log.input.txt"), "utf8")
    const r = rtkTest(log, "git log", DEFAULT_RTK_CONFIG)
    expect(r.filter).toBe("git-log")
    expect(r.steps).toEqual(["filter:git-log"])
    expect(r.linesBefore).toBe(30)
    expect(r.linesAfter).toBe(4)
    const big = rtkTest(
      "line\n".repeat(10).concat(Array.from({ length: 500 }, (_, i) => `row ${i}`).join("\n")),
      undefined,
      DEFAULT_RTK_CONFIG
    )
    expect(big.steps).toEqual(["collapseRepeats", "truncate"])
    expect(big.output).toContain("/api/context/rtk/raw-output/preview]")
  })

  it("runs custom filters before the built-ins", () => {
    const c = config({
      customFilters: [{ id: "deploy", description: "deploy script", match: { command: "deploy\\.sh" }, drop: ["^\\s*uploading "] }]
    })
    const r = rtkTest("uploading a.js\nuploading b.js\nuploading c.js: failed\ndeployed 3 files\n", "./deploy.sh --prod", c)
    expect(r.filter).toBe("deploy")
    expect(r.output).toBe("deployed 3 files\n")
  })

  it("keep mode keeps context and error lines", () => {
    const c = config({ customFilters: [{ id: "only-warn", description: "", match: { command: "^lint" }, keep: ["^warn"], context: 1 }] })
    const r = rtkTest("a\nb\nwarn: x\nc\nd\ne\nf\nsomething FAILED\ng\n", "lint", c)
    expect(r.output).toBe("b\nwarn: x\nc\nf\nsomething FAILED\ng\n")
  })
})

describe("rtk config", () => {
  it("decodes {} to the defaults", () => {
    expect(DEFAULT_RTK_CONFIG).toEqual({
      ansi: true,
      progress: true,
      collapseRepeats: true,
      collapseSimilar: false,
      maxLines: 200,
      maxChars: 20_000,
      headLines: 60,
      tailLines: 60,
      filters: BUILTIN_FILTERS.map((f) => f.id),
      disabledFilters: [],
      customFilters: []
    })
  })
  it("refuses unknown fields, naming them", () => {
    expect(() => config({ maxLine: 10 })).toThrow(/maxLine/)
  })
  it("refuses head + tail not under maxLines, and unknown filter ids", () => {
    expect(() => config({ maxLines: 100, headLines: 60, tailLines: 60 })).toThrow(/headLines \+ tailLines must be less than maxLines/)
    expect(() => config({ disabledFilters: ["git-stats"] })).toThrow(/disabledFilters\[0\]: unknown filter "git-stats"/)
  })
  it("refuses an unsafe regex in customFilters", () => {
    expect(() => config({ customFilters: [{ id: "x", description: "", match: { output: "(a+)+$" } }] })).toThrow(/nested quantifiers/)
  })
})

describe("rtk project filters", () => {
  const good = [
    {
      id: "terraform-plan",
      description: "terraform plan: drop refresh lines",
      match: { command: "terraform\\s+plan" },
      drop: ["Refreshing state\\.\\.\\."]
    },
    { id: "docker-build", description: "", match: { output: "^#\\d+ \\[" }, keep: ["ERROR", "^#\\d+ DONE"], context: 2, maxLines: 100 }
  ]

  it("accepts a good file, as a list or { filters }", () => {
    const a = parseProjectFilters(good, false)
    expect(a.ok).toBe(true)
    if (a.ok) expect(a.filters.map((f) => f.id)).toEqual(["terraform-plan", "docker-build"])
    expect(parseProjectFilters({ filters: good }, false).ok).toBe(true)
  })

  it("names each bad field", () => {
    const r = parseProjectFilters(
      [
        good[0],
        { id: "bad", description: "", match: { command: "x" }, drop: ["ok", "(a+)+b"], colapse: true },
        { id: "worse", description: "", match: {}, keep: ["(\\w+)\\s\\1"], context: 99 }
      ],
      false
    )
    expect(r.ok).toBe(false)
    if (r.ok) return
    const text = r.errors.join("\n")
    expect(text).toMatch(/\[1\]\.drop\[1\]: nested quantifiers/)
    expect(text).toMatch(/\[1\]\.colapse: /)
    expect(text).toMatch(/\[2\]\.keep\[0\]: backreferences are not allowed/)
    expect(text).toMatch(/\[2\]\.context: /)
  })

  it("refuses an unsafe regex unless trusted; never an invalid or overlong one", () => {
    const unsafe = { filters: [{ id: "slow", description: "", match: { output: "^(\\s*\\w+)*$" } }] }
    const refused = parseProjectFilters(unsafe, false)
    expect(refused).toEqual({ ok: false, errors: [expect.stringMatching(/^filters\[0\]\.match\.output: nested quantifiers/)] })
    expect(parseProjectFilters(unsafe, true).ok).toBe(true)
    const invalid = parseProjectFilters([{ id: "broken", description: "", match: { command: "(unclosed" } }], true)
    expect(invalid.ok).toBe(false)
    if (!invalid.ok) expect(invalid.errors[0]).toMatch(/^\[0\]\.match\.command: invalid regex/)
    const long = parseProjectFilters([{ id: "long", description: "", match: { command: "a".repeat(501) } }], true)
    expect(long.ok).toBe(false)
  })

  it("refuses built-in and duplicate ids, a non-list and unknown top-level fields", () => {
    const r = parseProjectFilters([{ ...good[0], id: "git-status" }, good[1], good[1]], false)
    expect(r).toEqual({
      ok: false,
      errors: ['[0].id: "git-status" is a built-in filter id', '[2].id: "docker-build" is used by another filter']
    })
    expect(parseProjectFilters("nope", false)).toEqual({ ok: false, errors: ["filters: expected a list of filters"] })
    expect(parseProjectFilters({ filter: [] }, false).ok).toBe(false)
  })

  it("project filters run through the same interpreter", () => {
    const parsed = parseProjectFilters(good, false)
    if (!parsed.ok) throw new Error(parsed.errors.join())
    const c = config({ customFilters: parsed.filters })
    const r = rtkTest("Refreshing state...\nRefreshing state...\nPlan: 1 to add, 0 to change, 0 to destroy.\n", "terraform plan", c)
    expect(r.output).toBe("Plan: 1 to add, 0 to change, 0 to destroy.\n")
  })
})

describe("rtk regex checks", () => {
  it("flags nested quantifiers and backreferences, allows ordinary patterns", () => {
    for (const bad of ["(a+)+", "(a*)*b", "(?:x+){2,}", "((ab)+c)*", "([a-z]+\\s?)+$", "(\\d+|x)+", "(a)\\1", "(?<n>a)\\k<n>", "(a+){2}"]) {
      expect(checkRegex(bad, false), bad).toBeDefined()
    }
    for (const ok of ['^\\s*\\(use "git [^"]*"[^)]*\\)\\s*$', "(ab)+", "(a+)?", "(a+){1}", "[(+*)]+", "^\\d+ passed", "a{2,3}b+"]) {
      expect(checkRegex(ok, false), ok).toBeUndefined()
    }
    expect(checkRegex("(a+)+", true)).toBeUndefined()
  })
  it("every built-in filter passes the untrusted checks", () => {
    for (const f of BUILTIN_FILTERS) {
      const sources = [
        f.match.command,
        f.match.output,
        ...(f.drop ?? []),
        ...(f.keep ?? []),
        f.continuation,
        ...(f.replace ?? []).map((r) => r.pattern),
        f.records?.start,
        ...(f.records?.fields ?? []),
        f.sections?.start,
        f.sections?.end,
        f.group?.pattern
      ].filter((s): s is string => s !== undefined)
      for (const s of sources) expect(checkRegex(s, false), `${f.id}: ${s}`).toBeUndefined()
    }
  })
})

describe("rtk listings", () => {
  it("lists every built-in filter and the generic steps as rules", () => {
    const rules = describeRules()
    expect(rules.filter((r) => r.id.startsWith("filter:")).map((r) => r.id)).toEqual(BUILTIN_FILTERS.map((f) => `filter:${f.id}`))
    expect(rules.map((r) => r.id)).toEqual(expect.arrayContaining(["ansi", "progress", "collapseRepeats", "collapseSimilar", "truncate"]))
    expect(rules.every((r) => r.engine === "rtk" && r.description.length > 0)).toBe(true)
    expect(listFilters().map((f) => Object.keys(f))).toEqual(BUILTIN_FILTERS.map(() => ["id", "description", "match"]))
  })
  it("has the filters the issue names", () => {
    expect(BUILTIN_FILTERS.map((f) => f.id)).toEqual(
      expect.arrayContaining([
        "git-status",
        "git-diff",
        "git-log",
        "test-js",
        "test-pytest",
        "test-go",
        "test-cargo",
        "npm-install",
        "pip-install",
        "ls-long",
        "find",
        "grep",
        "build-tsc",
        "build-cargo",
        "build-make"
      ])
    )
  })
})
