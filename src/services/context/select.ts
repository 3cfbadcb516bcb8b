/**
 * Which compression a request gets (spec document 1, `x-gateway-compression`; docs/compression.md,
 * "Selection"), as a pure function: the request header, then the routing combo's or model's
 * assignment, the active profile, the auto-trigger, the panel default. The answer names the mode
 * and its source for the `X-Gateway-Compression` response header.
 */
import type { CompressionSettings } from "../../domain/settings.js"
import type { EngineStep } from "../../domain/context.js"
import type { CompressionCombo, ContextSnapshot } from "./ContextStore.js"
import { ENGINE_IDS, type EngineId } from "./types.js"

export type CompressionSource = "request-header" | "routing-override" | "active-profile" | "auto-trigger" | "default" | "off"

/** What compresses: the steps, and the names analytics and the header use. */
export interface Profile {
  /** As the response header shows it: `default`, `engine:<id>`, or the combo's name. */
  readonly mode: string
  /** The combo analytics count it under: its name, `engine:<id>`, or `default`. */
  readonly combo: string
  readonly steps: ReadonlyArray<EngineStep>
}

export interface Selection {
  readonly source: CompressionSource
  /** Undefined: no compression. */
  readonly profile: Profile | undefined
}

/**
 * The built-in default combo (settings `defaultCombo` null): the engines that keep meaning. json
 * first: a long pretty JSON output is minified whole before rtk would cut it head-and-tail.
 */
export const BUILTIN_DEFAULT: ReadonlyArray<EngineStep> = [{ engine: "json" }, { engine: "rtk" }, { engine: "whitespace" }]

export interface SelectInput {
  readonly settings: CompressionSettings
  readonly snapshot: ContextSnapshot
  /** `x-gateway-compression` as sent. */
  readonly header: string | undefined
  /** The model id as the client asked (a routing combo's name, `provider/model`, an alias). */
  readonly requested: string
  /** Where the request goes first (`provider/model` and `connection/model`), when known. */
  readonly targets: ReadonlyArray<string>
  /** Engines that can run now (summarize needs its model configured). */
  readonly available: (engine: EngineId) => boolean
  /** The prompt's estimated tokens and the first target's context window; asked only when the auto-trigger is on. */
  readonly size: () => { readonly tokens: number; readonly window: number | undefined }
}

const OFF_GLOBAL: Selection = { source: "off", profile: undefined }

const comboProfile = (c: CompressionCombo): Profile => ({ mode: c.name, combo: c.name, steps: c.steps })

/** `engine:<id>`, a combo by id or name (case-insensitive); undefined when it names nothing. */
export const resolveRef = (ref: string, snapshot: ContextSnapshot, available: SelectInput["available"]): Profile | undefined => {
  const trimmed = ref.trim()
  const lower = trimmed.toLowerCase()
  if (lower.startsWith("engine:")) {
    const id = lower.slice("engine:".length).trim() as EngineId
    return (ENGINE_IDS as ReadonlyArray<string>).includes(id) && available(id)
      ? { mode: `engine:${id}`, combo: `engine:${id}`, steps: [{ engine: id }] }
      : undefined
  }
  const c = snapshot.byId.get(trimmed) ?? snapshot.byName.get(lower)
  return c ? comboProfile(c) : undefined
}

/** What `default` means: the settings' default combo, else the built-in one. */
export const defaultProfile = (settings: CompressionSettings, snapshot: ContextSnapshot, available: SelectInput["available"]): Profile => {
  const named = settings.defaultCombo ? resolveRef(settings.defaultCombo, snapshot, available) : undefined
  return { mode: "default", combo: named ? named.combo : "default", steps: named ? named.steps : BUILTIN_DEFAULT }
}

/** The header's value as a selection, or undefined when it is absent or names nothing (ignored, never an error). */
const fromHeader = (input: SelectInput): Selection | undefined => {
  const raw = input.header?.trim()
  if (!raw) return undefined
  const lower = raw.toLowerCase()
  if (lower === "off") return { source: "request-header", profile: undefined }
  if (lower === "default") return { source: "request-header", profile: defaultProfile(input.settings, input.snapshot, input.available) }
  if (lower.startsWith("engine:")) {
    const p = resolveRef(raw, input.snapshot, input.available)
    return p ? { source: "request-header", profile: p } : undefined
  }
  // A combo by name first (case-insensitive), then by id; `off` and `default` were taken above,
  // so a combo named so is reachable by its id only.
  const c = input.snapshot.byName.get(lower) ?? input.snapshot.byId.get(raw)
  return c ? { source: "request-header", profile: comboProfile(c) } : undefined
}

export const select = (input: SelectInput): Selection => {
  const s = input.settings
  if (!s.enabled) return OFF_GLOBAL
  const header = fromHeader(input)
  if (header) return header
  const snap = input.snapshot
  const assigned =
    snap.routingCombos.get(input.requested) ??
    snap.models.get(input.requested) ??
    input.targets.map((t) => snap.models.get(t)).find((id) => id !== undefined)
  const combo = assigned === undefined ? undefined : snap.byId.get(assigned)
  if (combo) return { source: "routing-override", profile: comboProfile(combo) }
  if (s.activeProfile) {
    const p =
      s.activeProfile.trim().toLowerCase() === "default"
        ? defaultProfile(s, snap, input.available)
        : resolveRef(s.activeProfile, snap, input.available)
    if (p) return { source: "active-profile", profile: p }
  }
  const t = s.autoTrigger
  if (t.enabled && (t.thresholdTokens !== null || t.windowShare !== null)) {
    const size = input.size()
    const over =
      (t.thresholdTokens !== null && size.tokens >= t.thresholdTokens) ||
      (t.windowShare !== null && size.window !== undefined && size.window > 0 && size.tokens >= t.windowShare * size.window)
    if (over) return { source: "auto-trigger", profile: defaultProfile(s, snap, input.available) }
  }
  if (s.compressByDefault) return { source: "default", profile: defaultProfile(s, snap, input.available) }
  return { source: "default", profile: undefined }
}

/** The `X-Gateway-Compression` value. */
export const headerValue = (sel: Selection): string => `${sel.profile ? sel.profile.mode : "off"}; source=${sel.source}`
