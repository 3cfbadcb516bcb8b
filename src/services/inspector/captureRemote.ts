/**
 * The capture modes across workers (`--workers`, share.ts): worker 1 holds the listeners, the
 * hosts file and the system proxy; the other workers forward each call to it (`forwarded`), and
 * worker 1 runs them on its own capture modes (`servedBy`).
 */
import * as Effect from "effect/Effect"
import type { BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable } from "../../domain/errors.js"
import type { CaptureShape } from "./Capture.js"
import { failureOfRemote, type NodeShare, type RemoteFailure } from "./share.js"

type CaptureFailure = BadRequest | Conflict | Forbidden | NotFound | ServiceUnavailable

/**
 * The capture modes on a worker other than worker 1 (`--workers`, share.ts): every call runs on
 * worker 1, which holds the listeners, the hosts file and the system proxy; its answer or its
 * error is this worker's.
 */
export const forwarded = (node: NodeShare): CaptureShape => {
  const call = <A>(op: string, args: unknown = null) => Effect.mapError(node.call(op, args), failureOfRemote) as Effect.Effect<A, never>
  return {
    modes: call("modes"),
    httpProxy: (action) => call("httpProxy", action),
    systemProxy: (action) => call("systemProxy", action),
    tlsIntercept: (enabled) => call("tlsIntercept", enabled),
    hosts: {
      list: call("hosts.list"),
      add: (input) => call("hosts.add", input),
      remove: (host) => call("hosts.remove", host),
      patch: (host, enabled) => call("hosts.patch", { host, enabled })
    },
    caPem: call("caPem")
  }
}

/** Worker 1's side of `forwarded`: runs a call of another worker on this worker's capture modes. */
export const servedBy =
  (shape: CaptureShape, run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>) =>
  (op: string, args: any): Promise<{ readonly value: unknown } | { readonly failure: RemoteFailure }> => {
    const effect: Effect.Effect<unknown, CaptureFailure> | undefined =
      op === "modes"
        ? shape.modes
        : op === "httpProxy"
          ? shape.httpProxy(args)
          : op === "systemProxy"
            ? shape.systemProxy(args)
            : op === "tlsIntercept"
              ? shape.tlsIntercept(args)
              : op === "hosts.list"
                ? shape.hosts.list
                : op === "hosts.add"
                  ? shape.hosts.add(args)
                  : op === "hosts.remove"
                    ? shape.hosts.remove(args)
                    : op === "hosts.patch"
                      ? shape.hosts.patch(args.host, args.enabled)
                      : op === "caPem"
                        ? shape.caPem
                        : undefined
    if (effect === undefined) return Promise.resolve({ failure: { tag: "BadRequest", message: `unknown capture call ${op}` } })
    return run(
      Effect.match(effect, {
        onSuccess: (value) => ({ value }),
        onFailure: (e) => ({ failure: { tag: e._tag, message: e.message } })
      })
    )
  }
