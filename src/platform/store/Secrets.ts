import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { AppConfig } from "../config/AppConfig.js"

export const STORAGE_KEY_FILE = "storage.key"
const PREFIX = "v1:"

export class SecretDecryptError extends Data.TaggedError("SecretDecryptError")<{ readonly message: string }> {}

export interface SecretsShape {
  /** Where the key came from: the `STORAGE_ENCRYPTION_KEY` variable or the generated key file. */
  readonly source: "env" | "file"
  readonly keyFile: string
  readonly encrypt: (plain: string) => string
  readonly decrypt: (stored: string) => Effect.Effect<Redacted.Redacted<string>, SecretDecryptError>
}

/**
 * Turns `STORAGE_ENCRYPTION_KEY` into 32 bytes: 64 hex characters or base64 of 32 bytes are
 * used as they are; any other text is a passphrase stretched with scrypt.
 */
export const deriveKey = (material: string): Buffer => {
  const trimmed = material.trim()
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, "hex")
  const b64 = Buffer.from(trimmed, "base64")
  if (b64.length === 32 && /^[A-Za-z0-9+/_-]+=*$/.test(trimmed)) return b64
  return crypto.scryptSync(trimmed, "gateway-storage-key-v1", 32)
}

/** Reads the key file, creating it (0600, exclusive create) the first time. */
export const loadOrCreateKeyFile = (file: string): Buffer => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  try {
    fs.writeFileSync(file, crypto.randomBytes(32).toString("hex") + "\n", { mode: 0o600, flag: "wx" })
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
  }
  const text = fs.readFileSync(file, "utf8").trim()
  if (!/^[0-9a-f]{64}$/.test(text)) {
    throw new Error(`${file} does not hold a 64-character hex key`)
  }
  return Buffer.from(text, "hex")
}

export const makeCipher = (key: Buffer) => ({
  encrypt: (plain: string): string => {
    const iv = crypto.randomBytes(12)
    const cipher = crypto.createCipheriv("aes-256-gcm", key, iv)
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()])
    return PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")
  },
  decrypt: (stored: string): string => {
    if (!stored.startsWith(PREFIX)) throw new Error("not an encrypted value")
    const raw = Buffer.from(stored.slice(PREFIX.length), "base64")
    const decipher = crypto.createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12))
    decipher.setAuthTag(raw.subarray(12, 28))
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8")
  }
})

/**
 * Encryption of secrets at rest (provider API keys, OAuth tokens): AES-256-GCM with a key from
 * `STORAGE_ENCRYPTION_KEY`, else one generated once into DATA_DIR/storage.key (mode 0600).
 */
export class Secrets extends Context.Tag("gateway/Secrets")<Secrets, SecretsShape>() {
  static readonly layer = Layer.effect(
    Secrets,
    Effect.gen(function* () {
      const { dataDir } = yield* AppConfig
      const keyFile = path.join(dataDir, STORAGE_KEY_FILE)
      const fromEnv = yield* Config.redacted("STORAGE_ENCRYPTION_KEY").pipe(Config.option, Effect.orDie)
      const envKey = Option.filter(fromEnv, (r) => Redacted.value(r).trim().length > 0)
      const key = Option.isSome(envKey)
        ? deriveKey(Redacted.value(envKey.value))
        : yield* Effect.try(() => loadOrCreateKeyFile(keyFile)).pipe(Effect.orDie)
      const cipher = makeCipher(key)
      return {
        source: Option.isSome(envKey) ? ("env" as const) : ("file" as const),
        keyFile,
        encrypt: cipher.encrypt,
        decrypt: (stored) =>
          Effect.try({
            try: () => Redacted.make(cipher.decrypt(stored)),
            catch: () =>
              new SecretDecryptError({
                message: "stored secret cannot be decrypted with the current storage key"
              })
          })
      }
    })
  )
}
