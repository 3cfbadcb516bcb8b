/**
 * The server's end of the optimizing compiler's hold. `gateway` starting the server from its code
 * cache (dist/bundle/gateway.mjs, made by scripts/bundle-cli.mjs) holds V8's TurboFan off while
 * the server starts: a start runs its code once, and what TurboFan compiled of it was work the
 * first answer waited for. The loader puts it back OPTIMIZER_HOLD_MAX_MS after start at the
 * latest; the server does it sooner, once its first answer is written (`releaseOptimizerOnFirstAnswer`).
 * Without the loader's hold (the compiled tree, tests, a command line that chose) it does nothing.
 */
import type * as http from "node:http"

const RELEASE = Symbol.for("gateway.releaseOptimizer")

/** Puts the optimizing compiler back if the loader held it (idempotent). */
export const releaseOptimizer = (): void => {
  const release = (globalThis as { [RELEASE]?: unknown })[RELEASE]
  if (typeof release === "function") release()
}

/** Puts the compiler back when `server`'s first answer has been written, or its connection closed first. */
export const releaseOptimizerOnFirstAnswer = (server: http.Server): void => {
  if ((globalThis as { [RELEASE]?: unknown })[RELEASE] === undefined) return
  server.once("request", (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.once("close", releaseOptimizer)
  })
}
