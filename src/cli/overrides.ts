import * as Option from "effect/Option"
import type { AppConfigShape } from "../platform/config/AppConfig.js"

/**
 * Overrides of AppConfig from the root options (`--port`, `--host`, `--data-dir`, `--tls-cert`,
 * `--tls-key`). Apart from root.ts, so that the server's start (src/cli/main.ts: `gateway` with
 * no argument) does not load @effect/cli.
 */
export const overridesFrom = (root: {
  readonly port: Option.Option<number>
  readonly host: Option.Option<string>
  readonly dataDir: Option.Option<string>
  readonly tlsCert?: Option.Option<string>
  readonly tlsKey?: Option.Option<string>
}): Partial<AppConfigShape> => {
  const overrides: Partial<AppConfigShape> = {}
  if (Option.isSome(root.port)) Object.assign(overrides, { port: root.port.value })
  if (Option.isSome(root.host)) Object.assign(overrides, { host: root.host.value })
  if (Option.isSome(root.dataDir)) Object.assign(overrides, { dataDir: root.dataDir.value })
  if (root.tlsCert && Option.isSome(root.tlsCert)) Object.assign(overrides, { tlsCert: root.tlsCert.value })
  if (root.tlsKey && Option.isSome(root.tlsKey)) Object.assign(overrides, { tlsKey: root.tlsKey.value })
  return overrides
}
