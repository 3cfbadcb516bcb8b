import type { ButtonHTMLAttributes, ComponentChildren, InputHTMLAttributes } from "preact"
import { useCallback, useEffect, useId, useRef, useState } from "preact/hooks"

// Shared building blocks of every page: loading, errors, tables, forms, dialogs, toasts.
// Pages compose these; none of them styles itself inline (the CSP allows only our stylesheet).

// ---------------------------------------------------------------- data loading

export interface Loaded<T> {
  readonly data: T | undefined
  readonly error: string | undefined
  readonly loading: boolean
  readonly reload: () => void
}

/** Runs `load` on mount and whenever `deps` change; `reload()` runs it again. */
export const useLoad = <T,>(load: () => Promise<T>, deps: ReadonlyArray<unknown> = []): Loaded<T> => {
  const [state, setState] = useState<{ data: T | undefined; error: string | undefined; loading: boolean }>({
    data: undefined,
    error: undefined,
    loading: true
  })
  const [tick, setTick] = useState(0)
  useEffect(() => {
    let live = true
    setState((s) => ({ ...s, loading: true }))
    load().then(
      (data) => live && setState({ data, error: undefined, loading: false }),
      (e: unknown) => live && setState((s) => ({ data: s.data, error: e instanceof Error ? e.message : String(e), loading: false }))
    )
    return () => {
      live = false
    }
  }, [...deps, tick])
  return { ...state, reload: useCallback(() => setTick((n) => n + 1), []) }
}

/** Re-runs `f` every `ms` while the page is visible. */
export const useInterval = (f: () => void, ms: number) => {
  const saved = useRef(f)
  saved.current = f
  useEffect(() => {
    const id = setInterval(() => document.visibilityState === "visible" && saved.current(), ms)
    return () => clearInterval(id)
  }, [ms])
}

// ---------------------------------------------------------------- toasts

type Toast = { id: number; text: string; kind: "ok" | "error" }
let toasts: Toast[] = []
let nextToast = 1
const toastListeners = new Set<(t: Toast[]) => void>()
export const toast = (text: string, kind: "ok" | "error" = "ok") => {
  const t = { id: nextToast++, text, kind }
  toasts = [...toasts, t]
  toastListeners.forEach((f) => f(toasts))
  setTimeout(
    () => {
      toasts = toasts.filter((x) => x.id !== t.id)
      toastListeners.forEach((f) => f(toasts))
    },
    kind === "error" ? 8000 : 4000
  )
}
export const Toasts = () => {
  const [list, setList] = useState<Toast[]>(toasts)
  useEffect(() => {
    toastListeners.add(setList)
    return () => void toastListeners.delete(setList)
  }, [])
  return (
    <div class="toasts" role="status" aria-live="polite">
      {list.map((t) => (
        <div key={t.id} class={`toast toast-${t.kind}`}>
          {t.text}
        </div>
      ))}
    </div>
  )
}

/**
 * A form's values over the server's. The draft starts as the server's values and takes each new
 * reading of them (the reload after a save, a page's poll, someone else's change) key by key,
 * except the keys the user has changed since the form last took or saved them: what the user is
 * typing is never overwritten. `saved(values)` makes what a save sent the form's new base.
 */
export const useDraft = <T extends object>(server: T): [T, (next: T) => void, (sent: T) => void] => {
  const [draft, setDraft] = useState<T>(server)
  // A ref, not state: a save that lands between a render and its effect is the base the effect sees.
  const base = useRef<T>(server)
  useEffect(() => {
    const was = base.current as unknown as Record<string, unknown>
    setDraft((d) => {
      const next: Record<string, unknown> = { ...(server as unknown as Record<string, unknown>) }
      for (const [k, v] of Object.entries(d)) if (JSON.stringify(v) !== JSON.stringify(was[k])) next[k] = v
      return next as unknown as T
    })
    base.current = server
  }, [JSON.stringify(server)])
  const saved = useCallback((sent: T) => {
    base.current = sent
  }, [])
  return [draft, setDraft, saved]
}

/**
 * Runs an async action with a busy flag; failures become an error toast (the API's message),
 * success an optional toast. `const [run, busy] = useAction(); run(() => ok(api.POST(...)), "Saved")`
 */
export const useAction = (): [
  <T>(f: () => Promise<T>, done?: string | ((r: T) => string | undefined)) => Promise<T | undefined>,
  boolean
] => {
  const [busy, setBusy] = useState(false)
  const run = useCallback(async <T,>(f: () => Promise<T>, done?: string | ((r: T) => string | undefined)) => {
    setBusy(true)
    try {
      const r = await f()
      const text = typeof done === "function" ? done(r) : done
      if (text) toast(text)
      return r
    } catch (e) {
      toast(e instanceof Error ? e.message : String(e), "error")
      return undefined
    } finally {
      setBusy(false)
    }
  }, [])
  return [run, busy]
}

// ---------------------------------------------------------------- layout

export const Page = (p: { title: string; description?: ComponentChildren; actions?: ComponentChildren; children: ComponentChildren }) => (
  <section class="page" aria-labelledby="page-title">
    <header class="page-head">
      <div>
        <h1 id="page-title">{p.title}</h1>
        {p.description && <p class="muted">{p.description}</p>}
      </div>
      {p.actions && <div class="actions">{p.actions}</div>}
    </header>
    {p.children}
  </section>
)

export const Section = (p: { title: string; actions?: ComponentChildren; children: ComponentChildren; id?: string }) => {
  const id = useId()
  return (
    <section class="card" aria-labelledby={id} id={p.id}>
      <header class="card-head">
        <h2 id={id}>{p.title}</h2>
        {p.actions && <div class="actions">{p.actions}</div>}
      </header>
      {p.children}
    </section>
  )
}

/** What a page shows when there is nothing yet: what it is and what to do next. */
export const Empty = (p: { title: string; children?: ComponentChildren }) => (
  <div class="empty">
    <p class="empty-title">{p.title}</p>
    {p.children && <div class="muted">{p.children}</div>}
  </div>
)

export const ErrorBox = (p: { error: string | undefined; retry?: () => void }) =>
  p.error ? (
    <div class="error-box" role="alert">
      <span>{p.error}</span>
      {p.retry && (
        <button type="button" class="btn" onClick={p.retry}>
          Retry
        </button>
      )}
    </div>
  ) : null

export const Loading = () => (
  <p class="muted" aria-busy="true">
    Loading…
  </p>
)

/** Loading, error and data in one: `<Loader of={keys}>{(data) => …}</Loader>`. */
export const Loader = <T,>(p: { of: Loaded<T>; children: (data: T) => ComponentChildren }) => (
  <>
    <ErrorBox error={p.of.error} retry={p.of.reload} />
    {p.of.data === undefined ? p.of.loading ? <Loading /> : null : p.children(p.of.data)}
  </>
)

export const Stat = (p: { label: string; value: ComponentChildren; hint?: ComponentChildren }) => (
  <div class="stat">
    <div class="stat-label">{p.label}</div>
    <div class="stat-value">{p.value}</div>
    {p.hint && <div class="stat-hint muted">{p.hint}</div>}
  </div>
)

export const Badge = (p: { kind?: "ok" | "warn" | "bad" | "info" | "muted"; children: ComponentChildren }) => (
  <span class={`badge badge-${p.kind ?? "muted"}`}>{p.children}</span>
)

// ---------------------------------------------------------------- tables

export interface Column<T> {
  readonly label: string
  readonly render: (row: T) => ComponentChildren
  readonly class?: string
}

export const Table = <T,>(p: {
  columns: ReadonlyArray<Column<T>>
  rows: ReadonlyArray<T>
  rowKey: (row: T) => string
  empty?: ComponentChildren
  caption?: string
}) =>
  p.rows.length === 0 && p.empty ? (
    <>{p.empty}</>
  ) : (
    // Focusable, so a table wider than the screen can be scrolled with the keyboard (axe: scrollable-region-focusable).
    <div class="table-wrap" tabIndex={0} role="region" aria-label={p.caption}>
      <table>
        {p.caption && <caption class="sr-only">{p.caption}</caption>}
        <thead>
          <tr>
            {p.columns.map((c) => (
              <th scope="col" class={c.class} key={c.label}>
                {c.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {p.rows.map((r) => (
            <tr key={p.rowKey(r)}>
              {p.columns.map((c) => (
                <td class={c.class} data-label={c.label} key={c.label}>
                  {c.render(r)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )

// ---------------------------------------------------------------- forms

export const Button = (p: { kind?: "primary" | "danger" | "plain"; busy?: boolean } & ButtonHTMLAttributes<HTMLButtonElement>) => {
  const { kind, busy, children, class: cls, type, disabled, ...rest } = p
  return (
    <button
      {...rest}
      type={(type as "button" | "submit" | undefined) ?? "button"}
      class={`btn ${kind ? `btn-${kind}` : ""} ${cls ?? ""}`}
      disabled={Boolean(disabled) || busy}
      aria-busy={busy ? "true" : undefined}
    >
      {children}
    </button>
  )
}

/** A labelled form control; `hint` is announced with it. */
export const Field = (p: {
  label: string
  hint?: ComponentChildren
  children: (id: string, describedBy: string | undefined) => ComponentChildren
  wide?: boolean
}) => {
  const id = useId()
  const hintId = p.hint ? `${id}-hint` : undefined
  return (
    <div class={`field ${p.wide ? "field-wide" : ""}`}>
      <label for={id}>{p.label}</label>
      {p.children(id, hintId)}
      {p.hint && (
        <div class="hint muted" id={hintId}>
          {p.hint}
        </div>
      )}
    </div>
  )
}

export const TextInput = (p: {
  label: string
  value: string
  onInput: (v: string) => void
  hint?: ComponentChildren
  type?: "text" | "password" | "url" | "email" | "search" | "date" | "datetime-local"
  placeholder?: string
  required?: boolean
  autoComplete?: string
  name?: string
  wide?: boolean
}) => (
  <Field label={p.label} hint={p.hint} wide={p.wide}>
    {(id, d) => (
      <input
        {...({
          id,
          name: p.name,
          "aria-describedby": d,
          type: p.type ?? "text",
          value: p.value,
          placeholder: p.placeholder,
          required: p.required,
          autoComplete: p.autoComplete,
          onInput: (e: Event) => p.onInput((e.currentTarget as HTMLInputElement).value)
        } as InputHTMLAttributes<HTMLInputElement>)}
      />
    )}
  </Field>
)

export const NumberInput = (p: {
  label: string
  value: number | undefined
  onInput: (v: number | undefined) => void
  hint?: ComponentChildren
  min?: number
  max?: number
  step?: number | "any"
  name?: string
}) => (
  <Field label={p.label} hint={p.hint}>
    {(id, d) => (
      <input
        id={id}
        name={p.name}
        aria-describedby={d}
        type="number"
        min={p.min}
        max={p.max}
        step={p.step ?? "any"}
        value={p.value ?? ""}
        onInput={(e) => {
          const v = (e.currentTarget as HTMLInputElement).value
          p.onInput(v === "" ? undefined : Number(v))
        }}
      />
    )}
  </Field>
)

export const TextArea = (p: {
  label: string
  value: string
  onInput: (v: string) => void
  hint?: ComponentChildren
  rows?: number
  name?: string
  mono?: boolean
}) => (
  <Field label={p.label} hint={p.hint} wide>
    {(id, d) => (
      <textarea
        id={id}
        name={p.name}
        aria-describedby={d}
        rows={p.rows ?? 4}
        class={p.mono ? "mono" : undefined}
        value={p.value}
        onInput={(e) => p.onInput((e.currentTarget as HTMLTextAreaElement).value)}
      />
    )}
  </Field>
)

export const Select = <V extends string>(p: {
  label: string
  value: V
  options: ReadonlyArray<V | { value: V; label: string }>
  onChange: (v: V) => void
  hint?: ComponentChildren
  name?: string
}) => (
  <Field label={p.label} hint={p.hint}>
    {(id, d) => (
      <select
        id={id}
        name={p.name}
        aria-describedby={d}
        value={p.value}
        onChange={(e) => p.onChange((e.currentTarget as HTMLSelectElement).value as V)}
      >
        {p.options.map((o) => {
          const v = typeof o === "string" ? o : o.value
          return (
            <option key={v} value={v}>
              {typeof o === "string" ? o : o.label}
            </option>
          )
        })}
      </select>
    )}
  </Field>
)

export const Checkbox = (p: {
  label: string
  checked: boolean
  onChange: (v: boolean) => void
  hint?: ComponentChildren
  name?: string
}) => {
  const id = useId()
  return (
    <div class="field field-check">
      <input
        id={id}
        name={p.name}
        type="checkbox"
        checked={p.checked}
        onChange={(e) => p.onChange((e.currentTarget as HTMLInputElement).checked)}
        aria-describedby={p.hint ? `${id}-hint` : undefined}
      />
      <label for={id}>{p.label}</label>
      {p.hint && (
        <div class="hint muted" id={`${id}-hint`}>
          {p.hint}
        </div>
      )}
    </div>
  )
}

/** A form whose submit runs `onSubmit` (Enter works, the browser checks `required`). */
export const Form = (p: { onSubmit: () => void; children: ComponentChildren; label?: string }) => (
  <form
    class="form"
    aria-label={p.label}
    onSubmit={(e) => {
      e.preventDefault()
      p.onSubmit()
    }}
  >
    {p.children}
  </form>
)

// ---------------------------------------------------------------- dialogs

/** A modal dialog (<dialog>: focus is kept inside, Escape closes). */
export const Dialog = (p: { open: boolean; title: string; onClose: () => void; children: ComponentChildren }) => {
  const ref = useRef<HTMLDialogElement>(null)
  const id = useId()
  useEffect(() => {
    const d = ref.current
    if (!d) return
    if (p.open && !d.open) d.showModal()
    if (!p.open && d.open) d.close()
  }, [p.open])
  return (
    <dialog ref={ref} aria-labelledby={id} onClose={p.onClose} class="dialog">
      {p.open && (
        <>
          <header class="dialog-head">
            <h2 id={id}>{p.title}</h2>
            <button type="button" class="btn btn-plain" aria-label="Close" onClick={p.onClose}>
              ✕
            </button>
          </header>
          <div class="dialog-body">{p.children}</div>
        </>
      )}
    </dialog>
  )
}

/**
 * A confirmation before something that cannot be undone: what will happen, the action (a danger
 * button) and Cancel. It runs `remove` itself (busy while it runs); on success it toasts `done`,
 * closes and calls `onRemoved`, on failure it stays open with the API's message.
 */
export const Confirm = <T,>(p: {
  item: T | undefined
  title: string
  action: string
  onClose: () => void
  /** The destructive call (usually `ok(api.DELETE(...))`); a failure keeps the dialog open and toasts the API's message. */
  remove: (item: T) => Promise<unknown>
  /** The toast after it succeeded. */
  done: string
  /** After it succeeded and the dialog closed (a reload). */
  onRemoved: () => void
  children: (item: T) => ComponentChildren
}) => {
  const [run, busy] = useAction()
  const confirm = (item: T) =>
    void run(async () => {
      await p.remove(item)
      return true
    }, p.done).then((removed) => {
      if (!removed) return
      p.onClose()
      p.onRemoved()
    })
  return (
    <Dialog open={p.item !== undefined} title={p.title} onClose={p.onClose}>
      {p.item !== undefined && (
        <>
          {p.children(p.item)}
          <div class="actions">
            <Button kind="danger" busy={busy} onClick={() => confirm(p.item as T)}>
              {p.action}
            </Button>
            <Button onClick={p.onClose}>Cancel</Button>
          </div>
        </>
      )}
    </Dialog>
  )
}

/** A secret shown once (a new key, a webhook secret), with a copy button. */
export const SecretOnce = (p: { label: string; value: string }) => (
  <div class="secret-once" role="note">
    <p>
      <strong>{p.label}</strong> — shown once; copy it now.
    </p>
    <code class="mono" data-secret>
      {p.value}
    </code>
    <Button onClick={() => void navigator.clipboard?.writeText(p.value).then(() => toast("Copied"))}>Copy</Button>
  </div>
)

// ---------------------------------------------------------------- formatting

const nf = new Intl.NumberFormat()
export const fmtNumber = (n: number | null | undefined) => (n === null || n === undefined ? "—" : nf.format(n))
export const fmtMoney = (usd: number | null | undefined) =>
  usd === null || usd === undefined ? "—" : usd !== 0 && Math.abs(usd) < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`
export const fmtDate = (d: string | number | null | undefined) => {
  if (d === null || d === undefined || d === "") return "—"
  const t = typeof d === "number" ? new Date(d) : new Date(d)
  return Number.isNaN(t.getTime()) ? String(d) : t.toLocaleString()
}
export const fmtMs = (ms: number | null | undefined) =>
  ms === null || ms === undefined ? "—" : ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`
export const fmtBytes = (b: number | null | undefined) =>
  b === null || b === undefined
    ? "—"
    : b < 1024
      ? `${b} B`
      : b < 1024 * 1024
        ? `${(b / 1024).toFixed(1)} KiB`
        : `${(b / 1024 / 1024).toFixed(1)} MiB`
