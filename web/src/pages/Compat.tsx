import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import {
  Badge,
  Button,
  Dialog,
  ErrorBox,
  Form,
  fmtDate,
  fmtMoney,
  fmtMs,
  Loader,
  NumberInput,
  Page,
  Section,
  Stat,
  TextInput,
  useAction,
  useInterval,
  useLoad
} from "../ui"
import "./Shadow.css"

// The live compatibility matrix (docs/compat.md): the supported clients' recorded requests
// against the configured models through the gateway, what works, and each exchange to read.

const loadMatrix = (models: string) => ok(api.GET("/api/compat", { params: { query: models.trim() === "" ? {} : { models } } }))
type Matrix = Awaited<ReturnType<typeof loadMatrix>>
type Cell = Matrix["cells"][number]

const loadExchange = (id: string) => ok(api.GET("/api/compat/exchanges/{id}", { params: { path: { id } } }))

const MARK: Record<Cell["status"], { text: string; kind: "ok" | "bad" | "warn" | "muted" }> = {
  pass: { text: "pass", kind: "ok" },
  fail: { text: "fail", kind: "bad" },
  skipped: { text: "skipped", kind: "warn" },
  pending: { text: "…", kind: "muted" },
  "not-run": { text: "—", kind: "muted" }
}

const pretty = (v: unknown): string => {
  const text = typeof v === "string" ? v : JSON.stringify(v, null, 2)
  return text.length > 20_000 ? `${text.slice(0, 20_000)}\n… (${text.length - 20_000} more characters)` : text
}

const ExchangeView = (p: { id: string }) => {
  const x = useLoad(() => loadExchange(p.id), [p.id])
  return (
    <Loader of={x}>
      {(e) => (
        <div class="compat-exchange">
          <p>
            <Badge kind={e.status === "pass" ? "ok" : "bad"}>{e.status}</Badge> {e.reason ?? "The answer is what the client needs."}
          </p>
          <h3>Request</h3>
          <p class="mono">
            {e.request.method} {e.request.path}
          </p>
          <pre class="compat-pre" tabIndex={0}>
            {pretty(e.request.headers)}
          </pre>
          <pre class="compat-pre" tabIndex={0}>
            {pretty(e.request.body)}
          </pre>
          <h3>Answer</h3>
          <p class="mono">
            {e.answer.status} {e.answer.contentType}
            {e.answer.truncated && " (its first 64 KiB)"}
          </p>
          <pre class="compat-pre" tabIndex={0}>
            {pretty(e.answer.body)}
          </pre>
        </div>
      )}
    </Loader>
  )
}

const MatrixTable = (p: { m: Matrix; onOpen: (cell: Cell) => void }) => {
  const { m } = p
  const cell = (id: string, model: string) => m.cells.find((c) => c.case === id && c.model === model)
  return (
    <div class="table-wrap" tabIndex={0} role="region" aria-label="Client requests × models">
      <table>
        <caption class="sr-only">Client requests × models</caption>
        <thead>
          <tr>
            <th scope="col">Client</th>
            <th scope="col">Capability</th>
            {m.models.map((model) => (
              <th scope="col" key={model}>
                {model}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {m.cases.map((c) => (
            <tr key={c.id}>
              <th scope="row" title={c.source}>
                {c.client}
              </th>
              <td>
                {c.capability}
                {c.stream ? " (streamed)" : ""}
              </td>
              {m.models.map((model) => {
                const x = cell(c.id, model)
                const mark = MARK[x?.status ?? "not-run"]
                const label = `${c.client}, ${c.capability}, on ${model}: ${x?.status === "pending" ? "pending" : mark.text === "—" ? "not run" : mark.text}`
                return (
                  <td key={model}>
                    {x?.exchangeId ? (
                      <button
                        type="button"
                        class="btn compat-cell"
                        aria-label={label}
                        title={x.reason ?? undefined}
                        onClick={() => p.onOpen(x)}
                      >
                        <Badge kind={mark.kind}>{mark.text}</Badge>
                      </button>
                    ) : (
                      <span aria-label={label} title={x?.reason ?? undefined}>
                        <Badge kind={mark.kind}>{mark.text}</Badge>
                      </span>
                    )}
                  </td>
                )
              })}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

export default function Compat() {
  const [models, setModels] = useState("")
  const [shown, setShown] = useState("")
  const [budget, setBudget] = useState<number | undefined>(0.25)
  const [opened, setOpened] = useState<Cell>()
  const matrix = useLoad(() => loadMatrix(shown), [shown])
  const [run, busy] = useAction()
  const [result, setResult] = useState<Matrix>()
  const m = result ?? matrix.data
  // A run goes on in the gateway: its cells fill in as they are answered.
  const underWay = m?.run?.state === "running"
  useInterval(() => {
    if (underWay && m)
      void loadMatrix(m.models.join(",")).then(
        (next) => setResult(next),
        () => undefined
      )
  }, 1000)
  return (
    <Page
      title="Client compatibility"
      description={
        <>
          The recorded requests of the supported clients (the SDKs and coding agents: text, streaming, tools, a tool round trip, structured
          output, reasoning, images) sent through this gateway to each model, and whether each client gets an answer it can use. See
          docs/compat.md.
        </>
      }
    >
      <Section title="Models and cost">
        <Form
          label="Choose the models"
          onSubmit={() => {
            setResult(undefined)
            setShown(models)
          }}
        >
          <TextInput
            label="Models"
            value={models}
            onInput={setModels}
            placeholder="default: each connection's configured models"
            hint="Comma-separated model ids, connection/model or combos."
            wide
          />
          <div class="actions">
            <Button type="submit">Show</Button>
          </div>
        </Form>
        <ErrorBox error={matrix.error} retry={matrix.reload} />
        {m && (
          <>
            <div class="stats">
              <Stat
                label="Running every cell costs at most"
                value={m.models.length > 0 && m.estimate.unpriced.length === m.models.length ? "not known" : fmtMoney(m.estimate.totalUsd)}
                hint={
                  m.models.length > 0 && m.estimate.unpriced.length === m.models.length
                    ? `no price is known for ${m.estimate.unpriced.join(", ")}`
                    : m.estimate.unpriced.length > 0
                      ? `plus the unpriced: ${m.estimate.unpriced.join(", ")}`
                      : "each answer at its output cap"
                }
              />
              {m.run && (
                <Stat
                  label={m.run.state === "running" ? "Running" : m.run.state === "interrupted" ? "Last run (interrupted)" : "Last run"}
                  value={`${m.run.passed} passed, ${m.run.failed} failed, ${m.run.skipped} skipped`}
                  hint={`${m.run.state === "running" ? `${m.run.done} of ${m.run.total} cells` : fmtDate(Date.parse(m.run.finishedAt ?? m.run.startedAt))}, spent ${fmtMoney(m.run.spentUsd)} of ${fmtMoney(m.run.budgetUsd)}`}
                />
              )}
            </div>
            <Form
              label="Run the matrix"
              onSubmit={() =>
                void run(
                  () =>
                    ok(
                      api.POST("/api/compat/run", {
                        body: {
                          ...(m.models.length > 0 ? { models: [...m.models] } : {}),
                          ...(budget !== undefined ? { budgetUsd: budget } : {})
                        }
                      })
                    ),
                  (r) => `Running ${r.run?.total ?? 0} cells`
                ).then((r) => {
                  if (r) setResult(r)
                })
              }
            >
              <NumberInput
                label="Budget (USD)"
                value={budget}
                onInput={setBudget}
                min={0}
                step="any"
                hint="No call starts once the run has cost this much."
              />
              <div class="actions">
                <Button kind="primary" type="submit" busy={busy || underWay}>
                  Run against {m.models.length} model{m.models.length === 1 ? "" : "s"}
                </Button>
              </div>
            </Form>
          </>
        )}
      </Section>
      {m && (
        <Section title="Matrix">
          <MatrixTable m={m} onOpen={setOpened} />
          {m.cells.some((c) => c.latencyMs !== null) && (
            <p class="muted small">
              Slowest cell: {fmtMs(Math.max(...m.cells.map((c) => c.latencyMs ?? 0)))}. A cell's button opens its exchange: the request as
              sent and the answer.
            </p>
          )}
        </Section>
      )}
      <Dialog open={opened !== undefined} title={opened ? `${opened.case} on ${opened.model}` : ""} onClose={() => setOpened(undefined)}>
        {opened?.exchangeId && <ExchangeView id={opened.exchangeId} />}
      </Dialog>
    </Page>
  )
}
