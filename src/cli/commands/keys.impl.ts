import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { ApiKeys } from "../../services/auth/ApiKeys.js"
import type { Parsed } from "../handler.js"
import { withLocalGateway } from "../local.js"
import { explain, remote, withHttp } from "../remote.js"
import { orDash, printJson, table } from "../output.js"
import { UsageError } from "../schema.js"
import type { addOptions, limitsOptions, listOptions, removeOptions, shadowOptions } from "./keys.js"

export const add = (opts: Parsed<typeof addOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const created = yield* (yield* ApiKeys).create(
        {
          name: Option.getOrUndefined(opts.name),
          scopes: opts.scope.length > 0 ? opts.scope : undefined,
          expiresAt: Option.getOrUndefined(opts.expiresAt),
          rpm: Option.getOrUndefined(opts.rpm),
          tpm: Option.getOrUndefined(opts.tpm),
          userId: Option.getOrUndefined(opts.user),
          teamId: Option.getOrUndefined(opts.team),
          mcp: opts.mcpAllow.length > 0 ? { allow: opts.mcpAllow } : undefined,
          maxQueueWaitSeconds: Option.getOrUndefined(opts.maxQueueWait)
        },
        { actor: "cli" }
      )
      if (opts.json) return yield* printJson(created)
      yield* Console.log(created.secret)
      yield* Console.error(
        `created ${created.id} (${created.name}, scopes ${created.scopes.join(", ")}). The key is shown only now; store it safely.`
      )
    })
  )

export const list = (opts: Parsed<typeof listOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const keys = yield* (yield* ApiKeys).list
      if (opts.json) return yield* printJson({ keys })
      if (keys.length === 0) return yield* Console.log("no API keys yet: create one with `gateway keys add`")
      yield* Console.log(
        table(
          ["ID", "NAME", "KEY", "SCOPES", "OWNER", "RPM", "TPM", "MCP", "CREATED", "EXPIRES", "LAST USED"],
          keys.map((k) => [
            k.id,
            k.name,
            k.key,
            k.scopes.join(","),
            k.teamId ?? k.userId ?? "-",
            orDash(k.rpm),
            orDash(k.tpm),
            k.mcp === null ? "-" : k.mcp.allow.length === 0 ? "(none)" : k.mcp.allow.join(","),
            k.createdAt,
            orDash(k.expiresAt),
            orDash(k.lastUsedAt)
          ])
        )
      )
    })
  )

export const remove = (opts: Parsed<typeof removeOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const removed = yield* (yield* ApiKeys).remove(opts.id, "cli")
      if (opts.json) return yield* printJson({ removed })
      yield* Console.log(`removed ${removed.id} (${removed.name})`)
    })
  )

export const limits = (opts: Parsed<typeof limitsOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const updated = yield* (yield* ApiKeys).update(
        opts.id,
        {
          rpm: Option.getOrUndefined(opts.rpm),
          tpm: Option.getOrUndefined(opts.tpm),
          maxQueueWaitSeconds: Option.getOrUndefined(opts.maxQueueWait)
        },
        "cli"
      )
      if (opts.json) return yield* printJson(updated)
      yield* Console.log(
        `${updated.id} (${updated.name}): rpm ${updated.rpm ?? "none"}, tpm ${updated.tpm ?? "none"}, quota wait ${updated.maxQueueWaitSeconds === null ? "off" : `${updated.maxQueueWaitSeconds} s`}`
      )
    })
  )

export const shadow = (opts: Parsed<typeof shadowOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      if (opts.none && opts.target.length > 0) return yield* new UsageError({ message: "--none and --target together: give one" })
      const updated =
        opts.none || opts.target.length > 0
          ? yield* keys.update(opts.id, { shadow: opts.none ? null : opts.target }, "cli")
          : (yield* keys.list).find((k) => k.id === opts.id || k.name === opts.id)
      if (updated === undefined) return yield* new UsageError({ message: `no API key with id or name '${opts.id}'` })
      if (opts.json) return yield* printJson(updated)
      yield* Console.log(
        `${updated.id} (${updated.name}): ${updated.shadow.length === 0 ? "no shadow targets" : `shadow ${updated.shadow.map((t) => `${t.model} (${t.sampleRate})`).join(", ")}; report: gateway shadow report key:${updated.id}`}`
      )
    })
  )

/** `keys add --url`: the running gateway makes the key, for whoever the CLI is signed in as (an admin key, or `gateway login`'s session). */
export const addRemote = (opts: Parsed<typeof addOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const created = yield* client.keys
      .create({
        payload: {
          name: Option.getOrUndefined(opts.name),
          scopes: opts.scope.length > 0 ? opts.scope : undefined,
          expiresAt: Option.getOrUndefined(opts.expiresAt),
          rpm: Option.getOrUndefined(opts.rpm),
          tpm: Option.getOrUndefined(opts.tpm),
          userId: Option.getOrUndefined(opts.user),
          teamId: Option.getOrUndefined(opts.team),
          mcp: opts.mcpAllow.length > 0 ? { allow: opts.mcpAllow } : undefined,
          maxQueueWaitSeconds: Option.getOrUndefined(opts.maxQueueWait)
        }
      })
      .pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(created)
    yield* Console.log(created.secret)
    yield* Console.error(
      `created ${created.id} (${created.name}, scopes ${created.scopes.join(", ")}) at ${url}. The key is shown only now; store it safely.`
    )
  }).pipe(withHttp)
