/** The part of tar-stream 2.2.0's API the export archive uses (src/management/sync/Archive.ts); the package ships no types. */
declare module "tar-stream" {
  import type { Readable, Writable } from "node:stream"
  export interface Headers {
    name: string
    size?: number
    mode?: number
    mtime?: Date
    type?: "file" | "directory" | string
  }
  export interface Pack extends Readable {
    entry(header: Headers, buffer?: string | Buffer, callback?: (error?: Error | null) => void): Writable
    finalize(): void
  }
  export interface Extract extends Writable {
    on(event: "entry", listener: (header: Headers, stream: Readable, next: () => void) => void): this
    on(event: "finish", listener: () => void): this
    on(event: "error", listener: (error: Error) => void): this
    on(event: string, listener: (...args: Array<any>) => void): this
  }
  export function pack(): Pack
  export function extract(): Extract
}
