import { useMemo, useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { Link } from "../router"
import {
  Badge,
  Button,
  Checkbox,
  Confirm,
  Dialog,
  Empty,
  Field,
  fmtNumber,
  Form,
  Loader,
  NumberInput,
  Page,
  Section,
  Select,
  Table,
  TextArea,
  TextInput,
  useAction,
  useLoad
} from "../ui"
import "./Combos.css"

// Combos: a name clients use as a model id, a strategy that orders its targets, and the
// strategy's own settings (docs/routing.md). Also the virtual auto models, and auto combos that
// tune the auto scorer (weights, pack, router strategy, exploration, budget, SLA).

type ComboView = Awaited<ReturnType<typeof loadCombos>>["combos"][number]
const loadCombos = () => ok(api.GET("/api/combos"))

/** The 17 strategies (src/routing/types.ts STRATEGY_NAMES) with what each does. */
export const STRATEGIES = [
  ["priority", "The given order: the first target, then the next as fallback."],
  ["weighted", "Weighted random: each target is picked with probability weight / sum of weights."],
  ["round-robin", "Rotates the first target on every request."],
  ["context-relay", "A session (X-Session-Id) stays on its target; on failure the next one takes over the conversation."],
  ["fill-first", "The given order, but targets with exhausted quota move to the end."],
  ["p2c", "Power of two choices: of two random targets the less loaded goes first."],
  ["random", "Uniform random order (repeated targets count once)."],
  ["least-used", "The target with the fewest requests since start goes first."],
  ["cost-optimized", "Cheapest first (0.6 × input + 0.4 × output price per 1M tokens)."],
  ["reset-aware", "The shortest quota window first."],
  ["reset-window", "The soonest quota reset first."],
  ["headroom", "The largest share of quota left first."],
  ["strict-random", "Random first pick from the raw list: a target listed twice is twice as likely."],
  ["auto", "The auto scorer over the targets (or every connected model): weights, pack, router strategy."],
  ["lkgp", "The last target that succeeded goes first, then the given order."],
  ["context-optimized", "Smallest context window that fits the prompt first; too-small windows are dropped."],
  ["fusion", "Asks every target at once; a judge model writes one answer from theirs."]
] as const
type Strategy = (typeof STRATEGIES)[number][0]

const FACTORS = [
  "health",
  "quota",
  "costInv",
  "latencyInv",
  "taskFit",
  "stability",
  "tierPriority",
  "tierAffinity",
  "specificityMatch",
  "contextAffinity",
  "connectionDensity",
  "resetWindowAffinity"
] as const
const FACTOR_HINT: Record<(typeof FACTORS)[number], string> = {
  health: "Connection health and breaker state",
  quota: "Quota left",
  costInv: "Cheaper is better",
  latencyInv: "Faster is better",
  taskFit: "Fit for the task type (coding, review…)",
  stability: "Few recent errors",
  tierPriority: "Account tier (ultra > pro > standard > free)",
  tierAffinity: "Model tier fits the request",
  specificityMatch: "Strong models for hard requests",
  contextAffinity: "Context window fits the prompt",
  connectionDensity: "Spreads over providers",
  resetWindowAffinity: "Quota resetting soon"
}
const PACKS = ["", "balanced", "ship-fast", "cost-saver", "quality-first", "offline-friendly", "reliability-first"] as const
const ROUTERS = ["", "rules", "cost", "latency", "sla-aware", "lkgp"] as const

/** Strategies where the order of the targets is meaningful (the given order or the tie-break). */
const WEIGHTED: ReadonlySet<string> = new Set(["weighted"])

interface Target {
  model: string
  weight: number | undefined
}
interface Draft {
  id?: string
  name: string
  description: string
  enabled: boolean
  strategy: Strategy
  targets: Target[]
  // fusion
  judgeModel: string
  minPanel: number | undefined
  stragglerGraceMs: number | undefined
  panelHardTimeoutMs: number | undefined
  // auto
  routerStrategy: string
  customRouter: string
  modePack: string
  weights: Partial<Record<(typeof FACTORS)[number], number>>
  candidatePool: string[]
  budgetCap: number | undefined
  explorationRate: number | undefined
  slaTargetP95Ms: number | undefined
  slaMaxErrorRate: number | undefined
  slaMaxCostPer1MTokens: number | undefined
  slaHardConstraints: boolean
}

const emptyDraft = (strategy: Strategy = "priority"): Draft => ({
  name: "",
  description: "",
  enabled: true,
  strategy,
  targets: strategy === "auto" ? [] : [{ model: "", weight: undefined }],
  judgeModel: "",
  minPanel: undefined,
  stragglerGraceMs: undefined,
  panelHardTimeoutMs: undefined,
  routerStrategy: "",
  customRouter: "",
  modePack: "",
  weights: {},
  candidatePool: [],
  budgetCap: undefined,
  explorationRate: undefined,
  slaTargetP95Ms: undefined,
  slaMaxErrorRate: undefined,
  slaMaxCostPer1MTokens: undefined,
  slaHardConstraints: false
})

const num = (v: unknown): number | undefined => (typeof v === "number" ? v : undefined)
const str = (v: unknown): string => (typeof v === "string" ? v : "")

const draftOf = (c: ComboView): Draft => {
  const cfg = c.config as Record<string, unknown>
  const tuning = (cfg.fusionTuning ?? {}) as Record<string, unknown>
  const auto = (cfg.auto ?? {}) as Record<string, unknown>
  const router = str(cfg.routerStrategy) || str(auto.routerStrategy)
  const known = (ROUTERS as ReadonlyArray<string>).includes(router)
  return {
    id: c.id,
    name: c.name,
    description: c.description ?? "",
    enabled: c.enabled,
    strategy: c.strategy as Strategy,
    targets: c.targets.map((t) => ({ model: t.model, weight: t.weight })),
    judgeModel: str(cfg.judgeModel),
    minPanel: num(tuning.minPanel),
    stragglerGraceMs: num(tuning.stragglerGraceMs),
    panelHardTimeoutMs: num(tuning.panelHardTimeoutMs),
    routerStrategy: known ? router : "custom",
    customRouter: known ? "" : router,
    modePack: str(cfg.modePack),
    weights: { ...((auto.weights ?? {}) as Draft["weights"]) },
    candidatePool: Array.isArray(auto.candidatePool) ? (auto.candidatePool as string[]) : [],
    budgetCap: num(cfg.budgetCap),
    explorationRate: num(cfg.explorationRate),
    slaTargetP95Ms: num(cfg.slaTargetP95Ms),
    slaMaxErrorRate: num(cfg.slaMaxErrorRate),
    slaMaxCostPer1MTokens: num(cfg.slaMaxCostPer1MTokens),
    slaHardConstraints: cfg.slaHardConstraints === true
  }
}

/** The body the API takes: only the config keys of the chosen strategy (others are refused). */
const bodyOf = (d: Draft) => {
  const config: Record<string, unknown> = {}
  if (d.strategy === "fusion") {
    if (d.judgeModel.trim()) config.judgeModel = d.judgeModel.trim()
    const tuning = { minPanel: d.minPanel, stragglerGraceMs: d.stragglerGraceMs, panelHardTimeoutMs: d.panelHardTimeoutMs }
    if (Object.values(tuning).some((v) => v !== undefined))
      config.fusionTuning = Object.fromEntries(Object.entries(tuning).filter(([, v]) => v !== undefined))
  }
  if (d.strategy === "auto") {
    const router = d.routerStrategy === "custom" ? d.customRouter.trim() : d.routerStrategy
    if (router) config.routerStrategy = router
    if (d.modePack) config.modePack = d.modePack
    const weights = Object.fromEntries(Object.entries(d.weights).filter(([, v]) => v !== undefined))
    const auto: Record<string, unknown> = {}
    if (Object.keys(weights).length > 0) auto.weights = weights
    if (d.candidatePool.length > 0) auto.candidatePool = d.candidatePool
    if (Object.keys(auto).length > 0) config.auto = auto
    if (d.budgetCap !== undefined) config.budgetCap = d.budgetCap
    if (d.explorationRate !== undefined) config.explorationRate = d.explorationRate
    if (d.slaTargetP95Ms !== undefined) config.slaTargetP95Ms = d.slaTargetP95Ms
    if (d.slaMaxErrorRate !== undefined) config.slaMaxErrorRate = d.slaMaxErrorRate
    if (d.slaMaxCostPer1MTokens !== undefined) config.slaMaxCostPer1MTokens = d.slaMaxCostPer1MTokens
    if (d.slaHardConstraints) config.slaHardConstraints = true
  }
  return {
    name: d.name.trim(),
    strategy: d.strategy,
    targets: d.targets
      .filter((t) => t.model.trim() !== "")
      .map((t) => ({ model: t.model.trim(), ...(t.weight !== undefined ? { weight: t.weight } : {}) })),
    config,
    description: d.description.trim() || null,
    enabled: d.enabled
  }
}

/** A labelled text input with suggestions (a datalist): pick a known model or type any id. */
const ModelInput = (p: { label: string; value: string; onInput: (v: string) => void; list: string; required?: boolean; hint?: string }) => (
  <Field label={p.label} hint={p.hint}>
    {(id, d) => (
      <input
        id={id}
        aria-describedby={d}
        list={p.list}
        value={p.value}
        required={p.required}
        placeholder="provider/model"
        onInput={(e) => p.onInput((e.currentTarget as HTMLInputElement).value)}
      />
    )}
  </Field>
)

/** What the catalog knows of a model id: price (USD per 1M tokens) and context window. */
type ModelInfo = { input: number; output: number; contextWindow: number }

/** The per-target hint the strategy ranks by (cost-optimized: price; context-optimized: window). */
const targetHint = (strategy: Strategy, info: ModelInfo | undefined): string | undefined => {
  if (strategy === "cost-optimized")
    return info
      ? `blended $${(0.6 * info.input + 0.4 * info.output).toFixed(2)} per 1M tokens (in $${info.input}, out $${info.output})`
      : "no known price: ranked after priced targets"
  if (strategy === "context-optimized")
    return info && info.contextWindow > 0
      ? `context window ${fmtNumber(info.contextWindow)} tokens`
      : "unknown window: ranked after known ones"
  return undefined
}

const TargetsEditor = (p: { d: Draft; set: (f: (d: Draft) => Draft) => void; list: string; info: ReadonlyMap<string, ModelInfo> }) => {
  const { d, set } = p
  const update = (i: number, t: Partial<Target>) => set((x) => ({ ...x, targets: x.targets.map((o, j) => (j === i ? { ...o, ...t } : o)) }))
  const move = (i: number, by: number) =>
    set((x) => {
      const t = [...x.targets]
      const j = i + by
      if (j < 0 || j >= t.length) return x
      ;[t[i], t[j]] = [t[j]!, t[i]!]
      return { ...x, targets: t }
    })
  const weighted = WEIGHTED.has(d.strategy)
  const total = d.targets.reduce((s, t) => s + (t.weight ?? 1), 0)
  return (
    <fieldset class="full combo-targets">
      <legend>
        {d.strategy === "fusion"
          ? "Panel (targets asked at once)"
          : d.strategy === "auto"
            ? "Candidates (empty: every connected model)"
            : "Targets, first tried first"}
      </legend>
      {d.targets.length === 0 && <p class="muted">No targets.</p>}
      {d.strategy === "strict-random" && <p class="muted small">List a target twice to make it twice as likely to be tried first.</p>}
      {d.strategy === "context-relay" && (
        <p class="muted small">Clients keep a conversation on one target by sending an X-Session-Id header.</p>
      )}
      {(d.strategy === "fill-first" || d.strategy === "headroom" || d.strategy === "reset-aware" || d.strategy === "reset-window") && (
        <p class="muted small">
          Ranked by the quota each upstream reports (see Resilience); targets without a report keep the given order.
        </p>
      )}
      <ol>
        {d.targets.map((t, i) => (
          <li key={i} class={weighted ? "combo-target combo-target-weighted" : "combo-target"}>
            <ModelInput
              label={`Target ${i + 1} model`}
              value={t.model}
              onInput={(v) => update(i, { model: v })}
              list={p.list}
              required={d.strategy !== "auto"}
              hint={targetHint(d.strategy, p.info.get(t.model.trim()))}
            />
            {weighted && (
              <NumberInput
                label={`Target ${i + 1} weight`}
                value={t.weight}
                onInput={(v) => update(i, { weight: v })}
                min={0}
                hint={`${total > 0 ? Math.round(((t.weight ?? 1) / total) * 100) : 0} % of requests first (default 1)`}
              />
            )}
            <div class="actions">
              <Button onClick={() => move(i, -1)} disabled={i === 0} aria-label={`Move target ${i + 1} up`}>
                ↑
              </Button>
              <Button onClick={() => move(i, 1)} disabled={i === d.targets.length - 1} aria-label={`Move target ${i + 1} down`}>
                ↓
              </Button>
              <Button
                kind="danger"
                onClick={() => set((x) => ({ ...x, targets: x.targets.filter((_, j) => j !== i) }))}
                aria-label={`Remove target ${i + 1}`}
              >
                Remove
              </Button>
            </div>
          </li>
        ))}
      </ol>
      <Button onClick={() => set((x) => ({ ...x, targets: [...x.targets, { model: "", weight: undefined }] }))}>Add target</Button>
    </fieldset>
  )
}

const AutoSettings = (p: {
  d: Draft
  set: (f: (d: Draft) => Draft) => void
  providers: ReadonlyArray<{ provider: string; name: string }>
}) => {
  const { d, set } = p
  const field =
    <K extends keyof Draft>(k: K) =>
    (v: Draft[K]) =>
      set((x) => ({ ...x, [k]: v }))
  const pool = new Set(d.candidatePool)
  const poolOptions = [...new Set([...p.providers.map((c) => c.provider), ...p.providers.map((c) => c.name), ...d.candidatePool])]
  return (
    <>
      <fieldset class="full">
        <legend>Auto scorer</legend>
        <div class="form">
          <Select
            label="Router strategy"
            value={d.routerStrategy}
            options={[
              { value: "", label: "default (lkgp, then rules)" },
              { value: "rules", label: "rules: highest weighted score" },
              { value: "cost", label: "cost: cheapest" },
              { value: "latency", label: "latency: fastest p95" },
              { value: "sla-aware", label: "sla-aware: meets the SLA below" },
              { value: "lkgp", label: "lkgp: last known good" },
              { value: "custom", label: "a custom registered strategy…" }
            ]}
            onChange={field("routerStrategy")}
          />
          {d.routerStrategy === "custom" && (
            <TextInput label="Custom router strategy name" value={d.customRouter} onInput={field("customRouter")} required />
          )}
          <Select
            label="Weight pack"
            value={d.modePack}
            options={PACKS.map((x) => ({ value: x, label: x === "" ? "none (the auto defaults)" : x }))}
            onChange={field("modePack")}
            hint="The weights below override single factors of the pack."
          />
          <NumberInput
            label="Exploration rate (0–1)"
            value={d.explorationRate}
            onInput={field("explorationRate")}
            min={0}
            max={1}
            step={0.01}
            hint="Share of requests sent to a random candidate; default 0.05."
          />
          <NumberInput
            label="Budget cap per request (USD)"
            value={d.budgetCap}
            onInput={field("budgetCap")}
            min={0}
            step="any"
            hint="Candidates estimated above it are dropped."
          />
        </div>
      </fieldset>
      <fieldset class="full">
        <legend>Factor weights (0–1000; empty: from the pack)</legend>
        <div class="form">
          {FACTORS.map((f) => (
            <NumberInput
              key={f}
              label={f}
              value={d.weights[f]}
              onInput={(v) => set((x) => ({ ...x, weights: { ...x.weights, [f]: v } }))}
              min={0}
              max={1000}
              step={0.01}
              hint={FACTOR_HINT[f]}
            />
          ))}
        </div>
      </fieldset>
      <fieldset class="full">
        <legend>Candidate pool (none checked: all providers)</legend>
        {poolOptions.length === 0 ? (
          <p class="muted">
            No providers yet: <Link to="/providers">add one</Link>.
          </p>
        ) : (
          <div class="combo-pool">
            {poolOptions.map((o) => (
              <Checkbox
                key={o}
                label={o}
                checked={pool.has(o)}
                onChange={(on) =>
                  set((x) => ({ ...x, candidatePool: on ? [...x.candidatePool, o] : x.candidatePool.filter((y) => y !== o) }))
                }
              />
            ))}
          </div>
        )}
      </fieldset>
      {d.routerStrategy === "sla-aware" && (
        <fieldset class="full">
          <legend>Service level (sla-aware)</legend>
          <div class="form">
            <NumberInput
              label="Target p95 latency (ms)"
              value={d.slaTargetP95Ms}
              onInput={field("slaTargetP95Ms")}
              min={1}
              hint="Default 5000."
            />
            <NumberInput
              label="Max error rate (0–1)"
              value={d.slaMaxErrorRate}
              onInput={field("slaMaxErrorRate")}
              min={0}
              max={1}
              step={0.01}
              hint="Default 0.05."
            />
            <NumberInput
              label="Max cost per 1M tokens (USD)"
              value={d.slaMaxCostPer1MTokens}
              onInput={field("slaMaxCostPer1MTokens")}
              min={0}
              hint="Default 10."
            />
            <Checkbox
              label="Hard constraints (fewest violations first)"
              checked={d.slaHardConstraints}
              onChange={field("slaHardConstraints")}
            />
          </div>
        </fieldset>
      )}
    </>
  )
}

const FusionSettings = (p: { d: Draft; set: (f: (d: Draft) => Draft) => void; list: string }) => {
  const { d, set } = p
  const field =
    <K extends keyof Draft>(k: K) =>
    (v: Draft[K]) =>
      set((x) => ({ ...x, [k]: v }))
  return (
    <fieldset class="full">
      <legend>Fusion</legend>
      <div class="form">
        <ModelInput
          label="Judge model"
          value={d.judgeModel}
          onInput={field("judgeModel")}
          list={p.list}
          hint="Writes the final answer; empty: the first panel model."
        />
        <NumberInput
          label="Minimum panel answers"
          value={d.minPanel}
          onInput={field("minPanel")}
          min={1}
          max={64}
          step={1}
          hint="Default 2."
        />
        <NumberInput
          label="Straggler grace (ms)"
          value={d.stragglerGraceMs}
          onInput={field("stragglerGraceMs")}
          min={1}
          step={1}
          hint="Default 8000."
        />
        <NumberInput
          label="Panel hard timeout (ms)"
          value={d.panelHardTimeoutMs}
          onInput={field("panelHardTimeoutMs")}
          min={1}
          step={1}
          hint="Default 90000."
        />
      </div>
    </fieldset>
  )
}

const ComboEditor = (p: {
  initial: Draft
  models: ReadonlyArray<string>
  info: ReadonlyMap<string, ModelInfo>
  providers: ReadonlyArray<{ provider: string; name: string }>
  onSaved: () => void
  onClose: () => void
}) => {
  const [d, setD] = useState<Draft>(p.initial)
  const [showJson, setShowJson] = useState(false)
  const [run, busy] = useAction()
  const set = (f: (d: Draft) => Draft) => setD(f)
  const listId = "combo-model-options"
  const body = bodyOf(d)
  const save = () =>
    void run(
      () =>
        d.id
          ? ok(api.PUT("/api/combos/{id}", { params: { path: { id: d.id } }, body: body as never }))
          : ok(api.POST("/api/combos", { body: body as never })),
      d.id ? "Combo saved" : "Combo created"
    ).then((r) => {
      if (!r) return
      p.onSaved()
      p.onClose()
    })
  const about = STRATEGIES.find(([s]) => s === d.strategy)?.[1]
  return (
    <div class="combo-editor">
      <Form onSubmit={save} label={d.id ? "Edit combo" : "New combo"}>
        <datalist id={listId}>
          {p.models.map((m) => (
            <option key={m} value={m} />
          ))}
        </datalist>
        <TextInput
          label="Combo name"
          value={d.name}
          onInput={(v) => set((x) => ({ ...x, name: v }))}
          required
          hint="Clients send it as the model id (no '/', not 'auto')."
        />
        <Select
          label="Strategy"
          value={d.strategy}
          options={STRATEGIES.map(([s]) => s)}
          onChange={(s) =>
            set((x) => ({
              ...x,
              strategy: s,
              targets: s !== "auto" && x.targets.length === 0 ? [{ model: "", weight: undefined }] : x.targets
            }))
          }
          hint={about}
        />
        <TextInput label="Description" value={d.description} onInput={(v) => set((x) => ({ ...x, description: v }))} />
        <Checkbox label="Enabled" checked={d.enabled} onChange={(v) => set((x) => ({ ...x, enabled: v }))} />
        <TargetsEditor d={d} set={set} list={listId} info={p.info} />
        {d.strategy === "fusion" && <FusionSettings d={d} set={set} list={listId} />}
        {d.strategy === "auto" && <AutoSettings d={d} set={set} providers={p.providers} />}
        <div class="full">
          <Checkbox label="Show the request body (JSON)" checked={showJson} onChange={setShowJson} />
          {showJson && <pre class="mono combo-json">{JSON.stringify(body, null, 2)}</pre>}
        </div>
        <div class="actions">
          <Button kind="primary" type="submit" busy={busy}>
            {d.id ? "Save combo" : "Create combo"}
          </Button>
          <Button onClick={p.onClose}>Cancel</Button>
        </div>
      </Form>
    </div>
  )
}

/** Edit the combo's raw JSON (PATCH): for keys the form does not show, or pasting a combo. */
const RawEditor = (p: { combo: ComboView; onSaved: () => void; onClose: () => void }) => {
  const { id, name, strategy, targets, config, description, enabled } = p.combo
  const [text, setText] = useState(JSON.stringify({ name, strategy, targets, config, description, enabled }, null, 2))
  const [run, busy] = useAction()
  return (
    <Form
      label="Combo JSON"
      onSubmit={() =>
        void run(async () => {
          let parsed: unknown
          try {
            parsed = JSON.parse(text)
          } catch (e) {
            throw new Error(`not valid JSON: ${e instanceof Error ? e.message : String(e)}`)
          }
          return ok(api.PATCH("/api/combos/{id}", { params: { path: { id } }, body: parsed as never }))
        }, "Combo saved").then((r) => {
          if (!r) return
          p.onSaved()
          p.onClose()
        })
      }
    >
      <TextArea label="Combo as JSON" value={text} onInput={setText} rows={16} mono />
      <div class="actions">
        <Button kind="primary" type="submit" busy={busy}>
          Save JSON
        </Button>
        <Button onClick={p.onClose}>Cancel</Button>
      </div>
    </Form>
  )
}

/** The strategy's own settings in a few words (auto: router, pack, weights; fusion: judge). */
const settingsSummary = (c: ComboView): string => {
  const cfg = c.config as Record<string, unknown>
  const auto = (cfg.auto ?? {}) as Record<string, unknown>
  const parts: string[] = []
  if (c.strategy === "auto") {
    parts.push(`router ${str(cfg.routerStrategy) || str(auto.routerStrategy) || "default"}`)
    if (cfg.modePack) parts.push(`pack ${str(cfg.modePack)}`)
    if (auto.weights) parts.push(`${Object.keys(auto.weights as object).length} weight(s) set`)
    if (Array.isArray(auto.candidatePool)) parts.push(`pool ${(auto.candidatePool as string[]).join(", ")}`)
    if (typeof cfg.explorationRate === "number") parts.push(`exploration ${cfg.explorationRate}`)
    if (typeof cfg.budgetCap === "number") parts.push(`cap $${cfg.budgetCap}`)
  }
  if (c.strategy === "fusion") parts.push(`judge ${str(cfg.judgeModel) || "first panel model"}`)
  return parts.join(" · ")
}

const targetSummary = (c: ComboView) =>
  c.targets.length === 0 ? (
    <span class="muted">every connected model</span>
  ) : (
    c.targets.map((t, i) => (
      <span key={i} class="combo-chip">
        {t.model}
        {t.weight !== undefined && c.strategy === "weighted" ? ` ×${t.weight}` : ""}
      </span>
    ))
  )

export default function CombosPage() {
  const combos = useLoad(loadCombos)
  const auto = useLoad(() => ok(api.GET("/api/combos/auto")))
  const providers = useLoad(() => ok(api.GET("/api/providers")))
  const catalog = useLoad(() => ok(api.GET("/api/models/catalog", { params: { query: { scope: "connected" } } })))
  const [editing, setEditing] = useState<Draft | undefined>()
  const [raw, setRaw] = useState<ComboView | undefined>()
  const [confirm, setConfirm] = useState<ComboView | undefined>()
  const [run, busy] = useAction()
  const models = useMemo(() => {
    const out = new Set<string>()
    for (const c of providers.data?.connections ?? []) {
      if (c.defaultModel) out.add(`${c.provider}/${c.defaultModel}`)
      for (const m of c.models) out.add(`${c.provider}/${m}`)
    }
    for (const m of catalog.data?.models ?? []) out.add(m.id)
    return [...out].sort()
  }, [providers.data, catalog.data])
  const pricing = useLoad(() => ok(api.GET("/api/pricing")))
  // Price (the effective one: catalog, sync or override) and context window by target id,
  // under `<connection>/<model>` and `<provider>/<model>`.
  const info = useMemo(() => {
    const m = new Map<string, ModelInfo>()
    const windows = new Map<string, number>()
    for (const c of catalog.data?.models ?? []) windows.set(`${c.provider}/${c.model}`, c.contextWindow)
    for (const c of catalog.data?.models ?? [])
      m.set(`${c.provider}/${c.model}`, { input: c.price.input, output: c.price.output, contextWindow: c.contextWindow })
    for (const r of pricing.data?.prices ?? [])
      m.set(`${r.provider}/${r.model}`, {
        input: r.input,
        output: r.output,
        contextWindow: windows.get(`${r.provider}/${r.model}`) ?? m.get(`${r.provider}/${r.model}`)?.contextWindow ?? 0
      })
    for (const c of providers.data?.connections ?? []) {
      for (const model of new Set([...c.models, ...(c.defaultModel ? [c.defaultModel] : [])])) {
        const v = m.get(`${c.provider}/${model}`)
        if (v) m.set(`${c.name}/${model}`, v)
      }
    }
    return m
  }, [catalog.data, pricing.data, providers.data])
  const conns = providers.data?.connections ?? []
  const reload = () => {
    combos.reload()
    auto.reload()
  }
  return (
    <Page
      title="Combos"
      description="A combo is a model name that routes over several targets with a strategy."
      actions={
        <Button kind="primary" onClick={() => setEditing(emptyDraft())}>
          New combo
        </Button>
      }
    >
      <Section title="Your combos">
        <Loader of={combos}>
          {(d) => (
            <Table
              caption="Combos"
              rowKey={(c) => c.id}
              rows={d.combos}
              empty={
                <Empty title="No combos yet">
                  Create one with <strong>New combo</strong>: give it a name, pick a strategy and the models it routes to.{" "}
                  {conns.length === 0 && <Link to="/providers">First add a provider.</Link>}
                </Empty>
              }
              columns={[
                { label: "Name", render: (c) => <code class="mono">{c.name}</code> },
                {
                  label: "Strategy",
                  render: (c) => (
                    <>
                      <Badge kind="info">{c.strategy}</Badge>
                      {settingsSummary(c) && <div class="muted small">{settingsSummary(c)}</div>}
                    </>
                  )
                },
                { label: "Targets", render: targetSummary },
                { label: "State", render: (c) => <Badge kind={c.enabled ? "ok" : "muted"}>{c.enabled ? "enabled" : "disabled"}</Badge> },
                {
                  label: "Actions",
                  render: (c) => (
                    <div class="actions">
                      <Button onClick={() => setEditing(draftOf(c))} aria-label={`Edit ${c.name}`}>
                        Edit
                      </Button>
                      <Button onClick={() => setRaw(c)} aria-label={`Edit ${c.name} as JSON`}>
                        JSON
                      </Button>
                      <Button
                        busy={busy}
                        onClick={() =>
                          void run(
                            () => ok(api.PATCH("/api/combos/{id}", { params: { path: { id: c.id } }, body: { enabled: !c.enabled } })),
                            c.enabled ? "Combo disabled" : "Combo enabled"
                          ).then((r) => r && combos.reload())
                        }
                      >
                        {c.enabled ? "Disable" : "Enable"}
                        <span class="sr-only"> {c.name}</span>
                      </Button>
                      <Button kind="danger" onClick={() => setConfirm(c)} aria-label={`Delete ${c.name}`}>
                        Delete
                      </Button>
                    </div>
                  )
                }
              ]}
            />
          )}
        </Loader>
      </Section>
      <Section
        title="Auto models"
        actions={
          <Button
            onClick={() => {
              const d = emptyDraft("auto")
              setEditing({ ...d, name: "my-auto", routerStrategy: "rules" })
            }}
          >
            Tune an auto combo
          </Button>
        }
      >
        <p class="muted">
          Clients can send these ids as the model without any setup: the auto scorer picks among every connected model. Their settings are
          fixed; to choose your own weights, pack, router strategy, candidates or SLA, create a combo with strategy <code>auto</code> (
          <strong>Tune an auto combo</strong>).
        </p>
        <Loader of={auto}>
          {(a) => (
            <>
              <Table
                caption="Auto model variants"
                rowKey={(v) => v.id}
                rows={a.variants}
                columns={[
                  { label: "Model id", render: (v) => <code class="mono">{v.id}</code> },
                  { label: "About", render: (v) => v.description },
                  { label: "Router", render: (v) => v.routerStrategy },
                  {
                    label: "Top weights",
                    render: (v) =>
                      Object.entries(v.weights)
                        .sort((x, y) => y[1] - x[1])
                        .slice(0, 3)
                        .map(([k, w]) => `${k} ${w}`)
                        .join(", ")
                  },
                  { label: "Exploration", class: "num", render: (v) => `${Math.round(v.explorationRate * 100)} %` },
                  {
                    label: "Pool models",
                    class: "num",
                    render: (v) => (v.pool.length === 0 ? <span class="muted">none yet</span> : fmtNumber(v.pool.length))
                  }
                ]}
              />
              <p class="muted small">
                Also advertised: {a.advertised.join(", ")}. Compose <code>auto/&lt;category&gt;[:&lt;tier&gt;]</code> from categories{" "}
                {a.categories.join(", ")} and tiers {a.tiers.join(", ")}.
              </p>
            </>
          )}
        </Loader>
      </Section>
      <Dialog open={!!editing} title={editing?.id ? `Edit combo ${editing.name}` : "New combo"} onClose={() => setEditing(undefined)}>
        {editing && (
          <ComboEditor
            initial={editing}
            models={models}
            info={info}
            providers={conns}
            onSaved={reload}
            onClose={() => setEditing(undefined)}
          />
        )}
      </Dialog>
      <Dialog open={!!raw} title={`JSON of ${raw?.name ?? "combo"}`} onClose={() => setRaw(undefined)}>
        {raw && <RawEditor combo={raw} onSaved={reload} onClose={() => setRaw(undefined)} />}
      </Dialog>
      <Confirm
        item={confirm}
        title="Delete this combo?"
        action="Delete combo"
        onClose={() => setConfirm(undefined)}
        remove={(combo) => ok(api.DELETE("/api/combos/{id}", { params: { path: { id: combo.id } } }))}
        done="Combo deleted"
        onRemoved={reload}
      >
        {(combo) => (
          <p>
            Clients sending <code>{combo.name}</code> as the model will get an unknown-model error.
          </p>
        )}
      </Confirm>
    </Page>
  )
}
