/**
 * Polls `check` until it answers something other than undefined/false, or fails after `ms` with
 * `what`: tests wait on an observable condition, never a fixed sleep.
 */
export const until = async <A>(
  what: string,
  check: () => Promise<A | undefined | false> | A | undefined | false,
  ms = 15_000
): Promise<A> => {
  const end = Date.now() + ms
  for (;;) {
    const v = await check()
    if (v !== undefined && v !== false) return v
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}
