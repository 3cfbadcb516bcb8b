import * as crypto from "node:crypto"

/** scrypt parameters: ~60 ms per hash on the reference machine, 32 MiB of memory. */
const N = 32768
const r = 8
const p = 1
const KEYLEN = 32
const MAXMEM = 64 * 1024 * 1024

const scrypt = (password: string, salt: Buffer, n: number, rr: number, pp: number): Promise<Buffer> =>
  new Promise((resolve, reject) =>
    crypto.scrypt(password, salt, KEYLEN, { N: n, r: rr, p: pp, maxmem: MAXMEM }, (err, key) => (err ? reject(err) : resolve(key)))
  )

/** `scrypt$N$r$p$salt$hash`, salt and hash in base64. */
export const hashPassword = async (password: string): Promise<string> => {
  const salt = crypto.randomBytes(16)
  const key = await scrypt(password, salt, N, r, p)
  return ["scrypt", N, r, p, salt.toString("base64"), key.toString("base64")].join("$")
}

export const verifyPassword = async (password: string, stored: string): Promise<boolean> => {
  const parts = stored.split("$")
  if (parts.length !== 6 || parts[0] !== "scrypt") return false
  const [, n, rr, pp, salt, hash] = parts as [string, string, string, string, string, string]
  const expected = Buffer.from(hash, "base64")
  const actual = await scrypt(password, Buffer.from(salt, "base64"), Number(n), Number(rr), Number(pp))
  return actual.length === expected.length && crypto.timingSafeEqual(actual, expected)
}

export const sha256 = (text: string): string => crypto.hash("sha256", text, "hex")

export const randomToken = (bytes = 32): string => crypto.randomBytes(bytes).toString("base64url")

export const safeEqual = (a: string, b: string): boolean => {
  const ba = Buffer.from(a)
  const bb = Buffer.from(b)
  return ba.length === bb.length && crypto.timingSafeEqual(ba, bb)
}
