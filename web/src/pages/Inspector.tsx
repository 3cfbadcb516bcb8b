import type { ComponentChildren } from "preact"
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks"
import { api, ok } from "../api/client"
import {
  Badge,
  Button,
  Checkbox,
  Confirm,
  Dialog,
  Empty,
  ErrorBox,
  fmtBytes,
  fmtDate,
  fmtMoney,
  fmtMs,
  fmtNumber,
  Form,
  Loader,
  Loading,
  Page,
  Section,
  Select,
  Table,
  TextArea,
  TextInput,
  toast,
  useAction,
  useInterval,
  useLoad
} from "../ui"
import type { Res } from "./govern/types"
import { reasoningNotes } from "./reasoning"
import { ReplayForm, ReplayJobView } from "./replay"
import "./Inspector.css"

// The traffic inspector (docs/inspector.md), under /api/tools/traffic-inspector: a live list of
// what the gateway (and, with a capture mode on, this machine's HTTP traffic) sends, from its
// WebSocket feed (a snapshot, then new/update/clear events of entry summaries); a row opens its
// detail (GET requests/{id}: headers, bodies, the normalized conversation, the upstream side).
// Sessions record a named slice of it; the capture modes panel starts the proxy listeners and
// shows the local CA clients must trust for TLS interception.

const BASE = "/api/tools/traffic-inspector"

type Summary = Res<"/api/tools/traffic-inspector/requests", "get">["requests"][number]
type Detail = Res<"/api/tools/traffic-inspector/requests/{id}", "get">
type Body = NonNullable<Detail["requestBody"]>
type Session = Res<"/api/tools/traffic-inspector/sessions", "get">["sessions"][number]
type Modes = Res<"/api/tools/traffic-inspector/capture-modes", "get">
type Replayed = Res<"/api/tools/traffic-inspector/requests/{id}/replay", "post">
type Source = Summary["source"]

// The parts the OpenAPI document leaves open (Schema.Unknown), as src/services/inspector/types.ts
// and Capture.ts make them.
type Block =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "reasoning"; readonly text: string }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown }
  | { readonly type: "tool_result"; readonly toolUseId: string; readonly content: string; readonly isError?: boolean }
  | { readonly type: "image"; readonly mediaType?: string | null }
interface Turn {
  readonly role: "system" | "user" | "assistant" | "tool"
  readonly blocks: ReadonlyArray<Block>
}
interface Upstream {
  readonly attempt: number
  readonly provider: string
  readonly connection: string
  readonly model: string
  readonly url: string | null
  readonly requestBody: Body | null
  readonly status: number | null
  readonly responseBody: Body | null
  readonly error: string | null
}
interface HttpProxyState {
  readonly running: boolean
  readonly host: string
  readonly port: number
  readonly error: string | null
  readonly url: string | null
}
interface SystemProxyState {
  readonly applied: boolean
  readonly appliedAt: number | null
  readonly guardMinutes: number
  readonly revertsAt: number | null
  readonly changes: ReadonlyArray<{ readonly kind: string; readonly target: string; readonly detail: string }>
  readonly notes: ReadonlyArray<string>
  readonly error: string | null
}
interface MitmState {
  readonly running: boolean
  readonly port: number
  readonly error: string | null
}

const SOURCES: ReadonlyArray<Source> = ["agent-bridge", "custom-host", "http-proxy", "system-proxy", "tproxy"]
const STATUSES = ["", "in-flight", "ok", "failed", "2xx", "4xx", "5xx"] as const
type StatusFilter = (typeof STATUSES)[number]

interface Filters {
  readonly llmOnly: boolean
  readonly source: Source | ""
  readonly status: StatusFilter
  readonly host: string
  readonly agent: string
}
const NO_FILTERS: Filters = { llmOnly: false, source: "", status: "", host: "", agent: "" }

/** The list's query (and the HAR export's): the server filters with the same rules as `matches`. */
const queryOf = (f: Filters, sessionId?: string): Record<string, string> => ({
  ...(f.llmOnly ? { profile: "llm" } : {}),
  ...(f.source ? { source: f.source } : {}),
  ...(f.status ? { status: f.status } : {}),
  ...(f.host.trim() ? { host: f.host.trim().toLowerCase() } : {}),
  ...(f.agent.trim() ? { agent: f.agent.trim() } : {}),
  ...(sessionId ? { sessionId } : {})
})

const statusMatches = (status: Summary["status"], want: StatusFilter): boolean => {
  if (want === "") return true
  if (want === "in-flight") return status === "in-flight"
  if (want === "ok") return typeof status === "number" && status < 400
  if (want === "failed") return status === "error" || (typeof status === "number" && status >= 400)
  return typeof status === "number" && Math.floor(status / 100) === Number(want[0])
}

/** The live list's filter: the rules of the server's (src/services/inspector/Inspector.ts, `matches`). */
const matches = (e: Summary, f: Filters): boolean => {
  const host = f.host.trim().toLowerCase()
  const agent = f.agent.trim()
  return (
    (!f.llmOnly || e.detectedKind === "llm" || e.llm !== null) &&
    (host === "" || e.host === host || e.host.endsWith(`.${host}`)) &&
    (agent === "" || e.agent === agent) &&
    statusMatches(e.status, f.status) &&
    (f.source === "" || e.source === f.source)
  )
}

const statusKind = (s: Summary["status"]): "ok" | "warn" | "bad" | "info" => (s === "in-flight" ? "info" : s === "error" ? "bad" : s >= 500 ? "bad" : s >= 400 ? "warn" : "ok")

const Status = (p: { status: Summary["status"] }) =>
  p.status === "in-flight" ? (
    <span class="insp-inflight">
      <span class="insp-spinner" aria-hidden="true" />
      in flight
    </span>
  ) : (
    <Badge kind={statusKind(p.status)}>{p.status}</Badge>
  )

const fmtTime = (ms: number) => new Date(ms).toLocaleTimeString()

// ---------------------------------------------------------------- the live feed

type FeedState = "connecting" | "open" | "closed"
type FeedMessage =
  | { readonly type: "snapshot"; readonly entries: ReadonlyArray<Summary>; readonly bufferSize: number }
  | { readonly type: "new" | "update"; readonly entry: Summary }
  | { readonly type: "clear" }

/**
 * The inspector's WebSocket feed (same origin; the session cookie authenticates it as on the
 * management API): the buffer's entries, newest first, kept as the feed patches them. While it is
 * connected the gateway keeps bodies. Reconnects with a backoff; a reconnect's snapshot replaces all.
 */
const useInspectorFeed = (): { entries: ReadonlyArray<Summary>; state: FeedState; bufferSize: number } => {
  const store = useRef(new Map<string, Summary>())
  const [version, setVersion] = useState(0)
  const [state, setState] = useState<FeedState>("connecting")
  const [bufferSize, setBufferSize] = useState(1000)
  useEffect(() => {
    let ws: WebSocket | undefined
    let stopped = false
    let retry = 1000
    let cap = 1000
    let timer: ReturnType<typeof setTimeout> | undefined
    const connect = () => {
      setState("connecting")
      ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${BASE}/ws`)
      ws.onopen = () => {
        retry = 1000
        setState("open")
      }
      ws.onmessage = (m) => {
        let msg: FeedMessage
        try {
          msg = JSON.parse(String(m.data))
        } catch {
          return
        }
        const map = store.current
        if (msg.type === "snapshot") {
          map.clear()
          for (const e of msg.entries) map.set(e.id, e)
          cap = msg.bufferSize
          setBufferSize(msg.bufferSize)
        } else if (msg.type === "new") {
          map.set(msg.entry.id, msg.entry)
          // The buffer drops its oldest entries without an event: so does the list.
          for (const id of map.keys()) {
            if (map.size <= cap) break
            map.delete(id)
          }
        } else if (msg.type === "update") {
          // An update of an entry no longer listed (cleared meanwhile) stays out.
          if (!map.has(msg.entry.id)) return
          map.set(msg.entry.id, msg.entry)
        } else if (msg.type === "clear") map.clear()
        else return
        setVersion((v) => v + 1)
      }
      ws.onclose = () => {
        if (stopped) return
        setState("closed")
        timer = setTimeout(connect, retry)
        retry = Math.min(retry * 2, 15000)
      }
    }
    connect()
    return () => {
      stopped = true
      if (timer) clearTimeout(timer)
      ws?.close()
    }
  }, [])
  const entries = useMemo(() => [...store.current.values()].reverse(), [version])
  return { entries, state, bufferSize }
}

// ---------------------------------------------------------------- the list (virtualised)

/** Fixed heights (px) of a row and of the header row: they must match Inspector.css. */
const ROW = 34
const HEAD = 32
const OVERSCAN = 6

const COLUMNS: ReadonlyArray<{ label: string; class?: string; render: (e: Summary) => ComponentChildren; title?: (e: Summary) => string }> = [
  { label: "Time", render: () => null },
  { label: "Source", render: (e) => e.source },
  { label: "Method", render: (e) => e.method },
  {
    label: "Host and path",
    title: (e) => e.url,
    render: (e) => (
      <>
        {e.replayOf && <Badge kind="info">replay</Badge>} <span class="insp-host">{e.host}</span>
        <span class="muted">{e.path}</span>
      </>
    )
  },
  { label: "Status", render: (e) => <Status status={e.status} /> },
  { label: "Kind", render: (e) => e.detectedKind },
  { label: "Model", title: (e) => e.llm?.model ?? "", render: (e) => e.llm?.model ?? "—" },
  { label: "Tokens in/out", class: "num", render: (e) => (e.llm ? `${fmtNumber(e.llm.tokensIn)} / ${fmtNumber(e.llm.tokensOut)}` : "—") },
  { label: "Cost", class: "num", render: (e) => fmtMoney(e.llm?.costEstimateUsd) },
  { label: "Duration", class: "num", render: (e) => (e.status === "in-flight" ? "…" : fmtMs(e.timings.totalMs)) },
  {
    label: "Agent/process",
    title: (e) => [e.agent, e.processName && `${e.processName}${e.pid !== null ? ` (pid ${e.pid})` : ""}`].filter(Boolean).join(" · "),
    render: (e) => e.agent ?? e.processName ?? "—"
  }
]

/**
 * The requests as a table of fixed-height rows inside a scroll container: only the rows in view
 * (and a few around them) are in the DOM, so a full buffer scrolls as fast as an empty one. The
 * body's height and the first row's offset are CSS custom properties set through the CSSOM (the
 * CSP allows no inline style attributes).
 */
const RequestTable = (p: { rows: ReadonlyArray<Summary>; selected: string | undefined; onSelect: (id: string) => void; label: string }) => {
  const scroller = useRef<HTMLDivElement>(null)
  const body = useRef<HTMLDivElement>(null)
  const [view, setView] = useState({ top: 0, height: 480 })
  useLayoutEffect(() => {
    const el = scroller.current
    if (!el) return
    const measure = () => setView({ top: el.scrollTop, height: el.clientHeight })
    measure()
    let frame = 0
    const onScroll = () => {
      if (frame === 0)
        frame = requestAnimationFrame(() => {
          frame = 0
          measure()
        })
    }
    el.addEventListener("scroll", onScroll, { passive: true })
    const resized = new ResizeObserver(measure)
    resized.observe(el)
    return () => {
      el.removeEventListener("scroll", onScroll)
      resized.disconnect()
      if (frame !== 0) cancelAnimationFrame(frame)
    }
  }, [])
  const n = p.rows.length
  const first = Math.min(n, Math.max(0, Math.floor((view.top - HEAD) / ROW) - OVERSCAN))
  const last = Math.min(n, Math.ceil((view.top + view.height - HEAD) / ROW) + OVERSCAN)
  useLayoutEffect(() => {
    body.current?.style.setProperty("--insp-total", `${n * ROW}px`)
    body.current?.style.setProperty("--insp-offset", `${first * ROW}px`)
  }, [n, first])
  const visible = p.rows.slice(first, last)
  // A row has focus by the arrow keys (from one row to the next; the browser scrolls it into view and the window follows); Enter opens it.
  const onKey = (k: KeyboardEvent, id: string) => {
    const row = k.currentTarget as HTMLElement
    if (k.key === "Enter" || k.key === " ") {
      if (k.target !== row) return
      k.preventDefault()
      p.onSelect(id)
    } else if (k.key === "ArrowDown" || k.key === "ArrowUp") {
      k.preventDefault()
      const next = (k.key === "ArrowDown" ? row.nextElementSibling : row.previousElementSibling) as HTMLElement | null
      next?.focus()
    }
  }
  return (
    <div class="insp-list" ref={scroller} tabIndex={0} role="table" aria-label={p.label} aria-rowcount={n + 1}>
      <div role="rowgroup" class="insp-head">
        <div role="row" aria-rowindex={1} class="insp-row" tabIndex={-1}>
          {COLUMNS.map((c) => (
            <div role="columnheader" class={`insp-cell ${c.class ?? ""}`} key={c.label} tabIndex={-1}>
              {c.label}
            </div>
          ))}
        </div>
      </div>
      <div role="rowgroup" class="insp-body" ref={body}>
        {visible.map((e, i) => (
          <div
            role="row"
            key={e.id}
            aria-rowindex={first + i + 2}
            aria-current={e.id === p.selected ? "true" : undefined}
            class="insp-row"
            tabIndex={-1}
            onClick={() => p.onSelect(e.id)}
            onKeyDown={(k) => onKey(k, e.id)}
          >
            {COLUMNS.map((c, ci) => {
              const content = ci === 0 ? undefined : c.render(e)
              return (
                <div role="cell" class={`insp-cell ${c.class ?? ""}`} key={c.label} title={c.title?.(e) ?? (typeof content === "string" ? content : undefined)}>
                  {ci === 0 ? (
                    <button type="button" class="insp-link" onClick={() => p.onSelect(e.id)}>
                      {fmtTime(e.timings.startedAt)}
                      <span class="sr-only">
                        {" "}
                        (details of {e.method} {e.url})
                      </span>
                    </button>
                  ) : (
                    content
                  )}
                </div>
              )
            })}
          </div>
        ))}
      </div>
    </div>
  )
}

// ---------------------------------------------------------------- filters

const FilterBar = (p: { value: Filters; onChange: (f: Filters) => void }) => {
  const set =
    <K extends keyof Filters>(k: K) =>
    (v: Filters[K]) =>
      p.onChange({ ...p.value, [k]: v })
  return (
    <div class="filters insp-filters">
      <Checkbox label="LLM only" checked={p.value.llmOnly} onChange={set("llmOnly")} />
      <Select<Source | "">
        label="Source"
        value={p.value.source}
        options={[{ value: "", label: "any source" }, ...SOURCES.map((s) => ({ value: s, label: s }))]}
        onChange={set("source")}
      />
      <Select<StatusFilter>
        label="Status"
        value={p.value.status}
        options={[
          { value: "", label: "all" },
          { value: "in-flight", label: "in flight" },
          { value: "ok", label: "ok (below 400)" },
          { value: "failed", label: "failed (400 and up, errors)" },
          { value: "2xx", label: "2xx" },
          { value: "4xx", label: "4xx" },
          { value: "5xx", label: "5xx" }
        ]}
        onChange={set("status")}
      />
      <TextInput label="Host" type="search" value={p.value.host} onInput={set("host")} placeholder="api.openai.com" />
      <TextInput label="Agent" type="search" value={p.value.agent} onInput={set("agent")} placeholder="e.g. codex" />
    </div>
  )
}

// ---------------------------------------------------------------- the detail pane

const Facts = (p: { items: ReadonlyArray<[string, ComponentChildren]> }) => (
  <dl class="insp-facts">
    {p.items.map(([k, v]) => (
      <div key={k}>
        <dt>{k}</dt>
        <dd>{v === null || v === undefined || v === "" ? "—" : v}</dd>
      </div>
    ))}
  </dl>
)

/**
 * The structured-output verdict of an answer (docs/structured-outputs.md): the
 * `X-Gateway-Schema` header of a whole answer, or a stream's last event (when its body was kept).
 */
const schemaVerdict = (e: Detail): ComponentChildren => {
  const header = e.responseHeaders?.["x-gateway-schema"]
  const body = e.responseBody?.encoding === "utf8" ? e.responseBody.text : ""
  const status = header ?? /gateway[_.]?schema"[^}]*?"status":"(valid|repaired|invalid)"/i.exec(body)?.[1]
  if (status === undefined) return null
  return <Badge kind={status === "valid" ? "ok" : status === "repaired" ? "warn" : "bad"}>{status}</Badge>
}

/** Bodies larger than this are shown cut (the download of the HAR has all of it). */
const SHOWN = 200 * 1024

const pretty = (b: Body): { text: string; json: boolean } => {
  if (b.encoding !== "utf8") return { text: b.text, json: false }
  try {
    return { text: JSON.stringify(JSON.parse(b.text), null, 2), json: true }
  } catch {
    return { text: b.text, json: false }
  }
}

const BodyView = (p: { label: string; body: Body | null }) => {
  const b = p.body
  const shown = useMemo(() => (b ? pretty(b) : undefined), [b])
  return (
    <div class="insp-body-view">
      <h4>{p.label}</h4>
      {!b || !shown ? (
        <p class="muted small">Not captured: bodies are kept while an inspector client (this page) is connected or a session records.</p>
      ) : (
        <>
          <p class="muted small">
            {fmtBytes(b.size)} on the wire{b.decodedFrom && `, decoded from ${b.decodedFrom}`}
            {b.encoding === "base64" && ", binary (base64)"}
            {shown.json && ", JSON"} {b.truncated && <Badge kind="warn">truncated</Badge>}
          </p>
          {b.notice && (
            <p class="insp-notice" role="note">
              {b.notice}
            </p>
          )}
          {b.text === "" ? (
            <p class="muted small">Empty.</p>
          ) : (
            <pre class="mono" tabIndex={0}>
              {shown.text.length > SHOWN ? `${shown.text.slice(0, SHOWN)}\n… (${fmtBytes(shown.text.length - SHOWN)} more not shown)` : shown.text}
            </pre>
          )}
        </>
      )}
    </div>
  )
}

const Headers = (p: { label: string; headers: Readonly<Record<string, string>> | null }) => (
  <div>
    <h4>{p.label}</h4>
    {p.headers === null ? (
      <p class="muted small">None (no answer yet).</p>
    ) : (
      <Table
        caption={p.label}
        rowKey={(r) => r[0]}
        rows={Object.entries(p.headers)}
        empty={<p class="muted small">None.</p>}
        columns={[
          { label: "Name", class: "mono", render: (r) => r[0] },
          { label: "Value", class: "mono insp-wrap", render: (r) => r[1] }
        ]}
      />
    )}
  </div>
)

const json = (v: unknown) => {
  try {
    return JSON.stringify(v, null, 2) ?? String(v)
  } catch {
    return String(v)
  }
}

const BlockView = (p: { block: Block }) => {
  const b = p.block
  switch (b.type) {
    case "text":
      return <p class="insp-text">{b.text}</p>
    case "reasoning":
      return (
        <details class="insp-reasoning">
          <summary>Reasoning</summary>
          <p class="insp-text">{b.text}</p>
        </details>
      )
    case "tool_use":
      return (
        <div class="insp-call">
          <p class="insp-call-head">
            Calls <code>{b.name}</code> <span class="muted small">({b.id})</span>
          </p>
          <pre class="mono" tabIndex={0}>
            {json(b.input)}
          </pre>
        </div>
      )
    case "tool_result":
      return (
        <div class="insp-call">
          <p class="insp-call-head">
            Result of <code>{b.toolUseId}</code> {b.isError && <Badge kind="bad">error</Badge>}
          </p>
          <pre class="mono" tabIndex={0}>
            {b.content}
          </pre>
        </div>
      )
    case "image":
      return <p class="muted small">[image{b.mediaType ? `, ${b.mediaType}` : ""}]</p>
    default:
      return (
        <pre class="mono" tabIndex={0}>
          {json(b)}
        </pre>
      )
  }
}

const Bubbles = (p: { turns: ReadonlyArray<Turn>; answer?: boolean }) => (
  <>
    {p.turns.map((t, i) => (
      <li key={`${p.answer ? "a" : "q"}${i}`} class={`insp-bubble insp-${t.role}`}>
        <div class="insp-role">
          {t.role}
          {p.answer && <span class="muted"> · answer</span>}
        </div>
        {t.blocks.length === 0 ? <p class="muted small">(empty)</p> : t.blocks.map((b, j) => <BlockView key={j} block={b} />)}
      </li>
    ))}
  </>
)

const Conversation = (p: { conversation: NonNullable<Detail["conversation"]> }) => {
  const request = p.conversation.request as ReadonlyArray<Turn>
  const response = p.conversation.response as ReadonlyArray<Turn>
  const raw = p.conversation.rawEvents as ReadonlyArray<{ event?: string; data: string }> | undefined
  return (
    <>
      <ol class="insp-chat" aria-label="Conversation">
        <Bubbles turns={request} />
        <Bubbles turns={response} answer />
      </ol>
      {response.length === 0 && !raw && <p class="muted small">No answer turns (yet).</p>}
      {raw && raw.length > 0 && (
        <details>
          <summary>The answer's raw stream events ({raw.length}): a format the inspector does not merge</summary>
          <pre class="mono" tabIndex={0}>
            {raw.map((e) => (e.event ? `event: ${e.event}\ndata: ${e.data}` : `data: ${e.data}`)).join("\n\n")}
          </pre>
        </details>
      )}
    </>
  )
}

const Annotation = (p: { entry: Detail }) => {
  const [note, setNote] = useState(p.entry.annotation ?? "")
  const [run, busy] = useAction()
  useEffect(() => setNote(p.entry.annotation ?? ""), [p.entry.id])
  return (
    <Form
      label="Annotation"
      onSubmit={() =>
        void run(
          () => ok(api.PUT("/api/tools/traffic-inspector/requests/{id}/annotation", { params: { path: { id: p.entry.id } }, body: { note: note.trim() ? note : null } })),
          note.trim() ? "Note saved" : "Note removed"
        )
      }
    >
      <TextArea label="Note" value={note} onInput={setNote} rows={2} hint="Kept with the entry while it is in the buffer (and in its sessions' exports)." />
      <div class="actions">
        <Button type="submit" busy={busy}>
          Save note
        </Button>
      </div>
    </Form>
  )
}

const Replay = (p: { entry: Detail; onOpen: (id: string) => void }) => {
  const [result, setResult] = useState<Replayed>()
  const [error, setError] = useState<string>()
  const [busy, setBusy] = useState(false)
  useEffect(() => {
    setResult(undefined)
    setError(undefined)
  }, [p.entry.id])
  if (p.entry.llm === null) return <p class="muted small">Only LLM calls can be replayed through the router.</p>
  const replay = async () => {
    setBusy(true)
    setError(undefined)
    setResult(undefined)
    try {
      setResult(await ok(api.POST("/api/tools/traffic-inspector/requests/{id}/replay", { params: { path: { id: p.entry.id } } })))
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e))
    } finally {
      setBusy(false)
    }
  }
  return (
    <div class="insp-replay">
      <div class="actions">
        <Button kind="primary" busy={busy} onClick={() => void replay()}>
          Replay
        </Button>
        <span class="muted small">Sends the captured request again through the router, as the gateway's own caller (not with the client's key).</span>
      </div>
      <ErrorBox error={error} />
      {result && (
        <p role="status" class="insp-replayed">
          Replayed: <Status status={result.status} /> <span class="muted small">request {result.requestId}</span>{" "}
          {result.replay && (
            <button type="button" class="insp-link" onClick={() => p.onOpen(result.replay!)}>
              Open the replay
            </button>
          )}
        </p>
      )}
    </div>
  )
}

const UpstreamView = (p: { exchanges: ReadonlyArray<Upstream>; client: Body | null }) => (
  <>
    {p.exchanges.map((u) => (
      <details key={u.attempt} class="insp-upstream" open={p.exchanges.length === 1}>
        <summary>
          Attempt {u.attempt}: {u.provider} · {u.connection} · {u.model} → {u.status ?? "no answer"}
        </summary>
        {u.url && <p class="mono small insp-wrap">{u.url}</p>}
        {u.error && (
          <p class="error-box" role="note">
            {u.error}
          </p>
        )}
        {reasoningNotes(p.client, u.requestBody).map((n) => (
          <p key={n} class="small insp-reasoning-note">
            Reasoning state: {n}
          </p>
        ))}
        <div class="insp-pair">
          <BodyView label="Sent upstream" body={u.requestBody} />
          <BodyView label="Upstream answer" body={u.responseBody} />
        </div>
      </details>
    ))}
  </>
)

const DetailView = (p: { entry: Detail; onOpen: (id: string) => void }) => {
  const e = p.entry
  const llm = e.llm
  const upstream = e.upstream as ReadonlyArray<Upstream>
  const ids = (list: ReadonlyArray<string>) =>
    list.length === 0
      ? null
      : list.map((id) => (
          <button type="button" class="insp-link insp-id" key={id} onClick={() => p.onOpen(id)}>
            {id}
          </button>
        ))
  return (
    <div class="insp-detail">
      {e.error && (
        <p class="error-box" role="note">
          {e.error}
        </p>
      )}
      <p class="mono insp-wrap insp-url">
        {e.method} {e.url}
      </p>
      <Facts
        items={[
          ["Status", <Status status={e.status} key="s" />],
          ["Source", e.source],
          ["Kind", e.detectedKind],
          ["Protocol", `${e.tls ? "HTTPS" : "HTTP"} ${e.httpVersion}${e.tunnelOnly ? " (tunnel, not intercepted)" : ""}`],
          ["Started", fmtDate(e.timings.startedAt)],
          ["First byte", fmtMs(e.timings.ttfbMs)],
          ["Total", fmtMs(e.timings.totalMs)],
          ["Request size", fmtBytes(e.requestSize)],
          ["Response size", fmtBytes(e.responseSize)],
          ["Process", e.processName ? `${e.processName}${e.pid !== null ? ` (pid ${e.pid})` : ""}` : e.pid !== null ? `pid ${e.pid}` : null],
          ["Agent", e.agent],
          ["Gateway request", e.requestId],
          ["Context", e.contextKey],
          ["Replay of", e.replayOf ? ids([e.replayOf]) : null],
          ["Replays", ids(e.replays)],
          ["Sessions", e.sessionIds.length > 0 ? e.sessionIds.join(", ") : null]
        ]}
      />
      <Annotation entry={e} />
      {llm && (
        <>
          <h3>LLM call</h3>
          <Facts
            items={[
              ["Provider", llm.provider],
              ["API", llm.apiKind],
              ["Model", llm.model],
              ["Mapped to", llm.mappedTo],
              ["Streamed", llm.streamed ? "yes" : "no"],
              ["Turns", fmtNumber(llm.messages)],
              ["Tokens in", fmtNumber(llm.tokensIn)],
              ["Tokens out", fmtNumber(llm.tokensOut)],
              ["Cost (estimate)", llm.costEstimateUsd === null ? null : `≈ ${fmtMoney(llm.costEstimateUsd)} (estimate)`],
              ...(schemaVerdict(e) === null ? [] : [["Structured output", schemaVerdict(e)] as [string, ComponentChildren]])
            ]}
          />
          <Replay entry={e} onOpen={p.onOpen} />
        </>
      )}
      {e.conversation && (
        <>
          <h3>Conversation</h3>
          <Conversation conversation={e.conversation} />
        </>
      )}
      {upstream.length > 0 && (
        <>
          <h3>Upstream</h3>
          <UpstreamView exchanges={upstream} client={e.requestBody} />
        </>
      )}
      <details class="insp-more">
        <summary>Headers</summary>
        <div class="insp-pair">
          <Headers label="Request headers" headers={e.requestHeaders} />
          <Headers label="Response headers" headers={e.responseHeaders} />
        </div>
      </details>
      <details class="insp-more" open={!e.conversation}>
        <summary>Bodies</summary>
        <div class="insp-pair">
          <BodyView label="Request body" body={e.requestBody} />
          <BodyView label="Response body" body={e.responseBody} />
        </div>
      </details>
    </div>
  )
}

// ---------------------------------------------------------------- sessions

const sessionName = (s: Session) => s.name ?? s.id

const Sessions = (p: { viewing: string | undefined; onView: (s: Session | undefined) => void }) => {
  const list = useLoad(() => ok(api.GET("/api/tools/traffic-inspector/sessions")))
  const [name, setName] = useState("")
  const [renaming, setRenaming] = useState<Session>()
  const [newName, setNewName] = useState("")
  const [removing, setRemoving] = useState<Session>()
  const [replaying, setReplaying] = useState<{ session: Session; job?: string }>()
  const [run, busy] = useAction()
  const recording = list.data?.sessions.some((s) => s.state === "recording") ?? false
  // A recording session's count grows: its row follows while one records.
  useInterval(() => recording && list.reload(), 3000)
  const update = (s: Session, body: { action: "stop" } | { action: "rename"; name: string | null }, done: string) =>
    run(() => ok(api.PATCH("/api/tools/traffic-inspector/sessions/{id}", { params: { path: { id: s.id } }, body })), done).then((r) => {
      list.reload()
      return r
    })
  return (
    <Section title="Sessions" actions={<Button onClick={list.reload}>Refresh</Button>}>
      <Form
        label="Record a session"
        onSubmit={() =>
          void run(
            () => ok(api.POST("/api/tools/traffic-inspector/sessions", { body: { name: name.trim() || null } })),
            (s) => `Recording ${sessionName(s)}`
          ).then((s) => {
            if (s) setName("")
            list.reload()
          })
        }
      >
        <TextInput label="Session name" value={name} onInput={setName} placeholder="e.g. codex refactor run" />
        <div class="actions">
          <Button kind="primary" type="submit" busy={busy}>
            Record
          </Button>
        </div>
      </Form>
      <Loader of={list}>
        {(d) => (
          <Table
            caption="Sessions"
            rowKey={(s) => s.id}
            rows={[...d.sessions].sort((a, b) => b.startedAt - a.startedAt)}
            empty={
              <Empty title="No sessions yet">A session keeps every request captured while it records (with bodies), beyond the buffer's rotation, to view or export later.</Empty>
            }
            columns={[
              {
                label: "Name",
                render: (s) => (
                  <>
                    {sessionName(s)} {s.id === p.viewing && <Badge kind="info">viewing</Badge>}
                  </>
                )
              },
              { label: "State", render: (s) => <Badge kind={s.state === "recording" ? "warn" : "muted"}>{s.state}</Badge> },
              { label: "Started", render: (s) => fmtDate(s.startedAt) },
              { label: "Requests", class: "num", render: (s) => `${fmtNumber(s.count)}${s.dropped > 0 ? ` (+${fmtNumber(s.dropped)} dropped)` : ""}` },
              {
                label: "Actions",
                render: (s) => (
                  <div class="actions insp-session-actions">
                    <Button onClick={() => p.onView(s)} aria-label={`View ${sessionName(s)}`}>
                      View
                    </Button>
                    {s.state === "recording" && (
                      <Button onClick={() => void update(s, { action: "stop" }, `${sessionName(s)} saved`)} aria-label={`Stop ${sessionName(s)}`}>
                        Stop
                      </Button>
                    )}
                    <Button
                      onClick={() => {
                        setNewName(s.name ?? "")
                        setRenaming(s)
                      }}
                      aria-label={`Rename ${sessionName(s)}`}
                    >
                      Rename
                    </Button>
                    {s.state === "saved" && (
                      <Button onClick={() => setReplaying({ session: s })} aria-label={`Replay ${sessionName(s)}`}>
                        Replay
                      </Button>
                    )}
                    <a class="btn insp-btn-link" href={`${BASE}/sessions/${encodeURIComponent(s.id)}/export.har`} download={`${s.id}.har`} aria-label={`HAR of ${sessionName(s)}`}>
                      HAR
                    </a>
                    <a
                      class="btn insp-btn-link"
                      href={`${BASE}/sessions/${encodeURIComponent(s.id)}/export?format=jsonl`}
                      download={`${s.id}.jsonl`}
                      aria-label={`JSONL of ${sessionName(s)}`}
                    >
                      JSONL
                    </a>
                    <Button kind="danger" onClick={() => setRemoving(s)} aria-label={`Delete ${sessionName(s)}`}>
                      Delete
                    </Button>
                  </div>
                )
              }
            ]}
          />
        )}
      </Loader>
      <Dialog open={renaming !== undefined} title={`Rename ${renaming ? sessionName(renaming) : ""}`} onClose={() => setRenaming(undefined)}>
        {renaming && (
          <Form
            label="Rename the session"
            onSubmit={() =>
              void update(renaming, { action: "rename", name: newName.trim() || null }, "Session renamed").then((r) => {
                if (r) setRenaming(undefined)
              })
            }
          >
            <TextInput label="New name" value={newName} onInput={setNewName} wide />
            <div class="actions">
              <Button kind="primary" type="submit" busy={busy}>
                Save name
              </Button>
              <Button onClick={() => setRenaming(undefined)}>Cancel</Button>
            </div>
          </Form>
        )}
      </Dialog>
      <Dialog open={replaying !== undefined} title={`Replay ${replaying ? sessionName(replaying.session) : ""} against candidate models`} onClose={() => setReplaying(undefined)}>
        {replaying &&
          (replaying.job === undefined ? (
            <ReplayForm sessionId={replaying.session.id} onStarted={(j) => setReplaying({ ...replaying, job: j.id })} onCancel={() => setReplaying(undefined)} />
          ) : (
            <>
              <ReplayJobView id={replaying.job} />
              <div class="actions">
                <Button onClick={() => setReplaying(undefined)}>Close</Button>
              </div>
            </>
          ))}
      </Dialog>
      <Confirm
        item={removing}
        title="Delete this session?"
        action="Delete session"
        onClose={() => setRemoving(undefined)}
        remove={(s) => ok(api.DELETE("/api/tools/traffic-inspector/sessions/{id}", { params: { path: { id: s.id } } }))}
        done="Session deleted"
        onRemoved={() => {
          if (removing?.id === p.viewing) p.onView(undefined)
          list.reload()
        }}
      >
        {(s) => (
          <p>
            <strong>{sessionName(s)}</strong> and its {fmtNumber(s.count)} recorded requests are removed (the live buffer keeps its own).
          </p>
        )}
      </Confirm>
    </Section>
  )
}

// ---------------------------------------------------------------- capture modes

/** An action whose failure is shown next to its controls (the API's message), as a load's is. */
const useInline = (): [(f: () => Promise<unknown>, done?: string) => Promise<boolean>, boolean, string | undefined] => {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()
  const run = async (f: () => Promise<unknown>, done?: string) => {
    setBusy(true)
    setError(undefined)
    try {
      await f()
      if (done) toast(done)
      return true
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e))
      return false
    } finally {
      setBusy(false)
    }
  }
  return [run, busy, error]
}

const HttpProxy = (p: { state: HttpProxyState; tls: boolean; reload: () => void }) => {
  const [run, busy, error] = useInline()
  const [runTls, tlsBusy, tlsError] = useInline()
  // The box shows the choice at once; the answer (or a reload after a failure) settles it.
  const [tls, setTls] = useState(p.tls)
  useEffect(() => setTls(p.tls), [p.tls])
  const s = p.state
  const act = (action: "start" | "stop") =>
    void run(
      () => ok(api.POST("/api/tools/traffic-inspector/capture-modes/http-proxy", { body: { action } })),
      action === "start" ? "HTTP proxy started" : "HTTP proxy stopped"
    ).then(p.reload)
  return (
    <div class="insp-mode" aria-label="HTTP proxy" role="group">
      <h3>
        HTTP proxy <Badge kind={s.running ? "ok" : "muted"}>{s.running ? "running" : "stopped"}</Badge>
      </h3>
      <p class="muted small">An explicit proxy on this machine: point a client's HTTP_PROXY / HTTPS_PROXY at it. HTTPS is tunnelled unless TLS interception is on.</p>
      {s.running && s.url ? (
        <p>
          Listening on <code class="insp-proxy-url">{s.url}</code>
        </p>
      ) : (
        <p class="muted small">
          Port {s.port === 0 ? "chosen when it starts" : s.port} on {s.host}
        </p>
      )}
      <ErrorBox error={error ?? s.error ?? undefined} />
      <div class="actions">
        {s.running ? (
          <Button busy={busy} onClick={() => act("stop")}>
            Stop HTTP proxy
          </Button>
        ) : (
          <Button kind="primary" busy={busy} onClick={() => act("start")}>
            Start HTTP proxy
          </Button>
        )}
      </div>
      <Checkbox
        label="TLS interception"
        checked={tls}
        hint="Decrypt HTTPS through the proxy with the local CA below (clients must trust it); off, HTTPS is only a tunnel: host, timing and bytes."
        onChange={(enabled) => {
          setTls(enabled)
          void runTls(
            () => ok(api.POST("/api/tools/traffic-inspector/capture-modes/tls-intercept", { body: { enabled } })),
            enabled ? "TLS interception on" : "TLS interception off"
          ).then((done) => {
            if (!done) setTls(!enabled)
            p.reload()
          })
        }}
      />
      {tlsBusy && <p class="muted small">Saving…</p>}
      <ErrorBox error={tlsError} />
    </div>
  )
}

const SystemProxy = (p: { state: SystemProxyState; reload: () => void }) => {
  const [run, busy, error] = useInline()
  const [confirming, setConfirming] = useState<true>()
  const s = p.state
  return (
    <div class="insp-mode" aria-label="System proxy" role="group">
      <h3>
        System proxy <Badge kind={s.applied ? "warn" : "muted"}>{s.applied ? "applied" : "off"}</Badge>
      </h3>
      <p class="muted small">
        Points this desktop's proxy settings (GNOME) and new shells at the HTTP proxy; reverted automatically after {s.guardMinutes} minutes and when the gateway stops.
      </p>
      {s.applied && (
        <p>
          Applied {fmtDate(s.appliedAt)}; reverts at <strong>{fmtDate(s.revertsAt)}</strong>.
        </p>
      )}
      {s.changes.length > 0 && (
        <>
          <h4>What it changed</h4>
          <ul class="insp-changes">
            {s.changes.map((c) => (
              <li key={`${c.kind}:${c.target}`}>
                <code>{c.target}</code> <span class="muted small">({c.kind})</span>: {c.detail}
              </li>
            ))}
          </ul>
        </>
      )}
      {s.notes.map((n) => (
        <p class="muted small" key={n}>
          {n}
        </p>
      ))}
      <ErrorBox error={error ?? s.error ?? undefined} />
      <div class="actions">
        {s.applied ? (
          <Button
            busy={busy}
            onClick={() =>
              void run(() => ok(api.POST("/api/tools/traffic-inspector/capture-modes/system-proxy", { body: { action: "revert" } })), "System proxy reverted").then(p.reload)
            }
          >
            Revert system proxy
          </Button>
        ) : (
          <Button onClick={() => setConfirming(true)}>Apply system proxy…</Button>
        )}
      </div>
      <Confirm
        item={confirming}
        title="Point this machine at the inspector?"
        action="Apply system proxy"
        onClose={() => setConfirming(undefined)}
        remove={() => ok(api.POST("/api/tools/traffic-inspector/capture-modes/system-proxy", { body: { action: "apply" } }))}
        done="System proxy applied"
        onRemoved={p.reload}
      >
        {() => (
          <p>
            The desktop's proxy settings and your shells' environment are pointed at the HTTP proxy (it starts if needed). Everything is recorded first and put back on revert,
            after {s.guardMinutes} minutes, or when the gateway stops.
          </p>
        )}
      </Confirm>
    </div>
  )
}

/** A custom host's on/off box: shows the choice at once, then what the server kept. */
const HostToggle = (p: { host: string; enabled: boolean; run: (f: () => Promise<unknown>, done?: string) => Promise<boolean>; done: () => void }) => {
  const [on, setOn] = useState(p.enabled)
  useEffect(() => setOn(p.enabled), [p.enabled])
  return (
    <input
      type="checkbox"
      checked={on}
      aria-label={`Capture ${p.host}`}
      onChange={(e) => {
        const enabled = (e.currentTarget as HTMLInputElement).checked
        setOn(enabled)
        void p
          .run(
            () => ok(api.PATCH("/api/tools/traffic-inspector/hosts/{host}", { params: { path: { host: p.host } }, body: { enabled } })),
            `${p.host} ${enabled ? "enabled" : "disabled"}`
          )
          .then((done) => {
            if (!done) setOn(!enabled)
            p.done()
          })
      }}
    />
  )
}

const CustomHosts = () => {
  const hosts = useLoad(() => ok(api.GET("/api/tools/traffic-inspector/hosts")))
  const [host, setHost] = useState("")
  const [kind, setKind] = useState<"llm" | "app" | "custom">("llm")
  const [removing, setRemoving] = useState<string>()
  const [run, busy, error] = useInline()
  const mitm = hosts.data?.mitm as MitmState | undefined
  return (
    <div class="insp-mode" aria-label="Custom hosts" role="group">
      <h3>Custom hosts {mitm && <Badge kind={mitm.running ? "ok" : "muted"}>{mitm.running ? `TLS server on port ${mitm.port}` : "TLS server stopped"}</Badge>}</h3>
      <p class="muted small">
        Names resolved to this machine through a marked block in {hosts.data ? <code>{hosts.data.hostsFile}</code> : "the hosts file"}, answered by the local TLS server (the client
        must trust the CA).
      </p>
      {mitm?.error && (
        <p class="error-box" role="note">
          {mitm.error}
        </p>
      )}
      <Form
        label="Add a custom host"
        onSubmit={() =>
          void run(() => ok(api.POST("/api/tools/traffic-inspector/hosts", { body: { host: host.trim(), kind } })), `${host.trim()} added`).then(() => {
            setHost("")
            hosts.reload()
          })
        }
      >
        <TextInput label="Host name" value={host} onInput={setHost} required placeholder="api.example.com" />
        <Select<"llm" | "app" | "custom">
          label="Kind"
          value={kind}
          options={[
            { value: "llm", label: "LLM API" },
            { value: "app", label: "app" },
            { value: "custom", label: "other" }
          ]}
          onChange={setKind}
        />
        <div class="actions">
          <Button type="submit" busy={busy}>
            Add host
          </Button>
        </div>
      </Form>
      <ErrorBox error={error} />
      <Loader of={hosts}>
        {(d) => (
          <Table
            caption="Custom hosts"
            rowKey={(h) => h.host}
            rows={d.hosts}
            empty={<p class="muted small">No custom hosts.</p>}
            columns={[
              { label: "Host", class: "mono", render: (h) => h.host },
              { label: "Kind", render: (h) => h.kind },
              { label: "Enabled", render: (h) => <HostToggle host={h.host} enabled={h.enabled} run={run} done={hosts.reload} /> },
              {
                label: "Actions",
                render: (h) => (
                  <Button kind="danger" onClick={() => setRemoving(h.host)} aria-label={`Remove ${h.host}`}>
                    Remove
                  </Button>
                )
              }
            ]}
          />
        )}
      </Loader>
      <Confirm
        item={removing}
        title="Remove this custom host?"
        action="Remove host"
        onClose={() => setRemoving(undefined)}
        remove={(h) => ok(api.DELETE("/api/tools/traffic-inspector/hosts/{host}", { params: { path: { host: h } } }))}
        done="Custom host removed"
        onRemoved={hosts.reload}
      >
        {(h) => (
          <p>
            <code>{h}</code> leaves the hosts file and resolves as before.
          </p>
        )}
      </Confirm>
    </div>
  )
}

const Ca = (p: { ca: Modes["ca"]; reload: () => void }) => {
  const [run, busy, error] = useInline()
  return (
    <div class="insp-mode" aria-label="Local CA" role="group">
      <h3>Local CA</h3>
      {p.ca.fingerprint256 ? (
        <>
          <p class="small">SHA-256 fingerprint</p>
          <p>
            <code class="insp-fingerprint">{p.ca.fingerprint256}</code>
          </p>
          {p.ca.path && (
            <p class="muted small">
              Kept at <code>{p.ca.path}</code>
            </p>
          )}
        </>
      ) : (
        <p class="muted small">No CA yet: it is made on first use (TLS interception, a custom host, or its download).</p>
      )}
      <ErrorBox error={error} />
      <div class="actions">
        <a class="btn insp-btn-link" href={p.ca.pemUrl} download="gateway-inspector-ca.pem">
          Download ca.pem
        </a>
        {!p.ca.fingerprint256 && (
          <Button busy={busy} onClick={() => void run(() => ok(api.GET("/api/tools/traffic-inspector/ca.pem", { parseAs: "text" })), "CA created").then(p.reload)}>
            Create the CA
          </Button>
        )}
      </div>
      <h4>Trusting it</h4>
      <ul class="insp-trust">
        {p.ca.trust.map((line) => (
          <li key={line}>
            <code>{line}</code>
          </li>
        ))}
      </ul>
    </div>
  )
}

type TproxyState = Res<"/api/tools/agent-bridge/tproxy", "get">

/** Transparent capture (TPROXY, docs/capture.md): its own route, its own state. */
const Transparent = () => {
  const status = useLoad(() => ok(api.GET("/api/tools/agent-bridge/tproxy")))
  const [run, busy, error] = useInline()
  const [confirming, setConfirming] = useState<true>()
  return (
    <Loader of={status}>
      {(t: TproxyState) => (
        <div class="insp-mode" aria-label="Transparent capture" role="group">
          <h3>
            Transparent capture <Badge kind={t.running ? "warn" : "muted"}>{t.running ? "running" : t.available ? "off" : "unavailable"}</Badge>
          </h3>
          <p class="muted small">
            Linux only: the outbound HTTPS (port {t.config?.dport ?? 443}) of every process on this machine is diverted to the gateway by firewall rules, decrypted with the CA
            below and recorded, with no client setting. Undone on stop and when the gateway stops.
          </p>
          {!t.available && t.reason && <p class="small">Not available here: {t.reason}</p>}
          {t.running && (
            <p>
              Listening on port <strong>{t.port}</strong> since {fmtDate(t.startedAt)}; {fmtNumber(t.interceptCount)} connection{t.interceptCount === 1 ? "" : "s"} intercepted.
              {t.trustStore.installed ? (
                <>
                  {" "}
                  CA installed in <code>{t.trustStore.path}</code>.
                </>
              ) : (
                t.trustStore.note && <span class="muted small"> {t.trustStore.note}</span>
              )}
            </p>
          )}
          {t.running && t.commands.applied.length > 0 && (
            <details>
              <summary>What it changed</summary>
              <ul class="insp-changes">
                {t.commands.applied.map((c) => (
                  <li key={c}>
                    <code>{c}</code>
                  </li>
                ))}
              </ul>
            </details>
          )}
          <ErrorBox error={error ?? t.lastError ?? undefined} />
          <div class="actions">
            {t.running ? (
              <Button busy={busy} onClick={() => void run(() => ok(api.DELETE("/api/tools/agent-bridge/tproxy")), "Transparent capture stopped").then(status.reload)}>
                Stop transparent capture
              </Button>
            ) : (
              <Button disabled={!t.available} onClick={() => setConfirming(true)}>
                Start transparent capture…
              </Button>
            )}
          </div>
          <Confirm
            item={confirming}
            title="Divert this machine's HTTPS through the gateway?"
            action="Start transparent capture"
            onClose={() => setConfirming(undefined)}
            remove={() => ok(api.POST("/api/tools/agent-bridge/tproxy", { body: {} }))}
            done="Transparent capture started"
            onRemoved={status.reload}
          >
            {() => (
              <p>
                Firewall rules and a routing rule send new HTTPS connections of every local process to the gateway, and the CA goes into the system trust store. Clients that do not
                trust the CA will refuse their connections. Everything is recorded first and removed on stop, when the gateway stops, or at its next start after a crash.
              </p>
            )}
          </Confirm>
        </div>
      )}
    </Loader>
  )
}

const CaptureModes = () => {
  const modes = useLoad(() => ok(api.GET("/api/tools/traffic-inspector/capture-modes")))
  return (
    <Section title="Capture modes" actions={<Button onClick={modes.reload}>Refresh</Button>}>
      <Loader of={modes}>
        {(m) => (
          <div class="insp-modes">
            <div class="insp-mode" aria-label="Agent bridge" role="group">
              <h3>
                Agent bridge <Badge kind={m.agentBridge.enabled ? "ok" : "muted"}>{m.agentBridge.enabled ? "on" : "off"}</Badge>
              </h3>
              <p class="muted small">
                Every request through this gateway, with the upstream side.{" "}
                {m.agentBridge.capturingBodies ? "Bodies are kept now" : "Bodies are kept while an inspector client is connected or a session records"} (
                {fmtNumber(m.agentBridge.subscribers)} client{m.agentBridge.subscribers === 1 ? "" : "s"} connected). Buffer: {fmtNumber(m.buffer.entries)} of{" "}
                {fmtNumber(m.buffer.bufferSize)} entries, {fmtBytes(m.buffer.bodyBytes)} of {fmtBytes(m.buffer.maxBodyBytes)} bodies; secrets{" "}
                {m.buffer.maskSecrets ? "masked" : "kept"}.
              </p>
            </div>
            <HttpProxy state={m.httpProxy as HttpProxyState} tls={m.tlsIntercept.enabled} reload={modes.reload} />
            <SystemProxy state={m.systemProxy as SystemProxyState} reload={modes.reload} />
            <CustomHosts />
            <Transparent />
            <Ca ca={m.ca} reload={modes.reload} />
          </div>
        )}
      </Loader>
    </Section>
  )
}

// ---------------------------------------------------------------- the page

const feedBadge = (s: FeedState) => <Badge kind={s === "open" ? "ok" : "warn"}>{s === "open" ? "live" : s === "connecting" ? "connecting…" : "reconnecting…"}</Badge>

export default function InspectorPage() {
  const feed = useInspectorFeed()
  const [filters, setFilters] = useState<Filters>(NO_FILTERS)
  const [session, setSession] = useState<Session>()
  const [selected, setSelected] = useState<string>()
  const [clearing, setClearing] = useState<true>()
  const query = queryOf(filters, session?.id)
  const queryKey = new URLSearchParams(query).toString()
  // A session's entries: from the API, with the same filters (not live).
  const recorded = useLoad(() => (session ? ok(api.GET("/api/tools/traffic-inspector/requests", { params: { query } })) : Promise.resolve(undefined)), [session?.id, queryKey])
  const rows = useMemo(
    () => (session ? [...(recorded.data?.requests ?? [])].reverse() : feed.entries.filter((e) => matches(e, filters))),
    [session, recorded.data, feed.entries, filters]
  )
  const pool = session ? rows : feed.entries
  const current = pool.find((e) => e.id === selected) ?? feed.entries.find((e) => e.id === selected)
  // The detail follows its entry: a new status, note or replay loads it again.
  // An entry that left the list (rotated out, cleared) keeps the detail already loaded.
  const stamp = useRef("")
  if (current) stamp.current = `${current.id}|${current.status}|${current.annotation ?? ""}|${current.replays.length}|${current.hasBodies}`
  const detail = useLoad(
    () => (selected ? ok(api.GET("/api/tools/traffic-inspector/requests/{id}", { params: { path: { id: selected } } })) : Promise.resolve(undefined)),
    [selected, stamp.current]
  )
  const shown = detail.data && detail.data.id === selected ? detail.data : undefined
  const filtered = queryKey !== "" && queryKey !== (session ? `sessionId=${encodeURIComponent(session.id)}` : "")
  const view = (s: Session | undefined) => {
    setSession(s)
    setSelected(undefined)
  }
  return (
    <Page
      title="Inspector"
      description="Every request through the gateway (and, with a capture mode on, this machine's HTTP traffic), live: the conversation, headers, bodies and upstream side of each."
      actions={
        <>
          {feedBadge(feed.state)}
          <a class="btn insp-btn-link" href={`${BASE}/export.har${queryKey ? `?${queryKey}` : ""}`} download={session ? `${session.id}.har` : "inspector.har"}>
            Download HAR
          </a>
          {!session && (
            <Button kind="danger" onClick={() => setClearing(true)}>
              Clear
            </Button>
          )}
        </>
      }
    >
      <Section
        title={session ? `Session ${sessionName(session)}` : "Requests"}
        actions={
          session ? (
            <>
              <Button onClick={recorded.reload}>Refresh</Button>
              <Button kind="primary" onClick={() => view(undefined)}>
                Back to live
              </Button>
            </>
          ) : undefined
        }
      >
        <FilterBar value={filters} onChange={setFilters} />
        <p class="muted small insp-count" aria-live="polite">
          {session
            ? `${fmtNumber(rows.length)} recorded request${rows.length === 1 ? "" : "s"}${filtered ? " matching" : ""}`
            : `${fmtNumber(rows.length)}${filtered ? ` of ${fmtNumber(feed.entries.length)}` : ""} request${rows.length === 1 ? "" : "s"} (buffer of ${fmtNumber(feed.bufferSize)})`}
        </p>
        {session && <ErrorBox error={recorded.error} retry={recorded.reload} />}
        {rows.length === 0 ? (
          session ? (
            recorded.data && <Empty title={filtered ? "No recorded request matches these filters" : "This session recorded no requests"} />
          ) : filtered ? (
            <Empty title="No request matches these filters">
              <Button onClick={() => setFilters(NO_FILTERS)}>Clear filters</Button>
            </Empty>
          ) : (
            <Empty title="No requests captured yet">
              Send a request through the gateway: it appears here as it starts and is updated when it ends. Other programs' traffic needs a capture mode (below).
            </Empty>
          )
        ) : (
          <RequestTable rows={rows} selected={selected} onSelect={setSelected} label={session ? `Requests of session ${sessionName(session)}` : "Intercepted requests"} />
        )}
      </Section>
      {selected && (
        <Section title="Request details" actions={<Button onClick={() => setSelected(undefined)}>Close details</Button>}>
          <ErrorBox error={detail.error} retry={detail.reload} />
          {shown ? <DetailView entry={shown} onOpen={setSelected} /> : !detail.error && <Loading />}
        </Section>
      )}
      <Sessions viewing={session?.id} onView={view} />
      <CaptureModes />
      <Confirm
        item={clearing}
        title="Clear the inspector's buffer?"
        action="Clear buffer"
        onClose={() => setClearing(undefined)}
        remove={() => ok(api.DELETE("/api/tools/traffic-inspector/requests"))}
        done="Buffer cleared"
        onRemoved={() => setSelected(undefined)}
      >
        {() => <p>Every captured request leaves the live list. Saved sessions keep theirs.</p>}
      </Confirm>
    </Page>
  )
}
