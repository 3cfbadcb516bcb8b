import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Connection } from "../../upstream/providers/Connections.js"
import { ResilienceConfig } from "./ResilienceConfig.js"

export interface ConnectionSlotsShape {
  /**
   * Takes one of a connection's `max_concurrent` slots, waiting in line when all are busy.
   * Fail-open: when the line is full, or the wait times out, the request proceeds without a slot.
   * Answers the function that gives the slot back (a no-op without one).
   */
  readonly acquire: (connection: Connection) => Effect.Effect<() => void>
  /** Busy slots and waiting requests per connection id (status pages, tests). */
  readonly snapshot: () => ReadonlyArray<{ readonly connectionId: string; readonly active: number; readonly waiting: number }>
}

interface Line {
  active: number
  readonly waiting: Array<{ granted: boolean; grant: () => void }>
}

const noop = () => {}

/**
 * Per-connection concurrency limits of quota-share dispatch (spec document 1, "Quota-share
 * concurrency"): a semaphore of `max_concurrent` slots per connection with a bounded wait line.
 * A connection without `max_concurrent` is not limited.
 */
export class ConnectionSlots extends Context.Tag("gateway/ConnectionSlots")<ConnectionSlots, ConnectionSlotsShape>() {
  static readonly layer = Layer.effect(
    ConnectionSlots,
    Effect.gen(function* () {
      const config = yield* ResilienceConfig
      const lines = new Map<string, Line>()

      const releaser = (line: Line) => {
        let done = false
        return () => {
          if (done) return
          done = true
          // Hand the slot to the next in line (it keeps `active` as is), or free it.
          const next = line.waiting.shift()
          if (next) {
            next.granted = true
            next.grant()
          } else line.active--
        }
      }

      const acquire: ConnectionSlotsShape["acquire"] = (connection) =>
        Effect.suspend(() => {
          const settings = config.current().quotaShareConcurrencyLimit
          const max = connection.maxConcurrent
          if (!settings.enabled || !max || max <= 0) return Effect.succeed(noop)
          let line = lines.get(connection.id)
          if (!line) {
            line = { active: 0, waiting: [] }
            lines.set(connection.id, line)
          }
          const l = line
          if (l.active < max) {
            l.active++
            return Effect.succeed(releaser(l))
          }
          if (l.waiting.length >= settings.maxQueue) {
            return Effect.logInfo(
              `${connection.name}: ${l.active} of ${max} slots busy and ${l.waiting.length} waiting; proceeding without a slot`
            ).pipe(Effect.as(noop))
          }
          const wait = Effect.async<() => void>((resume) => {
            const entry = { granted: false, grant: () => resume(Effect.succeed(releaser(l))) }
            l.waiting.push(entry)
            return Effect.sync(() => {
              const i = l.waiting.indexOf(entry)
              if (i >= 0) l.waiting.splice(i, 1)
              // Granted in the same instant the wait was given up: pass the slot on.
              else if (entry.granted) releaser(l)()
            })
          })
          return wait.pipe(
            Effect.timeoutTo({
              duration: Duration.millis(settings.waitTimeoutMs),
              onSuccess: (release) => Effect.succeed(release),
              onTimeout: () =>
                Effect.logInfo(`${connection.name}: no slot within ${settings.waitTimeoutMs} ms; proceeding without one`).pipe(
                  Effect.as(noop)
                )
            }),
            Effect.flatten
          )
        })

      return {
        acquire,
        snapshot: () =>
          Array.from(lines.entries()).map(([connectionId, l]) => ({ connectionId, active: l.active, waiting: l.waiting.length }))
      }
    })
  )
}
