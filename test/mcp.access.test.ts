import { describe, expect, it } from "vitest"
import { exposedNameOf, MCP_MAX_TOOL_NAME, type McpServerRecord } from "../src/domain/mcpServers.js"
import { type McpAccess, narrowingOf, patternCovers, refusal } from "../src/inference/mcp/access.js"
import { templateMatches } from "../src/inference/mcp/catalog.js"
import { makeRateLimiter } from "../src/inference/mcp/rateLimit.js"

/** The MCP gateway's rules as plain functions (docs/mcp.md, "Who may call what"): names, patterns, the three lists, templates, the rate window. */

describe("exposedNameOf", () => {
  it("is <server>__<name> up to 64 characters", () => {
    expect(exposedNameOf("ev", "echo")).toBe("ev__echo")
    const fits = "t".repeat(MCP_MAX_TOOL_NAME - "ev__".length)
    expect(exposedNameOf("ev", fits)).toBe(`ev__${fits}`)
  })

  it("past 64 characters, cuts the name and adds 8 hex digits of its hash: stable, distinct, at most 64", () => {
    const a = exposedNameOf("github", `create_${"x".repeat(80)}_issue`)
    const b = exposedNameOf("github", `create_${"x".repeat(80)}_issues`)
    expect(a).toHaveLength(MCP_MAX_TOOL_NAME)
    expect(a).toMatch(/^github__create_x+_[0-9a-f]{8}$/)
    expect(a).toBe(exposedNameOf("github", `create_${"x".repeat(80)}_issue`))
    expect(a).not.toBe(b)
  })
})

describe("patternCovers", () => {
  it.each([
    ["*", "ev", "echo", true],
    ["ev", "ev", "echo", true],
    ["ev__*", "ev", "echo", true],
    ["ev__echo", "ev", "echo", true],
    ["ev__ec*", "ev", "echo", true],
    ["ev__*o", "ev", "echo", true],
    ["ev__echo", "ev", "echoes", false],
    ["ev__e.ho", "ev", "echo", false],
    ["fs", "ev", "echo", false],
    ["e", "ev", "echo", false],
    ["ev__", "ev", "echo", false]
  ])("%s covers %s__%s: %s", (pattern, server, name, covers) => {
    expect(patternCovers(pattern, server, name)).toBe(covers)
  })
})

describe("the three lists", () => {
  const access = (ceiling: ReadonlyArray<string> | null, narrowing?: ReadonlyArray<string>): McpAccess => ({
    keyId: "k1",
    keyName: "dev",
    ceiling,
    narrowing
  })

  it("the server's allowedTools first, then the key's ceiling, then the session's header, each named", () => {
    expect(refusal(access(null), "ev", "echo", ["*"])).toBeUndefined()
    expect(refusal(access(null), "ev", "echo", ["get-sum"])).toMatch(/ev__echo is not allowed on server ev/)
    expect(refusal(access(["fs"]), "ev", "echo", ["*"])).toMatch(/key dev may not use ev__echo \(its mcp.allow is \["fs"\]\)/)
    expect(refusal(access(["ev"], ["ev__get-*"]), "ev", "echo", ["*"])).toMatch(
      /X-Gateway-MCP-Allow \(ev__get-\*\) does not cover ev__echo/
    )
    // The header narrows the key, never widens it.
    expect(refusal(access(["ev__echo"], ["*"]), "ev", "get-sum", ["*"])).toMatch(/key dev may not use ev__get-sum/)
  })

  it("reads the header's patterns, comma- or space-separated; an empty header narrows nothing", () => {
    expect(narrowingOf("ev__echo, fs__list_*  gh")).toEqual(["ev__echo", "fs__list_*", "gh"])
    expect(narrowingOf(["ev", "fs"])).toEqual(["ev", "fs"])
    expect(narrowingOf(" , ")).toBeUndefined()
    expect(narrowingOf(undefined)).toBeUndefined()
  })
})

describe("templateMatches", () => {
  it("matches simple expansions within a segment and reserved ones across", () => {
    expect(templateMatches("test://static/resource/{id}", "test://static/resource/12")).toBe(true)
    expect(templateMatches("test://static/resource/{id}", "test://static/resource/1/2")).toBe(false)
    expect(templateMatches("file:///{+path}", "file:///tmp/a/b.txt")).toBe(true)
    expect(templateMatches("a.b/{x}", "aXb/1")).toBe(false)
  })
})

describe("the rate window", () => {
  const server = (rpm: number | null) => ({ name: "ev", rpm }) as McpServerRecord

  it("lets rpm calls per key and server in a minute, then says how long to wait; other keys and servers count apart", () => {
    let now = 1_000_000
    const limiter = makeRateLimiter(() => now)
    expect(limiter.take("k1", server(2))).toBeUndefined()
    expect(limiter.take("k1", server(2))).toBeUndefined()
    now += 15_000
    expect(limiter.take("k1", server(2))).toBe(45)
    expect(limiter.take("k2", server(2))).toBeUndefined()
    expect(limiter.take("k1", { name: "fs", rpm: 2 } as McpServerRecord)).toBeUndefined()
    now += 45_000
    expect(limiter.take("k1", server(2))).toBeUndefined()
    expect(limiter.take("k1", server(null))).toBeUndefined()
  })
})
