import { useEffect, useMemo, useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { Bars, TimeChart } from "../chart"
import { Link } from "../router"
import {
  Badge,
  Button,
  Checkbox,
  Dialog,
  Empty,
  fmtMoney,
  fmtNumber,
  Form,
  Loader,
  NumberInput,
  Page,
  Section,
  Select,
  Stat,
  Table,
  TextArea,
  TextInput,
  useAction,
  useDraft,
  useLoad
} from "../ui"
import type { Res } from "./govern/types"
import "./Compression.css"

type Settings = Res<"/api/settings/compression", "get">
type Combo = Res<"/api/context/combos", "get">["combos"][number]
type Analytics = Res<"/api/context/analytics", "get">
type Preview = Res<"/api/compression/preview", "post">

const ENGINES = ["rtk", "json", "whitespace", "caveman", "summarize"] as const

const list = (s: string) =>
  s
    .split(/[\n,]/)
    .map((x) => x.trim())
    .filter(Boolean)

const pct = (before: number, after: number) => (before > 0 ? `${(((before - after) / before) * 100).toFixed(1)} %` : "—")

/** Modes a request (or the preview) can name: default, each engine alone, each combo. */
const modeOptions = (combos: ReadonlyArray<Combo>) => [
  { value: "default", label: "default (the default combo)" },
  ...ENGINES.map((e) => ({ value: `engine:${e}`, label: `engine:${e}` })),
  ...combos.map((c) => ({ value: c.name, label: `combo: ${c.name}` }))
]

// ---------------------------------------------------------------- analytics

const daysAgo = (n: number) => new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10)

const AnalyticsView = (p: { a: Analytics }) => {
  const a = p.a
  // Every day of the range, days without savings at 0, so the axis spans the range asked for.
  const { x, series } = useMemo(() => {
    const saved = new Map(a.byDay.map((d) => [d.day, d.tokensSaved]))
    const days: string[] = []
    for (let t = Date.parse(`${a.from}T00:00:00Z`), end = Date.parse(`${a.to}T00:00:00Z`); t <= end && days.length < 400; t += 86_400_000)
      days.push(new Date(t).toISOString().slice(0, 10))
    return {
      x: days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000),
      series: [{ label: "Tokens saved", values: days.map((d) => saved.get(d) ?? 0) }]
    }
  }, [a])
  const t = a.totals
  return (
    <>
      <div class="stats">
        <Stat label="Requests compressed" value={fmtNumber(t.requests)} />
        <Stat
          label="Tokens saved"
          value={fmtNumber(t.tokensSaved)}
          hint={`${pct(t.tokensBefore, t.tokensAfter)} of ${fmtNumber(t.tokensBefore)}`}
        />
        <Stat label="Saved" value={fmtMoney(t.savedUsd)} />
        <Stat label="Injected by memory and skills" value={fmtNumber(t.injectedTokens)} />
      </div>
      {a.byDay.length === 0 ? (
        <Empty title="Nothing compressed in this range">
          Requests are compressed when they ask for it (<code>x-gateway-compression: default</code>), or when the settings below choose a
          profile, the auto-trigger or compress by default. Try the preview below first.
        </Empty>
      ) : (
        <>
          <TimeChart title="Tokens saved per day" x={x} series={series} kind="bars" format={(v) => fmtNumber(v)} />
          <div class="grid">
            <Bars
              title="Saved by engine"
              rows={a.byEngine.filter((e) => e.tokensSaved > 0).map((e) => ({ label: e.engine, value: e.tokensSaved }))}
              format={fmtNumber}
            />
            <Bars title="Saved by combo" rows={a.byCombo.map((e) => ({ label: e.combo, value: e.tokensSaved }))} format={fmtNumber} />
            <Bars title="Saved by model" rows={a.byModel.map((e) => ({ label: e.model, value: e.tokensSaved }))} format={fmtNumber} />
          </div>
        </>
      )}
    </>
  )
}

const AnalyticsSection = () => {
  const [range, setRange] = useState("30")
  const analytics = useLoad(
    () => ok(api.GET("/api/context/analytics", { params: { query: { from: daysAgo(Number(range) - 1), to: daysAgo(0) } } })),
    [range]
  )
  return (
    <Section title="Savings">
      <div class="narrow">
        <Select
          label="Range"
          value={range}
          options={[
            { value: "7", label: "last 7 days" },
            { value: "30", label: "last 30 days" },
            { value: "90", label: "last 90 days" }
          ]}
          onChange={setRange}
        />
      </div>
      <Loader of={analytics}>{(a) => <AnalyticsView a={a} />}</Loader>
    </Section>
  )
}

// ---------------------------------------------------------------- settings

const SettingsForm = (p: { settings: Settings; combos: ReadonlyArray<Combo>; saved: () => void }) => {
  const [s, setS, saved] = useDraft<Settings>(p.settings)
  const [run, busy] = useAction()
  const profile = [
    { value: "", label: "none" },
    { value: "default", label: "default" },
    ...ENGINES.map((e) => ({ value: `engine:${e}`, label: `engine:${e}` })),
    ...p.combos.map((c) => ({ value: c.name, label: `combo: ${c.name}` }))
  ]
  const save = () => {
    const sent = s
    void run(() => ok(api.PUT("/api/settings/compression", { body: sent })), "Compression settings saved").then((r) => {
      if (!r) return
      saved(sent)
      p.saved()
    })
  }
  const trig = s.autoTrigger
  return (
    <Form onSubmit={save} label="Compression settings">
      <div class="full">
        <Checkbox
          label="Compression enabled"
          checked={s.enabled}
          onChange={(enabled) => setS({ ...s, enabled })}
          hint="The global switch: off, nothing compresses, whatever a request asks."
        />
      </div>
      <div class="filters full">
        <Select
          label="Default combo"
          value={s.defaultCombo ?? ""}
          options={[{ value: "", label: "built in (json, rtk, whitespace)" }, ...p.combos.map((c) => ({ value: c.name, label: c.name }))]}
          onChange={(v) => setS({ ...s, defaultCombo: v || null })}
          hint="What 'default' means."
        />
        <Select
          label="Active profile"
          value={s.activeProfile ?? ""}
          options={profile}
          onChange={(v) => setS({ ...s, activeProfile: v || null })}
          hint="Used by every request nothing else chose for."
        />
        <NumberInput
          label="Injection budget (tokens)"
          value={s.injectionMaxTokens}
          min={0}
          step={1}
          onInput={(v) => setS({ ...s, injectionMaxTokens: v ?? 0 })}
          hint="Memory and skills added per request, at most (0: none)."
        />
      </div>
      <div class="full">
        <Checkbox
          label="Compress every eligible request by default"
          checked={s.compressByDefault}
          onChange={(compressByDefault) => setS({ ...s, compressByDefault })}
          hint="With the default combo, when nothing else chose."
        />
        <Checkbox
          label="Auto-trigger on long prompts"
          checked={trig.enabled}
          onChange={(enabled) => setS({ ...s, autoTrigger: { ...trig, enabled } })}
        />
      </div>
      {trig.enabled && (
        <div class="filters full">
          <NumberInput
            label="Threshold (tokens)"
            value={trig.thresholdTokens ?? undefined}
            min={1}
            step={1}
            onInput={(v) => setS({ ...s, autoTrigger: { ...trig, thresholdTokens: v ?? null } })}
            hint="Empty: this test is off."
          />
          <NumberInput
            label="Share of the context window"
            value={trig.windowShare ?? undefined}
            min={0.05}
            max={1}
            step={0.05}
            onInput={(v) => setS({ ...s, autoTrigger: { ...trig, windowShare: v ?? null } })}
            hint="0.05 to 1; empty: off."
          />
        </div>
      )}
      <Button kind="primary" type="submit" busy={busy}>
        Save settings
      </Button>
    </Form>
  )
}

// ---------------------------------------------------------------- combos

const NewCombo = (p: { done: () => void }) => {
  const [name, setName] = useState("")
  const [description, setDescription] = useState("")
  const [engines, setEngines] = useState("json, rtk, whitespace")
  const [run, busy] = useAction()
  const submit = () =>
    void run(
      () =>
        ok(
          api.POST("/api/context/combos", {
            body: { name, description, engines: list(engines).map((engine) => ({ engine: engine as (typeof ENGINES)[number] })) }
          })
        ),
      (c) => `Combo ${c.name} created`
    ).then((r) => r && p.done())
  return (
    <Form onSubmit={submit} label="New compression combo">
      <TextInput label="Name" value={name} onInput={setName} required />
      <TextInput label="Description" value={description} onInput={setDescription} />
      <TextInput label="Engines, in order" value={engines} onInput={setEngines} required hint={`Comma-separated: ${ENGINES.join(", ")}.`} />
      <Button kind="primary" type="submit" busy={busy}>
        Create combo
      </Button>
    </Form>
  )
}

const Assignments = (p: { combo: Combo; done: () => void }) => {
  const [routing, setRouting] = useState(p.combo.assignments.routingCombos.join(", "))
  const [models, setModels] = useState(p.combo.assignments.models.join(", "))
  const [run, busy] = useAction()
  const save = () =>
    void run(
      () =>
        ok(
          api.PUT("/api/context/combos/{id}/assignments", {
            params: { path: { id: p.combo.id } },
            body: { routingCombos: list(routing), models: list(models) }
          })
        ),
      "Assignments saved"
    ).then((r) => r && p.done())
  return (
    <Form onSubmit={save} label={`Assignments of ${p.combo.name}`}>
      <TextInput
        label="Routing combos"
        value={routing}
        onInput={setRouting}
        hint={
          <>
            Names of <Link to="/combos">routing combos</Link>, comma-separated: their requests use this compression.
          </>
        }
      />
      <TextInput label="Models" value={models} onInput={setModels} hint="provider/model or connection/model ids, comma-separated." />
      <Button kind="primary" type="submit" busy={busy}>
        Save assignments
      </Button>
    </Form>
  )
}

const Combos = (p: { combos: Res<"/api/context/combos", "get">; reload: () => void }) => {
  const [creating, setCreating] = useState(false)
  const [assigning, setAssigning] = useState<Combo | null>(null)
  const [run] = useAction()
  const remove = (c: Combo) => {
    if (!confirm(`Delete the combo ${c.name}? Its assignments go with it.`)) return
    void run(() => ok(api.DELETE("/api/context/combos/{id}", { params: { path: { id: c.id } } })), `Combo ${c.name} deleted`).then(() =>
      p.reload()
    )
  }
  return (
    <Section title="Compression combos" actions={<Button onClick={() => setCreating(true)}>New combo</Button>}>
      <Table
        caption="Compression combos"
        rowKey={(c) => c.id}
        rows={p.combos.combos}
        empty={
          <Empty title="No combos yet">
            The built-in default (json, rtk, whitespace) works without one. Create a combo to choose engines and their order, then assign it
            to routing combos or models.
          </Empty>
        }
        columns={[
          {
            label: "Name",
            render: (c) => (
              <>
                <strong>{c.name}</strong>
                {c.description && <div class="muted small">{c.description}</div>}
              </>
            )
          },
          { label: "Engines", render: (c) => c.engines.map((e) => e.engine).join(" → ") },
          {
            label: "Assigned to",
            render: (c) => [...c.assignments.routingCombos.map((r) => `combo ${r}`), ...c.assignments.models].join(", ") || "—"
          },
          {
            label: "Actions",
            render: (c) => (
              <div class="row">
                <Button kind="plain" onClick={() => setAssigning(c)} aria-label={`Assign ${c.name}`}>
                  Assign
                </Button>
                <Button kind="danger" onClick={() => remove(c)} aria-label={`Delete ${c.name}`}>
                  Delete
                </Button>
              </div>
            )
          }
        ]}
      />
      <Dialog open={creating} title="New compression combo" onClose={() => setCreating(false)}>
        <NewCombo
          done={() => {
            setCreating(false)
            p.reload()
          }}
        />
      </Dialog>
      <Dialog open={assigning !== null} title={`Assign ${assigning?.name ?? ""}`} onClose={() => setAssigning(null)}>
        {assigning && (
          <Assignments
            combo={assigning}
            done={() => {
              setAssigning(null)
              p.reload()
            }}
          />
        )}
      </Dialog>
    </Section>
  )
}

// ---------------------------------------------------------------- preview

const SAMPLE = `Here is the build log:



error: something failed at line 3      
   
   


{
  "status":   "failed",
  "retry":    true
}`

/** The text as a request body: a JSON object is used as it is, anything else is one user message. */
const asBody = (text: string): Record<string, unknown> => {
  const t = text.trim()
  if (t.startsWith("{")) {
    try {
      const v = JSON.parse(t) as unknown
      if (v && typeof v === "object" && !Array.isArray(v)) return v as Record<string, unknown>
    } catch {
      // not JSON: prose
    }
  }
  if (t.startsWith("[")) {
    try {
      const v = JSON.parse(t) as unknown
      if (Array.isArray(v)) return { model: "preview", messages: v }
    } catch {
      // not JSON: prose
    }
  }
  return { model: "preview", messages: [{ role: "user", content: text }] }
}

const PreviewSection = (p: { combos: ReadonlyArray<Combo> }) => {
  const [text, setText] = useState(SAMPLE)
  const [mode, setMode] = useState("default")
  const [format, setFormat] = useState<"openai-chat" | "openai-responses" | "anthropic" | "gemini" | "ollama">("openai-chat")
  const [result, setResult] = useState<Preview | null>(null)
  const [run, busy] = useAction()
  const preview = () =>
    void run(() => ok(api.POST("/api/compression/preview", { body: { format, mode, body: asBody(text) } }))).then((r) => r && setResult(r))
  return (
    <Section title="Preview">
      <Form onSubmit={preview} label="Compression preview">
        <TextArea
          label="Text or request body"
          value={text}
          onInput={setText}
          rows={8}
          mono
          hint="Prose becomes one user message; a JSON request body (or a messages array) is used as it is."
        />
        <div class="filters full">
          <Select label="Mode" value={mode} options={modeOptions(p.combos)} onChange={setMode} />
          <Select
            label="Format"
            value={format}
            options={["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"] as const}
            onChange={setFormat}
          />
        </div>
        <Button kind="primary" type="submit" busy={busy}>
          Preview
        </Button>
      </Form>
      {result && (
        <div class="preview-result" aria-live="polite">
          <div class="stats">
            <Stat label="Tokens before" value={fmtNumber(result.tokensBefore)} />
            <Stat label="Tokens after" value={fmtNumber(result.tokensAfter)} hint={result.tokenizer} />
            <Stat label="Saved" value={pct(result.tokensBefore, result.tokensAfter)} />
          </div>
          <Table
            caption="Savings per engine"
            rowKey={(e) => e.engine}
            rows={result.engines}
            empty={<p class="muted">No engine changed anything in mode {result.mode}.</p>}
            columns={[
              { label: "Engine", render: (e) => e.engine },
              { label: "Before", class: "num", render: (e) => fmtNumber(e.tokensBefore) },
              { label: "After", class: "num", render: (e) => fmtNumber(e.tokensAfter) },
              { label: "Saved", class: "num", render: (e) => fmtNumber(e.tokensSaved) }
            ]}
          />
          <h3>What goes upstream</h3>
          <pre class="mono preview-body" tabIndex={0}>
            {JSON.stringify(result.body, null, 2)}
          </pre>
        </div>
      )}
    </Section>
  )
}

// ---------------------------------------------------------------- engines

const ENGINE_ROUTES = {
  caveman: "/api/context/caveman/config",
  rtk: "/api/context/rtk/config",
  summarize: "/api/context/summarize/config"
} as const
type ConfigEngine = keyof typeof ENGINE_ROUTES

const EngineConfig = (p: { engine: ConfigEngine }) => {
  const route = ENGINE_ROUTES[p.engine]
  const config = useLoad(() => ok(api.GET(route)), [route])
  const [text, setText] = useState("")
  useEffect(() => {
    if (config.data) setText(JSON.stringify(config.data, null, 2))
  }, [config.data])
  const [run, busy] = useAction()
  const save = () =>
    void run(async () => {
      let body: Record<string, unknown>
      try {
        body = JSON.parse(text) as Record<string, unknown>
      } catch (e) {
        throw new Error(`not valid JSON: ${e instanceof Error ? e.message : String(e)}`)
      }
      return ok(api.PUT(route, { body }))
    }, `${p.engine} settings saved`).then((r) => r && config.reload())
  return (
    <Loader of={config}>
      {() => (
        <Form onSubmit={save} label={`${p.engine} settings`}>
          <TextArea
            label={`${p.engine} settings (JSON)`}
            value={text}
            onInput={setText}
            rows={8}
            mono
            hint={<>docs/compression.md, "Engines", lists each field.</>}
          />
          <Button kind="primary" type="submit" busy={busy}>
            Save {p.engine}
          </Button>
        </Form>
      )}
    </Loader>
  )
}

const Engines = () => {
  const [engine, setEngine] = useState<ConfigEngine>("rtk")
  return (
    <Section title="Engine settings">
      <div class="narrow">
        <Select
          label="Engine"
          value={engine}
          options={["rtk", "caveman", "summarize"] as const}
          onChange={setEngine}
          hint="json and whitespace take their settings in a combo step."
        />
      </div>
      <EngineConfig key={engine} engine={engine} />
    </Section>
  )
}

const RtkTester = () => {
  const [text, setText] = useState("")
  const [command, setCommand] = useState("")
  const [result, setResult] = useState<Res<"/api/context/rtk/test", "post"> | null>(null)
  const [run, busy] = useAction()
  const test = () =>
    void run(() => ok(api.POST("/api/context/rtk/test", { body: { text, ...(command.trim() ? { command: command.trim() } : {}) } }))).then(
      (r) => r && setResult(r)
    )
  return (
    <Section title="rtk filter tester">
      <Form onSubmit={test} label="Test rtk">
        <TextInput
          label="Command that produced it"
          value={command}
          onInput={setCommand}
          placeholder="npm test"
          hint="Chooses the filter, as the tool call's command would."
        />
        <TextArea label="Tool output" value={text} onInput={setText} rows={6} mono />
        <Button kind="primary" type="submit" busy={busy}>
          Test
        </Button>
      </Form>
      {result && (
        <div class="preview-result" aria-live="polite">
          <p>
            Filter <Badge kind={result.filter ? "info" : "muted"}>{result.filter ?? "none"}</Badge>: {fmtNumber(result.linesBefore)} →{" "}
            {fmtNumber(result.linesAfter)} lines, {fmtNumber(result.tokensBefore)} → {fmtNumber(result.tokensAfter)} tokens.
            {result.steps.length > 0 && <span class="muted"> Steps: {result.steps.join(", ")}.</span>}
          </p>
          <pre class="mono preview-body" tabIndex={0}>
            {result.output}
          </pre>
        </div>
      )}
    </Section>
  )
}

export default function CompressionPage() {
  const settings = useLoad(() => ok(api.GET("/api/settings/compression")))
  const combos = useLoad(() => ok(api.GET("/api/context/combos")))
  return (
    <Page title="Compression" description="Fewer tokens upstream: what was saved, how requests are chosen for it, and a preview.">
      <AnalyticsSection />
      <Section title="Settings">
        <Loader of={settings}>{(s) => <SettingsForm settings={s} combos={combos.data?.combos ?? []} saved={settings.reload} />}</Loader>
      </Section>
      <PreviewSection combos={combos.data?.combos ?? []} />
      <Loader of={combos}>{(c) => <Combos combos={c} reload={combos.reload} />}</Loader>
      <div class="grid">
        <Engines />
        <RtkTester />
      </div>
    </Page>
  )
}
