import type * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import { gateway } from "./root.js"

/** Lazy commands: the tree is light, each command's implementation is imported when it runs (docs/cli.md, "Start-up: lazy commands"). */

/** The parsed value of an options record (what a handler receives). */
export type Parsed<C extends Command.Command.Config> = Command.Command.ParseConfig<C>

/** True while a command's own handler runs: its output is its own, not the parser's. */
export const inHandler = FiberRef.unsafeMake(false)

/**
 * A handler that loads its implementation when it runs. A command with a `--json` option also
 * takes the root one: `gateway --json status` is `gateway status --json`.
 */
export const lazy =
  <M, A, E, R>(load: () => Promise<M>, pick: (m: M) => (opts: A) => Effect.Effect<void, E, R>) =>
  (opts: A): Effect.Effect<void, E, R> =>
    Effect.gen(function* () {
      const root = yield* Effect.serviceOption(gateway.tag)
      const rootJson = Option.isSome(root) && root.value.json
      const merged = rootJson && typeof (opts as { json?: unknown }).json === "boolean" ? { ...opts, json: true } : opts
      const m = yield* Effect.promise(load)
      return yield* pick(m)(merged)
    }).pipe(Effect.locally(inHandler, true))

/** A handler defined in place (nothing to load): its output is its own, and the root `--json` applies. */
export const own =
  <A, E, R>(handler: (opts: A) => Effect.Effect<void, E, R>) =>
  (opts: A): Effect.Effect<void, E, R> =>
    lazy(
      () => Promise.resolve(handler),
      (h) => h
    )(opts)
