// Command-line pieces the bench scripts share.

/** `NAME=value` as [NAME, value]; throws on anything else. */
export const envPair = (text) => {
  const eq = text.indexOf("=")
  if (eq <= 0) throw new Error(`--gateway-env takes NAME=value, not ${JSON.stringify(text)}`)
  return [text.slice(0, eq), text.slice(eq + 1)]
}

/**
 * Every `--gateway-env NAME=value` in argv, as an object: set in the gateway's environment (one arm
 * of a setting's A/B: run once per value). Prints the problem and exits 2 on a malformed one.
 */
export const gatewayEnv = (argv) => {
  try {
    return Object.fromEntries(argv.flatMap((a, i) => (argv[i - 1] === "--gateway-env" ? [envPair(a)] : [])))
  } catch (e) {
    console.error(e.message)
    process.exit(2)
  }
}

/** The value after `name` on the command line (`--rounds 6` → "6"), or `dflt` when the flag is absent. */
export const arg = (name, dflt) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : dflt)
