import { useState } from "preact/hooks"
import { api, ok } from "../../api/client"
import {
  Badge,
  Button,
  Confirm,
  Dialog,
  Empty,
  fmtDate,
  fmtNumber,
  Form,
  Loader,
  Section,
  Table,
  TextInput,
  useAction,
  useInterval,
  useLoad
} from "../../ui"
import { ReplayForm, ReplayJobView } from "../replay"
import { BASE, type Session } from "./api"

export const sessionName = (s: Session) => s.name ?? s.id

/** Sessions: record a named slice of the traffic, view one in the list above, rename, replay, export or delete it. */
export const Sessions = (p: { viewing: string | undefined; onView: (s: Session | undefined) => void }) => {
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
              <Empty title="No sessions yet">
                A session keeps every request captured while it records (with bodies), beyond the buffer's rotation, to view or export
                later.
              </Empty>
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
              {
                label: "Requests",
                class: "num",
                render: (s) => `${fmtNumber(s.count)}${s.dropped > 0 ? ` (+${fmtNumber(s.dropped)} dropped)` : ""}`
              },
              {
                label: "Actions",
                render: (s) => (
                  <div class="actions insp-session-actions">
                    <Button onClick={() => p.onView(s)} aria-label={`View ${sessionName(s)}`}>
                      View
                    </Button>
                    {s.state === "recording" && (
                      <Button
                        onClick={() => void update(s, { action: "stop" }, `${sessionName(s)} saved`)}
                        aria-label={`Stop ${sessionName(s)}`}
                      >
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
                    <a
                      class="btn insp-btn-link"
                      href={`${BASE}/sessions/${encodeURIComponent(s.id)}/export.har`}
                      download={`${s.id}.har`}
                      aria-label={`HAR of ${sessionName(s)}`}
                    >
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
      <Dialog
        open={renaming !== undefined}
        title={`Rename ${renaming ? sessionName(renaming) : ""}`}
        onClose={() => setRenaming(undefined)}
      >
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
      <Dialog
        open={replaying !== undefined}
        title={`Replay ${replaying ? sessionName(replaying.session) : ""} against candidate models`}
        onClose={() => setReplaying(undefined)}
      >
        {replaying &&
          (replaying.job === undefined ? (
            <ReplayForm
              sessionId={replaying.session.id}
              onStarted={(j) => setReplaying({ ...replaying, job: j.id })}
              onCancel={() => setReplaying(undefined)}
            />
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
