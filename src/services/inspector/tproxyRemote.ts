/**
 * The transparent capture across workers (`--workers`, share.ts): worker 1 holds the capture
 * listeners and this mode; the other workers forward each call to it (`forwardedTproxy`), and
 * worker 1 runs them on its own mode (`servedTproxy`).
 */
import * as Effect from "effect/Effect"
import type { TproxyStart, TproxyStatus } from "../../domain/inspector.js"
import { failureOfRemote, type NodeShare, type RemoteFailure } from "./share.js"
import type { TproxyShape } from "./Tproxy.js"
import type { TproxyFailure } from "./tproxySession.js"

type Status = typeof TproxyStatus.Type
type StartBody = typeof TproxyStart.Type

/** The mode on a worker other than worker 1: every call runs on worker 1; its answer or its error is this worker's. */
export const forwardedTproxy = (node: NodeShare): TproxyShape => {
  const call = <A>(op: string, args: unknown = null) => Effect.mapError(node.call(op, args), failureOfRemote) as Effect.Effect<A, never>
  return {
    status: call<Status>("tproxy.status"),
    start: (body) => call<Status>("tproxy.start", body ?? null),
    stop: call<Status>("tproxy.stop")
  } satisfies TproxyShape
}

/** Worker 1's side of `forwardedTproxy`: runs a call of another worker on this worker's mode. */
export const servedTproxy =
  (shape: TproxyShape) =>
  (op: string, args: unknown): Promise<{ readonly value: unknown } | { readonly failure: RemoteFailure }> => {
    const effect: Effect.Effect<unknown, TproxyFailure> | undefined =
      op === "tproxy.status"
        ? shape.status
        : op === "tproxy.start"
          ? shape.start((args ?? undefined) as StartBody | undefined)
          : op === "tproxy.stop"
            ? shape.stop
            : undefined
    if (effect === undefined) return Promise.resolve({ failure: { tag: "BadRequest", message: `unknown transparent-capture call ${op}` } })
    return Effect.runPromise(
      Effect.match(effect, {
        onSuccess: (value) => ({ value }),
        onFailure: (e) => ({ failure: { tag: e._tag, message: e.message } })
      })
    )
  }
