/**
 * The patterns of a level's allowed models and MCP access (docs/accounting.md, "Limits at every
 * level"): globs (`*` any run of characters), whole-name, case-insensitive for models as the
 * policies' are; MCP patterns as a key's `mcp.allow` (docs/mcp.md). Plain functions.
 */

export type ModelPattern = RegExp

const globRe = (pattern: string, flags: string) =>
  new RegExp(
    `^${pattern
      .split("*")
      .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`,
    flags
  )

export const compileModels = (patterns: ReadonlyArray<string>): ReadonlyArray<ModelPattern> => patterns.map((p) => globRe(p, "i"))

/**
 * Whether a request may use its model: the id it asked for (a model, `<provider>/<model>`, an alias,
 * a combo's name) matches a pattern, or every candidate it would be sent to does (by its model id,
 * `<provider>/<model>` or `<connection>/<model>`).
 */
export const modelAllowed = (
  patterns: ReadonlyArray<ModelPattern>,
  requested: string,
  candidatesOf: () => ReadonlyArray<{ readonly model: string; readonly key: string; readonly provider: string }>
): boolean => {
  const matches = (s: string) => patterns.some((p) => p.test(s))
  if (matches(requested)) return true
  const candidates = candidatesOf()
  return candidates.length > 0 && candidates.every((c) => matches(c.model) || matches(c.key) || matches(`${c.provider}/${c.model}`))
}

/** Whether a parent's model pattern covers a child's (the child's text, `*` included, matches the parent's glob). */
export const coversModel = (parent: string, child: string): boolean => globRe(parent, "i").test(child)

/** Whether a parent's MCP pattern covers a child's: `*`, the same pattern, a server covering its tools, a glob covering the text. */
export const coversMcp = (parent: string, child: string): boolean =>
  parent === "*" || parent === child || child.startsWith(`${parent}__`) || (parent.includes("*") && globRe(parent, "").test(child))
