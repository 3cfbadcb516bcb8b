import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import {
  Badge,
  Button,
  Empty,
  ErrorBox,
  Form,
  fmtMoney,
  fmtNumber,
  NumberInput,
  Stat,
  TextInput,
  useAction,
  useInterval,
  useLoad
} from "../ui"
import { TargetCard } from "./comparison"

// Replay (docs/replay.md): a saved inspector session sent again to candidate models, and the
// job's progress and report.

const loadJob = (id: string) => ok(api.GET("/api/replay/{id}", { params: { path: { id } } }))
type Job = Awaited<ReturnType<typeof loadJob>>

/** The form that starts a replay of `sessionId`; `onStarted` gets the job. */
export const ReplayForm = (p: { sessionId: string; onStarted: (job: Job) => void; onCancel: () => void }) => {
  const [models, setModels] = useState("")
  const [concurrency, setConcurrency] = useState<number | undefined>(2)
  const [budget, setBudget] = useState<number | undefined>(1)
  const [run, busy] = useAction()
  const list = models
    .split(/[\s,]+/)
    .map((m) => m.trim())
    .filter((m) => m !== "")
  return (
    <Form
      label="Replay the session"
      onSubmit={() =>
        void run(
          () =>
            ok(
              api.POST("/api/replay", {
                body: {
                  source: { sessionId: p.sessionId },
                  models: list,
                  ...(concurrency !== undefined ? { concurrency } : {}),
                  ...(budget !== undefined ? { budgetUsd: budget } : {})
                }
              })
            ),
          (j) => `Replay ${j.id} started`
        ).then((j) => {
          if (j) p.onStarted(j)
        })
      }
    >
      <TextInput
        label="Candidate models"
        value={models}
        onInput={setModels}
        placeholder="e.g. anthropic/claude-sonnet-4, my-combo"
        hint="Comma-separated. Each LLM request of the session is sent again to each, and compared with its recorded answer."
        wide
        required
      />
      <NumberInput label="Concurrency" value={concurrency} onInput={setConcurrency} min={1} max={16} hint="Requests replayed at once." />
      <NumberInput
        label="Budget (USD)"
        value={budget}
        onInput={setBudget}
        min={0}
        step="any"
        hint="No call starts once the replay has cost this much."
      />
      <div class="actions">
        <Button kind="primary" type="submit" busy={busy}>
          Start replay
        </Button>
        <Button onClick={p.onCancel}>Cancel</Button>
      </div>
    </Form>
  )
}

/** A replay's progress, then its report (polled while it runs). */
export const ReplayJobView = (p: { id: string }) => {
  const job = useLoad(() => loadJob(p.id), [p.id])
  useInterval(() => job.data?.state === "running" && job.reload(), 1000)
  const j = job.data
  if (!j) return <ErrorBox error={job.error} retry={job.reload} />
  const baseline =
    j.baseline === "recorded" ? "the recorded answer" : j.baseline === "first-model" ? `${j.models[0]}` : "the recorded answer"
  return (
    <section aria-label={`Replay ${j.id}`}>
      <div class="stats">
        <Stat
          label="Replay"
          value={<Badge kind={j.state === "done" ? "ok" : j.state === "running" ? "info" : "warn"}>{j.state}</Badge>}
          hint={j.id}
        />
        <Stat
          label="Calls"
          value={`${fmtNumber(j.calls.done)} / ${fmtNumber(j.calls.total)}`}
          hint={j.calls.failed > 0 ? `${j.calls.failed} failed` : undefined}
        />
        <Stat label="Spent" value={`${fmtMoney(j.spentUsd)} of ${fmtMoney(j.budgetUsd)}`} />
        <Stat
          label="Left out"
          value={Object.values(j.skipped).reduce((s, n) => s + n, 0)}
          hint={Object.entries(j.skipped)
            .map(([k, n]) => `${k}: ${n}`)
            .join(", ")}
        />
      </div>
      {j.notes.length > 0 && (
        <details>
          <summary>Why requests were left out</summary>
          <ul>
            {j.notes.map((n) => (
              <li key={n}>{n}</li>
            ))}
          </ul>
        </details>
      )}
      {j.report.targets.length === 0 ? (
        <Empty title={j.state === "running" ? "No pairs yet" : "No pairs"}>
          {j.state === "running" ? "Pairs appear as the candidates answer." : "Nothing in the session could be replayed."}
        </Empty>
      ) : (
        j.report.targets.map((t) => <TargetCard key={t.shadowModel} t={t} baseline={baseline} />)
      )}
    </section>
  )
}
