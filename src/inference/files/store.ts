/** What a file store is (FileStore.ts has the local layer, dbFileStore.ts the database one). */
import type * as Effect from "effect/Effect"
import type { Readable } from "node:stream"

/** What a stored object is: its size and sha256 (hex). */
export interface Stored {
  readonly bytes: number
  readonly sha256: string
}

/** The source was larger than the limit: nothing was kept. */
export class FileTooLarge {
  readonly _tag = "FileTooLarge"
  constructor(readonly maxBytes: number) {}
}

/** The source broke off (a client that disconnected) or the store could not write: nothing was kept. */
export class FileNotStored {
  readonly _tag = "FileNotStored"
  constructor(readonly message: string) {}
}

export interface FileStoreShape {
  /**
   * Stores `source` under `id`, at most `maxBytes` bytes. The object exists only once this
   * succeeded; on failure or interruption nothing is left under `id`. The source is consumed
   * (and, on failure, left to its owner: a request's rest is drained by the caller).
   */
  readonly put: (id: string, source: Readable, maxBytes: number) => Effect.Effect<Stored, FileTooLarge | FileNotStored>
  /** The object's bytes as a stream, or undefined when there is none. */
  readonly open: (id: string) => Effect.Effect<{ readonly stream: Readable; readonly bytes: number } | undefined>
  /** Removes the object (nothing when there is none). */
  readonly remove: (id: string) => Effect.Effect<void>
}
