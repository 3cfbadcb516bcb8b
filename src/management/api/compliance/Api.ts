import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"
import { AuditPage, AuditQuery } from "../../../domain/audit.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

const Jsonl = HttpApiSchema.withEncoding(Schema.Uint8ArrayFromSelf, { kind: "Uint8Array", contentType: "application/x-ndjson" })

/** `/api/compliance/audit-log`: the append-only audit log, paginated and filtered; its JSONL export (docs/guardrails.md). */
export class ComplianceGroup extends HttpApiGroup.make("compliance")
  .add(HttpApiEndpoint.get("auditLog", "/api/compliance/audit-log").setUrlParams(AuditQuery).addSuccess(AuditPage))
  .add(HttpApiEndpoint.get("auditExport", "/api/compliance/audit-log/export").setUrlParams(AuditQuery).addSuccess(Jsonl))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
