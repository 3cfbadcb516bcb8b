import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { Link } from "../router"
import {
  Badge,
  Button,
  Checkbox,
  Dialog,
  Empty,
  fmtDate,
  fmtNumber,
  Form,
  Loader,
  Page,
  Section,
  Select,
  Stat,
  Table,
  TextArea,
  TextInput,
  useAction,
  useLoad
} from "../ui"
import type { Res } from "./govern/types"
import "./Skills.css"

type Skill = Res<"/api/agent-skills", "get">["skills"][number]
type ContextSkill = Res<"/api/context/skills", "get">["skills"][number]
type Memory = Res<"/api/context/memory", "get">["entries"][number]
type Report = Res<"/api/agent-skills/generate", "post">

const list = (s: string) =>
  s
    .split(/[\n,]/)
    .map((x) => x.trim())
    .filter(Boolean)

// ---------------------------------------------------------------- the agent-skill catalog

const SkillText = (p: { skill: Skill }) => {
  const raw = useLoad(
    () => ok(api.GET("/api/agent-skills/{id}/raw", { params: { path: { id: p.skill.id } }, parseAs: "text" })),
    [p.skill.id]
  )
  return (
    <>
      <p class="muted">
        {p.skill.description} Served at <a href={p.skill.rawUrl}>{p.skill.rawUrl}</a> for agents to fetch.
      </p>
      <Loader of={raw}>
        {(text) => (
          <pre class="mono skill-text" aria-label={`Text of ${p.skill.name}`} tabIndex={0}>
            {text}
          </pre>
        )}
      </Loader>
    </>
  )
}

const Catalog = () => {
  const [category, setCategory] = useState<"" | "api" | "cli">("")
  const skills = useLoad(() => ok(api.GET("/api/agent-skills", { params: { query: category ? { category } : {} } })), [category])
  const coverage = useLoad(() => ok(api.GET("/api/agent-skills/coverage")))
  const [open, setOpen] = useState<Skill | null>(null)
  const [report, setReport] = useState<Report | null>(null)
  const [run, busy] = useAction()
  const generate = (dryRun: boolean) =>
    void run(
      () => ok(api.POST("/api/agent-skills/generate", { body: { dryRun } })),
      (r) => (r.errors.length ? undefined : dryRun ? "Checked" : `${r.generated.length} skill(s) written`)
    ).then((r) => {
      if (!r) return
      setReport(r)
      skills.reload()
      coverage.reload()
    })
  return (
    <Section
      title="Agent skills"
      actions={
        <>
          <Button busy={busy} onClick={() => generate(true)}>
            Check (dry run)
          </Button>
          <Button kind="primary" busy={busy} onClick={() => generate(false)}>
            Regenerate
          </Button>
        </>
      }
    >
      <p class="muted">
        Markdown files that teach an agent this gateway's API and CLI. Give an agent a skill's address, or inject it into prompts below.
      </p>
      {coverage.data && (
        <div class="stats">
          <Stat label="API skills" value={`${coverage.data.api.have} / ${coverage.data.api.total}`} />
          <Stat label="CLI skills" value={`${coverage.data.cli.have} / ${coverage.data.cli.total}`} />
          <Stat label="Generated" value={fmtDate(coverage.data.generatedAt)} />
        </div>
      )}
      {report && (
        <div class="report" role="status">
          <p>
            {report.dryRun ? "Dry run" : "Generated"} in <code>{report.dir}</code>: {report.generated.length}{" "}
            {report.dryRun ? "would change" : "written"}, {report.unchanged.length} unchanged, {report.pruned.length} pruned
            {report.orphansDetected.length > 0 && `, orphans: ${report.orphansDetected.join(", ")}`}.
          </p>
          {report.errors.length > 0 && (
            <ul>
              {report.errors.map((e) => (
                <li key={e.message}>
                  <Badge kind="bad">{e.code}</Badge> {e.message}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      <div class="narrow">
        <Select
          label="Category"
          value={category}
          options={[
            { value: "", label: "all" },
            { value: "api", label: "API" },
            { value: "cli", label: "CLI" }
          ]}
          onChange={setCategory}
        />
      </div>
      <Loader of={skills}>
        {(d) => (
          <Table
            caption="Agent skills"
            rowKey={(s) => s.id}
            rows={d.skills}
            empty={<Empty title="No skill files">Press Regenerate to write them from the gateway's own routes and commands.</Empty>}
            columns={[
              {
                label: "Skill",
                render: (s) => (
                  <Button kind="plain" class="link-button" onClick={() => setOpen(s)}>
                    {s.name}
                  </Button>
                )
              },
              { label: "Category", render: (s) => <Badge kind="info">{s.category}</Badge> },
              { label: "Area", render: (s) => s.area },
              { label: "What it covers", render: (s) => <span class="small">{s.description}</span> }
            ]}
          />
        )}
      </Loader>
      <Dialog open={open !== null} title={open?.name ?? ""} onClose={() => setOpen(null)}>
        {open && <SkillText skill={open} />}
      </Dialog>
    </Section>
  )
}

// ---------------------------------------------------------------- context skills (injected into prompts)

const NewContextSkill = (p: { catalog: ReadonlyArray<Skill>; done: () => void }) => {
  const [name, setName] = useState("")
  const [source, setSource] = useState("")
  const [text, setText] = useState("")
  const [always, setAlways] = useState(false)
  const [keywords, setKeywords] = useState("")
  const [models, setModels] = useState("")
  const [run, busy] = useAction()
  const submit = () =>
    void run(
      () =>
        ok(
          api.POST("/api/context/skills", {
            body: {
              name,
              ...(source ? { catalogId: source } : { text }),
              trigger: { always, keywords: list(keywords), models: list(models) }
            }
          })
        ),
      (r) => `Skill ${r.name} added`
    ).then((r) => r && p.done())
  return (
    <Form onSubmit={submit} label="New prompt skill">
      <TextInput label="Name" value={name} onInput={setName} required />
      <Select
        label="Text"
        value={source}
        options={[{ value: "", label: "my own text" }, ...p.catalog.map((s) => ({ value: s.id, label: `catalog: ${s.name}` }))]}
        onChange={setSource}
      />
      {!source && <TextArea label="Skill text" value={text} onInput={setText} rows={5} />}
      <Checkbox label="Always inject" checked={always} onChange={setAlways} />
      <TextInput label="Keywords" value={keywords} onInput={setKeywords} hint="Comma-separated: injected when a user turn contains one." />
      <TextInput label="Models" value={models} onInput={setModels} hint="Comma-separated globs: injected for these models." />
      <Button kind="primary" type="submit" busy={busy}>
        Add skill
      </Button>
    </Form>
  )
}

const trigger = (s: ContextSkill) =>
  [
    s.trigger.always && "always",
    s.trigger.keywords.length > 0 && `keywords: ${s.trigger.keywords.join(", ")}`,
    s.trigger.models.length > 0 && `models: ${s.trigger.models.join(", ")}`
  ]
    .filter(Boolean)
    .join("; ") || "never (no trigger)"

const ContextSkills = () => {
  const skills = useLoad(() => ok(api.GET("/api/context/skills")))
  const catalog = useLoad(() => ok(api.GET("/api/agent-skills")))
  const [creating, setCreating] = useState(false)
  const [view, setView] = useState<ContextSkill | null>(null)
  const [run] = useAction()
  const toggle = (s: ContextSkill) =>
    void run(
      () => ok(api.PUT("/api/context/skills/{id}", { params: { path: { id: s.id } }, body: { enabled: !s.enabled } })),
      `${s.name} ${s.enabled ? "disabled" : "enabled"}`
    ).then(() => skills.reload())
  const remove = (s: ContextSkill) => {
    if (!confirm(`Remove the skill ${s.name}?`)) return
    void run(() => ok(api.DELETE("/api/context/skills/{id}", { params: { path: { id: s.id } } })), `${s.name} removed`).then(() =>
      skills.reload()
    )
  }
  return (
    <Section title="Skills injected into prompts" actions={<Button onClick={() => setCreating(true)}>Add skill</Button>}>
      <p class="muted">
        Added to a request's system prompt when its trigger matches, within the injection budget of the{" "}
        <Link to="/compression">compression settings</Link>.
      </p>
      <Loader of={skills}>
        {(d) => (
          <Table
            caption="Prompt skills"
            rowKey={(s) => s.id}
            rows={d.skills}
            empty={<Empty title="No prompt skills">Add one from the catalog or with your own text, and say when it applies.</Empty>}
            columns={[
              {
                label: "Name",
                render: (s) => (
                  <Button kind="plain" class="link-button" onClick={() => setView(s)}>
                    {s.name}
                  </Button>
                )
              },
              { label: "Source", render: (s) => (s.catalogId ? `catalog: ${s.catalogId}` : s.source) },
              { label: "When", render: (s) => trigger(s) },
              { label: "Tokens", class: "num", render: (s) => fmtNumber(s.tokens) },
              { label: "State", render: (s) => <Badge kind={s.enabled ? "ok" : "muted"}>{s.enabled ? "on" : "off"}</Badge> },
              {
                label: "Actions",
                render: (s) => (
                  <div class="row">
                    <Button kind="plain" onClick={() => toggle(s)} aria-label={`${s.enabled ? "Disable" : "Enable"} ${s.name}`}>
                      {s.enabled ? "Disable" : "Enable"}
                    </Button>
                    <Button kind="danger" onClick={() => remove(s)} aria-label={`Remove ${s.name}`}>
                      Remove
                    </Button>
                  </div>
                )
              }
            ]}
          />
        )}
      </Loader>
      <Dialog open={creating} title="Add a prompt skill" onClose={() => setCreating(false)}>
        <NewContextSkill
          catalog={catalog.data?.skills ?? []}
          done={() => {
            setCreating(false)
            skills.reload()
          }}
        />
      </Dialog>
      <Dialog open={view !== null} title={view?.name ?? ""} onClose={() => setView(null)}>
        {view && (
          <pre class="mono skill-text" tabIndex={0}>
            {view.text}
          </pre>
        )}
      </Dialog>
    </Section>
  )
}

// ---------------------------------------------------------------- memory

const MemorySection = () => {
  const memory = useLoad(() => ok(api.GET("/api/context/memory")))
  const [text, setText] = useState("")
  const [scope, setScope] = useState<"global" | "key" | "session">("global")
  const [scopeId, setScopeId] = useState("")
  const [tags, setTags] = useState("")
  const [run, busy] = useAction()
  const add = () =>
    void run(
      () =>
        ok(
          api.POST("/api/context/memory", {
            body: { text, scope, scopeId: scope === "global" ? null : scopeId.trim() || null, tags: list(tags) }
          })
        ),
      "Memory saved"
    ).then((r) => {
      if (!r) return
      setText("")
      setTags("")
      memory.reload()
    })
  const toggle = (m: Memory) =>
    void run(() => ok(api.PUT("/api/context/memory/{id}", { params: { path: { id: m.id } }, body: { enabled: !m.enabled } }))).then(() =>
      memory.reload()
    )
  const remove = (m: Memory) => {
    if (!confirm("Remove this memory entry?")) return
    void run(() => ok(api.DELETE("/api/context/memory/{id}", { params: { path: { id: m.id } } })), "Memory removed").then(() =>
      memory.reload()
    )
  }
  return (
    <Section title="Memory">
      <p class="muted">What every model should know (global), or the requests of one API key or session; added to the system prompt.</p>
      <Form onSubmit={add} label="New memory entry">
        <TextArea label="Memory text" value={text} onInput={setText} rows={3} />
        <div class="filters full">
          <Select label="Scope" value={scope} options={["global", "key", "session"] as const} onChange={setScope} />
          {scope !== "global" && (
            <TextInput label={scope === "key" ? "API key id" : "Session id"} value={scopeId} onInput={setScopeId} required />
          )}
          <TextInput label="Tags" value={tags} onInput={setTags} hint="Comma-separated." />
        </div>
        <Button kind="primary" type="submit" busy={busy}>
          Save memory
        </Button>
      </Form>
      <Loader of={memory}>
        {(d) => (
          <Table
            caption="Memory entries"
            rowKey={(m) => m.id}
            rows={d.entries}
            empty={
              <Empty title="No memory yet">Write a fact above, such as "Our services run on Node 20", and it joins every prompt.</Empty>
            }
            columns={[
              { label: "Text", render: (m) => <span class="memory-text">{m.text}</span> },
              { label: "Scope", render: (m) => (m.scopeId ? `${m.scope}: ${m.scopeId}` : m.scope) },
              { label: "Tags", render: (m) => m.tags.join(", ") || "—" },
              { label: "Tokens", class: "num", render: (m) => fmtNumber(m.tokens) },
              {
                label: "Actions",
                render: (m) => (
                  <div class="row">
                    <Button kind="plain" onClick={() => toggle(m)} aria-label={`${m.enabled ? "Disable" : "Enable"} memory ${m.id}`}>
                      {m.enabled ? "Disable" : "Enable"}
                    </Button>
                    <Button kind="danger" onClick={() => remove(m)} aria-label={`Remove memory ${m.id}`}>
                      Remove
                    </Button>
                  </div>
                )
              }
            ]}
          />
        )}
      </Loader>
    </Section>
  )
}

export default function SkillsPage() {
  return (
    <Page title="Skills" description="The agent-skill catalog, and the skills and memory the gateway adds to prompts.">
      <Catalog />
      <ContextSkills />
      <MemorySection />
    </Page>
  )
}
