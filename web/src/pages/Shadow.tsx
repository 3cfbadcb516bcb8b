import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { Badge, Empty, fmtMoney, fmtMs, Loader, Page, Section, Select, Stat, Table, useLoad } from "../ui"
import "./Shadow.css"

// Shadow traffic (docs/shadow.md): a combo's config.shadow sends a sample of its requests to
// candidate models after the answer went out; GET /api/shadow/report?combo= compares them.

const loadCombos = () => ok(api.GET("/api/combos"))
const loadReport = (combo: string, days: string) => ok(api.GET("/api/shadow/report", { params: { query: { combo, ...(days === "all" ? {} : { days }) } } }))
type Report = Awaited<ReturnType<typeof loadReport>>
type Target = Report["targets"][number]
type Interval = Target["costDeltaUsd"]

/** A combo's shadow targets (its config is free-form in the listing). */
const shadowOf = (c: { config: unknown }): ReadonlyArray<{ model: string; sampleRate: number }> =>
  (c.config as { shadow?: ReadonlyArray<{ model: string; sampleRate: number }> } | null)?.shadow ?? []

const pct = (x: number | null) => (x === null ? "—" : `${(x * 100).toFixed(0)}%`)

/** Shares as horizontal bars (an SVG chart, its numbers in the label for screen readers). */
const ShareBars = (p: { title: string; rows: ReadonlyArray<{ label: string; value: number | null }> }) => (
  <figure class="shadow-chart">
    <figcaption>{p.title}</figcaption>
    <svg viewBox={`0 0 320 ${p.rows.length * 28}`} role="img" aria-label={`${p.title}: ${p.rows.map((r) => `${r.label} ${pct(r.value)}`).join(", ")}`}>
      {p.rows.map((r, i) => (
        <g key={r.label} transform={`translate(0 ${i * 28})`}>
          <text x="0" y="17" class="shadow-label">
            {r.label}
          </text>
          <rect x="110" y="4" width="160" height="16" class="shadow-track" />
          {r.value !== null && <rect x="110" y="4" width={160 * r.value} height="16" class="shadow-bar" />}
          <text x="276" y="17" class="shadow-value">
            {pct(r.value)}
          </text>
        </g>
      ))}
    </svg>
  </figure>
)

/** Win / tie / loss as one stacked bar. */
const JudgeBar = (p: { judge: Target["judge"] }) => {
  const { judged, wins, ties, losses } = p.judge
  if (judged === 0) return <p class="muted">No judge verdicts (set shadowOptions.judgeModel in the settings).</p>
  const w = (n: number) => (320 * n) / judged
  return (
    <figure class="shadow-chart">
      <figcaption>Judge: win / tie / loss for the candidate ({judged} judged)</figcaption>
      <svg viewBox="0 0 320 24" role="img" aria-label={`Judge verdicts: ${wins} wins, ${ties} ties, ${losses} losses`}>
        <rect x="0" y="2" width={w(wins)} height="20" class="shadow-win" />
        <rect x={w(wins)} y="2" width={w(ties)} height="20" class="shadow-tie" />
        <rect x={w(wins) + w(ties)} y="2" width={w(losses)} height="20" class="shadow-loss" />
      </svg>
      <p class="shadow-legend">
        <span class="shadow-key shadow-win" /> {wins} wins <span class="shadow-key shadow-tie" /> {ties} ties <span class="shadow-key shadow-loss" /> {losses} losses
      </p>
    </figure>
  )
}

/** A mean with its 95% interval, against zero (left: the candidate is cheaper or faster). */
const IntervalChart = (p: { title: string; interval: Interval | null; format: (v: number) => string }) => {
  const i = p.interval
  if (i === null || i.n === 0) return null
  const span = Math.max(Math.abs(i.low), Math.abs(i.high), Math.abs(i.mean)) || 1
  const x = (v: number) => 160 + (150 * v) / span
  return (
    <figure class="shadow-chart">
      <figcaption>{p.title}</figcaption>
      <svg viewBox="0 0 320 30" role="img" aria-label={`${p.title}: mean ${p.format(i.mean)}, 95% interval ${p.format(i.low)} to ${p.format(i.high)}, ${i.n} pairs`}>
        <line x1="160" x2="160" y1="0" y2="30" class="shadow-zero" />
        <rect x={x(i.low)} y="11" width={Math.max(1, x(i.high) - x(i.low))} height="8" class="shadow-range" />
        <circle cx={x(i.mean)} cy="15" r="5" class="shadow-mean" />
      </svg>
      <p class="shadow-legend">
        {p.format(i.mean)}{" "}
        <span class="muted">
          [{p.format(i.low)}, {p.format(i.high)}]
        </span>
      </p>
    </figure>
  )
}

const signedMoney = (v: number) => `${v < 0 ? "−" : "+"}${fmtMoney(Math.abs(v))}`
const signedMs = (v: number) => `${v < 0 ? "−" : "+"}${fmtMs(Math.abs(v))}`

const TargetCard = (p: { t: Target }) => {
  const t = p.t
  return (
    <Section title={t.shadowModel}>
      <div class="stats">
        <Stat label="Pairs" value={t.pairs} hint={t.failed > 0 ? `${t.failed} shadow calls failed` : undefined} />
        <Stat label="Normalized agreement" value={pct(t.normalizedAgreement)} />
        <Stat label="Schema valid (primary / candidate)" value={t.schemaValid ? `${pct(t.schemaValid.primary)} / ${pct(t.schemaValid.shadow)}` : "—"} />
      </div>
      <div class="shadow-charts">
        <ShareBars
          title="Agreement with the primary"
          rows={[
            { label: "exact", value: t.exactAgreement },
            { label: "normalized", value: t.normalizedAgreement },
            { label: "tool calls", value: t.toolAgreement }
          ]}
        />
        <JudgeBar judge={t.judge} />
        <IntervalChart title="Cost per request, candidate − primary (95%)" interval={t.costDeltaUsd} format={signedMoney} />
        <IntervalChart title="Latency, candidate − primary (95%)" interval={t.latencyDeltaMs} format={signedMs} />
        <IntervalChart title="Time to first token, candidate − primary (95%)" interval={t.ttftDeltaMs} format={signedMs} />
      </div>
      <h3>Worst disagreements</h3>
      <Table
        caption={`Worst disagreements of ${t.shadowModel}`}
        rowKey={(w) => w.id}
        rows={t.worst}
        empty={<p class="muted">Every pair agrees once normalized.</p>}
        columns={[
          { label: "Request", render: (w) => <span class="mono shadow-clip">{w.request}</span> },
          { label: "Primary answered", render: (w) => <span class="shadow-clip">{w.primary}</span> },
          { label: "Candidate answered", render: (w) => <span class="shadow-clip">{w.shadow}</span> },
          { label: "Similarity", render: (w) => w.similarity.toFixed(2) },
          { label: "Judge", render: (w) => (w.judge ? <Badge kind={w.judge === "win" ? "ok" : w.judge === "loss" ? "bad" : "muted"}>{w.judge}</Badge> : "—") }
        ]}
      />
    </Section>
  )
}

const ReportView = (p: { combo: string; days: string }) => {
  const report = useLoad(() => loadReport(p.combo, p.days), [p.combo, p.days])
  return (
    <Loader of={report}>
      {(r) => (
        <>
          <div class="stats">
            <Stat label="Spent today on shadow calls" value={`${fmtMoney(r.spentTodayUsd)} of ${fmtMoney(r.budgetUsdPerDay)}`} />
            <Stat
              label="Skipped samples"
              value={Object.values(r.skipped).reduce((s, n) => s + n, 0)}
              hint={Object.entries(r.skipped)
                .map(([k, n]) => `${k}: ${n}`)
                .join(", ")}
            />
          </div>
          {r.targets.length === 0 ? (
            <Empty title="No pairs yet">Requests to {p.combo} are sampled as they come; pairs appear once their shadow calls have answered.</Empty>
          ) : (
            r.targets.map((t) => <TargetCard key={t.shadowModel} t={t} />)
          )}
        </>
      )}
    </Loader>
  )
}

export default function Shadow() {
  const combos = useLoad(loadCombos)
  const [picked, setPicked] = useState<string | undefined>(undefined)
  const [days, setDays] = useState("all")
  return (
    <Page
      title="Shadow traffic"
      description={
        <>
          A sample of a combo's requests also goes to candidate models after the answer went out (its <code>config.shadow</code>), and the two answers are compared. See
          docs/shadow.md.
        </>
      }
    >
      <Loader of={combos}>
        {(data) => {
          const shadowed = data.combos.filter((c) => shadowOf(c).length > 0)
          if (shadowed.length === 0)
            return (
              <Empty title="No combo has shadow targets">
                Give a combo{" "}
                <code>
                  config.shadow: [{"{"} model, sampleRate {"}"}]
                </code>{" "}
                on the Combos page or with <code>PATCH /api/combos/&lt;name&gt;</code>.
              </Empty>
            )
          const combo = picked ?? shadowed[0]!.name
          return (
            <>
              <div class="shadow-pick">
                <Select
                  label="Combo"
                  value={combo}
                  onChange={setPicked}
                  options={shadowed.map((c) => ({
                    value: c.name,
                    label: `${c.name} → ${shadowOf(c)
                      .map((s) => s.model)
                      .join(", ")}`
                  }))}
                />
                <Select
                  label="Period"
                  value={days}
                  onChange={setDays}
                  options={[
                    { value: "all", label: "All kept pairs" },
                    { value: "1", label: "Last day" },
                    { value: "7", label: "Last 7 days" },
                    { value: "30", label: "Last 30 days" }
                  ]}
                />
              </div>
              <ReportView combo={combo} days={days} />
            </>
          )
        }}
      </Loader>
    </Page>
  )
}
