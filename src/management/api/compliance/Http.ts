import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { AuditLog } from "../../../services/governance/AuditLog.js"
import { ManagementApi } from "../Api.js"

/** The audit log: a page (newest first, `nextCursor` for the next), or every match as JSON lines (oldest first). */
export const layer = HttpApiBuilder.group(ManagementApi, "compliance", (handlers) =>
  Effect.gen(function* () {
    const audit = yield* AuditLog
    return handlers
      .handle("auditLog", ({ urlParams }) =>
        Effect.zipRight(
          audit.flush,
          Effect.map(audit.query(urlParams), (page) => ({ ...page, retentionDays: audit.retentionDays }))
        )
      )
      .handle("auditExport", ({ urlParams }) =>
        Effect.zipRight(
          audit.flush,
          Effect.map(audit.exportJsonl(urlParams), (text) => new TextEncoder().encode(text))
        )
      )
  })
)
