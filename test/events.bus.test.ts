import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import { EventBus, type GatewayEvent } from "../src/platform/events/EventBus.js"

describe("EventBus", () => {
  it.scoped("a listener gets every event synchronously, in order, beside the subscriptions", () =>
    Effect.gen(function* () {
      const bus = yield* EventBus
      const seen: Array<GatewayEvent> = []
      yield* bus.listen((e) => seen.push(e))
      const q = yield* bus.subscribe
      bus.publish("request.completed", { n: 1 })
      bus.publish("guardrail.action", { n: 2 })
      // Synchronous: both are there before anything yields.
      expect(seen.map((e) => [e.event, e.data["n"]])).toEqual([
        ["request.completed", 1],
        ["guardrail.action", 2]
      ])
      expect(Number.isNaN(Date.parse(seen[0]!.timestamp))).toBe(false)
      const taken = yield* Queue.takeN(q, 2)
      expect([...taken].map((e) => e.data["n"])).toEqual([1, 2])
    }).pipe(Effect.provide(EventBus.layer))
  )

  it.scoped("a listener stops when its scope closes; one that throws stops neither the publisher nor the others", () =>
    Effect.gen(function* () {
      const bus = yield* EventBus
      const first: Array<unknown> = []
      const last: Array<unknown> = []
      const scope = yield* Scope.make()
      yield* bus.listen((e) => first.push(e.data["n"])).pipe(Scope.extend(scope))
      yield* bus.listen(() => {
        throw new Error("listener bug")
      })
      yield* bus.listen((e) => last.push(e.data["n"]))
      bus.publish("test.ping", { n: 1 })
      yield* Scope.close(scope, Exit.void)
      bus.publish("test.ping", { n: 2 })
      expect(first).toEqual([1])
      expect(last).toEqual([1, 2])
    }).pipe(Effect.provide(EventBus.layer))
  )
})
