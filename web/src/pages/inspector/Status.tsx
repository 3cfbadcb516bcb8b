import { Badge } from "../../ui"
import type { Summary } from "./api"

const statusKind = (s: Summary["status"]): "ok" | "warn" | "bad" | "info" =>
  s === "in-flight" ? "info" : s === "error" ? "bad" : s >= 500 ? "bad" : s >= 400 ? "warn" : "ok"

export const Status = (p: { status: Summary["status"] }) =>
  p.status === "in-flight" ? (
    <span class="insp-inflight">
      <span class="insp-spinner" aria-hidden="true" />
      in flight
    </span>
  ) : (
    <Badge kind={statusKind(p.status)}>{p.status}</Badge>
  )
