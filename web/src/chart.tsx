import { useEffect, useRef } from "preact/hooks"
import uPlot from "uplot"
import "uplot/dist/uPlot.min.css"

const PALETTE = ["#2563eb", "#16a34a", "#dc2626", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d", "#4b5563", "#ea580c"]

export interface Series {
  readonly label: string
  readonly values: ReadonlyArray<number | null>
}

/**
 * A time chart (uPlot): `x` in seconds since the epoch, one line or bar set per series.
 * The data are also given as a table for screen readers and when the canvas cannot help.
 */
export const TimeChart = (p: {
  title: string
  x: ReadonlyArray<number>
  series: ReadonlyArray<Series>
  kind?: "line" | "bars"
  height?: number
  format?: (v: number) => string
}) => {
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const el = box.current
    if (!el || p.x.length === 0) return
    const bars = p.kind === "bars" ? uPlot.paths.bars?.({ size: [0.6, 64] }) : undefined
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height: p.height ?? 220,
      legend: { show: true },
      scales: { x: { time: true } },
      axes: [
        { stroke: "currentColor", grid: { stroke: "rgba(128,128,128,0.15)" } },
        {
          stroke: "currentColor",
          grid: { stroke: "rgba(128,128,128,0.15)" },
          size: 60,
          ...(p.format ? { values: (_u: uPlot, ticks: number[]) => ticks.map((t) => p.format!(t)) } : {})
        }
      ],
      series: [
        {},
        ...p.series.map((s, i) => ({
          label: s.label,
          stroke: PALETTE[i % PALETTE.length],
          fill: p.kind === "bars" ? `${PALETTE[i % PALETTE.length]}99` : undefined,
          width: 2,
          ...(bars ? { paths: bars } : {}),
          ...(p.format ? { value: (_u: uPlot, v: number | null) => (v === null ? "—" : p.format!(v)) } : {})
        }))
      ]
    }
    const chart = new uPlot(opts, [p.x as number[], ...p.series.map((s) => s.values as (number | null)[])], el)
    const resize = new ResizeObserver(() => chart.setSize({ width: Math.max(200, el.clientWidth), height: p.height ?? 220 }))
    resize.observe(el)
    return () => {
      resize.disconnect()
      chart.destroy()
    }
  }, [p.x, p.series, p.kind, p.height])
  return (
    <figure class="chart">
      <figcaption>{p.title}</figcaption>
      {p.x.length === 0 ? (
        <p class="muted">No data in this range yet.</p>
      ) : (
        <div ref={box} class="chart-canvas" role="img" aria-label={`${p.title}: chart`} />
      )}
    </figure>
  )
}

/** Horizontal bars for a ranking (cost by model, requests by key...). Plain HTML: no canvas needed. */
export const Bars = (p: { title: string; rows: ReadonlyArray<{ label: string; value: number }>; format?: (v: number) => string }) => {
  const max = Math.max(0, ...p.rows.map((r) => r.value))
  return (
    <figure class="bars">
      <figcaption>{p.title}</figcaption>
      {p.rows.length === 0 ? (
        <p class="muted">Nothing yet.</p>
      ) : (
        <ul>
          {p.rows.map((r) => (
            <li key={r.label}>
              <span class="bar-label" title={r.label}>
                {r.label}
              </span>
              <meter min={0} max={max || 1} value={r.value} aria-label={r.label} />
              <span class="bar-value">{p.format ? p.format(r.value) : r.value}</span>
            </li>
          ))}
        </ul>
      )}
    </figure>
  )
}
