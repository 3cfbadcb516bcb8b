import * as crypto from "node:crypto"

/** A request's id (`req_` and 32 hex digits): in `X-Gateway-Request-Id`, log lines, usage rows and traces. */
export const newRequestId = (): string => "req_" + crypto.randomUUID().replace(/-/g, "")
