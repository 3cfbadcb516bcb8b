import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { BadRequest } from "../../domain/errors.js"
import type { PluginView } from "../../domain/plugins.js"
import type { Parsed } from "../handler.js"
import { orDash, printJson, table } from "../output.js"
import { adminKeyOf, explain, remote, withHttp } from "../remote.js"
import type { configOptions, installOptions, listOptions, nameOptions } from "./plugins.js"

const calls = (p: PluginView) => p.hooks.reduce((n, h) => n + h.calls, 0)
const failures = (p: PluginView) => p.hooks.reduce((n, h) => n + h.failures, 0)

const summary = (p: PluginView) =>
  `${p.name} ${p.version}: ${p.enabled ? "enabled" : "disabled"}, ${p.state}${p.pid !== null ? ` (pid ${p.pid})` : ""}${p.reason ? `: ${p.reason}` : ""}`

export const list = (opts: Parsed<typeof listOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const { plugins } = yield* client.plugins.list().pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson({ plugins })
    if (plugins.length === 0) return yield* Console.log("no plugins are installed (gateway plugins install <dir|tgz>)")
    yield* Console.log(
      table(
        ["NAME", "VERSION", "ENABLED", "STATE", "PERMISSIONS", "RESTARTS", "CALLS", "FAILURES", "REASON"],
        plugins.map((p) => [
          p.name,
          p.version,
          p.enabled ? "yes" : "no",
          p.state,
          orDash(p.permissions.join(",")),
          String(p.restarts),
          String(calls(p)),
          String(failures(p)),
          orDash(p.reason)
        ])
      )
    )
  }).pipe(withHttp)

const isLoopback = (url: string) => {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "")
  return host === "localhost" || host === "::1" || /^127\./.test(host)
}

export const install = (opts: Parsed<typeof installOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const source = path.resolve(opts.source)
    const st = yield* Effect.try({
      try: () => fs.statSync(source),
      catch: () => new BadRequest({ message: `${opts.source} does not exist` })
    })
    const enable = opts.enable ? true : undefined
    let view: PluginView
    if (isLoopback(url))
      view = yield* client.plugins.install({ payload: { path: source, ...(enable ? { enable } : {}) } }).pipe(Effect.mapError(explain(url)))
    else if (st.isDirectory())
      return yield* new BadRequest({
        message: `the gateway at ${url} is not on this machine: pack the folder (npm pack) and install the .tgz, which is uploaded`
      })
    else {
      // Uploaded as the raw body: the endpoint reads it as a stream, not as a declared payload.
      const res = yield* Effect.tryPromise({
        try: () =>
          fetch(`${url}/api/plugins/upload${enable ? "?enable=true" : ""}`, {
            method: "POST",
            headers: { "content-type": "application/gzip", authorization: `Bearer ${adminKeyOf(opts.apiKey)}` },
            body: fs.readFileSync(source)
          }),
        catch: () => new BadRequest({ message: `no gateway answers at ${url} (is it running?)` })
      })
      const body = (yield* Effect.promise(() => res.json().catch(() => ({})))) as PluginView & { message?: string }
      if (res.status >= 400) return yield* new BadRequest({ message: body.message ?? `HTTP ${res.status}` })
      view = body
    }
    if (opts.json) return yield* printJson(view)
    yield* Console.log(`installed ${summary(view)}`)
  }).pipe(withHttp)

export const enable = (opts: Parsed<typeof nameOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const view = yield* client.plugins.enable({ path: { name: opts.name } }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(view)
    yield* Console.log(summary(view))
  }).pipe(withHttp)

export const disable = (opts: Parsed<typeof nameOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const view = yield* client.plugins.disable({ path: { name: opts.name } }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(view)
    yield* Console.log(summary(view))
  }).pipe(withHttp)

/** `key=value` read by the field's type in the plugin's configSchema; `key=` is null (the default). */
const parseSetting = (
  schema: PluginView["configSchema"],
  pair: string
): Effect.Effect<readonly [string, string | number | boolean | null], BadRequest> => {
  const eq = pair.indexOf("=")
  if (eq <= 0) return Effect.fail(new BadRequest({ message: `${JSON.stringify(pair)}: settings are key=value` }))
  const key = pair.slice(0, eq)
  const raw = pair.slice(eq + 1)
  if (raw === "") return Effect.succeed([key, null] as const)
  const field = schema[key] as { type?: string; enum?: ReadonlyArray<unknown> } | undefined
  if (field?.type === "number" || (field?.type === "select" && typeof field.enum?.[0] === "number")) {
    const n = Number(raw)
    return Number.isFinite(n)
      ? Effect.succeed([key, n] as const)
      : Effect.fail(new BadRequest({ message: `${key}: must be a number, got ${JSON.stringify(raw)}` }))
  }
  if (field?.type === "boolean") {
    if (raw === "true" || raw === "false") return Effect.succeed([key, raw === "true"] as const)
    return Effect.fail(new BadRequest({ message: `${key}: must be true or false, got ${JSON.stringify(raw)}` }))
  }
  return Effect.succeed([key, raw] as const)
}

export const config = (opts: Parsed<typeof configOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    let view = yield* client.plugins.get({ path: { name: opts.name } }).pipe(Effect.mapError(explain(url)))
    if (opts.settings.length > 0) {
      const values = Object.fromEntries(yield* Effect.forEach(opts.settings, (s) => parseSetting(view.configSchema, s)))
      view = yield* client.plugins.configure({ path: { name: opts.name }, payload: { values } }).pipe(Effect.mapError(explain(url)))
    }
    if (opts.json) return yield* printJson({ name: view.name, config: view.config, configSchema: view.configSchema })
    const keys = [...new Set([...Object.keys(view.configSchema), ...Object.keys(view.config)])]
    if (keys.length === 0) return yield* Console.log(`${view.name} has no settings`)
    yield* Console.log(
      table(
        ["KEY", "VALUE", "TYPE", "DESCRIPTION"],
        keys.map((k) => {
          const field = view.configSchema[k] as { type?: string; description?: string } | undefined
          return [k, orDash(view.config[k] === undefined ? null : String(view.config[k])), orDash(field?.type), orDash(field?.description)]
        })
      )
    )
  }).pipe(withHttp)

export const remove = (opts: Parsed<typeof nameOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const removed = yield* client.plugins.remove({ path: { name: opts.name } }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(removed)
    yield* Console.log(`removed ${removed.removed}`)
  }).pipe(withHttp)
