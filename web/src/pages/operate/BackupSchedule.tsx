import { useState } from "preact/hooks"
import { api, ok } from "../../api/client"
import { Button, Form, Loader, NumberInput, useAction, useLoad } from "../../ui"

// The backup schedule: GET/PUT /api/settings/backups (docs/operations.md, "Settings"); what is in
// effect, and whether settings or the environment chose it, comes from GET /api/settings (info.backups).

const ScheduleForm = (p: { intervalHours: number | null; keep: number | null; onSaved: () => void }) => {
  const [intervalHours, setInterval] = useState<number | undefined>(p.intervalHours ?? undefined)
  const [keep, setKeep] = useState<number | undefined>(p.keep ?? undefined)
  const [run, busy] = useAction()
  return (
    <Form
      label="Backup schedule"
      onSubmit={() =>
        void run(
          () => ok(api.PUT("/api/settings/backups", { body: { intervalHours: intervalHours ?? null, keep: keep ?? null } })),
          "Backup schedule saved"
        ).then((r) => r && p.onSaved())
      }
    >
      <NumberInput
        label="Hours between backups"
        value={intervalHours}
        onInput={setInterval}
        min={0}
        max={8760}
        step="any"
        hint="0 turns scheduled backups off; empty: GATEWAY_BACKUP_INTERVAL_HOURS (default 24)."
      />
      <NumberInput
        label="Scheduled backups kept"
        value={keep}
        onInput={setKeep}
        min={0}
        max={10000}
        step={1}
        hint="Older scheduled backups are deleted; empty: GATEWAY_BACKUP_KEEP (default 7)."
      />
      <Button kind="primary" type="submit" busy={busy}>
        Save schedule
      </Button>
    </Form>
  )
}

export const BackupSchedule = () => {
  const doc = useLoad(() => ok(api.GET("/api/settings")))
  return (
    <Loader of={doc}>
      {(d) => (
        <>
          <p class="muted" data-schedule>
            In effect:{" "}
            {d.info.backups.intervalHours === 0
              ? "scheduled backups are off"
              : `a backup every ${d.info.backups.intervalHours} h, keeping ${d.info.backups.keep}`}{" "}
            (from {d.info.backups.source === "env" ? "the environment or its default" : "these settings"}).
          </p>
          <ScheduleForm
            key={JSON.stringify(d.backups)}
            intervalHours={d.backups.intervalHours}
            keep={d.backups.keep}
            onSaved={doc.reload}
          />
        </>
      )}
    </Loader>
  )
}
