import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as FiberHandle from "effect/FiberHandle"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import { AppConfig } from "../config/AppConfig.js"
import { backgroundJob } from "../flags/background.js"
import { BACKUP_ID_PATTERN, type BackupKind, type BackupView, type RestoreResult } from "../../domain/backups.js"
import { BadRequest, NotFound, ServiceUnavailable } from "../../domain/errors.js"
import { DB_FILENAME, knownMigrations, migrate } from "./Db.js"
import { BUSY_TIMEOUT_MS, checkDatabaseFile, copyDatabase, TargetBusy } from "./sqlite.js"
import { StoreKind } from "./StoreKind.js"
import { StoreVersion } from "./StoreVersion.js"
import * as Option from "effect/Option"
import { type BackupSchedule, Settings } from "../settings/Settings.js"

export const BACKUP_DIR = "backups"

/** Retries of a copy into the live file whose lock another writer holds: quick at first, within the busy timeout. */
const copyRetry = Schedule.exponential("5 millis", 2).pipe(
  Schedule.modifyDelay((d) => Duration.min(d, Duration.millis(200))),
  Schedule.upTo(Duration.millis(BUSY_TIMEOUT_MS))
)

/** `20240501T130000123Z` for a time: sorts like the time, and is safe in a file name. */
const stamp = (ms: number): string => new Date(ms).toISOString().replace(/[-:.]/g, "")

/** The creation time in an id (`20240501T130000123Z-manual` → 2024-05-01T13:00:00.123Z). */
const createdAtOf = (id: string): string => {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(\d{3})Z/.exec(id)
  return m ? `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${m[7]}Z` : ""
}

const kindOf = (id: string): BackupKind =>
  id.includes("-pre-restore") ? "pre-restore" : id.includes("-scheduled") ? "scheduled" : "manual"

export interface BackupsShape {
  /** Every backup in DATA_DIR/backups, newest first. */
  readonly list: Effect.Effect<ReadonlyArray<BackupView>>
  /** A consistent copy of the live database now (SQLite's online backup API). */
  readonly create: (kind: BackupKind) => Effect.Effect<BackupView>
  /** The file of a listed backup. */
  readonly fileOf: (id: string) => Effect.Effect<string, NotFound>
  /**
   * Replaces the live database with `file` (a backup or an upload): integrity and schema checks
   * first (400 and nothing changed when they fail), then a `pre-restore` backup, the swap, this
   * build's missing migrations, and every in-memory cache reloaded.
   */
  readonly restoreFile: (file: string, label: string) => Effect.Effect<RestoreResult, BadRequest | ServiceUnavailable>
  /** The checks a restore runs, alone: undefined when the file can be restored, else why not. */
  readonly check: (file: string) => Effect.Effect<string | undefined>
  /** Deletes the oldest backups of `kind` beyond the newest `keep`; answers the ids removed. */
  readonly prune: (kind: BackupKind, keep: number) => Effect.Effect<ReadonlyArray<string>>
  /** A fresh backup in a temporary file (for a download); the caller deletes it. */
  readonly snapshot: Effect.Effect<string>
  /** Where uploads are written before they are checked. */
  readonly tempFile: (suffix: string) => string
  /**
   * Why backups cannot be made here, or undefined: on PostgreSQL (DATABASE_URL) the database is
   * backed up with its own tools (pg_dump), and the backup routes answer 409 with this.
   */
  readonly unavailable: string | undefined
}

/** The answer of the backup routes and commands on a PostgreSQL store (docs/scale-out.md, "PostgreSQL"). */
export const BACKUPS_UNAVAILABLE_ON_POSTGRES =
  'backups_unavailable: the database is PostgreSQL (DATABASE_URL); the gateway\'s backups copy a SQLite file. Back it up with pg_dump (pg_dump -Fc "$DATABASE_URL" > gateway.dump) and restore with pg_restore; GET /api/db-backups/exportAll is unavailable too, GET /api/sync/bundle exports the configuration'

/** Backups on PostgreSQL: none made, none listed; every action answers `unavailable`. */
const unavailableBackups = (dataDir: string): BackupsShape => {
  const never = Effect.dieMessage(BACKUPS_UNAVAILABLE_ON_POSTGRES)
  return {
    list: Effect.succeed([]),
    create: () => never,
    fileOf: () => Effect.fail(new NotFound({ message: BACKUPS_UNAVAILABLE_ON_POSTGRES })),
    restoreFile: () => Effect.fail(new BadRequest({ message: BACKUPS_UNAVAILABLE_ON_POSTGRES })),
    check: () => Effect.succeed(BACKUPS_UNAVAILABLE_ON_POSTGRES),
    prune: () => Effect.succeed([]),
    snapshot: never,
    tempFile: (suffix) => path.join(dataDir, BACKUP_DIR, `.tmp-${process.pid}-${Date.now()}${suffix}`),
    unavailable: BACKUPS_UNAVAILABLE_ON_POSTGRES
  }
}

export class Backups extends Context.Tag("gateway/Backups")<Backups, BackupsShape>() {
  /** SQLite only: the online backup API on the live connection and on files (docs/operations.md). */
  static readonly layer = Layer.effect(
    Backups,
    Effect.gen(function* () {
      const { dataDir } = yield* AppConfig
      const kind = yield* Effect.serviceOption(StoreKind)
      if (Option.isSome(kind) && kind.value._tag === "postgres") return unavailableBackups(dataDir)
      const sqlite = yield* SqliteClient.SqliteClient
      const sql = yield* SqlClient.SqlClient
      const version = yield* StoreVersion
      const known = new Set(yield* knownMigrations)
      const dir = path.join(dataDir, BACKUP_DIR)
      const dbFile = path.join(dataDir, DB_FILENAME)
      const ensureDir = Effect.sync(() => fs.mkdirSync(dir, { recursive: true }))
      let tempCounter = 0
      const tempFile = (suffix: string) => path.join(dir, `.tmp-${process.pid}-${Date.now()}-${++tempCounter}${suffix}`)

      const view = (id: string): BackupView | undefined => {
        try {
          const st = fs.statSync(path.join(dir, `${id}.db`))
          return { id, createdAt: createdAtOf(id), size: st.size, kind: kindOf(id) }
        } catch {
          return undefined
        }
      }

      const list = Effect.sync(() => {
        let names: Array<string> = []
        try {
          names = fs.readdirSync(dir)
        } catch {
          return []
        }
        return names
          .filter((n) => n.endsWith(".db") && BACKUP_ID_PATTERN.test(n.slice(0, -3)))
          .map((n) => view(n.slice(0, -3)))
          .filter((v): v is BackupView => v !== undefined)
          .sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
      })

      /** Online backup of the live connection into a temporary file, renamed into place when whole. */
      const backupTo = (target: string) =>
        Effect.gen(function* () {
          yield* ensureDir
          const partial = tempFile(".partial")
          yield* Effect.orDie(sqlite.backup(partial))
          yield* Effect.sync(() => fs.renameSync(partial, target))
        })

      const create = (kind: BackupKind) =>
        Effect.gen(function* () {
          yield* ensureDir
          const base = `${stamp(Date.now())}-${kind}`
          let id = base
          for (let n = 1; fs.existsSync(path.join(dir, `${id}.db`)); n++) id = `${base}-${n}`
          yield* backupTo(path.join(dir, `${id}.db`))
          const made = view(id)!
          yield* Effect.logInfo(`database backup ${id} (${made.size} bytes)`)
          return made
        }).pipe(Effect.withSpan("Backups.create"))

      const fileOf = (id: string) =>
        BACKUP_ID_PATTERN.test(id) && fs.existsSync(path.join(dir, `${id}.db`))
          ? Effect.succeed(path.join(dir, `${id}.db`))
          : Effect.fail(new NotFound({ message: `no backup ${JSON.stringify(id)}: GET /api/db-backups lists them` }))

      const check = (file: string) =>
        Effect.sync(() => {
          const found = checkDatabaseFile(file)
          if (found._tag === "Invalid") return found.reason
          const unknown = found.migrations.filter((m) => !known.has(m))
          if (unknown.length > 0) return `made by a newer gateway: migrations ${unknown.join(", ")} are unknown to this build`
          return undefined
        })

      /**
       * The copy into the live file, tried again while another writer holds its lock (this
       * process's batch writer thread mid-commit, the CLI, a second gateway): as long as a
       * statement would wait (BUSY_TIMEOUT_MS), then 503 with nothing changed.
       */
      const copyIntoLive = (file: string, label: string) =>
        Effect.tryPromise({ try: () => copyDatabase(file, dbFile), catch: (e) => e }).pipe(
          Effect.retry({ schedule: copyRetry, while: (e) => e instanceof TargetBusy }),
          Effect.catchIf(
            (e): e is TargetBusy => e instanceof TargetBusy,
            () =>
              Effect.fail(
                new ServiceUnavailable({
                  message: `cannot restore ${label}: another writer held the database for ${BUSY_TIMEOUT_MS / 1000} s; nothing was changed (the safety backup is kept), try again`
                })
              )
          ),
          Effect.catchAll((e) => (e instanceof ServiceUnavailable ? Effect.fail(e) : Effect.die(e)))
        )

      const restoreFile = (file: string, label: string) =>
        Effect.gen(function* () {
          const problem = yield* check(file)
          if (problem !== undefined) return yield* Effect.fail(new BadRequest({ message: `cannot restore ${label}: ${problem}` }))
          const safetyBackup = yield* create("pre-restore")
          // This process's connection stays idle (its one permit held) while another connection
          // copies the file in; other processes wait on the write lock (busy_timeout).
          yield* Effect.scoped(Effect.zipRight(Effect.orDie(sql.reserve), copyIntoLive(file, label)))
          const migrated = yield* Effect.orDie(Effect.provideService(migrate, SqlClient.SqlClient, sql))
          // Every cache loads again on its next read (other processes see the file change within a second).
          yield* version.changed
          yield* Effect.logWarning(`database restored from ${label} (safety backup ${safetyBackup.id})`)
          return { restored: label, safetyBackup, migrated }
        }).pipe(Effect.uninterruptible, Effect.withSpan("Backups.restore"))

      const prune = (kind: BackupKind, keep: number) =>
        Effect.gen(function* () {
          const old = (yield* list).filter((b) => b.kind === kind).slice(Math.max(0, keep))
          for (const b of old) yield* Effect.sync(() => fs.rmSync(path.join(dir, `${b.id}.db`), { force: true }))
          return old.map((b) => b.id)
        })

      const snapshot = Effect.gen(function* () {
        const file = tempFile(".db")
        yield* backupTo(file)
        return file
      })

      // Temporary files a crash left behind.
      yield* Effect.sync(() => {
        try {
          for (const n of fs.readdirSync(dir)) if (n.startsWith(".tmp-")) fs.rmSync(path.join(dir, n), { force: true })
        } catch {
          // no backups folder yet
        }
      })

      return { list, create, fileOf, restoreFile, check, prune, snapshot, tempFile, unavailable: undefined } satisfies BackupsShape
    })
  )
}

/**
 * Scheduled backups: one every interval (the first one interval after start), pruned to `keep`.
 * Interval and count come from the settings (`backups`), else GATEWAY_BACKUP_INTERVAL_HOURS and
 * GATEWAY_BACKUP_KEEP; a change re-arms the schedule at once (the new interval counts from then).
 */
export const ScheduledBackups = Layer.scopedDiscard(
  Effect.gen(function* () {
    if (!(yield* backgroundJob("scheduled backups"))) return
    const backups = yield* Backups
    if (backups.unavailable !== undefined)
      return yield* Effect.logInfo("scheduled backups off: the database is PostgreSQL (back it up with pg_dump)")
    const settings = yield* Settings
    const armed = yield* FiberHandle.make()
    const arm = ({ intervalHours, keep }: BackupSchedule) =>
      Effect.gen(function* () {
        if (!(intervalHours > 0) || !(keep > 0)) {
          yield* FiberHandle.clear(armed)
          return yield* Effect.logInfo("scheduled backups off")
        }
        const run = Effect.gen(function* () {
          yield* backups.create("scheduled")
          const removed = yield* backups.prune("scheduled", keep)
          if (removed.length > 0) yield* Effect.logInfo(`scheduled backups pruned: ${removed.join(", ")}`)
        }).pipe(Effect.catchAllCause((cause) => Effect.logError("scheduled backup failed", cause)))
        yield* FiberHandle.run(armed, Effect.schedule(run, Schedule.spaced(Duration.millis(intervalHours * 3_600_000))))
        yield* Effect.logInfo(`scheduled backups every ${intervalHours} h, keeping ${keep}`)
      })
    yield* Effect.forkScoped(
      settings.changes.pipe(
        Stream.map((doc) => settings.backupSchedule(doc)),
        Stream.changesWith((a, b) => a.intervalHours === b.intervalHours && a.keep === b.keep),
        Stream.runForEach(arm)
      )
    )
  })
)
