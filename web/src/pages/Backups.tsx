import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import {
  Badge,
  Button,
  Checkbox,
  Dialog,
  Empty,
  Field,
  fmtBytes,
  fmtDate,
  Form,
  Loader,
  Page,
  Section,
  Table,
  TextInput,
  useAction,
  useLoad
} from "../ui"
import { BackupSchedule } from "./operate/BackupSchedule"
import "./operate/operate.css"

// Backups of the database (docs/operations.md): GET /api/db-backups lists, PUT takes one, POST { id }
// restores one; GET /api/db-backups/export downloads the database, /exportAll an archive (the
// storage key sealed with the X-Export-Passphrase header), POST /api/db-backups/import restores an
// upload. Downloads and the upload go through the typed client too (parseAs "blob", a FormData body),
// so no hand-written fetch is needed.

const loadBackups = () => ok(api.GET("/api/db-backups"))
type Backup = Awaited<ReturnType<typeof loadBackups>>["backups"][number]
type Restored = { restored: string; safetyBackup: Backup; migrated: ReadonlyArray<string> }

const kindBadge = (k: Backup["kind"]) => <Badge kind={k === "manual" ? "info" : k === "scheduled" ? "ok" : "warn"}>{k}</Badge>

/** Saves a blob as a file: a temporary object URL on a link with `download`. */
const saveBlob = (blob: Blob, response: Response, fallback: string) => {
  const m = /filename="?([^";]+)"?/i.exec(response.headers.get("content-disposition") ?? "")
  const a = document.createElement("a")
  a.href = URL.createObjectURL(blob)
  a.download = m?.[1] ?? fallback
  document.body.appendChild(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000)
}

const RestoredNote = (p: { result: Restored | undefined }) =>
  p.result ? (
    <p class="result result-ok" role="status">
      Restored <code class="mono">{p.result.restored}</code>. The state it replaced is kept as backup{" "}
      <code class="mono">{p.result.safetyBackup.id}</code>
      {p.result.migrated.length > 0 ? `; migrations applied: ${p.result.migrated.join(", ")}` : ""}.
    </p>
  ) : null

const Downloads = () => {
  const [includeKey, setIncludeKey] = useState(false)
  const [passphrase, setPassphrase] = useState("")
  const [run, busy] = useAction()
  const exportDb = () =>
    void run(async () => {
      const r = await api.GET("/api/db-backups/export", { parseAs: "blob" })
      const blob = await ok(Promise.resolve(r))
      saveBlob(blob as unknown as Blob, r.response, "gateway.db")
    }, "Download started")
  const exportAll = () =>
    void run(async () => {
      const r = await api.GET("/api/db-backups/exportAll", {
        params: { query: includeKey ? { includeKey: "true" } : {} },
        ...(includeKey ? { headers: { "x-export-passphrase": passphrase } } : {}),
        parseAs: "blob"
      })
      const blob = await ok(Promise.resolve(r))
      saveBlob(blob as unknown as Blob, r.response, "gateway-export.tar.gz")
    }, "Download started")
  return (
    <>
      <p class="muted">
        The database alone (a SQLite file), or an archive of everything (database, and optionally the storage key that decrypts provider
        keys, sealed with a passphrase).
      </p>
      <div class="actions">
        <Button busy={busy} onClick={exportDb}>
          Download database (.db)
        </Button>
      </div>
      <div class="sub">
        <Form onSubmit={exportAll} label="Download an archive">
          <Checkbox
            label="Include the storage key"
            checked={includeKey}
            onChange={setIncludeKey}
            hint="Without it, encrypted provider keys in the archive cannot be read by another gateway."
          />
          {includeKey && (
            <TextInput
              label="Passphrase"
              type="password"
              value={passphrase}
              onInput={setPassphrase}
              required
              autoComplete="new-password"
              hint="At least 8 characters; needed to import the key. Sent in the X-Export-Passphrase header."
            />
          )}
          <Button kind="primary" type="submit" busy={busy}>
            Download archive (.tar.gz)
          </Button>
        </Form>
      </div>
    </>
  )
}

const Upload = (p: { onRestored: (r: Restored) => void }) => {
  const [file, setFile] = useState<File | undefined>()
  const [confirm, setConfirm] = useState(false)
  const [run, busy] = useAction()
  const upload = () =>
    void run(() => {
      const form = new FormData()
      form.append("file", file!)
      return ok(api.POST("/api/db-backups/import", { body: form as never, bodySerializer: (b: unknown) => b as FormData }))
    }, "Import restored").then((r) => {
      setConfirm(false)
      if (r) p.onRestored(r)
    })
  return (
    <>
      <Form onSubmit={() => file && setConfirm(true)} label="Import a backup">
        <Field
          label="Database file or archive"
          hint="A .db file from “Download database” or a .tar.gz from “Download archive”. It replaces the current database (a safety backup is taken first)."
        >
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              type="file"
              accept=".db,.sqlite,.sqlite3,.gz,.tgz,application/gzip"
              required
              onChange={(e) => setFile((e.currentTarget as HTMLInputElement).files?.[0])}
            />
          )}
        </Field>
        <Button kind="danger" type="submit" disabled={!file}>
          Import…
        </Button>
      </Form>
      <Dialog open={confirm} title="Replace the database with this file?" onClose={() => setConfirm(false)}>
        <p>
          Everything stored now (keys, providers, settings, usage) is replaced by <strong>{file?.name}</strong>. The current state is kept
          as a pre-restore backup.
        </p>
        <div class="actions">
          <Button kind="danger" busy={busy} onClick={upload}>
            Import and restore
          </Button>
          <Button onClick={() => setConfirm(false)}>Cancel</Button>
        </div>
      </Dialog>
    </>
  )
}

export default function BackupsPage() {
  const list = useLoad(loadBackups)
  const [restoring, setRestoring] = useState<Backup | undefined>()
  const [restored, setRestored] = useState<Restored | undefined>()
  const [run, busy] = useAction()
  const take = () =>
    void run(
      () => ok(api.PUT("/api/db-backups")),
      (b) => `Backup ${b.id} taken`
    ).then(list.reload)
  const restore = (b: Backup) =>
    void run(() => ok(api.POST("/api/db-backups", { body: { id: b.id } })), "Backup restored").then((r) => {
      setRestoring(undefined)
      if (r) {
        setRestored(r)
        list.reload()
      }
    })
  const onRestored = (r: Restored) => {
    setRestored(r)
    list.reload()
  }
  return (
    <Page
      title="Backups"
      description="Snapshots of the gateway's database: taken on request, on a schedule, and before every restore."
      actions={
        <Button kind="primary" busy={busy} onClick={take}>
          Take a backup now
        </Button>
      }
    >
      <div class="operate">
        <RestoredNote result={restored} />
        <Section title="Backups">
          <Loader of={list}>
            {(data) => (
              <Table
                caption="Backups"
                rows={data.backups}
                rowKey={(b) => b.id}
                empty={<Empty title="No backups yet">Press “Take a backup now”, or set a schedule below.</Empty>}
                columns={[
                  { label: "Backup", render: (b) => <code class="mono wrap">{b.id}</code> },
                  { label: "Taken", render: (b) => fmtDate(b.createdAt) },
                  { label: "Kind", render: (b) => kindBadge(b.kind) },
                  { label: "Size", render: (b) => fmtBytes(b.size) },
                  {
                    label: "Actions",
                    render: (b) => (
                      <Button kind="danger" onClick={() => setRestoring(b)} aria-label={`Restore ${b.id}`}>
                        Restore…
                      </Button>
                    )
                  }
                ]}
              />
            )}
          </Loader>
        </Section>
        <Section title="Schedule">
          <BackupSchedule />
        </Section>
        <Section title="Download an export">
          <Downloads />
        </Section>
        <Section title="Import">
          <Upload onRestored={onRestored} />
        </Section>
        <Dialog open={restoring !== undefined} title="Restore this backup?" onClose={() => setRestoring(undefined)}>
          <p>
            The database goes back to <code class="mono wrap">{restoring?.id}</code> ({fmtDate(restoring?.createdAt)}). Changes made since
            are undone; the current state is kept as a pre-restore backup.
          </p>
          <div class="actions">
            <Button kind="danger" busy={busy} onClick={() => restoring && restore(restoring)}>
              Restore
            </Button>
            <Button onClick={() => setRestoring(undefined)}>Cancel</Button>
          </div>
        </Dialog>
      </div>
    </Page>
  )
}
