/**
 * The quick tunnel's life (docs/tunnels.md, "Quick tunnel"): the vendor's helper (cloudflared),
 * downloaded and checked by quickHelper.ts, run as `tunnel --url <gateway>`; its address is read
 * from its output and shown once it says a connection to the edge is registered.
 */
import * as Effect from "effect/Effect"
import { quickHelper, type HelperSettings } from "./quickHelper.js"
import { killGroup, lastLines, spawnHelper } from "./process.js"
import { HelperError, type RunLife } from "./supervisor.js"

/** The public address in the helper's output (`https://<words>.trycloudflare.com`). */
export const QUICK_URL = /https:\/\/[a-z0-9-]+\.trycloudflare\.com/i
/** The helper's line once a connection to the edge is registered: requests through the address then reach the gateway. */
export const REGISTERED = /Registered tunnel connection/i

export const quickLife =
  (settings: HelperSettings, protocol: string): RunLife =>
  (life, target) =>
    // The download (first use) is interruptible: a disable or a shutdown does not wait for it.
    Effect.tryPromise({
      try: (signal) => quickHelper(settings, signal),
      catch: (e) =>
        e instanceof HelperError ? e : new HelperError(`the quick-tunnel helper could not be fetched: ${(e as Error).message}`, false)
    })
      .pipe(
        Effect.flatMap((bin) =>
          Effect.acquireRelease(
            Effect.try({
              try: () => spawnHelper(bin, ["tunnel", "--no-autoupdate", "--protocol", protocol, "--url", target]),
              catch: (e) => new HelperError(`the quick-tunnel helper could not start: ${(e as Error).message}`, false)
            }),
            (spawned) => Effect.promise(() => killGroup(spawned.proc))
          )
        ),
        Effect.tap((spawned) => Effect.sync(() => life.spawned({ pid: spawned.proc.pid, command: spawned.command })))
      )
      .pipe(
        Effect.flatMap((spawned) =>
          Effect.async<never, HelperError>((resume) => {
            let tail = ""
            let address: string | undefined
            spawned.lines((line) => {
              tail = `${tail}${line}\n`.slice(-2000)
              const found = QUICK_URL.exec(line)
              if (found && address === undefined) {
                address = found[0]
                life.address(address)
              }
              if (REGISTERED.test(line) && address !== undefined) life.registered()
            })
            void spawned.ended.then(({ code, signal, error }) => {
              if (error) return resume(Effect.fail(new HelperError(`the quick-tunnel helper could not run: ${error.message}`, true)))
              const last = lastLines(tail)
              resume(Effect.fail(new HelperError(`the quick-tunnel helper exited (${code ?? signal})${last ? `: ${last}` : ""}`, false)))
            })
          })
        )
      )
