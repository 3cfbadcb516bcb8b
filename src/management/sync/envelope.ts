import * as crypto from "node:crypto"
import * as zlib from "node:zlib"

/**
 * The passphrase envelope of bundles and archived secrets, `gwenc1.<header>.<sealed>` (docs/operations.md#the-seal-end-to-end-encryption).
 * Plain functions over node:crypto, no Effect: the CLI reads archives with them too.
 */
export const ENVELOPE_PREFIX = "gwenc1"

interface Header {
  readonly kdf: "scrypt"
  readonly N: number
  readonly r: number
  readonly p: number
  readonly salt: string
}

const COST = { N: 1 << 15, r: 8, p: 1 } as const
const MAX_N = 1 << 20

const deriveKey = (passphrase: string, h: Header): Buffer =>
  crypto.scryptSync(passphrase.normalize("NFC"), Buffer.from(h.salt, "base64url"), 32, {
    N: h.N,
    r: h.r,
    p: h.p,
    maxmem: 256 * h.N * h.r + 1024 * 1024
  })

export const seal = (plaintext: string | Buffer, passphrase: string): string => {
  const header: Header = { kdf: "scrypt", ...COST, salt: crypto.randomBytes(16).toString("base64url") }
  const headerText = Buffer.from(JSON.stringify(header)).toString("base64url")
  const iv = crypto.randomBytes(12)
  const cipher = crypto.createCipheriv("aes-256-gcm", deriveKey(passphrase, header), iv)
  cipher.setAAD(Buffer.from(headerText))
  const body = Buffer.concat([cipher.update(zlib.gzipSync(plaintext)), cipher.final()])
  return `${ENVELOPE_PREFIX}.${headerText}.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64url")}`
}

/** Why an envelope cannot be opened: not one at all, or the passphrase (or the data) is wrong. */
export type OpenFailure = { readonly _tag: "Malformed"; readonly reason: string } | { readonly _tag: "WrongPassphrase" }

export const open = (envelope: string, passphrase: string): { readonly ok: Buffer } | { readonly error: OpenFailure } => {
  const parts = envelope.trim().split(".")
  if (parts.length !== 3 || parts[0] !== ENVELOPE_PREFIX)
    return { error: { _tag: "Malformed", reason: `not a ${ENVELOPE_PREFIX} envelope` } }
  let header: Header
  try {
    header = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8")) as Header
  } catch {
    return { error: { _tag: "Malformed", reason: "the envelope header is not JSON" } }
  }
  if (
    header?.kdf !== "scrypt" ||
    typeof header.salt !== "string" ||
    ![header.N, header.r, header.p].every((n) => Number.isInteger(n) && n > 0) ||
    header.N > MAX_N ||
    (header.N & (header.N - 1)) !== 0 ||
    header.r > 32 ||
    header.p > 16
  ) {
    return { error: { _tag: "Malformed", reason: "the envelope header names an unsupported key derivation" } }
  }
  const raw = Buffer.from(parts[2]!, "base64url")
  if (raw.length < 28) return { error: { _tag: "Malformed", reason: "the envelope is truncated" } }
  try {
    const decipher = crypto.createDecipheriv("aes-256-gcm", deriveKey(passphrase, header), raw.subarray(0, 12))
    decipher.setAAD(Buffer.from(parts[1]!))
    decipher.setAuthTag(raw.subarray(12, 28))
    const zipped = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()])
    return { ok: zlib.gunzipSync(zipped, { maxOutputLength: 256 * 1024 * 1024 }) }
  } catch {
    return { error: { _tag: "WrongPassphrase" } }
  }
}
