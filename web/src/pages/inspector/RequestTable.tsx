import type { ComponentChildren } from "preact"
import { useLayoutEffect, useRef, useState } from "preact/hooks"
import { Badge, fmtMoney, fmtMs, fmtNumber } from "../../ui"
import type { Summary } from "./api"
import { Status } from "./Status"

const fmtTime = (ms: number) => new Date(ms).toLocaleTimeString()

/** Fixed heights (px) of a row and of the header row: they must match Inspector.css. */
const ROW = 34
const HEAD = 32
const OVERSCAN = 6

const COLUMNS: ReadonlyArray<{ label: string; class?: string; render: (e: Summary) => ComponentChildren; title?: (e: Summary) => string }> =
  [
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
export const RequestTable = (p: {
  rows: ReadonlyArray<Summary>
  selected: string | undefined
  onSelect: (id: string) => void
  label: string
}) => {
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
                <div
                  role="cell"
                  class={`insp-cell ${c.class ?? ""}`}
                  key={c.label}
                  title={c.title?.(e) ?? (typeof content === "string" ? content : undefined)}
                >
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
