import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { Empty, fmtMoney, Loader, Page, Select, Stat, useLoad } from "../ui"
import { TargetCard } from "./comparison"
import "./Shadow.css"

// Shadow traffic (docs/shadow.md): a combo's config.shadow sends a sample of its requests to
// candidate models after the answer went out; GET /api/shadow/report?combo= compares them.

/** The shadowed scopes: combos with `config.shadow`, and keys with shadow targets (scope `key:<id>`). */
const loadScopes = async () => {
  const [combos, keys] = await Promise.all([ok(api.GET("/api/combos")), ok(api.GET("/api/keys"))])
  return [
    ...combos.combos
      .filter((c) => shadowOf(c).length > 0)
      .map((c) => ({
        value: c.name,
        label: `${c.name} → ${shadowOf(c)
          .map((s) => s.model)
          .join(", ")}`
      })),
    ...keys.keys
      .filter((k) => k.shadow.length > 0)
      .map((k) => ({ value: `key:${k.id}`, label: `key ${k.name} → ${k.shadow.map((s) => s.model).join(", ")}` }))
  ]
}
const loadReport = (combo: string, days: string) =>
  ok(api.GET("/api/shadow/report", { params: { query: { combo, ...(days === "all" ? {} : { days }) } } }))

/** A combo's shadow targets (its config is free-form in the listing). */
const shadowOf = (c: { config: unknown }): ReadonlyArray<{ model: string; sampleRate: number }> =>
  (c.config as { shadow?: ReadonlyArray<{ model: string; sampleRate: number }> } | null)?.shadow ?? []

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
            <Empty title="No pairs yet">
              Requests to {p.combo} are sampled as they come; pairs appear once their shadow calls have answered.
            </Empty>
          ) : (
            r.targets.map((t) => <TargetCard key={t.shadowModel} t={t} />)
          )}
        </>
      )}
    </Loader>
  )
}

export default function Shadow() {
  const scopes = useLoad(loadScopes)
  const [picked, setPicked] = useState<string | undefined>(undefined)
  const [days, setDays] = useState("all")
  return (
    <Page
      title="Shadow traffic"
      description={
        <>
          A sample of a combo's requests also goes to candidate models after the answer went out (its <code>config.shadow</code>), and the
          two answers are compared. See docs/shadow.md.
        </>
      }
    >
      <Loader of={scopes}>
        {(shadowed) => {
          if (shadowed.length === 0)
            return (
              <Empty title="No combo or key has shadow targets">
                Give a combo{" "}
                <code>
                  config.shadow: [{"{"} model, sampleRate {"}"}]
                </code>{" "}
                on the Combos page or with <code>PATCH /api/combos/&lt;name&gt;</code>, or a key its shadow targets on the API keys page.
              </Empty>
            )
          const scope = picked ?? shadowed[0]!.value
          return (
            <>
              <div class="shadow-pick">
                <Select label="Combo or key" value={scope} onChange={setPicked} options={shadowed} />
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
              <ReportView combo={scope} days={days} />
            </>
          )
        }}
      </Loader>
    </Page>
  )
}
