/**
 * Polls `check` until it answers something other than undefined/false, or fails after `ms` with
 * `what`: tests wait on an observable condition, never a fixed sleep. `last`, when given, is read
 * once at the timeout and quoted in the error: what the condition saw instead (a server's health,
 * a row), so that a failure on another machine says why.
 */
export const until = async <A>(
  what: string,
  check: () => Promise<A | undefined | false> | A | undefined | false,
  ms = 15_000,
  last?: () => unknown
): Promise<A> => {
  const end = Date.now() + ms
  for (;;) {
    const v = await check()
    if (v !== undefined && v !== false) return v
    if (Date.now() > end) {
      let seen = ""
      if (last !== undefined) {
        try {
          seen = `; last seen: ${JSON.stringify(await last())}`
        } catch (e) {
          seen = `; last seen: (could not be read: ${e instanceof Error ? e.message : String(e)})`
        }
      }
      throw new Error(`timed out waiting for: ${what}${seen}`)
    }
    await new Promise((r) => setTimeout(r, 25))
  }
}
