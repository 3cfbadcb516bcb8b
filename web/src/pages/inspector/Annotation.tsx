import { useEffect, useState } from "preact/hooks"
import { api, ok } from "../../api/client"
import { Button, Form, TextArea, useAction } from "../../ui"
import type { Detail } from "./api"

/** The entry's note, saved with it (PUT requests/{id}/annotation). */
export const Annotation = (p: { entry: Detail }) => {
  const [note, setNote] = useState(p.entry.annotation ?? "")
  const [run, busy] = useAction()
  useEffect(() => setNote(p.entry.annotation ?? ""), [p.entry.id])
  return (
    <Form
      label="Annotation"
      onSubmit={() =>
        void run(
          () =>
            ok(
              api.PUT("/api/tools/traffic-inspector/requests/{id}/annotation", {
                params: { path: { id: p.entry.id } },
                body: { note: note.trim() ? note : null }
              })
            ),
          note.trim() ? "Note saved" : "Note removed"
        )
      }
    >
      <TextArea
        label="Note"
        value={note}
        onInput={setNote}
        rows={2}
        hint="Kept with the entry while it is in the buffer (and in its sessions' exports)."
      />
      <div class="actions">
        <Button type="submit" busy={busy}>
          Save note
        </Button>
      </div>
    </Form>
  )
}
