import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Scope from "effect/Scope"
import { describe, expect, it } from "vitest"
import { buildLayer, sequentialLayer } from "../src/platform/system/buildLayer.js"

class A extends Context.Tag("test/A")<A, { readonly n: number }>() {}
class B extends Context.Tag("test/B")<B, { readonly fromA: number }>() {}
class C extends Context.Tag("test/C")<C, { readonly fromA: number }>() {}
class D extends Context.Tag("test/D")<D, { readonly sum: number }>() {}
class E extends Context.Tag("test/E")<E, { readonly port: string }>() {}

/** A graph shaped like the gateway's: areas stacked with provideMerge, mergeAll inside, a shared leaf. */
const graph = (log: Array<string>) => {
  let built = 0
  const a = Layer.scoped(
    A,
    Effect.acquireRelease(
      Effect.sync(() => {
        built += 1
        log.push("acquire A")
        return { n: 2 }
      }),
      () => Effect.sync(() => log.push("release A"))
    )
  )
  const b = Layer.scoped(
    B,
    Effect.flatMap(A, ({ n }) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          log.push("acquire B")
          return { fromA: n * 10 }
        }),
        () => Effect.sync(() => log.push("release B"))
      )
    )
  )
  const c = Layer.effect(
    C,
    Effect.map(A, ({ n }) => ({ fromA: n * 100 }))
  )
  const d = Layer.effect(
    D,
    Effect.gen(function* () {
      return { sum: (yield* B).fromA + (yield* C).fromA }
    })
  )
  // `a` appears twice: provided to b and c separately, then merged under d.
  const layer = d.pipe(Layer.provideMerge(Layer.mergeAll(b.pipe(Layer.provide(a)), c.pipe(Layer.provide(a)))), Layer.provideMerge(a))
  return { layer, builtA: () => built }
}

const read = Effect.gen(function* () {
  return { a: (yield* A).n, b: (yield* B).fromA, c: (yield* C).fromA, d: (yield* D).sum }
})

describe("buildLayer: a layer built node after node in one fiber", () => {
  it("gives the services Layer.build gives, each layer built once however often it appears", async () => {
    const theirs = graph([])
    const ours = graph([])
    const expected = await Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(theirs.layer), (ctx) => Effect.provide(read, ctx))))
    const got = await Effect.runPromise(Effect.scoped(Effect.flatMap(buildLayer(ours.layer), (ctx) => Effect.provide(read, ctx))))
    expect(got).toEqual(expected)
    expect(got).toEqual({ a: 2, b: 20, c: 200, d: 220 })
    expect(theirs.builtA()).toBe(1)
    expect(ours.builtA()).toBe(1)
  })

  it("releases in the reverse order of acquisition when its scope closes", async () => {
    const log: Array<string> = []
    const { layer } = graph(log)
    const scope = await Effect.runPromise(Scope.make())
    await Effect.runPromise(Scope.extend(buildLayer(layer), scope))
    expect(log).toEqual(["acquire A", "acquire B"])
    await Effect.runPromise(Scope.close(scope, Exit.void))
    expect(log).toEqual(["acquire A", "acquire B", "release B", "release A"])
  })

  it("stops at a failing layer and releases what it had acquired", async () => {
    const log: Array<string> = []
    const failing = Layer.effect(E, Effect.fail("no port" as const))
    const { layer } = graph(log)
    const exit = await Effect.runPromiseExit(Effect.scoped(buildLayer(failing.pipe(Layer.provideMerge(layer)))))
    expect(Exit.isFailure(exit) && String(exit.cause)).toContain("no port")
    expect(log).toEqual(["acquire A", "acquire B", "release B", "release A"])
  })

  it("lets a layer that sets a fiber ref (the config provider) reach the layers built after it", async () => {
    const e = Layer.effect(
      E,
      Effect.map(Config.string("PORT"), (port) => ({ port }))
    )
    const layer = e.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PORT", "20128"]])))))
    const runtime = ManagedRuntime.make(sequentialLayer(layer))
    try {
      expect(await runtime.runPromise(E)).toEqual({ port: "20128" })
    } finally {
      await runtime.dispose()
    }
  })

  it("unwraps a layer made by an effect, and releases what a failed layer acquired before its recovery runs", async () => {
    const log: Array<string> = []
    const unwrapped = Layer.unwrapEffect(Effect.succeed(Layer.succeed(E, { port: "1" })))
    const halfBuilt = Layer.effect(
      C,
      Effect.flatMap(A, () => Effect.fail("down" as const))
    ).pipe(
      Layer.provideMerge(
        Layer.scoped(
          A,
          Effect.acquireRelease(
            Effect.sync(() => {
              log.push("acquire A")
              return { n: 1 }
            }),
            () => Effect.sync(() => log.push("release A"))
          )
        )
      ),
      Layer.catchAll((e) => {
        log.push(`recover from ${e}`)
        return Layer.succeed(C, { fromA: -1 })
      })
    )
    const layer = Layer.merge(unwrapped, halfBuilt)
    const theirs = await Effect.runPromise(
      Effect.scoped(Effect.flatMap(Layer.build(layer), (ctx) => Effect.provide(Effect.all([E, C]), ctx)))
    )
    const theirLog = log.splice(0)
    const got = await Effect.runPromise(Effect.scoped(Effect.flatMap(buildLayer(layer), (ctx) => Effect.provide(Effect.all([E, C]), ctx))))
    expect(got).toEqual([{ port: "1" }, { fromA: -1 }])
    expect(got).toEqual(theirs)
    expect(log).toEqual(["acquire A", "release A", "recover from down"])
    expect(log).toEqual(theirLog)
  })

  it("builds the nodes it does not walk itself (fresh) with Effect's own builder", async () => {
    let built = 0
    const a = Layer.sync(A, () => {
      built += 1
      return { n: built }
    })
    const layer = Layer.merge(
      Layer.fresh(a),
      Layer.effect(
        B,
        Effect.map(A, ({ n }) => ({ fromA: n }))
      ).pipe(Layer.provide(a))
    )
    const got = await Effect.runPromise(Effect.scoped(Effect.flatMap(buildLayer(layer), (ctx) => Effect.provide(B, ctx))))
    expect(built).toBe(2)
    expect(got.fromA).toBeGreaterThan(0)
  })
})
