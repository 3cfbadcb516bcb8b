import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * The agent-skill catalog (spec document 2, "Agent skill", "Agent skill discovery";
 * docs/skills.md) from outside: the REST routes of a real gateway serving the repository's
 * committed skills/, the generator run through POST /api/agent-skills/generate (a dry run
 * against the committed files, real runs in a scratch directory), and the OpenAPI document.
 */
const ADMIN = "gwk_skills_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
const REPO_SKILLS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../skills")

/** The ids of the specification, in its order. */
const API_IDS = [
  "gw-auth",
  "gw-providers",
  "gw-models",
  "gw-combos-routing",
  "gw-api-keys",
  "gw-usage-logs",
  "gw-budget",
  "gw-settings",
  "gw-proxies",
  "gw-cache",
  "gw-compression",
  "gw-context-rtk",
  "gw-resilience",
  "gw-cli-tools",
  "gw-tunnels",
  "gw-sync-cloud",
  "gw-db-backups",
  "gw-webhooks",
  "gw-mcp",
  "gw-agents-a2a",
  "gw-version-manager",
  "gw-inference"
]
const CLI_IDS = [
  "cli-serve",
  "cli-health",
  "cli-providers",
  "cli-keys",
  "cli-models",
  "cli-chat",
  "cli-routing",
  "cli-resilience",
  "cli-compression",
  "cli-contexts",
  "cli-cost-usage",
  "cli-mcp",
  "cli-a2a",
  "cli-tunnel",
  "cli-backup-sync",
  "cli-policy-audit",
  "cli-batches",
  "cli-eval",
  "cli-plugins-skills",
  "cli-setup"
]

/** Generation loads the whole API and CLI the first time; on a busy machine that takes a while. */
const GENERATE_TIMEOUT = 180_000

const startWithAdmin = async (env: Record<string, string> = {}) => {
  const gw = await startGateway({ env })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  return gw
}

const generate = (gw: TestGateway, body: unknown) => call(`${gw.url}/api/agent-skills/generate`, { body, headers: admin })

/** A skill file's front matter and the order of its `## ` sections. */
const shape = (markdown: string) => ({
  frontMatter: /^---\nname: "[^"\n]+"\ndescription: "[^"\n]+"\n---\n/.test(markdown),
  sections: [...markdown.matchAll(/^## (.+)$/gm)].map((m) => m[1]),
  markers: /<!-- custom:start -->[\s\S]*<!-- custom:end -->\n$/.test(markdown)
})

describe("the committed catalog", () => {
  let gw: TestGateway
  beforeAll(async () => {
    gw = await startWithAdmin()
  })
  afterAll(async () => {
    await gw?.close()
  })

  it(
    "the 42 committed skills regenerate without changes (a dry run of the generator against the repository's skills/)",
    async () => {
      const r = await generate(gw, { dryRun: true })
      expect(r.status).toBe(200)
      expect(r.body.dir).toBe(REPO_SKILLS)
      expect(r.body.errors).toEqual([])
      expect(r.body.generated).toEqual([])
      expect(r.body.orphansDetected).toEqual([])
      expect([...r.body.unchanged].sort()).toEqual([...API_IDS, ...CLI_IDS].sort())
    },
    GENERATE_TIMEOUT
  )

  it("lists the 22 API and 20 CLI skills without authentication, raw URLs absolute on the caller's origin", async () => {
    const r = await call(`${gw.url}/api/agent-skills`)
    expect(r.status).toBe(200)
    expect(r.body.skills.map((s: { id: string }) => s.id)).toEqual([...API_IDS, ...CLI_IDS])
    for (const s of r.body.skills) {
      expect(s.category).toBe(s.id.startsWith("gw-") ? "api" : "cli")
      expect(s.area).toBe(s.id.startsWith("gw-") ? s.id.slice(3) : s.id)
      expect(s.name.length).toBeGreaterThan(0)
      expect(s.description.length).toBeGreaterThan(20)
      expect(s.rawUrl).toBe(`${gw.url}/api/agent-skills/${s.id}/raw`)
    }
  })

  it("every raw file is markdown with front matter, Overview, Authentication, Endpoints and the custom markers", async () => {
    const { body } = await call(`${gw.url}/api/agent-skills`)
    for (const s of body.skills) {
      const res = await fetch(s.rawUrl)
      expect(res.status).toBe(200)
      expect(res.headers.get("content-type")).toMatch(/^text\/markdown/)
      const text = await res.text()
      expect(shape(text), s.id).toEqual({ frontMatter: true, sections: ["Overview", "Authentication", "Endpoints"], markers: true })
      expect(text).toContain(`name: ${JSON.stringify(s.name)}`)
      expect(text).toContain(`description: ${JSON.stringify(s.description)}`)
      expect(text).toBe(fs.readFileSync(path.join(REPO_SKILLS, `${s.id}.md`), "utf8"))
    }
  })

  it("filters by category and area; a category other than api or cli is a 400 naming it", async () => {
    const cli = await call(`${gw.url}/api/agent-skills?category=cli`)
    expect(cli.body.skills.map((s: { id: string }) => s.id)).toEqual(CLI_IDS)
    const auth = await call(`${gw.url}/api/agent-skills?area=auth`)
    expect(auth.body.skills.map((s: { id: string }) => s.id)).toEqual(["gw-auth"])
    const none = await call(`${gw.url}/api/agent-skills?category=api&area=cli-keys`)
    expect(none.body.skills).toEqual([])
    const bad = await call(`${gw.url}/api/agent-skills?category=rest`)
    expect(bad.status).toBe(400)
    expect(bad.body._tag).toBe("BadRequest")
    expect(bad.body.message).toContain("category")
    expect(bad.body.message).toContain("rest")
  })

  it("one entry, its raw file, 404 JSON for an unknown id, and the coverage object", async () => {
    const one = await call(`${gw.url}/api/agent-skills/gw-inference`)
    expect(one.status).toBe(200)
    expect(one.body).toMatchObject({
      id: "gw-inference",
      category: "api",
      area: "inference",
      rawUrl: `${gw.url}/api/agent-skills/gw-inference/raw`
    })
    for (const url of [
      `${gw.url}/api/agent-skills/gw-nothing`,
      `${gw.url}/api/agent-skills/gw-nothing/raw`,
      `${gw.url}/api/agent-skills/..%2Fpackage/raw`
    ]) {
      const r = await call(url)
      expect(r.status, url).toBe(404)
      expect(r.body._tag).toBe("NotFound")
    }
    expect((await call(`${gw.url}/api/agent-skills/gw-nothing`)).body.message).toContain("gw-nothing")
    const cov = await call(`${gw.url}/api/agent-skills/coverage`)
    expect(cov.status).toBe(200)
    expect(cov.body).toMatchObject({ api: { have: 22, total: 22 }, cli: { have: 20, total: 20 }, totalSkills: 42 })
    expect(new Date(cov.body.generatedAt).toISOString()).toBe(cov.body.generatedAt)
  })

  it("generating needs management authentication", async () => {
    const r = await call(`${gw.url}/api/agent-skills/generate`, { body: { dryRun: true } })
    expect(r.status).toBe(401)
    expect(r.body._tag).toBe("Unauthorized")
  })

  it("serves the management API's OpenAPI document without authentication; every operation is in exactly one skill", async () => {
    const r = await call(`${gw.url}/api/openapi.json`)
    expect(r.status).toBe(200)
    expect(r.body.openapi).toBe("3.1.0")
    expect(r.body.info.version).toBe(r.headers.get("x-gateway-version"))
    expect(r.body.paths["/api/keys"].get.security.length).toBeGreaterThan(0)
    expect(r.body.paths["/api/agent-skills"].get.security).toEqual([])
    expect(r.body.paths["/api/agent-skills/generate"].post.security.length).toBeGreaterThan(0)
    const files = API_IDS.map((id) => fs.readFileSync(path.join(REPO_SKILLS, `${id}.md`), "utf8"))
    for (const [p, item] of Object.entries<Record<string, unknown>>(r.body.paths)) {
      for (const method of Object.keys(item)) {
        const heading = `### \`${method.toUpperCase()} ${p}\``
        expect(files.filter((f) => f.includes(`${heading}\n`)).length, heading).toBe(1)
      }
    }
  })

  it("API skills hold the inference and management routes; CLI skills hold the commands with their options", async () => {
    const raw = async (id: string) => (await fetch(`${gw.url}/api/agent-skills/${id}/raw`)).text()
    const inference = await raw("gw-inference")
    for (const route of [
      "POST /v1/chat/completions",
      "POST /v1/messages",
      "POST /v1beta/models/{model}:{method}",
      "POST /v1/models/{model}:{method}",
      "POST /api/chat"
    ]) {
      expect(inference).toContain(`### \`${route}\``)
    }
    const tunnels = await raw("gw-tunnels")
    expect(tunnels).toContain("### `POST /api/tunnels/quick`")
    expect(tunnels).toContain("### `POST /api/tunnels/token`")
    expect(tunnels).toContain("### `POST /api/tunnels/mesh/install`")
    expect(tunnels).not.toMatch(/501/)
    const a2a = await raw("gw-agents-a2a")
    expect(a2a).toContain("### `POST /a2a`")
    expect(a2a).toContain("### `GET /.well-known/agent-card.json`")
    const keys = await raw("cli-keys")
    expect(keys).toContain("### `gateway keys add`")
    expect(keys).toMatch(/- `--name text`: .+/)
    expect(await raw("cli-serve")).toMatch(/- `--port [a-z]+`: .*Port to listen on/)
    expect(await raw("cli-a2a")).toContain("### `gateway a2a status`")
  })
})

describe("regeneration in a skills directory of its own", () => {
  let gw: TestGateway
  let dir: string
  const file = (id: string) => path.join(dir, `${id}.md`)
  beforeAll(async () => {
    dir = path.join(tempDir("gw-skills-"), "skills")
    gw = await startWithAdmin({ GATEWAY_SKILLS_DIR: dir })
  })
  afterAll(async () => {
    await gw?.close()
  })

  it(
    "writes the 42 files into an empty directory, the same bytes as the committed ones",
    async () => {
      expect((await call(`${gw.url}/api/agent-skills`)).body.skills).toEqual([])
      expect((await call(`${gw.url}/api/agent-skills/coverage`)).body.totalSkills).toBe(0)
      const r = await generate(gw, {})
      expect(r.status).toBe(200)
      expect(r.body).toMatchObject({ dir, dryRun: false, unchanged: [], pruned: [], orphansDetected: [], errors: [] })
      expect(r.body.generated).toEqual([...API_IDS, ...CLI_IDS])
      for (const id of [...API_IDS, ...CLI_IDS])
        expect(fs.readFileSync(file(id), "utf8")).toBe(fs.readFileSync(path.join(REPO_SKILLS, `${id}.md`), "utf8"))
      expect((await call(`${gw.url}/api/agent-skills/coverage`)).body).toMatchObject({
        api: { have: 22 },
        cli: { have: 20 },
        totalSkills: 42
      })
    },
    GENERATE_TIMEOUT
  )

  it(
    "keeps the custom section, restores edited generated text, reports orphans and prunes them only when asked",
    async () => {
      const original = fs.readFileSync(file("gw-webhooks"), "utf8")
      const custom = "\n## Our notes\n\nReceivers live on the `hooks` host; rotate secrets monthly.\n"
      const edited = original
        .replace("<!-- custom:start -->\n<!-- custom:end -->", `<!-- custom:start -->${custom}<!-- custom:end -->`)
        .replace("## Overview\n", "## Overview\n\nA hand edit outside the markers.\n")
      fs.writeFileSync(file("gw-webhooks"), edited)
      fs.writeFileSync(path.join(dir, "gw-old-skill.md"), "---\nname: old\n---\n")
      fs.writeFileSync(path.join(dir, "notes.txt"), "not a skill file")

      const dry = await generate(gw, { dryRun: true, prune: true })
      expect(dry.body).toMatchObject({
        dryRun: true,
        generated: ["gw-webhooks"],
        pruned: ["gw-old-skill"],
        orphansDetected: ["gw-old-skill"],
        errors: []
      })
      expect(fs.readFileSync(file("gw-webhooks"), "utf8")).toBe(edited)
      expect(fs.existsSync(path.join(dir, "gw-old-skill.md"))).toBe(true)

      const kept = await generate(gw, {})
      expect(kept.body).toMatchObject({ generated: ["gw-webhooks"], pruned: [], orphansDetected: ["gw-old-skill"] })
      const regenerated = fs.readFileSync(file("gw-webhooks"), "utf8")
      expect(regenerated).not.toContain("A hand edit outside the markers.")
      expect(regenerated).toContain(`<!-- custom:start -->${custom}<!-- custom:end -->`)
      expect(regenerated.replace(custom, "\n")).toBe(original)
      expect(fs.existsSync(path.join(dir, "gw-old-skill.md"))).toBe(true)

      const pruned = await generate(gw, { prune: true })
      expect(pruned.body).toMatchObject({ generated: [], pruned: ["gw-old-skill"], orphansDetected: ["gw-old-skill"], errors: [] })
      expect(pruned.body.unchanged).toHaveLength(42)
      expect(fs.existsSync(path.join(dir, "gw-old-skill.md"))).toBe(false)
      expect(fs.existsSync(path.join(dir, "notes.txt"))).toBe(true)
      expect(fs.readFileSync(file("gw-webhooks"), "utf8")).toBe(regenerated)

      const raw = await (await fetch(`${gw.url}/api/agent-skills/gw-webhooks/raw`)).text()
      expect(raw).toContain("Receivers live on the `hooks` host")
    },
    GENERATE_TIMEOUT
  )

  it(
    "onlyIds limits generation; a missing file is a 404 until regenerated; bad bodies are 400s naming the field",
    async () => {
      fs.rmSync(file("gw-auth"))
      expect((await call(`${gw.url}/api/agent-skills/gw-auth`)).status).toBe(404)
      expect((await call(`${gw.url}/api/agent-skills/coverage`)).body.api.have).toBe(21)
      const only = await generate(gw, { onlyIds: ["gw-auth", "cli-keys"] })
      expect(only.body).toMatchObject({ generated: ["gw-auth"], unchanged: ["cli-keys"], errors: [] })
      expect((await call(`${gw.url}/api/agent-skills/gw-auth`)).status).toBe(200)

      const unknownId = await generate(gw, { onlyIds: ["gw-auth", "gw-nothing"] })
      expect(unknownId.status).toBe(400)
      expect(unknownId.body.message).toContain("onlyIds")
      expect(unknownId.body.message).toContain("gw-nothing")
      const unknownField = await generate(gw, { dryrun: true })
      expect(unknownField.status).toBe(400)
      expect(unknownField.body.message).toContain("dryrun")
      const wrongType = await generate(gw, { prune: "yes" })
      expect(wrongType.status).toBe(400)
      expect(wrongType.body.message).toContain("prune")
    },
    GENERATE_TIMEOUT
  )
})
