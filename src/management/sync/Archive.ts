import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as fs from "node:fs"
import * as path from "node:path"
import { pipeline } from "node:stream/promises"
import * as zlib from "node:zlib"
import type * as TarStream from "tar-stream"
import { BadRequest } from "../../domain/errors.js"
import { deriveKey, loadOrCreateKeyFile, type SecretsShape } from "../../platform/store/Secrets.js"
import * as Envelope from "./envelope.js"

/**
 * The entries of `GET /api/db-backups/exportAll`'s gzipped tar (the sealed storage key and .env only with `includeKey`):
 * docs/operations.md#the-exportall-archive.
 */
export const ARCHIVE = {
  manifest: "manifest.json",
  db: "gateway.db",
  config: "config.json",
  key: "storage-key.enc",
  env: "env.enc"
} as const
export const ENV_FILE = ".env"

/** tar-stream, loaded with the first archive (docs/performance.md, "Memory at rest"). */
const loadTar = (): Promise<typeof TarStream> =>
  import("tar-stream").then((m) => ((m as { default?: typeof TarStream }).default ?? m) as typeof TarStream)

export type ArchiveEntry = { readonly name: string; readonly file: string } | { readonly name: string; readonly data: string | Buffer }

/** Writes the entries, in order, as a .tar.gz at `out`. */
export const writeArchive = async (out: string, entries: ReadonlyArray<ArchiveEntry>): Promise<void> => {
  const pack = (await loadTar()).pack()
  const written = pipeline(pack, zlib.createGzip(), fs.createWriteStream(out))
  const add = async () => {
    for (const e of entries) {
      if ("data" in e) {
        await new Promise<void>((resolve, reject) =>
          pack.entry({ name: e.name, mode: 0o600 }, e.data, (err) => (err ? reject(err) : resolve()))
        )
      } else {
        const size = fs.statSync(e.file).size
        await new Promise<void>((resolve, reject) => {
          const sink = pack.entry({ name: e.name, size, mode: 0o600 }, undefined, (err) => (err ? reject(err) : resolve()))
          fs.createReadStream(e.file).on("error", reject).pipe(sink)
        })
      }
    }
    pack.finalize()
  }
  return Promise.all([add(), written]).then(() => undefined)
}

/** Whether a file starts like a gzip stream (an archive), not like a SQLite database. */
export const isArchive = (file: string): boolean => {
  const fd = fs.openSync(file, "r")
  try {
    const head = Buffer.alloc(2)
    return fs.readSync(fd, head, 0, 2, 0) === 2 && head[0] === 0x1f && head[1] === 0x8b
  } finally {
    fs.closeSync(fd)
  }
}

/** The entries of an archive, the wanted ones extracted into `dir` (name → file). */
export const readArchive = async (
  file: string,
  dir: string,
  wanted: ReadonlyArray<string>
): Promise<{ readonly names: ReadonlyArray<string>; readonly files: Record<string, string> }> => {
  const names: Array<string> = []
  const files: Record<string, string> = {}
  const extract = (await loadTar()).extract()
  extract.on("entry", (header, stream, next) => {
    names.push(header.name)
    if (wanted.includes(header.name) && !(header.name in files)) {
      const target = path.join(dir, `.tmp-archive-${process.pid}-${Date.now()}-${names.length}-${path.basename(header.name)}`)
      files[header.name] = target
      pipeline(stream, fs.createWriteStream(target)).then(next, (e) => extract.destroy(e))
    } else {
      stream.on("end", next)
      stream.resume()
    }
  })
  return pipeline(fs.createReadStream(file), zlib.createGunzip(), extract).then(
    () => ({ names, files }),
    (e) => {
      for (const f of Object.values(files)) fs.rmSync(f, { force: true })
      throw e
    }
  )
}

/**
 * The database inside an archive, extracted into `dir` (the caller deletes it), with the names
 * of the archive's entries; a 400 naming the problem when the file is not such an archive.
 */
export const databaseOf = (file: string, dir: string, label: string, wanted: ReadonlyArray<string> = []) =>
  Effect.tryPromise({
    try: () => fs.promises.mkdir(dir, { recursive: true }).then(() => readArchive(file, dir, [ARCHIVE.db, ...wanted])),
    catch: (e) =>
      new BadRequest({ message: `cannot restore ${label}: not a readable gateway archive (${e instanceof Error ? e.message : String(e)})` })
  }).pipe(
    Effect.flatMap((read) =>
      read.files[ARCHIVE.db] && read.names.includes(ARCHIVE.manifest)
        ? Effect.succeed({ db: read.files[ARCHIVE.db]!, names: read.names, files: read.files })
        : Effect.sync(() => Object.values(read.files).forEach((f) => fs.rmSync(f, { force: true }))).pipe(
            Effect.zipRight(
              Effect.fail(
                new BadRequest({
                  message: `cannot restore ${label}: the archive has no ${ARCHIVE.manifest} and ${ARCHIVE.db} (not a gateway export)`
                })
              )
            )
          )
    )
  )

/** The 32-byte storage key as 64 hex characters: derived from STORAGE_ENCRYPTION_KEY when set, else the key file's. */
export const storageKeyHex = (secrets: SecretsShape) =>
  Effect.gen(function* () {
    const fromEnv = yield* Config.redacted("STORAGE_ENCRYPTION_KEY").pipe(Config.option, Effect.orDie)
    const env = Option.filter(fromEnv, (r) => Redacted.value(r).trim().length > 0)
    if (secrets.source === "env" && Option.isSome(env)) return deriveKey(Redacted.value(env.value)).toString("hex")
    return yield* Effect.try(() => loadOrCreateKeyFile(secrets.keyFile).toString("hex")).pipe(Effect.orDie)
  })

/** Opens `storage-key.enc` with the passphrase: the key as 64 hex characters, or a 400 saying why not. */
export const openStorageKey = (sealed: string, passphrase: string): Effect.Effect<string, BadRequest> =>
  Effect.suspend(() => {
    const opened = Envelope.open(sealed, passphrase)
    if ("error" in opened) {
      return Effect.fail(
        new BadRequest({
          message:
            opened.error._tag === "WrongPassphrase"
              ? "wrong passphrase: the archived storage key cannot be decrypted with it"
              : `the archived storage key is unreadable: ${opened.error.reason}`
        })
      )
    }
    try {
      const parsed = JSON.parse(opened.ok.toString("utf8")) as { format?: string; key?: string }
      if (parsed.format === "gateway-storage-key" && typeof parsed.key === "string" && /^[0-9a-f]{64}$/.test(parsed.key))
        return Effect.succeed(parsed.key)
    } catch {
      // fall through
    }
    return Effect.fail(new BadRequest({ message: "the archived storage key is unreadable: not a gateway-storage-key document" }))
  })
