/**
 * Transparent capture (TPROXY): `GET`, `POST`, `DELETE /api/tools/agent-bridge/tproxy`, one session at a time, on worker 1 under
 * `--workers`. Each start step is undone when a later one fails; stop reverses them on DELETE, on SIGTERM and after a crash
 * (tproxySession.ts; docs/capture.md#what-it-changes-on-the-system).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as path from "node:path"
import type { ServiceUnavailable } from "../../domain/errors.js"
import type { TproxyStart, TproxyStatus } from "../../domain/inspector.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { EgressMark } from "../../upstream/client/EgressMark.js"
import { Inspector } from "./Inspector.js"
import { describeChanges, describeRevert, TPROXY_DEFAULTS } from "./tproxy/rules.js"
import { forwardedTproxy, servedTproxy } from "./tproxyRemote.js"
import {
  type Availability,
  makeRecord,
  makeTproxySessions,
  TPROXY_STATE_FILE,
  type TproxyFailure,
  type TproxyState
} from "./tproxySession.js"
import { TproxySystem } from "./TproxySystem.js"

export { TPROXY_STATE_FILE } from "./tproxySession.js"
export { realTproxySystem, TproxySystem, type TproxySystemShape } from "./TproxySystem.js"

type Status = typeof TproxyStatus.Type
type StartBody = typeof TproxyStart.Type

export interface TproxyShape {
  readonly status: Effect.Effect<Status, ServiceUnavailable>
  readonly start: (body: StartBody | undefined) => Effect.Effect<Status, TproxyFailure>
  readonly stop: Effect.Effect<Status, ServiceUnavailable>
}

/** What GET shows: the session (or the defaults), whether the mode can run here, the commands it applies and reverts, the last error. */
const statusOf = (state: TproxyState, a: Availability): Status => {
  const { session } = state
  const shown = session?.config ?? TPROXY_DEFAULTS
  return {
    running: session !== undefined,
    available: a.available,
    reason: a.available ? null : a.reason,
    interceptCount: state.interceptCount,
    port: session?.listener.port ?? TPROXY_DEFAULTS.onPort,
    startedAt: session?.startedAt ?? null,
    config: session ? { ...session.config } : null,
    trustStore: session?.trust ?? { installed: false, path: null, note: null },
    commands: { applied: session ? [...describeChanges(shown)] : [], revert: [...describeRevert(shown)] },
    lastError: state.lastError
  }
}

export class Tproxy extends Context.Tag("gateway/InspectorTproxy")<Tproxy, TproxyShape>() {
  static readonly layer = Layer.scoped(
    Tproxy,
    Effect.gen(function* () {
      const inspector = yield* Inspector
      const node = inspector.node
      // `--workers`: worker 1 holds the capture listeners and this mode; the others forward to it.
      if (node !== undefined && !node.holdsCapture) return forwardedTproxy(node)
      const system = yield* TproxySystem
      const egressMark = Option.getOrUndefined(yield* Effect.serviceOption(EgressMark))
      const flags = yield* FeatureFlags
      const config = inspector.config
      const sink = inspector.core.sink
      const record = makeRecord(path.join(config.caDir, TPROXY_STATE_FILE))
      const upstreamCa = config.upstreamCaFile ? [fs.readFileSync(config.upstreamCaFile, "utf8")] : undefined
      // A restart flag: its value at start holds until the next one (docs/feature-flags.md).
      const verifyAtStart = !(yield* flags.enabled("MITM_DISABLE_TLS_VERIFY"))
      const verifyUpstream = () => verifyAtStart

      const state: TproxyState = { session: undefined, interceptCount: 0, lastError: null }
      const sessions = makeTproxySessions({ system, egressMark, config, sink, upstreamCa, verifyUpstream, record, state })
      const status = (): Status => statusOf(state, sessions.availability())
      // Starts and stops run one after the other: a DELETE during a start waits for it.
      let queue: Promise<unknown> = Promise.resolve()
      const serial = <A>(f: () => Promise<A>): Promise<A> => {
        const next = queue.then(f, f)
        queue = next.catch(() => undefined)
        return next
      }

      // After a crash: what the dead process applied is removed before anything else.
      yield* sessions.afterCrash
      // Stop (SIGTERM included): the session's rules, listener and trust-store slot removed.
      yield* Effect.addFinalizer(() =>
        Effect.promise(() =>
          serial(() => (state.session !== undefined || record.read() !== undefined ? sessions.stopNow() : Promise.resolve()))
        )
      )

      const shape: TproxyShape = {
        status: Effect.sync(status),
        start: (body) =>
          Effect.flatMap(
            Effect.promise(() => serial(() => sessions.startNow(body))),
            (failure) => {
              if (failure === undefined) return Effect.succeed(status())
              // A refused body or a second start changed nothing: not the mode's error.
              if (failure._tag !== "BadRequest" && !failure.message.startsWith("transparent capture is already running"))
                state.lastError = failure.message
              return Effect.fail(failure)
            }
          ),
        stop: Effect.map(
          Effect.promise(() => serial(sessions.stopNow)),
          status
        )
      }
      node?.serve(servedTproxy(shape), "tproxy.")
      return shape
    })
  )
}
