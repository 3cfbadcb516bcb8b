/**
 * Where the bytes of `/v1/files` live: three calls on an id, so an object store could replace the local disk. An upload goes to a
 * temporary name, renamed only once complete, else removed (docs/files-batches.md, "Files").
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Readable } from "node:stream"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { dbFileStore, removeOrphans } from "./dbFileStore.js"
import { FileNotStored, type FileStoreShape, FileTooLarge, type Stored } from "./store.js"

export { FileNotStored, type FileStoreShape, FileTooLarge, type Stored }

export class FileStore extends Context.Tag("gateway/FileStore")<FileStore, FileStoreShape>() {
  /**
   * `GATEWAY_FILE_STORE`: `disk` (under `DATA_DIR/files`) or `database` (the store's database,
   * src/inference/files/dbFileStore.ts). Default: `database` when the store is PostgreSQL (DATABASE_URL,
   * several gateways share it), else `disk`.
   */
  static readonly layer = Layer.effect(
    FileStore,
    Effect.gen(function* () {
      const config = yield* AppConfig
      const chosen = yield* Config.option(Config.literal("disk", "database")("GATEWAY_FILE_STORE"))
      const shared = Option.isSome(yield* Config.option(Config.nonEmptyString("DATABASE_URL")))
      const kind = Option.getOrElse(chosen, () => (shared ? "database" : "disk"))
      if (kind === "disk") return localFileStore(path.join(config.dataDir, "files"))
      const sql = yield* SqlClient.SqlClient
      const runtime = yield* Effect.runtime<never>()
      // Uploads a crashed gateway left half written: removed in the background, never before serving.
      yield* Effect.forkDaemon(
        Effect.flatMap(removeOrphans(sql, Date.now()), (n) =>
          n > 0 ? Effect.logInfo(`file store: removed ${n} unfinished upload(s)`) : Effect.void
        )
      )
      return dbFileStore(sql, runtime)
    })
  )
}

const SAFE_ID = /^[A-Za-z0-9_-]{1,128}$/

/** The local-disk store rooted at `dir` (created on first write). */
export const localFileStore = (dir: string): FileStoreShape => {
  const file = (id: string): string => {
    if (!SAFE_ID.test(id)) throw new Error(`not a storable file id: ${id.slice(0, 80)}`)
    return path.join(dir, id)
  }
  const put = (id: string, source: Readable, maxBytes: number): Effect.Effect<Stored, FileTooLarge | FileNotStored> =>
    Effect.flatMap(
      Effect.promise(() => fs.promises.mkdir(dir, { recursive: true })),
      () =>
        Effect.async<Stored, FileTooLarge | FileNotStored>((resume) => {
          const target = file(id)
          const temp = `${target}.part-${crypto.randomUUID()}`
          const out = fs.createWriteStream(temp)
          const hash = crypto.createHash("sha256")
          let bytes = 0
          let settled = false
          const discard = () => fs.promises.rm(temp, { force: true }).catch(() => undefined)
          const detach = () => {
            source.off("data", onData)
            source.off("end", onEnd)
            source.off("error", onError)
            source.off("close", onClose)
            out.off("drain", onDrain)
          }
          const fail = (e: FileTooLarge | FileNotStored) => {
            if (settled) return
            settled = true
            detach()
            out.destroy()
            void discard().then(() => resume(Effect.fail(e)))
          }
          const onData = (chunk: Buffer) => {
            bytes += chunk.length
            if (bytes > maxBytes) return fail(new FileTooLarge(maxBytes))
            hash.update(chunk)
            if (!out.write(chunk)) source.pause()
          }
          const onDrain = () => source.resume()
          const onEnd = () => {
            if (settled) return
            settled = true
            detach()
            out.end(() => {
              fs.promises.rename(temp, target).then(
                () => resume(Effect.succeed({ bytes, sha256: hash.digest("hex") })),
                (e: Error) => void discard().then(() => resume(Effect.fail(new FileNotStored(e.message))))
              )
            })
          }
          const onError = (e: Error) => fail(new FileNotStored(`the upload broke off: ${e.message}`))
          // A source closed before its end (a client gone mid-upload) never ends.
          const onClose = () => setImmediate(() => fail(new FileNotStored("the upload broke off before it was complete")))
          out.on("error", (e) => fail(new FileNotStored(`the file could not be written: ${e.message}`)))
          out.on("drain", onDrain)
          source.on("data", onData)
          source.on("end", onEnd)
          source.on("error", onError)
          source.on("close", onClose)
          source.resume()
          return Effect.promise(() => {
            if (settled) return Promise.resolve()
            settled = true
            detach()
            out.destroy()
            return discard()
          })
        })
    )
  return {
    put,
    open: (id) =>
      Effect.promise(async () => {
        const p = file(id)
        const stat = await fs.promises.stat(p).catch(() => undefined)
        return stat ? { stream: fs.createReadStream(p), bytes: stat.size } : undefined
      }),
    remove: (id) => Effect.promise(() => fs.promises.rm(file(id), { force: true }).catch(() => undefined))
  }
}
