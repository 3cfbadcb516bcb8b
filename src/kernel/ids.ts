import * as crypto from "node:crypto"

/** How many ids one batch of random bytes makes: one `randomFillSync` per this many requests. */
const IDS_PER_BATCH = 256
const ID_BYTES = 16
const PREFIX = "req_"

/** Random bytes for the next ids, refilled when used up (the way `crypto.randomUUID` batches its own). */
const random = Buffer.allocUnsafeSlow(IDS_PER_BATCH * ID_BYTES)
let next = IDS_PER_BATCH * ID_BYTES
/** `req_` then room for 32 hex digits: each id is written here and read out as one flat string. */
const scratch = Buffer.from(PREFIX + "0".repeat(ID_BYTES * 2), "latin1")
const HEX = Buffer.from("0123456789abcdef", "latin1")

/**
 * A request's id (`req_` and 32 hex digits): in `X-Gateway-Request-Id`, log lines, usage rows and traces.
 * The digits are a random UUID v4's without its dashes (its version and variant bits kept), as they
 * always were; built from a batch of random bytes into one string, not as a UUID whose dashes are
 * replaced (three strings per request).
 */
export const newRequestId = (): string => {
  if (next === random.length) {
    crypto.randomFillSync(random)
    next = 0
  }
  const at = next
  next += ID_BYTES
  for (let i = 0; i < ID_BYTES; i++) {
    // A UUID v4's version (byte 6) and RFC 4122 variant (byte 8) bits.
    const b = i === 6 ? (random[at + i]! & 0x0f) | 0x40 : i === 8 ? (random[at + i]! & 0x3f) | 0x80 : random[at + i]!
    scratch[PREFIX.length + 2 * i] = HEX[b >> 4]!
    scratch[PREFIX.length + 2 * i + 1] = HEX[b & 0x0f]!
  }
  return scratch.toString("latin1")
}
