/**
 * Text that comes from outside (paths, bodies, upstream answers) on its way into places that
 * throw on bad input: decodeURIComponent, JSON walks, response headers. Each helper answers
 * instead of throwing; all are cheap when the input is ordinary.
 */

/** A percent-encoded path segment decoded, or undefined when its escapes are malformed (`%ZZ`, a cut UTF-8 sequence). */
export const decodePathSegment = (raw: string): string | undefined => {
  if (raw.indexOf("%") === -1) return raw
  try {
    return decodeURIComponent(raw)
  } catch {
    return undefined
  }
}

/** A path as it may appear in an error message: at most 100 characters. */
export const quotedPath = (raw: string): string => `'${raw.length > 100 ? `${raw.slice(0, 100)}…` : raw}'`
