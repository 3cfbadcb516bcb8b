/** Why a call cannot go through its proxy, and how a failure to reach or build one becomes that answer. */
import * as Data from "effect/Data"
import { ProxyFamilyUnavailable } from "./family.js"

/** Why a call cannot go through its proxy: answered as 503 with `code` (403 for a blocked proxy address). */
export class EgressRefused extends Data.TaggedError("EgressRefused")<{
  readonly code: "PROXY_FAMILY_UNAVAILABLE" | "PROXY_UNAVAILABLE" | "PROXY_DISABLED" | "PROXY_BLOCKED"
  readonly message: string
}> {
  get status(): number {
    return this.code === "PROXY_BLOCKED" ? 403 : 503
  }
}

/** A failed pre-check, build or connection as the refusal it answers (the family's own code, else PROXY_UNAVAILABLE). */
export const refuse = (e: unknown): EgressRefused =>
  e instanceof EgressRefused
    ? e
    : e instanceof ProxyFamilyUnavailable
      ? new EgressRefused({ code: "PROXY_FAMILY_UNAVAILABLE", message: e.message })
      : new EgressRefused({ code: "PROXY_UNAVAILABLE", message: e instanceof Error ? e.message : String(e) })
