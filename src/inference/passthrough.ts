/**
 * A body that passes through to an upstream of the client's own format: the format's fixes
 * (src/formats/<format>.ts, `passthroughBody`, `withoutThinking`), given the quirks the
 * connection's provider declares in the catalog. No format knowledge here.
 */
import type { FormatId } from "../formats/canonical.js"
import { NO_QUIRKS } from "../formats/format.js"
import { FORMATS } from "../formats/registry.js"
import type { Connection } from "../providers/Connections.js"

/** Same-format bodies still need a few fixes before they go upstream. */
export const normalizePassthrough = (format: FormatId, body: Record<string, unknown>, connection: Connection): Record<string, unknown> =>
  FORMATS[format].passthroughBody(body, connection.provider.quirks ?? NO_QUIRKS)

/** The no-thinking alias, applied to a body that passes through. */
export const noThinkingBody = (format: FormatId, body: Record<string, unknown>): Record<string, unknown> => FORMATS[format].withoutThinking(body)
