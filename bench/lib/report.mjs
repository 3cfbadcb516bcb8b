// The markdown table printed at the end of a run, built from the results object.
import { ratio } from "./stats.mjs"

const TARGETS = ["direct", "floor", "gateway", "peer"]

const num = (v, digits) => {
  if (v == null || !Number.isFinite(v)) return "–"
  const a = Math.abs(v)
  const d = digits ?? (a >= 1000 ? 0 : a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3)
  return v.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d })
}

const cell = (agg, digits) => {
  if (!agg || agg.median == null) return "–"
  const rounds = agg.rounds?.filter((x) => x != null).length ?? 1
  if (rounds <= 1 || agg.min == null) return num(agg.median, digits)
  return `${num(agg.median, digits)} (${num(agg.min, digits)}–${num(agg.max, digits)})`
}

const x = (r) => (r == null || !Number.isFinite(r) ? "–" : `${num(r, r >= 100 ? 0 : r >= 10 ? 1 : 2)}×`)

const passCell = (p) => (p === true ? "**pass**" : p === false ? "**FAIL**" : p === "n/a" ? "not run" : "")

/**
 * Rows: { label, values: {target: agg}, digits, ratios: {vsDirect, vsFloor, vsPeer}, target, pass }.
 * `ratios` are for the gateway. Missing values print as –.
 */
export const markdownTable = (rows) => {
  const head = ["Metric", ...TARGETS, "gw ÷ direct", "gw ÷ floor", "gw ÷ peer", "Target (gateway)", "Result"]
  const lines = [`| ${head.join(" | ")} |`, `|${head.map((_, i) => (i === 0 ? "---" : i <= 7 ? "---:" : "---")).join("|")}|`]
  for (const r of rows) {
    if (r.section) {
      lines.push(`| **${r.section}** |${" |".repeat(head.length - 1)}`)
      continue
    }
    const vals = TARGETS.map((t) => (r.text ? (r.text[t] ?? "–") : cell(r.values?.[t], r.digits)))
    const rt = r.ratios ?? {}
    lines.push(
      `| ${r.label} | ${vals.join(" | ")} | ${x(rt.vsDirect)} | ${x(rt.vsFloor)} | ${x(rt.vsPeer)} | ${r.target ?? ""} | ${passCell(r.pass)} |`
    )
  }
  return lines.join("\n")
}

/**
 * Gateway ratios of one metric against the other targets' medians (or given baselines).
 * `added`: for "added" metrics (target − direct) the ratio to direct does not exist, and a
 * ratio is only shown when both values are positive (a difference below the noise can be
 * negative, and dividing by it means nothing).
 */
export const gatewayRatios = (values, base = values, { added = false } = {}) => {
  const gw = values?.gateway?.median
  const r = (b) => (added && !(gw > 0 && b > 0) ? null : ratio(gw, b))
  return {
    vsDirect: added ? null : r(base?.direct?.median),
    vsFloor: r(base?.floor?.median),
    vsPeer: r(base?.peer?.median)
  }
}

/** Ratios of every target against direct, floor and peer (for the JSON file). */
export const allRatios = (values, { added = false } = {}) => {
  const out = {}
  for (const t of TARGETS) {
    const v = values?.[t]?.median
    if (v == null) continue
    const r = (b) => (added && !(v > 0 && b > 0) ? null : ratio(v, b))
    out[t] = {
      vsDirect: added ? null : r(values?.direct?.median),
      vsFloor: r(values?.floor?.median),
      vsPeer: r(values?.peer?.median)
    }
  }
  return out
}

export const mb = (bytes) => (bytes == null ? null : bytes / (1024 * 1024))
