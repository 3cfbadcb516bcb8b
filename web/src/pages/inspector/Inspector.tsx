import { useMemo, useRef, useState } from "preact/hooks"
import { api, ok } from "../../api/client"
import { Badge, Button, Confirm, Empty, ErrorBox, fmtNumber, Loading, Page, Section, useLoad } from "../../ui"
import { BASE, type Session } from "./api"
import { CaptureModes } from "./CaptureModes"
import { DetailView } from "./DetailView"
import { type FeedState, useInspectorFeed } from "./feed"
import { FilterBar } from "./FilterBar"
import { type Filters, matches, NO_FILTERS, queryOf } from "./filters"
import { RequestTable } from "./RequestTable"
import { Sessions, sessionName } from "./Sessions"
import "./Inspector.css"

// The traffic inspector (docs/inspector.md), under /api/tools/traffic-inspector: a live list of
// what the gateway (and, with a capture mode on, this machine's HTTP traffic) sends, from its
// WebSocket feed (a snapshot, then new/update/clear events of entry summaries); a row opens its
// detail (GET requests/{id}: headers, bodies, the normalized conversation, the upstream side).
// Sessions record a named slice of it; the capture modes panel starts the proxy listeners and
// shows the local CA clients must trust for TLS interception.
//
// This page keeps what its parts share: the filters, the session viewed and the request selected.
// Its parts, one file each: the feed (feed.ts), the filters (filters.ts, FilterBar.tsx), the list
// (RequestTable.tsx), the details (DetailView.tsx and the views it composes), the sessions
// (Sessions.tsx) and the capture modes (CaptureModes.tsx and a file per mode).

const feedBadge = (s: FeedState) => (
  <Badge kind={s === "open" ? "ok" : "warn"}>{s === "open" ? "live" : s === "connecting" ? "connecting…" : "reconnecting…"}</Badge>
)

export default function InspectorPage() {
  const feed = useInspectorFeed()
  const [filters, setFilters] = useState<Filters>(NO_FILTERS)
  const [session, setSession] = useState<Session>()
  const [selected, setSelected] = useState<string>()
  const [clearing, setClearing] = useState<true>()
  const query = queryOf(filters, session?.id)
  const queryKey = new URLSearchParams(query).toString()
  // A session's entries: from the API, with the same filters (not live).
  const recorded = useLoad(
    () => (session ? ok(api.GET("/api/tools/traffic-inspector/requests", { params: { query } })) : Promise.resolve(undefined)),
    [session?.id, queryKey]
  )
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
    () =>
      selected
        ? ok(api.GET("/api/tools/traffic-inspector/requests/{id}", { params: { path: { id: selected } } }))
        : Promise.resolve(undefined),
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
          <a
            class="btn insp-btn-link"
            href={`${BASE}/export.har${queryKey ? `?${queryKey}` : ""}`}
            download={session ? `${session.id}.har` : "inspector.har"}
          >
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
              Send a request through the gateway: it appears here as it starts and is updated when it ends. Other programs' traffic needs a
              capture mode (below).
            </Empty>
          )
        ) : (
          <RequestTable
            rows={rows}
            selected={selected}
            onSelect={setSelected}
            label={session ? `Requests of session ${sessionName(session)}` : "Intercepted requests"}
          />
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
