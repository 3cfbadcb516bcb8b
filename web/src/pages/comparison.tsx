import { api, ok } from "../api/client"
import { Badge, fmtMoney, fmtMs, Section, Stat, Table } from "../ui"
import "./Shadow.css"

// The comparison of a candidate model with what answered (docs/shadow.md, docs/replay.md): the
// shadow traffic page's report per target, and a replay's.

const loadReport = (combo: string) => ok(api.GET("/api/shadow/report", { params: { query: { combo } } }))
export type Report = Awaited<ReturnType<typeof loadReport>>
type Target = Report["targets"][number]
type Interval = Target["costDeltaUsd"]

const pct = (x: number | null) => (x === null ? "—" : `${(x * 100).toFixed(0)}%`)

/** Shares as horizontal bars (an SVG chart, its numbers in the label for screen readers). */
const ShareBars = (p: { title: string; rows: ReadonlyArray<{ label: string; value: number | null }> }) => (
  <figure class="shadow-chart">
    <figcaption>{p.title}</figcaption>
    <svg
      viewBox={`0 0 320 ${p.rows.length * 28}`}
      role="img"
      aria-label={`${p.title}: ${p.rows.map((r) => `${r.label} ${pct(r.value)}`).join(", ")}`}
    >
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
        <span class="shadow-key shadow-win" /> {wins} wins <span class="shadow-key shadow-tie" /> {ties} ties{" "}
        <span class="shadow-key shadow-loss" /> {losses} losses
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
      <svg
        viewBox="0 0 320 30"
        role="img"
        aria-label={`${p.title}: mean ${p.format(i.mean)}, 95% interval ${p.format(i.low)} to ${p.format(i.high)}, ${i.n} pairs`}
      >
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

export const TargetCard = (p: { t: Target; baseline?: string }) => {
  const t = p.t
  return (
    <Section title={t.shadowModel}>
      <div class="stats">
        <Stat label="Pairs" value={t.pairs} hint={t.failed > 0 ? `${t.failed} shadow calls failed` : undefined} />
        <Stat label="Normalized agreement" value={pct(t.normalizedAgreement)} />
        <Stat
          label="Schema valid (primary / candidate)"
          value={t.schemaValid ? `${pct(t.schemaValid.primary)} / ${pct(t.schemaValid.shadow)}` : "—"}
        />
      </div>
      <div class="shadow-charts">
        <ShareBars
          title={`Agreement with ${p.baseline ?? "the primary"}`}
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
          {
            label: "Judge",
            render: (w) => (w.judge ? <Badge kind={w.judge === "win" ? "ok" : w.judge === "loss" ? "bad" : "muted"}>{w.judge}</Badge> : "—")
          }
        ]}
      />
    </Section>
  )
}
