import type * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"

/**
 * `Layer.build`, one node after the other in this fiber: each layer built once (memoized by identity,
 * as Effect's MemoMap does), its finalizers on the scope in the order acquired, so they run in reverse.
 * Effect's builder pays a memo-map entry, a deferred, a forked scope and a fiber per node: most of the
 * gateway's start before (docs/performance.md, "2026-11-26: the layers built in one fiber").
 */
export const buildLayer = <ROut, E, RIn>(layer: Layer.Layer<ROut, E, RIn>): Effect.Effect<Context.Context<ROut>, E, RIn | Scope.Scope> =>
  Effect.flatMap(Scope.Scope, (scope) =>
    Effect.flatMap(Effect.context<RIn>(), (env) => build(layer as unknown as Node, env, scope, new Map()))
  ) as Effect.Effect<Context.Context<ROut>, E, RIn | Scope.Scope>

type AnyContext = Context.Context<never>
type Built = Effect.Effect<AnyContext, unknown, never>
/** A layer's node as Effect 3 represents it (effect/internal/layer.js; the version is pinned exactly). */
interface Node {
  readonly _op_layer: string
  readonly effect: Effect.Effect<AnyContext, unknown, never>
  readonly evaluate: () => Node
  readonly first: Node
  readonly second: Node
  readonly layers: ReadonlyArray<Node>
  readonly zipK: (a: AnyContext, b: AnyContext) => AnyContext
  readonly layer: Node
  readonly failureK: (cause: Cause.Cause<unknown>) => Node
  readonly successK: (context: AnyContext) => Node
}

const build = (node: Node, env: AnyContext, scope: Scope.Scope, memo: Map<Node, AnyContext>): Built => {
  const done = memo.get(node)
  if (done !== undefined) return Effect.succeed(done)
  return Effect.tap(buildNode(node, env, scope, memo), (context) => {
    memo.set(node, context)
  })
}

const buildNode = (node: Node, env: AnyContext, scope: Scope.Scope, memo: Map<Node, AnyContext>): Built => {
  switch (node._op_layer) {
    case "FromEffect":
      return Effect.provide(node.effect, env)
    case "Scoped":
      return Effect.provide(node.effect, Context.add(env, Scope.Scope, scope))
    case "Suspend":
      return Effect.suspend(() => build(node.evaluate(), env, scope, memo))
    case "Provide":
      return Effect.flatMap(build(node.first, env, scope, memo), (provided) => build(node.second, provided, scope, memo))
    case "ProvideMerge":
    case "ZipWith":
      return Effect.flatMap(build(node.first, env, scope, memo), (a) =>
        Effect.map(build(node.second, env, scope, memo), (b) => node.zipK(a, b))
      )
    case "Fold":
      // Layer.unwrapEffect, catchAll, orDie, flatMap: what a failed layer acquired is released before its recovery.
      return Effect.flatMap(Scope.fork(scope, ExecutionStrategy.sequential), (inner) =>
        Effect.matchCauseEffect(build(node.layer, env, inner, memo), {
          onFailure: (cause) =>
            Effect.zipRight(
              Scope.close(inner, Exit.failCause(cause)),
              Effect.suspend(() => build(node.failureK(cause), env, scope, memo))
            ),
          onSuccess: (context) => build(node.successK(context), env, scope, memo)
        })
      )
    case "MergeAll":
      return Effect.map(
        Effect.forEach(node.layers, (layer) => build(layer, env, scope, memo)),
        (contexts) => Context.mergeAll(...contexts) as AnyContext
      )
    default:
      // Fresh, Locally, ExtendScope: Effect's own builder, for these rare nodes.
      return Effect.provide(Layer.buildWithScope(node as unknown as Layer.Layer<never, unknown, never>, scope), env)
  }
}

/** The same layer, built by `buildLayer`: for `ManagedRuntime.make` and `Effect.provide`. */
export const sequentialLayer = <ROut, E, RIn>(layer: Layer.Layer<ROut, E, RIn>): Layer.Layer<ROut, E, RIn> =>
  Layer.scopedContext(buildLayer(layer))
