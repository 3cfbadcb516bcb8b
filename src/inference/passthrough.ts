/**
 * A body that passes through to an upstream of the client's own format: the format's fixes
 * (src/upstream/formats/<format>.ts, `passthroughBody`, `withoutThinking`), given the quirks the
 * connection's provider declares in the catalog. No format knowledge here.
 */
import type { FormatId } from "../domain/canonical.js"
import { NO_QUIRKS } from "../upstream/formats/format.js"
import { FORMATS } from "../upstream/formats/registry.js"
import type { Connection } from "../upstream/providers/Connections.js"
import { bindBody } from "../upstream/formats/signatures.js"

/**
 * Same-format bodies still need a few fixes before they go upstream: reasoning state sealed by
 * another connection is dropped first (docs/reasoning-state.md), then the format's own fixes.
 */
export const normalizePassthrough = (format: FormatId, body: Record<string, unknown>, connection: Connection): Record<string, unknown> =>
  FORMATS[format].passthroughBody(bindBody(format, body, connection.id), connection.provider.quirks ?? NO_QUIRKS)

/** The no-thinking alias, applied to a body that passes through. */
export const noThinkingBody = (format: FormatId, body: Record<string, unknown>): Record<string, unknown> =>
  FORMATS[format].withoutThinking(body)
